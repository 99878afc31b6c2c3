"""What happened to a docker app, for ``torchspec events``: the engine's events of its containers, and their state.

The engine keeps a bounded buffer of recent events (``docker events``), each
with the container's labels, so an app's are found by its app-id label:
created, started, killed (with the signal), died (with the exit code),
OOM-killed, restarted by the engine's restart policy, renamed (torchspec
renames what it cancelled, and what it replaced on a retry), removed.  A
container whose events the engine no longer holds (an old app, a restarted
engine) still says when it was created, started and finished, how it exited
and whether it was OOM-killed, from ``docker inspect``.
"""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Set, Tuple

from torchspec.schedulers.api import AppEvent, in_time_order
from torchspec.schedulers.docker.labels import LABEL_APP_ID, LABEL_REPLICA_ID, LABEL_ROLE_NAME
from torchspec.schedulers.docker.views import AppView, ContainerView
from torchspec.times import utc_from_epoch, utc_from_iso

if TYPE_CHECKING:
    import docker

#: the engine's action -> (the event's reason, whether it is trouble); the others (attach, exec, resize...)
#: say nothing about why the app is where it is
ACTIONS: Dict[str, Tuple[str, bool]] = {
    "create": ("Created", False), "start": ("Started", False), "restart": ("Restarted", True),
    "kill": ("Killed", False), "stop": ("Stopped", False), "die": ("Exited", False), "oom": ("OOMKilled", True),
    "pause": ("Paused", False), "unpause": ("Unpaused", False), "rename": ("Renamed", False),
    "destroy": ("Removed", False), "health_status": ("Health", False),
}
#: docker inspect's time for "never"
_NEVER = "0001-01-01"


def app_events(client: "docker.DockerClient", view: AppView) -> List[AppEvent]:
    """The app's events: the engine's, then the state of each container it holds none for."""
    created = [when.timestamp() for when in (utc_from_iso(c.created) for c in view.containers) if when]
    since = int(min(created)) - 1 if created else 0
    stream = client.api.events(since=since, until=int(time.time()) + 1, decode=True,
                               filters={"label": [f"{LABEL_APP_ID}={view.app_id}"], "type": ["container"]})
    try:
        raw = list(stream)
    finally:
        with contextlib.suppress(Exception):  # a finished stream may not close cleanly
            stream.close()
    events = [event for event in map(engine_event, raw) if event is not None]
    seen: Set[str] = {str((item.get("Actor") or {}).get("ID") or item.get("id") or "") for item in raw}
    for container in view.containers:
        if container.id not in seen:
            events += state_events(container)
    return in_time_order(events)


def engine_event(raw: Mapping[str, Any]) -> Optional[AppEvent]:
    """One event of the engine's stream as an AppEvent; None for one that says nothing about the app's course."""
    action = str(raw.get("Action") or raw.get("status") or "")
    verb, _, detail = action.partition(":")
    if verb not in ACTIONS:
        return None
    attrs: Mapping[str, str] = (raw.get("Actor") or {}).get("Attributes") or {}
    reason, warning = ACTIONS[verb]
    message = {
        "create": f"created from image {attrs.get('image', '?')}",
        "kill": f"sent {attrs.get('signal', 'a signal')}",
        "rename": f"renamed from {str(attrs.get('oldName', '?')).lstrip('/')}",
        "health_status": f"health: {detail.strip()}",
        "oom": "the kernel killed a process of the container: it ran out of memory",
    }.get(verb, reason.lower())
    if verb == "die":
        code = attrs.get("exitCode")
        message, warning = f"exited with code {code}", code not in ("0", None)
    when = raw.get("timeNano")
    return AppEvent(utc_from_epoch(int(when) / 1e9 if when else float(raw.get("time") or 0)),
                    f"container {attrs.get('name', '?')}", reason, message, warning,
                    attrs.get(LABEL_ROLE_NAME) or None, _replica(attrs.get(LABEL_REPLICA_ID)))


def state_events(container: ContainerView) -> List[AppEvent]:
    """What ``docker inspect`` still says of a container: created, started, finished and how."""
    source, role, replica = f"container {container.name}", container.role or None, container.replica_id
    found = [AppEvent(utc_from_iso(container.created), source, "Created", "created", False, role, replica)]
    if container.started_at and not container.started_at.startswith(_NEVER):
        found.append(AppEvent(utc_from_iso(container.started_at), source, "Started",
                              f"started (the engine restarted it {container.restart_count} time(s))"
                              if container.restart_count else "started", False, role, replica))
    if container.finished_at and not container.finished_at.startswith(_NEVER) and container.exit_code is not None:
        how = f"exited with code {container.exit_code}"
        if container.oom_killed:
            how += ", OOM-killed (it ran out of memory)"
        if container.error:
            how += f": {container.error}"
        found.append(AppEvent(utc_from_iso(container.finished_at), source, "OOMKilled" if container.oom_killed
                              else "Exited", how, container.exit_code != 0 or container.oom_killed, role, replica))
    return found


def _replica(text: Optional[str]) -> Optional[int]:
    return int(text) if text and text.isdigit() else None
