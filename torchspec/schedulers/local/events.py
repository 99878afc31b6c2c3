"""What happened to a local app, for ``torchspec events``: its supervisor's diary, read back as events.

The supervisor writes one line per transition to ``supervisor.log`` (``TIME
message``, :func:`~torchspec.schedulers.local.supervisor._say`): it started,
a replica started or exited (with its code, or the signal that killed it), a
role waiting on another started, the app was restarted or ended.  Those
lines are the engine's own record here, so they are read back rather than
kept twice; the submit time comes from ``state.json``.  Pure but for reading
the two files.
"""

from __future__ import annotations

import os
import re
from typing import List, Mapping, Optional, Tuple

from torchspec.schedulers.api import AppEvent, in_time_order
from torchspec.schedulers.local.states import SUPERVISOR_LOG
from torchspec.times import utc_from_iso

#: ``TIME who: what``: who is a replica (``trainer/0``), ``role NAME``, ``app ID``, or absent (the supervisor)
_LINE = re.compile(r"^(?P<time>\d{4}-\d\d-\d\dT\S+) (?P<text>.*)$")
_REPLICA = re.compile(r"^(?P<role>[^/\s:]+)/(?P<replica>\d+): (?P<what>.*)$")
_ROLE = re.compile(r"^role (?P<role>[^:\s]+): (?P<what>.*)$")
_APP = re.compile(r"^app \S+: (?P<what>.*)$")
#: an app's final state -> the reason of the event that ended it
_ENDS = {"SUCCEEDED": "Succeeded", "FAILED": "Failed", "CANCELLED": "Cancelled"}
#: (pattern of what a replica's line says, the event's reason, whether it is trouble)
_REPLICA_REASONS: Tuple[Tuple[str, str, bool], ...] = (
    (r"^started pid", "Started", False),
    (r"-> SUCCEEDED$", "Succeeded", False),
    (r"-> CANCELLED$", "Stopped", False),
    (r"killed by", "Killed", True),
    (r"-> FAILED$", "Failed", True),
    (r"^cannot start", "FailedToStart", True),
)


def read_events(app_dir: str, state: Optional[Mapping[str, object]]) -> List[AppEvent]:
    """The app's events: submitted (from its state), then each line of its supervisor's log."""
    events: List[AppEvent] = []
    submitted = utc_from_iso(str((state or {}).get("submitted_at") or ""))
    if submitted is not None:
        events.append(AppEvent(submitted, "app", "Submitted", "the app was submitted; its supervisor starts"))
    try:
        with open(os.path.join(app_dir, SUPERVISOR_LOG), encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:  # no supervisor yet (or its log is gone): what the state says is all there is
        lines = []
    events += [event for event in map(line_event, lines) if event is not None]
    final = str((state or {}).get("state") or "")
    ended = utc_from_iso(str((state or {}).get("ended_at") or ""))
    if final in _ENDS and ended is not None:
        # the app's end as its state records it, not as the supervisor's last line says it: that line is
        # written after the state, so one who read the state ended (events -f) would miss it, or see two ends
        events = [e for e in events if not (e.role is None and e.reason in _ENDS.values())]
        events.append(AppEvent(ended, "app", _ENDS[final], f"{final} {(state or {}).get('msg') or ''}".rstrip(),
                               final == "FAILED"))
    return in_time_order(events)


def line_event(line: str) -> Optional[AppEvent]:
    """The event one ``supervisor.log`` line records; None for a line that is not one (a traceback's)."""
    match = _LINE.match(line)
    when = utc_from_iso(match["time"]) if match else None
    if match is None or when is None:
        return None
    text = match["text"]
    if replica := _REPLICA.match(text):
        what = replica["what"]
        reason, warning = next(((r, w) for pattern, r, w in _REPLICA_REASONS if re.search(pattern, what)),
                               ("Replica", False))
        return AppEvent(when, "supervisor", reason, what, warning, replica["role"], int(replica["replica"]))
    if role := _ROLE.match(text):
        return AppEvent(when, "supervisor", "RoleStarted", role["what"], role=role["role"])
    if app := _APP.match(text):
        final = app["what"].split(" ", 1)[0]
        reason = _ENDS.get(final, "App")
        return AppEvent(when, "supervisor", reason, app["what"], final == "FAILED")
    if text.startswith("restarting"):
        return AppEvent(when, "supervisor", "Restarting", text, True)
    return AppEvent(when, "supervisor", "Supervisor", text, text.startswith(("the disk is full", "cannot record")))
