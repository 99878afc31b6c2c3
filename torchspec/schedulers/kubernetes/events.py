"""What happened to a Kubernetes app, for ``torchspec events``: the cluster's Events of its objects and pods.

Every controller records why it did what it did as an Event on the object
it acted on: the Job controller (pods created, backoff limit reached), the
scheduler (``FailedScheduling`` with why no node fits, ``Scheduled`` with
the node), the kubelet (pulling, pulled, ``BackOff``, OOM), the eviction
API and the taint manager (``Evicted``, ``TaintManagerEviction``), JobSet,
Volcano (its PodGroup) and Kueue (its Workload: ``Pending`` with the
queue's reason, ``QuotaReserved``, ``Admitted``, ``Preempted``).  An app's
are those whose object is one of its own: by uid for what torchspec read
(its top-level objects and pods), by name for what controllers made from
them (a JobSet's child Jobs, a PodGroup, a Kueue Workload named
``KIND-APP-HASH``).  One list of the namespace's Events, matched here.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from torchspec.schedulers.api import AppEvent, in_time_order
from torchspec.schedulers.kubernetes.status import AppView
from torchspec.times import utc_from_iso


def is_of_app(app: str, name: str) -> bool:
    """Whether an object named ``name`` was made for app ``app``: its own name, a name it prefixes (child
    Jobs, pods, PodGroups), or a Kueue Workload's ``KIND-APP-HASH``."""
    return name == app or name.startswith(f"{app}-") or f"-{app}-" in name


def app_events(view: AppView, events: List[Dict[str, Any]]) -> List[AppEvent]:
    """The app's events among ``events`` (the namespace's, as JSON), oldest first."""
    uids = {str(obj["metadata"].get("uid") or "") for obj in view.top} | {pod.uid for pod in view.pods}
    uids.discard("")
    keys = {key: name for name, key, _ in view.role_names}
    replicas: Dict[str, Tuple[Optional[str], Optional[int]]] = {
        pod.name: (keys.get(pod.role_key, pod.role_key), pod.replica_id) for pod in view.pods}
    found = []
    for event in events:
        involved = event.get("involvedObject") or event.get("regarding") or {}
        name = str(involved.get("name") or "")
        if str(involved.get("uid") or "") not in uids and not is_of_app(view.app_id, name):
            continue
        role, replica = replicas.get(name, (None, None)) if involved.get("kind") == "Pod" else (None, None)
        count = int(event.get("count") or (event.get("series") or {}).get("count") or 1)
        message = str(event.get("message") or event.get("note") or "").strip()
        if count > 1:
            message += f" (x{count})"
        found.append(AppEvent(event_time(event), f"{involved.get('kind', '?')} {name}", str(event.get("reason") or ""),
                              message, event.get("type") == "Warning", role, replica))
    return in_time_order(found)


def event_time(event: Dict[str, Any]) -> Any:
    """When the event last happened: its last time, else its (series') event time, else when it was made."""
    series = event.get("series") or {}
    for text in (event.get("lastTimestamp"), series.get("lastObservedTime"), event.get("eventTime"),
                 event.get("firstTimestamp"), (event.get("metadata") or {}).get("creationTimestamp")):
        when = utc_from_iso(str(text)) if text else None
        if when is not None:
            return when
    return None
