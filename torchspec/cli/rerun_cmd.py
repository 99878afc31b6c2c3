"""``torchspec rerun``: submit again exactly what an app was submitted with (:mod:`torchspec.runner.rerun`)."""

from __future__ import annotations

import os
import sys

import click

from torchspec.cli.apps_cmd import open_runner
from torchspec.exit_codes import ExitCode


@click.command()
@click.argument("handle")
@click.option("-s", "--scheduler", metavar="SCHEDULER", help="Where to run it (default: where it ran).")
@click.option("-c", "--cfg", "cfg", metavar="KEY=VALUE,...",
              help="Run options over the recorded ones (on another scheduler, over its defaults).")
@click.option("--from-file", is_flag=True,
              help="Submit today's file (with the recorded params) instead of the recorded spec.")
def rerun(handle: str, scheduler: str | None, cfg: str | None, from_file: bool) -> int:
    """Submit the spec an app was submitted with again, exactly, and print the new handle.

    The spec comes from the app's provenance record on this machine, not from
    today's file: if the file has changed since, rerun says which fields
    differ (and --from-file submits today's file instead). Values the spec
    read with env() are never recorded: they are read from the environment
    again.

    Exit codes: 0 submitted, 2 usage error (no record of the app on this
    machine, a variable env() read is not set, unknown scheduler, bad -c),
    6 the scheduler's backend cannot be reached or refused the app.
    """
    from torchspec.runner.rerun import rerun as rerun_app

    with open_runner() as runner:
        handle = runner.resolve_handle(handle)
        name = runner.check_scheduler(scheduler) if scheduler else None
        options = runner.run_options(name or handle.split("://", 1)[0], cfg) if cfg else None
        done = rerun_app(runner, handle, name, options, from_file=from_file)
    file = _shown_path(done.file)
    if done.file_state == "changed":
        what = ", ".join(done.changed[:8]) + (f" and {len(done.changed) - 8} more" if len(done.changed) > 8 else "")
        ran = "today's file" if done.from_file else f"the spec {handle} ran (--from-file runs today's)"
        print(f"{file} has changed since {handle} was submitted: {what}; submitted {ran}", file=sys.stderr)
    elif done.file_state == "missing":
        print(f"{file} is gone since {handle} was submitted; submitted the spec it ran", file=sys.stderr)
    click.echo(done.handle)
    return ExitCode.OK


def _shown_path(path: str | None) -> str | None:
    """``path`` relative to the working folder where it is under it (as the user typed it), else whole."""
    if not path:
        return path
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative
