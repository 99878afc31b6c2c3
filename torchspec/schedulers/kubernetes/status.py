"""Reading an app back: what its objects and pods, as the API server returns them, say about each replica.

Pure: the scheduler fetches the JSON, this turns it into torchspec's terms.
:class:`PodView` is one pod (its phase, exit code, and why it does not run);
:class:`AppView` all of an app, with each replica's current pod picked out
and the state the flavor's controller decided; :func:`describe_app` the
``describe`` answer built from it.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from torchspec.schedulers.api import IMAGE_ID_PREFIX, DescribeAppResponse, ReplicaWhyStatus, parse_labels_json
from torchspec.schedulers.kubernetes.flavor import Flavor
from torchspec.schedulers.kubernetes.flavors import FLAVOR_TABLE
from torchspec.schedulers.kubernetes.names import AppRef, role_key
from torchspec.schedulers.kubernetes.states import (
    ANNOTATION_APP_NAME,
    ANNOTATION_METADATA,
    DEFAULT_FLAVOR,
    INDEX_FAILURE_COUNT,
    INDEX_IGNORED_FAILURE_COUNT,
    JOB_INDEX_KEY,
    LABEL_KUEUE_QUEUE,
    LABEL_ROLE_NAME,
    LABEL_SESSION,
    POD_PHASES,
    VOLCANO_INDEX_KEY,
    WAITING_TROUBLE,
    Obj,
)
from torchspec.specs import NONE, AppState, ReplicaStatus, Role, RoleStatus, is_terminal

logger: logging.Logger = logging.getLogger(__name__)


def describe_obj(obj: Obj) -> str:
    """``Kind name``, as messages name an object."""
    return f"{obj['kind']} {obj['metadata']['name']}"


def _index_of(pod: Obj) -> Optional[int]:
    meta = pod.get("metadata") or {}
    for source in (meta.get("annotations") or {}, meta.get("labels") or {}):
        for key in (JOB_INDEX_KEY, VOLCANO_INDEX_KEY):
            if str(source.get(key, "")).isdigit():
                return int(source[key])
    match = re.search(r"-(\d+)(?:-[a-z0-9]{5})?$", str(meta.get("name", "")))  # {job}-{k}-{random} names
    return int(match.group(1)) if match else None


@dataclass
class PodView:
    """One pod of an app, in torchspec's terms."""

    name: str
    uid: str
    role_key: str
    replica_id: int
    phase: str
    created: str
    hostname: str
    exit_code: Optional[int] = None
    restarts: int = 0
    reason: str = ""
    message: str = ""
    waiting: str = ""
    unschedulable: str = ""
    running: bool = False
    pod_reason: str = ""  # the pod's own failure, e.g. Evicted or DeadlineExceeded: it wins over the container's
    pod_message: str = ""
    #: earlier pods of this replica that its Job counted as failed (they may be gone: deleted, or removed by
    #: the controller), from the pod's index failure count annotation
    earlier: int = 0
    #: earlier pods of this replica that the cluster took away (evicted, preempted, its node lost), which its Job
    #: ignored (the podFailurePolicy's rule): the pod's ignored failure count annotation
    earlier_disruptions: int = 0
    #: whether the cluster is taking or took this pod away: its DisruptionTarget condition
    disrupted: bool = False
    #: the image its container runs, as the kubelet resolved it (``imageID``: ``repo@sha256:...``); "" until pulled
    image_id: str = ""

    @property
    def state(self) -> AppState:
        return POD_PHASES.get(self.phase, AppState.UNKNOWN)

    @property
    def started(self) -> bool:
        """Whether its container runs or ran, so that it has a log to read."""
        return self.running or self.exit_code is not None or self.phase in ("Succeeded", "Failed")

    def trouble(self, role: str) -> str:
        """Why the pod does not run or ran badly, spelled out; ``""`` when nothing is wrong."""
        who = f"{role}/{self.replica_id}"
        if self.unschedulable:
            return f"{who} cannot be scheduled (Unschedulable): {self.unschedulable}"
        if self.waiting in WAITING_TROUBLE:
            text = f"{who} {WAITING_TROUBLE[self.waiting]} ({self.waiting})"
            return text + (f": {self.message}" if self.message else "")
        if self.phase == "Failed":
            return self.describe_failure(role)
        return ""

    def describe_failure(self, role: str) -> str:
        if self.pod_reason:
            return f"{role}/{self.replica_id} failed ({self.pod_reason})" + (
                f": {self.pod_message}" if self.pod_message else "")
        if self.exit_code is None:
            what = f"{role}/{self.replica_id} failed"
            if self.reason:
                what += f" ({self.reason})"
            return what + (f": {self.message}" if self.message else "")
        what = f"{role}/{self.replica_id} exited with code {self.exit_code}"
        if self.restarts:
            what += f" after {self.restarts} restart{'s' if self.restarts != 1 else ''}"
        if self.reason == "OOMKilled":
            what += " (OOMKilled: it ran out of its memory limit)"
        elif self.exit_code in (137, 143):
            what += f" (killed by SIG{'KILL' if self.exit_code == 137 else 'TERM'})"
        if self.message:
            what += f": {self.message}"
        return what


