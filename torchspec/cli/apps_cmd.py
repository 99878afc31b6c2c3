"""``torchspec list``, ``describe`` and ``cancel``, and the plumbing every app lifecycle command shares.

The shared part exists so that each command stays a thin layer over
:class:`torchspec.runner.Runner` and so that every command turns the same
failure into the same message and exit code: a malformed or unknown handle,
an unknown scheduler (with a did-you-mean) are usage errors (exit 2), never
tracebacks; an app's final state becomes the exit code of ``wait`` and
``submit --wait/--log`` (0 SUCCEEDED, 4 FAILED, 5 CANCELLED).
"""

from __future__ import annotations

import contextlib
import json
import sys
from typing import TYPE_CHECKING, Any, Iterator

import click

from torchspec.errors import UsageError

if TYPE_CHECKING:
    from torchspec.runner import Runner
    from torchspec.specs import AppState, AppStatus

EXIT_OK = 0
EXIT_SPEC_ERROR = 1
EXIT_USAGE = 2
EXIT_APP_FAILED = 4
EXIT_APP_CANCELLED = 5
#: ``wait --timeout`` ran out while the app was still going (the code of timeout(1))
EXIT_TIMEOUT = 124

HANDLE_HINT = "an app handle looks like local://SESSION/APP_ID, as printed by `torchspec submit`"


def app_exit_code(state: "AppState | None") -> int:
    """The exit code that says how an app ended, so shell scripts can branch on ``torchspec wait``."""
    name = str(state) if state is not None else "UNKNOWN"
    return {"SUCCEEDED": EXIT_OK, "CANCELLED": EXIT_APP_CANCELLED}.get(name, EXIT_APP_FAILED)


@contextlib.contextmanager
def open_runner() -> Iterator["Runner"]:
    """A runner for one command, closed on the way out, with scheduler errors turned into usage errors."""
    from torchspec.runner import get_runner

    runner = get_runner()
    try:
        with translate_errors(runner):
            yield runner
    finally:
        close = getattr(runner, "close", None)
        if close is not None:
            close()


@contextlib.contextmanager
def translate_errors(runner: "Runner | None" = None) -> Iterator[None]:
    """Turn the runner's TorchX-style exceptions into one clear :class:`UsageError`.

    The commands check handles and scheduler names up front (with better
    messages); this is the backstop for whatever the runner raises later.
    """
    from torchspec import specs

    try:
        yield
    except specs.MalformedAppHandleException as e:
        raise UsageError(str(e), HANDLE_HINT) from None
    except specs.UnknownSchedulerException as e:
        raise UsageError(str(e).split(". Use ")[0]) from None
    except specs.UnknownAppException as e:
        raise UsageError(str(e).split(". ")[0], "list the apps with: torchspec list") from None
    except specs.InvalidRunConfigException as e:
        raise UsageError(f"invalid run option: {e}", "see the options with: torchspec runopts SCHEDULER") from None


def check_scheduler(runner: "Runner", name: str) -> str:
    """``name`` if a scheduler of that name is registered, else a usage error with a did-you-mean."""
    backends = list(runner.scheduler_backends())
    if name in backends:
        return name
    import difflib

    guess = difflib.get_close_matches(name, backends, n=1)
    hint = f"did you mean {guess[0]!r}?" if guess else None
    if not guess:
        hint = ("registered schedulers: " + ", ".join(sorted(backends))) if backends else "no scheduler is installed"
    raise UsageError(f"unknown scheduler {name!r}", hint)


def check_handle(runner: "Runner", handle: str) -> str:
    """The handle, once it parses and names a registered scheduler (the app itself may still be unknown)."""
    from torchspec import specs

    try:
        parsed = specs.parse_app_handle(handle)
    except specs.MalformedAppHandleException:
        raise UsageError(f"malformed app handle {handle!r}", HANDLE_HINT) from None
    check_scheduler(runner, parsed.scheduler_backend)
    return handle


def require_status(runner: "Runner", handle: str) -> "AppStatus":
    """The app's status; an app the scheduler does not know is a usage error, not an empty result."""
    check_handle(runner, handle)
    status = runner.status(handle)
    if status is None:
        raise UsageError(f"unknown app {handle!r}: the scheduler has no record of it",
                         "list the apps with: torchspec list -s " + handle.split("://", 1)[0])
    return status


