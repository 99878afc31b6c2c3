"""Spec-file data <-> ``torchspec.specs.AppDef``, both ways.

``build_app`` takes data that already passed the strict schema and the
semantic rules, so it only maps keys onto the spec dataclasses; ``dump_app``
is what ``render`` prints and what the local scheduler stores.  It lives
outside the loader so that ``status`` can rebuild roles without importing
YAML, Jinja and the schema.
"""

from __future__ import annotations

from typing import Any

from torchspec import specs
from torchspec.specs.dependencies import FINISHED
from torchspec.specs.secrets import SECRET


def build_app(data: dict[str, Any]) -> specs.AppDef:
    return specs.AppDef(
        name=data["name"],
        roles=[build_role(r) for r in data["roles"]],
        metadata={str(k): str(v) for k, v in (data.get("metadata") or {}).items()},
    )


def build_role(r: dict[str, Any]) -> specs.Role:
    return specs.Role(
        name=r["name"],
        image=r["image"],
        entrypoint=r["entrypoint"],
        base_image=r.get("base_image"),
        args=list(r.get("args", [])),
        env=dict(r.get("env", {})),
        num_replicas=int(r.get("num_replicas", 1)),
        min_replicas=None if r.get("min_replicas") is None else int(r["min_replicas"]),
        max_retries=int(r.get("max_retries", 0)),
        retry_policy=specs.RetryPolicy(r.get("retry_policy", "APPLICATION")),
        resource=build_resource(r.get("resource")),
        port_map={k: int(v) for k, v in r.get("port_map", {}).items()},
        metadata=dict(r.get("metadata", {})),
        mounts=[m for spec in r.get("mounts", []) for m in build_mounts(spec)],
        secrets=[build_secret(s) for s in r.get("secrets", [])],
        depends_on=[build_dependency(d) for d in r.get("depends_on", [])],
    )


def build_dependency(value: Any) -> specs.RoleDependency:
    """One ``depends_on`` item: a role's name (it must have finished) or ``{role: NAME, when: finished|ready}``."""
    if isinstance(value, str):
        return specs.RoleDependency(role=value)
    return specs.RoleDependency(role=str(value["role"]), when=str(value.get("when", FINISHED)))


#: A secret reference's keys, in the order ``dump_secret`` writes them.
SECRET_KEYS = ("env", "env_prefix", "mount", "name", "key", "kind")


def build_secret(value: dict[str, Any]) -> specs.SecretRef:
    """One ``secrets`` item (``{env: TOKEN, name: hf-token, key: token}``) as a :class:`SecretRef`."""
    return specs.SecretRef(**{k: str(value[k]) for k in SECRET_KEYS if value.get(k) is not None})


def build_resource(value: Any) -> specs.Resource:
    if value is None:
        return specs.Resource(cpu=-1, gpu=-1, memMB=-1)
    if isinstance(value, str):
        return specs.named_resources[value]
    return specs.Resource(
        cpu=int(value.get("cpu", -1)),
        gpu=int(value.get("gpu", -1)),
        memMB=int(value.get("memMB", -1)),
        capabilities=dict(value.get("capabilities", {})),
        devices={k: int(v) for k, v in value.get("devices", {}).items()},
    )


def build_mounts(value: Any) -> list[Any]:
    """One mount from its mapping form, or the mounts a TorchX-style string names."""
    if isinstance(value, str):
        return list(specs.parse_mounts(value.split(",")))
    kind = value["type"]
    read_only = bool(value.get("read_only", False))
    if kind == "bind":
        return [specs.BindMount(src_path=value["src_path"], dst_path=value["dst_path"], read_only=read_only)]
    if kind == "volume":
        return [specs.VolumeMount(src=value["src"], dst_path=value["dst_path"], read_only=read_only)]
    return [specs.DeviceMount(src_path=value["src_path"], dst_path=value.get("dst_path", value["src_path"]),
                              permissions=value.get("permissions", "rwm"))]


def dump_app(app: specs.AppDef) -> dict[str, Any]:
    """An AppDef as spec-file data: what ``torchspec render`` prints, and loadable again."""
    return {
        "name": app.name,
        "roles": [dump_role(r) for r in app.roles],
        **({"metadata": dict(app.metadata)} if app.metadata else {}),
    }


def dump_role(role: specs.Role) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": role.name,
        "image": role.image,
        "entrypoint": role.entrypoint,
        "args": list(role.args),
        "env": dict(role.env),
        "num_replicas": role.num_replicas,
    }
    if role.min_replicas is not None:
        out["min_replicas"] = role.min_replicas
    if role.base_image is not None:
        out["base_image"] = role.base_image
    out["max_retries"] = role.max_retries
    out["retry_policy"] = role.retry_policy.value
    res = role.resource
    resource: dict[str, Any] = {k: v for k, v in (("cpu", res.cpu), ("gpu", res.gpu), ("memMB", res.memMB)) if v >= 0}
    if res.capabilities:
        resource["capabilities"] = dict(res.capabilities)
    if getattr(res, "devices", None):
        resource["devices"] = dict(res.devices)
    if resource:
        out["resource"] = resource
    if role.port_map:
        out["port_map"] = dict(role.port_map)
    if role.metadata:
        out["metadata"] = dict(role.metadata)
    if role.mounts:
        out["mounts"] = [dump_mount(m) for m in role.mounts]
    if role.secrets:
        out["secrets"] = [dump_secret(ref) for ref in role.secrets]
    if role.depends_on:
        out["depends_on"] = [{"role": d.role, "when": d.when} for d in role.depends_on]
    return out


def dump_secret(ref: specs.SecretRef) -> dict[str, Any]:
    """A reference as spec-file data: its name and key, never a value; ``kind`` only when not ``secret``."""
    return {k: getattr(ref, k) for k in SECRET_KEYS
            if getattr(ref, k) is not None and not (k == "kind" and ref.kind == SECRET)}


def dump_mount(mount: Any) -> dict[str, Any]:
    if isinstance(mount, specs.BindMount):
        return {"type": "bind", "src_path": mount.src_path, "dst_path": mount.dst_path, "read_only": mount.read_only}
    if isinstance(mount, specs.VolumeMount):
        return {"type": "volume", "src": mount.src, "dst_path": mount.dst_path, "read_only": mount.read_only}
    return {"type": "device", "src_path": mount.src_path, "dst_path": mount.dst_path,
            "permissions": mount.permissions}
