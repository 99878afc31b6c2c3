"""An in-memory Kubernetes API server for tests, speaking the real REST protocol over real HTTP.

No cluster can run where the suite runs, yet the kubernetes scheduler must be tested through the real
``kubernetes`` Python client, unpatched, reading a real kubeconfig. This server is that cluster's API:
it listens on 127.0.0.1, checks a bearer token, stores objects in memory and answers with the status
codes, ``Status`` bodies and object shapes the real kube-apiserver sends, so a client bug or a wrong
assumption about the API shows up here rather than on a cluster.

There is no controller: nothing creates pods for a Job or moves a pod to Running. Tests play the
controllers and the kubelet through the helpers on :class:`FakeApiServer` (``create_pod_for``,
``set_pod_phase``, ``append_log``, ``set_status``); ``operators.py`` plays the Kubeflow Training
Operator (PyTorchJob), Kubeflow Trainer (TrainJob) and Kueue through them. Failures are injected with
``fail_next``, an unreachable cluster is ``stop()``, and a cluster without a CRD ``uninstall(group)``.

The file is stdlib only and reads top-down: resource types, errors, selectors, patches, validation,
the object store, pod logs, fault injection, the kubelet's status writer, HTTP plumbing, the REST
handlers, and the :class:`FakeApiServer` facade.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import os
import re
import secrets
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator, Mapping, NamedTuple, Optional, Sequence, Union
from urllib.parse import parse_qs, urlsplit

Obj = dict[str, Any]

GIT_VERSION = "v1.31.0-fake"
NODE_NAME = "fake-node"
FOLLOW_POLL_S = 0.2  # how often a follower or watcher rechecks for the end of its stream


# --------------------------------------------------------------------------------------------------
# Resource types
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ResourceType:
    """One served resource and the per-type behaviour the real API server has for it."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    status_subresource: bool = False
    custom: bool = False  # served by apiextensions: kind required in bodies, no strategic merge patch
    returns_deleted_object: bool = False  # DELETE answers with the object instead of a Status
    default_propagation: str = "Background"
    name_rule: str = "subdomain"  # subdomain | label | dns1035 | subdomain63
    conditional_only: bool = False  # a PUT must carry a resourceVersion (custom resources: always)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        """``jobs.batch`` or ``pods``: how the API names the resource in error messages."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def qualified_kind(self) -> str:
        """``Job.batch`` or ``Service``: how the API names the kind in Invalid messages."""
        return f"{self.kind}.{self.group}" if self.group else self.kind

    def details(self, name: Optional[str] = None, **extra: Any) -> Obj:
        details: Obj = {}
        if name is not None:
            details["name"] = name
        if self.group:
            details["group"] = self.group
        details["kind"] = self.plural
        details.update(extra)
        return details


RESOURCE_TYPES: tuple[ResourceType, ...] = (
    ResourceType("", "v1", "namespaces", "Namespace", namespaced=False, status_subresource=True,
                 returns_deleted_object=True, name_rule="label"),
    ResourceType("", "v1", "pods", "Pod", status_subresource=True, returns_deleted_object=True),
    ResourceType("", "v1", "services", "Service", status_subresource=True, returns_deleted_object=True,
                 name_rule="dns1035"),
    ResourceType("", "v1", "configmaps", "ConfigMap"),
    ResourceType("", "v1", "secrets", "Secret"),
    ResourceType("", "v1", "events", "Event"),
    # batch/v1 Jobs orphan their pods unless the client asks otherwise: a real, surprising default.
    ResourceType("batch", "v1", "jobs", "Job", status_subresource=True, default_propagation="Orphan",
                 name_rule="subdomain63"),
    ResourceType("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet", status_subresource=True, custom=True),
    ResourceType("batch.volcano.sh", "v1alpha1", "jobs", "Job", status_subresource=True, custom=True),
    ResourceType("scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup", status_subresource=True,
                 custom=True),
    # Kubeflow Training Operator, Kubeflow Trainer (and its cluster-scoped runtimes), Kueue: see operators.py
    ResourceType("kubeflow.org", "v1", "pytorchjobs", "PyTorchJob", status_subresource=True, custom=True),
    ResourceType("trainer.kubeflow.org", "v1alpha1", "trainjobs", "TrainJob", status_subresource=True, custom=True,
                 name_rule="dns1035"),
    ResourceType("trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes", "ClusterTrainingRuntime",
                 namespaced=False, custom=True),
    ResourceType("kueue.x-k8s.io", "v1beta1", "workloads", "Workload", status_subresource=True, custom=True),
    # what `apply --lock kubernetes` takes turns with: create is 409 AlreadyExists for a taken name, and a PUT
    # with a stale resourceVersion 409 Conflict, without one 422 (its strategy allows no unconditional update)
    ResourceType("coordination.k8s.io", "v1", "leases", "Lease", conditional_only=True),
)

#: Field selectors the real API accepts per plural, beyond metadata.name and metadata.namespace.
FIELD_SELECTORS: dict[str, tuple[str, ...]] = {
    "pods": ("spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
             "status.phase", "status.podIP", "status.nominatedNodeName"),
    "jobs": ("status.successful",),
    "events": ("involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
               "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
               "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type"),
    "secrets": ("type",),
    "namespaces": ("status.phase",),
}


class ResourceRegistry:
    """Looks resource types up by (api version, plural), the key of every URL and helper call."""

    def __init__(self, types: Sequence[ResourceType] = RESOURCE_TYPES) -> None:
        self._types = {(t.api_version, t.plural): t for t in types}

    def __iter__(self) -> Iterator[ResourceType]:
        return iter(self._types.values())

    def find(self, api_version: str, plural: str) -> Optional[ResourceType]:
        return self._types.get((api_version, plural))

    def get(self, api_version: str, plural: str) -> ResourceType:
        found = self.find(api_version, plural)
        if found is None:
            raise KeyError(f"the fake API server does not serve {plural} in {api_version}")
        return found

    def remove_group(self, group: str) -> None:
        """Serve nothing of ``group`` any more, as a cluster where its CRDs were never installed."""
        self._types = {k: t for k, t in self._types.items() if t.group != group}

    def serves_group(self, group: str) -> bool:
        return any(t.group == group for t in self._types.values())

    def group_versions(self) -> dict[str, list[str]]:
        groups: dict[str, list[str]] = {}
        for t in self:
            if t.group and t.version not in groups.setdefault(t.group, []):
                groups[t.group].append(t.version)
        return groups


# --------------------------------------------------------------------------------------------------
# Errors: every failure leaves the server as a metav1.Status, as the real one sends it
# --------------------------------------------------------------------------------------------------

REASONS: dict[int, str] = {
    400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 405: "MethodNotAllowed",
    406: "NotAcceptable", 409: "Conflict", 410: "Expired", 415: "UnsupportedMediaType", 422: "Invalid",
    429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout",
}


