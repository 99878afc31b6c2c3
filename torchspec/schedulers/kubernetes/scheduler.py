"""The ``kubernetes`` Scheduler: submit, status, describe, list, logs, cancel, through the API server.

The lifecycle only: what to create comes from ``translate.py``, what the
objects and pods mean from ``status.py``, the calls and their errors from
``client.py``, following logs from ``logs.py``.  Every app is found again by
its labels, so any shell that reaches the cluster can do all of it.
"""

from __future__ import annotations

import copy
import logging
import re
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Mapping, Optional, Tuple

from torchspec.errors import BackendError, NotFoundError
from torchspec.times import utc_from_iso
from torchspec.schedulers.api import (
    AppEvent,
    Capability,
    DescribeAppResponse,
    ListAppResponse,
    RequestCheck,
    Scheduler,
    Stream,
    aware,
    check_replica,
)
from torchspec.schedulers.kubernetes.client import Cluster, api_error
from torchspec.schedulers.kubernetes.flavors import FLAVOR_TABLE
from torchspec.schedulers.kubernetes.job import FLAVOR as JOB_FLAVOR
from torchspec.schedulers.kubernetes.logs import ReplicaLog
from torchspec.schedulers.kubernetes.names import AppRef, app_name
from torchspec.schedulers.kubernetes.options import kubernetes_run_opts
from torchspec.schedulers.kubernetes.states import (
    ANNOTATION_ROLE_INDEX,
    DEFAULT_FLAVOR,
    KUEUE_WORKLOAD_API,
    LABEL_APP_ID,
    LABEL_FLAVOR,
    LABEL_KUEUE_JOB_UID,
    Obj,
)
from torchspec.schedulers.kubernetes.status import AppView, admission_message, describe_app, describe_obj, pod_view
from torchspec.schedulers.kubernetes.translate import KubernetesRequest, app_to_request
from torchspec.schedulers.replicas import make_app_id
from torchspec.schedulers.request_timeout import DEFAULT_S, for_cfg
from torchspec.specs import AppDef, AppDryRunInfo, AppState, CfgVal, runopts

if TYPE_CHECKING:
    import kubernetes

logger: logging.Logger = logging.getLogger(__name__)

#: The flavors whose apps are custom objects, searched for by name in table order.
_CUSTOM_FLAVORS = [f for f in FLAVOR_TABLE.values() if f.custom]


