"""``torchspec events``: why an app is where it is, from its engine, newest last (``-f`` follows)."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, TextIO

import click

from torchspec.cli.apps_cmd import following, open_runner
from torchspec.cli.options import output_option
from torchspec.exit_codes import ExitCode

if TYPE_CHECKING:
    from torchspec.schedulers.api import AppEvent


@click.command()
@click.argument("handle")
@click.argument("replica", required=False, metavar="[ROLE[/REPLICA]]")
@click.option("-f", "--follow", is_flag=True, help="Go on printing events as they come until the app ends.")
@output_option(("text", "json"), "text (one line an event: time, replica, reason, message, source) or json"
                                 " (a list of {time, source, reason, message, warning, role, replica}; with -f,"
                                 " one object a line).", json_flag=True)
def events(handle: str, replica: str | None, follow: bool, fmt: str) -> int:
    """Show what the engine recorded about an app: why it is pending, where
    each replica was placed, when it started, how it exited, what evicted,
    OOM-killed or preempted it.

    Kubernetes: the Events of the app's objects and pods (and Kueue's
    Workload). Docker: the containers' events and state (OOM kills, exit
    codes, restarts). Slurm: each job's state, its reason and its times.
    Ray: the job and its driver's record (placement, starts, restarts).
    Local: the supervisor's record.

    `ROLE` or `ROLE/REPLICA` keeps that role's (or replica's) events and the
    app's own. Times are UTC.

    Exit codes: 0 ok (whatever the app's state), 2 malformed or unknown
    handle, role or replica, or a scheduler that cannot say, 6 the
    scheduler's backend cannot be reached.
    """
    from torchspec.runner.events import app_events, follow as follow_events

    with open_runner() as runner:
        handle = runner.resolve_handle(handle)
        if not follow:
            found = app_events(runner, handle, replica)
            if fmt == "json":
                click.echo(json.dumps([event.to_json() for event in found], indent=2))
            else:
                print_events(found, sys.stdout)
            return ExitCode.OK
        with following(handle):
            for event in follow_events(runner, handle, replica):
                if fmt == "json":
                    click.echo(json.dumps(event.to_json()))
                else:
                    print_events([event], sys.stdout)
    return ExitCode.OK


def print_events(found: "list[AppEvent]", out: TextIO) -> None:
    """One line an event; a warning's reason in red where the output is a terminal."""
    from torchspec.cli import console

    color = console.use_color(out)
    for event in found:
        when = (event.time.strftime("%Y-%m-%dT%H:%M:%S.") + f"{event.time.microsecond // 1000:03d}Z"
                if event.time else "-")
        who = "app" if event.role is None else event.role if event.replica is None else f"{event.role}/{event.replica}"
        reason = f"{event.reason:<14}"
        if color and event.warning:
            reason = f"\x1b[31m{reason}\x1b[0m"
        out.write(f"{when}  {who:<12} {reason} {event.message}  ({event.source})\n")
    out.flush()