class ApiError(Exception):
    """A failed request, carrying the fields of the ``Status`` body the real server would send."""

    def __init__(self, code: int, reason: str, message: str, details: Optional[Obj] = None,
                 headers: Optional[dict[str, str]] = None) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message
        self.details = details
        self.headers = headers or {}

    def status(self) -> Obj:
        body: Obj = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                     "message": self.message, "reason": self.reason}
        if self.details is not None:
            body["details"] = self.details
        body["code"] = self.code
        return body

    @classmethod
    def not_found(cls, rt: ResourceType, name: str) -> "ApiError":
        return cls(404, "NotFound", f'{rt.qualified} "{name}" not found', rt.details(name))

    @classmethod
    def no_route(cls) -> "ApiError":
        return cls(404, "NotFound", "the server could not find the requested resource", {})

    @classmethod
    def already_exists(cls, rt: ResourceType, name: str) -> "ApiError":
        return cls(409, "AlreadyExists", f'{rt.qualified} "{name}" already exists', rt.details(name))

    @classmethod
    def conflict(cls, rt: ResourceType, name: str, why: str) -> "ApiError":
        return cls(409, "Conflict", f'Operation cannot be fulfilled on {rt.qualified} "{name}": {why}',
                   rt.details(name))

    @classmethod
    def stale(cls, rt: ResourceType, name: str) -> "ApiError":
        return cls.conflict(rt, name, "the object has been modified; please apply your changes to the "
                                      "latest version and try again")

    @classmethod
    def invalid(cls, rt: ResourceType, name: str, causes: Sequence["Cause"]) -> "ApiError":
        texts = [f"{c.field}: {c.message}" for c in causes]
        summary = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
        details = {"name": name, **({"group": rt.group} if rt.group else {}), "kind": rt.kind,
                   "causes": [c.to_json() for c in causes]}
        return cls(422, "Invalid", f'{rt.qualified_kind} "{name}" is invalid: {summary}', details)

    @classmethod
    def method_not_allowed(cls) -> "ApiError":
        return cls(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")

    @classmethod
    def bad_request(cls, message: str) -> "ApiError":
        return cls(400, "BadRequest", message)

    @classmethod
    def forbidden(cls, rt: ResourceType, verb: str, namespace: Optional[str], name: Optional[str],
                  user: str) -> "ApiError":
        where = f' in the namespace "{namespace}"' if namespace else " at the cluster scope"
        target = f'{rt.qualified} "{name}"' if name else rt.qualified
        message = (f'{target} is forbidden: User "{user}" cannot {verb} resource "{rt.plural}" '
                   f'in API group "{rt.group}"{where}')
        return cls(403, "Forbidden", message, rt.details(name))


@dataclass(frozen=True)
class Cause:
    """One field error inside a 422 Invalid Status (metav1.StatusCause)."""

    reason: str  # FieldValueRequired, FieldValueInvalid, FieldValueNotSupported, FieldValueDuplicate
    field: str
    message: str

    def to_json(self) -> Obj:
        return {"reason": self.reason, "message": self.message, "field": self.field}

    @classmethod
    def required(cls, path: str, detail: str = "") -> "Cause":
        return cls("FieldValueRequired", path, "Required value" + (f": {detail}" if detail else ""))

    @classmethod
    def invalid(cls, path: str, value: Any, detail: str) -> "Cause":
        return cls("FieldValueInvalid", path, f"Invalid value: {json.dumps(value)}: {detail}")

    @classmethod
    def not_supported(cls, path: str, value: Any, supported: Sequence[str]) -> "Cause":
        allowed = ", ".join(json.dumps(s) for s in supported)
        return cls("FieldValueNotSupported", path,
                   f"Unsupported value: {json.dumps(value)}: supported values: {allowed}")


# --------------------------------------------------------------------------------------------------
# Selectors
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # = != in notin exists !exists gt lt
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        has, value = self.key in labels, labels.get(self.key)
        if self.op == "exists":
            return has
        if self.op == "!exists":
            return not has
        if self.op in ("=", "in"):
            return has and value in self.values
        if self.op in ("!=", "notin"):
            return not has or value not in self.values
        if not has or not re.fullmatch(r"-?\d+", value or ""):
            return False
        number, bound = int(value or 0), int(self.values[0])
        return number > bound if self.op == "gt" else number < bound


class LabelSelector:
    """A parsed ``labelSelector`` query: ``k=v``, ``k==v``, ``k!=v``, ``k``, ``!k``, ``k in (a,b)``,
    ``k notin (a,b)``, ``k>1``, ``k<1``, comma-combined (AND), with labels.Parse's semantics."""

    _TOKEN = re.compile(
        r"\s*(?:(?P<not>!)\s*(?P<nkey>[^\s,!=<>()]+)"
        r"|(?P<key>[^\s,!=<>()]+)\s*(?:"
        r"(?P<setop>in|notin)\s*\((?P<set>[^()]*)\)"
        r"|(?P<op>==|!=|=|>|<)\s*(?P<value>[^\s,!=<>()]*)"
        r")?)\s*(?:,|$)")

    def __init__(self, text: str = "") -> None:
        self.text = text or ""
        self.requirements = self._parse(self.text)

    @classmethod
    def _parse(cls, text: str) -> tuple[Requirement, ...]:
        reqs: list[Requirement] = []
        pos, text = 0, text.strip()
        while pos < len(text):
            m = cls._TOKEN.match(text, pos)
            if not m or m.end() == pos:
                raise ApiError.bad_request(f"unable to parse requirement: found '{text[pos:]}', "
                                           "expected: identifier")
            pos = m.end()
            if m.group("nkey"):
                reqs.append(Requirement(m.group("nkey"), "!exists"))
            elif m.group("setop"):
                values = tuple(v.strip() for v in m.group("set").split(",") if v.strip())
                reqs.append(Requirement(m.group("key"), m.group("setop"), values))
            elif m.group("op"):
                op = {"==": "=", ">": "gt", "<": "lt"}.get(m.group("op"), m.group("op"))
                if op in ("gt", "lt") and not re.fullmatch(r"-?\d+", m.group("value")):
                    raise ApiError.bad_request("unable to parse requirement: for 'Gt', 'Lt' operators, "
                                               "the value must be an integer")
                reqs.append(Requirement(m.group("key"), op, (m.group("value"),)))
            else:
                reqs.append(Requirement(m.group("key"), "exists"))
        return tuple(reqs)

    def matches(self, labels: Optional[Mapping[str, str]]) -> bool:
        return all(r.matches(labels or {}) for r in self.requirements)


class FieldSelector:
    """A parsed ``fieldSelector``: ``path=v``, ``path==v``, ``path!=v`` comma-combined, restricted to the
    fields the real API indexes for the resource (others are a 400, as on a cluster)."""

    def __init__(self, text: str, rt: ResourceType) -> None:
        allowed = ("metadata.name", "metadata.namespace") + FIELD_SELECTORS.get(rt.plural, ())
        self.terms: list[tuple[str, bool, str]] = []
        for part in filter(None, (p.strip() for p in (text or "").split(","))):
            m = re.fullmatch(r"([^=!]+?)\s*(==|!=|=)\s*(.*)", part)
            if not m:
                raise ApiError.bad_request(f"invalid selector: '{text}'; can't understand '{part}'")
            path, op, value = m.groups()
            if path not in allowed:
                raise ApiError.bad_request(f'field label not supported: {path}')
            self.terms.append((path, op != "!=", value))

    def matches(self, obj: Obj) -> bool:
        for path, equal, value in self.terms:
            found: Any = obj
            for part in path.split("."):
                found = found.get(part) if isinstance(found, dict) else None
            text = "" if found is None else str(found).lower() if isinstance(found, bool) else str(found)
            if (text == value) != equal:
                return False
        return True


# --------------------------------------------------------------------------------------------------
# Patches
# --------------------------------------------------------------------------------------------------


class Patcher:
    """The three patch formats a client may send: RFC 7386 merge patch, strategic merge patch (treated as
    a merge patch: list entries are replaced, never merged by key) and RFC 6902 JSON patch."""

    MERGE = "application/merge-patch+json"
    STRATEGIC = "application/strategic-merge-patch+json"
    JSON = "application/json-patch+json"

    @classmethod
    def apply(cls, content_type: str, target: Obj, patch: Any, rt: ResourceType) -> Obj:
        media = content_type.split(";")[0].strip().lower()
        accepted = [cls.JSON, cls.MERGE, "application/apply-patch+yaml"]
        if not rt.custom:
            accepted.insert(2, cls.STRATEGIC)
        if media not in (cls.MERGE, cls.JSON) and not (media == cls.STRATEGIC and not rt.custom):
            raise ApiError(415, "UnsupportedMediaType",
                           f"the body of the request was in an unknown format - accepted media types "
                           f"include: {', '.join(accepted)}")
        if media == cls.JSON:
            if not isinstance(patch, list):
                raise ApiError.bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
            return cls.json_patch(target, patch)
        if not isinstance(patch, dict):
            raise ApiError.bad_request("json: cannot unmarshal array into Go value of type map[string]interface {}")
        return cls.merge_patch(target, patch)

    @classmethod
    def merge_patch(cls, target: Any, patch: Any) -> Any:
        if not isinstance(patch, dict):
            return copy.deepcopy(patch)
        result = copy.deepcopy(target) if isinstance(target, dict) else {}
        for key, value in patch.items():
            if value is None:
                result.pop(key, None)
            else:
                result[key] = cls.merge_patch(result.get(key), value)
        return result

    @classmethod
    def json_patch(cls, target: Obj, operations: list[Any]) -> Obj:
        doc = copy.deepcopy(target)
        for op in operations:
            if not isinstance(op, dict) or "op" not in op or "path" not in op:
                raise ApiError(422, "Invalid", "the server rejected our request due to an error in our request")
            kind, path = op["op"], op["path"]
            if kind == "add":
                doc = cls._add(doc, path, copy.deepcopy(op.get("value")))
            elif kind == "remove":
                cls._remove(doc, path)
            elif kind == "replace":
                cls._remove(doc, path)
                doc = cls._add(doc, path, copy.deepcopy(op.get("value")))
            elif kind == "move":
                value = cls._get(doc, op["from"])
                cls._remove(doc, op["from"])
                doc = cls._add(doc, path, value)
            elif kind == "copy":
                doc = cls._add(doc, path, copy.deepcopy(cls._get(doc, op["from"])))
            elif kind == "test":
                if cls._get(doc, path) != op.get("value"):
                    raise ApiError(422, "Invalid", f"the server rejected our request due to an error in our "
                                                   f"request: testing value {path} failed")
            else:
                raise ApiError(422, "Invalid", f"Unexpected kind: {kind}")
        return doc

    @staticmethod
    def _split(path: str) -> list[str]:
        if path == "":
            return []
        if not path.startswith("/"):
            raise ApiError(422, "Invalid", f"JSON pointer must start with '/': {path}")
        return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]

    @classmethod
    def _parent(cls, doc: Any, path: str) -> tuple[Any, str]:
        parts = cls._split(path)
        if not parts:
            raise ApiError(422, "Invalid", "cannot operate on the document root")
        node = doc
        for part in parts[:-1]:
            node = cls._step(node, part, path)
        return node, parts[-1]

    @staticmethod
    def _step(node: Any, part: str, path: str) -> Any:
        try:
            return node[int(part)] if isinstance(node, list) else node[part]
        except (KeyError, IndexError, ValueError, TypeError):
            raise ApiError(422, "Invalid", f"the server rejected our request due to an error in our "
                                           f"request: doc is missing path: \"{path}\"") from None

    @classmethod
    def _get(cls, doc: Any, path: str) -> Any:
        node = doc
        for part in cls._split(path):
            node = cls._step(node, part, path)
        return copy.deepcopy(node)

    @classmethod
    def _add(cls, doc: Any, path: str, value: Any) -> Any:
        if path == "":
            return value
        parent, last = cls._parent(doc, path)
        if isinstance(parent, list):
            index = len(parent) if last == "-" else int(last)
            if not 0 <= index <= len(parent):
                raise ApiError(422, "Invalid", f"add operation does not apply: index out of bounds: {path}")
            parent.insert(index, value)
        elif isinstance(parent, dict):
            parent[last] = value
        else:
            raise ApiError(422, "Invalid", f"doc is missing path: \"{path}\"")
        return doc

    @classmethod
    def _remove(cls, doc: Any, path: str) -> None:
        parent, last = cls._parent(doc, path)
        try:
            if isinstance(parent, list):
                del parent[int(last)]
            else:
                del parent[last]
        except (KeyError, IndexError, ValueError, TypeError):
            raise ApiError(422, "Invalid", f"the server rejected our request due to an error in our "
                                           f"request: doc is missing path: \"{path}\"") from None


# --------------------------------------------------------------------------------------------------
# Validation: the few checks a scheduler can trip over; full schemas are kubernetes-validate's job
# --------------------------------------------------------------------------------------------------

_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_LABEL_1123 = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_LABEL_1035 = r"[a-z]([-a-z0-9]*[a-z0-9])?"
_LABEL_VALUE = r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?"
_QUALIFIED_NAME = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"

