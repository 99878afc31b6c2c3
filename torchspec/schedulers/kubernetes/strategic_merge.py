"""Kubernetes' strategic merge patch (what ``kubectl patch`` and ``kubectl apply`` do), for ``kubernetes.pod_patch``.

Why not RFC 7386 (a JSON merge patch, what the pod patch was until issue 35): it
replaces every list whole, so a patch that adds one ``env`` entry to the
role's container replaced the whole ``containers`` list with a container that
had no command, args, resources or torchspec's variables, and one volume
replaced ``dshm`` and the role's mounts.  Kubernetes' own answer is to merge a
list item by item where its API says how: ``containers`` by ``name``,
``volumeMounts`` by ``mountPath``, ``ports`` by ``containerPort``...  So a patch
here means what it means to ``kubectl patch --type strategic``:

- a mapping merges key by key; ``null`` deletes a key;
- a list with a patch merge key merges item by item (an item whose key is new
  is added after the others); a list of text with the ``merge`` strategy
  (``finalizers``) gains the new values; any other list (``tolerations``,
  ``args``) is replaced whole, as Kubernetes does;
- directives: ``$patch: replace`` (in a mapping: the mapping replaces the
  original; as a list item of its own: the list's other items replace the
  list), ``$patch: delete`` (in a mapping: it is deleted; in a list item with
  its merge key: that item is deleted), ``$patch: merge`` (the default),
  ``$retainKeys`` (the keys to keep of a mapping, after the merge) and
  ``$deleteFromPrimitiveList/FIELD`` (values to take out of a list of text).
  ``$setElementOrder`` is refused: it only orders, and kubectl writes it, not
  people.

Which lists merge, and by what key, is Kubernetes' own data, never a list kept
by hand: the ``x-kubernetes-patch-merge-key`` and ``x-kubernetes-patch-strategy``
of its OpenAPI definitions, from the pod template down, vendored as
``patch_strategies.json`` (its ``source`` says where from and how to
regenerate it; tests/schedulers/test_kubernetes_strategic_merge.py checks it
against the schemas ``kubernetes-validate`` bundles).  Vendored, because
``kubernetes-validate`` is an optional extra and a patch must mean the same
with or without it.

A patch that cannot apply is a :class:`PatchError` naming where in the patch
(its keys and list indexes) and why: never a traceback, never a part dropped.
Pure functions: nothing here reads anything but the vendored file.
"""

from __future__ import annotations

import copy
import functools
import json
import os
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

#: The vendored strategies (see the module's docstring).
STRATEGIES_FILE = os.path.join(os.path.dirname(__file__), "patch_strategies.json")
#: The type a ``kubernetes.pod_patch`` patches.
POD_TEMPLATE = "io.k8s.api.core.v1.PodTemplateSpec"
PATCH = "$patch"
RETAIN_KEYS = "$retainKeys"
DELETE_FROM = "$deleteFromPrimitiveList/"
SET_ORDER = "$setElementOrder/"
#: A path inside the patch: its keys and list indexes.
At = Tuple[Any, ...]


class PatchError(ValueError):
    """A patch that cannot apply: ``at`` is where in the patch (keys and list indexes), ``reason`` why."""

    def __init__(self, at: Sequence[Any], reason: str, hint: Optional[str] = None) -> None:
        self.at = tuple(at)
        self.reason = reason
        self.hint = hint
        super().__init__(f"{show(self.at)}: {reason}" if self.at else reason)


def show(at: Sequence[Any]) -> str:
    """``("spec", "containers", 0, "env")`` -> ``spec.containers[0].env``."""
    out = ""
    for part in at:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


@dataclass(frozen=True)
class Field:
    """How Kubernetes patches one field: a ``map`` or a ``list``; the schema type of the map or of the list's
    items (None: free-form, or text); the list's patch merge key and strategy (``merge``, ``retainKeys``)."""

    kind: str
    type: Optional[str] = None
    key: Optional[str] = None
    strategy: str = ""

    @property
    def merges(self) -> bool:
        """Whether the list merges (item by item, or value by value) rather than being replaced whole."""
        return self.kind == "list" and "merge" in self.strategy.split(",")


