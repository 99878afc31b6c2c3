"""Where in the spec a field of a manifest comes from, so that lint puts a finding on the spec's line.

A field is named by its path in one object of the request, as the schema
check (``spec.containers.0.image``) or the API server (a 422 cause's
``spec.template.spec.containers[0].image``) names it.  :func:`place` finds
the role whose pod template holds it (a Job's role-index annotation, or the
flavor's ``template_paths`` inside a custom object); :func:`spec_path` then
points into the rendered spec: inside the role's ``kubernetes.pod_patch``
when the patch wrote the field, at the role's own key for what torchspec
wrote from it (``image``, ``resource``, ``env``...), else at the role.
"""

from __future__ import annotations

import re
from typing import Any, List, Mapping, Optional, Sequence, Tuple

from torchspec.schedulers.kubernetes.flavors import flavor_of_kind
from torchspec.schedulers.kubernetes.job import FLAVOR as JOB_FLAVOR
from torchspec.schedulers.kubernetes.states import ANNOTATION_ROLE_INDEX, META_POD_PATCH, Obj

#: One step of a field path: ``name``, ``.name`` or ``[index-or-key]``.
_STEP = re.compile(r"\.?([^.\[\]]+)|\[([^\]]*)\]")
#: What torchspec writes into a role's (first) container from the role's own keys.
_CONTAINER_FIELDS = {"image": "image", "command": "entrypoint", "args": "args", "env": "env",
                     "resources": "resource", "ports": "port_map", "volumeMounts": "mounts"}


def parse_field(field: str) -> List[str]:
    """``spec.containers[0].resources.requests[cpu]`` (or ``spec.containers.0...``) -> its steps, as strings."""
    return [m.group(1) if m.group(1) is not None else m.group(2) for m in _STEP.finditer(field or "")]


def json_path(parts: Sequence[str]) -> str:
    """``["spec", "containers", "0", "image"]`` -> ``spec.containers[0].image``."""
    out = ""
    for part in parts:
        out += f"[{part}]" if part.isdigit() else (f".{part}" if out else part)
    return out


def place(obj: Obj, parts: Sequence[str]) -> Tuple[Optional[int], Optional[List[str]]]:
    """(the role, the path inside its pod template) of the field at ``parts`` in ``obj``; None where the
    field belongs to no role (a Service), or lies outside the role's pod template."""
    if (obj.get("apiVersion"), obj.get("kind")) == (JOB_FLAVOR.api_version, JOB_FLAVOR.kind):
        index = str(((obj.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_ROLE_INDEX, ""))
        return (int(index) if index.isdigit() else None), (list(parts[2:]) if parts[:2] == ["spec", "template"]
                                                            else None)
    flavor = flavor_of_kind(str(obj.get("apiVersion")), str(obj.get("kind")))
    for at in (flavor.template_paths.values() if flavor is not None else ()):
        pattern = parse_field(at.replace("{i}", "#"))
        role: Optional[int] = None if "#" in pattern else 0  # a template without an index: a one-role flavor
        matched = 0
        for want, part in zip(pattern, parts):
            if want == "#" and part.isdigit():
                role = int(part)
            elif want != part:
                break
            matched += 1
        if matched == len(pattern):
            return role, list(parts[matched:])
        if matched > (pattern.index("#") if "#" in pattern else len(pattern) - 2):
            return role, None
    return None, None


def in_pod_patch(role: Mapping[str, Any], pod_parts: Sequence[str]) -> Tuple[Any, ...]:
    """The path to the deepest part of the role's ``kubernetes.pod_patch`` that wrote the field at
    ``pod_parts`` of its pod template (at least ``spec.<field>``), or ``()`` when the patch did not write it."""
    metadata = role.get("metadata") or {}
    patch = metadata.get(META_POD_PATCH) if isinstance(metadata, Mapping) else None
    if not isinstance(patch, Mapping) or not pod_parts:
        return ()
    found: list[Any] = []
    node: Any = patch
    for part in pod_parts:
        if isinstance(node, Mapping) and part in node:
            found.append(part)
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            found.append(int(part))
            node = node[int(part)]
        else:
            break
    if len(found) < 2:
        return ()
    return ("metadata", META_POD_PATCH, *found)


def spec_path(role_index: Optional[int], pod_parts: Optional[Sequence[str]],
              roles: Sequence[Mapping[str, Any]]) -> Tuple[Any, ...]:
    """Where in the spec to report a field of role ``role_index``'s pod template (``pod_parts``, None where
    the field is outside it): the pod patch's key that wrote it, else the role's key torchspec wrote it from
    (a container's image, resources, env... come from the role's ``image``, ``resource``, ``env``), else the
    role; ``()`` (the document) for a field of no role."""
    if role_index is None or not 0 <= role_index < len(roles):
        return ()
    role = roles[role_index]
    patched = in_pod_patch(role, pod_parts or [])
    if patched:
        return ("roles", role_index) + patched
    parts = list(pod_parts or [])
    if parts[:3] == ["spec", "containers", "0"] and len(parts) > 3 and _CONTAINER_FIELDS.get(parts[3]) in role:
        return ("roles", role_index, _CONTAINER_FIELDS[parts[3]])
    return ("roles", role_index)
