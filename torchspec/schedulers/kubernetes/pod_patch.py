"""A role's ``kubernetes.pod_patch``: read, merged into the role's pod template, and checked that it lost nothing.

The patch is Kubernetes' strategic merge patch of the pod template
(strategic_merge.py): lists merge item by item by their patch merge key,
so a patch adding an ``env`` entry to the role's container (named after the
role) adds it beside torchspec's.  What the patch still *can* do is take
away what the app needs to run as torchspec runs it (``$patch: replace`` of
the containers, ``$patch: delete`` of a volume, ``null`` for a field); so,
after the merge (issue 35, "nothing silently lost"), the template must still
have the role's container first, with its image, command, args, every
resource amount and torchspec's variables (``TORCHSPEC_*`` and the index
they are made from); every volume torchspec made, mounted in that container;
and a volume for every volumeMount of every container.  Each thing the
patch removed is named, at the part of the patch that removed it
(:class:`~torchspec.errors.AppRefusedError` with one problem each, which
``lint --scheduler kubernetes`` reports at its line).  Every flavor runs its
pods from these templates, so the check holds for each of them.
"""

from __future__ import annotations

import json
from typing import Any, List, Mapping, Optional, Sequence, Tuple

from torchspec.errors import AppRefusedError
from torchspec.schedulers.kubernetes.states import ENV_JOB_COMPLETION_INDEX, META_POD_PATCH, Obj
from torchspec.schedulers.kubernetes.strategic_merge import PATCH, PatchError, strategic_merge
from torchspec.schedulers.kubernetes.validate import pod_problem

#: What torchspec writes into the role's container that a patch may change but not remove.
_KEPT_FIELDS = ("image", "command", "args")
_HINT = ("the patch is merged into the pod torchspec makes (Kubernetes' strategic merge patch): name the"
         " container, volume or variable to change or add, without $patch: replace or delete of what torchspec"
         " made; `torchspec dryrun -s kubernetes FILE` shows the pod before any patch when you leave it out")
#: A step of a place in the pod template: a key, or (merge key, value) for an item of a merged list.
Step = Any


def parse_pod_patch(where: str, patch: Any) -> Mapping[str, Any]:
    """The patch as a mapping of ``metadata`` and/or ``spec`` (from its JSON text if it is text)."""
    if isinstance(patch, str):
        try:
            patch = json.loads(patch)
        except ValueError as e:
            raise AppRefusedError(f"{where} is not valid JSON: {e}") from None
    if not isinstance(patch, Mapping):
        raise AppRefusedError(f"{where} must be a mapping (a strategic merge patch of the pod template), "
                              f"not {type(patch).__name__}")
    unknown = set(patch) - {"metadata", "spec"}
    if unknown:
        raise AppRefusedError(f"{where} may only patch metadata and spec of the pod template, not {sorted(unknown)}")
    return patch


def apply_pod_patch(role_name: str, template: Obj, patch: Any, index: int = 0) -> Obj:
    """``template`` with the role's ``kubernetes.pod_patch`` merged in (a strategic merge patch), or
    AppRefusedError at the part of the patch that cannot apply or that removed what the role needs.

    ``index`` is the role's place in the app (for the error's position in the spec).  The result must
    still be a pod: containers with a name and an image, and, where ``kubernetes-validate`` is installed,
    a Pod the newest bundled Kubernetes schema accepts.
    """
    where = f"role {role_name!r}: {META_POD_PATCH}"
    at = ("roles", index, "metadata", META_POD_PATCH)
    written = patch
    patch = parse_pod_patch(where, patch)
    try:
        result = strategic_merge(template, json.loads(json.dumps(patch)))
    except PatchError as e:
        raise AppRefusedError(f"{where}: {e} (the patch cannot apply)", e.hint or _HINT,
                              path=at + (e.at if isinstance(written, Mapping) else ())) from None
    containers = (result.get("spec") or {}).get("containers")
    if not isinstance(containers, list) or not containers or not all(
            isinstance(c, Mapping) and c.get("name") and c.get("image") for c in containers):
        raise AppRefusedError(f"{where} leaves no valid containers: every container needs a name and an image",
                              path=at)
    lost = removed(template, result, patch if isinstance(written, Mapping) else {})
    if lost:
        raise AppRefusedError(f"{where} removed " + "; ".join(what for _, what in lost), _HINT,
                              problems=[(at + place, f"{where} removed {what}") for place, what in lost])
    problem = pod_problem(result)
    if problem is not None:
        raise AppRefusedError(f"{where} makes an invalid pod: {problem}")
    return result


