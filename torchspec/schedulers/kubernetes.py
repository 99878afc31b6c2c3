"""The ``kubernetes`` scheduler: an app is a set of Kubernetes objects, in one of three flavors.

A run option ``flavor`` picks what torchspec creates:

    job       per role one ``batch/v1`` Job (Indexed, completions = parallelism
              = num_replicas) plus one headless Service per app; works on any
              cluster (the default)
    jobset    one ``jobset.x-k8s.io/v1alpha2`` JobSet, a replicated job per role
              (needs the JobSet controller)
    volcano   one ``batch.volcano.sh/v1alpha1`` Job, a task per role, gang
              scheduled (needs Volcano)

All three use the same pod template per role (:func:`pod_template`).  The
replicas of a role share that template, so per-replica values cannot be
written into it: ``${replica_id}`` becomes ``$(TORCHSPEC_REPLICA_ID)``, which
Kubernetes itself expands in ``args`` and ``env`` from a variable the
downward API fills with the pod's index (the completion index the Job
controller writes on each pod, or Volcano's task index).

Everything torchspec needs to know about an app lives in the cluster, as
labels and annotations, so ``status``, ``logs``, ``list``, ``describe`` and
``cancel`` work from any shell that reaches the cluster, with no local state:

    torchspec.dev/app-id      the app's name (also the prefix of every object name)
    torchspec.dev/role-name   the role's key (a DNS label made of its name), on pods
    torchspec.dev/flavor      job, jobset or volcano, on the top-level objects
    torchspec.dev/version     the torchspec that created the app
    torchspec.dev/role(s)     annotation: the role(s) as submitted, as JSON, for ``describe``

App ids are ``NAMESPACE:NAME`` (as in TorchX), or ``CONTEXT:NAMESPACE:NAME`` for
an app submitted with ``-c context=...``: a kubeconfig context is a client-side
name the cluster knows nothing of, so the id has to carry it for ``status``,
``logs`` and ``cancel`` to reach the same cluster later (see :class:`AppRef`).
``${app_id}`` in a role's args and env, and ``TORCHSPEC_APP_ID``, are that
same id, so ``TORCHSPEC_JOB_ID`` is the app's real handle.

Retries map onto each flavor's own mechanism (see :func:`retry_notes` and the
README): nothing of torchspec needs to keep running after ``submit``.

The module reads in the order every scheduler module does: labels and state
maps, the request whose ``__str__`` is what a dry run prints, the pure
translator (AppDef -> request), reading the cluster back, the options, the
scheduler class, validation against the official schemas, ``create_scheduler``.
The ``kubernetes`` package is imported only inside functions that talk to a
cluster, so rendering manifests never pays for it.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import re
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Pattern, Sequence, \
    Tuple

from torchspec.errors import BackendError
from torchspec.schedulers.api import DescribeAppResponse, ListAppResponse, Scheduler, Stream, aware
from torchspec.schedulers.logfile import stamped_lines
from torchspec.schedulers.replicas import (
    ENV_APP_ID,
    ENV_NUM_REPLICAS,
    ENV_RANK0_HOST,
    ENV_REPLICA_ID,
    ENV_ROLE_NAME,
    dns_label,
    make_app_id,
)
from torchspec.specs import (
    NONE,
    AppDef,
    AppDryRunInfo,
    AppState,
    BindMount,
    CfgVal,
    DeviceMount,
    ReplicaStatus,
    RetryPolicy,
    Role,
    RoleStatus,
    VolumeMount,
    macros,
    runopts,
)
from torchspec.version import __version__

if TYPE_CHECKING:
    import kubernetes

logger: logging.Logger = logging.getLogger(__name__)

Obj = Dict[str, Any]

# ----------------------------------------------------------------------------
# Labels, names and state maps
# ----------------------------------------------------------------------------

LABEL_APP_ID = "torchspec.dev/app-id"
LABEL_ROLE_NAME = "torchspec.dev/role-name"
LABEL_FLAVOR = "torchspec.dev/flavor"
LABEL_VERSION = "torchspec.dev/version"
LABEL_SESSION = "torchspec.dev/session"
#: Annotation of a ``job``-flavor Job: its role as JSON; and the role's position in the app.
ANNOTATION_ROLE = "torchspec.dev/role"
ANNOTATION_ROLE_INDEX = "torchspec.dev/role-index"
#: Annotation of a JobSet or Volcano Job: every role, in order, as a JSON list.
ANNOTATION_ROLES = "torchspec.dev/roles"
#: Kueue picks up workloads that carry this label (the LocalQueue's name).
LABEL_KUEUE_QUEUE = "kueue.x-k8s.io/queue-name"

#: Where the Job controller writes a pod's index (annotation since 1.21, also a label since 1.28).
JOB_INDEX_KEY = "batch.kubernetes.io/job-completion-index"
#: Where Volcano writes a pod's index within its task (label; some releases also annotate it).
VOLCANO_INDEX_KEY = "volcano.sh/task-index"
#: The variable Indexed Jobs know their index by; declared explicitly so ``$(...)`` can use it.
ENV_JOB_COMPLETION_INDEX = "JOB_COMPLETION_INDEX"
#: What ``${replica_id}`` becomes: Kubernetes expands ``$(VAR)`` in command, args and env values.
REPLICA_ID_REF = f"$({ENV_REPLICA_ID})"
#: The pod's namespace, from the downward API: the namespace part of ``${app_id}`` refers to it, so
#: the id is right even for a dry run applied with ``kubectl apply -n NS`` (no namespace in the manifests).
ENV_NAMESPACE = "TORCHSPEC_NAMESPACE"
NAMESPACE_REF = f"$({ENV_NAMESPACE})"

FLAVOR_JOB = "job"
FLAVOR_JOBSET = "jobset"
FLAVOR_VOLCANO = "volcano"
FLAVORS = (FLAVOR_JOB, FLAVOR_JOBSET, FLAVOR_VOLCANO)

#: Role metadata key: a JSON merge patch (RFC 7386) applied to the role's pod template.
META_POD_PATCH = "kubernetes.pod_patch"
#: Resource capability naming the extended resource a role's ``gpu`` count asks for.
CAP_GPU_RESOURCE = "kubernetes.gpu_resource"
DEFAULT_GPU_RESOURCE = "nvidia.com/gpu"
#: The first Kubernetes release where ``backoffLimitPerIndex`` is on by default (beta).
PER_INDEX_MIN_VERSION = (1, 29)
#: How long ``logs -f`` waits for a failed replica's replacement pod before it stops following.
RETRY_WAIT_S = 120

_JOB_API = ("batch/v1", "Job")
_JOBSET_API = ("jobset.x-k8s.io/v1alpha2", "JobSet")
_VOLCANO_API = ("batch.volcano.sh/v1alpha1", "Job")

#: Volcano's job phases (status.state.phase).
_VOLCANO_STATES: Dict[str, AppState] = {
    "Pending": AppState.PENDING,
    "Inqueue": AppState.PENDING,
    "Running": AppState.RUNNING,
    "Restarting": AppState.RUNNING,
    "Completing": AppState.RUNNING,
    "Completed": AppState.SUCCEEDED,
    "Aborting": AppState.FAILED,
    "Aborted": AppState.FAILED,
    "Terminating": AppState.FAILED,
    "Terminated": AppState.FAILED,
    "Failed": AppState.FAILED,
}
_POD_PHASES: Dict[str, AppState] = {
    "Pending": AppState.PENDING,
    "Running": AppState.RUNNING,
    "Succeeded": AppState.SUCCEEDED,
    "Failed": AppState.FAILED,
    "Unknown": AppState.UNKNOWN,
}
#: Waiting reasons that mean the pod cannot start as it is, spelled out for ``status``.
_WAITING_TROUBLE = {
    "ErrImagePull": "cannot pull its image",
    "ImagePullBackOff": "cannot pull its image",
    "InvalidImageName": "has an invalid image name",
    "CreateContainerConfigError": "cannot be configured (a missing ConfigMap or Secret?)",
    "CrashLoopBackOff": "keeps crashing",
}


#: Kubernetes' own name rules (apimachinery's validation), checked here so a bad value is a usage error at
#: dry run and in ``torchspec lint``, not a 422 from the API server (or, worse, text nobody meant as a name).
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_QUALIFIED_NAME = re.compile(r"(?:(?P<prefix>[^/]+)/)?(?P<name>[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
#: A resource quantity (``2Gi``, ``512M``, ``1.5e9``), without a sign: no size here can be negative.
_QUANTITY = re.compile(r"\+?(\d+(\.\d*)?|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E|[eE][-+]?\d+)?")


def is_dns_label(text: str) -> bool:
    """A DNS-1123 label: what namespaces, Services and the Jobs' pod hostnames must be."""
    return len(text) <= 63 and _DNS1123_LABEL.fullmatch(text) is not None


def is_dns_subdomain(text: str) -> bool:
    """A DNS-1123 subdomain: what most object names (Secrets, ServiceAccounts, PriorityClasses) must be."""
    return len(text) <= 253 and _DNS1123_SUBDOMAIN.fullmatch(text) is not None


def is_qualified_name(text: str) -> bool:
    """A label key or resource name: ``[DNS subdomain/]name`` with a name of at most 63 characters."""
    match = _QUALIFIED_NAME.fullmatch(text)
    return match is not None and len(match["name"]) <= 63 and (
        match["prefix"] is None or is_dns_subdomain(match["prefix"]))


def is_label_value(text: str) -> bool:
    """What a label's value may be (the Kueue queue, a node label a capability selects on)."""
    return len(text) <= 63 and _LABEL_VALUE.fullmatch(text) is not None


