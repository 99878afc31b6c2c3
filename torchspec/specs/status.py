"""Run-time states and statuses of apps, roles and replicas, and how they are shown to people.

``repr(AppStatus)`` is a YAML document (machine-friendly, stable key order);
:meth:`AppStatus.format` is the human view with one line per replica and the
error a failed replica left in its reply file.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from datetime import datetime
from enum import Enum
from string import Template
from typing import Any, Dict, List, Optional, Pattern, Tuple

from torchspec.errors import TorchSpecError
from torchspec.specs.sentinels import NONE

_APP_STATUS_FORMAT_TEMPLATE = """AppStatus:
    State: ${state}
    Num Restarts: ${num_restarts}
    Roles: ${roles}
    Msg: ${msg}
    Structured Error Msg: ${structured_error_msg}
    UI URL: ${url}
    """

# An RPC failure wraps the remote traceback in the message, e.g.
#   RuntimeError('On WorkerInfo(id=1, name=trainer:0:0):\n<traceback>\n')
# and only that wrapped part says what went wrong.
_RPC_ERROR_MESSAGE_RE: Pattern[str] = re.compile(r"(?P<exception_type>\w*)\('On WorkerInfo\(.+\):\n(.*\n)*'\)")

# Some errors are nested in another exception's message instead of being
# chained ("c10::Error: ...\nException raised from ..."); the first line is the error.
_EMBEDDED_ERROR_MESSAGE_RE: Pattern[str] = re.compile(r"(?P<msg>.+)\nException.*")

_NOT_AVAILABLE = "<N/A>"


class AppState(int, Enum):
    """Where an app is in its life.

    UNSUBMITTED -> SUBMITTED -> PENDING -> RUNNING -> SUCCEEDED | FAILED | CANCELLED;
    a preempted app goes from RUNNING back to PENDING; UNKNOWN when the
    scheduler cannot tell.  The int values are TorchX's and are persisted by
    some schedulers, so they must not change.
    """

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


#: Replicas go through the same states as apps.
ReplicaState = AppState

_TERMINAL_STATES: List[AppState] = [AppState.SUCCEEDED, AppState.FAILED, AppState.CANCELLED]
_STARTED_STATES: List[AppState] = _TERMINAL_STATES + [AppState.RUNNING]


def is_terminal(state: AppState) -> bool:
    """True once the app can no longer change state (succeeded, failed or cancelled)."""
    return state in _TERMINAL_STATES


def is_started(state: AppState) -> bool:
    """True once the app has run at all (running or terminal)."""
    return state in _STARTED_STATES


@dataclass
class ReplicaStatus:
    """One replica of a role; ``id`` is the node rank within the role, not a worker rank.

    ``structured_error_msg`` holds the replica's JSON reply file, if it left
    one.  ``hostaddr`` is the address to reach the replica at; schedulers that
    know only a host name leave it out and it is the host name.
    """

    id: int
    state: ReplicaState
    role: str
    hostname: str
    structured_error_msg: str = NONE
    hostaddr: str = ""

    def __post_init__(self) -> None:
        if not self.hostaddr:
            self.hostaddr = self.hostname


@dataclass
class RoleStatus:
    """The replicas of one role."""

    role: str
    replicas: List[ReplicaStatus]

    def to_json(self) -> Dict[str, Any]:
        """A JSON-ready dict; replica states are plain ints, which ``json.dumps`` writes as numbers."""
        replicas = []
        for replica in self.replicas:
            data = asdict(replica)
            data["state"] = int(replica.state)
            replicas.append(data)
        return {"role": self.role, "replicas": replicas}


def _parse_reply_file(raw: str) -> Optional[Tuple[str, Any, Any]]:
    """``(message, error_code, timestamp)`` from a replica's reply file, or None if unrecognised.

    Two schemas exist in the wild: TorchX's nested one
    ``{"message": {"message": str, "errorCode": int, "extraInfo": {"timestamp": int}}}``
    and a flat one ``{"message": str, "errorCode": int, "timestamp": int}``.
    Anything else is shown verbatim rather than raising while formatting.
    """
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    message = data.get("message")
    if isinstance(message, dict):
        text = message.get("message")
        extra = message.get("extraInfo")
        timestamp = extra.get("timestamp") if isinstance(extra, dict) else None
        error_code = message.get("errorCode")
    elif isinstance(message, str):
        text = message
        timestamp = data.get("timestamp")
        error_code = data.get("errorCode")
    else:
        return None
    if not isinstance(text, str):
        return None
    return text, error_code, timestamp


@dataclass
class AppStatus:
    """The run-time status of an app as a scheduler reports it.

    ``msg`` is free text from the scheduler, ``structured_error_msg`` a JSON
    error (or :data:`NONE`).  ``roles`` describe the replicas of the latest
    attempt only: errors of earlier, retried attempts are not kept.
    """

    state: AppState
    num_restarts: int = 0
    msg: str = ""
    structured_error_msg: str = NONE
    ui_url: Optional[str] = None
    roles: List[RoleStatus] = field(default_factory=list)

    def is_terminal(self) -> bool:
        return is_terminal(self.state)

    def __repr__(self) -> str:
        import yaml

        data = asdict(self)
        error = data.pop("structured_error_msg")
        if error != NONE:
            try:
                error = json.loads(error)
            except ValueError:
                pass
        data["structured_error_msg"] = error
        data["state"] = repr(data["state"])
        return yaml.dump({"AppStatus": data})

    def raise_for_status(self) -> None:
        """Raise :class:`AppStatusError` unless the app SUCCEEDED (so a still-running app raises too)."""
        if self.state != AppState.SUCCEEDED:
            raise AppStatusError(self, f"job did not succeed: {self}")

    def _format_error_message(self, msg: str, header: str, width: int = 80) -> str:
        """The interesting part of ``msg``, wrapped at spaces once a line reaches ``width``.

        The first line starts with ``header``; later lines are indented by as
        much, so the message reads as one block under its label.
        """
        assert len(header) < width
        rpc = _RPC_ERROR_MESSAGE_RE.search(msg)
        if rpc:
            msg = msg[rpc.start() : rpc.end()]
        embedded = _EMBEDDED_ERROR_MESSAGE_RE.search(msg)
        if embedded:
            msg = embedded.group("msg")

        lines = []
        start = 0
        for i, char in enumerate(msg):
            if char == " " and i - start >= width:
                lines.append(f"{header}{msg[start:i]}")
                header = " " * len(header)
                start = i
        lines.append(f"{header}{msg[start:]}")
        return "\n".join(lines)

    def _format_replica_status(self, replica_status: ReplicaStatus) -> str:
        if replica_status.structured_error_msg != NONE:
            parsed = _parse_reply_file(replica_status.structured_error_msg)
            if parsed is None:
                return replica_status.structured_error_msg
            text, error_code, timestamp = parsed
            error_message = self._format_error_message(msg=text, header="    error_msg: ")
            exitcode = error_code if error_code else _NOT_AVAILABLE
            when = datetime.fromtimestamp(int(timestamp)) if timestamp is not None else _NOT_AVAILABLE
            data = (
                f"{replica_status.state} (exitcode: {exitcode})\n"
                f"        timestamp: {when}\n"
                f"        hostname: {replica_status.hostname}\n"
                f"    {error_message}"
            )
        else:
            data = f"{replica_status.state}"
            if replica_status.state in (ReplicaState.CANCELLED, ReplicaState.FAILED):
                data += " (no reply file)"

        # replica 0 of each role gets a "*" so role boundaries stand out
        marker = "*" if replica_status.id == 0 else " "
        return f"\n {marker}{replica_status.role}[{replica_status.id}]:{data}"

    def _get_role_statuses(self, roles: List[RoleStatus], filter_roles: Optional[List[str]] = None) -> List[RoleStatus]:
        if not filter_roles:
            return roles
        return [role_status for role_status in roles if role_status.role in filter_roles]

    def _format_role_status(self, role_status: RoleStatus) -> str:
        return "".join(self._format_replica_status(r) for r in sorted(role_status.replicas, key=lambda r: r.id))

    def to_json(self, filter_roles: Optional[List[str]] = None) -> Dict[str, Any]:
        """A JSON-ready dict, optionally keeping only the named roles."""
        return {
            "state": str(self.state),
            "num_restarts": self.num_restarts,
            "roles": [role.to_json() for role in self._get_role_statuses(self.roles, filter_roles)],
            "msg": self.msg,
            "structured_error_msg": self.structured_error_msg,
            "url": self.ui_url,
        }

    def format(self, filter_roles: Optional[List[str]] = None) -> str:
        """The human view: state, restarts, one line per replica (with its error), messages, UI URL."""
        roles = "".join(self._format_role_status(r) for r in self._get_role_statuses(self.roles, filter_roles))
        return Template(_APP_STATUS_FORMAT_TEMPLATE).substitute(
            state=self.state,
            num_restarts=self.num_restarts,
            roles=roles,
            msg=self.msg,
            structured_error_msg=self.structured_error_msg,
            url=self.ui_url,
        )


class AppStatusError(TorchSpecError):
    """Raised by :meth:`AppStatus.raise_for_status`; ``status`` is the status that did not succeed."""

    def __init__(self, status: AppStatus, *args: object) -> None:
        super().__init__(*args)
        self.status = status


__all__ = [
    "AppState",
    "AppStatus",
    "AppStatusError",
    "ReplicaState",
    "ReplicaStatus",
    "RoleStatus",
    "is_started",
    "is_terminal",
]
