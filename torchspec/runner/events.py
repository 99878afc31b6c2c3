"""``torchspec events``: why an app is where it is, as its engine recorded it, for one replica or all.

Each scheduler reads its engine's own record (``Scheduler.events``:
Kubernetes' Events, Docker's events and container state, Slurm's job
records, Ray's job and its driver's log, the local supervisor's diary); here
is what is the same for all of them: choosing a replica's events, and
following an app until it ends.

Following polls: after each look it waits for the app's status to change
(``Runner.wait``, which sleeps on the engine's own notice where it has one)
for at most ``poll_s``, then reads the events again and yields the ones not
seen yet.  An engine's events change without the app's status changing (a
pod pulling its image), hence the bound.  It ends once the app is terminal,
after one last read, so the event that ended it is always shown.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator, List, Optional, Sequence, Tuple

from torchspec.errors import UsageError
from torchspec.schedulers.api import check_replica

if TYPE_CHECKING:
    from torchspec.runner.api import Runner
    from torchspec.schedulers.api import AppEvent

#: The longest a follower waits between two reads of the events.
POLL_S = 2.0


def parse_replica(text: Optional[str]) -> Tuple[Optional[str], Optional[int]]:
    """``ROLE`` or ``ROLE/REPLICA`` (None: the whole app) as ``(role, replica)``; a UsageError if malformed."""
    if text is None:
        return None, None
    role, slash, replica = text.partition("/")
    if not role or (slash and not replica.isdigit()):
        raise UsageError(f"{text!r} names no replica", "give ROLE or ROLE/REPLICA, e.g. trainer or trainer/0")
    return role, int(replica) if slash else None


def select(events: Sequence["AppEvent"], role: Optional[str], replica: Optional[int]) -> List["AppEvent"]:
    """The events of ``role`` (its replica ``replica``, where given) and those of the app as a whole, which
    explain the replica's (the app was queued, it ended); every event where no role is given."""
    if role is None:
        return list(events)
    return [e for e in events if e.role is None
            or (e.role == role and (replica is None or e.replica is None or e.replica == replica))]


def app_events(runner: "Runner", handle: str, selector: Optional[str] = None) -> List["AppEvent"]:
    """The app's events, of the replica ``selector`` names (``ROLE[/REPLICA]``) where one is given."""
    role, replica = checked_replica(runner, handle, selector)
    return select(runner.events(handle), role, replica)


def checked_replica(runner: "Runner", handle: str, selector: Optional[str]) -> Tuple[Optional[str], Optional[int]]:
    """``selector`` parsed, and refused (NotFoundError, with a did-you-mean) where the app, as submitted, has no
    such role or replica; an app whose roles the scheduler cannot rebuild is not checked."""
    role, replica = parse_replica(selector)
    app = runner.describe(handle)
    if role is not None and app is not None and app.roles:
        check_replica(handle, role, replica or 0, {r.name: int(r.num_replicas) for r in app.roles})
    return role, replica


def follow(runner: "Runner", handle: str, selector: Optional[str] = None,
           poll_s: float = POLL_S) -> Iterator["AppEvent"]:
    """The app's events as they come, those already recorded first, until the app has ended."""
    seen = set()
    status = runner.require_status(handle)
    role, replica = checked_replica(runner, handle, selector)  # once: each poll then reads the events alone
    while True:
        for event in select(runner.events(handle), role, replica):
            key = (event.time, event.source, event.reason, event.message, event.role, event.replica)
            if key not in seen:
                seen.add(key)
                yield event
        if status is None or status.is_terminal():
            return
        status = runner.wait(handle, wait_interval=poll_s, timeout=poll_s)
