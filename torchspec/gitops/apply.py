"""``torchspec apply``: make a scheduler run what a folder of spec files describes, each job once.

Every app of every spec file gets an identity and a content hash, which are
submitted with it as labels (its ``AppDef.metadata``, which every scheduler
with ``keeps_labels`` stores: an annotation on Kubernetes, a container label
on Docker, the job's comment on Slurm, the state file locally)::

    torchspec.dev/apply-scope   the scope (--scope, default "default"): which applies see each other's apps
    torchspec.dev/apply-id      the identity: the file's path from the repository root (the current folder
                                outside git), "PATH#NAME" for each app of a file that holds several, or the
                                value the spec declares under this key in its metadata
    torchspec.dev/apply-file    the file's path from the repository root
    torchspec.dev/content-hash  canonical.content_hash of the app as loaded, the scheduler and its run options

The next run lists the scheduler's apps, finds its own by those labels and
plans, per app (:func:`plan`, pure): ``create`` (none with that identity, or
only finished ones with another hash), ``unchanged`` (one with the same hash,
live or finished), ``replace`` (a live one with another hash: cancelled and
submitted again, only with ``replace``) and ``prune`` (a live app whose spec
is gone from the paths given: cancelled, only with ``prune``); a file that
does not load, or an app the scheduler refuses at dry run, is an ``error``
and is not submitted.  Listing, planning and submitting happen under a lock
(:mod:`torchspec.gitops.lock`: a file, or with ``lock="kubernetes"`` a Lease
on the cluster, checked before each submit), so two runs at once submit each
job once.
There is no other record than the labels: a run that stops half way leaves
what it submitted labelled, and the next run continues from there.
"""

from __future__ import annotations

import contextlib
import copy
import os
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from torchspec.errors import Diagnostic, TorchSpecError, UsageError
from torchspec.exit_codes import ExitCode

if TYPE_CHECKING:
    from torchspec.runner import Runner
    from torchspec.specs import AppDef, AppState

LABEL_SCOPE = "torchspec.dev/apply-scope"
LABEL_ID = "torchspec.dev/apply-id"
LABEL_FILE = "torchspec.dev/apply-file"
LABEL_HASH = "torchspec.dev/content-hash"
DEFAULT_SCOPE = "default"
#: The actions of a plan, in the order a summary counts them.
ACTIONS = ("create", "replace", "prune", "unchanged", "error")


@dataclass
class ApplyOptions:
    """What ``apply`` runs on and how far it may go."""

    scheduler: str
    #: run options as ``-c`` takes them (text or a mapping); resolved against the config and the defaults
    cfg: Mapping[str, Any] | str | None = None
    params: Mapping[str, str] = field(default_factory=dict)
    params_file: str | None = None
    template_paths: tuple[str, ...] = ()
    #: ``--sweep PARAM=V1,V2`` words: every spec is applied once per point of the grid (with the params file's
    #: ``sweep:`` block), each point an identity of its own
    sweep: tuple[str, ...] = ()
    scope: str = DEFAULT_SCOPE
    replace: bool = False
    prune: bool = False
    #: submit nothing unless every file loads and every app passes its dry run
    all_or_nothing: bool = False
    #: what takes turns: "file" (a lock file, per machine) or "kubernetes" (a Lease on the cluster)
    lock: str = "file"
    #: the lock file (default: under the state dir, per scheduler and scope) and how long to wait for it
    lock_file: str | None = None
    lock_timeout: float = 600.0
    #: "kubernetes": how long the Lease lasts unless renewed (seconds)
    lock_duration: int = 60  # torchspec.gitops.lock.DEFAULT_LEASE_DURATION


@dataclass
class Found:
    """An app the scheduler has that an ``apply`` in this scope submitted."""

    handle: str
    state: "AppState"
    identity: str
    hash: str
    file: str

    @property
    def live(self) -> bool:
        from torchspec.specs import is_terminal

        return not is_terminal(self.state)


@dataclass
class Step:
    """One line of the plan: what to do for one app (or, for ``error``, one file), and how it went."""

    action: str  # create, unchanged, replace, prune or error
    identity: str
    path: str  # the spec file, from the root
    app_name: str | None = None
    hash: str | None = None
    #: the scheduler's apps this step is about: the same one (unchanged), the ones to cancel (replace, prune)
    found: list[Found] = field(default_factory=list)
    #: a file that does not load: its errors
    errors: list[Diagnostic] = field(default_factory=list)
    message: str = ""
    #: planned; once applied: done, skipped or failed, and untouched for the unchanged and the errors
    status: str = "planned"
    #: the app's handle: the new one (create, replace) or the one found (unchanged)
    handle: str | None = None
    app: "AppDef | None" = field(default=None, repr=False, compare=False)
    request: Any = field(default=None, repr=False, compare=False)

    @property
    def changes(self) -> bool:
        """Whether the step would change what runs."""
        return self.action in ("create", "replace", "prune")