def removed(before: Obj, after: Obj, patch: Mapping[str, Any]) -> List[Tuple[Tuple[Any, ...], str]]:
    """(where in ``patch``, what) for each thing torchspec made in ``before`` (the role's template) that
    ``after`` (patched) lost: the role's container or what the app needs of it, a volume or its mount; and
    each volumeMount of ``after`` that names no volume."""
    role_container = before["spec"]["containers"][0]
    key = role_container["name"]
    containers = [c for c in (after.get("spec") or {}).get("containers") or [] if isinstance(c, Mapping)]
    found = next((c for c in containers if c.get("name") == key), None)
    at_container: List[Step] = ["spec", "containers", ("name", key)]
    if found is None:
        return [(patch_path(patch, at_container), f"the role's container {key!r}")]
    lost: List[Tuple[List[Step], str]] = []
    if containers[0] is not found:
        lost.append((at_container, f"the role's container {key!r} from the first place, where every flavor"
                                   " runs the role from"))
    lost += _container_lost(role_container, found, at_container)
    lost += _volumes_lost(before, after, found, at_container)
    return [(patch_path(patch, steps), what) for steps, what in lost]


def _container_lost(before: Obj, after: Mapping[str, Any], at: List[Step]) -> List[Tuple[List[Step], str]]:
    """What of the role's container the patch took away: image, command, args, a resource amount, a variable."""
    key = before["name"]
    lost = [(at + [name], f"the {name} of the role's container {key!r}") for name in _KEPT_FIELDS
            if before.get(name) and not after.get(name)]
    resources = after.get("resources") if isinstance(after.get("resources"), Mapping) else {}
    for part, amounts in (before.get("resources") or {}).items():
        now = resources.get(part) if isinstance(resources.get(part), Mapping) else {}
        lost += [(at + ["resources", part, name], f"{part} {name}={amount} of the role's container {key!r}")
                 for name, amount in amounts.items() if name not in now]
    names = {e.get("name") for e in after.get("env") or [] if isinstance(e, Mapping)}
    lost += [(at + ["env", ("name", e["name"])], f"torchspec's variable {e['name']} of the role's container {key!r}")
             for e in before.get("env") or []
             if (e["name"].startswith("TORCHSPEC_") or e["name"] == ENV_JOB_COMPLETION_INDEX) and e["name"] not in names]
    return lost


def _volumes_lost(before: Obj, after: Obj, container: Mapping[str, Any],
                  at_container: List[Step]) -> List[Tuple[List[Step], str]]:
    """Each volume torchspec made that is gone or no longer mounted in the role's container, and each mount
    (of any container) whose volume is gone."""
    spec = after.get("spec") or {}
    volumes = {v.get("name") for v in spec.get("volumes") or [] if isinstance(v, Mapping)}
    mounted = {m.get("name") for m in container.get("volumeMounts") or [] if isinstance(m, Mapping)}
    made = {m["name"]: m["mountPath"] for m in before["spec"]["containers"][0].get("volumeMounts") or []}
    lost: List[Tuple[List[Step], str]] = []
    for volume in before["spec"].get("volumes") or []:
        name = volume["name"]
        if name not in volumes:
            lost.append((["spec", "volumes", ("name", name)], f"the volume {name!r} torchspec made (mounted at"
                                                               f" {made.get(name)})"))
        elif name not in mounted:
            lost.append((at_container + ["volumeMounts", ("mountPath", made.get(name))],
                         f"the mount of volume {name!r} at {made.get(name)} from the role's container"))
    for group in ("initContainers", "containers"):
        for c in spec.get(group) or []:
            for m in (c.get("volumeMounts") or []) if isinstance(c, Mapping) else []:
                if isinstance(m, Mapping) and m.get("name") not in volumes and m.get("name") not in made:
                    lost.append((["spec", group, ("name", c.get("name")), "volumeMounts",
                                  ("mountPath", m.get("mountPath"))],
                                 f"the volume {m.get('name')!r} that container {c.get('name')!r} mounts at"
                                 f" {m.get('mountPath')} (no volume has that name)"))
    return lost


def patch_path(patch: Any, steps: Sequence[Step]) -> Tuple[Any, ...]:
    """The deepest part of ``patch`` on the way to ``steps`` (keys; ``(merge key, value)`` picks a list's
    item), as keys and list indexes: the part of the patch that wrote, replaced or deleted that place."""
    out: List[Any] = []
    node = patch
    for step in steps:
        if isinstance(step, tuple) and isinstance(node, list):
            index = _item(node, *step)
            if index is None:
                break
            out.append(index)
            node = node[index]
        elif isinstance(step, str) and isinstance(node, Mapping) and step in node:
            out.append(step)
            node = node[step]
        else:
            break
    return tuple(out)


def _item(items: List[Any], key: str, value: Any) -> Optional[int]:
    """The index of the item whose ``key`` is ``value``, else of the list's ``$patch: replace`` item (which
    replaced the list), else None."""
    for index, item in enumerate(items):
        if isinstance(item, Mapping) and item.get(key) == value:
            return index
    return next((i for i, item in enumerate(items) if isinstance(item, Mapping) and item.get(PATCH) == "replace"),
                None)

