"""Run-time states and statuses of apps, roles and replicas (``torchx.specs`` compatible)."""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from datetime import datetime
from enum import Enum
from json import JSONDecodeError
from string import Template
from typing import Optional

NONE: str = "<NONE>"

_APP_STATUS_FORMAT_TEMPLATE = """AppStatus:
    State: ${state}
    Num Restarts: ${num_restarts}
    Roles: ${roles}
    Msg: ${msg}
    Structured Error Msg: ${structured_error_msg}
    UI URL: ${url}
    """

# An RPC error message embeds the remote traceback; only its first line is shown.
_RPC_ERROR_MESSAGE_RE = re.compile(r"(?P<exception_type>\w*)\('On WorkerInfo\(.+\):\n(.*\n)*'\)")
# An exception nested in another one's message rather than chained.
_EMBEDDED_ERROR_MESSAGE_RE = re.compile(r"(?P<msg>.+)\nException.*")


class AppState(int, Enum):
    """State of an app: UNSUBMITTED -> SUBMITTED -> PENDING -> RUNNING -> SUCCEEDED | FAILED | CANCELLED."""

    UNSUBMITTED = 0
    SUBMITTED = 1
    PENDING = 2
    RUNNING = 3
    SUCCEEDED = 4
    FAILED = 5
    CANCELLED = 6
    UNKNOWN = 7

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"{self.name} ({self.value})"


_TERMINAL_STATES = [AppState.SUCCEEDED, AppState.FAILED, AppState.CANCELLED]
_STARTED_STATES = _TERMINAL_STATES + [AppState.RUNNING]


def is_terminal(state: AppState) -> bool:
    return state in _TERMINAL_STATES


def is_started(state: AppState) -> bool:
    return state in _STARTED_STATES


#: Replicas and apps share the same states.
ReplicaState = AppState


@dataclass
class ReplicaStatus:
    """The status of one replica: ``id`` is the node rank, not a worker rank."""

    id: int
    state: AppState
    role: str
    hostname: str
    structured_error_msg: str = NONE


@dataclass
class RoleStatus:
    role: str
    replicas: list[ReplicaStatus]


@dataclass
class AppStatus:
    """The run-time status of an app; ``roles`` holds the replicas of the latest attempt."""

    state: AppState
    num_restarts: int = 0
    msg: str = ""
    structured_error_msg: str = NONE
    ui_url: Optional[str] = None
    roles: list[RoleStatus] = field(default_factory=list)

    def is_terminal(self) -> bool:
        return is_terminal(self.state)

    def __repr__(self) -> str:
        import yaml

        data = asdict(self)
        error = data.pop("structured_error_msg")
        data["structured_error_msg"] = json.loads(error) if error != NONE else NONE
        data["state"] = repr(data["state"])
        return yaml.dump({"AppStatus": data})

    def raise_for_status(self) -> None:
        """Raise :class:`AppStatusError` unless the app SUCCEEDED."""
        if self.state != AppState.SUCCEEDED:
            raise AppStatusError(self, f"job did not succeed: {self}")

    def _format_error_message(self, msg: str, header: str, width: int = 80) -> str:
        assert len(header) < width
        match = _RPC_ERROR_MESSAGE_RE.search(msg)
        if match:
            start, end = match.span()
            msg = msg[start:end]
        match = _EMBEDDED_ERROR_MESSAGE_RE.search(msg)
        if match:
            msg = match.group("msg")
        length = 0
        lines = []
        for i in range(len(msg) + 1):
            if i == len(msg) or (msg[i] == " " and length >= width):
                lines.append(f"{header}{msg[i - length : i]}")
                header = " " * len(header)
                length = 0
            length += 1
        return "\n".join(lines)

    def _format_replica_status(self, replica_status: ReplicaStatus) -> str:
        if replica_status.structured_error_msg != NONE:
            try:
                error_data = json.loads(replica_status.structured_error_msg)
            except JSONDecodeError:
                return replica_status.structured_error_msg
            error_message = self._format_error_message(
                msg=error_data["message"]["message"], header="    error_msg: "
            )
            timestamp = int(error_data["message"]["extraInfo"]["timestamp"])
            exitcode = error_data["message"]["errorCode"] or "<N/A>"
            data = (f"{replica_status.state} (exitcode: {exitcode})\n"
                    f"    timestamp: {datetime.fromtimestamp(timestamp)}\n"
                    f"    hostname: {replica_status.hostname}\n"
                    f"{error_message}")
        else:
            data = f"{replica_status.state}"
            if replica_status.state in (ReplicaState.CANCELLED, ReplicaState.FAILED):
                data += " (no reply file)"
        # mark each role's replica 0 with a "*" to show where roles start
        header = "*" if replica_status.id == 0 else " "
        return f"\n {header}{replica_status.role}[{replica_status.id}]:{data}"

    def _get_role_statuses(self, roles: list[RoleStatus], filter_roles: Optional[list[str]] = None) -> list[RoleStatus]:
        if not filter_roles:
            return roles
        return [r for r in roles if r.role in filter_roles]

    def _format_role_status(self, role_status: RoleStatus) -> str:
        return "".join(self._format_replica_status(r) for r in sorted(role_status.replicas, key=lambda r: r.id))

    def format(self, filter_roles: Optional[list[str]] = None) -> str:
        """The human-readable status: state, restarts, each role's replicas, messages and UI URL."""
        roles_data = "".join(self._format_role_status(r) for r in self._get_role_statuses(self.roles, filter_roles))
        return Template(_APP_STATUS_FORMAT_TEMPLATE).substitute(
            state=self.state,
            num_restarts=self.num_restarts,
            roles=roles_data,
            msg=self.msg,
            structured_error_msg=self.structured_error_msg,
            url=self.ui_url,
        )


class AppStatusError(Exception):
    """Raised by :meth:`AppStatus.raise_for_status` when an app did not succeed."""

    def __init__(self, status: AppStatus, *args: object) -> None:
        super().__init__(*args)
        self.status = status