@dataclass
class ApplyResult:
    scheduler: str
    scope: str
    #: the folder identities and files are relative to (the repository root, else the current folder)
    root: str
    steps: list[Step] = field(default_factory=list)
    #: False for a plan (``--plan``): nothing was done
    applied: bool = False

    def count(self, action: str, status: str | None = None) -> int:
        return sum(1 for s in self.steps if s.action == action and (status is None or s.status == status))

    @property
    def exit_code(self) -> ExitCode:
        """A plan: 0 nothing to do, 1 something to do, 7 a spec does not load or dry-run.  Applied: 0 done,
        1 a spec was not submitted for its errors, 6 a submission or cancel failed."""
        errors = any(s.action == "error" for s in self.steps)
        if not self.applied:
            if errors:
                return ExitCode.DIFF_INCOMPLETE
            return ExitCode.CHANGES if any(s.changes for s in self.steps) else ExitCode.OK
        if any(s.status == "failed" for s in self.steps):
            return ExitCode.BACKEND
        return ExitCode.SPEC_ERROR if errors else ExitCode.OK


# ---------------------------------------------------------------- the whole run


def apply_paths(runner: "Runner", paths: Iterable[str], options: ApplyOptions, *, plan_only: bool = False,
                on_wait: Callable[[str], None] | None = None) -> ApplyResult:
    """Plan (and unless ``plan_only``, carry out) what makes ``options.scheduler`` run the specs under ``paths``.

    Raises :class:`UsageError` for a scheduler that does not keep labels, a
    path outside the root, a bad run option or lock option, and
    :class:`~torchspec.gitops.lock.LockTimeout` when another run holds the lock too long
    (``on_wait`` hears who, as it waits).
    """
    paths = list(paths)
    check_lock_options(options)
    scheduler = runner.check_scheduler(options.scheduler)
    if not runner.scheduler_keeps_labels(scheduler):
        raise UsageError(f"the {scheduler} scheduler does not keep app labels: apply could not find what it submitted",
                         "`torchspec schedulers` lists those that keep them (capability labels; a backend declares"
                         " Capability.LABELS)")
    root = find_root()
    scope = [relative(root, p) for p in paths]
    run_options = runner.run_options(scheduler, options.cfg)
    steps = load_specs(root, paths, options, scheduler, run_options)
    dry_run(runner, steps, options, scheduler, run_options)
    lock = contextlib.nullcontext() if plan_only else open_lock(runner, scheduler, run_options, options, on_wait)
    with lock as held:
        listed = find_applied(runner, scheduler, run_options, options.scope)
        steps = plan(steps, listed, lambda path: in_scope(path, scope))
        if not plan_only:
            execute(runner, steps, options, guard=held.check)
    return ApplyResult(scheduler, options.scope, root, steps, applied=not plan_only)


def check_lock_options(options: ApplyOptions) -> None:
    """A :class:`UsageError` for a lock ``apply`` does not know, or options the chosen lock does not take."""
    from torchspec.gitops.lock import LOCKS

    if options.lock not in LOCKS:
        raise UsageError(f"unknown lock {options.lock!r}", f"use one of {', '.join(LOCKS)}")
    if options.lock != "file" and options.lock_file:
        raise UsageError(f"--lock-file is for --lock file, not --lock {options.lock}",
                         "drop --lock-file: the Lease is named after the scheduler and scope")
    if options.lock_duration < 1:
        raise UsageError(f"the lock duration must be 1 second or more, not {options.lock_duration}")


def open_lock(runner: "Runner", scheduler: str, run_options: Mapping[str, Any], options: ApplyOptions,
              on_wait: Callable[[str], None] | None) -> Any:
    """The lock ``apply`` holds while it lists, plans and submits (a context manager whose value has ``check()``):
    the lock file, or the Lease in the namespace (and kubeconfig context) of the kubernetes run options: these
    run options when they are kubernetes', else ``[scheduler.kubernetes]``'s from the config."""
    from torchspec.gitops.lock import default_lock_path, held, lease_held, lease_name

    if options.lock == "file":
        return held(options.lock_file or default_lock_path(scheduler, options.scope), options.lock_timeout,
                    on_wait=on_wait)
    kube = run_options if scheduler == "kubernetes" else runner.run_options("kubernetes", None)
    return lease_held(lease_name(scheduler, options.scope), options.lock_timeout,
                      namespace=str(kube.get("namespace") or "") or None, context=str(kube.get("context") or "") or None,
                      duration=options.lock_duration, on_wait=on_wait)


