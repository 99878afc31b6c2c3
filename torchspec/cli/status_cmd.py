"""``torchspec status``: where an app is, one row per replica."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from torchspec.cli.apps_cmd import dump_json, open_runner
from torchspec.cli.options import output_option
from torchspec.exit_codes import ExitCode

if TYPE_CHECKING:
    from torchspec.specs import AppStatus


@click.command()
@click.argument("handle", required=False)
@output_option(("text", "json"), "text (a table) or json ({app_handle, state, num_restarts, msg, roles: [{role, "
                                 "replicas: [...]}]}; a list of them with --sweep).", json_flag=True)
@click.option("-r", "--role", "roles", multiple=True, metavar="ROLE", help="Only these roles (repeatable).")
@click.option("--sweep", metavar="ID", help="Every app of this sweep instead of one app (submit --sweep prints it).")
@click.option("-s", "--scheduler", "scheduler", multiple=True, metavar="SCHEDULER",
              help="With --sweep: the scheduler it was submitted to (default: the configured one); repeatable.")
def status(handle: str | None, fmt: str, roles: tuple[str, ...], sweep: str | None, scheduler: tuple[str, ...]
           ) -> int:
    """Show the state of an app and of each replica of each role.

    The table gives each replica's state, exit code, restarts, host and the
    error message it left, if any. `--sweep ID` shows every app of a sweep,
    one table each.

    Exit codes: 0 ok (whatever the app's state), 2 malformed or unknown
    handle, or unknown scheduler, 6 the scheduler's backend cannot be
    reached. Use `torchspec wait` for an exit code that
    says how the app ended.
    """
    from torchspec.cli import console
    from torchspec.errors import UsageError
    from torchspec.runner.selection import sweep_handles

    if (handle is None) == (sweep is None) or (scheduler and not sweep):
        raise UsageError("status: name one app by its handle, or a sweep with --sweep ID (and -s)")
    with open_runner() as runner:
        handles = [runner.resolve_handle(handle)] if handle else sweep_handles(runner, str(sweep), scheduler)
        found = [(h, runner.require_status(h), runner.provenance(h) if fmt == "json" else None) for h in handles]
    if fmt == "json":
        data = [{**status_json(h, s, list(roles) or None), "provenance": p} for h, s, p in found]
        dump_json(data if sweep else data[0])
        return ExitCode.OK
    for number, (h, app_status, _) in enumerate(found):
        if number:
            print()
        console.print_status(h, app_status, list(roles) or None)
    return ExitCode.OK


def status_json(handle: str, app_status: "AppStatus", roles: list[str] | None = None) -> dict[str, Any]:
    """The library's ``AppStatus.to_json`` with the handle added and replica states as names, not ints.

    Names because the JSON is read by people and ``jq`` scripts alike, and the
    app-level state is already a name there.
    """
    data: dict[str, Any] = {"app_handle": handle}
    data.update(app_status.to_json(roles))
    for role in data["roles"]:
        for replica in role["replicas"]:
            state = replica.get("state")
            if isinstance(state, int):
                from torchspec.specs import AppState

                replica["state"] = str(AppState(state))
    return data