@dataclass(frozen=True)
class AppRef:
    """Where an app lives, as its app id says: ``[CONTEXT:]NAMESPACE:NAME``, or a bare ``NAME``.

    ``context`` is None for the scheduler's context (else the kubeconfig's
    current one), ``namespace`` None for that context's namespace.  The
    context comes first and may itself hold ``:`` (EKS contexts are ARNs), so
    the id is split from the right: namespace and name are DNS labels and
    never hold one.  A handle's app id may not hold ``/`` (the handle's last
    ``/`` ends the session name), so ``/`` in a context is written ``%2F``
    (and ``%`` as ``%25``).
    """

    name: str
    namespace: Optional[str] = None
    context: Optional[str] = None

    def __str__(self) -> str:
        parts = [self.name]
        if self.namespace is not None or self.context is not None:
            parts.insert(0, self.namespace or "")
        if self.context is not None:
            parts.insert(0, self.context.replace("%", "%25").replace("/", "%2F"))
        return ":".join(parts)

    @classmethod
    def parse(cls, app_id: str) -> Optional["AppRef"]:
        """The parts of ``app_id``; None when it cannot be an app of this scheduler (a namespace or name
        that is no DNS label, an empty context), so that such an id is an unknown app, not an API error."""
        from urllib.parse import unquote

        context: Optional[str] = None
        namespace: Optional[str] = None
        rest, has_namespace, name = app_id.rpartition(":")
        if has_namespace:
            context_text, has_context, namespace = rest.rpartition(":")
            if has_context:
                context = unquote(context_text)
                if not context:
                    return None
            if has_context and not namespace:
                namespace = None  # CONTEXT::NAME: that context's namespace
            elif not is_dns_label(namespace):
                return None
        if not is_dns_label(name):
            return None
        return cls(name=name, namespace=namespace, context=context)


# ----------------------------------------------------------------------------
# The request: what ``dryrun`` prints and ``schedule`` creates
# ----------------------------------------------------------------------------


@dataclass
class KubernetesRequest:
    """Every object ``schedule`` creates for one app, in the order it creates them.

    ``str()`` is a multi-document YAML file that ``kubectl apply -f`` (and
    GitOps controllers) accept as it is; the header is YAML comments.  Objects
    carry a namespace only when the ``namespace`` run option was given, so a
    dry run can also be applied with ``kubectl apply -n NS``.
    """

    app_id: str
    namespace: Optional[str]
    flavor: str
    objects: List[Obj]
    notes: List[str] = field(default_factory=list)
    context: Optional[str] = None

    def __str__(self) -> str:
        import yaml

        where = f"namespace {self.namespace}" if self.namespace else "the current context's namespace"
        lines = [f"# torchspec kubernetes app {self.app_id} (flavor {self.flavor}, {where})"]
        lines += [f"# {note}" for note in self.notes]
        body = yaml.safe_dump_all(self.objects, sort_keys=False, default_flow_style=False, width=120)
        return "\n".join(lines) + "\n---\n" + body


# ----------------------------------------------------------------------------
# Pure translator: AppDef + cfg -> request
# ----------------------------------------------------------------------------


def role_key(app_id: str, role_name: str) -> str:
    """The role as a DNS label, short enough that ``{app_id}-{key}-{k}`` (and JobSet's
    ``{app_id}-{key}-0-{k}``) stays a valid 63-character hostname for up to a million replicas."""
    return dns_label(role_name, max_len=max(1, 52 - len(app_id)))


def app_name(name: str) -> str:
    """The DNS-1035 label an app id starts with: Service names must begin with a letter."""
    label = dns_label(name, max_len=40)
    return label if label[0].isalpha() else f"app-{label}"[:40].rstrip("-")


def _label_value(text: str) -> str:
    """``text`` as a label value (63 characters of ``[A-Za-z0-9._-]``, alphanumeric at both ends)."""
    value = re.sub(r"[^A-Za-z0-9._-]+", "-", text)[:63]
    return re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", value)


def _port_name(name: str) -> Optional[str]:
    """A port name Kubernetes accepts (IANA service name: 15 chars, a letter, no ``--``), or None."""
    label = re.sub(r"-+", "-", dns_label(name, max_len=15)).strip("-")
    return label if re.search(r"[a-z]", label) else None


def _escape_refs(text: str) -> str:
    """Keep a ``$(...)`` the user wrote literal: Kubernetes would otherwise expand it from the env."""
    return text.replace("$(", "$$(")


_REPLICA_SENTINEL = "\x00torchspec-replica-id\x00"
_NAMESPACE_SENTINEL = "\x00torchspec-namespace\x00"


def _substitute(value: str, values: macros.Values) -> str:
    """Fill in the macros, then make ``${replica_id}`` a ``$(TORCHSPEC_REPLICA_ID)`` reference that
    Kubernetes expands per pod (and the namespace in ``${app_id}`` a ``$(TORCHSPEC_NAMESPACE)`` one);
    ``$(`` the user wrote stays literal."""
    return _escape_refs(values.substitute(value)).replace(_REPLICA_SENTINEL, REPLICA_ID_REF) \
        .replace(_NAMESPACE_SENTINEL, NAMESPACE_REF)


def full_app_id(name: str, context: Optional[str]) -> str:
    """The app id ``schedule`` returns, as a pod's env and args get it (``${app_id}``, ``TORCHSPEC_APP_ID``):
    ``[CONTEXT:]$(TORCHSPEC_NAMESPACE):NAME``, the namespace filled in by Kubernetes from the pod's own.

    The runner sets ``TORCHSPEC_JOB_ID`` to ``kubernetes://SESSION/${app_id}``, so this is what makes
    that variable the handle ``status`` and ``cancel`` take.  A context is known at dry run (it is a run
    option); the namespace may not be (a dry run may be applied with ``kubectl apply -n``), hence the
    reference rather than a value.
    """
    return _escape_refs(_app_id_macro(name, context)).replace(_NAMESPACE_SENTINEL, NAMESPACE_REF)


def _app_id_macro(name: str, context: Optional[str]) -> str:
    """What ``${app_id}`` is substituted with before :func:`_substitute` escapes the result and turns
    the namespace's sentinel into a reference."""
    return str(AppRef(name=name, namespace=_NAMESPACE_SENTINEL, context=context))


def parse_version(text: Optional[str]) -> Optional[Tuple[int, int]]:
    """``"1.28"``, ``"v1.28.3"`` -> (1, 28); None for None or ``""``."""
    if not text:
        return None
    match = re.fullmatch(r"v?(\d+)\.(\d+)(?:\.\d+)?(?:[-+].*)?", str(text).strip())
    if match is None:
        raise ValueError(f"run option k8s_version must look like 1.29, not {text!r}")
    return int(match.group(1)), int(match.group(2))


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: mappings merge key by key, ``null`` deletes, anything else replaces."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result = copy.deepcopy(dict(target)) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _resources(role: Role) -> Obj:
    """Requests and limits (equal, so the pod is Guaranteed and the scheduler reserves what it uses)."""
    res = role.resource
    amounts: Dict[str, Any] = {}
    if res.cpu > 0:
        amounts["cpu"] = str(res.cpu)
    if res.memMB > 0:
        amounts["memory"] = f"{res.memMB}Mi"
    if res.gpu > 0:
        amounts[res.capabilities.get(CAP_GPU_RESOURCE) or DEFAULT_GPU_RESOURCE] = str(res.gpu)
    for name, count in res.devices.items():
        if count > 0:
            amounts[name] = str(count)
    return {"requests": dict(amounts), "limits": dict(amounts)} if amounts else {}


def _is_node_label(key: str) -> bool:
    """Capabilities whose key looks like a label key (``node.kubernetes.io/instance-type``) select nodes."""
    return "/" in key and not key.startswith("kubernetes.")


def check_capabilities(role: Role) -> None:
    """Refuse, with ValueError naming the capability, one Kubernetes would get as text nobody meant.

    ``kubernetes.*`` capabilities are this scheduler's (a typo would be
    silently ignored); ``kubernetes.gpu_resource`` must be a resource name
    (``amd.com/gpu``), not any value ``str()`` happens to turn into one; a
    node-label capability must be a valid label value (text or an integer).
    Other capabilities belong to other schedulers and are left alone.
    """
    for key, value in role.resource.capabilities.items():
        where = f"role {role.name!r}: capability {key!r}"
        if key == CAP_GPU_RESOURCE:
            if not isinstance(value, str) or not is_qualified_name(value):
                raise ValueError(f"{where} must name an extended resource, e.g. {DEFAULT_GPU_RESOURCE!r},"
                                 f" not {value!r}")
        elif key.startswith("kubernetes."):
            raise ValueError(f"{where} is not one the kubernetes scheduler knows (it knows {CAP_GPU_RESOURCE!r})")
        elif _is_node_label(key):
            if not is_qualified_name(key):
                raise ValueError(f"{where} is used as a node label key (nodeSelector) but is not a valid one")
            if isinstance(value, bool) or not isinstance(value, (str, int)) or not is_label_value(str(value)):
                raise ValueError(f"{where} is a node label (nodeSelector): its value must be text or an integer"
                                 f" of at most 63 letters, digits, '-', '_' or '.', not {value!r}")


def _node_selector(role: Role) -> Dict[str, str]:
    """Capabilities that are node labels (``node.kubernetes.io/instance-type: p3.8xlarge``), checked
    by :func:`check_capabilities`."""
    return {key: str(value) for key, value in role.resource.capabilities.items() if _is_node_label(key)}