@functools.lru_cache(maxsize=1)
def strategies() -> Dict[str, Dict[str, Field]]:
    """Type name -> field name -> :class:`Field`, for every type a pod template holds (the vendored file)."""
    with open(STRATEGIES_FILE, encoding="utf-8") as f:
        data = json.load(f)
    return {name: {key: Field(**entry) for key, entry in fields.items()} for name, fields in data["types"].items()}


def merge_keys(type_name: str = POD_TEMPLATE) -> Dict[str, str]:
    """``field path -> merge key`` of every list that merges item by item under ``type_name`` (for the docs
    and tests: ``spec.containers -> name``, ``spec.containers.env -> name``...)."""
    out: Dict[str, str] = {}
    todo: List[Tuple[str, str, Tuple[str, ...]]] = [("", type_name, ())]
    while todo:
        prefix, name, above = todo.pop()
        for key, field in strategies().get(name, {}).items():
            path = f"{prefix}{key}"
            if field.merges and field.key:
                out[path] = field.key
            if field.type and field.type not in above + (name,):  # a type that holds itself: once
                todo.append((f"{path}.", field.type, above + (name,)))
    return dict(sorted(out.items()))


def _kind(value: Any) -> str:
    """What a value is, in a message."""
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return "text" if isinstance(value, str) else f"{type(value).__name__} {value!r}"


class _Deleted:
    """What :func:`_merge_map` returns for ``$patch: delete``: the caller removes the key."""


DELETED = _Deleted()


def strategic_merge(target: Any, patch: Mapping[str, Any], type_name: str = POD_TEMPLATE) -> Dict[str, Any]:
    """``target`` with ``patch`` merged in as Kubernetes' strategic merge patch of a ``type_name`` would; a new
    object (neither argument is changed).  :class:`PatchError` where the patch cannot apply."""
    if not isinstance(patch, Mapping):
        raise PatchError((), f"must be a mapping, not {_kind(patch)}")
    result = _merge_map(target if isinstance(target, Mapping) else None, patch, type_name, ())
    if isinstance(result, _Deleted):
        raise PatchError((PATCH,), "$patch: delete would delete the whole object")
    return result


def _map_directive(patch: Mapping[str, Any], at: At) -> str:
    """A mapping's ``$patch`` directive (``merge`` where it has none), checked."""
    directive = patch.get(PATCH, "merge")
    if directive not in ("merge", "replace", "delete"):
        raise PatchError(at + (PATCH,), f"unknown directive $patch: {directive!r}",
                         "a mapping takes $patch: replace, delete or merge")
    return str(directive)


def _merge_map(target: Optional[Mapping[str, Any]], patch: Mapping[str, Any], type_name: Optional[str],
               at: At) -> Any:
    """The mapping ``target`` patched (:data:`DELETED` for ``$patch: delete``)."""
    directive = _map_directive(patch, at)
    if directive == "delete":
        return DELETED
    result = {} if directive == "replace" or target is None else copy.deepcopy(dict(target))
    fields = strategies().get(type_name or "", {})
    retain: Optional[List[str]] = None
    for key, value in patch.items():
        if isinstance(key, str) and key.startswith(DELETE_FROM):
            _delete_from(result, key[len(DELETE_FROM):], value, at + (key,))
    for key, value in patch.items():
        where = at + (key,)
        if key == PATCH or (isinstance(key, str) and key.startswith(DELETE_FROM)):
            continue
        if key == RETAIN_KEYS:
            if not isinstance(value, list) or not all(isinstance(k, str) for k in value):
                raise PatchError(where, f"must be a list of keys, not {_kind(value)}")
            retain = value
        elif isinstance(key, str) and key.startswith("$"):
            hint = ("$setElementOrder only orders a list (kubectl writes it); leave it out" if
                    key.startswith(SET_ORDER) else None)
            raise PatchError(where, f"unknown directive {key!r}", hint or
                             f"the directives are {PATCH}, {RETAIN_KEYS} and {DELETE_FROM}FIELD")
        elif value is None:
            result.pop(key, None)
        else:
            merged = _merge_value(result.get(key), value, fields.get(key), where)
            if isinstance(merged, _Deleted):
                result.pop(key, None)
            else:
                result[key] = merged
    if retain is not None:
        result = {key: value for key, value in result.items() if key in retain}
    return result


