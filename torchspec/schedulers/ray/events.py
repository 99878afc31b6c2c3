"""What happened to a Ray app, for ``torchspec events``: its Ray job, and its driver's own record.

Ray keeps, per job, when it was submitted and ended, its status and message.
The rest is the driver's: each of its lines in the job's log is tagged
``[torchspec driver TIME]`` (:func:`~torchspec.schedulers.ray.states.tag`)
and says what it did and why: the placement groups it waits for (with what
the cluster has free) and when they were placed, the replicas it started, a
replica that exited and the retry it started, a role that waited on
another, the stop it was asked for, and its summary.  Pure: the scheduler
reads the job and its log.
"""

from __future__ import annotations

import json
import re
from typing import Any, List, Optional

from torchspec.schedulers.api import AppEvent, in_time_order
from torchspec.schedulers.ray.states import SUMMARY, parse_line
from torchspec.times import utc_from_epoch

#: a driver line about one replica: ``trainer/0 exited with code 3; ...``
_REPLICA = re.compile(r"^(?P<role>[A-Za-z0-9_.-]+)/(?P<replica>\d+)\b")
#: (what a driver line starts with, the event's reason, whether it is trouble)
_REASONS = (
    ("waiting for the placement groups", "Waiting", False),
    ("placed ", "Placed", False),
    ("started ", "Started", False),
    ("removed ", "Cleaned", False),
    ("could not", "Trouble", True),
    ("stopped (SIGTERM)", "Stopping", False),
    ("role ", "RoleStarted", False),
)


def job_events(job: Any, log: str) -> List[AppEvent]:
    """The app's events: its Ray job's submission and end, and every line its driver wrote."""
    source = f"Ray job {getattr(job, 'submission_id', '') or '?'}"
    events: List[AppEvent] = []
    submitted = utc_from_epoch((getattr(job, "start_time", None) or 0) / 1000)
    if submitted:
        events.append(AppEvent(submitted, source, "Submitted", "submitted"))
    for line in log.splitlines():
        parsed = parse_line(line)
        if parsed is not None and parsed.who == "driver":
            events.append(driver_event(parsed.time, parsed.text.strip(), source))
    ended = utc_from_epoch((getattr(job, "end_time", None) or 0) / 1000)
    status = str(getattr(job, "status", "")).rsplit(".", 1)[-1]
    if ended:
        message = str(getattr(job, "message", "") or "").splitlines()
        events.append(AppEvent(ended, source, status.title() or "Ended", message[0] if message else status,
                               status in ("FAILED", "STOPPED")))
    return in_time_order(events)


def driver_event(when: Any, text: str, source: str) -> AppEvent:
    """One line of the driver as an event: the app's, or a replica's where it starts with ``ROLE/K``."""
    if text.startswith(SUMMARY):
        return summary_event(when, text[len(SUMMARY):], source)
    replica = _REPLICA.match(text)
    if replica:
        trouble = "exited with code" in text and not text.split("exited with code", 1)[1].strip().startswith("0")
        return AppEvent(when, source, "Restarting" if "restarting" in text else "Exited" if "exited" in text
                        else "Replica", text, trouble, replica["role"], int(replica["replica"]))
    reason, trouble = next(((r, t) for start, r, t in _REASONS if text.startswith(start)), ("Driver", False))
    return AppEvent(when, source, reason, text, trouble)


def summary_event(when: Any, raw: str, source: str) -> AppEvent:
    """The driver's summary: how the app ended, by the driver's account."""
    try:
        summary = json.loads(raw)
    except ValueError:
        summary = {}
    state = str(summary.get("state") or "ENDED")
    detail: Optional[str] = None
    if summary.get("failed"):
        detail = f"{summary['failed']} failed (exit code {summary.get('exit_code')})"
    elif summary.get("unschedulable"):
        detail = f"the app cannot be placed: {summary['unschedulable']}"
    return AppEvent(when, source, state.title(), f"the driver ended the app {state}" + (f": {detail}" if detail else ""),
                    state not in ("SUCCEEDED", "CANCELLED"))
