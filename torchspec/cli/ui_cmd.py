"""``torchspec ui``: serve the dashboard (:mod:`torchspec.ui`) on this machine and print its URL with the token."""

from __future__ import annotations

import socket
import sys
import threading

import click

from torchspec.exit_codes import ExitCode


@click.command()
@click.option("-s", "--scheduler", "scheduler", multiple=True, metavar="SCHEDULER",
              help="A scheduler whose apps to show (repeatable; default: local and the configured default).")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="The address to listen on. Anything but a loopback address lets other machines try the token.")
@click.option("--port", type=click.IntRange(0, 65535), default=0, show_default=True,
              help="The port to listen on; 0 picks a free one.")
@click.option("--allow-actions", is_flag=True, help="Show cancel and rerun buttons (off by default: read only).")
@click.option("--no-browser", is_flag=True, help="Do not open a browser; only print the URL.")
def ui(scheduler: tuple[str, ...], host: str, port: int, allow_actions: bool, no_browser: bool) -> int:
    """Serve a local web dashboard: the apps of the schedulers, each app's replicas, spec and live logs.

    Prints the URL to open, with a token new at every start: the dashboard
    answers only requests that carry it (then a cookie). Ctrl-C stops it.
    Needs the ui extra: pip install 'torchspec-cli[ui]'.

    Exit codes: 0 stopped, 2 usage error (unknown scheduler, the ui extra
    missing, the port taken).
    """
    try:
        import uvicorn

        from torchspec.ui import create_app, new_token
    except ImportError as e:
        from torchspec.errors import MissingExtraError

        raise MissingExtraError(f"torchspec ui needs {e.name}, which is not installed", "ui") from None
    from torchspec.runner import get_runner

    with get_runner() as runner:
        names = [runner.check_scheduler(name) for name in scheduler] or _default_schedulers(runner)
    token = new_token()
    sock = _listen(host, port)
    url = f"http://{_url_host(host)}:{sock.getsockname()[1]}/?token={token}"
    app = create_app(get_runner, list(dict.fromkeys(names)), token, allow_actions, host)
    click.echo(f"torchspec ui: the apps of {', '.join(dict.fromkeys(names))}; open\n    {url}", err=True)
    click.echo(url)
    sys.stdout.flush()
    if not no_browser:
        import webbrowser

        threading.Timer(0.5, webbrowser.open, (url,)).start()
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    server.run(sockets=[sock])
    return ExitCode.OK


def _default_schedulers(runner: object) -> list[str]:
    """local, and the configured default scheduler where it is another."""
    names = ["local"] if "local" in runner.scheduler_backends() else []  # type: ignore[attr-defined]
    return list(dict.fromkeys(names + [runner.default_scheduler()]))  # type: ignore[attr-defined]


def _listen(host: str, port: int) -> socket.socket:
    """A socket bound before the server starts, so the URL printed has the port the system picked."""
    from torchspec.errors import UsageError

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as e:
        sock.close()
        raise UsageError(f"cannot listen on {host}:{port}: {e.strerror or e}",
                         "pick another --port, or 0 for any free one") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def _url_host(host: str) -> str:
    if host in ("0.0.0.0", "::", ""):
        return "127.0.0.1"
    return f"[{host}]" if ":" in host and not host.startswith("[") else host
