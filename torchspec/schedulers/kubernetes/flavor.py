"""What a flavor is: the questions every flavor module answers, and what its translator is given.

A flavor (``job``, ``jobset``, ``volcano``) is one way of running an app's
pods on Kubernetes.  Everything that differs between flavors is a method or
attribute of :class:`Flavor`, both ways round: what objects to create from
the shared pod templates (:meth:`Flavor.build`), and how to read those
objects back (:meth:`Flavor.controller_state`, :meth:`Flavor.roles_json`...).
Each flavor module subclasses it once; ``flavors.py`` lists them.  All of it
is pure: no module here talks to a cluster.
"""

from __future__ import annotations

import abc
import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from torchspec.errors import AppRefusedError
from torchspec.schedulers.kubernetes import attempt
from torchspec.schedulers.kubernetes.states import ANNOTATION_ROLES, ENV_JOB_COMPLETION_INDEX, JOB_INDEX_KEY, Obj
from torchspec.schedulers.replicas import ENV_REPLICA_ID, is_elastic
from torchspec.specs import AppDef, AppState, CfgVal, Role

#: A Kubernetes minor version, e.g. (1, 29); None where the user did not name one.
Version = Optional[Tuple[int, int]]


@dataclass
class Build:
    """What a flavor's translator gets: the app, the names and pod templates already made for it,
    and the run options that shape the flavor's own objects."""

    app: AppDef
    app_id: str
    #: role name -> role key (the role as a DNS label, see names.role_key)
    keys: Dict[str, str]
    #: role name -> the pod template every replica of the role runs from
    templates: Dict[str, Obj]
    k8s_version: Version
    ttl: Optional[int]
    queue: Optional[str]
    priority_class: Optional[str]
    namespace: Optional[str]
    labels: Dict[str, str] = field(default_factory=dict)
    #: annotations of every top-level object (the app's own labels, as ANNOTATION_METADATA)
    annotations: Dict[str, str] = field(default_factory=dict)
    #: Kueue's labels (queue name, workload priority class) for the object Kueue admits; empty without a queue
    kueue_labels: Dict[str, str] = field(default_factory=dict)
    #: the resolved run options, for those only some flavors take (``runtime``, ``clean_pod_policy``...)
    options: Mapping[str, CfgVal] = field(default_factory=dict)
    #: the app as the flavor runs it (:meth:`Flavor.adapt`); the templates were made from its roles
    run_app: Optional[AppDef] = None

    @property
    def suspend(self) -> bool:
        """Whether the object is created suspended, for Kueue to admit (it is whenever it names a queue)."""
        return bool(self.kueue_labels)

    def top_object(self, flavor: "Flavor", spec: Obj) -> Obj:
        """The flavor's one object holding the whole app: every role annotated, Kueue's labels on it."""
        meta = self.meta(self.app_id, roles_annotation(self.app))
        meta["labels"].update(self.kueue_labels)
        return {"apiVersion": flavor.api_version, "kind": flavor.kind, "metadata": meta, "spec": spec}

    @property
    def active_deadline(self) -> Optional[int]:
        """Seconds the app may run before it is failed (``-c active_deadline=``), None for no limit."""
        value = self.option("active_deadline")
        return None if value is None else int(value)

    def option(self, name: str) -> Any:
        """A run option's value, None where not given."""
        value = self.options.get(name)
        return None if value is None or value == "" else value

    def meta(self, name: str, annotations: Optional[Dict[str, str]] = None) -> Obj:
        """The metadata of a top-level object: the namespace only when the run option names one (so a
        dry run also applies with ``kubectl apply -n``), the app's labels, and ``annotations`` if any."""
        out: Obj = {"name": name}
        if self.namespace:
            out["namespace"] = self.namespace
        out["labels"] = dict(self.labels)
        if annotations is not None or self.annotations:
            out["annotations"] = {**self.annotations, **(annotations or {})}
        return out


def role_json(role: Role) -> Obj:
    """The role as spec-file data, as ``describe`` rebuilds it."""
    from torchspec.redaction import for_describe
    from torchspec.specs.convert import dump_app

    return for_describe(dump_app(AppDef(name="x", roles=[role]))["roles"][0])


