"""``torchspec lint --scheduler NAME``: would that scheduler take each spec?  (TS601, TS602)

After the usual checks, every document of every file that loaded without
errors is built into an ``AppDef`` and handed to the scheduler's dry run,
exactly as ``torchspec dryrun -s NAME`` would (``_validate`` then
``submit_dryrun`` with the cfg resolved against the scheduler's run options).
No backend is contacted: a dry run only builds the request.

- A ``ValueError`` from ``_validate`` or the dry run is **TS601
  scheduler-refuses**, positioned at the role the message names (at the
  role's metadata key when the message names one, e.g.
  ``kubernetes.pod_patch``), else at the top of the document.
- For ``kubernetes`` the rendered manifests are also validated with
  :func:`torchspec.schedulers.kubernetes.validate_manifests` for each
  Kubernetes version asked for (default: the oldest and the newest that
  ``kubernetes-validate`` bundles) and against the CRD files given; each
  problem is **TS602 kubernetes-schema**, positioned at the role whose Job,
  replicated job or Volcano task failed (inside the role's
  ``kubernetes.pod_patch`` when the patch wrote the failing field).  Unless
  the cfg sets ``k8s_version``, manifests are rendered with ``k8s_version``
  set to the oldest version checked: the option names the oldest cluster the
  manifests must work on.

Documents that need params nobody passed (lint fills in stand-in values for
them) are not dry-run: their request would be a guess.  They, and a
scheduler whose dry run needs its backend after all (it raised
``BackendError``), are listed in ``LintResult.notes``.

From Python, set the scheduler fields of :class:`~torchspec.lint.LintOptions`::

    from torchspec.lint import LintOptions, lint_paths

    result = lint_paths(["jobs/"], LintOptions(
        scheduler="kubernetes",
        scheduler_cfg={"flavor": "jobset"},        # or the -c text "flavor=jobset"
        k8s_versions=("1.27", "1.37"),
        crd_paths=("crds/jobset.x-k8s.io_jobsets.yaml",),
    ))

Bad settings (an unknown scheduler, a bad cfg, a Kubernetes version without
a schema, ``kubernetes-validate`` missing) raise
:class:`~torchspec.errors.UsageError` before any file is read.
:func:`prepare` and :class:`SchedulerCheck` are the same steps for callers
that load files themselves.

This module is imported only when a scheduler is asked for, so plain
``torchspec lint`` never imports a scheduler, ``kubernetes_validate`` or
``torchspec.specs``.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from torchspec.errors import Diagnostic, UsageError

if TYPE_CHECKING:
    from torchspec.lint import LintOptions
    from torchspec.loader import LoadedDocument, LoadedFile
    from torchspec.schedulers.api import Scheduler

__all__ = ["SchedulerCheck", "prepare", "DEFAULT_K8S_VERSIONS", "META_POD_PATCH"]

REFUSES = "TS601"
SCHEMA = "TS602"
#: Used when kubernetes-validate cannot say which versions it bundles.
DEFAULT_K8S_VERSIONS = ("1.25", "1.37")
META_POD_PATCH = "kubernetes.pod_patch"
_KUBERNETES_MODULE = "torchspec.schedulers.kubernetes.scheduler"
#: ``Kind name (version): path: message``, as validate_manifests writes each problem.
_PROBLEM = re.compile(r"^(?P<label>.+?) \((?P<version>[^()]*)\): (?P<path>[^:]*): (?P<message>.*)$", re.S)
#: A pod template inside a JobSet or Volcano Job, as validate_manifests labels it.
_NESTED = re.compile(r" (?P<where>replicatedJobs|tasks)\[(?P<index>\d+)\] pod template$")
#: Where each role's pod template sits in the object that holds it, as a path inside that object.
_TEMPLATE_AT = {"replicatedJobs": "spec.replicatedJobs[{i}].template.spec.template", "tasks": "spec.tasks[{i}].template"}
#: jsonschema's message for an unknown field: the first field it names.
_UNEXPECTED = re.compile(r"Additional properties are not allowed \('([^']+)'")
_CRD_PATH = re.compile(r"^spec\.(?P<where>replicatedJobs|tasks)\.(?P<index>\d+)(?:\.(?P<rest>.*))?$")


# ---------------------------------------------------------------- settings


def _scheduler(name: str) -> "Scheduler[Any]":
    """An instance of the scheduler registered as ``name`` (the registry's usage error, with a did-you-mean)."""
    from torchspec.runner.api import DEFAULT_SESSION_NAME
    from torchspec.schedulers import get_scheduler_factory

    return get_scheduler_factory(name)(DEFAULT_SESSION_NAME)


def _k8s_versions(wanted: Sequence[str]) -> tuple[str, ...]:
    """``wanted`` as ``major.minor`` (default: the oldest and newest bundled), each checked against
    what kubernetes-validate bundles; a usage error naming ``pip install kubernetes-validate`` without it."""
    try:
        import kubernetes_validate  # noqa: F401
    except ImportError:
        raise UsageError("checking Kubernetes manifests needs the kubernetes-validate package",
                         "pip install kubernetes-validate") from None
    try:
        from kubernetes_validate.utils import all_versions

        bundled = sorted({".".join(v.split(".")[:2]) for v in all_versions()},
                         key=lambda v: tuple(int(p) for p in v.split(".")))
    except Exception:  # noqa: BLE001 - an older or newer kubernetes-validate: trust the caller's versions
        bundled = []
    if not wanted:
        return (bundled[0], bundled[-1]) if bundled else DEFAULT_K8S_VERSIONS
    out: list[str] = []
    for text in wanted:
        match = re.fullmatch(r"v?(\d+)\.(\d+)(?:\.\d+)?", text.strip())
        if match is None:
            raise UsageError(f"--k8s-version {text!r} is not a Kubernetes version", "write it as 1.29")
        version = f"{int(match.group(1))}.{int(match.group(2))}"
        if bundled and version not in bundled:
            raise UsageError(f"--k8s-version {text}: kubernetes-validate has no schema for Kubernetes {version}",
                             f"it bundles {bundled[0]} to {bundled[-1]}; upgrade it for newer versions")
        if version not in out:
            out.append(version)
    return tuple(out)


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


def prepare(options: "LintOptions") -> "SchedulerCheck":
    """The check ``options`` asks for, with every setting verified (a :class:`UsageError` otherwise)."""
    assert options.scheduler
    name = options.scheduler
    scheduler = _scheduler(name)
    opts = scheduler.run_opts()
    k8s_module = sys.modules.get(_KUBERNETES_MODULE)  # imported by the factory if this is kubernetes
    is_k8s = k8s_module is not None and isinstance(scheduler, k8s_module.KubernetesScheduler)
    if not is_k8s and (options.k8s_versions or options.crd_paths):
        raise UsageError(f"--k8s-version and --crd apply to --scheduler kubernetes, not {name}")
    from torchspec.runner.options import resolve_run_options

    cfg = resolve_run_options(name, opts, options.scheduler_cfg, options.config)
    if options.scheduler_cfg or (options.config is not None and options.config.section("scheduler").get(name)):
        _probe(name, scheduler, cfg)
    check = SchedulerCheck(name, scheduler, cfg)
    if is_k8s:
        check.k8s_versions = _k8s_versions(options.k8s_versions)
        from torchspec.schedulers.kubernetes.validate import BUNDLED_CRDS

        check.crd_paths = tuple(options.crd_paths) or BUNDLED_CRDS
        check.crd_kinds = _crd_kinds(check.crd_paths)
        if not cfg.get("k8s_version"):
            check.cfg = dict(cfg, k8s_version=min(check.k8s_versions, key=_version_key))
        flavor = str(check.cfg.get("flavor") or "job")
        custom = {"jobset": ("jobset.x-k8s.io/v1alpha2", "JobSet"),
                  "volcano": ("batch.volcano.sh/v1alpha1", "Job")}.get(flavor)
        if custom and custom not in check.crd_kinds:
            check.notes.append(f"kubernetes: no CRD for {custom[1]} ({custom[0]}) was given with --crd, so the "
                               f"{flavor} objects (and the pod templates inside them) are not schema-checked")
    if options.params_file:
        from torchspec.loader import read_params_file

        check.file_params = set(read_params_file(options.params_file).values)
    check.given_params = set(options.params)
    return check


def _probe(name: str, scheduler: "Scheduler[Any]", cfg: Mapping[str, Any]) -> None:
    """Dry-run the plainest app with the run options given, so that a bad value (``flavor=foo``) is one
    usage error rather than a TS601 in every file.  A refusal that names the probe app is about the app,
    not the options, and is ignored."""
    from torchspec.errors import BackendError
    from torchspec.specs import AppDef, Resource, Role

    marker = "torchspec-lint-probe"
    app = AppDef(name=marker, roles=[Role(name=marker, image=marker, entrypoint=marker,
                                          resource=Resource(cpu=1, gpu=0, memMB=128))])
    try:
        scheduler._validate(app, name)
        scheduler.submit_dryrun(app, dict(cfg))
    except ValueError as e:
        if marker in str(e):  # about the probe app itself (a local image folder...), not the options
            return
        raise UsageError(f"-c: the {name} scheduler refuses these run options: {e}",
                         f"see them with: torchspec runopts {name}") from None
    except BackendError:
        pass  # reported once the files are checked


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


# ---------------------------------------------------------------- the check


@dataclass
class _Pending:
    """One document's manifests, waiting for the one schema validation of the whole run."""

    loaded: "LoadedDocument"
    objects: list[dict[str, Any]]
    out: list[Diagnostic]


@dataclass
class SchedulerCheck:
    """One scheduler, its resolved cfg and, for kubernetes, what to validate the manifests against.

    Call :meth:`check_file` for each loaded file, then :meth:`finish` once:
    manifests are validated together at the end (reading the CRDs once), and
    their TS602 diagnostics land in the list each ``check_file`` call was given.
    """

    name: str
    scheduler: "Scheduler[Any]"
    cfg: dict[str, Any]
    k8s_versions: tuple[str, ...] = ()
    crd_paths: tuple[str, ...] = ()
    crd_kinds: set[tuple[str, str]] = field(default_factory=set)
    given_params: set[str] = field(default_factory=set)
    file_params: set[str] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)
    #: set when the dry run turned out to need its backend: nothing more is checked
    disabled: bool = False
    _pending: list[_Pending] = field(default_factory=list)

    def check_file(self, loaded: "LoadedFile", out: list[Diagnostic]) -> None:
        """Dry-run every document of ``loaded`` (when it has no errors); diagnostics are appended to ``out``."""
        if self.disabled or not loaded.ok:
            return
        for doc in loaded.documents:
            if doc.rendered is None:
                continue
            missing = self._missing_params(doc)
            if missing:
                where = f" (document {doc.source.index + 1})" if len(loaded.documents) > 1 else ""
                self.notes.append(f"{loaded.path}{where}: not checked against {self.name}: it needs params "
                                  f"{', '.join(missing)} (pass them with -p or --params-file)")
                continue
            self._check_document(doc, out)
            if self.disabled:
                return

    def finish(self) -> None:
        """Validate every manifest collected so far (kubernetes only)."""
        pending, self._pending = self._pending, []
        if not pending:
            return
        from torchspec.schedulers.kubernetes.validate import validate_manifests

        owners: dict[tuple[Any, Any], tuple[_Pending, dict[str, Any]]] = {}
        clash = False
        for p in pending:
            for obj in p.objects:
                key = (obj.get("kind"), (obj.get("metadata") or {}).get("name"))
                clash = clash or key in owners
                owners[key] = (p, obj)
        if not clash:
            objects = [obj for p in pending for obj in p.objects]
            if self._place(validate_manifests(objects, self.k8s_versions, self.crd_paths), owners, None):
                return
        # two documents made objects of one name (a 1 in 300 million chance), or a problem that names no
        # object: one call per document, so that every problem lands in its own document
        for p in pending:
            self._place(validate_manifests(p.objects, self.k8s_versions, self.crd_paths),
                        {(o.get("kind"), (o.get("metadata") or {}).get("name")): (p, o) for o in p.objects}, p)

    # -- one document -------------------------------------------------------

    def _missing_params(self, doc: "LoadedDocument") -> list[str]:
        """Required params that no ``-p`` or params file gave: lint rendered the document with stand-ins."""
        from torchspec.loader import params as params_mod

        declared, _ = params_mod.declarations(doc.source)
        return [n for n, p in declared.items() if p.required and n not in self.given_params | self.file_params]

    def _check_document(self, doc: "LoadedDocument", out: list[Diagnostic]) -> None:
        from torchspec.convert import build_app
        from torchspec.errors import BackendError

        assert doc.rendered is not None
        app = build_app(doc.rendered)
        try:
            self.scheduler._validate(app, self.name)
            info = self.scheduler.submit_dryrun(app, dict(self.cfg))
        except ValueError as e:
            out.append(self._refusal(doc, str(e)))
            return
        except BackendError as e:
            self.disabled = True
            self.notes.append(f"{self.name}: its dry run needs the backend ({e.message}); "
                              f"the --scheduler check was skipped")
            return
        objects = getattr(info.request, "objects", None)
        if self.k8s_versions and isinstance(objects, list):
            self._pending.append(_Pending(doc, objects, out))

    def _refusal(self, doc: "LoadedDocument", message: str) -> Diagnostic:
        roles = (doc.rendered.get("roles") or []) if doc.rendered else []
        index = _named_role(message, [str(r.get("name", "")) for r in roles],
                            [str(r.get("image", "")) for r in roles])
        path: tuple[Any, ...] = ()
        if index is not None:
            path = ("roles", index)
            metadata = roles[index].get("metadata") or {}
            key = next((k for k in sorted(metadata, key=len, reverse=True) if str(k) in message), None)
            if key is not None:
                path += ("metadata", key)
        d = doc.source.diagnostic(REFUSES, f"the {self.name} scheduler refuses this spec: {message}", path,
                                  f"see the request with: torchspec dryrun -s {self.name} FILE", key=True)
        _redact(d, doc)
        return d

    # -- kubernetes manifests -------------------------------------------------

    def _place(self, problems: list[str], owners: Mapping[tuple[Any, Any], tuple[_Pending, dict[str, Any]]],
               only: _Pending | None) -> bool:
        """Turn validate_manifests' problems into TS602 diagnostics at their roles, one per problem naming
        every version that reports it.  A problem that names no known object goes at the top of ``only``
        (the one document checked); without ``only``, nothing is placed and the answer is False."""
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
            d = pending.loaded.source.diagnostic(
                SCHEMA, f"{what} rejects the {text}", path,
                "run `torchspec dryrun -s kubernetes FILE` to see the manifest; set -c k8s_version or "
                "--k8s-version when the field is newer than your oldest cluster", key=True)
            _redact(d, pending.loaded)
            pending.out.append(d)
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
        roles = (pending.loaded.rendered or {}).get("roles") or []
        parts = [p for p in where.split(".") if p] if where else []
        role: int | None = None
        pod_parts: list[str] | None = None  # the path inside the role's pod template, when it is in one
        if nested:
            role = int(nested["index"])
            prefix = _TEMPLATE_AT[nested["where"]].format(i=role)
            pod_parts = parts
            parts = prefix.split(".") + parts
        elif version == "CRD" and (crd := _CRD_PATH.match(where)):
            role = int(crd["index"])
            inner = _TEMPLATE_AT[crd["where"]].format(i=role).split(".")[2:]  # after spec.<where>[i]
            rest = (crd["rest"] or "").split(".") if crd["rest"] else []
            if rest[:len(inner)] == inner:
                pod_parts = rest[len(inner):]
        elif kind == "Job" and obj.get("apiVersion") == "batch/v1":
            index = ((obj.get("metadata") or {}).get("annotations") or {}).get("torchspec.dev/role-index")
            role = int(index) if index is not None and str(index).isdigit() else None
            if parts[:2] == ["spec", "template"]:
                pod_parts = parts[2:]
        object_path = _json_path(parts)
        what = kind + (f" for role {roles[role].get('name')!r}" if role is not None and role < len(roles) else "")
        text = f"{what}: {object_path or '(the object)'}: {message}"
        path: tuple[Any, ...] = ()
        if role is not None and role < len(roles):
            unexpected = _UNEXPECTED.search(message)  # the error sits on the parent; point at the field
            if unexpected and pod_parts is not None:
                pod_parts = pod_parts + [unexpected.group(1)]
            path = ("roles", role) + _in_pod_patch(roles[role], pod_parts or [])
        return pending, path, version, text