def find_root() -> str:
    """The repository root when the current folder is in a git working tree, else the current folder."""
    from torchspec.gitops.git import Repo

    try:
        return Repo().root
    except UsageError:  # not a repository, or no git at all
        return os.path.realpath(os.getcwd())


def relative(root: str, path: str) -> str:
    """``path`` from ``root``, with ``/``; "" for the root itself; a :class:`UsageError` outside it."""
    rel = os.path.relpath(os.path.realpath(path), root)
    if rel == ".." or rel.startswith(".." + os.sep):
        raise UsageError(f"{path} is outside {root}", "apply names specs by their path from the repository root"
                         " (outside git: the current folder); run it from there")
    return "" if rel == "." else rel.replace(os.sep, "/")


def in_scope(path: str, scope: list[str]) -> bool:
    return any(s == "" or path == s or path.startswith(s + "/") for s in scope)


# ---------------------------------------------------------------- loading and dry runs


def load_specs(root: str, paths: Iterable[str], options: ApplyOptions, scheduler: str,
               run_options: Mapping[str, Any]) -> list[Step]:
    """A ``create`` step per app of every spec under ``paths`` (as lint finds them), with its identity and
    hash; an ``error`` step for a file that does not load, or an app whose identity another one has."""
    from torchspec.lint import discover, lint_file
    from torchspec.loader import LoadOptions
    from torchspec.runner.sweep import Sweep

    grid = Sweep.parse(options.sweep).with_file(options.params_file)
    points = grid.points() if grid.grid else [{}]
    steps: list[Step] = []
    owners: dict[str, str] = {}
    for path, named in discover(paths):
        for point in points:
            load_options = LoadOptions(params={**options.params, **point}, params_file=options.params_file,
                                       template_paths=options.template_paths)
            loaded = lint_file(path, named, load_options)
            if loaded is None:
                break  # found in a folder, and not a spec
            rel = relative(root, path)
            errors = [d for d in loaded.all_diagnostics() if d.is_error]
            if errors:
                steps.append(Step("error", rel + point_suffix(point), rel, errors=errors,
                                  message=_count(len(errors), "error")))
                continue
            docs = [doc for doc in loaded.documents if doc.app is not None]
            steps += app_steps(docs, rel, point, owners, options.scope, scheduler, run_options)
    return steps


def point_suffix(point: Mapping[str, str]) -> str:
    """What a sweep's point adds to an identity: ``@lr=1e-4,batch=32`` (nothing outside a sweep)."""
    return "@" + ",".join(f"{key}={value}" for key, value in point.items()) if point else ""


def app_steps(docs: list[Any], rel: str, point: Mapping[str, str], owners: dict[str, str], scope: str,
              scheduler: str, run_options: Mapping[str, Any]) -> list[Step]:
    """A ``create`` step per app of one loaded file (one point of a sweep: each app named for its point, its
    identity the spec's and the point's, its sweep id the same on every apply of the spec); an ``error`` step
    for an app whose identity another has."""
    import hashlib

    from torchspec.runner.sweep import SWEEP_LABEL, point_name
    from torchspec.specs.canonical import canonical_app, content_hash

    steps = []
    for doc in docs:
        app = doc.app
        assert app is not None
        identity = str(app.metadata.get(LABEL_ID) or (rel if len(docs) == 1 else f"{rel}#{app.name}"))
        if point:
            # one id per spec and scope, so `list --sweep ID` finds every point any apply made
            app.metadata[SWEEP_LABEL] = "sw-" + hashlib.sha256(f"{scope}\0{identity}".encode()).hexdigest()[:8]
            identity += point_suffix(point)
            app.name = point_name(app.name, point, hashlib.sha256(identity.encode()).hexdigest()[:6])
        if identity in owners:
            steps.append(Step("error", identity, rel, app.name,
                              message=f"{owners[identity]} has the identity {identity!r} too: declare another "
                                      f"metadata {LABEL_ID}, or rename the app"))
            continue
        owners[identity] = rel if len(docs) == 1 else f"{rel}#{app.name}"
        digest = content_hash(canonical_app(app, doc.env_read), scheduler=scheduler, run_options=run_options)
        steps.append(Step("create", identity, rel, app.name, digest, app=app))
    return steps


def labels_for(step: Step, scope: str) -> dict[str, str]:
    """The labels ``apply`` submits ``step``'s app with."""
    assert step.hash is not None
    return {LABEL_SCOPE: scope, LABEL_ID: step.identity, LABEL_FILE: step.path, LABEL_HASH: step.hash}


