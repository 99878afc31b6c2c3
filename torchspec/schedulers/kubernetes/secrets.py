"""A role's secrets and ConfigMaps (``Role.secrets``) as Kubernetes reads them: by reference, in the pod.

``{env: VAR, name, key}`` is an env entry with ``valueFrom.secretKeyRef``
(``configMapKeyRef`` for ``kind: config_map``); ``{env_prefix: P, name}``
an ``envFrom`` entry with ``secretRef`` (``configMapRef``) and ``prefix``;
``{mount: /folder, name[, key]}`` a ``secret`` (``configMap``) volume,
mounted read-only, with only ``key``'s file where a key is given.  The
values stay in the cluster: the kubelet reads them when a pod starts, so
nothing torchspec writes (the dry run, the manifests, the annotations)
holds one.  Every flavor runs its pods from the same templates; a flavor
that cannot carry a form refuses it (``trainjob``: ``envFrom``).
"""

from __future__ import annotations

from typing import List, Set, Tuple

from torchspec.errors import AppRefusedError
from torchspec.schedulers.kubernetes.states import Obj
from torchspec.specs import Role
from torchspec.specs.secrets import CONFIG_MAP, SecretRef

#: The prefix of the volumes made for mounted secrets (``secret-0``, ...).
VOLUME_PREFIX = "secret-"


def _is_config_map(ref: SecretRef) -> bool:
    return ref.kind == CONFIG_MAP


def add_secrets(role: Role, index: int, container: Obj, volumes: List[Obj]) -> None:
    """Put the role's references into its container (``env``, ``envFrom``, ``volumeMounts``) and pod
    ``volumes``; ``index`` is the role's place in the app, where a refusal points."""
    container["env"] += secret_env(role, index, {e["name"] for e in container["env"]})
    env_from = secret_env_from(role)
    if env_from:
        container["envFrom"] = env_from
    more_volumes, mounts = secret_volumes(role)
    volumes += more_volumes
    container["volumeMounts"] += mounts


def secret_env(role: Role, index: int, taken: Set[str]) -> List[Obj]:
    """The env entries of the role's ``{env: VAR}`` references, refusing a variable already set (torchspec's
    own, or the role's env)."""
    out: List[Obj] = []
    for position, ref in enumerate(role.secrets):
        if not ref.env:
            continue
        if ref.env in taken:
            raise AppRefusedError(f"role {role.name!r}: secret {ref.ref!r} would set {ref.env}, which the role's env"
                                  " or torchspec sets already", path=("roles", index, "secrets", position, "env"))
        taken.add(ref.env)
        source = "configMapKeyRef" if _is_config_map(ref) else "secretKeyRef"
        out.append({"name": ref.env, "valueFrom": {source: {"name": ref.name, "key": ref.key}}})
    return out


def secret_env_from(role: Role) -> List[Obj]:
    """The container's ``envFrom``: one entry per ``{env_prefix: P}`` reference (its prefix where not empty)."""
    out: List[Obj] = []
    for ref in role.secrets:
        if ref.env_prefix is None:
            continue
        source = "configMapRef" if _is_config_map(ref) else "secretRef"
        out.append({**({"prefix": ref.env_prefix} if ref.env_prefix else {}), source: {"name": ref.name}})
    return out


def secret_volumes(role: Role) -> Tuple[List[Obj], List[Obj]]:
    """Pod volumes and container volumeMounts of the ``{mount: /folder}`` references, read-only."""
    volumes: List[Obj] = []
    mounts: List[Obj] = []
    for index, ref in enumerate(role.secrets):
        if not ref.mount:
            continue
        name = f"{VOLUME_PREFIX}{index}"
        items = {"items": [{"key": ref.key, "path": ref.key}]} if ref.key else {}
        source: Obj = {"configMap": {"name": ref.name, **items}} if _is_config_map(ref) \
            else {"secret": {"secretName": ref.name, **items}}
        volumes.append({"name": name, **source})
        mounts.append({"name": name, "mountPath": ref.mount, "readOnly": True})
    return volumes, mounts