def roles_annotation(app: AppDef) -> Dict[str, str]:
    """Every role, in order, as the one annotation a JobSet or Volcano Job carries."""
    return {ANNOTATION_ROLES: json.dumps([role_json(r) for r in app.roles], separators=(",", ":"))}


#: A place in the spec data (``("roles", 0, "port_map", "c10d")``), as lint positions a diagnostic.
SpecPath = Tuple[Any, ...]


@dataclass(frozen=True)
class Refusal:
    """One thing a flavor cannot carry, and where in the spec it is written."""

    path: SpecPath
    message: str


def refuse(flavor: str, refusals: Sequence[Refusal], hint: str) -> None:
    """Raise one :class:`AppRefusedError` naming every refusal (lint reports each at its place); nothing if none."""
    if refusals:
        raise AppRefusedError(f"flavor {flavor}: " + "; ".join(r.message for r in refusals),
                              hint, problems=tuple((r.path, r.message) for r in refusals))


def true_conditions(obj: Obj) -> Dict[str, Obj]:
    """The conditions of ``obj``'s status that hold, by type (``Complete``, ``Failed``, ``Suspended``...)."""
    return {c.get("type"): c for c in (obj.get("status") or {}).get("conditions") or []
            if c.get("status") == "True"}


def suspended_message(what: str, condition: Optional[Obj] = None) -> str:
    """Why a suspended object does not run: it waits for a queue (Kueue) to admit it."""
    why = (condition or {}).get("message") or ""
    return f"{what} is suspended, waiting for a queue to admit it (e.g. Kueue)" + (f": {why}" if why else "")


def operator_state(obj: Obj, what: str, succeeded: str, suspend: bool) -> Tuple[Optional[AppState], str]:
    """What a Kubeflow operator decided, from the conditions it writes (Created, Running, Restarting,
    Succeeded or Complete, Failed, Suspended); ``suspend`` is the object's own field, set before the
    operator has said anything.  None where the pods decide (created, running)."""
    conds = true_conditions(obj)
    if "Failed" in conds:
        failed = conds["Failed"]
        return AppState.FAILED, f"{what} failed: {failed.get('message') or failed.get('reason') or ''}".strip()
    if succeeded in conds:
        return AppState.SUCCEEDED, ""
    if "Suspended" in conds or suspend:
        return AppState.PENDING, suspended_message(what, conds.get("Suspended"))
    if "Restarting" in conds:
        return AppState.RUNNING, f"{what} is restarting: {conds['Restarting'].get('message') or ''}".strip(" :")
    return None, ""