def _mounts(role: Role) -> Tuple[List[Obj], List[Obj], bool]:
    """Pod volumes, container volumeMounts, and whether the container must be privileged.

    bind -> hostPath, volume -> the PersistentVolumeClaim named ``src``, device
    -> hostPath of the device node with a privileged container (the only way
    a pod gets at host devices without a device plugin).  ``/dev/shm`` is
    always a memory-backed emptyDir: the container runtime's 64 MB default
    breaks PyTorch data loaders.
    """
    volumes: List[Obj] = [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]
    mounts: List[Obj] = [{"name": "dshm", "mountPath": "/dev/shm"}]
    privileged = False
    for i, mount in enumerate(role.mounts):
        if isinstance(mount, BindMount):
            if not os.path.isabs(mount.src_path):
                raise ValueError(f"role {role.name!r}: bind mount source {mount.src_path!r} must be an absolute"
                                 " path on the node")
            volumes.append({"name": f"mount-{i}", "hostPath": {"path": mount.src_path}})
            mounts.append({"name": f"mount-{i}", "mountPath": mount.dst_path, "readOnly": mount.read_only})
        elif isinstance(mount, VolumeMount):
            if not re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", mount.src) or len(mount.src) > 253:
                raise ValueError(f"role {role.name!r}: volume {mount.src!r} is not a valid PersistentVolumeClaim name")
            volumes.append({"name": f"mount-{i}", "persistentVolumeClaim": {"claimName": mount.src,
                                                                              "readOnly": mount.read_only}})
            mounts.append({"name": f"mount-{i}", "mountPath": mount.dst_path, "readOnly": mount.read_only})
        elif isinstance(mount, DeviceMount):
            volumes.append({"name": f"mount-{i}", "hostPath": {"path": mount.src_path}})
            mounts.append({"name": f"mount-{i}", "mountPath": mount.dst_path, "readOnly": "w" not in mount.permissions})
            privileged = True
    return volumes, mounts, privileged


def _env(role: Role, app_id: str, flavor: str, rank0_host: str, values: macros.Values) -> List[Obj]:
    """The container's env: the index and the namespace first (later entries may refer to them as
    ``$(...)``), torchspec's variables, then the role's own (torchspec's win), ``PYTHONUNBUFFERED=1``
    unless set.  ``app_id`` is the full one (:func:`full_app_id`)."""
    env: List[Obj] = []
    if flavor == FLAVOR_VOLCANO:
        env.append({"name": ENV_REPLICA_ID,
                    "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{VOLCANO_INDEX_KEY}']"}}})
    else:
        env.append({"name": ENV_JOB_COMPLETION_INDEX,
                    "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{JOB_INDEX_KEY}']"}}})
        env.append({"name": ENV_REPLICA_ID, "value": f"$({ENV_JOB_COMPLETION_INDEX})"})
    env.append({"name": ENV_NAMESPACE, "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}})
    ours = {ENV_APP_ID: app_id, ENV_ROLE_NAME: role.name, ENV_NUM_REPLICAS: str(role.num_replicas),
            ENV_RANK0_HOST: rank0_host}
    env += [{"name": k, "value": v} for k, v in ours.items()]
    taken = set(ours) | {ENV_REPLICA_ID, ENV_JOB_COMPLETION_INDEX, ENV_NAMESPACE}
    for key, value in role.env.items():
        if key not in taken:
            env.append({"name": key, "value": _substitute(value, values)})
            taken.add(key)
    if "PYTHONUNBUFFERED" not in taken:
        env.append({"name": "PYTHONUNBUFFERED", "value": "1"})
    return env


def replica_host(app_id: str, key: str, flavor: str, k: int) -> str:
    """The DNS name of replica ``k`` of the role ``key``, resolvable from every pod of the app (same
    namespace): the hostname the flavor's controller gives the pod, under the app's headless Service."""
    if flavor == FLAVOR_JOBSET:
        return f"{app_id}-{key}-0-{k}.{app_id}"  # {jobset}-{replicated job}-{job index}-{pod index}
    return f"{app_id}-{key}-{k}.{app_id}"  # Indexed Job: {job}-{index}; Volcano svc plugin: {job}-{task}-{index}


def rank0_host(app_id: str, key: str, flavor: str) -> str:
    return replica_host(app_id, key, flavor, 0)


def app_labels(app_id: str, flavor: str, session_name: str) -> Dict[str, str]:
    return {LABEL_APP_ID: app_id, LABEL_FLAVOR: flavor, LABEL_SESSION: _label_value(session_name),
            LABEL_VERSION: _label_value(__version__)}


def pod_template(role: Role, app_id: str, flavor: str, cfg: Mapping[str, CfgVal], session_name: str) -> Obj:
    """The pod template every replica of ``role`` runs from, the same for every flavor but for the
    index variable and the DNS settings each flavor's controller provides; ``kubernetes.pod_patch``
    applied last and checked.

    ``app_id`` is the app's name; ``${app_id}`` in args and env becomes the full app id
    (:func:`full_app_id`), as the handle has it.  In ``kubernetes.pod_patch`` it stays the name: the
    fields of a pod template other than command, args and env cannot expand ``$(...)``, and most of them
    (labels, names) need a DNS name.
    """
    key = role_key(app_id, role.name)
    check_capabilities(role)
    context = str(cfg["context"]) if cfg.get("context") else None
    values = macros.Values(img_root="", app_id=_app_id_macro(app_id, context),
                           replica_id=_REPLICA_SENTINEL, rank0_env=ENV_RANK0_HOST)
    filled = macros.Values(img_root="", app_id=app_id, replica_id=_REPLICA_SENTINEL,
                           rank0_env=ENV_RANK0_HOST).apply(role)
    volumes, volume_mounts, privileged = _mounts(role)
    container: Obj = {
        "name": key,
        "image": role.image,
        "command": [_escape_refs(filled.entrypoint)],
        "args": [_substitute(arg, values) for arg in role.args],
        "env": _env(role, full_app_id(app_id, context), flavor, rank0_host(app_id, key, flavor), values),
        "resources": _resources(role),
        "volumeMounts": volume_mounts,
    }
    ports = [{"containerPort": int(port), **({"name": _port_name(name)} if _port_name(name) else {})}
             for name, port in sorted(role.port_map.items(), key=lambda item: item[1])]
    if ports:
        seen: set = set()
        container["ports"] = [p for p in ports if not (p.get("name") in seen or seen.add(p.get("name")))]
    if privileged or cfg.get("privileged"):
        container["securityContext"] = {"privileged": True}
    spec: Obj = {"restartPolicy": "Never", "containers": [container], "volumes": volumes}
    if flavor == FLAVOR_JOB:
        spec["subdomain"] = app_id  # with the Indexed Job's hostname {job}-{k}: {job}-{k}.{app_id}
    if cfg.get("service_account"):
        spec["serviceAccountName"] = str(cfg["service_account"])
    secrets = cfg.get("image_pull_secrets") or []
    if secrets:
        spec["imagePullSecrets"] = [{"name": str(s)} for s in secrets]  # type: ignore[union-attr]
    if cfg.get("priority_class"):
        spec["priorityClassName"] = str(cfg["priority_class"])
    if flavor == FLAVOR_VOLCANO:
        spec["schedulerName"] = "volcano"
    selector = _node_selector(role)
    if selector:
        spec["nodeSelector"] = selector
    if cfg.get("shm_size"):
        volumes[0]["emptyDir"]["sizeLimit"] = str(cfg["shm_size"])
    template: Obj = {"metadata": {"labels": {LABEL_APP_ID: app_id, LABEL_ROLE_NAME: key,
                                             LABEL_VERSION: _label_value(__version__)}},
                     "spec": spec}
    patch = filled.metadata.get(META_POD_PATCH)
    if patch is not None:
        template = apply_pod_patch(role.name, template, patch)
    return template


def apply_pod_patch(role_name: str, template: Obj, patch: Any) -> Obj:
    """``template`` with the role's ``kubernetes.pod_patch`` merged in (RFC 7386), or ValueError.

    The patch is a mapping (or its JSON text) shaped like a pod template
    (``metadata``, ``spec``).  The result must still be a pod: one or more
    containers with a name and an image, and, where ``kubernetes-validate``
    is installed, a Pod the newest bundled Kubernetes schema accepts.
    """
    where = f"role {role_name!r}: {META_POD_PATCH}"
    if isinstance(patch, str):
        try:
            patch = json.loads(patch)
        except ValueError as e:
            raise ValueError(f"{where} is not valid JSON: {e}") from None
    if not isinstance(patch, Mapping):
        raise ValueError(f"{where} must be a mapping (a JSON merge patch of the pod template), "
                         f"not {type(patch).__name__}")
    unknown = set(patch) - {"metadata", "spec"}
    if unknown:
        raise ValueError(f"{where} may only patch metadata and spec of the pod template, not {sorted(unknown)}")
    result = merge_patch(template, json.loads(json.dumps(patch)))
    containers = (result.get("spec") or {}).get("containers")
    if not isinstance(containers, list) or not containers or not all(
            isinstance(c, Mapping) and c.get("name") and c.get("image") for c in containers):
        raise ValueError(f"{where} leaves no valid containers: every container needs a name and an image")
    try:
        import kubernetes_validate
    except ImportError:
        return result
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x", **(result.get("metadata") or {})},
           "spec": result.get("spec")}
    try:
        kubernetes_validate.validate(pod, kubernetes_validate.latest_version(), strict=True)
    except kubernetes_validate.ValidationError as e:
        path = ".".join(str(p) for p in e.path)
        raise ValueError(f"{where} makes an invalid pod: {path}: {e.message}") from None
    return result


def _job_retry_fields(role: Role, k8s_version: Optional[Tuple[int, int]], in_jobset: bool) -> Obj:
    """A role's Job fields for its retry policy (see :func:`retry_notes`).

    REPLICA: each index retried alone (``backoffLimitPerIndex``; before 1.29 a
    ``backoffLimit`` the replicas share).  APPLICATION and ROLE: in a JobSet
    the Job fails at the first failed pod so that JobSet restarts everything;
    a lone Job can only replace the failed pod (``backoffLimit``).
    """
    retry = RetryPolicy(role.retry_policy)
    if retry == RetryPolicy.REPLICA and role.max_retries > 0:
        if k8s_version is None or k8s_version >= PER_INDEX_MIN_VERSION:
            return {"backoffLimitPerIndex": role.max_retries, "maxFailedIndexes": 0}
        return {"backoffLimit": role.max_retries}
    return {"backoffLimit": 0 if in_jobset else role.max_retries}


def _job_spec(role: Role, template: Obj, k8s_version: Optional[Tuple[int, int]], ttl: Optional[int],
              in_jobset: bool = False) -> Obj:
    spec: Obj = {"completionMode": "Indexed", "completions": role.num_replicas, "parallelism": role.num_replicas}
    spec.update(_job_retry_fields(role, k8s_version, in_jobset))
    if ttl is not None:
        spec["ttlSecondsAfterFinished"] = ttl
    spec["template"] = template
    return spec


def role_json(role: Role) -> Obj:
    """The role as spec-file data, as ``describe`` rebuilds it."""
    from torchspec.convert import dump_app

    return dump_app(AppDef(name="x", roles=[role]))["roles"][0]


def retry_notes(app: AppDef, flavor: str, k8s_version: Optional[Tuple[int, int]]) -> List[str]:
    """How each role's retry policy maps onto the flavor, for the dry run's header."""
    notes = []
    for role in app.roles:
        retry, n = RetryPolicy(role.retry_policy), role.max_retries
        if flavor == FLAVOR_JOB:
            if retry == RetryPolicy.REPLICA and n and (k8s_version is None or k8s_version >= PER_INDEX_MIN_VERSION):
                how = f"backoffLimitPerIndex={n} (each replica retried alone; needs Kubernetes >= 1.29)"
            elif retry == RetryPolicy.REPLICA and n:
                how = f"backoffLimit={n} (Kubernetes < 1.29: {n} retries shared by the role's replicas)"
            else:
                how = f"backoffLimit={n} (a failed pod is replaced alone; use flavor=jobset to restart all)"
        elif flavor == FLAVOR_JOBSET:
            how = (f"backoffLimitPerIndex={n} in its Job, then FailJobSet" if retry == RetryPolicy.REPLICA
                   else f"failurePolicy.maxRestarts (whole JobSet restarted{', ROLE widened to APPLICATION' if retry == RetryPolicy.ROLE else ''})")
        else:
            how = {RetryPolicy.APPLICATION: f"PodFailed -> RestartJob, maxRetry={n}",
                   RetryPolicy.ROLE: f"PodFailed -> RestartTask, maxRetry={n}",
                   RetryPolicy.REPLICA: f"PodFailed -> RestartPod, maxRetry={n}"}[retry] if n else \
                "PodFailed -> TerminateJob"
        notes.append(f"role {role.name}: {retry.value} max_retries={n}: {how}")
    return notes


def _jobset_failure_policy(app: AppDef, keys: Dict[str, str]) -> Obj:
    """APPLICATION (and ROLE, which JobSet cannot restart on its own) -> restart the JobSet, at most
    the largest ``max_retries`` of those roles; a REPLICA role's Job failing (its per-index retries
    spent) fails the JobSet at once."""
    restarts = max((r.max_retries for r in app.roles if RetryPolicy(r.retry_policy) != RetryPolicy.REPLICA), default=0)
    policy: Obj = {"maxRestarts": restarts}
    replica_roles = [keys[r.name] for r in app.roles if RetryPolicy(r.retry_policy) == RetryPolicy.REPLICA]
    if replica_roles and restarts:
        policy["rules"] = [{"name": "replicaRetriesSpent", "action": "FailJobSet", "targetReplicatedJobs": replica_roles}]
    return policy


def _volcano_policies(role: Role) -> Tuple[List[Obj], Optional[int]]:
    """A task's policies and maxRetry for its role's retry policy."""
    retry, n = RetryPolicy(role.retry_policy), role.max_retries
    if n <= 0:
        return [{"event": "PodFailed", "action": "TerminateJob"}, {"event": "PodEvicted", "action": "TerminateJob"}], None
    action = {RetryPolicy.APPLICATION: "RestartJob", RetryPolicy.ROLE: "RestartTask",
              RetryPolicy.REPLICA: "RestartPod"}[retry]
    return [{"event": "PodFailed", "action": action}, {"event": "PodEvicted", "action": action}], n


_DNS_LABEL_RULE = "lowercase letters, digits and inner '-', at most 63 characters"
_DNS_SUBDOMAIN_RULE = "lowercase letters, digits, inner '-' and '.', at most 253 characters"


def check_run_options(cfg: Mapping[str, CfgVal]) -> None:
    """Refuse a run option Kubernetes would refuse (or misread), with ValueError naming the option.

    The runopts types are checked before this; here are the values: names
    follow Kubernetes' rules, ``ttl`` is not negative, ``shm_size`` is a
    quantity.  ``image_pull_secrets`` must be Secret *names*: the manifests
    (and dry runs, which get pasted around) must never carry a Secret's
    content, which a pasted ``.dockerconfigjson`` or token would be.
    """
    flavor = str(cfg.get("flavor") or FLAVOR_JOB)
    if flavor not in FLAVORS:
        raise ValueError(f"run option flavor must be one of {', '.join(FLAVORS)}, not {flavor!r}")
    namespace = cfg.get("namespace")
    if namespace and not is_dns_label(str(namespace)):
        raise ValueError(f"run option namespace={namespace!r} is not a namespace name (a DNS-1123 label:"
                         f" {_DNS_LABEL_RULE})")
    ttl = cfg.get("ttl")
    if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, int) or ttl < 0):
        raise ValueError(f"run option ttl={ttl!r} must be a number of seconds, 0 or more")
    shm_size = cfg.get("shm_size")
    if shm_size and not _QUANTITY.fullmatch(str(shm_size)):
        raise ValueError(f"run option shm_size={shm_size!r} is not a Kubernetes quantity (e.g. 2Gi, 512Mi, 1G)")
    for option in ("service_account", "priority_class"):
        value = cfg.get(option)
        if value and not is_dns_subdomain(str(value)):
            raise ValueError(f"run option {option}={value!r} is not a valid name ({_DNS_SUBDOMAIN_RULE})")
    for i, secret in enumerate(cfg.get("image_pull_secrets") or []):  # type: ignore[arg-type]
        if not is_dns_subdomain(str(secret)):  # the value is not echoed: it may be the credential itself
            raise ValueError(f"run option image_pull_secrets: item {i + 1} is no Secret name ({_DNS_SUBDOMAIN_RULE});"
                             " the option takes the names of Secrets (e.g. regcred), never their content")
    queue = cfg.get("queue")
    if queue:
        valid = is_dns_subdomain(str(queue)) if flavor == FLAVOR_VOLCANO else \
            is_label_value(str(queue)) and is_dns_subdomain(str(queue))
        if not valid:
            raise ValueError(f"run option queue={queue!r} is not a valid queue name (lowercase letters, digits,"
                             f" inner '-' and '.'{'' if flavor == FLAVOR_VOLCANO else ', at most 63 characters'})")
    parse_version(str(cfg.get("k8s_version") or ""))


