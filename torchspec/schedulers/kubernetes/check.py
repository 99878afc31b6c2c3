"""What ``torchspec lint --scheduler kubernetes`` checks beyond the dry run: the manifests, against the schemas.

Every request's objects are collected, then validated together (the
schemas and CRDs are read once per lint run) with :func:`validate_manifests`
for each Kubernetes version asked for (default: the oldest and the newest
that ``kubernetes-validate`` bundles) and against the CRD files given
(default: the bundled JobSet and Volcano CRDs).  Each problem becomes a
TS602 placed at the role whose Job, replicated job or Volcano task failed,
inside the role's ``kubernetes.pod_patch`` when the patch wrote the failing
field.  Unless the cfg sets ``k8s_version``, manifests are rendered for the
oldest version checked: the option names the oldest cluster they must work on.

With ``-c server_dry_run=True`` the cluster's API server then dry-runs every
request's objects (server_dry_run.py): each refusal is a TS604, placed the
same way (origin.py).  The dry runs of the documents themselves stay
offline; the server is asked once they are all built.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Sequence

from torchspec.errors import MissingExtraError, UsageError
from torchspec.schedulers.api import RequestCheck, RequestProblem
from torchspec.schedulers.kubernetes.flavors import FLAVOR_TABLE
from torchspec.schedulers.kubernetes.origin import json_path, parse_field, place, spec_path
from torchspec.schedulers.kubernetes.states import DEFAULT_FLAVOR

if TYPE_CHECKING:
    from torchspec.schedulers.kubernetes.client import Cluster

#: Used when kubernetes-validate cannot say which versions it bundles.
DEFAULT_K8S_VERSIONS = ("1.25", "1.37")
#: ``Kind name (version): path: message``, as validate_manifests writes each problem.
_PROBLEM = re.compile(r"^(?P<label>.+?) \((?P<version>[^()]*)\): (?P<path>[^:]*): (?P<message>.*)$", re.S)
#: A pod template inside a custom object (``JobSet x replicatedJobs[1] pod template``), as validate_manifests
#: labels it.
_NESTED = re.compile(r" (?P<where>\w+)\[(?P<index>\d+)\] pod template$")
#: Where each role's pod template sits in the custom object that holds it, by the list that holds them.
_TEMPLATE_AT = {where: at for f in FLAVOR_TABLE.values() for where, at in f.template_paths.items()}
#: jsonschema's message for an unknown field: the first field it names.
_UNEXPECTED = re.compile(r"Additional properties are not allowed \('([^']+)'")


def manifest_check(cfg: Mapping[str, Any], settings: Mapping[str, Any],
                   cluster: "Cluster | None" = None) -> "ManifestCheck":
    """The check ``--k8s-version`` and ``--crd`` ask for, every setting verified (a :class:`UsageError` otherwise);
    with ``-c server_dry_run=True``, the server's dry run on ``cluster`` too.

    The Kubernetes versions checked: ``--k8s-version``'s; else, with ``-c k8s_version=`` (the oldest cluster the
    manifests must work on), that one and the newest bundled; else the version of the cluster ``cluster`` reaches
    (its ``/version``, asked with a short timeout); else the newest bundled.
    """
    from torchspec.schedulers.kubernetes.validate import BUNDLED_CRDS

    unknown = [flag for flag, value in settings.items() if value and flag not in ("--k8s-version", "--crd")]
    if unknown:
        verb = "does" if len(unknown) == 1 else "do"
        raise UsageError(f"{' and '.join(unknown)} {verb} not apply to --scheduler kubernetes")
    _require_validator()
    notes: List[str] = []
    versions = _k8s_versions(settings.get("--k8s-version") or ()) if settings.get("--k8s-version") else \
        _default_versions(cfg, cluster, notes)
    crd_paths = tuple(settings.get("--crd") or ()) or BUNDLED_CRDS
    check = ManifestCheck(cfg, versions, crd_paths, _crd_kinds(crd_paths),
                          cluster if cfg.get("server_dry_run") else None)
    check.notes += notes
    if check.cluster is not None:
        check.cfg["server_dry_run"] = False  # each document's dry run builds the request; finish() sends them all
    if not cfg.get("k8s_version"):
        check.cfg["k8s_version"] = min(versions, key=_version_key)
    flavor = FLAVOR_TABLE.get(str(check.cfg.get("flavor") or DEFAULT_FLAVOR))
    if flavor is not None and flavor.custom and (flavor.api_version, flavor.kind) not in check.crd_kinds:
        check.notes.append(f"kubernetes: no CRD for {flavor.kind} ({flavor.api_version}) was given with --crd, so "
                           f"the {flavor.name} objects (and the pod templates inside them) are not schema-checked")
    return check


def _default_versions(cfg: Mapping[str, Any], cluster: "Cluster | None", notes: List[str]) -> tuple[str, ...]:
    """The versions checked without ``--k8s-version`` (see :func:`manifest_check`); a note says which and why."""
    bundled = _bundled_versions()
    newest = bundled[-1] if bundled else DEFAULT_K8S_VERSIONS[-1]
    if cfg.get("k8s_version"):
        oldest = _k8s_versions([str(cfg["k8s_version"])], "-c k8s_version")[0]
        return tuple(dict.fromkeys((oldest, max(oldest, newest, key=_version_key))))
    found = cluster_version(cluster, str(cfg["context"]) if cfg.get("context") else None)
    if found is None:  # no cluster (a CI job): no note either, as docs/schedulers/kubernetes.md says
        return (newest,)
    version, where = found
    chosen = min(max(version, bundled[0] if bundled else version, key=_version_key), newest, key=_version_key)
    clamped = "" if chosen == version else f", the nearest schema kubernetes-validate bundles to its {version}"
    notes.append(f"kubernetes: manifests checked against Kubernetes {chosen}, the version of the cluster at"
                 f" {where}{clamped} (-c k8s_version=OLDEST or --k8s-version checks others)")
    return (chosen,)


#: Seconds ``lint --scheduler kubernetes`` waits for the cluster's /version before it checks offline.
VERSION_TIMEOUT_S = 3.0


#: Seconds an answer (or its absence) stays good in this process: the language server lints on every change.
VERSION_CACHE_S = 300.0
_versions: Dict[tuple[str, str | None], tuple[float, tuple[str, str] | None]] = {}


def cluster_version(cluster: "Cluster | None", context: str | None) -> tuple[str, str] | None:
    """(``major.minor``, the server's address) of the cluster ``cluster`` reaches through ``context``; None
    when there is no configuration (then the kubernetes package is not even imported), or no answer within
    :data:`VERSION_TIMEOUT_S`.  Kept :data:`VERSION_CACHE_S` seconds per kubeconfig and context."""
    if cluster is None or not cluster.has_configuration():
        return None
    key = (cluster.where(context), context or cluster.context)  # the server's address: no request sent
    stamp, known = _versions.get(key, (float("-inf"), None))
    if time.monotonic() - stamp < VERSION_CACHE_S:
        return known
    _versions[key] = (time.monotonic(), _ask_version(cluster, context))
    return _versions[key][1]


def _ask_version(cluster: "Cluster", context: str | None) -> tuple[str, str] | None:
    try:
        from kubernetes import client as k8s_client

        api = cluster.client(context)
        info = k8s_client.VersionApi(api).get_code(_request_timeout=(VERSION_TIMEOUT_S, VERSION_TIMEOUT_S))
        match = re.match(r"v?(\d+)\.(\d+)", str(info.git_version or "")) or \
            re.match(r"(\d+)\D*\.(\d+)", f"{info.major}.{info.minor}")
        if match is None:
            return None
        return f"{int(match.group(1))}.{int(match.group(2))}", str(api.configuration.host)
    except Exception:  # noqa: BLE001 - no kubeconfig, no kubernetes package, no answer: check offline
        return None


def _bundled_versions() -> list[str]:
    """The ``major.minor`` versions kubernetes-validate has schemas for, oldest first ([] if it cannot say)."""
    try:
        from kubernetes_validate.utils import all_versions

        return sorted({".".join(v.split(".")[:2]) for v in all_versions()}, key=_version_key)
    except Exception:  # noqa: BLE001 - an older or newer kubernetes-validate: trust the caller's versions
        return []


def _require_validator() -> None:
    """A usage error naming the extra that installs kubernetes-validate, where it is missing."""
    try:
        import kubernetes_validate  # noqa: F401
    except ImportError:
        raise MissingExtraError("checking Kubernetes manifests needs the kubernetes-validate package, which is not"
                                " installed", "kubernetes-validate", "or: pip install kubernetes-validate") from None


def _k8s_versions(wanted: Sequence[str], flag: str = "--k8s-version") -> tuple[str, ...]:
    """``wanted`` as ``major.minor`` (default: the oldest and newest bundled), each checked against
    what kubernetes-validate bundles; without it, a usage error naming the extra that installs it."""
    _require_validator()
    bundled = _bundled_versions()
    if not wanted:
        return (bundled[0], bundled[-1]) if bundled else DEFAULT_K8S_VERSIONS
    out: list[str] = []
    for text in wanted:
        match = re.fullmatch(r"v?(\d+)\.(\d+)(?:\.\d+)?", text.strip())
        if match is None:
            raise UsageError(f"{flag} {text!r} is not a Kubernetes version", "write it as 1.29")
        version = f"{int(match.group(1))}.{int(match.group(2))}"
        if bundled and version not in bundled:
            raise UsageError(f"{flag} {text}: kubernetes-validate has no schema for Kubernetes {version}",
                             f"it bundles {bundled[0]} to {bundled[-1]}; upgrade it for newer versions")
        if version not in out:
            out.append(version)
    return tuple(out)


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


def _crd_kinds(paths: Sequence[str]) -> set[tuple[str, str]]:
    """The (apiVersion, kind) pairs the CRD files define; an unreadable file or one holding no CRD is a usage error."""
    from torchspec.schedulers.kubernetes.validate import load_crds

    kinds: set[tuple[str, str]] = set()
    for path in paths:
        try:
            found = load_crds([path])
        except OSError as e:
            raise UsageError(f"--crd {path}: cannot read it: {e.strerror or e}") from None
        except Exception as e:  # noqa: BLE001 - YAML errors, or a CRD missing the fields it must have
            raise UsageError(f"--crd {path}: not a usable CustomResourceDefinition file: {e}") from None
        if not found:
            raise UsageError(f"--crd {path} holds no CustomResourceDefinition",
                             "pass the CRD file of the JobSet or Volcano Job controller")
        kinds |= set(found)
    return kinds


@dataclass
class _Pending:
    """One document's manifests, waiting for the one schema validation of the whole run."""

    key: Any
    spec: Mapping[str, Any]
    objects: List[Dict[str, Any]]
    #: where the request goes (for the server's dry run)
    namespace: str | None = None
    context: str | None = None


class ManifestCheck(RequestCheck):
    """Validates every request's manifests at :meth:`finish`, each problem placed at its role; with a
    ``cluster``, the cluster's API server dry-runs them too (TS604, see server_dry_run.py)."""

    code = "TS602"

    def __init__(self, cfg: Mapping[str, Any], versions: Sequence[str], crd_paths: Sequence[str],
                 crd_kinds: set[tuple[str, str]], cluster: "Cluster | None" = None) -> None:
        super().__init__(cfg)
        self.versions = tuple(versions)
        self.crd_paths = tuple(crd_paths)
        self.crd_kinds = crd_kinds
        self.cluster = cluster
        self._pending: List[_Pending] = []

    def add(self, key: Any, request: Any, spec: Mapping[str, Any]) -> None:
        objects = getattr(request, "objects", None)
        if isinstance(objects, list):
            self._pending.append(_Pending(key, spec, objects, getattr(request, "namespace", None),
                                          getattr(request, "context", None)))

    def finish(self) -> List[RequestProblem]:
        pending, self._pending = self._pending, []
        out = self._schema_problems(pending) if pending else []
        if self.cluster is not None:
            out += self._server_problems(pending)
        return out

    def _server_problems(self, pending: Sequence[_Pending]) -> List[RequestProblem]:
        """What the cluster refuses in its dry run of each document's objects, each placed at its role."""
        from torchspec.schedulers.kubernetes.server_dry_run import SERVER_REFUSES, dry_run

        assert self.cluster is not None
        out: List[RequestProblem] = []
        for p in pending:
            roles = p.spec.get("roles") or []
            out += [RequestProblem(p.key, r.spec_path(roles), r.text(roles), r.hint, code=SERVER_REFUSES)
                    for r in dry_run(self.cluster, p.objects, p.namespace, p.context)]
        return out

    def _schema_problems(self, pending: Sequence[_Pending]) -> List[RequestProblem]:
        from torchspec.schedulers.kubernetes.validate import validate_manifests

        out: List[RequestProblem] = []
        owners: dict[tuple[Any, Any], tuple[_Pending, dict[str, Any]]] = {}
        clash = False
        for p in pending:
            for obj in p.objects:
                key = (obj.get("kind"), (obj.get("metadata") or {}).get("name"))
                clash = clash or key in owners
                owners[key] = (p, obj)
        if not clash:
            objects = [obj for p in pending for obj in p.objects]
            if self._place(validate_manifests(objects, self.versions, self.crd_paths), owners, None, out):
                return out
        # two documents made objects of one name (a 1 in 300 million chance), or a problem that names no
        # object: one call per document, so that every problem lands in its own document
        out.clear()
        for p in pending:
            self._place(validate_manifests(p.objects, self.versions, self.crd_paths),
                        {(o.get("kind"), (o.get("metadata") or {}).get("name")): (p, o) for o in p.objects}, p, out)
        return out

    def _place(self, problems: list[str], owners: Mapping[tuple[Any, Any], tuple[_Pending, dict[str, Any]]],
               only: _Pending | None, out: List[RequestProblem]) -> bool:
        """Turn validate_manifests' problems into problems at their roles, one per problem naming every
        version that reports it.  A problem that names no known object goes at the top of ``only`` (the
        one document checked); without ``only``, nothing is placed and the answer is False."""
        merged: dict[tuple[int, tuple[Any, ...], str], tuple[_Pending, list[str], str, tuple[Any, ...]]] = {}
        for problem in problems:
            placed = self._locate(problem, owners)
            if placed is None:
                if only is None:
                    return False
                placed = (only, (), "CRD" if " (CRD): " in problem else "", problem)
            pending, path, version, text = placed
            key = (id(pending), path, text)
            if key in merged:
                merged[key][1].append(version)
            else:
                merged[key] = (pending, [version], text, path)
        for pending, versions, text, path in merged.values():
            core = [v for v in versions if v not in ("CRD", "")]
            what = " and ".join((["Kubernetes " + ", ".join(core)] if core else [])
                                + (["the CRD schema"] if "CRD" in versions else [])) or "The schema"
            out.append(RequestProblem(
                pending.key, path, f"{what} rejects the {text}",
                "run `torchspec dryrun -s kubernetes FILE` to see the manifest; set -c k8s_version or "
                "--k8s-version when the field is newer than your oldest cluster"))
        return True

    def _locate(self, problem: str, owners: Mapping[tuple[Any, Any], tuple[_Pending, dict[str, Any]]],
                ) -> tuple[_Pending, tuple[Any, ...], str, str] | None:
        """(document, path in the spec, version, message) of one validate_manifests problem."""
        match = _PROBLEM.match(problem)
        if match is None:
            return None
        label, version, where, message = match["label"], match["version"], match["path"], match["message"]
        nested = _NESTED.search(label)
        if nested:
            label = label[:nested.start()]
        kind, _, name = label.partition(" ")
        owner = owners.get((kind, name))
        if owner is None:
            return None
        pending, obj = owner
        roles = pending.spec.get("roles") or []
        parts = [p for p in where.split(".") if p] if where else []
        if nested and nested["where"] in _TEMPLATE_AT:  # the path is in the pod template, checked as a Pod
            parts = parse_field(_TEMPLATE_AT[nested["where"]].format(i=int(nested["index"]))) + parts
        role, pod_parts = place(obj, parts)
        what = kind + (f" for role {roles[role].get('name')!r}" if role is not None and role < len(roles) else "")
        text = f"{what}: {json_path(parts) or '(the object)'}: {message}"
        unexpected = _UNEXPECTED.search(message)  # the error sits on the parent; point at the field
        if unexpected and pod_parts is not None:
            pod_parts = pod_parts + [unexpected.group(1)]
        path = spec_path(role, pod_parts, roles)
        return pending, path, version, text

