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
@click.argument("handle")
@output_option(("text", "json"), "text (a table) or json ({app_handle, state, num_restarts, msg, roles: [{role, "
                                 "replicas: [...]}]}).", json_flag=True)
@click.option("-r", "--role", "roles", multiple=True, metavar="ROLE", help="Only these roles (repeatable).")
def status(handle: str, fmt: str, roles: tuple[str, ...]) -> int:
    """Show the state of an app and of each replica of each role.

    The table gives each replica's state, exit code, restarts, host and the
    error message it left, if any.

    Exit codes: 0 ok (whatever the app's state), 2 malformed or unknown
    handle, or unknown scheduler, 6 the scheduler's backend cannot be
    reached. Use `torchspec wait` for an exit code that
    says how the app ended.
    """
    from torchspec.cli import console

    with open_runner() as runner:
        handle = runner.resolve_handle(handle)
        app_status = runner.require_status(handle)
        recorded = runner.provenance(handle) if fmt == "json" else None
    if fmt == "json":
        dump_json({**status_json(handle, app_status, list(roles) or None), "provenance": recorded})
        return ExitCode.OK
    console.print_status(handle, app_status, list(roles) or None)
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