class KubernetesScheduler(Scheduler[Dict[str, CfgVal]]):
    """Runs each app as Kubernetes objects on the cluster the kubeconfig (or the pod's service account) points at.

    ``kubeconfig`` defaults to ``$KUBECONFIG`` (read at each call), else
    ``~/.kube/config``; without either, inside a pod, the in-cluster config.
    ``context`` and ``namespace`` override the kubeconfig's current ones for
    the status, logs, list and cancel calls; ``submit`` takes them as run options.
    A context or namespace in an app id (:class:`AppRef`) wins over both.
    """

    capabilities = frozenset({Capability.LOGS, Capability.FOLLOW_LOGS, Capability.LOG_WINDOW, Capability.DELETE, Capability.LABELS, Capability.ROLE_ORDER,
                              Capability.EVENTS})
    keeps_labels = True  # as an annotation of the app's objects

    def __init__(self, session_name: str, client: Optional["kubernetes.client.ApiClient"] = None,
                 kubeconfig: Optional[str] = None, context: Optional[str] = None,
                 namespace: Optional[str] = None, request_timeout: Optional[float] = None) -> None:
        super().__init__("kubernetes", session_name)
        self._cluster = Cluster(client=client, kubeconfig=kubeconfig, context=context, namespace=namespace,
                                request_timeout=request_timeout or DEFAULT_S)
        # (name, namespace, context) -> the flavor and resourceVersion its top-level objects were last read at
        self._read_at: Dict[Tuple[str, str, Optional[str]], Tuple[str, Optional[str]]] = {}

    # -- the cluster ---------------------------------------------------------

    def client(self, context: Optional[str] = None) -> "kubernetes.client.ApiClient":
        """An API client for ``context`` (default: the scheduler's, else the current one), or a
        :class:`BackendError` that says why there is none."""
        return self._cluster.client(context)

    def default_namespace(self, context: Optional[str] = None) -> str:
        """The scheduler's namespace, else the kubeconfig context's, else ``default``."""
        return self._cluster.default_namespace(context)

    def close(self) -> None:
        self._cluster.close()

    # -- submitting ---------------------------------------------------------

    def _run_opts(self) -> runopts:
        return kubernetes_run_opts()

    def _validate(self, app: AppDef, scheduler: str) -> None:
        """Accept roles without resources: such a pod gets what the node has (BestEffort)."""

    def request_check(self, cfg: Mapping[str, Any], settings: Mapping[str, Any]) -> "RequestCheck":
        """Lint validates the manifests against the Kubernetes schemas and the CRDs (see check.py), and with
        ``-c server_dry_run=True`` has the cluster dry-run them."""
        from torchspec.schedulers.kubernetes.check import manifest_check

        return manifest_check(cfg, settings, self._cluster)

    def _submit_dryrun(self, app: AppDef, cfg: Dict[str, CfgVal]) -> AppDryRunInfo[KubernetesRequest]:
        """The request; a scheduler made with a ``context`` submits through it as ``-c context=`` would,
        so the app id (and ``${app_id}``) carry it."""
        app_id = make_app_id(app_name(app.name))
        if self._cluster.context and not cfg.get("context"):
            cfg = {**cfg, "context": self._cluster.context}
        request = app_to_request(app, cfg, app_id, self.session_name)
        if cfg.get("server_dry_run"):
            self.server_dry_run(request, app)
        return AppDryRunInfo(request, str)

    def server_dry_run(self, request: KubernetesRequest, app: AppDef) -> None:
        """Have the cluster dry-run every object of ``request`` (``-c server_dry_run=True``; nothing is
        stored): manifests it finds invalid raise :class:`AppRefusedError` naming each field where ``app``'s
        spec writes it, any other refusal :class:`BackendError` with the server's reason (see
        server_dry_run.py).  Where it accepts them all, the request's header says so."""
        from torchspec.schedulers.kubernetes.server_dry_run import dry_run, raise_refusals
        from torchspec.specs.convert import dump_app

        namespace = request.namespace or self.default_namespace(request.context)
        refusals = dry_run(self._cluster, request.objects, namespace, request.context)
        raise_refusals(refusals, dump_app(app)["roles"] if refusals else [])
        request.notes.append(f"the API server at {self._cluster.where(request.context)} accepts every object in a"
                             f" dry run (dryRun=All, namespace {namespace}); nothing was created")

    def schedule(self, dryrun_info: AppDryRunInfo[KubernetesRequest]) -> str:
        """Create every object of the request, all or nothing; returns ``[CONTEXT:]NAMESPACE:NAME``.

        If one create fails, the objects created before it are deleted again
        (with their pods) and the error says which object failed and why.
        """
        request = dryrun_info.request
        self._cluster.request_timeout = for_cfg(dryrun_info._cfg, self._cluster.request_timeout)
        context = request.context
        namespace = request.namespace or self.default_namespace(context)
        created: List[Obj] = []
        for obj in request.objects:
            body = copy.deepcopy(obj)
            body["metadata"]["namespace"] = namespace
            try:
                self._cluster.create(body, context)
            except Exception as e:  # noqa: BLE001 - translated with what was left behind
                self._cluster.delete_objects(created, namespace, context)
                undone = (f"; deleted again what was created before it: "
                          f"{', '.join(describe_obj(o) for o in created)}" if created else "")
                error = api_error(e, f"creating {describe_obj(obj)} in namespace {namespace}",
                                  self._cluster.where(context), self._cluster.request_timeout)
                raise BackendError(error.message + undone, error.hint) from None
            created.append(body)
        return str(AppRef(name=request.app_id, namespace=namespace, context=context,
                          flavor=None if request.flavor == DEFAULT_FLAVOR else request.flavor))

    # -- reading ------------------------------------------------------------

    def resolve(self, app_id: str) -> Optional[AppRef]:
        """``app_id`` with its context and namespace filled in (the scheduler's or the kubeconfig's
        where the id has none); None for an id that cannot name an app here."""
        ref = AppRef.parse(app_id)
        if ref is None:
            return None
        context = ref.context or self._cluster.context
        return AppRef(name=ref.name, namespace=ref.namespace or self.default_namespace(context), context=context,
                      flavor=ref.flavor)

    def _find_top(self, name: str, namespace: str, context: Optional[str],
                  flavor: Optional[str] = None) -> Tuple[str, List[Obj]]:
        """The app's flavor and top-level objects: its Jobs (in role order), else the custom object of
        that name that carries the app's label; no objects where there is no such app.  With the
        ``flavor`` an app id names, only that kind is read."""
        where = f"reading app {name} in namespace {namespace}"
        if flavor not in (None, JOB_FLAVOR.name):
            custom = FLAVOR_TABLE.get(str(flavor))
            found = None if custom is None else self._cluster.get_custom(custom.api_version, custom.plural, namespace,
                                                                          name, where, context)
            if found is not None and (found["metadata"].get("labels") or {}).get(LABEL_APP_ID) == name:
                self._read_at[(name, namespace, context)] = (str(flavor), found["metadata"].get("resourceVersion"))
                return str(flavor), [found]
            return str(flavor) if custom is not None else DEFAULT_FLAVOR, []
        jobs = self._cluster.call(where, self._cluster.batch(context).list_namespaced_job, namespace,
                                  label_selector=f"{LABEL_APP_ID}={name},{LABEL_FLAVOR}={JOB_FLAVOR.name}",
                                  context=context)
        flavor = JOB_FLAVOR.name
        self._read_at[(name, namespace, context)] = (flavor, jobs.metadata.resource_version)
        if jobs.items:
            # list items of built-in kinds come without kind and apiVersion
            top = [{**self._cluster.as_json(j, context), "apiVersion": JOB_FLAVOR.api_version,
                    "kind": JOB_FLAVOR.kind} for j in jobs.items]
            top.sort(key=lambda j: int((j["metadata"].get("annotations") or {}).get(ANNOTATION_ROLE_INDEX, 0)))
            return flavor, top
        for custom in _CUSTOM_FLAVORS:
            flavor = custom.name
            found = self._cluster.get_custom(custom.api_version, custom.plural, namespace, name, where, context)
            if found is not None and (found["metadata"].get("labels") or {}).get(LABEL_APP_ID) == name:
                self._read_at[(name, namespace, context)] = (flavor, found["metadata"].get("resourceVersion"))
                return flavor, [found]
        return flavor, []

    def read_app(self, app_id: str) -> AppView:
        """Every object and pod of ``app_id``; an empty view (``exists`` False) when there are none."""
        ref = self.resolve(app_id)
        if ref is None:  # e.g. "default:x=y": no app can have that id; asking would be a selector error
            return AppView(app_id=app_id, namespace="", flavor=DEFAULT_FLAVOR, top=[], pods=[])
        name, namespace, context = ref.name, str(ref.namespace), ref.context
        flavor, top = self._find_top(name, namespace, context, ref.flavor)
        if not top:
            return AppView(app_id=name, namespace=namespace, flavor=flavor, top=[], pods=[], context=context)
        pods = self._cluster.call(f"reading app {name} in namespace {namespace}",
                                  self._cluster.core(context).list_namespaced_pod, namespace,
                                  label_selector=f"{LABEL_APP_ID}={name}", context=context)
        return self._view(name, namespace, context, flavor, top, pods.items)

    def _view(self, name: str, namespace: str, context: Optional[str], flavor: str, top: List[Obj],
              pods: List[Any]) -> AppView:
        """The app's view from its top-level objects and its pods (client models) as read."""
        impl = FLAVOR_TABLE[flavor]
        views = [pod_view(pod, impl.pod_index(pod, top))
                 for pod in (self._cluster.as_json(p, context) for p in pods)]
        view = AppView(app_id=name, namespace=namespace, flavor=flavor, top=top, pods=[v for v in views if v],
                       context=context)
        if view.queue and view.controller_state[0] == AppState.PENDING:
            view.admission = self._admission(view)
        return view

    def _admission(self, view: AppView) -> str:
        """Why Kueue has not admitted the app yet, from the Workloads it made for the app's objects; ``""``
        where it cannot be read (Kueue not installed, no rights to read Workloads)."""
        api_version, plural = KUEUE_WORKLOAD_API
        group, version = api_version.split("/")
        workloads: List[Obj] = []
        for obj in view.top:
            try:
                workloads += self._cluster.custom(view.context).list_namespaced_custom_object(
                    group, version, view.namespace, plural,
                    label_selector=f"{LABEL_KUEUE_JOB_UID}={obj['metadata'].get('uid', '')}")["items"]
            except Exception as e:  # noqa: BLE001 - best effort: the state is known without it
                logger.debug("cannot read Kueue workloads of %s: %s", view.app_id, e)
                return ""
        return admission_message(workloads)

    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        view = self.read_app(app_id)
        if not view.exists:
            return None
        return describe_app(view, app_id)

    def events(self, app_id: str) -> List[AppEvent]:
        """The cluster's Events of the app's objects and pods (:mod:`.events`)."""
        from torchspec.schedulers.kubernetes.events import app_events

        view = self.read_app(app_id)
        if not view.exists:
            return []
        listed = self._cluster.call(f"reading the events of app {view.app_id} in namespace {view.namespace}",
                                    self._cluster.core(view.context).list_namespaced_event, view.namespace,
                                    context=view.context)
        return app_events(view, [self._cluster.as_json(e, view.context) for e in listed.items])

    def wait_for_change(self, app_id: str, timeout: float) -> None:
        """Wake when the app's top-level objects change after they were last read (the API's watch, from the
        version read), or after ``timeout``.

        Their controllers record every pod's progress there (the counts of
        active, ready, succeeded and failed pods, the conditions), so a wait
        ends when the app does; what shows only on pods (a pod that cannot
        pull its image) is seen at the next poll.
        """
        deadline = time.monotonic() + max(0.0, timeout)
        ref = self.resolve(app_id)
        read = self._read_at.get((ref.name, str(ref.namespace), ref.context)) if ref is not None else None
        if ref is not None and read is not None and read[1]:
            flavor, version = read
            namespace, context = str(ref.namespace), ref.context
            if flavor == JOB_FLAVOR.name:
                watched = self._cluster.watch_once(
                    self._cluster.batch(context).list_namespaced_job, namespace, resource_version=version,
                    timeout=timeout, label_selector=f"{LABEL_APP_ID}={ref.name},{LABEL_FLAVOR}={JOB_FLAVOR.name}")
            else:
                custom = FLAVOR_TABLE[flavor]
                group, api_version = custom.api_version.split("/")
                watched = self._cluster.watch_once(
                    self._cluster.custom(context).list_namespaced_custom_object, group, api_version, namespace,
                    custom.plural, resource_version=version, timeout=timeout,
                    field_selector=f"metadata.name={ref.name}")
            if watched:
                return
        time.sleep(max(0.0, deadline - time.monotonic()))

    def _created_by_name(self, namespace: str, context: Optional[str]) -> Dict[str, Tuple[str, str, List[Obj]]]:
        """Every torchspec app in ``namespace``: its name -> (when its first object was created, its flavor,
        its top-level objects as _find_top reads them), from one list per kind."""
        where = f"listing apps in namespace {namespace}"
        found: Dict[str, Tuple[str, str, List[Obj]]] = {}
        jobs = self._cluster.call(where, self._cluster.batch(context).list_namespaced_job, namespace,
                                  label_selector=f"{LABEL_APP_ID},{LABEL_FLAVOR}={JOB_FLAVOR.name}", context=context)
        for job in jobs.items:
            name = job.metadata.labels[LABEL_APP_ID]
            stamp = job.metadata.creation_timestamp.isoformat() if job.metadata.creation_timestamp else ""
            obj = {**self._cluster.as_json(job, context), "apiVersion": JOB_FLAVOR.api_version,
                   "kind": JOB_FLAVOR.kind}
            top = (found[name][2] if name in found else []) + [obj]
            found[name] = (min(found[name][0], stamp) if name in found else stamp, JOB_FLAVOR.name, top)
        for name, (_, _, top) in found.items():
            top.sort(key=lambda j: int((j["metadata"].get("annotations") or {}).get(ANNOTATION_ROLE_INDEX, 0)))
        for custom in _CUSTOM_FLAVORS:
            group, version = custom.api_version.split("/")
            try:
                items = self._cluster.custom(context).list_namespaced_custom_object(
                    group, version, namespace, custom.plural, label_selector=LABEL_APP_ID)["items"]
            except Exception as e:  # noqa: BLE001
                if getattr(e, "status", None) == 404:
                    continue  # that CRD is not installed: no such apps
                raise api_error(e, where, self._cluster.where(context), self._cluster.request_timeout) from None
            for item in items:
                name = item["metadata"]["labels"][LABEL_APP_ID]
                if name == item["metadata"]["name"]:  # as _find_top: the object named after the app
                    found.setdefault(name, (item["metadata"].get("creationTimestamp", ""), custom.name, [item]))
        return found

    def list(self) -> List[ListAppResponse]:
        """Every torchspec app in the namespace, oldest first, found by label.

        The cluster cannot tell which kubeconfig context an app was submitted
        through, so the ids name the scheduler's context if it has one, else none.
        """
        context = self._cluster.context
        return self._list(self.default_namespace(context), context)

    def list_where(self, cfg: Mapping[str, Any]) -> List[ListAppResponse]:
        """The apps in the namespace (and through the context) the run options ``namespace``/``context`` name."""
        context = str(cfg["context"]) if cfg.get("context") else self._cluster.context
        namespace = str(cfg["namespace"]) if cfg.get("namespace") else self.default_namespace(context)
        self._cluster.request_timeout = for_cfg(cfg, self._cluster.request_timeout)
        return self._list(namespace, context)

    def _list(self, namespace: str, context: Optional[str]) -> List[ListAppResponse]:
        """The apps of ``namespace`` from one list of each kind and one of their pods, not two reads per app
        (``apply`` lists before it plans: with nothing changed, that is all it asks)."""
        found = self._created_by_name(namespace, context)
        pods: Dict[str, List[Any]] = {}
        if found:
            listed = self._cluster.call(f"listing apps in namespace {namespace}",
                                        self._cluster.core(context).list_namespaced_pod, namespace,
                                        label_selector=LABEL_APP_ID, context=context)
            for pod in listed.items:
                pods.setdefault((pod.metadata.labels or {}).get(LABEL_APP_ID, ""), []).append(pod)
        out = []
        for name in sorted(found, key=lambda n: (found[n][0], n)):
            _, flavor, top = found[name]
            view = self._view(name, namespace, context, flavor, top, pods.get(name, []))
            if view.exists:
                out.append(ListAppResponse(app_id=view.full_id, state=view.state, labels=view.labels,
                                           created=utc_from_iso(found[name][0])))
        return out

    def exists(self, app_id: str) -> bool:
        return self.read_app(app_id).exists

    # -- cancelling and deleting -------------------------------------------------

    def _cancel_existing(self, app_id: str) -> None:
        """Delete the app's objects with Foreground propagation, so their pods go too."""
        view = self.read_app(app_id)
        objs = view.flavor_impl.companions(view.app_id) + list(view.top)
        self._cluster.delete_objects(objs, view.namespace, view.context)

    def delete(self, app_id: str) -> None:
        """The same as cancel: nothing of a cancelled app stays behind (logs go with the pods)."""
        if self.exists(app_id):
            self._cancel_existing(app_id)

    # -- logs ---------------------------------------------------------------

    def log_iter(
        self,
        app_id: str,
        role_name: str,
        k: int = 0,
        regex: Optional[str] = None,
        since: Optional[datetime] = None,
        until: Optional[datetime] = None,
        should_tail: bool = False,
        streams: Optional[Stream] = None,
    ) -> Iterable[str]:
        """Lines of replica ``k`` of ``role_name``, from every pod it ran in (a failed pod's
        replacement follows a ``--- torchspec: restart N of replica ROLE/K ---`` line).

        The kubelet timestamps each line; ``since`` (inclusive) and ``until``
        (exclusive) select on that.  With ``should_tail`` the iterator follows
        the replica, through replacement pods, until it can produce no more.
        Kubernetes keeps stdout and stderr together, so only ``combined`` exists.
        """
        if streams not in (None, Stream.COMBINED, "combined"):
            raise NotFoundError("Kubernetes keeps a container's stdout and stderr together: only combined logs exist")
        view = self.read_app(app_id)
        if not view.exists:
            raise NotFoundError(f"unknown app {app_id!r} on the cluster")
        names = {name: (key, n) for name, key, n in view.role_names}
        check_replica(app_id, role_name, k, {name: n for name, (_, n) in names.items()})
        key, n = names[role_name]
        log = ReplicaLog(self._cluster, self.read_app, app_id, role_name, key, k,
                         pattern=re.compile(regex) if regex else None, since=aware(since), until=aware(until),
                         should_tail=should_tail)
        return log.lines()