def _json_path(parts: Sequence[str]) -> str:
    """``["spec", "containers", "0", "image"]`` -> ``spec.containers[0].image``."""
    out = ""
    for part in parts:
        out += f"[{part}]" if part.isdigit() else (f".{part}" if out else part)
    return out


def _in_pod_patch(role: Mapping[str, Any], pod_parts: Sequence[str]) -> tuple[Any, ...]:
    """The path to the deepest part of the role's ``kubernetes.pod_patch`` that wrote the failing field
    (at least ``spec.<field>``), or ``()`` when the patch did not write it."""
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


def _named_role(message: str, names: Sequence[str], images: Sequence[str]) -> int | None:
    """The role a scheduler's message is about: the last one (in file order) whose name it quotes, else
    whose name (three characters or more) it holds as a word; failing that, the one role whose image it
    quotes or holds."""
    for loose in (False, True):
        found = [i for i, name in enumerate(names) if _mentions(message, name, loose)]
        if found:
            return found[-1]
    for loose in (False, True):
        found = [i for i, image in enumerate(images) if _mentions(message, image, loose)]
        if found:
            return found[0] if len(found) == 1 else None
    return None


def _mentions(message: str, text: str, loose: bool) -> bool:
    """``'text'`` or ``"text"`` is in ``message``; with ``loose``, ``text`` as a word will do."""
    if not text:
        return False
    if re.search(r"""['"]""" + re.escape(text) + r"""['"]""", message):
        return True
    return loose and len(text) >= 3 and re.search(r"(?<![\w./:-])" + re.escape(text) + r"(?![\w/:-])",
                                                   message) is not None


def _redact(d: Diagnostic, doc: "LoadedDocument") -> None:
    """Never show what env() read (the loader's rule for its own diagnostics)."""
    if doc.env_read:
        from torchspec.loader import redact

        redact([d], doc.env_read)
