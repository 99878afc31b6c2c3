"""The pure translator: AppDef + run options -> :class:`KubernetesRequest`, the objects ``schedule`` creates.

Every flavor runs its replicas from the same pod template per role
(:func:`pod_template`).  The replicas of a role share that template, so
per-replica values cannot be written into it: ``${replica_id}`` becomes
``$(TORCHSPEC_REPLICA_ID)``, which Kubernetes itself expands in ``args`` and
``env`` from a variable the downward API fills with the pod's index.  What
the flavor wraps around the templates is its module's business (see
``flavors.py``).  Nothing here talks to a cluster.
"""

from __future__ import annotations

import copy
import os
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple

from torchspec.errors import AppRefusedError
from torchspec.version import docs_url
from torchspec.schedulers.api import labels_json, labels_of
from torchspec.schedulers.kubernetes import attempt
from torchspec.schedulers.kubernetes.flavor import Build, Flavor, Refusal, Version, refuse
from torchspec.schedulers.kubernetes.flavors import FLAVOR_TABLE
from torchspec.schedulers.kubernetes.names import AppRef, is_label_value, is_qualified_name, label_value, \
    metadata_labels, port_name, role_key
from torchspec.schedulers.kubernetes.resources import container_resources, linux_capabilities
from torchspec.schedulers.kubernetes.options import check_run_options, flavor_name, parse_version
from torchspec.schedulers.spec_keys import check_backend_keys, unknown_key
from torchspec.schedulers.kubernetes.states import (
    ANNOTATION_APP_NAME,
    ANNOTATION_METADATA,
    ANNOTATION_ONLY_METADATA,
    CAP_GPU_RESOURCE,
    DEFAULT_FLAVOR,
    DEFAULT_GPU_RESOURCE,
    ENV_JOB_COMPLETION_INDEX,
    ENV_NAMESPACE,
    LABEL_APP_ID,
    LABEL_FLAVOR,
    LABEL_KUEUE_PRIORITY,
    LABEL_KUEUE_QUEUE,
    LABEL_ROLE_NAME,
    LABEL_SESSION,
    LABEL_VERSION,
    META_POD_PATCH,
    NAMESPACE_REF,
    OWN_CAPABILITIES,
    REPLICA_ID_REF,
    Obj,
)
from torchspec.schedulers.images import check_container_images
from torchspec.schedulers.kubernetes.pod_patch import apply_pod_patch
from torchspec.schedulers.kubernetes.secrets import add_secrets
from torchspec.schedulers.grace import grace_period
from torchspec.schedulers.replicas import (ENV_APP_ID, ENV_ATTEMPT, ENV_NUM_REPLICAS, ENV_RANK0_HOST, ENV_REPLICA_ID,
                                          ENV_ROLE_NAME, hosts_env)
from torchspec.specs import AppDef, BindMount, CfgVal, DeviceMount, RetryPolicy, Role, VolumeMount, macros
from torchspec.version import __version__


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
# Macros: what ${replica_id} and ${app_id} become in a template shared by every replica
# ----------------------------------------------------------------------------

_REPLICA_SENTINEL = "\x00torchspec-replica-id\x00"
_NAMESPACE_SENTINEL = "\x00torchspec-namespace\x00"
#: a ``$`` that Kubernetes' expansion would not pass through as it is
_DOLLAR_KUBERNETES_READS = re.compile(r"\$(?=[$(])")


def _escape_refs(text: str) -> str:
    """Keep every ``$`` the user wrote literal in a command, args or env value.

    Kubernetes expands ``$(NAME)`` from the env there, and reads ``$$`` as an
    escaped ``$`` (a script ``a$$b.py`` would run as ``a$b.py``); any other
    ``$`` passes through.  So a ``$`` before ``(`` or ``$`` is doubled, and only
    those: ``${VAR}`` for the shell stays as it is.
    """
    return _DOLLAR_KUBERNETES_READS.sub("$$", text)


def _substitute(value: str, values: macros.Values) -> str:
    """Fill in the macros, then make ``${replica_id}`` a ``$(TORCHSPEC_REPLICA_ID)`` reference that
    Kubernetes expands per pod (and the namespace in ``${app_id}`` a ``$(TORCHSPEC_NAMESPACE)`` one);
    ``$(`` the user wrote stays literal."""
    return _escape_refs(values.substitute(value)).replace(_REPLICA_SENTINEL, REPLICA_ID_REF) \
        .replace(_NAMESPACE_SENTINEL, NAMESPACE_REF)