def _delete_from(result: Dict[str, Any], key: str, values: Any, at: At) -> None:
    """``$deleteFromPrimitiveList/KEY: [values]``: those values taken out of the list of text at ``KEY``."""
    if not isinstance(values, list):
        raise PatchError(at, f"must be a list of the values to delete, not {_kind(values)}")
    current = result.get(key)
    if current is None:
        return
    if not isinstance(current, list) or any(isinstance(v, (Mapping, list)) for v in current):
        raise PatchError(at, f"{key} is not a list of values", "$deleteFromPrimitiveList is for lists of text")
    result[key] = [v for v in current if v not in values]


def _merge_value(original: Any, value: Any, field: Optional[Field], at: At) -> Any:
    """One field's new value: mappings merge, lists by their strategy, anything else replaces."""
    expected = field.kind if field is not None else ("map" if isinstance(original, Mapping) else
                                                     "list" if isinstance(original, list) else None)
    if isinstance(value, Mapping):
        if expected == "list":
            raise PatchError(at, f"is a mapping where Kubernetes expects a list{_of(field)}",
                             "write the items as a list (- ...)")
        return _merge_map(original if isinstance(original, Mapping) else None, value,
                          field.type if field is not None else None, at)
    if expected == "map":
        raise PatchError(at, f"is {_kind(value)} where Kubernetes expects a mapping{_of(field)}")
    if isinstance(value, list):
        if field is not None and field.merges:
            return _merge_list(original if isinstance(original, list) else [], value, field, at)
        return _replace_list(value, at)
    return copy.deepcopy(value)


def _of(field: Optional[Field]) -> str:
    """`` (of Container, merged by name)`` for a message, where the schema says."""
    if field is None or field.type is None:
        return ""
    merged = f", merged by {field.key}" if field.merges and field.key else ""
    return f" (of {field.type.rsplit('.', 1)[-1]}{merged})"


def _replace_list(value: List[Any], at: At) -> List[Any]:
    """A list Kubernetes replaces whole: ``$patch: replace`` is what happens anyway; other directives are refused."""
    out = []
    for i, item in enumerate(value):
        if isinstance(item, Mapping) and PATCH in item:
            if item.get(PATCH) == "replace" and len(item) == 1:
                continue
            raise PatchError(at + (i, PATCH), "this list has no patch merge key, so Kubernetes replaces it whole:"
                             " its items cannot be merged or deleted one by one",
                             "write the whole list as it should be")
        out.append(copy.deepcopy(item))
    return out


def _list_replaced(value: List[Any]) -> bool:
    """Whether one item of the patch's list is ``{$patch: replace}`` alone: the others replace the list."""
    return any(isinstance(item, Mapping) and item.get(PATCH) == "replace" and len(item) == 1 for item in value)


def _merge_list(original: List[Any], value: List[Any], field: Field, at: At) -> List[Any]:
    """A list Kubernetes merges: item by item by its merge key, or value by value for a list of text."""
    replace = _list_replaced(value)
    result = [] if replace else copy.deepcopy(original)
    if field.type is None or field.key is None:  # values (finalizers): the new ones are added
        for i, item in enumerate(value):
            if isinstance(item, (Mapping, list)):
                if isinstance(item, Mapping) and item.get(PATCH) == "replace" and len(item) == 1:
                    continue
                raise PatchError(at + (i,), f"is {_kind(item)} in a list of values")
            if item not in result:
                result.append(item)
        return result
    for i, item in enumerate(value):
        where = at + (i,)
        if not isinstance(item, Mapping):
            raise PatchError(where, f"is {_kind(item)} where Kubernetes expects a mapping{_of(field)}")
        if item.get(PATCH) == "replace" and len(item) == 1:
            continue
        if field.key not in item:
            raise PatchError(where, f"has no {field.key!r}: Kubernetes merges this list's items by {field.key}",
                             f"name the item to patch, add or delete with its {field.key}")
        found = next((n for n, old in enumerate(result) if isinstance(old, Mapping)
                      and old.get(field.key) == item[field.key]), None)
        merged = _merge_map(result[found] if found is not None else None, item, field.type, where)
        if isinstance(merged, _Deleted):
            if found is not None:
                del result[found]
        elif found is not None:
            result[found] = merged
        else:
            result.append(merged)
    return result