def _read_container_statuses(view: PodView, statuses: List[Obj]) -> None:
    """Fill in ``view`` from the pod's container statuses: restarts, and how the container waits, runs or ended."""
    for cs in statuses:
        view.restarts = max(view.restarts, int(cs.get("restartCount") or 0))
        state = cs.get("state") or {}
        if "waiting" in state:
            view.waiting = state["waiting"].get("reason") or ""
            view.message = state["waiting"].get("message") or view.message
            last = (cs.get("lastState") or {}).get("terminated")
            if last and view.waiting == "CrashLoopBackOff":
                view.exit_code, view.reason = last.get("exitCode"), last.get("reason") or ""
        elif "running" in state:
            view.running = True
        elif "terminated" in state:
            term = state["terminated"]
            view.exit_code = term.get("exitCode")
            view.reason = term.get("reason") or view.reason
            view.message = (term.get("message") or "").strip()


def pod_view(pod: Obj, index: Optional[int] = None) -> Optional[PodView]:
    """A :class:`PodView` from a pod's JSON; None for a pod without torchspec's labels or an index.
    ``index`` is the replica where the flavor knows it (:meth:`Flavor.pod_index`), else the pod's index keys say."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    index = _index_of(pod) if index is None else index
    if LABEL_ROLE_NAME not in labels or index is None:
        return None
    status = pod.get("status") or {}
    spec = pod.get("spec") or {}
    view = PodView(name=meta.get("name", ""), uid=meta.get("uid", ""), role_key=labels[LABEL_ROLE_NAME],
                   replica_id=index, phase=status.get("phase") or "Pending",
                   created=str(meta.get("creationTimestamp") or ""),
                   hostname=".".join(filter(None, [spec.get("hostname"), spec.get("subdomain")])))
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False" \
                and condition.get("reason") == "Unschedulable":
            view.unschedulable = condition.get("message") or "no node fits"
        if condition.get("type") == "DisruptionTarget" and condition.get("status") == "True":
            view.disrupted = True
    if status.get("reason"):  # pod-level, e.g. Evicted, DeadlineExceeded
        view.pod_reason, view.pod_message = status["reason"], status.get("message") or ""
    _read_container_statuses(view, status.get("containerStatuses") or [])
    view.image_id = next((str(c.get("imageID")) for c in status.get("containerStatuses") or [] if c.get("imageID")), "")
    annotations = meta.get("annotations") or {}
    for name, key in (("earlier", INDEX_FAILURE_COUNT), ("earlier_disruptions", INDEX_IGNORED_FAILURE_COUNT)):
        try:
            setattr(view, name, int(annotations.get(key) or 0))
        except ValueError:
            pass
    return view


def admission_message(workloads: List[Obj]) -> str:
    """Why Kueue has not admitted a job yet, from its Workloads' conditions; ``""`` once all are admitted."""
    for workload in workloads:
        conds = {c.get("type"): c for c in (workload.get("status") or {}).get("conditions") or []}
        state = {kind: (conds.get(kind) or {}).get("status") for kind in ("Admitted", "Evicted", "QuotaReserved")}
        if state["Admitted"] == "True":
            continue
        if state["Evicted"] == "True":
            return f"evicted: {conds['Evicted'].get('message') or conds['Evicted'].get('reason') or ''}".strip(": ")
        if state["QuotaReserved"] == "False" and conds["QuotaReserved"].get("message"):
            return str(conds["QuotaReserved"]["message"])
        return "quota reserved, waiting for admission checks" if state["QuotaReserved"] == "True" \
            else "not admitted yet"
    return ""