def full_app_id(name: str, context: Optional[str], flavor: Optional[str] = None) -> str:
    """The app id ``schedule`` returns, as a pod's env and args get it (``${app_id}``, ``TORCHSPEC_APP_ID``):
    ``[CONTEXT:]$(TORCHSPEC_NAMESPACE):NAME[@FLAVOR]``, the namespace filled in by Kubernetes from the pod's own.

    The runner sets ``TORCHSPEC_JOB_ID`` to ``kubernetes://SESSION/${app_id}``, so this is what makes
    that variable the handle ``status`` and ``cancel`` take.  A context is known at dry run (it is a run
    option); the namespace may not be (a dry run may be applied with ``kubectl apply -n``), hence the
    reference rather than a value.
    """
    return _escape_refs(_app_id_macro(name, context, flavor)).replace(_NAMESPACE_SENTINEL, NAMESPACE_REF)


def _app_id_macro(name: str, context: Optional[str], flavor: Optional[str] = None) -> str:
    """What ``${app_id}`` is substituted with before :func:`_substitute` escapes the result and turns
    the namespace's sentinel into a reference.  The flavor is in the id unless it is the default one."""
    return str(AppRef(name=name, namespace=_NAMESPACE_SENTINEL, context=context,
                      flavor=None if flavor in (None, DEFAULT_FLAVOR) else flavor))


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


# ----------------------------------------------------------------------------
# The pod template
# ----------------------------------------------------------------------------


def _resources(role: Role) -> Obj:
    """Requests and limits: equal, so the pod is Guaranteed and the scheduler reserves what it uses, but where
    ``kubernetes.requests``/``kubernetes.limits`` say otherwise (resources.py; checked by :func:`spec_refusals`)."""
    return container_resources(role, 0)[0]


_ORDER_HINT = ("-c flavor=jobset starts a role after another (JobSet's dependsOn); or drop depends_on and have"
               " the role wait itself, e.g. for a file or a port of $TORCHSPEC_HOSTS_<ROLE>")
_ELASTIC_HINT = ("-c flavor=pytorchjob runs an elastic role (the Training Operator's elasticPolicy); or drop"
                 " min_replicas (or give it num_replicas) to start every replica")
_SPEC_HINT = (f"{docs_url('schedulers/kubernetes', 'pods')}: resources take Kubernetes quantities (500m, 2Gi), Linux"
              " capabilities their names (IPC_LOCK), labels keys such as team or example.com/cost-center")


def spec_refusals(app: AppDef) -> List[Refusal]:
    """Every problem of the roles' ``kubernetes.requests``, ``kubernetes.limits`` and
    ``kubernetes.linux_capabilities`` and of the app's metadata as labels, each at its place in the spec."""
    out: List[Refusal] = []
    for index, role in enumerate(app.roles):
        check_capabilities(role)  # the GPU's resource name first: container_resources uses it
        out += container_resources(role, index)[1] + linux_capabilities(role, index)[1]
    out += [Refusal(path, message) for path, message in _metadata_labels(app)[2]]
    return out


def _metadata_labels(app: AppDef) -> Tuple[Dict[str, str], List[str], List[Tuple[Tuple[Any, ...], str]]]:
    """The app's metadata as labels of every object and pod (names.metadata_labels)."""
    reserved = (LABEL_APP_ID, LABEL_ROLE_NAME, LABEL_FLAVOR, LABEL_VERSION, LABEL_SESSION, LABEL_KUEUE_QUEUE,
                LABEL_KUEUE_PRIORITY)
    return metadata_labels(labels_of(app), reserved, ANNOTATION_ONLY_METADATA)


def _is_node_label(key: str) -> bool:
    """Capabilities whose key looks like a label key (``node.kubernetes.io/instance-type``) select nodes."""
    return "/" in key and not key.startswith("kubernetes.")