def dry_run(runner: "Runner", steps: list[Step], options: ApplyOptions, scheduler: str,
            run_options: Mapping[str, Any]) -> None:
    """The scheduler's request for each app, labelled; an app the scheduler refuses becomes an ``error``."""
    for step in steps:
        if step.action != "create" or step.app is None:
            continue
        app = copy.deepcopy(step.app)  # dryrun adds torchspec's variables to the roles
        app.metadata.update(labels_for(step, options.scope))
        try:
            step.request = runner.dryrun(app, scheduler, cfg=dict(run_options))
        except TorchSpecError as e:
            step.action, step.message = "error", f"{scheduler} refuses it: {e}"


# ---------------------------------------------------------------- planning


def find_applied(runner: "Runner", scheduler: str, run_options: Mapping[str, Any], scope: str) -> list[Found]:
    """The apps where these run options submit to that an ``apply`` in ``scope`` submitted."""
    found = []
    for app in runner.list(scheduler, dict(run_options)):
        labels = app.labels
        if labels.get(LABEL_SCOPE) == scope and labels.get(LABEL_ID):
            found.append(Found(app.app_handle, app.state, labels[LABEL_ID], labels.get(LABEL_HASH, ""),
                               labels.get(LABEL_FILE, "")))
    return found


def plan(steps: list[Step], found: list[Found], in_scope: Callable[[str], bool]) -> list[Step]:
    """Each spec's action given the apps ``found``, then a ``prune`` for each identity no spec has any more.

    Per identity: an app with the same hash (live or finished) makes it
    ``unchanged``; else live apps with other hashes make it ``replace``;
    else ``create``.  ``prune`` is for live apps whose file is under the
    paths applied (``in_scope``), whose identity no spec has, and whose file
    did load: a file with errors keeps its apps.
    """
    by_identity: dict[str, list[Found]] = defaultdict(list)
    for app in found:
        by_identity[app.identity].append(app)
    for step in steps:
        if step.action == "error":
            continue
        apps = by_identity.get(step.identity, [])
        same = [a for a in apps if a.hash == step.hash]
        live = [a for a in apps if a.hash != step.hash and a.live]
        if same:
            step.action, step.found, step.handle = "unchanged", same[-1:], same[-1].handle
        elif live:
            step.action, step.found = "replace", live
        else:
            step.action = "create"
    identities = {s.identity for s in steps}
    broken = {s.path for s in steps if s.action == "error" and s.app_name is None}
    prunes = []
    for identity in sorted(set(by_identity) - identities):
        live = [a for a in by_identity[identity] if a.live]
        files = {a.file for a in live}
        if live and all(in_scope(f) for f in files) and not files & broken:
            prunes.append(Step("prune", identity, live[0].file, found=live))
    return steps + prunes


# ---------------------------------------------------------------- carrying it out


def execute(runner: "Runner", steps: list[Step], options: ApplyOptions,
            guard: Callable[[], None] = lambda: None) -> None:
    """Do what the plan says, step by step: cancel what is replaced or pruned, submit what is new.

    Steps the options do not allow are ``skipped``; a step that fails is
    ``failed`` and the others go on, unless ``all_or_nothing``, which submits
    nothing when a spec has errors and stops at the first failure.
    ``guard`` is called before each cancel or submit: when it raises (the
    lock is no longer this run's), that step fails and nothing more is done.
    """
    errors = sum(1 for s in steps if s.action == "error")
    stop = f"--all-or-nothing: {_count(errors, 'spec')} with errors" if options.all_or_nothing and errors else ""
    for step in steps:
        if step.action in ("unchanged", "error"):
            step.status = "untouched"
        elif stop:
            step.status, step.message = "skipped", stop
        elif step.action == "replace" and not options.replace:
            step.status, step.message = "skipped", "a live app has another hash: --replace cancels it and submits"
        elif step.action == "prune" and not options.prune:
            step.status, step.message = "skipped", "its spec is gone: --prune cancels it"
        else:
            try:
                guard()
            except TorchSpecError as e:
                step.status, step.message = "failed", f"not done: {e}"
                stop = f"stopped: {e}"
                continue
            try:
                for app in step.found:
                    runner.cancel(app.handle)
                if step.action != "prune":
                    step.handle = runner.schedule(step.request)
                step.status = "done"
            except (TorchSpecError, OSError) as e:
                step.status, step.message = "failed", str(e)
                if options.all_or_nothing:
                    stop = f"--all-or-nothing: stopped after {step.identity} failed"


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"
