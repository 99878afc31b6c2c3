"""``torchspec diff``: both sides of a spec rendered and compared, role by role and field by field.

A side is a spec file loaded with the caller's params (missing required
params get lint's stand-in values, the same on both sides) into canonical
forms (:mod:`torchspec.specs.canonical`), so reformatting, reordering keys or
moving a value into a template shows nothing.  With a scheduler, each app is
also dry-run on it and the native requests (manifest, sbatch script,
containers) are compared as a unified diff, with the random app id made
``${app_id}`` on both sides and secrets redacted.

:func:`diff_files` compares two files on disk; :func:`diff_base` every spec
that a change since a git ref touches (:mod:`torchspec.gitops.changes`), its
old side read from the commit by :class:`~torchspec.gitops.git.GitSource`.
A side that does not load is reported with its diagnostics and the other
files are still compared.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from torchspec.errors import Diagnostic, TorchSpecError, UsageError
from torchspec.exit_codes import ExitCode
from torchspec.specs.canonical import Canonical, Path, canonical_app
from torchspec.components import is_python_component
from torchspec.loader import FILES, LoadOptions, Source, load_file

if TYPE_CHECKING:
    from torchspec.gitops.git import Repo
    from torchspec.runner import Runner
    from torchspec.specs import AppDef

#: How fields are listed: the order of a spec file, then by name.
_FIELD_ORDER = ("name", "role_order", "roles", "image", "base_image", "entrypoint", "args", "env", "num_replicas",
                "min_replicas", "max_retries", "retry_policy", "resource", "port_map", "mounts", "metadata",
                "overrides")
_RANK = {name: i for i, name in enumerate(_FIELD_ORDER)}


@dataclass
class DiffOptions:
    """How both sides are loaded (as ``render`` takes them) and, with ``scheduler``, dry-run."""

    params: Mapping[str, str] = field(default_factory=dict)
    params_file: str | None = None
    template_paths: tuple[str, ...] = ()
    scheduler: str | None = None
    #: resolved run options of ``scheduler`` (``Runner.run_options``)
    run_options: Mapping[str, Any] = field(default_factory=dict)
    #: a ``FILE.py:FUNCTION`` side is run and compared as the spec ``convert`` makes of it (its code runs:
    #: never for a pull request's files); otherwise such a side is refused
    allow_python_components: bool = False


@dataclass
class FieldChange:
    """One field that differs; a field holding a secret says only that it changed (``old``/``new`` stay None)."""

    path: Path
    kind: str  # added, removed or changed
    old: Any = None
    new: Any = None
    secret: bool = False

    @property
    def name(self) -> str:
        """``roles.trainer.env.TOKEN``: the path for people (JSON has the parts too)."""
        return ".".join(self.path)


@dataclass
class AppDiff:
    name: str
    status: str  # added, removed, modified or unchanged
    changes: list[FieldChange] = field(default_factory=list)
    #: the unified diff of the scheduler's requests (lines, no newlines); empty when equal or not asked
    native: list[str] = field(default_factory=list)


@dataclass
class FileDiff:
    """One spec file compared; paths are as shown (repository-relative with ``--base``)."""

    path: str
    old_path: str | None
    status: str  # added, removed, modified, renamed
    #: why it was compared though its own text may be unchanged: "lib/macros.j2 changed"
    reasons: list[str] = field(default_factory=list)
    apps: list[AppDiff] = field(default_factory=list)
    #: "old"/"new" -> the errors of a side that did not load
    errors: dict[str, list[Diagnostic]] = field(default_factory=dict)
    #: required params rendered with stand-in values (the same on both sides)
    stand_ins: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.status in ("added", "removed", "renamed") or any(a.status != "unchanged" for a in self.apps)


@dataclass
class DiffResult:
    files: list[FileDiff] = field(default_factory=list)
    #: the ref compared against (``--base``), else None
    base: str | None = None
    scheduler: str | None = None
    #: spec files loaded and compared, changed or not
    compared: int = 0

    @property
    def shown(self) -> list[FileDiff]:
        """The files to report: changed ones, and ones with a side that did not load."""
        return [f for f in self.files if f.changed or f.errors]

    @property
    def exit_code(self) -> ExitCode:
        """As ``git diff --exit-code``: 0 no change, 1 changes; a side that did not load wins (7)."""
        if any(f.errors for f in self.files):
            return ExitCode.DIFF_INCOMPLETE
        return ExitCode.CHANGES if any(f.changed for f in self.files) else ExitCode.OK


@dataclass
class SideApp:
    name: str
    form: Canonical
    app: "AppDef"
    env_read: list[str]


@dataclass
class Side:
    """One side of a file: the apps it loaded to, or the errors that stopped it."""

    label: str
    apps: list[SideApp] = field(default_factory=list)
    errors: list[Diagnostic] = field(default_factory=list)
    dependencies: list[str] = field(default_factory=list)
    stand_ins: list[str] = field(default_factory=list)


def load_side(path: str, label: str, options: DiffOptions, source: Source = FILES) -> Side:
    """Load ``path`` from ``source``; diagnostics name the file ``label`` (``main:jobs/a.yaml`` for a ref)."""
    load_options = LoadOptions(params=options.params, params_file=options.params_file,
                               template_paths=options.template_paths, stand_ins=True, source=source)
    if options.allow_python_components and source is FILES and is_python_component(path):
        from torchspec.components.convert import load_converted

        loaded = load_converted(path, load_options)
    else:
        loaded = load_file(path, load_options)
    side = Side(label)
    for d in loaded.all_diagnostics():
        if d.is_error:
            side.errors.append(dataclasses.replace(d, file=label) if d.file == path else d)
    for doc in loaded.documents:
        side.dependencies.extend(doc.dependencies)
        side.stand_ins.extend(n for n in doc.stand_ins if n not in side.stand_ins)
        if doc.app is not None and not side.errors:
            side.apps.append(SideApp(doc.app.name, canonical_app(doc.app, doc.env_read), doc.app, doc.env_read))
    return side


def compare_sides(path: str, old_path: str | None, status: str, old: Side | None, new: Side | None,
                  runner: "Runner | None" = None, options: DiffOptions | None = None) -> FileDiff:
    """The comparison of one file's sides (None: the file is not on that side)."""
    options = options or DiffOptions()
    result = FileDiff(path, old_path, status)
    for key, side in (("old", old), ("new", new)):
        if side is not None:
            result.stand_ins.extend(n for n in side.stand_ins if n not in result.stand_ins)
            if side.errors:
                result.errors[key] = side.errors
    if result.errors:
        return result
    for old_app, new_app in _pairs(old.apps if old else [], new.apps if new else []):
        app = AppDiff((new_app or old_app).name, _app_status(old_app, new_app))  # type: ignore[union-attr]
        result.apps.append(app)
        if old_app is None or new_app is None:
            # added or removed: the whole app is the change, said in one line; every field of it (internal
            # ones too: role_order, empty mounts) marked added or removed told the reader nothing more
            continue
        app.changes = compare_forms(old_app.form, new_app.form)
        if app.status == "modified" and not app.changes:
            app.status = "unchanged"
        if runner is not None and options.scheduler:
            app.native = native_diff(runner, options, old_app, new_app,
                                     old.label if old else "/dev/null", new.label if new else "/dev/null")
            if app.native and app.status == "unchanged":
                app.status = "modified"
    return result