def check_capabilities(role: Role) -> None:
    """Refuse, with AppRefusedError naming the capability, one Kubernetes would get as text nobody meant.

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
                raise AppRefusedError(f"{where} must name an extended resource, e.g. {DEFAULT_GPU_RESOURCE!r},"
                                      f" not {value!r}")
        elif key.startswith("kubernetes.") and key not in OWN_CAPABILITIES:  # those checked by spec_refusals
            raise AppRefusedError(unknown_key("kubernetes", role.name, "resource capability", key,
                                              OWN_CAPABILITIES))
        elif _is_node_label(key):
            if not is_qualified_name(key):
                raise AppRefusedError(f"{where} is used as a node label key (nodeSelector) but is not a valid one")
            if isinstance(value, bool) or not isinstance(value, (str, int)) or not is_label_value(str(value)):
                raise AppRefusedError(f"{where} is a node label (nodeSelector): its value must be text or an"
                                      f" integer of at most 63 letters, digits, '-', '_' or '.', not {value!r}")


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
                raise AppRefusedError(f"role {role.name!r}: bind mount source {mount.src_path!r} must be an"
                                      " absolute path on the node")
            volumes.append({"name": f"mount-{i}", "hostPath": {"path": mount.src_path}})
            mounts.append({"name": f"mount-{i}", "mountPath": mount.dst_path, "readOnly": mount.read_only})
        elif isinstance(mount, VolumeMount):
            if not re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", mount.src) or len(mount.src) > 253:
                raise AppRefusedError(f"role {role.name!r}: volume {mount.src!r} is not a valid"
                                      " PersistentVolumeClaim name")
            volumes.append({"name": f"mount-{i}", "persistentVolumeClaim": {"claimName": mount.src,
                                                                              "readOnly": mount.read_only}})
            mounts.append({"name": f"mount-{i}", "mountPath": mount.dst_path, "readOnly": mount.read_only})
        elif isinstance(mount, DeviceMount):
            volumes.append({"name": f"mount-{i}", "hostPath": {"path": mount.src_path}})
            mounts.append({"name": f"mount-{i}", "mountPath": mount.dst_path, "readOnly": "w" not in mount.permissions})
            privileged = True
    return volumes, mounts, privileged


def _env(role: Role, app_id: str, flavor: Flavor, rank0_host: str, values: macros.Values,
         hosts: Mapping[str, str]) -> List[Obj]:
    """The container's env: the index, the parts of the attempt number and the namespace first (later entries
    may refer to them as ``$(...)``), torchspec's variables (``hosts``: every role's ``TORCHSPEC_HOSTS_<ROLE>``),
    then the role's own (torchspec's win), ``PYTHONUNBUFFERED=1`` unless set.  ``app_id`` is the full one
    (:func:`full_app_id`)."""
    env = flavor.index_env() + attempt.part_env(flavor.attempt_parts)
    env.append({"name": ENV_NAMESPACE, "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}})
    ours = {ENV_APP_ID: app_id, ENV_ROLE_NAME: role.name, ENV_NUM_REPLICAS: str(role.num_replicas),
            ENV_RANK0_HOST: rank0_host, **hosts}
    env += [{"name": k, "value": v} for k, v in ours.items()]
    taken = set(ours) | {ENV_REPLICA_ID, ENV_JOB_COMPLETION_INDEX, ENV_NAMESPACE, ENV_ATTEMPT}
    taken |= attempt.PART_NAMES
    for key, value in role.env.items():
        if key not in taken:
            env.append({"name": key, "value": _substitute(value, values)})
            taken.add(key)
    if "PYTHONUNBUFFERED" not in taken:
        env.append({"name": "PYTHONUNBUFFERED", "value": "1"})
    return env


def _ports(role: Role) -> List[Obj]:
    """The role's ports by number; of several with the same name (or none), the lowest is kept."""
    ports: List[Obj] = []
    seen = set()
    for name, port in sorted(role.port_map.items(), key=lambda item: item[1]):
        label = port_name(name)
        if label in seen:
            continue
        seen.add(label)
        ports.append({"containerPort": int(port), **({"name": label} if label else {})})
    return ports


def app_labels(app_id: str, flavor: str, session_name: str) -> Dict[str, str]:
    return {LABEL_APP_ID: app_id, LABEL_FLAVOR: flavor, LABEL_SESSION: label_value(session_name),
            LABEL_VERSION: label_value(__version__)}


def metadata_annotation(app: AppDef) -> Dict[str, str]:
    """The app's name, and its labels (its metadata) where it has any: the annotations ``list`` and
    ``describe`` read back."""
    labels = labels_of(app)
    return {ANNOTATION_APP_NAME: app.name, **({ANNOTATION_METADATA: labels_json(labels)} if labels else {})}