def app_to_request(app: AppDef, cfg: Mapping[str, CfgVal], app_id: str, session_name: str) -> KubernetesRequest:
    """The whole request for ``app`` under a resolved ``cfg``; talks to no cluster."""
    if not app.roles:
        raise ValueError(f"app {app.name!r} has no roles")
    check_run_options(cfg)
    flavor = str(cfg.get("flavor") or FLAVOR_JOB)
    k8s_version = parse_version(str(cfg.get("k8s_version") or ""))
    ttl = cfg.get("ttl")
    ttl = int(ttl) if ttl is not None else None  # type: ignore[arg-type]
    namespace = str(cfg["namespace"]) if cfg.get("namespace") else None
    keys: Dict[str, str] = {}
    for role in app.roles:
        if role.num_replicas <= 0:
            raise ValueError(f"role {role.name!r} has {role.num_replicas} replicas; it needs at least one")
        key = role_key(app_id, role.name)
        if key in keys.values():
            other = next(name for name, k in keys.items() if k == key)
            raise ValueError(f"roles {other!r} and {role.name!r} would both be called {key!r} on Kubernetes;"
                             " rename one of them")
        keys[role.name] = key
    labels = app_labels(app_id, flavor, session_name)
    if cfg.get("queue") and flavor != FLAVOR_VOLCANO:
        labels[LABEL_KUEUE_QUEUE] = str(cfg["queue"])

    def meta(name: str, annotations: Dict[str, str]) -> Obj:
        out: Obj = {"name": name}
        if namespace:
            out["namespace"] = namespace
        out["labels"] = dict(labels)
        out["annotations"] = annotations
        return out

    templates = {role.name: pod_template(role, app_id, flavor, cfg, session_name) for role in app.roles}
    objects: List[Obj] = []
    if flavor == FLAVOR_JOB:
        objects.append({"apiVersion": "v1", "kind": "Service", "metadata": meta(app_id, {}),
                        "spec": {"clusterIP": "None", "selector": {LABEL_APP_ID: app_id},
                                 "publishNotReadyAddresses": True}})
        objects[0]["metadata"].pop("annotations")
        for index, role in enumerate(app.roles):
            annotations = {ANNOTATION_ROLE: json.dumps(role_json(role), separators=(",", ":")),
                           ANNOTATION_ROLE_INDEX: str(index)}
            job_meta = meta(f"{app_id}-{keys[role.name]}", annotations)
            job_meta["labels"][LABEL_ROLE_NAME] = keys[role.name]
            objects.append({"apiVersion": "batch/v1", "kind": "Job", "metadata": job_meta,
                            "spec": _job_spec(role, templates[role.name], k8s_version, ttl)})
    elif flavor == FLAVOR_JOBSET:
        roles_json = json.dumps([role_json(r) for r in app.roles], separators=(",", ":"))
        spec: Obj = {
            "network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True},
            "failurePolicy": _jobset_failure_policy(app, keys),
            "replicatedJobs": [{"name": keys[r.name], "replicas": 1,
                                "template": {"spec": _job_spec(r, templates[r.name], k8s_version, None, in_jobset=True)}}
                               for r in app.roles],
        }
        if ttl is not None:
            spec["ttlSecondsAfterFinished"] = ttl
        objects.append({"apiVersion": _JOBSET_API[0], "kind": "JobSet",
                        "metadata": meta(app_id, {ANNOTATION_ROLES: roles_json}), "spec": spec})
    else:
        roles_json = json.dumps([role_json(r) for r in app.roles], separators=(",", ":"))
        tasks = []
        job_retries = 0
        for role in app.roles:
            policies, max_retry = _volcano_policies(role)
            task: Obj = {"name": keys[role.name], "replicas": role.num_replicas, "minAvailable": role.num_replicas,
                         "policies": policies}
            if max_retry is not None:
                task["maxRetry"] = max_retry
                if RetryPolicy(role.retry_policy) == RetryPolicy.APPLICATION:
                    job_retries = max(job_retries, max_retry)
            task["template"] = templates[role.name]
            tasks.append(task)
        spec = {"schedulerName": "volcano", "minAvailable": sum(r.num_replicas for r in app.roles),
                "plugins": {"svc": [], "env": []}}
        if job_retries:
            spec["maxRetry"] = job_retries
        if cfg.get("queue"):
            spec["queue"] = str(cfg["queue"])
        if cfg.get("priority_class"):
            spec["priorityClassName"] = str(cfg["priority_class"])
        if ttl is not None:
            spec["ttlSecondsAfterFinished"] = ttl
        spec["tasks"] = tasks
        objects.append({"apiVersion": _VOLCANO_API[0], "kind": "Job",
                        "metadata": meta(app_id, {ANNOTATION_ROLES: roles_json}), "spec": spec})
    notes = retry_notes(app, flavor, k8s_version)
    notes.append(f"${{rank0_env}} names {ENV_RANK0_HOST}: "
                 + ", ".join(f"{r.name} -> {rank0_host(app_id, keys[r.name], flavor)}" for r in app.roles))
    return KubernetesRequest(app_id=app_id, namespace=namespace, flavor=flavor, objects=objects, notes=notes,
                             context=str(cfg["context"]) if cfg.get("context") else None)