def compare_forms(old: Canonical | None, new: Canonical | None) -> list[FieldChange]:
    """Every field that differs between two canonical forms, in spec-file order."""
    before = old.fields() if old else {}
    after = new.fields() if new else {}
    old_secrets = old.secrets if old else {}
    new_secrets = new.secrets if new else {}
    changes = []
    for path in sorted(set(before) | set(after), key=_order):
        secret = path in old_secrets or path in new_secrets
        if path not in after:
            kind = "removed"
        elif path not in before:
            kind = "added"
        elif before[path] != after[path] or old_secrets.get(path) != new_secrets.get(path):
            kind = "changed"
        else:
            continue
        if secret:
            changes.append(FieldChange(path, kind, secret=True))
        else:
            changes.append(FieldChange(path, kind, before.get(path), after.get(path)))
    return changes


def native_diff(runner: "Runner", options: DiffOptions, old: SideApp | None, new: SideApp | None,
                old_label: str, new_label: str) -> list[str]:
    """The unified diff of what the scheduler would be sent for each side."""
    import difflib

    before = native_request(runner, options, old) if old else ""
    after = native_request(runner, options, new) if new else ""
    if before == after:
        return []
    return list(difflib.unified_diff(before.splitlines(), after.splitlines(), old_label, new_label, lineterm=""))