def _container(role: Role, key: str, app_id: str, flavor: Flavor, cfg: Mapping[str, CfgVal], entrypoint: str,
               volume_mounts: List[Obj], privileged: bool, hosts: Mapping[str, str]) -> Obj:
    """The role's one container; ``entrypoint`` has its macros filled in already."""
    context = str(cfg["context"]) if cfg.get("context") else None
    values = macros.Values(img_root="", app_id=_app_id_macro(app_id, context, flavor.name),
                           replica_id=_REPLICA_SENTINEL, rank0_env=ENV_RANK0_HOST)
    container: Obj = {
        "name": key,
        "image": role.image,
        "command": [_escape_refs(entrypoint)],
        "args": [_substitute(arg, values) for arg in role.args],
        "env": _env(role, full_app_id(app_id, context, flavor.name), flavor, flavor.replica_host(app_id, key, 0),
                    values, hosts),
        "resources": _resources(role),
        "volumeMounts": volume_mounts,
    }
    ports = _ports(role)
    if ports:
        container["ports"] = ports
    security: Obj = {"privileged": True} if privileged or cfg.get("privileged") else {}
    added = linux_capabilities(role, 0)[0]
    if added:
        security["capabilities"] = {"add": added}
    if security:
        container["securityContext"] = security
    return container


def _pod_spec(role: Role, container: Obj, volumes: List[Obj], app_id: str, flavor: Flavor,
              cfg: Mapping[str, CfgVal]) -> Obj:
    """The pod's spec around its one container: what the run options and the flavor ask of every pod."""
    spec: Obj = {"restartPolicy": "Never", "containers": [container], "volumes": volumes}
    if flavor.subdomain:
        spec["subdomain"] = app_id
    if cfg.get("service_account"):
        spec["serviceAccountName"] = str(cfg["service_account"])
    secrets = cfg.get("image_pull_secrets") or []
    if secrets:
        spec["imagePullSecrets"] = [{"name": str(s)} for s in secrets]  # type: ignore[union-attr]
    if cfg.get("priority_class"):
        spec["priorityClassName"] = str(cfg["priority_class"])
    seconds = grace_period(cfg)
    if seconds is not None:
        spec["terminationGracePeriodSeconds"] = seconds
    if flavor.scheduler_name:
        spec["schedulerName"] = flavor.scheduler_name
    selector = _node_selector(role)
    if selector:
        spec["nodeSelector"] = selector
    return spec


def pod_template(role: Role, app_id: str, flavor: str, cfg: Mapping[str, CfgVal], session_name: str,
                 index: int = 0, labels: Optional[Mapping[str, str]] = None,
                 hosts: Optional[Mapping[str, str]] = None) -> Obj:
    """The pod template every replica of ``role`` runs from, the same for every flavor but for the
    index variable and the DNS settings each flavor's controller provides; ``kubernetes.pod_patch``
    applied last (a strategic merge patch, see pod_patch.py) and checked.  ``index`` is the role's place
    in the app, where a refusal of its patch points; ``labels``, the app's metadata as labels, go on every pod;
    ``hosts``, every role's ``TORCHSPEC_HOSTS_<ROLE>`` (the flavor's DNS names), in every container.

    ``app_id`` is the app's name; ``${app_id}`` in args and env becomes the full app id
    (:func:`full_app_id`), as the handle has it.  In ``kubernetes.pod_patch`` it stays the name: the
    fields of a pod template other than command, args and env cannot expand ``$(...)``, and most of them
    (labels, names) need a DNS name.
    """
    key = role_key(app_id, role.name)
    check_capabilities(role)
    impl = FLAVOR_TABLE[flavor]
    filled = macros.Values(img_root="", app_id=app_id, replica_id=_REPLICA_SENTINEL,
                           rank0_env=ENV_RANK0_HOST).apply(role)
    volumes, volume_mounts, privileged = _mounts(role)
    if cfg.get("shm_size"):
        volumes[0]["emptyDir"]["sizeLimit"] = str(cfg["shm_size"])  # the /dev/shm emptyDir
    container = _container(role, key, app_id, impl, cfg, filled.entrypoint, volume_mounts, privileged, hosts or {})
    add_secrets(role, index, container, volumes)
    template: Obj = {"metadata": {"labels": {**(labels or {}), LABEL_APP_ID: app_id, LABEL_ROLE_NAME: key,
                                             LABEL_VERSION: label_value(__version__)}},
                     "spec": _pod_spec(role, container, volumes, app_id, impl, cfg)}
    patch = filled.metadata.get(META_POD_PATCH)
    if patch is not None:
        template = apply_pod_patch(role.name, template, patch, index)
    _wrap_command(template, impl, cfg)
    return template


def _wrap_command(template: Obj, flavor: Flavor, cfg: Mapping[str, CfgVal]) -> None:
    """The role's container's command (as patched) run by the shell that sets ``TORCHSPEC_ATTEMPT`` (see
    attempt.py), unless ``attempt_env=false``; the flavor's own exports either way."""
    containers = (template.get("spec") or {}).get("containers") or []
    if not containers or not containers[0].get("command"):
        return
    containers[0]["command"] = attempt.wrap(containers[0]["command"], flavor.attempt_parts, flavor.wrapper_exports,
                                            count=cfg.get("attempt_env", True) is not False)


