"""``torchspec status``: where an app is, one row per replica."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from torchspec.cli.apps_cmd import EXIT_OK, dump_json, open_runner, require_status

if TYPE_CHECKING:
    from torchspec.specs import AppStatus, ReplicaStatus

STATUS_HEADERS = ["ROLE", "REPLICA", "STATE", "EXIT", "RESTARTS", "HOST", "MESSAGE"]


@click.command()
@click.argument("handle")
@click.option("--json", "as_json", is_flag=True,
              help="Print JSON: {app_handle, state, num_restarts, msg, roles: [{role, replicas: [...]}]}.")
@click.option("-r", "--role", "roles", multiple=True, metavar="ROLE", help="Only these roles (repeatable).")
def status(handle: str, as_json: bool, roles: tuple[str, ...]) -> int:
    """Show the state of an app and of each replica of each role.

    The table gives each replica's state, exit code, restarts, host and the
    error message it left, if any.

    Exit codes: 0 ok (whatever the app's state), 2 malformed or unknown
    handle, or unknown scheduler, 6 the scheduler's backend cannot be
    reached. Use `torchspec wait` for an exit code that
    says how the app ended.
    """
    with open_runner() as runner:
        app_status = require_status(runner, handle)
    if as_json:
        dump_json(status_json(handle, app_status, list(roles) or None))
        return EXIT_OK
    print_status(handle, app_status, list(roles) or None)
    return EXIT_OK


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


def print_status(handle: str, app_status: "AppStatus", roles: list[str] | None = None) -> None:
    """A header with the app's state, then the replica table."""
    from torchspec.cli import console

    color = console.use_color()
    print(f"app:      {handle}")
    print(f"state:    {console.styled_state(str(app_status.state), color)}")
    print(f"restarts: {app_status.num_restarts}")
    if app_status.msg:
        print(f"message:  {console._printable(app_status.msg)}")
    if app_status.ui_url:
        print(f"ui:       {app_status.ui_url}")
    rows = [replica_row(app_status, r) for role in app_status.roles if not roles or role.role in roles
            for r in sorted(role.replicas, key=lambda r: r.id)]
    if rows:
        print()
        console.table(STATUS_HEADERS, rows, color=color)


def replica_row(app_status: "AppStatus", replica: "ReplicaStatus") -> list[str]:
    """One table row; fields a scheduler does not report show as ``-``."""
    exit_code, message = _reply(replica)
    restarts = getattr(replica, "num_restarts", None)
    return [replica.role, str(replica.id), str(replica.state),
            "-" if exit_code is None else str(exit_code),
            "-" if restarts is None else str(restarts),
            replica.hostname or "-", message or ""]


def _reply(replica: "ReplicaStatus") -> tuple[Any, str]:
    """(exit code, message) from the replica's own fields, else from the reply file it left."""
    from torchspec.specs import NONE

    exit_code = getattr(replica, "exit_code", None)
    message = getattr(replica, "msg", "") or ""
    raw = replica.structured_error_msg
    if raw and raw != NONE:
        try:
            data = json.loads(raw)
        except ValueError:
            data = None
        inner = data.get("message") if isinstance(data, dict) else None
        if isinstance(inner, dict):
            message = message or str(inner.get("message", ""))
            exit_code = exit_code if exit_code is not None else inner.get("errorCode")
        elif isinstance(inner, str):
            message = message or inner
            exit_code = exit_code if exit_code is not None else data.get("errorCode")  # type: ignore[union-attr]
        elif not message:
            message = raw
    return exit_code, message.strip().splitlines()[0] if message.strip() else ""