def native_request(runner: "Runner", options: DiffOptions, side: SideApp) -> str:
    """The scheduler's request for one app as ``dryrun`` prints it: app id as ``${app_id}``, secrets hidden."""
    from torchspec.redaction import redact_text

    assert options.scheduler is not None
    try:
        info = runner.dryrun(copy.deepcopy(side.app), options.scheduler, cfg=dict(options.run_options))
    except TorchSpecError as e:
        text = f"# {options.scheduler} refuses the app: {e}\n"
    else:
        text = str(info)
        app_id = getattr(info.request, "app_id", None)
        if isinstance(app_id, str) and app_id:
            text = text.replace(app_id, "${app_id}")
    return redact_text(text, side.env_read)


def _order(path: Path) -> tuple[tuple[int, str], ...]:
    return tuple((_RANK.get(part, len(_RANK)), part) for part in path)


def _app_status(old: SideApp | None, new: SideApp | None) -> str:
    return "added" if old is None else "removed" if new is None else "modified"


def _pairs(old: list[SideApp], new: list[SideApp]) -> Iterable[tuple[SideApp | None, SideApp | None]]:
    """Apps of both sides paired: the one app of each, else by name (unmatched ones are added or removed)."""
    if len(old) == 1 and len(new) == 1:
        yield old[0], new[0]
        return
    by_name = {a.name: a for a in new}
    matched = set()
    for app in old:
        twin = by_name.get(app.name)
        if twin is not None and id(twin) not in matched:
            matched.add(id(twin))
            yield app, twin
        else:
            yield app, None
    for app in new:
        if id(app) not in matched:
            yield None, app


def diff_files(old: str, new: str, options: DiffOptions | None = None, runner: "Runner | None" = None) -> DiffResult:
    """Compare two spec files on disk (``torchspec diff OLD NEW``)."""
    options = options or DiffOptions()
    sides = [load_side(path, path, options) for path in (old, new)]
    result = DiffResult(scheduler=options.scheduler, compared=1)
    result.files.append(compare_sides(new, old, "modified", sides[0], sides[1], runner, options))
    return result


def diff_base(repo: "Repo", ref: str, paths: Iterable[str] = (), options: DiffOptions | None = None,
              runner: "Runner | None" = None) -> DiffResult:
    """Compare every spec in ``paths`` (all of the repository when empty) that changed since ``ref``, or that
    uses a file (an import, an include, the params file) that did."""
    from torchspec.gitops.changes import candidates

    import os

    options = options or DiffOptions()
    # real paths, as the repository's root is: the source tells a file of the commit by its place under the root
    options = dataclasses.replace(options, params_file=options.params_file and os.path.realpath(options.params_file),
                                  template_paths=tuple(os.path.realpath(p) for p in options.template_paths))
    commit = repo.commit(ref)
    result = DiffResult(base=ref, scheduler=options.scheduler)
    scope = [repo.rel(p) for p in paths]
    outside = [p for p, rel in zip(paths, scope) if rel == ".." or rel.startswith("../")]
    if outside:
        raise UsageError(f"{outside[0]} is outside the repository {repo.root}")
    with repo.source(commit) as source:
        for found in candidates(repo, repo.changes(commit), source, scope, options.params_file):
            new = load_side(repo.abs(found.path), found.path, options) if found.status != "removed" else None
            reasons = list(found.reasons)
            if found.uses:
                used = {repo.rel(d) for d in new.dependencies} if new else set()
                reasons = [f"{p} changed" for p in found.uses if p in used]
                if not reasons:
                    continue
            old = None
            if found.old_path is not None:
                old = load_side(repo.abs(found.old_path), f"{ref}:{found.old_path}", options, source)
            compared = compare_sides(found.path, found.old_path, found.status, old, new, runner, options)
            compared.reasons = reasons
            result.files.append(compared)
            result.compared += 1
    return result