# ----------------------------------------------------------------------------
# The whole app
# ----------------------------------------------------------------------------


def retry_notes(app: AppDef, flavor: str, k8s_version: Version) -> List[str]:
    """How each role's retry policy maps onto the flavor, for the dry run's header."""
    impl = FLAVOR_TABLE[flavor]
    return [f"role {role.name}: {RetryPolicy(role.retry_policy).value} max_retries={role.max_retries}:"
            f" {impl.retry_how(role, k8s_version)}" for role in app.roles]


def _role_keys(app: AppDef, app_id: str) -> Dict[str, str]:
    """Role name -> role key, refusing a role without replicas and two roles Kubernetes would name alike."""
    keys: Dict[str, str] = {}
    for role in app.roles:
        if role.num_replicas <= 0:
            raise AppRefusedError(f"role {role.name!r} has {role.num_replicas} replicas; it needs at least one")
        key = role_key(app_id, role.name)
        if key in keys.values():
            other = next(name for name, k in keys.items() if k == key)
            raise AppRefusedError(f"roles {other!r} and {role.name!r} would both be called {key!r} on Kubernetes;"
                                  " rename one of them")
        keys[role.name] = key
    return keys


def _kueue_labels(cfg: Mapping[str, CfgVal]) -> Dict[str, str]:
    """The labels Kueue reads on the object it admits: the LocalQueue, and the workload's priority class."""
    labels = {LABEL_KUEUE_QUEUE: str(cfg["queue"])}
    if cfg.get("priority"):
        labels[LABEL_KUEUE_PRIORITY] = str(cfg["priority"])
    return labels


def app_to_request(app: AppDef, cfg: Mapping[str, CfgVal], app_id: str, session_name: str) -> KubernetesRequest:
    """The whole request for ``app`` under a resolved ``cfg``; talks to no cluster."""
    if not app.roles:
        raise AppRefusedError(f"app {app.name!r} has no roles")
    check_run_options(cfg)
    check_backend_keys(app, "kubernetes", OWN_CAPABILITIES, (META_POD_PATCH,))  # typos, each at its place
    refusals = spec_refusals(app)
    if refusals:
        raise AppRefusedError("; ".join(r.message for r in refusals), _SPEC_HINT,
                              problems=tuple((r.path, r.message) for r in refusals))
    labels, label_notes, _ = _metadata_labels(app)
    flavor = FLAVOR_TABLE[flavor_name(cfg)]
    refuse(flavor.name, flavor.order_refusals(app), _ORDER_HINT)  # never a role started before its time
    refuse(flavor.name, flavor.elastic_refusals(app), _ELASTIC_HINT)  # never a silent start at num_replicas
    run_app = flavor.adapt(app, cfg)  # first: every field the flavor cannot carry, at once
    check_container_images(app, "kubernetes")
    k8s_version = parse_version(str(cfg.get("k8s_version") or ""))
    ttl = cfg.get("ttl")
    namespace = str(cfg["namespace"]) if cfg.get("namespace") else None
    queue = str(cfg["queue"]) if cfg.get("queue") else None
    keys = _role_keys(app, app_id)
    hosts = hosts_env(app, lambda role, k: flavor.replica_host(app_id, keys[role.name], k))
    build = Build(app=app, app_id=app_id, keys=keys,
                  templates={role.name: pod_template(role, app_id, flavor.name, cfg, session_name, index, labels,
                                                     hosts)
                             for index, role in enumerate(run_app.roles)},
                  k8s_version=k8s_version, ttl=int(ttl) if ttl is not None else None,  # type: ignore[arg-type]
                  queue=queue, priority_class=str(cfg["priority_class"]) if cfg.get("priority_class") else None,
                  namespace=namespace, labels={**labels, **app_labels(app_id, flavor.name, session_name)},
                  annotations=metadata_annotation(app),
                  kueue_labels=_kueue_labels(cfg) if queue and flavor.kueue else {}, options=cfg, run_app=run_app)
    notes = retry_notes(app, flavor.name, k8s_version) + flavor.notes(build) + label_notes
    notes.append(f"${{rank0_env}} names {ENV_RANK0_HOST}: "
                 + ", ".join(f"{r.name} -> {flavor.replica_host(app_id, keys[r.name], 0)}" for r in app.roles))
    return KubernetesRequest(app_id=app_id, namespace=namespace, flavor=flavor.name, objects=flavor.build(build),
                             notes=notes, context=str(cfg["context"]) if cfg.get("context") else None)