@dataclass
class AppView:
    """All objects and pods of one app, with each replica's current pod picked out."""

    app_id: str  # the app's name, the prefix of its objects' names
    namespace: str
    flavor: str
    top: List[Obj]  # the Jobs (in role order), or the one JobSet / Volcano Job
    pods: List[PodView]
    services: List[Obj] = field(default_factory=list)
    context: Optional[str] = None  # the kubeconfig context it was read through, if not the current one
    #: why the queue has not admitted a suspended app yet (from Kueue's Workload), where it says
    admission: str = ""

    @property
    def flavor_impl(self) -> Flavor:
        """The flavor the app was created as."""
        return FLAVOR_TABLE[self.flavor]

    @property
    def exists(self) -> bool:
        return bool(self.top)

    @property
    def full_id(self) -> str:
        """The app id a handle carries: ``[CONTEXT:]NAMESPACE:NAME[@FLAVOR]`` (no flavor for the default one)."""
        return str(AppRef(name=self.app_id, namespace=self.namespace, context=self.context,
                          flavor=None if self.flavor == DEFAULT_FLAVOR else self.flavor))

    @property
    def queue(self) -> str:
        """The Kueue LocalQueue the app was submitted to, ``""`` if none."""
        return str(((self.top[0]["metadata"].get("labels") or {}) if self.top else {}).get(LABEL_KUEUE_QUEUE, ""))

    @property
    def roles_json(self) -> List[Obj]:
        """The roles as submitted, in order, from the annotations."""
        try:
            return self.flavor_impl.roles_json(self.top)
        except (KeyError, ValueError, TypeError, IndexError):
            return []

    @property
    def labels(self) -> Dict[str, str]:
        """The app's own labels (its AppDef.metadata), from the annotation of its first object."""
        annotations = (self.top[0]["metadata"].get("annotations") or {}) if self.top else {}
        return parse_labels_json(annotations.get(ANNOTATION_METADATA))

    @property
    def app_name(self) -> Optional[str]:
        """The app's name as submitted, from the annotation of its first object (None: an app submitted
        before names were kept)."""
        annotations = (self.top[0]["metadata"].get("annotations") or {}) if self.top else {}
        return annotations.get(ANNOTATION_APP_NAME) or None

    @property
    def role_names(self) -> List[Tuple[str, str, int]]:
        """(role name, role key, num_replicas) in submission order."""
        return [(r["name"], role_key(self.app_id, r["name"]), int(r.get("num_replicas", 1))) for r in self.roles_json]

    def attempts(self, key: str, replica_id: int) -> List[PodView]:
        """Every pod replica ``key/replica_id`` ran in, oldest first (a Job replaces a failed pod)."""
        found = [p for p in self.pods if p.role_key == key and p.replica_id == replica_id]
        return sorted(found, key=lambda p: (p.created, p.name))

    def restarts_of(self, key: str, replica_id: int) -> int:
        return sum(self.restart_causes(key, replica_id).values())

    def restart_causes(self, key: str, replica_id: int) -> Dict[str, int]:
        """How often replica ``key/replica_id`` restarted, by cause (``failure``, ``disruption``; only those
        that happened).  Pods a user deleted, or the cluster evicted, are gone from the API: the Job's counts on
        the latest pod still know them; the earlier pods still listed say so where there are no counts."""
        attempts = self.attempts(key, replica_id)
        if not attempts:
            return {}
        latest, earlier = attempts[-1], attempts[:-1]
        disrupted = sum(1 for p in earlier if p.disrupted)
        causes = {"failure": max(latest.earlier, len(earlier) - disrupted) + latest.restarts,
                  "disruption": max(latest.earlier_disruptions, disrupted)}
        return {cause: n for cause, n in causes.items() if n}

    @property
    def app_restarts(self) -> int:
        """Whole-app restarts the controller counted (JobSet, Volcano), else 0."""
        return self.flavor_impl.app_restarts(self.top)

    @property
    def controller_state(self) -> Tuple[Optional[AppState], str]:
        """What the Job/JobSet/Volcano controller decided (None while it has not), and its message."""
        return self.flavor_impl.controller_state(self.top)

    def current(self) -> List[Tuple[str, int, Optional[PodView]]]:
        """(role name, replica id, its latest pod or None) for every replica, in role order."""
        out = []
        for name, key, n in self.role_names:
            ids = sorted(set(range(n)) | {p.replica_id for p in self.pods if p.role_key == key})
            for k in ids:
                attempts = self.attempts(key, k)
                out.append((name, k, attempts[-1] if attempts else None))
        return out

    @property
    def state(self) -> AppState:
        decided, _ = self.controller_state
        if decided is not None:
            return decided
        # Started once any replica runs or ran (finished pods wait for the controller to count them).
        pods = [p for _, _, p in self.current() if p is not None]
        if any(p.running or p.phase in ("Running", "Succeeded", "Failed") for p in pods):
            return AppState.RUNNING
        return AppState.PENDING

    @property
    def msg(self) -> str:
        decided, message = self.controller_state
        troubles = [p.trouble(name) for name, _, p in self.current() if p is not None and p.trouble(name)]
        if decided == AppState.FAILED:
            failed = [t for t in troubles if "exited" in t or "failed" in t]
            return failed[0] if failed else message
        if decided == AppState.PENDING and self.admission:
            return f"{message}; Kueue: {self.admission}"
        if troubles:
            return troubles[0]
        return message


