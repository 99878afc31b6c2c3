"""``torchspec wait``: block until an app ends, showing its status meanwhile, and exit with how it ended.

The rules of waiting (how often to poll, what a vanished app means) are
:meth:`torchspec.runner.Runner.wait`'s; this module only shows the statuses
it reports.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, TextIO

import click

from torchspec.cli.apps_cmd import following, open_runner
from torchspec.errors import UsageError
from torchspec.exit_codes import ExitCode, for_app_state

if TYPE_CHECKING:
    from torchspec.runner import Runner
    from torchspec.specs import AppStatus

#: The longest pause between two status polls, in seconds: a long job is not polled more often than this.
MAX_POLL_S = 2.0


def watch(runner: "Runner", handle: str, timeout: float | None = None, out: TextIO | None = None,
          live: bool | None = None, quiet: bool = False) -> "tuple[AppStatus, bool]":
    """Wait for the app until it is terminal or ``timeout`` seconds pass; return (last status, ended).

    On a terminal (and without NO_COLOR) a live table shows every replica's
    state; elsewhere one line is printed per change of the app's state or
    restart count.  ``quiet`` prints nothing (``submit --log`` has shown the
    logs already).
    """
    from torchspec.cli import console
    from torchspec.specs import UnknownAppException

    out = out or sys.stderr
    live = not quiet and (console.use_color(out) if live is None else live)
    with console.status_view(handle, out, live=live, quiet=quiet) as show:
        status = runner.wait(handle, wait_interval=MAX_POLL_S, timeout=timeout, on_change=show)
    if status is None:
        raise UnknownAppException(handle)
    return status, status.is_terminal()


@click.command()
@click.argument("handles", nargs=-1, metavar="[HANDLE]...")
@click.option("--sweep", metavar="ID", help="Wait for every app of this sweep (submit --sweep prints its id).")
@click.option("-s", "--scheduler", "scheduler", multiple=True, metavar="SCHEDULER",
              help="With --sweep: the scheduler it was submitted to (default: the configured one); repeatable.")
@click.option("--timeout", type=click.FloatRange(min=0), metavar="SECONDS",
              help="Give up after this many seconds (exit 124; the apps keep running).")
def wait(handles: tuple[str, ...], sweep: str | None, scheduler: tuple[str, ...], timeout: float | None) -> int:
    """Wait for an app to end and exit with a code that says how it ended.

    While waiting, a live table of the replicas is shown on a terminal;
    otherwise each change of state is printed (on stderr). The final state is
    printed on stdout.

    Several handles, or `--sweep ID`, wait for every one of those apps to
    end; stdout then has a `HANDLE STATE` line per app, and the exit code is
    0 when all SUCCEEDED, else 4 when one FAILED, else 5.

    Exit codes: 0 the app SUCCEEDED, 2 malformed or unknown handle or unknown
    scheduler, 4 the app FAILED, 5 the app was CANCELLED (or removed while
    waiting: a cancel on docker or kubernetes removes the app), 6 the
    scheduler's backend cannot be reached, 124 --timeout passed first.
    """
    if handles and (sweep or scheduler):
        raise UsageError("wait: name apps by handle or by --sweep, not both")
    if not handles and not sweep:
        raise UsageError("wait: name the app: a handle, several, or --sweep ID")
    if len(handles) == 1:
        return _wait_one(handles[0], timeout)
    return _wait_many(handles, sweep, scheduler, timeout)


def _wait_one(handle: str, timeout: float | None) -> int:
    with open_runner() as runner:
        handle = runner.resolve_handle(handle)
        with following(handle):
            status, ended = watch(runner, handle, timeout)
    if not ended:
        print(f"timed out after {timeout:g}s; {handle} is still {status.state}", file=sys.stderr)
        return ExitCode.TIMEOUT
    if status.msg and str(status.state) != "SUCCEEDED":
        print(f"{handle}: {status.msg}", file=sys.stderr)
    click.echo(str(status.state))
    return for_app_state(status.state)


def _wait_many(handles: tuple[str, ...], sweep: str | None, schedulers: tuple[str, ...],
               timeout: float | None) -> int:
    """Each app in turn, under one deadline (all must end, so the order does not change when this returns)."""
    import time

    from torchspec.runner.selection import sweep_handles

    deadline = None if timeout is None else time.monotonic() + timeout
    with open_runner() as runner:
        if sweep:
            handles = tuple(sweep_handles(runner, sweep, schedulers))
        ends = []
        for text in handles:
            handle = runner.resolve_handle(text)
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            with following(handle):
                status, ended = watch(runner, handle, left, quiet=True)
            if not ended:
                print(f"timed out after {timeout:g}s; {handle} is still {status.state}", file=sys.stderr)
                return ExitCode.TIMEOUT
            click.echo(f"{handle} {status.state}")
            ends.append(for_app_state(status.state))
    return max(ends, key=lambda code: (code != ExitCode.OK, code == ExitCode.APP_FAILED))