_NAME_RULES: dict[str, tuple[str, int, str]] = {
    "subdomain": (_SUBDOMAIN, 253, "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                  "characters, '-' or '.', and must start and end with an alphanumeric character (e.g. "
                  f"'example.com', regex used for validation is '{_SUBDOMAIN}')"),
    "label": (_LABEL_1123, 63, "a lowercase RFC 1123 label must consist of lower case alphanumeric "
              "characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  "
              f"or '123-abc', regex used for validation is '{_LABEL_1123}')"),
    "dns1035": (_LABEL_1035, 63, "a DNS-1035 label must consist of lower case alphanumeric characters or "
                "'-', start with an alphabetic character, and end with an alphanumeric character (e.g. "
                f"'my-name',  or 'abc-123', regex used for validation is '{_LABEL_1035}')"),
}
_NAME_RULES["subdomain63"] = (_SUBDOMAIN, 63, _NAME_RULES["subdomain"][2])


_QUANTITY = re.compile(r"([+-]?[0-9.]+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?")
_SUFFIXES = {"": 1.0, "n": 1e-9, "u": 1e-6, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15,
             "E": 1e18, "Ki": 2.0 ** 10, "Mi": 2.0 ** 20, "Gi": 2.0 ** 30, "Ti": 2.0 ** 40, "Pi": 2.0 ** 50,
             "Ei": 2.0 ** 60}


def parse_quantity(value: Any) -> Optional[float]:
    """A resource quantity (``2``, ``500m``, ``1Gi``, ``1e3``) as a number; None where it is none."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    m = _QUANTITY.fullmatch(str(value))
    if m is None:
        return None
    try:
        number = float(m.group(1))
    except ValueError:
        return None
    suffix = m.group(2) or ""
    return number * (10.0 ** int(suffix[1:]) if suffix[:1] in ("e", "E") else _SUFFIXES[suffix])


class Validator:
    """Create and update checks the real API does that a scheduler's manifests can fail: names, label
    syntax, containers present, no resource request above its limit, a Job's restartPolicy, service
    ports. Returns causes, never raises."""

    @staticmethod
    def name(rt: ResourceType, name: str) -> list[Cause]:
        regex, limit, text = _NAME_RULES[rt.name_rule]
        causes = []
        if len(name) > limit:
            causes.append(Cause.invalid("metadata.name", name, f"must be no more than {limit} characters"))
        if not re.fullmatch(regex, name):
            causes.append(Cause.invalid("metadata.name", name, text))
        return causes

    @staticmethod
    def labels(labels: Any, path: str) -> list[Cause]:
        causes: list[Cause] = []
        for key, value in (labels or {}).items():
            prefix, _, name = key.rpartition("/")
            if prefix and (len(prefix) > 253 or not re.fullmatch(_SUBDOMAIN, prefix)):
                causes.append(Cause.invalid(path, key, "prefix part " + _NAME_RULES["subdomain"][2]))
            if len(name) > 63 or not re.fullmatch(_QUALIFIED_NAME, name):
                causes.append(Cause.invalid(path, key, "name part must consist of alphanumeric characters, "
                                            "'-', '_' or '.', and must start and end with an alphanumeric "
                                            "character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex "
                                            f"used for validation is '{_QUALIFIED_NAME}')"))
            if not isinstance(value, str):
                causes.append(Cause.invalid(path, value, "label values must be strings"))
            elif len(value) > 63:
                causes.append(Cause.invalid(path, value, "must be no more than 63 characters"))
            elif not re.fullmatch(_LABEL_VALUE, value):
                causes.append(Cause.invalid(path, value, "a valid label must be an empty string or consist "
                                            "of alphanumeric characters, '-', '_' or '.', and must start "
                                            "and end with an alphanumeric character (e.g. 'MyValue',  or "
                                            "'my_value',  or '12345', regex used for validation is "
                                            f"'{_LABEL_VALUE}')"))
        return causes

    @classmethod
    def pod_spec(cls, spec: Any, path: str) -> list[Cause]:
        if not isinstance(spec, dict):
            return [Cause.required(path)]
        containers = spec.get("containers") or []
        if not containers:
            return [Cause.required(f"{path}.containers")]
        causes, seen = [], set()
        for i, c in enumerate(containers):
            where = f"{path}.containers[{i}]"
            name = c.get("name", "")
            if not name:
                causes.append(Cause.required(f"{where}.name"))
            elif name in seen:
                causes.append(Cause("FieldValueDuplicate", f"{where}.name", f"Duplicate value: {json.dumps(name)}"))
            elif not re.fullmatch(_LABEL_1123, name) or len(name) > 63:
                causes.append(Cause.invalid(f"{where}.name", name, _NAME_RULES["label"][2]))
            seen.add(name)
            if not c.get("image"):
                causes.append(Cause.required(f"{where}.image"))
            causes += cls.resources(c.get("resources") or {}, f"{where}.resources")
        return causes

    @staticmethod
    def resources(resources: Any, path: str) -> list[Cause]:
        """No request above its limit (validateResourceRequirements: the cause names ``requests``, not the
        resource). A quantity that does not parse fails the real server's decoding (a 400) before any
        validation: not played here."""
        causes: list[Cause] = []
        limits, requests = (resources or {}).get("limits") or {}, (resources or {}).get("requests") or {}
        for name, value in requests.items():
            request, limit = parse_quantity(value), parse_quantity(limits.get(name))
            if request is not None and limit is not None and request > limit:
                causes.append(Cause.invalid(f"{path}.requests", str(value),
                                            f"must be less than or equal to {name} limit of {limits[name]}"))
        return causes

    @staticmethod
    def lease_spec(spec: Obj) -> list[Cause]:
        """ValidateLeaseSpec: a positive duration, no negative transitions."""
        causes = []
        duration, transitions = spec.get("leaseDurationSeconds"), spec.get("leaseTransitions")
        if duration is not None and duration <= 0:
            causes.append(Cause.invalid("spec.leaseDurationSeconds", duration, "must be greater than 0"))
        if transitions is not None and transitions < 0:
            causes.append(Cause.invalid("spec.leaseTransitions", transitions, "must be greater than or equal to 0"))
        return causes

    @classmethod
    def check(cls, rt: ResourceType, obj: Obj) -> list[Cause]:
        meta = obj.get("metadata") or {}
        causes = cls.labels(meta.get("labels"), "metadata.labels")
        spec = obj.get("spec") or {}
        if rt.api_version == "v1" and rt.plural == "pods":
            causes += cls.pod_spec(spec, "spec")
        elif rt.api_version == "batch/v1" and rt.plural == "jobs":
            template = spec.get("template") or {}
            causes += cls.labels((template.get("metadata") or {}).get("labels"), "spec.template.metadata.labels")
            causes += cls.pod_spec(template.get("spec"), "spec.template.spec")
            policy = (template.get("spec") or {}).get("restartPolicy", "Always")
            if policy not in ("OnFailure", "Never"):
                causes.append(Cause.not_supported("spec.template.spec.restartPolicy", policy, ["OnFailure", "Never"]))
        elif rt.api_version == "coordination.k8s.io/v1" and rt.plural == "leases":
            causes += cls.lease_spec(spec)
        elif rt.plural == "services" and not rt.group:
            headless = spec.get("clusterIP") == "None"
            if not spec.get("ports") and not headless and spec.get("type", "ClusterIP") != "ExternalName":
                causes.append(Cause.required("spec.ports"))
            for i, port in enumerate(spec.get("ports") or []):
                if not isinstance(port.get("port"), int) or not 1 <= port["port"] <= 65535:
                    causes.append(Cause.invalid(f"spec.ports[{i}].port", port.get("port"),
                                                "must be between 1 and 65535, inclusive"))
        return causes


# --------------------------------------------------------------------------------------------------
# Time formats
# --------------------------------------------------------------------------------------------------


def rfc3339(seconds: Optional[float] = None) -> str:
    """Second precision, as metadata timestamps are."""
    moment = datetime.fromtimestamp(time.time() if seconds is None else seconds, tz=timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def rfc3339_nano(ns: int) -> str:
    """Fixed nine digits, as the kubelet prefixes log lines (RFC3339NanoFixed)."""
    seconds, nanos = divmod(ns, 1_000_000_000)
    return datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S") + f".{nanos:09d}Z"


#: metav1.MicroTime's layout (RFC3339Micro): exactly six fractional digits, which Go's parser insists on
MICRO_TIME_LAYOUT = "2006-01-02T15:04:05.000000Z07:00"
_MICRO_TIME = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d{6})(Z|[+-]\d\d:\d\d)")
#: the MicroTime fields of a served kind's spec
MICRO_TIME_FIELDS = {("coordination.k8s.io", "leases"): ("acquireTime", "renewTime")}


def decode_micro_times(rt: ResourceType, body: Obj) -> None:
    """A MicroTime the server cannot decode makes the whole body a 400, with Go's parse error; one it can
    is stored in UTC (``...Z``), as the real server writes it back."""
    spec = body.get("spec") if isinstance(body.get("spec"), dict) else {}
    for name in MICRO_TIME_FIELDS.get((rt.group, rt.plural), ()):
        value = spec.get(name)
        if value is None:
            continue
        match = _MICRO_TIME.fullmatch(value) if isinstance(value, str) else None
        if match is None:
            whole = re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", value) if isinstance(value, str) else None
            rest, element = (value[whole.end():], ".000000") if whole else (value, "2006")
            raise ApiError.bad_request(f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
                                       f'parsing time {json.dumps(value)} as "{MICRO_TIME_LAYOUT}": cannot parse '
                                       f'{json.dumps(rest)} as "{element}"')
        base, fraction, zone = match.groups()
        moment = datetime.fromisoformat(base + ("+00:00" if zone == "Z" else zone)).astimezone(timezone.utc)
        spec[name] = moment.strftime("%Y-%m-%dT%H:%M:%S") + fraction + "Z"


def parse_rfc3339(text: str) -> int:
    """RFC 3339 with optional fraction (up to nanoseconds) to Unix nanoseconds."""
    m = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)", text.strip())
    if not m:
        raise ValueError(text)
    base, fraction, zone = m.groups()
    moment = datetime.fromisoformat(base + ("+00:00" if zone == "Z" else zone))
    return int(moment.timestamp()) * 1_000_000_000 + int((fraction or "0").ljust(9, "0"))


# --------------------------------------------------------------------------------------------------
# The object store
# --------------------------------------------------------------------------------------------------


class Key(NamedTuple):
    api_version: str
    plural: str
    namespace: str  # "" for cluster-scoped resources
    name: str


@dataclass(frozen=True)
class WatchEvent:
    resource_version: int
    type: str  # ADDED MODIFIED DELETED
    key: Key
    object: Obj


@dataclass(frozen=True)
class DeleteOptions:
    propagation: Optional[str] = None  # Foreground | Background | Orphan
    dry_run: bool = False
    uid: Optional[str] = None  # preconditions
    resource_version: Optional[str] = None


class ObjectStore:
    """Every object, keyed by (api version, plural, namespace, name), with the API's write semantics:
    resourceVersion, generation, optimistic concurrency, status subresources and garbage collection.

    One re-entrant lock guards objects, the watch history and pod logs; its condition wakes log
    followers and watchers whenever anything changes."""

    def __init__(self, registry: ResourceRegistry) -> None:
        self.registry = registry
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.closed = False  # set while the server stops, so streams end
        self._objects: dict[Key, Obj] = {}
        self._events: list[WatchEvent] = []
        self._revision = 1
        self.create(registry.get("v1", "namespaces"), None, {"metadata": {"name": "default"}})

    # -- reading

    @property
    def revision(self) -> str:
        with self.lock:
            return str(self._revision)

    def key(self, rt: ResourceType, namespace: Optional[str], name: str) -> Key:
        return Key(rt.api_version, rt.plural, (namespace or "") if rt.namespaced else "", name)

    def get(self, rt: ResourceType, namespace: Optional[str], name: str) -> Obj:
        with self.lock:
            found = self._objects.get(self.key(rt, namespace, name))
            if found is None:
                raise ApiError.not_found(rt, name)
            return copy.deepcopy(found)

    def find(self, rt: ResourceType, namespace: Optional[str], name: str) -> Optional[Obj]:
        with self.lock:
            found = self._objects.get(self.key(rt, namespace, name))
            return copy.deepcopy(found) if found is not None else None

    def list(self, rt: ResourceType, namespace: Optional[str] = None,
             labels: Optional[LabelSelector] = None, fields: Optional[FieldSelector] = None) -> list[Obj]:
        """Sorted by namespace then name, as etcd's key order returns them."""
        with self.lock:
            keys = sorted(k for k in self._objects
                          if (k.api_version, k.plural) == (rt.api_version, rt.plural)
                          and (namespace is None or k.namespace == namespace))
            objects = [self._objects[k] for k in keys]
            return [copy.deepcopy(o) for o in objects
                    if (labels is None or labels.matches(o["metadata"].get("labels")))
                    and (fields is None or fields.matches(o))]

    def by_uid(self, uid: str) -> Optional[tuple[Key, Obj]]:
        with self.lock:
            for key, obj in self._objects.items():
                if obj["metadata"].get("uid") == uid:
                    return key, copy.deepcopy(obj)
        return None

    def events_since(self, index: int) -> list[WatchEvent]:
        with self.lock:
            return self._events[index:]

    def event_index_after(self, resource_version: int) -> int:
        with self.lock:
            return next((i for i, e in enumerate(self._events) if e.resource_version > resource_version),
                        len(self._events))

    @property
    def event_count(self) -> int:
        with self.lock:
            return len(self._events)

    # -- writing

    def _bump(self) -> str:
        self._revision += 1
        return str(self._revision)

    def _record(self, kind: str, key: Key, obj: Obj) -> None:
        self._events.append(WatchEvent(int(obj["metadata"]["resourceVersion"]), kind, key, copy.deepcopy(obj)))
        self.changed.notify_all()

    def _check_namespace(self, rt: ResourceType, namespace: Optional[str]) -> None:
        if rt.namespaced and Key("v1", "namespaces", "", namespace or "") not in self._objects:
            raise ApiError.not_found(self.registry.get("v1", "namespaces"), namespace or "")

    def create(self, rt: ResourceType, namespace: Optional[str], body: Obj, dry_run: bool = False) -> Obj:
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise ApiError.bad_request("metadata must be an object")
        self._check_kind(rt, obj)
        if rt.namespaced:
            if meta.get("namespace") not in (None, "", namespace):
                raise ApiError.bad_request("the namespace of the provided object does not match the "
                                           "namespace sent on the request")
        with self.lock:
            self._check_namespace(rt, namespace)
            if not meta.get("name") and meta.get("generateName"):
                meta["name"] = self._generate_name(rt, namespace, meta["generateName"])
            name = meta.get("name") or ""
            if not name:
                raise ApiError.invalid(rt, "", [Cause.required("metadata.name",
                                                               "name or generateName is required")])
            causes = Validator.name(rt, name) + Validator.check(rt, obj)
            if causes:
                raise ApiError.invalid(rt, name, causes)
            key = self.key(rt, namespace, name)
            if key in self._objects:
                raise ApiError.already_exists(rt, name)
            for field_name in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"):
                meta.pop(field_name, None)
            meta.update(uid=str(uuid.uuid4()), creationTimestamp=rfc3339(), generation=1)
            if rt.namespaced:
                meta["namespace"] = namespace
            Defaulter.apply(rt, obj)
            if dry_run:
                meta["resourceVersion"] = ""  # never stored, never versioned
                return obj
            meta["resourceVersion"] = self._bump()
            self._objects[key] = obj
            self._record("ADDED", key, obj)
            return copy.deepcopy(obj)

    @staticmethod
    def _check_kind(rt: ResourceType, obj: Obj) -> None:
        kind, api_version = obj.get("kind"), obj.get("apiVersion")
        if rt.custom and not kind:
            raise ApiError.bad_request(f"Object 'Kind' is missing in '{json.dumps(obj, separators=(',', ':'))}'")
        if api_version and api_version != rt.api_version:
            raise ApiError.bad_request(f"the API version in the data ({api_version}) does not match the "
                                       f"expected API version ({rt.api_version})")
        if kind and kind != rt.kind:
            raise ApiError.bad_request(f"the kind in the data ({kind}) does not match the expected kind "
                                       f"({rt.kind})")
        obj["apiVersion"], obj["kind"] = rt.api_version, rt.kind

    def _generate_name(self, rt: ResourceType, namespace: Optional[str], prefix: str) -> str:
        alphabet = "bcdfghjklmnpqrstvwxz2456789"  # the apiserver's: no vowels, no look-alikes
        while True:
            name = prefix + "".join(secrets.choice(alphabet) for _ in range(5))
            if self.key(rt, namespace, name) not in self._objects:
                return name

    def replace(self, rt: ResourceType, namespace: Optional[str], name: str, body: Obj,
                subresource: Optional[str] = None, dry_run: bool = False) -> Obj:
        """PUT: optimistic concurrency on metadata.resourceVersion, immutable identity fields.  Without a
        resourceVersion it is unconditional, except where the type's strategy refuses that (custom resources,
        Leases)."""
        new = copy.deepcopy(body)
        meta = new.setdefault("metadata", {})
        if meta.get("name") not in (None, name):
            raise ApiError.bad_request(f"the name of the object ({meta.get('name')}) does not match the name "
                                       f"on the URL ({name})")
        self._check_kind(rt, new)
        with self.lock:
            old = self._objects.get(self.key(rt, namespace, name))
            if old is None:
                raise ApiError.not_found(rt, name)
            if not meta.get("resourceVersion") and (rt.custom or rt.conditional_only):
                cause = Cause("FieldValueInvalid", "metadata.resourceVersion",
                              "Invalid value: 0: must be specified for an update")
                raise ApiError(422, "Invalid", f'{rt.qualified} "{name}" is invalid: {cause.field}: {cause.message}',
                               rt.details(name, causes=[cause.to_json()]))
            return self._write(rt, namespace, name, old, new, subresource, dry_run)

    def patch(self, rt: ResourceType, namespace: Optional[str], name: str, content_type: str, patch: Any,
              subresource: Optional[str] = None, dry_run: bool = False) -> Obj:
        with self.lock:
            old = self._objects.get(self.key(rt, namespace, name))
            if old is None:
                raise ApiError.not_found(rt, name)
            new = Patcher.apply(content_type, old, patch, rt)
            if not isinstance(new, dict):
                raise ApiError.bad_request("the patch did not produce an object")
            new.setdefault("metadata", {})
            return self._write(rt, namespace, name, old, new, subresource, dry_run)

    def _write(self, rt: ResourceType, namespace: Optional[str], name: str, old: Obj, new: Obj,
               subresource: Optional[str], dry_run: bool) -> Obj:
        """The common tail of PUT and PATCH, for the main resource or its status."""
        given_version = new["metadata"].get("resourceVersion")
        if given_version and given_version != old["metadata"]["resourceVersion"]:
            raise ApiError.stale(rt, name)
        if subresource == "status":
            result = copy.deepcopy(old)
            result["status"] = copy.deepcopy(new.get("status", {}))
        else:
            result = new
            if rt.status_subresource:  # the main resource cannot change status, only /status can
                if "status" in old:
                    result["status"] = copy.deepcopy(old["status"])
                else:
                    result.pop("status", None)
            causes = Validator.check(rt, result)
            if causes:
                raise ApiError.invalid(rt, name, causes)
        meta = result["metadata"]
        for frozen in ("uid", "creationTimestamp", "namespace", "name", "generation", "deletionTimestamp"):
            if frozen in old["metadata"]:
                meta[frozen] = old["metadata"][frozen]
        result["apiVersion"], result["kind"] = rt.api_version, rt.kind
        if _spec_of(result) != _spec_of(old):
            meta["generation"] = old["metadata"].get("generation", 1) + 1
        if dry_run:
            return result
        meta["resourceVersion"] = self._bump()
        key = self.key(rt, namespace, name)
        self._objects[key] = result
        self._record("MODIFIED", key, result)
        return copy.deepcopy(result)

    def delete(self, rt: ResourceType, namespace: Optional[str], name: str,
               options: DeleteOptions = DeleteOptions()) -> tuple[Obj, str]:
        """Deletes the object now and returns (its last state, the propagation used). Dependents found
        through ownerReferences are deleted too (Foreground, Background) or released (Orphan) at once:
        the garbage collector, made synchronous."""
        with self.lock:
            key = self.key(rt, namespace, name)
            obj = self._objects.get(key)
            if obj is None:
                raise ApiError.not_found(rt, name)
            if options.uid and options.uid != obj["metadata"]["uid"]:
                raise ApiError.conflict(rt, name, f"Precondition failed: UID in precondition: {options.uid}, "
                                                  f"UID in object meta: {obj['metadata']['uid']}")
            if options.resource_version and options.resource_version != obj["metadata"]["resourceVersion"]:
                raise ApiError.conflict(rt, name, "Precondition failed: ResourceVersion in precondition: "
                                                  f"{options.resource_version}, ResourceVersion in object meta: "
                                                  f"{obj['metadata']['resourceVersion']}")
            propagation = options.propagation or rt.default_propagation
            if options.dry_run:
                return copy.deepcopy(obj), propagation
            self._remove(key, propagation)
            return copy.deepcopy(obj), propagation

    def _remove(self, key: Key, propagation: str) -> None:
        obj = self._objects.pop(key)
        uid = obj["metadata"]["uid"]
        obj["metadata"]["resourceVersion"] = self._bump()
        self._record("DELETED", key, obj)
        if key.plural == "namespaces" and key.api_version == "v1":
            for child in [k for k in self._objects if k.namespace == key.name]:
                if child in self._objects:
                    self._remove(child, "Background")
        for child_key, child in list(self._objects.items()):
            refs = child["metadata"].get("ownerReferences") or []
            if child_key not in self._objects or not any(r.get("uid") == uid for r in refs):
                continue
            if propagation == "Orphan":
                remaining = [r for r in refs if r.get("uid") != uid]
                if remaining:
                    child["metadata"]["ownerReferences"] = remaining
                else:
                    child["metadata"].pop("ownerReferences")
                child["metadata"]["resourceVersion"] = self._bump()
                self._record("MODIFIED", child_key, child)
            else:
                self._remove(child_key, "Background")

    def put_status(self, rt: ResourceType, namespace: Optional[str], name: str, status: Obj) -> Obj:
        """What a controller or the kubelet does: replace status, bump resourceVersion, not generation."""
        with self.lock:
            key = self.key(rt, namespace, name)
            if key not in self._objects:
                raise ApiError.not_found(rt, name)
            obj = self._objects[key]
            obj["status"] = copy.deepcopy(status)
            obj["metadata"]["resourceVersion"] = self._bump()
            self._record("MODIFIED", key, obj)
            return copy.deepcopy(obj)

    def put_spec_field(self, rt: ResourceType, namespace: Optional[str], name: str, path: str, value: Any) -> None:
        """For the scheduler's part in tests (pod.spec.nodeName): one field, no generation change."""
        with self.lock:
            obj = self._objects[self.key(rt, namespace, name)]
            node = obj
            parts = path.split(".")
            for part in parts[:-1]:
                node = node.setdefault(part, {})
            node[parts[-1]] = value


def _spec_of(obj: Obj) -> Obj:
    """Everything but metadata and status: what generation counts changes of."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


class Defaulter:
    """The defaults the API fills in on create that a scheduler may read back."""

    @classmethod
    def apply(cls, rt: ResourceType, obj: Obj) -> None:
        if rt.custom:
            obj.pop("status", None)  # a CRD with a status subresource ignores status on create
            return
        handler = getattr(cls, f"_{rt.plural}", None) if rt.api_version in ("v1", "batch/v1") else None
        if handler is not None:
            handler(obj)

    @staticmethod
    def _pods(pod: Obj) -> None:
        spec = pod.setdefault("spec", {})
        spec.setdefault("restartPolicy", "Always")
        spec.setdefault("schedulerName", "default-scheduler")
        spec.setdefault("dnsPolicy", "ClusterFirst")
        spec.setdefault("terminationGracePeriodSeconds", 30)
        for c in spec.get("containers", []):
            tag = c.get("image", "").rpartition(":")[2] if ":" in c.get("image", "").rpartition("/")[2] else ""
            c.setdefault("imagePullPolicy", "Always" if tag in ("", "latest") else "IfNotPresent")
            c.setdefault("terminationMessagePath", "/dev/termination-log")
            c.setdefault("terminationMessagePolicy", "File")
        pod["status"] = {"phase": "Pending", "qosClass": "BestEffort"}

    @staticmethod
    def _services(svc: Obj) -> None:
        spec = svc.setdefault("spec", {})
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        if "clusterIP" not in spec:
            digest = hashlib.sha256(svc["metadata"]["uid"].encode()).digest()
            spec["clusterIP"] = f"10.96.{digest[0]}.{digest[1] or 1}"
        spec.setdefault("clusterIPs", [spec["clusterIP"]])
        spec.setdefault("ipFamilies", ["IPv4"])
        spec.setdefault("ipFamilyPolicy", "SingleStack")
        spec.setdefault("internalTrafficPolicy", "Cluster")
        for port in spec.get("ports", []):
            port.setdefault("protocol", "TCP")
            port.setdefault("targetPort", port.get("port"))
        svc["status"] = {"loadBalancer": {}}

    @staticmethod
    def _jobs(job: Obj) -> None:
        spec = job.setdefault("spec", {})
        if "parallelism" not in spec and "completions" not in spec:
            spec["completions"] = 1
        spec.setdefault("parallelism", 1)
        spec.setdefault("backoffLimit", 6)
        spec.setdefault("completionMode", "NonIndexed")
        spec.setdefault("suspend", False)
        spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
        uid, name = job["metadata"]["uid"], job["metadata"]["name"]
        controller_labels = {"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": name,
                             "controller-uid": uid, "job-name": name}
        if not spec.get("manualSelector"):
            spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
            template_meta = spec.setdefault("template", {}).setdefault("metadata", {})
            template_meta["labels"] = {**(template_meta.get("labels") or {}), **controller_labels}
        Defaulter._pods_template(spec.get("template", {}))
        job["status"] = {}

    @staticmethod
    def _pods_template(template: Obj) -> None:
        spec = template.get("spec")
        if isinstance(spec, dict):
            spec.setdefault("schedulerName", "default-scheduler")
            spec.setdefault("dnsPolicy", "ClusterFirst")
            spec.setdefault("terminationGracePeriodSeconds", 30)

    @staticmethod
    def _namespaces(ns: Obj) -> None:
        ns.setdefault("spec", {"finalizers": ["kubernetes"]})
        labels = ns["metadata"].setdefault("labels", {})
        labels.setdefault("kubernetes.io/metadata.name", ns["metadata"]["name"])
        ns["status"] = {"phase": "Active"}


# --------------------------------------------------------------------------------------------------
# Pod logs
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LogLine:
    time_ns: int
    text: str  # without the newline


class LogStore:
    """Lines per (pod uid, container, restart count): each container instance keeps its own log, so
    ``previous=true`` reads the instance before the current one, and a pod re-created under the same
    name starts empty. Guarded by the object store's lock."""

    def __init__(self) -> None:
        self._lines: dict[tuple[str, str, int], list[LogLine]] = {}
        #: container instances whose process has exited: their follow streams end, whatever the pod's
        #: status says yet (the real kubelet reports the status a moment after the log ends)
        self.ended: set[tuple[str, str, int]] = set()

    def append(self, pod_uid: str, container: str, instance: int, text: str, time_ns: Optional[int] = None) -> None:
        lines = text.split("\n")
        if text.endswith("\n"):
            lines.pop()
        stamp = time.time_ns() if time_ns is None else time_ns
        self.lines(pod_uid, container, instance).extend(LogLine(stamp, line) for line in lines)

    def lines(self, pod_uid: str, container: str, instance: int) -> list[LogLine]:
        """The live list (append-only), so a follower's position into it stays valid."""
        return self._lines.setdefault((pod_uid, container, instance), [])


@dataclass(frozen=True)
class LogOptions:
    """The query of ``GET .../pods/{name}/log``, checked as the API checks PodLogOptions."""

    container: Optional[str] = None
    follow: bool = False
    previous: bool = False
    timestamps: bool = False
    since_ns: Optional[int] = None
    tail_lines: Optional[int] = None
    limit_bytes: Optional[int] = None

    @classmethod
    def parse(cls, query: Mapping[str, str], pod_name: str) -> "LogOptions":
        def flag(name: str) -> bool:
            return query.get(name, "false").lower() in ("true", "1")

        def number(name: str) -> Optional[int]:
            if name not in query:
                return None
            try:
                return int(query[name])
            except ValueError:
                raise ApiError.bad_request(f'strconv.ParseInt: parsing "{query[name]}": invalid syntax') from None

        causes: list[Cause] = []
        since_seconds, tail, limit = number("sinceSeconds"), number("tailLines"), number("limitBytes")
        since_ns = None
        if since_seconds is not None:
            if since_seconds < 1:
                causes.append(Cause.invalid("sinceSeconds", since_seconds, "must be greater than 0"))
            since_ns = time.time_ns() - since_seconds * 1_000_000_000
        if "sinceTime" in query:
            if since_seconds is not None:
                causes.append(Cause("FieldValueForbidden", "",
                                    "Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified"))
            try:
                since_ns = parse_rfc3339(query["sinceTime"])
            except ValueError:
                raise ApiError.bad_request(f'parsing time "{query["sinceTime"]}" as RFC3339: cannot parse') from None
        if tail is not None and tail < 0:
            causes.append(Cause.invalid("tailLines", tail, "must be greater than or equal to 0"))
        if limit is not None and limit < 1:
            causes.append(Cause.invalid("limitBytes", limit, "must be greater than 0"))
        if causes:
            raise ApiError.invalid(ResourceType("", "v1", "pods", "PodLogOptions"), pod_name, causes)
        return cls(query.get("container"), flag("follow"), flag("previous"), flag("timestamps"),
                   since_ns, tail, limit)


# --------------------------------------------------------------------------------------------------
# Fault injection
# --------------------------------------------------------------------------------------------------


@dataclass
class Fault:
    """What to do to matching requests: wait ``delay_s`` (a slow or hung server), then fail with ``code``
    (0: answer normally after the delay)."""

    verb: str  # HTTP method, or "*"
    pattern: "re.Pattern[str]"
    remaining: int
    code: int = 0
    reason: Optional[str] = None
    message: Optional[str] = None
    details: Optional[Obj] = None
    retry_after: Optional[int] = None
    delay_s: float = 0.0


class FaultInjector:
    """Makes the next N requests that match (HTTP method, path regex) fail with a chosen Status."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: list[Fault] = []

    def add(self, fault: Fault) -> None:
        with self._lock:
            self._faults.append(fault)

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()

    def take(self, verb: str, path: str) -> Optional[Fault]:
        with self._lock:
            for fault in self._faults:
                if fault.verb in ("*", verb) and fault.pattern.search(path):
                    fault.remaining -= 1
                    if fault.remaining <= 0:
                        self._faults.remove(fault)
                    return fault
        return None

    @property
    def pending(self) -> int:
        with self._lock:
            return sum(f.remaining for f in self._faults)


# --------------------------------------------------------------------------------------------------
# The kubelet's pod status
# --------------------------------------------------------------------------------------------------


class KubeletStatus:
    """Builds ``pod.status`` the way the kubelet reports it: phase, conditions, IPs, and per container
    ``state`` (waiting / running / terminated), ``lastState`` after a restart, ``restartCount``, ``ready``,
    ``started`` and a containerID per container instance."""

    @staticmethod
    def container_id(pod_uid: str, container: str, instance: int) -> str:
        digest = hashlib.sha256(f"{pod_uid}/{container}/{instance}".encode()).hexdigest()
        return f"containerd://{digest}"

    @classmethod
    def build(cls, pod: Obj, phase: str, containers: Sequence[str], exit_code: Optional[int],
              reason: Optional[str], message: Optional[str], restarts: Optional[int],
              waiting_reason: Optional[str]) -> Obj:
        now = rfc3339()
        old = copy.deepcopy(pod.get("status") or {})
        uid = pod["metadata"]["uid"]
        images = {c["name"]: c.get("image", "") for c in pod["spec"].get("containers", [])}
        previous = {s["name"]: s for s in old.get("containerStatuses", [])}
        statuses = []
        for name in images:
            status = previous.get(name) or {"name": name, "image": images[name], "imageID": "",
                                            "ready": False, "restartCount": 0, "started": False,
                                            "state": {"waiting": {"reason": "ContainerCreating"}},
                                            "lastState": {}}
            if name in containers:
                status = cls._container(uid, status, phase, exit_code, reason, message, restarts,
                                        waiting_reason, now)
            statuses.append(status)
        status_out: Obj = {"phase": phase}
        if phase == "Failed" and exit_code is None and reason:
            status_out.update(reason=reason, message=message or "")  # pod-level failure, e.g. Evicted
        all_ready = bool(statuses) and all(s["ready"] for s in statuses)
        done_reason = {"Succeeded": "PodCompleted", "Failed": "PodFailed"}.get(phase)
        not_ready = done_reason or (None if all_ready else "ContainersNotReady")
        sandbox_ready = phase != "Pending" or bool(old.get("startTime"))
        conditions = [cls._condition("PodReadyToStartContainers", sandbox_ready, now),
                      cls._condition("Initialized", True, now, done_reason if phase == "Succeeded" else None),
                      cls._condition("Ready", all_ready, now, not_ready),
                      cls._condition("ContainersReady", all_ready, now, not_ready),
                      cls._condition("PodScheduled", True, now)]
        digest = hashlib.sha256(uid.encode()).digest()
        pod_ip = f"10.244.{digest[0]}.{digest[1] or 1}"
        status_out.update(conditions=conditions, hostIP="10.0.0.1", hostIPs=[{"ip": "10.0.0.1"}],
                          podIP=pod_ip, podIPs=[{"ip": pod_ip}], startTime=old.get("startTime") or now,
                          containerStatuses=statuses, qosClass=old.get("qosClass", "BestEffort"))
        return status_out

    @staticmethod
    def _condition(kind: str, ok: bool, now: str, reason: Optional[str] = None) -> Obj:
        condition: Obj = {"type": kind, "status": "True" if ok else "False", "lastProbeTime": None,
                          "lastTransitionTime": now}
        if reason:
            condition["reason"] = reason
        return condition

    @classmethod
    def _container(cls, pod_uid: str, status: Obj, phase: str, exit_code: Optional[int], reason: Optional[str],
                   message: Optional[str], restarts: Optional[int], waiting_reason: Optional[str], now: str) -> Obj:
        status = copy.deepcopy(status)
        name, instance = status["name"], status.get("restartCount", 0)
        if restarts is not None and restarts > instance:
            # The instance that ended: as last reported if it terminated, else as exit_code/reason say.
            code = 1 if exit_code is None or phase in ("Succeeded", "Failed") else exit_code
            ended = status.get("state", {}).get("terminated") or {
                "exitCode": code, "reason": (reason if phase not in ("Succeeded", "Failed") else None)
                or ("Completed" if code == 0 else "Error"),
                "startedAt": status.get("state", {}).get("running", {}).get("startedAt", now),
                "finishedAt": now, "containerID": cls.container_id(pod_uid, name, restarts - 1)}
            status["lastState"] = {"terminated": ended}
            instance = status["restartCount"] = restarts
        started_at = status.get("state", {}).get("running", {}).get("startedAt", now)
        container_id = cls.container_id(pod_uid, name, instance)
        if waiting_reason or phase == "Pending":
            waiting: Obj = {"reason": waiting_reason or "ContainerCreating"}
            if message:
                waiting["message"] = message
            state: Obj = {"waiting": waiting}
            status.pop("containerID", None)
        elif phase == "Running":
            state = {"running": {"startedAt": started_at}}
        elif phase in ("Succeeded", "Failed"):
            code = exit_code if exit_code is not None else (0 if phase == "Succeeded" else 1)
            terminated: Obj = {"exitCode": code, "reason": reason or ("Completed" if code == 0 else "Error"),
                               "startedAt": started_at, "finishedAt": now, "containerID": container_id}
            if message and exit_code is not None:
                terminated["message"] = message
            state = {"terminated": terminated}
        else:  # Unknown: the kubelet lost touch; keep what was last reported
            state = status.get("state", {})
        status["state"] = state
        if "running" in state or "terminated" in state:
            status["containerID"] = container_id
            image_digest = hashlib.sha256(status["image"].encode()).hexdigest()
            status["imageID"] = status.get("imageID") or f"sha256:{image_digest}"
        status["started"] = "running" in state
        status["ready"] = "running" in state and phase == "Running"
        return status

    @staticmethod
    def container_status(pod: Obj, container: str) -> Optional[Obj]:
        statuses = (pod.get("status") or {}).get("containerStatuses", [])
        return next((s for s in statuses if s["name"] == container), None)

    @staticmethod
    def log_instance(pod: Obj, container: str, previous: bool) -> int:
        """Which container instance's log to read, or ApiError: the kubelet's validateContainerLogStatus."""
        name = pod["metadata"]["name"]
        found = KubeletStatus.container_status(pod, container)
        if found is None:
            raise ApiError.bad_request(f'container "{container}" in pod "{name}" is waiting to start: '
                                       'ContainerCreating')
        state, last, count = found.get("state", {}), found.get("lastState", {}), found.get("restartCount", 0)
        if previous:
            if not last.get("terminated"):
                raise ApiError.bad_request(f'previous terminated container "{container}" in pod "{name}" not found')
            return count - 1
        if "running" in state or "terminated" in state:
            return count
        if last.get("terminated"):
            return count - 1  # crash-looping: the last run's log
        reason = state.get("waiting", {}).get("reason", "")
        reason = {"ErrImagePull": "image can't be pulled",
                  "ImagePullBackOff": "trying and failing to pull image"}.get(reason, reason)
        raise ApiError.bad_request(f'container "{container}" in pod "{name}" is waiting to start: {reason}')

    @staticmethod
    def still_writing(pod: Optional[Obj], container: str, instance: int) -> bool:
        """True while the followed container instance runs, so a follow stream stays open."""
        if pod is None or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return False
        found = KubeletStatus.container_status(pod, container)
        return bool(found) and "running" in found.get("state", {}) and found.get("restartCount", 0) == instance


# --------------------------------------------------------------------------------------------------
# HTTP plumbing
# --------------------------------------------------------------------------------------------------


class RecordedRequest(NamedTuple):
    """One request as the server saw it; compares equal to a plain (verb, path, query) tuple."""

    verb: str
    path: str
    query: dict[str, str]


class _HttpServer(ThreadingHTTPServer):
    """Tracks open connections so ``stop()`` can cut kept-alive ones: otherwise the client's pooled
    connection would still reach a handler thread of a server that is meant to be gone."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], api: "FakeApiServer") -> None:
        self.api = api
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        super().__init__(address, _RequestHandler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.connections_lock:
            self.connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.connections_lock:
            self.connections.discard(request)
        super().shutdown_request(request)

    def cut_connections(self) -> None:
        with self.connections_lock:
            open_now = list(self.connections)
        for conn in open_now:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class StreamTracker:
    """The follow and watch responses in progress, so ``stop()`` can let them write their last chunk
    before it cuts connections: a stream that ends on stop ends cleanly, as the kubelet's does when
    the container exits, instead of breaking mid-chunk."""

    def __init__(self, changed: threading.Condition) -> None:
        self._changed = changed
        self._open: set[int] = set()

    def enter(self, exchange: object) -> None:
        with self._changed:
            self._open.add(id(exchange))

    def leave(self, exchange: object) -> None:
        with self._changed:
            self._open.discard(id(exchange))
            self._changed.notify_all()

    def wait_idle(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with self._changed:
            while self._open and time.monotonic() < deadline:
                self._changed.wait(deadline - time.monotonic())


class _RequestHandler(BaseHTTPRequestHandler):
    """Hands every request to the REST layer; HTTP/1.1 so the client's connection pool keeps alive."""

    protocol_version = "HTTP/1.1"
    # answer at once, as the real API server does: with Nagle on, every response waits ~40 ms for the ACK
    disable_nagle_algorithm = True
    server: _HttpServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        pass

    def _dispatch(self) -> None:
        _Exchange(self).serve(self.server.api)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _dispatch


class _Exchange:
    """One request and its response: parsed path, query and body; JSON, Status and chunked replies."""

    def __init__(self, handler: _RequestHandler) -> None:
        self.handler = handler
        self.verb = handler.command
        parts = urlsplit(handler.path)
        self.path = parts.path.rstrip("/") or "/"
        self.query = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        self.content_type = handler.headers.get("Content-Type", "")
        length = int(handler.headers.get("Content-Length") or 0)
        self.raw_body = handler.rfile.read(length) if length else b""
        self.chunked = False
        self.api: Optional["FakeApiServer"] = None

    def body(self) -> Any:
        if not self.raw_body:
            return None
        try:
            return json.loads(self.raw_body)
        except ValueError as e:
            raise ApiError.bad_request(f"the body of the request could not be decoded: {e}") from None

    def serve(self, api: "FakeApiServer") -> None:
        self.api = api
        api.record(RecordedRequest(self.verb, self.path, dict(self.query)))
        try:
            self._serve(api)
        finally:
            api.streams.leave(self)

    def _serve(self, api: "FakeApiServer") -> None:
        try:
            api.authenticate(self.handler.headers.get("Authorization"))
            fault = api.faults.take(self.verb, self.path)
            if fault is not None and fault.delay_s:
                api.stall(fault.delay_s)
            if fault is not None and fault.code:
                raise api.fault_error(fault, self)
            api.rest.handle(self)
        except ApiError as error:
            if self.chunked:  # the stream already started: all we can do is end it
                self.end_chunks()
            else:
                self.send_json(error.code, error.status(), error.headers)
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            self.handler.close_connection = True
        except Exception as bug:  # a bug here must reach the test as a 500, not a hung client
            error = ApiError(500, "InternalError", f"Internal error occurred: {type(bug).__name__}: {bug}")
            if self.chunked:
                self.end_chunks()
            else:
                self.send_json(500, error.status())

    def send_text(self, code: int, text: str) -> None:
        data = text.encode()
        self.handler.send_response(code)
        self.handler.send_header("Content-Type", "text/plain; charset=utf-8")
        self.handler.send_header("Content-Length", str(len(data)))
        self.handler.end_headers()
        if self.verb != "HEAD":
            self.handler.wfile.write(data)

    def send_json(self, code: int, body: Any, headers: Optional[Mapping[str, str]] = None) -> None:
        data = json.dumps(body).encode()
        self.handler.send_response(code)
        self.handler.send_header("Content-Type", "application/json")
        self.handler.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.handler.send_header(name, value)
        self.handler.end_headers()
        if self.verb != "HEAD":
            self.handler.wfile.write(data)

    def start_chunks(self, content_type: str) -> None:
        if self.api is not None:
            self.api.streams.enter(self)
        self.handler.send_response(200)
        self.handler.send_header("Content-Type", content_type)
        self.handler.send_header("Transfer-Encoding", "chunked")
        self.handler.end_headers()
        self.chunked = True

    def write_chunk(self, data: bytes) -> None:
        if data:
            self.handler.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.handler.wfile.flush()

    def end_chunks(self) -> None:
        try:
            self.handler.wfile.write(b"0\r\n\r\n")
            self.handler.wfile.flush()
        except OSError:
            self.handler.close_connection = True
        self.chunked = False


# --------------------------------------------------------------------------------------------------
# REST handlers
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Route:
    rt: ResourceType
    namespace: Optional[str]  # None: all namespaces (or a cluster-scoped resource)
    name: Optional[str]
    subresource: Optional[str]


class RestApi:
    """Maps URLs to resources and HTTP verbs to store operations, with the real API's responses."""

    def __init__(self, api: "FakeApiServer") -> None:
        self.api = api
        self.store = api.store
        self.registry = api.store.registry

    # -- routing

    def route(self, path: str) -> Optional[Route]:
        parts = path.strip("/").split("/")
        if parts[0] == "api" and len(parts) >= 3:
            api_version, rest = parts[1], parts[2:]
        elif parts[0] == "apis" and len(parts) >= 4:
            api_version, rest = f"{parts[1]}/{parts[2]}", parts[3:]
        else:
            return None
        if len(rest) >= 3 and rest[0] == "namespaces":  # .../namespaces/{ns}/{plural}, unless {plural} is
            rt = self.registry.find(api_version, rest[2])  # a namespace's own subresource (status)
            if rt is not None and rt.namespaced:
                if len(rest) > 5:
                    return None
                return Route(rt, rest[1], rest[3] if len(rest) > 3 else None, rest[4] if len(rest) > 4 else None)
        rt = self.registry.find(api_version, rest[0])
        if rt is None or len(rest) > 3 or (rt.namespaced and len(rest) > 1):
            return None
        return Route(rt, None, rest[1] if len(rest) > 1 else None, rest[2] if len(rest) > 2 else None)

    def handle(self, ex: _Exchange) -> None:
        discovery = self.discovery(ex.path)
        if discovery is not None:
            if ex.verb != "GET":
                raise ApiError.method_not_allowed()
            return ex.send_json(200, discovery)
        route = self.route(ex.path)
        parts = ex.path.strip("/").split("/")
        if route is None and parts[0] == "apis" and len(parts) > 2 and not self.registry.serves_group(parts[1]):
            return ex.send_text(404, "404 page not found\n")  # an API group nobody installed: no Status at all
        if route is None:
            raise ApiError.no_route()
        if route.subresource == "log" and route.rt.plural == "pods" and not route.rt.group:
            if ex.verb != "GET":
                raise ApiError.method_not_allowed()
            return self.pod_log(ex, route)
        if route.subresource not in (None, "status") or (route.subresource and not route.rt.status_subresource):
            raise ApiError.no_route()
        if route.name is None:
            return self.collection(ex, route)
        return self.item(ex, route)

    def discovery(self, path: str) -> Optional[Obj]:
        if path == "/version":
            return {"major": "1", "minor": "31", "gitVersion": GIT_VERSION, "gitCommit": "0" * 40,
                    "gitTreeState": "clean", "buildDate": "2024-08-13T07:28:49Z", "goVersion": "go1.22.5",
                    "compiler": "gc", "platform": "linux/amd64"}
        if path == "/api":
            return {"kind": "APIVersions", "versions": ["v1"],
                    "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": self.api.address}]}
        groups = self.registry.group_versions()

        def group_json(name: str) -> Obj:
            versions = [{"groupVersion": f"{name}/{v}", "version": v} for v in groups[name]]
            return {"name": name, "versions": versions, "preferredVersion": versions[0]}

        if path == "/apis":
            return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [group_json(g) for g in groups]}
        parts = path.strip("/").split("/")
        if parts[0] == "apis" and len(parts) == 2 and parts[1] in groups:
            return {"kind": "APIGroup", "apiVersion": "v1", **group_json(parts[1])}
        group_version = "v1" if parts == ["api", "v1"] else None
        if parts[0] == "apis" and len(parts) == 3:
            group_version = f"{parts[1]}/{parts[2]}"
        types = [t for t in self.registry if t.api_version == group_version]
        if not types:
            return None
        resources: list[Obj] = []
        for t in types:
            resources.append({"name": t.plural, "singularName": t.kind.lower(), "namespaced": t.namespaced,
                              "kind": t.kind, "verbs": ["create", "delete", "deletecollection", "get", "list",
                                                        "patch", "update", "watch"]})
            if t.status_subresource:
                resources.append({"name": f"{t.plural}/status", "singularName": "", "namespaced": t.namespaced,
                                  "kind": t.kind, "verbs": ["get", "patch", "update"]})
            if t.plural == "pods" and not t.group:
                resources.append({"name": "pods/log", "singularName": "", "namespaced": True, "kind": "Pod",
                                  "verbs": ["get"]})
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}

    # -- collections

    def collection(self, ex: _Exchange, route: Route) -> None:
        rt = route.rt
        if ex.verb == "GET":
            if ex.query.get("watch", "").lower() in ("true", "1"):
                return self.watch(ex, route)
            return ex.send_json(200, self.list_body(route, ex.query))
        if ex.verb == "POST":
            if rt.namespaced and route.namespace is None:
                raise ApiError.method_not_allowed()
            body = ex.body()
            if not isinstance(body, dict):
                raise ApiError.bad_request("the body of the request must be an object")
            decode_micro_times(rt, body)
            created = self.store.create(rt, route.namespace, body, dry_run=self._dry_run(ex.query))
            return ex.send_json(201, created)
        if ex.verb == "DELETE":  # deletecollection
            options = self._delete_options(ex)
            victims = self.store.list(rt, route.namespace, LabelSelector(ex.query.get("labelSelector", "")),
                                      FieldSelector(ex.query.get("fieldSelector", ""), rt))
            deleted = []
            for victim in victims:
                try:
                    deleted.append(self.store.delete(rt, victim["metadata"].get("namespace"),
                                                     victim["metadata"]["name"], options)[0])
                except ApiError:
                    pass  # gone meanwhile
            return ex.send_json(200, self._list_json(rt, deleted, self.store.revision))
        raise ApiError.method_not_allowed()

    def list_body(self, route: Route, query: Mapping[str, str]) -> Obj:
        rt = route.rt
        items = self.store.list(rt, route.namespace, LabelSelector(query.get("labelSelector", "")),
                                FieldSelector(query.get("fieldSelector", ""), rt))
        revision = self.store.revision
        start = 0
        if query.get("continue"):
            try:
                start = int(json.loads(base64.b64decode(query["continue"]))["start"])
            except (ValueError, KeyError, TypeError):
                raise ApiError(410, "Expired", "The provided continue parameter is too old to display a consistent "
                                               "list result. You can start a new list without the continue "
                                               "parameter.") from None
        limit = int(query.get("limit") or 0)
        page = items[start:start + limit] if limit > 0 else items[start:]
        body = self._list_json(rt, page, revision)
        if limit > 0 and start + limit < len(items):
            body["metadata"]["continue"] = base64.b64encode(json.dumps({"start": start + limit}).encode()).decode()
            body["metadata"]["remainingItemCount"] = len(items) - start - limit
        return body

    @staticmethod
    def _list_json(rt: ResourceType, items: list[Obj], revision: str) -> Obj:
        if not rt.custom:  # built-in lists carry kind and apiVersion once, not per item
            for item in items:
                item.pop("kind", None)
                item.pop("apiVersion", None)
        return {"kind": f"{rt.kind}List", "apiVersion": rt.api_version,
                "metadata": {"resourceVersion": revision}, "items": items}

    def watch(self, ex: _Exchange, route: Route) -> None:
        """Newline-delimited watch events over a chunked response, until timeoutSeconds or stop()."""
        rt = route.rt
        labels = LabelSelector(ex.query.get("labelSelector", ""))
        fields = FieldSelector(ex.query.get("fieldSelector", ""), rt)
        deadline = time.monotonic() + float(ex.query.get("timeoutSeconds") or 1800)
        since = ex.query.get("resourceVersion", "")
        with self.store.lock:
            if since in ("", "0"):
                initial = [("ADDED", obj) for obj in self.store.list(rt, route.namespace, labels, fields)]
                index = self.store.event_count
            else:
                if not since.isdigit():
                    raise ApiError.bad_request(f'invalid resource version: "{since}"')
                initial, index = [], self.store.event_index_after(int(since))
        ex.start_chunks("application/json")
        for kind, obj in initial:
            ex.write_chunk(json.dumps({"type": kind, "object": obj}).encode() + b"\n")
        while True:
            with self.store.changed:
                events = self.store.events_since(index)
                while not events and not self.store.closed and time.monotonic() < deadline:
                    self.store.changed.wait(FOLLOW_POLL_S)
                    events = self.store.events_since(index)
                ended = not events
            index += len(events)
            for event in events:
                matches = ((event.key.api_version, event.key.plural) == (rt.api_version, rt.plural)
                           and (route.namespace is None or event.key.namespace == route.namespace)
                           and labels.matches(event.object["metadata"].get("labels")) and fields.matches(event.object))
                if matches:
                    ex.write_chunk(json.dumps({"type": event.type, "object": event.object}).encode() + b"\n")
            if ended:
                return ex.end_chunks()

    # -- single objects

    def item(self, ex: _Exchange, route: Route) -> None:
        rt, ns, name, sub = route.rt, route.namespace, route.name or "", route.subresource
        dry_run = self._dry_run(ex.query)
        if ex.verb == "GET":
            return ex.send_json(200, self.store.get(rt, ns, name))
        if ex.verb == "PUT":
            body = ex.body()
            if not isinstance(body, dict):
                raise ApiError.bad_request("the body of the request must be an object")
            decode_micro_times(rt, body)
            return ex.send_json(200, self.store.replace(rt, ns, name, body, sub, dry_run))
        if ex.verb == "PATCH":
            return ex.send_json(200, self.store.patch(rt, ns, name, ex.content_type, ex.body(), sub, dry_run))
        if ex.verb == "DELETE" and sub is None:
            obj, propagation = self.store.delete(rt, ns, name, self._delete_options(ex))
            return ex.send_json(200, self._deleted_body(rt, obj, propagation))
        raise ApiError.method_not_allowed()

    @staticmethod
    def _deleted_body(rt: ResourceType, obj: Obj, propagation: str) -> Obj:
        """What DELETE answers. With Foreground or Orphan the real server returns the object carrying a
        deletionTimestamp and the GC finalizer (deletion is pending); otherwise a Success Status, or the
        object for the types whose storage returns deleted objects. Here deletion is already done."""
        meta = obj["metadata"]
        if propagation in ("Foreground", "Orphan") and rt.plural != "pods":
            meta["deletionTimestamp"] = rfc3339()
            meta["deletionGracePeriodSeconds"] = 0
            gc_finalizer = "foregroundDeletion" if propagation == "Foreground" else "orphan"
            meta["finalizers"] = meta.get("finalizers", []) + [gc_finalizer]
            return obj
        if rt.returns_deleted_object:
            if rt.plural == "pods":
                meta["deletionTimestamp"] = rfc3339()
                meta["deletionGracePeriodSeconds"] = 30
            return obj
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                "details": rt.details(meta["name"], uid=meta["uid"])}

    @staticmethod
    def _dry_run(query: Mapping[str, str]) -> bool:
        value = query.get("dryRun")
        if value is None:
            return False
        if value != "All":
            raise ApiError.bad_request(f'Invalid dryRun value: "{value}"; only "All" is supported')
        return True

    def _delete_options(self, ex: _Exchange) -> DeleteOptions:
        body = ex.body() or {}
        if not isinstance(body, dict):
            raise ApiError.bad_request("DeleteOptions must be an object")
        propagation = ex.query.get("propagationPolicy") or body.get("propagationPolicy")
        orphan = ex.query.get("orphanDependents", body.get("orphanDependents"))
        if propagation is None and orphan is not None:
            propagation = "Orphan" if str(orphan).lower() == "true" else "Background"
        if propagation not in (None, "Foreground", "Background", "Orphan"):
            raise ApiError(422, "Invalid", f'DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: '
                                           f'Unsupported value: "{propagation}": supported values: '
                                           '"Foreground", "Background", "Orphan", "nil"')
        dry = body.get("dryRun") or ([ex.query["dryRun"]] if "dryRun" in ex.query else [])
        pre = body.get("preconditions") or {}
        return DeleteOptions(propagation, dry == ["All"], pre.get("uid"), pre.get("resourceVersion"))

    # -- pod logs

    def pod_log(self, ex: _Exchange, route: Route) -> None:
        ns, name = route.namespace or "", route.name or ""
        options = LogOptions.parse(ex.query, name)
        pods = route.rt
        with self.store.lock:
            pod = self.store.get(pods, ns, name)
            containers = [c["name"] for c in pod["spec"].get("containers", [])]
            container = options.container
            if container is None:
                if len(containers) != 1:
                    raise ApiError.bad_request(f"a container name must be specified for pod {name}, choose one "
                                               f"of: [{' '.join(containers)}]")
                container = containers[0]
            elif container not in containers:
                raise ApiError.bad_request(f"container {container} is not valid for pod {name}")
            if not pod["spec"].get("nodeName"):
                raise ApiError.bad_request(f"pod {name} does not have a host assigned")
            instance = KubeletStatus.log_instance(pod, container, options.previous)
            lines = self.api.logs.lines(pod["metadata"]["uid"], container, instance)
            first = [i for i, line in enumerate(lines) if options.since_ns is None or line.time_ns >= options.since_ns]
            start = first[0] if first else len(lines)
            if options.tail_lines is not None:
                start = max(start, len(lines) - options.tail_lines)
            follow = options.follow and not options.previous
        if not follow:
            with self.store.lock:
                text = b"".join(self._format(line, options) for line in lines[start:])
            if options.limit_bytes is not None:
                text = text[:options.limit_bytes]
            ex.handler.send_response(200)
            ex.handler.send_header("Content-Type", "text/plain")
            ex.handler.send_header("Content-Length", str(len(text)))
            ex.handler.end_headers()
            ex.handler.wfile.write(text)
            return
        self._follow(ex, ns, name, container, instance, lines, start, options)

    def _follow(self, ex: _Exchange, ns: str, name: str, container: str, instance: int,
                lines: list[LogLine], position: int, options: LogOptions) -> None:
        """Streams lines as tests append them; ends once the container instance stops running (after
        its last lines), when the pod goes away, or when the server stops."""
        ex.start_chunks("text/plain")
        budget = options.limit_bytes
        while True:
            with self.store.changed:
                while True:
                    batch = lines[position:]
                    pod = self.store.find(self.registry.get("v1", "pods"), ns, name)
                    running = KubeletStatus.still_writing(pod, container, instance) and (
                        pod is None or (pod["metadata"]["uid"], container, instance) not in self.api.logs.ended)
                    if batch or not running or self.store.closed:
                        break
                    self.store.changed.wait(FOLLOW_POLL_S)
            if not batch:
                return ex.end_chunks()
            position += len(batch)
            data = b"".join(self._format(line, options) for line in batch)
            if budget is not None:
                data, budget = data[:budget], budget - len(data)
            ex.write_chunk(data)
            if budget is not None and budget <= 0:
                return ex.end_chunks()

    @staticmethod
    def _format(line: LogLine, options: LogOptions) -> bytes:
        prefix = rfc3339_nano(line.time_ns) + " " if options.timestamps else ""
        return (prefix + line.text + "\n").encode()


