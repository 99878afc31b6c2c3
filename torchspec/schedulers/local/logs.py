"""Reading a replica's log files: the stored line format, and when a followed log can grow no more.

The supervisor writes every line as ``ISO-8601-time<TAB>text`` (see
:mod:`torchspec.schedulers.local.supervisor`); :func:`parse_log_line` is the
parser that :func:`torchspec.schedulers.logfile.follow_lines` is given, and
:func:`replica_finished` the test that ends ``logs -f``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Mapping, Optional

from torchspec.schedulers.local.states import TERMINAL
from torchspec.schedulers.local.translate import LocalRequest
from torchspec.specs import RetryPolicy


def parse_log_line(raw: bytes, with_time: bool = True) -> tuple[Optional[datetime], str]:
    """Split a stored line into its timestamp and the replica's text; lines without one keep it all.

    Parsing the timestamp is most of the cost of reading logs, so it is skipped
    unless ``since``/``until`` need it.
    """
    stamp, sep, rest = raw.partition(b"\t")
    if sep and _looks_like_stamp(stamp):
        if not with_time:
            return None, rest.decode("utf-8", errors="replace")
        try:
            return datetime.fromisoformat(stamp.decode("ascii")), rest.decode("utf-8", errors="replace")
        except ValueError:
            pass
    return None, raw.decode("utf-8", errors="replace")


def _looks_like_stamp(stamp: bytes) -> bool:
    """``2026-11-22T21:14:12.366000+00:00``: cheap shape test before trusting the split."""
    return 19 <= len(stamp) <= 40 and stamp[4:5] == b"-" and stamp[10:11] == b"T"


def replica_finished(request: LocalRequest, state: Mapping[str, Any], role_name: str, k: int) -> bool:
    """True once replica ``k`` can write no more: the app ended, or nothing can restart the replica.

    ``state`` must already account for a dead supervisor (the scheduler's
    ``_check_supervisor``), or a crashed app would be followed forever.
    """
    if state.get("state") in TERMINAL:
        return True
    role_state = state.get("roles", {}).get(role_name, {})
    replicas = role_state.get("replicas", [])
    if k >= len(replicas) or replicas[k].get("state") not in TERMINAL:
        return False
    for role in request.roles:
        if role.retry_policy == RetryPolicy.APPLICATION.value and state.get("app_restarts", 0) < role.max_retries:
            return False
    role = request.role(role_name)
    if role is None:
        return True
    if role.retry_policy == RetryPolicy.ROLE.value and role_state.get("restarts", 0) < role.max_retries:
        return False
    replica = replicas[k]
    if (
        role.retry_policy == RetryPolicy.REPLICA.value
        and replica.get("state") == "FAILED"
        and replica.get("restarts", 0) < role.max_retries
    ):
        return False
    return True


__all__ = ["parse_log_line", "replica_finished"]