def dump_json(data: Any) -> None:
    """JSON on stdout, stable key order as given, for scripts (``jq``) rather than people."""
    click.echo(json.dumps(data, indent=2, default=str))


# --- commands ----------------------------------------------------------------------------------------------------


@click.command("list")
@click.option("-s", "--scheduler", metavar="SCHEDULER",
              help="Scheduler to ask (default: the configured one, else local).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON: a list of {app_handle, app_id, state}.")
def list_apps(scheduler: str | None, as_json: bool) -> int:
    """List the apps a scheduler knows about, newest last.

    Exit codes: 0 ok, 2 unknown scheduler, 6 the scheduler's backend cannot be reached.
    """
    from torchspec.cli import console

    with open_runner() as runner:
        name = check_scheduler(runner, scheduler or runner.default_scheduler())
        apps = list(runner.list(name))
    # ``name`` only where the scheduler reports one (TorchX's ListAppResponse has none; some backends add it)
    rows: list[dict[str, str]] = []
    for a in apps:
        rows.append({"app_handle": a.app_handle, "app_id": a.app_id, "state": str(a.state)})
        app_name = getattr(a, "name", "")
        if app_name:
            rows[-1]["name"] = str(app_name)
    if as_json:
        dump_json(rows)
        return EXIT_OK
    if not rows:
        print(f"no apps on {name}", file=sys.stderr)
        return EXIT_OK
    headers = ["APP_HANDLE", "STATE"] + (["NAME"] if any("name" in r for r in rows) else [])
    console.table(headers, [[str(r.get(h.lower(), "")) for h in headers] for r in rows])
    return EXIT_OK


@click.command()
@click.argument("handle")
@click.option("--json", "as_json", is_flag=True, help="Print the AppDef as JSON (the shape of a spec file).")
def describe(handle: str, as_json: bool) -> int:
    """Show the AppDef that an app was submitted with, as a spec (YAML, or JSON with --json).

    Exit codes: 0 ok, 2 malformed or unknown handle, or unknown scheduler,
    6 the scheduler's backend cannot be reached.
    """
    from torchspec.convert import dump_app

    with open_runner() as runner:
        check_handle(runner, handle)
        app = runner.describe(handle)
    if app is None:
        raise UsageError(f"unknown app {handle!r}: the scheduler cannot describe it",
                         "list the apps with: torchspec list -s " + handle.split("://", 1)[0])
    data = dump_app(app)
    if as_json:
        dump_json(data)
        return EXIT_OK
    import yaml

    from torchspec.cli import console

    console.highlighted(yaml.safe_dump(data, sort_keys=False, default_flow_style=False, width=1000).rstrip(), "yaml")
    return EXIT_OK


@click.command()
@click.argument("handle")
def cancel(handle: str) -> int:
    """Cancel an app: stop every replica and the processes they started.

    Returns once the scheduler has been told; `torchspec wait HANDLE` waits
    for the app to end (it then exits 5, CANCELLED). Cancelling an app that
    already ended does nothing.

    Exit codes: 0 ok, 2 malformed or unknown handle, or unknown scheduler,
    6 the scheduler's backend cannot be reached.
    """
    with open_runner() as runner:
        status = require_status(runner, handle)
        if status.is_terminal():
            print(f"{handle} already ended: {status.state}", file=sys.stderr)
            return EXIT_OK
        runner.cancel(handle)
    print(f"cancelled {handle}", file=sys.stderr)
    return EXIT_OK


@click.command()
@click.argument("handle")
def delete(handle: str) -> int:
    """Remove an app: cancel it if it runs, then delete what the scheduler keeps of it.

    On docker that is the app's containers (with their logs) and its
    network (volumes are never removed); on local, the app's folder.

    Exit codes: 0 ok, 2 malformed or unknown handle, unknown scheduler, or a
    scheduler that cannot delete apps, 6 the scheduler's backend cannot be
    reached or could not stop the app.
    """
    with open_runner() as runner:
        require_status(runner, handle)
        try:
            runner.delete(handle)
        except NotImplementedError:
            raise UsageError(f"the {handle.split('://', 1)[0]} scheduler cannot delete apps",
                             f"stop it with: torchspec cancel {handle}") from None
    print(f"deleted {handle}", file=sys.stderr)
    return EXIT_OK