# --------------------------------------------------------------------------------------------------
# The facade
# --------------------------------------------------------------------------------------------------


class FakeApiServer:
    """A Kubernetes API server on 127.0.0.1 for tests, plus the controller and kubelet helpers tests
    use to play the cluster. Use as a context manager, or ``start()`` / ``stop()``; ``stop()`` keeps
    the state and a later ``start()`` serves it again on the same port (a cluster that came back)."""

    def __init__(self, token: Optional[str] = None, user: str = "fake-user") -> None:
        self.token = token or secrets.token_hex(16)
        self.user = user
        self.registry = ResourceRegistry()
        self.store = ObjectStore(self.registry)
        self.logs = LogStore()
        self.faults = FaultInjector()
        self.streams = StreamTracker(self.store.changed)
        self.rest = RestApi(self)
        self._requests: list[RecordedRequest] = []
        self._requests_lock = threading.Lock()
        self._http: Optional[_HttpServer] = None
        self._thread: Optional[threading.Thread] = None
        self._port = 0

    # -- lifecycle

    def start(self) -> "FakeApiServer":
        if self._http is not None:
            return self
        self.store.closed = False
        self._http = _HttpServer(("127.0.0.1", self._port), self)
        self._port = self._http.server_address[1]
        self._thread = threading.Thread(target=self._http.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=f"fake-apiserver-{self._port}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Closes the port and every open connection, ending follow and watch streams: from then on the
        cluster is unreachable (connection refused) until ``start()``."""
        http, self._http = self._http, None
        if http is None:
            return
        with self.store.changed:
            self.store.closed = True
            self.store.changed.notify_all()
        self.streams.wait_idle(timeout=2.0)
        http.shutdown()
        http.server_close()
        http.cut_connections()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> "FakeApiServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._http is not None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self._port}"

    @property
    def url(self) -> str:
        if not self._port:
            raise RuntimeError("start() the server first: the port is chosen then")
        return f"http://{self.address}"

    def write_kubeconfig(self, path: Union[str, "os.PathLike[str]"], namespace: str = "default",
                         context: str = "fake") -> str:
        """A real kubeconfig (JSON, which is YAML) whose current context points at this server with a
        bearer token; returns the path."""
        config = {
            "apiVersion": "v1", "kind": "Config", "preferences": {},
            "clusters": [{"name": context, "cluster": {"server": self.url}}],
            "users": [{"name": f"{context}-user", "user": {"token": self.token}}],
            "contexts": [{"name": context, "context": {"cluster": context, "user": f"{context}-user",
                                                       "namespace": namespace}}],
            "current-context": context,
        }
        with open(path, "w", encoding="utf-8") as f:
            json.dump(config, f, indent=2)
        return str(path)

    # -- what the HTTP layer calls

    def record(self, request: RecordedRequest) -> None:
        with self._requests_lock:
            self._requests.append(request)

    def authenticate(self, header: Optional[str]) -> None:
        if header != f"Bearer {self.token}":
            raise ApiError(401, "Unauthorized", "Unauthorized")

    def stall(self, seconds: float) -> None:
        """Hold a request, as a hung apiserver would; ``stop()`` cuts the wait short."""
        deadline = time.monotonic() + seconds
        with self.store.changed:
            while not self.store.closed and time.monotonic() < deadline:
                self.store.changed.wait(min(FOLLOW_POLL_S, max(deadline - time.monotonic(), 0.001)))

    def fault_error(self, fault: Fault, ex: _Exchange) -> ApiError:
        """The injected Status: where the test gives no message, the one the real server writes for that
        code and URL (Forbidden, NotFound, Conflict, Invalid with the given causes, InternalError)."""
        route = self.rest.route(ex.path)
        typical = self._typical_error(fault, ex.verb, route) if route is not None else None
        details = typical.details if typical is not None else None
        if fault.details:
            details = {**(details or {}), **fault.details}
        message = fault.message or (typical.message if typical else None) or "injected failure"
        reason = fault.reason or REASONS.get(fault.code, "Unknown")
        headers = {"Retry-After": str(fault.retry_after)} if fault.retry_after is not None else None
        return ApiError(fault.code, reason, message, details, headers)

    def _typical_error(self, fault: Fault, http_verb: str, route: Route) -> Optional[ApiError]:
        rt, name = route.rt, route.name
        verb = {"GET": "get" if name else "list", "POST": "create", "PUT": "update", "PATCH": "patch",
                "DELETE": "delete"}.get(http_verb, http_verb.lower())
        if fault.code == 403:
            return ApiError.forbidden(rt, verb, route.namespace, name, self.user)
        if fault.code == 404:
            return ApiError.not_found(rt, name or "")
        if fault.code == 409:
            return ApiError.stale(rt, name or "")
        if fault.code == 422:
            causes = [Cause(c.get("reason", ""), c.get("field", ""), c.get("message", ""))
                      for c in (fault.details or {}).get("causes", [])]
            return ApiError.invalid(rt, name or (fault.details or {}).get("name", ""), causes)
        if fault.code >= 500:
            return ApiError(fault.code, "InternalError", "Internal error occurred: injected failure")
        return None

    # -- test helpers: observation

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, oldest first (a copy)."""
        with self._requests_lock:
            return list(self._requests)

    def clear_requests(self) -> None:
        with self._requests_lock:
            self._requests.clear()

    def get(self, api_version: str, plural: str, namespace: Optional[str], name: str) -> Optional[Obj]:
        """The stored object (a copy), or None."""
        return self.store.find(self.registry.get(api_version, plural), namespace, name)

    def objects(self, api_version: str, plural: str, namespace: Optional[str] = None,
                label_selector: str = "") -> list[Obj]:
        return self.store.list(self.registry.get(api_version, plural), namespace, LabelSelector(label_selector))

    def pods(self, namespace: Optional[str] = None, label_selector: str = "") -> list[Obj]:
        return self.objects("v1", "pods", namespace, label_selector)

    # -- test helpers: playing the controllers and the kubelet

    def create(self, api_version: str, plural: str, namespace: Optional[str], obj: Obj) -> Obj:
        """Store an object as if a client created it (seeding events, namespaces, child Jobs...)."""
        return self.store.create(self.registry.get(api_version, plural), namespace, obj)

    def add_namespace(self, name: str) -> Obj:
        return self.create("v1", "namespaces", None, {"metadata": {"name": name}})

    def create_pod_for(self, owner_obj: Any, name: str, labels: Optional[Mapping[str, str]] = None,
                       spec: Optional[Obj] = None, namespace: Optional[str] = None) -> Obj:
        """A pod owned by ``owner_obj`` (a stored dict, or a client model: only metadata.uid is read),
        as a Job controller makes it: ownerReferences with controller=true, bound to the fake node and
        reported Pending/ContainerCreating. Labels and spec default to the owner's pod template."""
        meta = owner_obj["metadata"] if isinstance(owner_obj, dict) else owner_obj.metadata
        uid = meta["uid"] if isinstance(meta, dict) else meta.uid
        found = self.store.by_uid(uid)
        if found is None:
            raise KeyError(f"no stored object has uid {uid}")
        owner_key, owner = found
        template = (owner.get("spec") or {}).get("template") or {}
        pod_spec = copy.deepcopy(spec if spec is not None else template.get("spec"))
        if pod_spec is None:
            raise ValueError("give spec: the owner has no spec.template.spec to copy")
        pod_labels = dict(labels if labels is not None else (template.get("metadata") or {}).get("labels") or {})
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "labels": pod_labels,
                            "ownerReferences": [{"apiVersion": owner["apiVersion"], "kind": owner["kind"],
                                                 "name": owner["metadata"]["name"], "uid": uid,
                                                 "controller": True, "blockOwnerDeletion": True}]},
               "spec": pod_spec}
        pods = self.registry.get("v1", "pods")
        ns = namespace or owner_key.namespace or "default"
        self.store.create(pods, ns, pod)
        self.store.put_spec_field(pods, ns, name, "spec.nodeName", NODE_NAME)
        return self.set_pod_phase(ns, name, "Pending")

    def set_pod_phase(self, namespace: str, name: str, phase: str, exit_code: Optional[int] = None,
                      reason: Optional[str] = None, message: Optional[str] = None,
                      restarts: Optional[int] = None, waiting_reason: Optional[str] = None,
                      container: Optional[str] = None) -> Obj:
        """Report a pod as the kubelet would (see :class:`KubeletStatus`); binds it to the fake node.

        ``exit_code``/``reason``/``message`` describe the containers' termination (reason defaults to
        Completed or Error); with phase Failed and no exit code, ``reason``/``message`` are the pod's own
        (e.g. Evicted). ``restarts`` above the current count starts a new container instance whose
        predecessor becomes ``lastState`` and the ``previous=true`` log. ``waiting_reason`` (e.g.
        CrashLoopBackOff, ImagePullBackOff) puts the containers in ``state.waiting``. ``container`` limits
        the change to one container; by default all change."""
        if phase not in ("Pending", "Running", "Succeeded", "Failed", "Unknown"):
            raise ValueError(f"not a pod phase: {phase}")
        pods = self.registry.get("v1", "pods")
        with self.store.lock:
            pod = self.store.get(pods, namespace, name)
            names = [c["name"] for c in pod["spec"].get("containers", [])]
            targets = [container] if container else names
            if container and container not in names:
                raise KeyError(f"pod {name} has no container {container}")
            self.store.put_spec_field(pods, namespace, name, "spec.nodeName", pod["spec"].get("nodeName") or NODE_NAME)
            pod["spec"]["nodeName"] = pod["spec"].get("nodeName") or NODE_NAME
            status = KubeletStatus.build(pod, phase, targets, exit_code, reason, message, restarts, waiting_reason)
            return self.store.put_status(pods, namespace, name, status)

    def append_log(self, namespace: str, pod: str, text: str, container: Optional[str] = None,
                   timestamp: Optional[datetime] = None) -> None:
        """Append lines to the current instance of a container (the first container by default), waking
        followers. ``timestamp`` backdates the lines for sinceSeconds/sinceTime tests."""
        pods = self.registry.get("v1", "pods")
        with self.store.changed:
            obj = self.store.get(pods, namespace, pod)
            name = container or obj["spec"]["containers"][0]["name"]
            found = KubeletStatus.container_status(obj, name) or {}
            stamp = int(timestamp.timestamp() * 1_000_000_000) if timestamp else None
            self.logs.append(obj["metadata"]["uid"], name, found.get("restartCount", 0), text, stamp)
            self.store.changed.notify_all()

    def end_log(self, namespace: str, pod: str, container: Optional[str] = None) -> None:
        """The container's process has exited: its follow streams end now, before any status says so (as
        on a real node, where the kubelet writes the pod's status a moment after the log ends)."""
        pods = self.registry.get("v1", "pods")
        with self.store.changed:
            obj = self.store.get(pods, namespace, pod)
            name = container or obj["spec"]["containers"][0]["name"]
            found = KubeletStatus.container_status(obj, name) or {}
            self.logs.ended.add((obj["metadata"]["uid"], name, found.get("restartCount", 0)))
            self.store.changed.notify_all()

    def set_status(self, api_version: str, plural: str, namespace: Optional[str], name: str, status: Obj) -> Obj:
        """Replace an object's status as its controller would (Job, JobSet, Volcano Job, PodGroup...)."""
        return self.store.put_status(self.registry.get(api_version, plural), namespace, name, status)

    def uninstall(self, group: str) -> None:
        """Serve nothing of the API ``group`` (``batch.volcano.sh``): as on a cluster where its CRDs were never
        installed, its URLs answer a bare ``404 page not found`` (text, not a Status) and discovery omits it."""
        self.registry.remove_group(group)

    def fail_next(self, verb: str, path_regex: str, status: int, reason: Optional[str] = None,
                  message: Optional[str] = None, count: int = 1, details: Optional[Obj] = None,
                  retry_after: Optional[int] = None) -> None:
        """Make the next ``count`` requests whose HTTP method is ``verb`` ("*" for any) and whose path
        matches ``path_regex`` (re.search) fail with ``status``. Reason and message default to what the
        real server writes for that code and URL; for 422 pass ``details={"causes": [...]}``;
        ``retry_after`` adds a Retry-After header (429, 503)."""
        self.faults.add(Fault(verb.upper(), re.compile(path_regex), count, status, reason, message,
                              details, retry_after))

    def stall_next(self, verb: str, path_regex: str, seconds: float, count: int = 1) -> None:
        """Hold the next ``count`` matching requests for ``seconds`` before answering normally: a slow or
        hung cluster, for read-timeout tests (the client retries reads, so stall enough of them)."""
        self.faults.add(Fault(verb.upper(), re.compile(path_regex), count, delay_s=seconds))