class Flavor(abc.ABC):
    """One flavor: what it creates for an app, and how its controller's decisions are read back."""

    #: the value of ``-c flavor=``, and of the ``torchspec.dev/flavor`` label
    name: str
    #: what ``torchspec runopts kubernetes`` says of it
    summary: str
    #: the object that holds the whole app (or, for ``job``, each role) and carries torchspec's labels
    api_version: str
    kind: str
    plural: str
    #: a custom resource, created through the CustomObjectsApi (its CRD must be installed)
    custom: bool = True
    #: whether the ``queue`` run option is Kueue's (a label) rather than the flavor's own queue field
    kueue: bool = True
    #: whether pods need ``spec.subdomain`` set to the app's Service (the controller does not set it)
    subdomain: bool = False
    #: the pod scheduler the flavor needs, if not the default one
    scheduler_name: Optional[str] = None
    #: for a custom object holding pod templates: where each sits, by the name :meth:`pod_templates` gives it
    #: (``replicatedJobs`` for ``replicatedJobs[i]``: ``{i}`` is the role's index), for lint to place problems
    template_paths: Dict[str, str] = {}
    #: run options that only some flavors take (see options.FLAVOR_OPTIONS) and this one does
    takes: Tuple[str, ...] = ("ttl", "priority_class", "priority")
    #: run options that only some flavors take and this one cannot: why not (the refusal says it)
    lacks: Dict[str, str] = {}
    #: what the flavor does with each part of an app, for the kubernetes page's table (see flavors.carry_table)
    carries: Dict[str, str] = {}
    #: what :attr:`carries` says where a flavor does not say otherwise
    carries_by_default: Dict[str, str] = {"order": "refused: starts every role at once"}
    #: what the controllers write on a pod that adds up to its attempt number (see attempt.py): by default the
    #: Job controller's counts of the index's earlier pods
    attempt_parts: Tuple[Tuple[str, str], ...] = (attempt.FAILURES, attempt.DISRUPTIONS)
    #: ``NAME="$VALUE"`` the container's shell exports before the command runs (PyTorchJob: the rank)
    wrapper_exports: Tuple[str, ...] = ()

    def index_env(self) -> List[Obj]:
        """The env entries that give a pod ``TORCHSPEC_REPLICA_ID``: by default, from the index the Job
        controller annotates each pod of an Indexed Job with."""
        return [{"name": ENV_JOB_COMPLETION_INDEX,
                 "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{JOB_INDEX_KEY}']"}}},
                {"name": ENV_REPLICA_ID, "value": f"$({ENV_JOB_COMPLETION_INDEX})"}]

    def replica_host(self, app_id: str, key: str, k: int) -> str:
        """The DNS name of replica ``k`` of the role ``key``, resolvable from every pod of the app (same
        namespace): the hostname the controller gives the pod, under the app's headless Service."""
        return f"{app_id}-{key}-{k}.{app_id}"  # Indexed Job: {job}-{index}; Volcano svc plugin: {job}-{task}-{index}

    @abc.abstractmethod
    def build(self, b: Build) -> List[Obj]:
        """Every object of the app, in the order they are created."""

    @abc.abstractmethod
    def retry_how(self, role: Role, k8s_version: Version) -> str:
        """How ``role``'s retry policy maps onto this flavor, for the dry run's header."""

    @abc.abstractmethod
    def controller_state(self, top: List[Obj]) -> Tuple[Optional[AppState], str]:
        """What the controller decided from the app's ``top`` objects (None while it has not), and its message."""

    def roles_json(self, top: List[Obj]) -> List[Obj]:
        """The roles as submitted, in order (KeyError, ValueError... where the annotation is missing or broken)."""
        return list(json.loads(top[0]["metadata"]["annotations"][ANNOTATION_ROLES]))

    def restarts(self, status: Obj) -> int:
        """Whole-app restarts the controller counted, from the top object's ``status``."""
        return 0

    def app_restarts(self, top: List[Obj]) -> int:
        """Restarts of the app its top objects count (by default the first one's :meth:`restarts`)."""
        return self.restarts((top[0].get("status") or {}) if top else {})

    def pod_templates(self, obj: Obj) -> List[Tuple[str, Obj]]:
        """(where, pod template) of every pod template inside ``obj``, to validate them as Pods."""
        return []

    def companions(self, app_id: str) -> List[Obj]:
        """Objects of the app besides the top ones (enough of each to delete it): cancel deletes them first."""
        return []

    def adapt(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDef:
        """The app as this flavor runs it; an :class:`AppRefusedError` naming every part it cannot carry
        (:func:`refuse`).  The pod templates are made from what it returns."""
        return app

    def notes(self, b: Build) -> List[str]:
        """More lines for the dry run's header: what the flavor did with the app."""
        return []

    def order_refusals(self, app: AppDef) -> List[Refusal]:
        """Each ``depends_on`` the flavor cannot honour, at its place (by default all: its controller starts
        every role at once, and starting a role early would break the spec's promise)."""
        return [Refusal(("roles", i, "depends_on"), f"role {r.name!r} has depends_on, but a"
                        f" {self.api_version.split('/')[0]} {self.kind} starts every role at once") for i, r in enumerate(app.roles) if r.depends_on]

    def elastic_refusals(self, app: AppDef) -> List[Refusal]:
        """Each elastic role (``min_replicas`` < ``num_replicas``) the flavor cannot start with fewer pods: by
        default all, since its controller starts ``num_replicas`` pods and waits for each, so a role that says
        it can run on fewer would silently wait for all of them."""
        return [Refusal(("roles", i, "min_replicas"), f"role {r.name!r}: min_replicas={r.min_replicas} (of"
                        f" {r.num_replicas}): a {self.api_version.split('/')[0]} {self.kind} starts every replica"
                        " and cannot run on fewer") for i, r in enumerate(app.roles) if is_elastic(r)]

    def pod_index(self, pod: Obj, top: List[Obj]) -> Optional[int]:
        """The replica a pod of this flavor's controller runs, where the generic index keys do not say."""
        return None