# ----------------------------------------------------------------------------
# Reading the cluster back: what the objects and pods say about each replica
# ----------------------------------------------------------------------------


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

    @property
    def state(self) -> AppState:
        return _POD_PHASES.get(self.phase, AppState.UNKNOWN)

    def trouble(self, role: str) -> str:
        """Why the pod does not run or ran badly, spelled out; ``""`` when nothing is wrong."""
        who = f"{role}/{self.replica_id}"
        if self.unschedulable:
            return f"{who} cannot be scheduled (Unschedulable): {self.unschedulable}"
        if self.waiting in _WAITING_TROUBLE:
            text = f"{who} {_WAITING_TROUBLE[self.waiting]} ({self.waiting})"
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


def pod_view(pod: Obj) -> Optional[PodView]:
    """A :class:`PodView` from a pod's JSON; None for a pod without torchspec's labels or an index."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    index = _index_of(pod)
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
    if status.get("reason"):  # pod-level, e.g. Evicted, DeadlineExceeded
        view.pod_reason, view.pod_message = status["reason"], status.get("message") or ""
    for cs in status.get("containerStatuses") or []:
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
    return view


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

    @property
    def exists(self) -> bool:
        return bool(self.top)

    @property
    def full_id(self) -> str:
        """The app id a handle carries: ``[CONTEXT:]NAMESPACE:NAME``."""
        return str(AppRef(name=self.app_id, namespace=self.namespace, context=self.context))

    @property
    def roles_json(self) -> List[Obj]:
        """The roles as submitted, in order, from the annotations."""
        try:
            if self.flavor == FLAVOR_JOB:
                return [json.loads(j["metadata"]["annotations"][ANNOTATION_ROLE]) for j in self.top]
            return list(json.loads(self.top[0]["metadata"]["annotations"][ANNOTATION_ROLES]))
        except (KeyError, ValueError, TypeError, IndexError):
            return []

    @property
    def role_names(self) -> List[Tuple[str, str, int]]:
        """(role name, role key, num_replicas) in submission order."""
        return [(r["name"], role_key(self.app_id, r["name"]), int(r.get("num_replicas", 1))) for r in self.roles_json]

    def attempts(self, key: str, replica_id: int) -> List[PodView]:
        """Every pod replica ``key/replica_id`` ran in, oldest first (a Job replaces a failed pod)."""
        found = [p for p in self.pods if p.role_key == key and p.replica_id == replica_id]
        return sorted(found, key=lambda p: (p.created, p.name))

    def restarts_of(self, key: str, replica_id: int) -> int:
        attempts = self.attempts(key, replica_id)
        return len(attempts) - 1 + attempts[-1].restarts if attempts else 0

    @property
    def app_restarts(self) -> int:
        """Whole-app restarts the controller counted (JobSet, Volcano), else 0."""
        status = self.top[0].get("status") or {} if self.top else {}
        if self.flavor == FLAVOR_JOBSET:
            return int(status.get("restarts") or 0)
        if self.flavor == FLAVOR_VOLCANO:
            return int(status.get("retryCount") or 0)
        return 0

    def _conditions(self, obj: Obj) -> Dict[str, Obj]:
        return {c.get("type"): c for c in (obj.get("status") or {}).get("conditions") or []
                if c.get("status") == "True"}

    @property
    def controller_state(self) -> Tuple[Optional[AppState], str]:
        """What the Job/JobSet/Volcano controller decided (None while it has not), and its message."""
        if self.flavor == FLAVOR_JOB:
            states, messages = [], []
            for job in self.top:
                conds = self._conditions(job)
                if "Failed" in conds:
                    states.append(AppState.FAILED)
                    messages.append(f"job {job['metadata']['name']} failed: {conds['Failed'].get('reason', '')}"
                                    f" {conds['Failed'].get('message', '')}".strip())
                elif "Complete" in conds:
                    states.append(AppState.SUCCEEDED)
                elif "Suspended" in conds or (job.get("spec") or {}).get("suspend"):
                    messages.append(f"job {job['metadata']['name']} is suspended (waiting for a queue, e.g. Kueue)")
                    states.append(None)
                else:
                    states.append(None)
            if AppState.FAILED in states:
                return AppState.FAILED, messages[0]
            if states and all(s == AppState.SUCCEEDED for s in states):
                return AppState.SUCCEEDED, ""
            return None, "; ".join(messages)
        obj = self.top[0]
        if self.flavor == FLAVOR_JOBSET:
            conds = self._conditions(obj)
            if "Failed" in conds:
                return AppState.FAILED, f"jobset failed: {conds['Failed'].get('message', '')}".strip()
            if "Completed" in conds:
                return AppState.SUCCEEDED, ""
            if "Suspended" in conds:
                return None, "jobset is suspended (waiting for a queue, e.g. Kueue)"
            return None, ""
        state = ((obj.get("status") or {}).get("state") or {})
        phase = state.get("phase") or ""
        mapped = _VOLCANO_STATES.get(phase)
        if mapped in (AppState.SUCCEEDED, AppState.FAILED):
            return mapped, (f"volcano job {phase}: {state.get('message') or state.get('reason') or ''}".strip()
                            if mapped == AppState.FAILED else "")
        return None, f"volcano job {phase}" if phase in ("Pending", "Inqueue") else ""

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
        if troubles:
            return troubles[0]
        return message


@dataclass
class KubernetesReplicaStatus(ReplicaStatus):
    """A ReplicaStatus with what the cluster knows: exit code, restarts and why (a subclass, so TorchX's type is kept)."""

    exit_code: Optional[int] = None
    num_restarts: int = 0
    msg: str = ""


# ----------------------------------------------------------------------------
# Options
# ----------------------------------------------------------------------------


def kubernetes_run_opts() -> runopts:
    """The run options of ``kubernetes``; declared once, here."""
    opts = runopts()
    opts.add("flavor", type_=str, default=FLAVOR_JOB,
             help="what to create: job (a batch/v1 Job per role + a headless Service; any cluster),"
                  " jobset (a JobSet; needs the JobSet controller) or volcano (a Volcano Job, gang scheduled)")
    opts.add("namespace", type_=str, default=None,
             help="namespace of the app (default: the kubeconfig context's, else default)")
    opts.add("context", type_=str, default=None, help="kubeconfig context to use (default: the current one)")
    opts.add("queue", type_=str, default=None,
             help="queue: the Kueue LocalQueue (label kueue.x-k8s.io/queue-name) for job and jobset,"
                  " the Volcano queue for volcano")
    opts.add("service_account", type_=str, default=None, help="service account the pods run as")
    opts.add("image_pull_secrets", type_=List[str], default=None,
             help="names of Secrets holding registry credentials, e.g. regcred;other")
    opts.add("priority_class", type_=str, default=None, help="PriorityClass of the pods")
    opts.add("ttl", type_=int, default=None,
             help="seconds after the app finishes before Kubernetes deletes it (ttlSecondsAfterFinished)")
    opts.add("k8s_version", type_=str, default=None,
             help="oldest Kubernetes the manifests must work on, e.g. 1.27; below 1.29 REPLICA retries use"
                  " backoffLimit (shared by the role's replicas) instead of backoffLimitPerIndex")
    opts.add("shm_size", type_=str, default=None, help="size limit of the memory-backed /dev/shm, e.g. 2Gi")
    opts.add("privileged", type_=bool, default=False, help="run the containers privileged")
    return opts


# ----------------------------------------------------------------------------
# The scheduler
# ----------------------------------------------------------------------------


class KubernetesScheduler(Scheduler[Dict[str, CfgVal]]):
    """Runs each app as Kubernetes objects on the cluster the kubeconfig (or the pod's service account) points at.

    ``kubeconfig`` defaults to ``$KUBECONFIG`` (read at each call), else
    ``~/.kube/config``; without either, inside a pod, the in-cluster config.
    ``context`` and ``namespace`` override the kubeconfig's current ones for
    the status, logs, list and cancel calls; ``submit`` takes them as run options.
    A context or namespace in an app id (:class:`AppRef`) wins over both.
    """

    def __init__(self, session_name: str, client: Optional["kubernetes.client.ApiClient"] = None,
                 kubeconfig: Optional[str] = None, context: Optional[str] = None,
                 namespace: Optional[str] = None) -> None:
        super().__init__("kubernetes", session_name)
        self._clients: Dict[Optional[str], "kubernetes.client.ApiClient"] = {}
        if client is not None:
            self._clients[context] = client
        self._kubeconfig = kubeconfig
        self._context = context
        self._namespace = namespace

    # -- the cluster ---------------------------------------------------------

    def _config_file(self) -> Optional[str]:
        if self._kubeconfig:
            return self._kubeconfig
        env = os.environ.get("KUBECONFIG")
        if env:
            return env
        default = os.path.expanduser("~/.kube/config")
        return default if os.path.exists(default) else None

    def client(self, context: Optional[str] = None) -> "kubernetes.client.ApiClient":
        """An API client for ``context`` (default: the scheduler's, else the current one), or a
        :class:`BackendError` that says why there is none."""
        context = context or self._context
        if context in self._clients:
            return self._clients[context]
        from kubernetes import client as k8s_client
        from kubernetes import config as k8s_config

        path = self._config_file()
        try:
            if path is not None:
                api = k8s_config.new_client_from_config(config_file=path, context=context)
            elif os.environ.get("KUBERNETES_SERVICE_HOST"):
                configuration = k8s_client.Configuration()
                k8s_config.load_incluster_config(client_configuration=configuration)
                api = k8s_client.ApiClient(configuration)
            else:
                raise BackendError("no Kubernetes configuration: KUBECONFIG is unset, ~/.kube/config does not"
                                   " exist and this is not a pod",
                                   "point KUBECONFIG at a kubeconfig (e.g. `kind get kubeconfig > k.yaml`)")
        except BackendError:
            raise
        except Exception as e:  # noqa: BLE001 - the loader raises ConfigException, ValueError, OSError...
            raise BackendError(f"cannot load the Kubernetes configuration from {path or 'the pod'}: {e}",
                               "check KUBECONFIG and the context name (`kubectl config get-contexts`)") from None
        self._clients[context] = api
        return api

    def default_namespace(self, context: Optional[str] = None) -> str:
        """The scheduler's namespace, else the kubeconfig context's, else ``default``."""
        if self._namespace:
            return self._namespace
        path = self._config_file()
        if path is not None:
            try:
                from kubernetes import config as k8s_config

                contexts, current = k8s_config.list_kube_config_contexts(config_file=path)
                chosen = next((c for c in contexts if c["name"] == (context or self._context)), current)
                namespace = (chosen or {}).get("context", {}).get("namespace")
                if namespace:
                    return str(namespace)
            except Exception:  # noqa: BLE001 - a broken kubeconfig is reported by client()
                pass
        elif os.path.exists("/var/run/secrets/kubernetes.io/serviceaccount/namespace"):
            with open("/var/run/secrets/kubernetes.io/serviceaccount/namespace", encoding="utf-8") as f:
                return f.read().strip() or "default"
        return "default"

    def _where(self, context: Optional[str] = None) -> str:
        try:
            return str(self.client(context).configuration.host)
        except BackendError:
            return "the cluster"

    def close(self) -> None:
        for api in self._clients.values():
            try:
                api.close()
            except Exception:  # noqa: BLE001 - close must not raise
                pass
        self._clients.clear()

    def _call(self, what: str, fn: Callable[..., Any], *args: Any, context: Optional[str] = None,
              **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)``, with API and connection errors turned into one :class:`BackendError`."""
        try:
            return fn(*args, **kwargs)
        except BackendError:
            raise
        except Exception as e:  # noqa: BLE001 - translated below, re-raised if not the API's
            raise api_error(e, what, self._where(context)) from None

    def _custom(self, context: Optional[str] = None) -> "kubernetes.client.CustomObjectsApi":
        from kubernetes import client as k8s_client

        return k8s_client.CustomObjectsApi(self.client(context))

    def _core(self, context: Optional[str] = None) -> "kubernetes.client.CoreV1Api":
        from kubernetes import client as k8s_client

        return k8s_client.CoreV1Api(self.client(context))

    def _batch(self, context: Optional[str] = None) -> "kubernetes.client.BatchV1Api":
        from kubernetes import client as k8s_client

        return k8s_client.BatchV1Api(self.client(context))

    # -- submitting ---------------------------------------------------------

    def _run_opts(self) -> runopts:
        return kubernetes_run_opts()

    def _validate(self, app: AppDef, scheduler: str) -> None:
        """Accept roles without resources: such a pod gets what the node has (BestEffort)."""

    def _submit_dryrun(self, app: AppDef, cfg: Dict[str, CfgVal]) -> AppDryRunInfo[KubernetesRequest]:
        """The request; a scheduler made with a ``context`` submits through it as ``-c context=`` would,
        so the app id (and ``${app_id}``) carry it."""
        app_id = make_app_id(app_name(app.name))
        if self._context and not cfg.get("context"):
            cfg = {**cfg, "context": self._context}
        return AppDryRunInfo(app_to_request(app, cfg, app_id, self.session_name), str)

    def schedule(self, dryrun_info: AppDryRunInfo[KubernetesRequest]) -> str:
        """Create every object of the request, all or nothing; returns ``[CONTEXT:]NAMESPACE:NAME``.

        If one create fails, the objects created before it are deleted again
        (with their pods) and the error says which object failed and why.
        """
        request = dryrun_info.request
        context = request.context
        namespace = request.namespace or self.default_namespace(context)
        created: List[Obj] = []
        for obj in request.objects:
            body = copy.deepcopy(obj)
            body["metadata"]["namespace"] = namespace
            try:
                self._create(body, context)
            except Exception as e:  # noqa: BLE001 - translated with what was left behind
                self._delete_objects(created, namespace, context)
                undone = (f"; deleted again what was created before it: "
                          f"{', '.join(_describe_obj(o) for o in created)}" if created else "")
                error = api_error(e, f"creating {_describe_obj(obj)} in namespace {namespace}", self._where(context))
                raise BackendError(error.message + undone, error.hint) from None
            created.append(body)
        return str(AppRef(name=request.app_id, namespace=namespace, context=context))

    def _create(self, body: Obj, context: Optional[str]) -> None:
        ns = body["metadata"]["namespace"]
        if body["kind"] == "Service":
            self._core(context).create_namespaced_service(ns, body)
        elif (body["apiVersion"], body["kind"]) == _JOB_API:
            self._batch(context).create_namespaced_job(ns, body)
        else:
            group, version = body["apiVersion"].split("/")
            plural = "jobsets" if body["kind"] == "JobSet" else "jobs"
            self._custom(context).create_namespaced_custom_object(group, version, ns, plural, body)

    def _delete_objects(self, objs: Sequence[Obj], namespace: str, context: Optional[str]) -> None:
        """Delete ``objs`` with their pods (Foreground: a Job's pods are orphaned by default); gone is fine."""
        from kubernetes.client import V1DeleteOptions

        options = V1DeleteOptions(propagation_policy="Foreground")
        for obj in reversed(list(objs)):
            name = obj["metadata"]["name"]
            try:
                if obj["kind"] == "Service":
                    self._core(context).delete_namespaced_service(name, namespace, body=options)
                elif (obj["apiVersion"], obj["kind"]) == _JOB_API:
                    self._batch(context).delete_namespaced_job(name, namespace, body=options)
                else:
                    group, version = obj["apiVersion"].split("/")
                    plural = "jobsets" if obj["kind"] == "JobSet" else "jobs"
                    self._custom(context).delete_namespaced_custom_object(group, version, namespace, plural, name,
                                                                          body=options)
            except Exception as e:  # noqa: BLE001 - best effort; say what is left behind
                if getattr(e, "status", None) != 404:
                    logger.warning("cannot delete %s: %s", _describe_obj(obj), api_error(e, "deleting", "").message)

    # -- reading ------------------------------------------------------------

    def resolve(self, app_id: str) -> Optional[AppRef]:
        """``app_id`` with its context and namespace filled in (the scheduler's or the kubeconfig's
        where the id has none); None for an id that cannot name an app here."""
        ref = AppRef.parse(app_id)
        if ref is None:
            return None
        context = ref.context or self._context
        return AppRef(name=ref.name, namespace=ref.namespace or self.default_namespace(context), context=context)

    def read_app(self, app_id: str) -> AppView:
        """Every object and pod of ``app_id``; an empty view (``exists`` False) when there are none."""
        ref = self.resolve(app_id)
        if ref is None:  # e.g. "default:x=y": no app can have that id; asking would be a selector error
            return AppView(app_id=app_id, namespace="", flavor=FLAVOR_JOB, top=[], pods=[])
        name, namespace, context = ref.name, str(ref.namespace), ref.context
        where = f"reading app {name} in namespace {namespace}"
        selector = f"{LABEL_APP_ID}={name}"
        jobs = self._call(where, self._batch(context).list_namespaced_job, namespace,
                          label_selector=f"{selector},{LABEL_FLAVOR}={FLAVOR_JOB}", context=context)
        top: List[Obj] = []
        flavor = FLAVOR_JOB
        if jobs.items:
            # list items of built-in kinds come without kind and apiVersion
            top = [{**self.client(context).sanitize_for_serialization(j), "apiVersion": "batch/v1", "kind": "Job"}
                   for j in jobs.items]
            top.sort(key=lambda j: int((j["metadata"].get("annotations") or {}).get(ANNOTATION_ROLE_INDEX, 0)))
        else:
            for flavor, (api_version, _kind) in ((FLAVOR_JOBSET, _JOBSET_API), (FLAVOR_VOLCANO, _VOLCANO_API)):
                found = self._get_custom(api_version, "jobsets" if flavor == FLAVOR_JOBSET else "jobs", namespace,
                                         name, where, context)
                if found is not None and (found["metadata"].get("labels") or {}).get(LABEL_APP_ID) == name:
                    top = [found]
                    break
        if not top:
            return AppView(app_id=name, namespace=namespace, flavor=flavor, top=[], pods=[], context=context)
        pods = self._call(where, self._core(context).list_namespaced_pod, namespace, label_selector=selector,
                          context=context)
        views = [pod_view(self.client(context).sanitize_for_serialization(p)) for p in pods.items]
        return AppView(app_id=name, namespace=namespace, flavor=flavor, top=top, pods=[v for v in views if v],
                       context=context)

    def _get_custom(self, api_version: str, plural: str, namespace: str, name: str, where: str,
                    context: Optional[str]) -> Optional[Obj]:
        group, version = api_version.split("/")
        try:
            return self._custom(context).get_namespaced_custom_object(group, version, namespace, plural, name)
        except Exception as e:  # noqa: BLE001
            if getattr(e, "status", None) == 404:  # no such object, or the CRD is not installed
                return None
            raise api_error(e, where, self._where(context)) from None

    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        from torchspec.convert import build_role

        view = self.read_app(app_id)
        if not view.exists:
            return None
        roles_statuses: List[RoleStatus] = []
        by_role: Dict[str, List[ReplicaStatus]] = {name: [] for name, _, _ in view.role_names}
        keys = {name: key for name, key, _ in view.role_names}
        for name, k, pod in view.current():
            by_role[name].append(KubernetesReplicaStatus(
                id=k,
                state=pod.state if pod else AppState.PENDING,
                role=name,
                hostname=(pod.hostname if pod else "") or replica_host(view.app_id, keys[name], view.flavor, k),
                structured_error_msg=NONE,
                exit_code=pod.exit_code if pod else None,
                num_restarts=view.restarts_of(keys[name], k),
                msg=pod.trouble(name) if pod else "",
            ))
        for name, replicas in by_role.items():
            roles_statuses.append(RoleStatus(role=name, replicas=replicas))
        roles: List[Role] = []
        for spec in view.roles_json:
            try:
                roles.append(build_role(spec))
            except (KeyError, TypeError, ValueError) as e:
                logger.debug("cannot rebuild role %s of %s: %s", spec.get("name"), app_id, e)
        labels = view.top[0]["metadata"].get("labels") or {}
        replica_restarts = max((view.restarts_of(keys[n], k) for n, k, _ in view.current()), default=0)
        return DescribeAppResponse(
            app_id=view.full_id,
            state=view.state,
            num_restarts=max(view.app_restarts, replica_restarts),
            msg=view.msg,
            roles_statuses=roles_statuses,
            roles=roles,
            metadata={"namespace": view.namespace, "context": view.context or "", "flavor": view.flavor,
                      "session_name": labels.get(LABEL_SESSION, ""),
                      "objects": ", ".join(_describe_obj(o) for o in view.top)},
        )

    def list(self) -> List[ListAppResponse]:
        """Every torchspec app in the namespace, oldest first, found by label.

        The cluster cannot tell which kubeconfig context an app was submitted
        through, so the ids name the scheduler's context if it has one, else none.
        """
        context = self._context
        namespace = self.default_namespace(context)
        where = f"listing apps in namespace {namespace}"
        found: Dict[str, str] = {}  # name -> creation time
        jobs = self._call(where, self._batch(context).list_namespaced_job, namespace,
                          label_selector=f"{LABEL_APP_ID},{LABEL_FLAVOR}={FLAVOR_JOB}", context=context)
        for job in jobs.items:
            name = job.metadata.labels[LABEL_APP_ID]
            stamp = job.metadata.creation_timestamp.isoformat() if job.metadata.creation_timestamp else ""
            found[name] = min(found.get(name, stamp), stamp)
        for group, version, plural in (("jobset.x-k8s.io", "v1alpha2", "jobsets"), ("batch.volcano.sh", "v1alpha1", "jobs")):
            try:
                items = self._custom(context).list_namespaced_custom_object(group, version, namespace, plural,
                                                                            label_selector=LABEL_APP_ID)["items"]
            except Exception as e:  # noqa: BLE001
                if getattr(e, "status", None) == 404:
                    continue  # that CRD is not installed: no such apps
                raise api_error(e, where, self._where(context)) from None
            for item in items:
                name = item["metadata"]["labels"][LABEL_APP_ID]
                found[name] = min(found.get(name, ""), item["metadata"].get("creationTimestamp", "")) or \
                    item["metadata"].get("creationTimestamp", "")
        out = []
        for name in sorted(found, key=lambda n: (found[n], n)):
            view = self.read_app(str(AppRef(name=name, namespace=namespace, context=context)))
            if view.exists:
                out.append(ListAppResponse(app_id=view.full_id, state=view.state))
        return out

    def exists(self, app_id: str) -> bool:
        return self.read_app(app_id).exists

    # -- cancelling and deleting -------------------------------------------------

    def _cancel_existing(self, app_id: str) -> None:
        """Delete the app's objects with Foreground propagation, so their pods go too."""
        view = self.read_app(app_id)
        objs = list(view.top)
        if view.flavor == FLAVOR_JOB:
            objs.insert(0, {"apiVersion": "v1", "kind": "Service", "metadata": {"name": view.app_id}})
        self._delete_objects(objs, view.namespace, view.context)

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
            raise ValueError("Kubernetes keeps a container's stdout and stderr together: only combined logs exist")
        view = self.read_app(app_id)
        if not view.exists:
            raise ValueError(f"unknown app {app_id!r} on the cluster")
        names = {name: (key, n) for name, key, n in view.role_names}
        if role_name not in names:
            raise ValueError(f"app {app_id!r} has no role {role_name!r}; its roles: {', '.join(names)}")
        key, n = names[role_name]
        if not 0 <= k < n:
            raise ValueError(f"role {role_name!r} of app {app_id!r} has replicas 0..{n - 1}, not {k}")
        pattern = re.compile(regex) if regex else None
        return self._lines(app_id, role_name, key, k, pattern, aware(since), aware(until), should_tail)

    def _lines(self, app_id: str, role_name: str, key: str, k: int, pattern: Optional[Pattern[str]],
               since: Optional[datetime], until: Optional[datetime], should_tail: bool) -> Iterator[str]:
        done: set = set()  # pod uids read to their end
        seen: List[str] = []  # pod uids in the order we first read them: controllers may delete old pods
        while True:
            view = self.read_app(app_id)
            attempts = view.attempts(key, k)
            for number, pod in enumerate(attempts):
                if pod.uid in done:
                    continue
                if pod.uid not in seen:
                    seen.append(pod.uid)
                    restart = max(number, len(seen) - 1)
                    marker = f"--- torchspec: restart {restart} of replica {role_name}/{k} ---\n"
                    if restart > 0 and (pattern is None or pattern.search(marker)):
                        yield marker
                latest = pod is attempts[-1]
                follow = should_tail and latest
                if follow and not self._wait_started(view.namespace, app_id, pod, key, k):
                    done.add(pod.uid)
                    continue
                for when, text in self._pod_lines(view.namespace, pod.name, since, follow, view.context):
                    if until is not None and when is not None and when >= until:
                        return
                    if pattern is None or pattern.search(text):
                        yield text
                if not latest or not should_tail or self._pod_finished(view.namespace, pod.name, view.context):
                    done.add(pod.uid)
            if not should_tail:
                return
            if not self._may_write_more(app_id, key, k, done):
                return

    def _pod_lines(self, namespace: str, pod: str, since: Optional[datetime], follow: bool,
                   context: Optional[str]) -> Iterator[Tuple[Optional[datetime], str]]:
        """``(time, line)`` of one pod's current container, read with the kubelet's timestamps."""
        kwargs: Dict[str, Any] = {"timestamps": True, "follow": follow, "_preload_content": False}
        if since is not None:
            kwargs["since_seconds"] = max(1, int(time.time() - since.timestamp()) + 1)
        try:
            response = self._core(context).read_namespaced_pod_log(pod, namespace, **kwargs)
        except Exception as e:  # noqa: BLE001
            if getattr(e, "status", None) in (400, 404):  # not started yet, or gone
                return
            raise api_error(e, f"reading the log of pod {pod}", self._where(context)) from None
        try:
            for when, text in stamped_lines(response.stream(amt=65536, decode_content=False)):
                if since is None or when is None or when >= since:
                    yield when, text
        finally:
            response.release_conn()

    def _pod_finished(self, namespace: str, pod: str, context: Optional[str]) -> bool:
        try:
            found = self._core(context).read_namespaced_pod(pod, namespace)
        except Exception:  # noqa: BLE001 - gone counts as finished
            return True
        return (found.status.phase if found.status else "") in ("Succeeded", "Failed")

    def _wait_started(self, namespace: str, app_id: str, pod: PodView, key: str, k: int) -> bool:
        """Wait until ``pod``'s container runs or ran (its log exists); False if it never will."""
        deadline = time.monotonic() + RETRY_WAIT_S
        while time.monotonic() < deadline:
            view = self.read_app(app_id)
            current = next((p for p in view.attempts(key, k) if p.uid == pod.uid), None)
            if current is None:
                return False
            if current.running or current.exit_code is not None or current.phase in ("Succeeded", "Failed"):
                return True
            if view.state in (AppState.FAILED, AppState.SUCCEEDED):
                return False
            time.sleep(0.2)
        return False

    def _may_write_more(self, app_id: str, key: str, k: int, done: set) -> bool:
        """Wait until replica ``key/k`` has a pod not read to its end (True) or can never have one (False)."""
        deadline = time.monotonic() + RETRY_WAIT_S
        while time.monotonic() < deadline:
            view = self.read_app(app_id)
            attempts = view.attempts(key, k)
            if not view.exists or view.state in (AppState.FAILED, AppState.SUCCEEDED, AppState.CANCELLED):
                return False
            if not attempts:  # a controller restarting the whole app deleted the pods: wait for new ones
                time.sleep(0.2)
                continue
            if attempts[-1].uid not in done:
                return True
            if attempts[-1].phase == "Succeeded" or view.state in (AppState.FAILED, AppState.SUCCEEDED):
                return False
            time.sleep(0.2)
        logger.warning("%s/%d of %s: no replacement pod came within %ds; stopped following", key, k, app_id,
                       RETRY_WAIT_S)
        return False


# ----------------------------------------------------------------------------
# Helpers: errors, timestamps
# ----------------------------------------------------------------------------


def _describe_obj(obj: Obj) -> str:
    return f"{obj['kind']} {obj['metadata']['name']}"


def api_error(e: BaseException, what: str, where: str) -> BackendError:
    """One clear :class:`BackendError` for a failed API call: the server's own message, and a hint."""
    status = getattr(e, "status", None)
    if isinstance(e, BackendError):
        return e
    if status is None or not isinstance(status, int) or status == 0:
        reason = str(getattr(e, "reason", None) or e)
        match = re.search(r"(Connection refused|Name or service not known|timed out|No route to host"
                          r"|certificate verify failed)", reason)
        return BackendError(f"cannot reach the Kubernetes API server at {where} while {what}: "
                            f"{match.group(1) if match else reason.splitlines()[0][:200]}",
                            "is the cluster up? check KUBECONFIG, the context (-c context=...) and"
                            " `kubectl cluster-info`")
    message = ""
    try:
        body = json.loads(getattr(e, "body", None) or "{}")
        message = str(body.get("message") or "")
    except (TypeError, ValueError):
        message = str(getattr(e, "body", "") or "")
    message = message or str(getattr(e, "reason", "") or status)
    hints = {
        401: "the cluster rejected the credentials: refresh them (e.g. log in again) or check the kubeconfig user",
        403: "ask a cluster admin for RBAC rights on these objects in this namespace, or use another namespace",
        404: "check the namespace exists; for flavor jobset or volcano, that their CRDs are installed"
             " (or use -c flavor=job)",
        409: "an app of that name exists already (or changed meanwhile); submit again for a new id",
        422: "the cluster refused the manifest: run `torchspec dryrun -s kubernetes` and check the field named",
    }
    kind = {401: "unauthorized", 403: "forbidden", 404: "not found", 409: "conflict", 422: "invalid"}.get(
        status, f"error {status}")
    return BackendError(f"Kubernetes refused {what} ({kind}): {message}", hints.get(status))


# ----------------------------------------------------------------------------
# Validation against the official schemas (for tests and ``torchspec lint``)
# ----------------------------------------------------------------------------


#: The JobSet and Volcano Job CRDs that ship with torchspec (see crds/README.md), for ``validate_manifests``.
BUNDLED_CRDS: Tuple[str, ...] = tuple(
    sorted(os.path.join(os.path.dirname(__file__), "crds", name)
           for name in ("batch.volcano.sh_jobs.yaml", "jobset.x-k8s.io_jobsets.yaml"))
)


def crd_schema(crd: Mapping[str, Any], version: Optional[str] = None, strict: bool = True) -> Obj:
    """The JSON Schema of a CRD's served ``version`` (default: the storage one), made checkable.

    OpenAPI's ``nullable: true`` becomes a ``null`` type; with ``strict``,
    every object that lists its properties refuses others (as the API server
    prunes them, silently, which is worse than an error here).
    """
    versions = crd["spec"]["versions"]
    chosen = next((v for v in versions if v["name"] == version), None) if version else \
        next((v for v in versions if v.get("storage")), versions[0])
    if chosen is None:
        raise KeyError(f"CRD {crd['metadata']['name']} does not serve version {version}")
    schema = copy.deepcopy(chosen["schema"]["openAPIV3Schema"])

    def visit(node: Any) -> None:
        if isinstance(node, dict):
            if node.pop("nullable", False) and "type" in node:
                node["type"] = [node["type"], "null"]
            if strict and "properties" in node and "additionalProperties" not in node \
                    and not node.get("x-kubernetes-preserve-unknown-fields"):
                node["additionalProperties"] = False
            for value in node.values():
                visit(value)
        elif isinstance(node, list):
            for item in node:
                visit(item)

    visit(schema)
    return schema


def load_crds(paths: Iterable[str]) -> Dict[Tuple[str, str], Obj]:
    """CRD files -> {(apiVersion, kind): schema} for every served version."""
    import yaml

    out: Dict[Tuple[str, str], Obj] = {}
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for crd in yaml.load_all(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
                if not crd or crd.get("kind") != "CustomResourceDefinition":
                    continue
                group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
                for v in crd["spec"]["versions"]:
                    if v.get("served"):
                        out[(f"{group}/{v['name']}", kind)] = crd_schema(crd, v["name"])
    return out


def _pod_templates(obj: Obj) -> List[Tuple[str, Obj]]:
    """(where, pod template) of every pod template inside a JobSet or Volcano Job."""
    spec = obj.get("spec") or {}
    if obj.get("kind") == "JobSet":
        return [(f"replicatedJobs[{i}]", ((r.get("template") or {}).get("spec") or {}).get("template") or {})
                for i, r in enumerate(spec.get("replicatedJobs") or [])]
    return [(f"tasks[{i}]", t.get("template") or {}) for i, t in enumerate(spec.get("tasks") or [])]


def validate_manifests(objs: Sequence[Obj], versions: Sequence[str] = ("1.25", "1.37"),
                       crd_paths: Iterable[str] = ()) -> List[str]:
    """Every problem the official schemas find in ``objs``, as ``Kind name (version): path: message``.

    Core kinds are checked with ``kubernetes-validate`` (strict: unknown
    fields are errors) for each Kubernetes ``version``; custom kinds against
    the CRDs in ``crd_paths`` (kinds without one are not checked), and the pod
    templates inside them as core Pods.  Raises ``RuntimeError`` when
    ``kubernetes-validate`` is not installed.
    """
    try:
        import kubernetes_validate
    except ImportError:
        raise RuntimeError("validating manifests needs the kubernetes-validate package:"
                           " pip install kubernetes-validate") from None
    import jsonschema

    crds = load_crds(crd_paths)
    problems: List[str] = []

    def core(obj: Obj, label: str) -> None:
        for version in versions:
            try:
                kubernetes_validate.validate(obj, version, strict=True)
            except kubernetes_validate.ValidationError as e:
                path = ".".join(str(p) for p in e.path)
                problems.append(f"{label} ({version}): {path}: {e.message}")
            except kubernetes_validate.SchemaNotFoundError:
                return  # a custom kind whose CRD was not given: not checked

    for obj in objs:
        label = f"{obj.get('kind')} {(obj.get('metadata') or {}).get('name')}"
        api = (obj.get("apiVersion"), obj.get("kind"))
        if api in crds:
            validator = jsonschema.Draft7Validator(crds[api])  # type: ignore[index]
            for error in validator.iter_errors(obj):
                problems.append(f"{label} (CRD): {'.'.join(str(p) for p in error.path)}: {error.message}")
            for where, template in _pod_templates(obj):
                pod = {"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": "x", **(template.get("metadata") or {})}, "spec": template.get("spec")}
                core(pod, f"{label} {where} pod template")
        else:
            core(obj, label)
    return problems


# ----------------------------------------------------------------------------
# Factory
# ----------------------------------------------------------------------------


def create_scheduler(session_name: str, **kwargs: Any) -> KubernetesScheduler:
    """The ``kubernetes`` entry point; ``client``, ``kubeconfig``, ``context`` and ``namespace`` keywords are used if given."""
    return KubernetesScheduler(session_name, client=kwargs.get("client"), kubeconfig=kwargs.get("kubeconfig"),
                               context=kwargs.get("context"), namespace=kwargs.get("namespace"))


__all__ = [
    "AppRef",
    "AppView",
    "KubernetesReplicaStatus",
    "KubernetesRequest",
    "KubernetesScheduler",
    "PodView",
    "api_error",
    "app_to_request",
    "check_capabilities",
    "check_run_options",
    "create_scheduler",
    "crd_schema",
    "full_app_id",
    "kubernetes_run_opts",
    "load_crds",
    "merge_patch",
    "pod_template",
    "pod_view",
    "validate_manifests",
]