#: A replica status with why, besides the exit code and restarts: the cluster says (ImagePullBackOff...).
KubernetesReplicaStatus = ReplicaWhyStatus


#: A replica with no pod in an app that has ended: its Job deleted the pod (a Job whose pods restart in place,
#: restartPolicy OnFailure as JobSet and Kubeflow's runtimes default to, deletes them when it fails), or
#: somebody did (``kubectl delete pod``).
GONE = ("its pod is gone (deleted, or removed by its controller when the app ended): its state and exit code"
        " went with it")


def _role_statuses(view: AppView) -> List[RoleStatus]:
    """Every replica's status, by role, in role order."""
    by_role: Dict[str, List[ReplicaStatus]] = {name: [] for name, _, _ in view.role_names}
    keys = {name: key for name, key, _ in view.role_names}
    decided, _ = view.controller_state
    ended = decided is not None and is_terminal(decided)
    for name, k, pod in view.current():
        if pod is None:
            state, msg = (AppState.UNKNOWN, GONE) if ended else (AppState.PENDING, "")
        else:
            state, msg = pod.state, pod.trouble(name)
        by_role[name].append(KubernetesReplicaStatus(
            id=k,
            state=state,
            role=name,
            hostname=(pod.hostname if pod else "") or view.flavor_impl.replica_host(view.app_id, keys[name], k),
            structured_error_msg=NONE,
            exit_code=pod.exit_code if pod else None,
            num_restarts=view.restarts_of(keys[name], k),
            restart_causes=view.restart_causes(keys[name], k),
            msg=msg,
        ))
    return [RoleStatus(role=name, replicas=replicas) for name, replicas in by_role.items()]


def _roles(view: AppView, app_id: str) -> List[Role]:
    """The roles as submitted, rebuilt from their JSON; one that no longer builds is left out."""
    from torchspec.specs.convert import build_role

    roles: List[Role] = []
    for spec in view.roles_json:
        try:
            roles.append(build_role(spec))
        except (KeyError, TypeError, ValueError) as e:
            logger.debug("cannot rebuild role %s of %s: %s", spec.get("name"), app_id, e)
    return roles


def describe_app(view: AppView, app_id: str) -> DescribeAppResponse:
    """What ``describe`` says of an app that exists: states, restarts and why, its roles, where it runs."""
    keys = {name: key for name, key, _ in view.role_names}
    labels = view.top[0]["metadata"].get("labels") or {}
    replica_restarts = max((view.restarts_of(keys[n], k) for n, k, _ in view.current()), default=0)
    return DescribeAppResponse(
        app_id=view.full_id,
        state=view.state,
        num_restarts=max(view.app_restarts, replica_restarts),
        msg=view.msg,
        roles_statuses=_role_statuses(view),
        roles=_roles(view, app_id),
        metadata={"namespace": view.namespace, "context": view.context or "", "flavor": view.flavor,
                  "session_name": labels.get(LABEL_SESSION, ""),
                  "objects": ", ".join(describe_obj(o) for o in view.top),
                  **{IMAGE_ID_PREFIX + name: pod.image_id for name, _, pod in view.current() if pod and pod.image_id}},
        labels=view.labels,
        name=view.app_name,
    )
