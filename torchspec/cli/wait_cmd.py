"""``torchspec wait``: block until an app ends, showing its status meanwhile, and exit with how it ended."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any, TextIO

import click

from torchspec.cli.apps_cmd import EXIT_TIMEOUT, app_exit_code, open_runner, require_status

if TYPE_CHECKING:
    from torchspec.runner import Runner
    from torchspec.specs import AppStatus

#: First and longest pause between two status polls, in seconds: quick to notice a short job ending,
#: without hammering a remote scheduler for a long one.
FIRST_POLL_S = 0.2
MAX_POLL_S = 2.0


def watch(runner: "Runner", handle: str, timeout: float | None = None, out: TextIO | None = None,
          live: bool | None = None, quiet: bool = False) -> "tuple[AppStatus, bool]":
    """Poll the app until it is terminal or ``timeout`` seconds pass; return (last status, ended).

    On a terminal (and without NO_COLOR) a rich Live table shows every
    replica's state; elsewhere one line is printed per change of the app's
    state or restart count, so logs of CI jobs stay short and readable.
    ``quiet`` prints nothing (``submit --log`` has shown the logs already).
    """
    from torchspec.cli import console

    out = out or sys.stderr
    live = not quiet and (console.use_color(out) if live is None else live)
    deadline = None if timeout is None else time.monotonic() + timeout
    status = require_status(runner, handle)
    if live:
        return _watch_live(runner, handle, status, deadline, out)
    last: tuple[str, int] | None = None
    delay = FIRST_POLL_S
    while True:
        seen = (str(status.state), status.num_restarts)
        if seen != last and not quiet:
            restarts = f" (restarts: {status.num_restarts})" if status.num_restarts else ""
            print(f"{time.strftime('%H:%M:%S')} {handle} {seen[0]}{restarts}", file=out, flush=True)
            last = seen
        if status.is_terminal():
            return status, True
        if deadline is not None and time.monotonic() >= deadline:
            return status, False
        time.sleep(delay if deadline is None else max(0.0, min(delay, deadline - time.monotonic())))
        delay = min(delay * 1.5, MAX_POLL_S)
        status = _poll(runner, handle, status)


def _poll(runner: "Runner", handle: str, previous: "AppStatus") -> "AppStatus":
    """The next status.

    An app that vanished while we watched was removed on purpose: ``cancel``
    on docker and kubernetes removes what it stopped, ``delete`` removes any
    app. Waiting on would never end, so it counts as CANCELLED, and the
    message says why.
    """
    status = runner.status(handle)
    if status is None:
        from torchspec.specs import AppState, AppStatus

        return AppStatus(AppState.CANCELLED, previous.num_restarts,
                         msg="the app no longer exists: it was cancelled or deleted, and the scheduler removed it")
    return status


def _watch_live(runner: "Runner", handle: str, status: "AppStatus", deadline: float | None,
                out: TextIO) -> "tuple[AppStatus, bool]":
    from rich.console import Console, Group
    from rich.live import Live
    from rich.table import Table
    from rich.text import Text

    from torchspec.cli import console
    from torchspec.cli.status_cmd import STATUS_HEADERS, replica_row

    def render(s: "AppStatus") -> Any:
        header = Text.assemble((handle, "bold"), "  ", (str(s.state), console.STATE_STYLES.get(str(s.state), "")),
                               f"  restarts: {s.num_restarts}")
        table = Table(box=None, header_style="bold", pad_edge=False)
        for h in STATUS_HEADERS:
            table.add_column(h, overflow="fold")
        for role in s.roles:
            for r in sorted(role.replicas, key=lambda r: r.id):
                row = [console._printable(c) for c in replica_row(s, r)]
                table.add_row(*(Text(c, style=console.STATE_STYLES.get(c, "") if i == 2 else "")
                                for i, c in enumerate(row)))
        return Group(header, table)

    delay = FIRST_POLL_S
    with Live(render(status), console=Console(file=out), refresh_per_second=4, transient=False) as display:
        while not status.is_terminal():
            if deadline is not None and time.monotonic() >= deadline:
                return status, False
            time.sleep(delay if deadline is None else max(0.0, min(delay, deadline - time.monotonic())))
            delay = min(delay * 1.5, MAX_POLL_S)
            status = _poll(runner, handle, status)
            display.update(render(status))
    return status, True


@click.command()
@click.argument("handle")
@click.option("--timeout", type=click.FloatRange(min=0), metavar="SECONDS",
              help="Give up after this many seconds (exit 124; the app keeps running).")
def wait(handle: str, timeout: float | None) -> int:
    """Wait for an app to end and exit with a code that says how it ended.

    While waiting, a live table of the replicas is shown on a terminal;
    otherwise each change of state is printed (on stderr). The final state is
    printed on stdout.

    Exit codes: 0 the app SUCCEEDED, 2 malformed or unknown handle or unknown
    scheduler, 4 the app FAILED, 5 the app was CANCELLED (or removed while
    waiting: a cancel on docker or kubernetes removes the app), 6 the
    scheduler's backend cannot be reached, 124 --timeout passed first.
    """
    with open_runner() as runner:
        status, ended = watch(runner, handle, timeout)
    if not ended:
        print(f"timed out after {timeout:g}s; {handle} is still {status.state}", file=sys.stderr)
        return EXIT_TIMEOUT
    if status.msg and str(status.state) != "SUCCEEDED":
        print(f"{handle}: {status.msg}", file=sys.stderr)
    click.echo(str(status.state))
    return app_exit_code(status.state)

