"""``torchspec lint --scheduler NAME``: would that scheduler take each spec?  (TS601, and the scheduler's own)

After the usual checks, every document of every file that loaded without
errors is built into an ``AppDef`` and dry-run through :meth:`Runner.dryrun`,
exactly as ``torchspec dryrun -s NAME`` would.  No backend is contacted: a
dry run only builds the request (unless the scheduler's own check is asked
to: kubernetes' ``-c server_dry_run=True``, below).

- A refusal (:class:`~torchspec.errors.AppRefusedError`, or any ``ValueError``)
  is **TS601 scheduler-refuses**, positioned at the role the message names (at
  the role's metadata key when the message names one, e.g.
  ``kubernetes.pod_patch``), else at the top of the document.  A refusal that
  carries its own ``code`` and ``path`` is reported with them: docker and
  kubernetes refuse a role whose image is a folder (``.``) as **TS603
  folder-image**, at that role's image.
- A scheduler may check its requests further through
  :meth:`Scheduler.request_check <torchspec.schedulers.api.Scheduler.request_check>`
  (kubernetes validates its manifests against the API schemas and CRDs: TS602;
  with ``-c server_dry_run=True`` the cluster's API server dry-runs them: TS604);
  its problems are placed the same way.

Documents that need params nobody passed (lint fills in stand-in values for
them) are not dry-run: their request would be a guess.  They, and a
scheduler whose dry run needs its backend after all (it raised
``BackendError``), are listed in ``LintResult.notes``.

It lives in the runner layer, not in ``torchspec.lint``, because it runs the
runner's dry run: lint itself knows no scheduler.  From Python::

    from torchspec.lint import LintOptions
    from torchspec.runner.check import lint_paths

    result = lint_paths(["jobs/"], LintOptions(scheduler="kubernetes", scheduler_cfg={"flavor": "jobset"}))
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Optional, Sequence

from torchspec.errors import BackendError, Diagnostic, UsageError

if TYPE_CHECKING:
    from torchspec.lint import LintOptions, LintResult
    from torchspec.loader import LoadedDocument, LoadedFile
    from torchspec.runner.api import Runner
    from torchspec.schedulers.api import RequestCheck, Scheduler

__all__ = ["SchedulerCheck", "lint_paths", "lint_text", "prepare"]

REFUSES = "TS601"
#: The name of everything in the app that probes whether a scheduler takes the run options given.
_PROBE = "torchspec-lint-probe"


def lint_paths(paths: Iterable[str], options: Optional["LintOptions"] = None) -> "LintResult":
    """:func:`torchspec.lint.lint_paths`, plus the dry run on ``options.scheduler`` when it names one."""
    from torchspec import lint

    return lint.lint_paths(paths, _with_check(options))


def lint_text(text: str, path: str = "<string>", options: Optional["LintOptions"] = None,
              fmt: Optional[str] = None) -> "LintResult":
    """:func:`torchspec.lint.lint_text` (an editor's buffer), plus the dry run on ``options.scheduler``."""
    from torchspec import lint

    return lint.lint_text(text, path, _with_check(options), fmt)


def _with_check(options: Optional["LintOptions"]) -> "LintOptions":
    from torchspec import lint

    options = options or lint.LintOptions()
    if options.scheduler:
        options = dataclasses.replace(options, checks=[*options.checks, prepare(options)])
    return options


def prepare(options: "LintOptions") -> "SchedulerCheck":
    """The check ``options`` asks for, with every setting verified (a :class:`UsageError` otherwise)."""
    from torchspec.runner.api import DEFAULT_SESSION_NAME
    from torchspec.runner.options import resolve_run_options
    from torchspec.schedulers import get_scheduler_factory

    assert options.scheduler
    name = options.scheduler
    scheduler = get_scheduler_factory(name)(DEFAULT_SESSION_NAME)
    cfg = resolve_run_options(name, scheduler.run_opts(), options.scheduler_cfg, options.config)
    request_check = scheduler.request_check(cfg, {"--k8s-version": options.k8s_versions,
                                                  "--crd": options.crd_paths})
    if options.scheduler_cfg or (options.config is not None and options.config.section("scheduler").get(name)):
        _probe(name, scheduler, request_check.cfg if request_check else cfg)
    check = SchedulerCheck(name, scheduler, cfg, request_check=request_check)
    if options.params_file:
        from torchspec.loader import read_params_file

        check.file_params = set(read_params_file(options.params_file).values)
    check.given_params = set(options.params)
    return check


def _probe(name: str, scheduler: "Scheduler[Any]", cfg: Mapping[str, Any]) -> None:
    """Dry-run the plainest app with the run options given, so that a bad value (``flavor=foo``) is one
    usage error rather than a TS601 in every file.  A refusal that names the probe app is about the app,
    not the options, and is ignored."""
    from torchspec.specs import AppDef, Resource, Role

    app = AppDef(name=_PROBE, roles=[Role(name=_PROBE, image=_PROBE, entrypoint=_PROBE,
                                          resource=Resource(cpu=1, gpu=0, memMB=128))])
    try:
        _runner_of(name, scheduler).dryrun(app, name, dict(cfg))
    except ValueError as e:
        if _PROBE in str(e):  # about the probe app itself (a local image folder...), not the options
            return
        raise UsageError(f"-c: the {name} scheduler refuses these run options: {e}",
                         f"see them with: torchspec runopts {name}") from None
    except BackendError:
        pass  # reported once the files are checked


def _runner_of(name: str, scheduler: "Scheduler[Any]") -> "Runner":
    """A runner over this one scheduler instance, so lint's dry run is exactly ``Runner.dryrun``."""
    from torchspec.runner.api import DEFAULT_SESSION_NAME, Runner

    return Runner(DEFAULT_SESSION_NAME, {name: lambda session_name, **kwargs: scheduler})


class SchedulerCheck:
    """One scheduler, its resolved cfg, and its own request check if it has one.

    Call :meth:`check_file` for each loaded file, then :meth:`finish` once:
    requests are checked together at the end, and their diagnostics land in
    the list each ``check_file`` call was given.
    """

    codes = (REFUSES, "TS602", "TS603", "TS604")

    def __init__(self, name: str, scheduler: "Scheduler[Any]", cfg: Mapping[str, Any],
                 request_check: Optional["RequestCheck"] = None) -> None:
        self.name = name
        self.scheduler = scheduler
        self.request_check = request_check
        self.cfg = dict(request_check.cfg if request_check else cfg)
        self.given_params: set[str] = set()
        self.file_params: set[str] = set()
        self.notes: list[str] = list(request_check.notes) if request_check else []
        #: set when the dry run turned out to need its backend: nothing more is checked
        self.disabled = False
        self._runner = _runner_of(name, scheduler)
        self._pending: dict[int, tuple["LoadedDocument", list[Diagnostic]]] = {}

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
        """Run the scheduler's own check over every request collected, placing its problems in their files."""
        if self.request_check is None or not self._pending:
            return
        pending, self._pending = self._pending, {}
        for problem in self.request_check.finish():
            doc, out = pending[problem.key]
            d = doc.source.diagnostic(problem.code or self.request_check.code, problem.message, problem.path,
                                      problem.hint, key=True)
            _redact(d, doc)
            out.append(d)

    def _missing_params(self, doc: "LoadedDocument") -> list[str]:
        """Required params that no ``-p`` or params file gave: lint rendered the document with stand-ins."""
        from torchspec.loader import params as params_mod

        declared, _ = params_mod.declarations(doc.source)
        return [n for n, p in declared.items() if p.required and n not in self.given_params | self.file_params]

    def _check_document(self, doc: "LoadedDocument", out: list[Diagnostic]) -> None:
        from torchspec.specs.convert import build_app

        assert doc.rendered is not None
        try:
            info = self._runner.dryrun(build_app(doc.rendered), self.name, dict(self.cfg))
        except ValueError as e:
            problems = getattr(e, "problems", ())
            if problems:  # every field the scheduler cannot carry, each at its own line
                out.extend(self._refusal(doc, e, message, tuple(path)) for path, message in problems)
            else:
                out.append(self._refusal(doc, e))
            return
        except BackendError as e:
            self.disabled = True
            self.notes.append(f"{self.name}: its dry run needs the backend ({e.message}); "
                              f"the --scheduler check was skipped")
            return
        if self.request_check is not None:
            key = len(self._pending)
            self._pending[key] = (doc, out)
            self.request_check.add(key, info.request, doc.rendered)

    def _refusal(self, doc: "LoadedDocument", error: ValueError, message: str | None = None,
                 path: tuple[Any, ...] = ()) -> Diagnostic:
        """The refusal as a diagnostic: the refusal's own code and place where it has them (TS603 at the
        role's image; each of its ``problems`` at its own place), else TS601 at the role the message names."""
        message = str(error) if message is None else message
        roles = (doc.rendered.get("roles") or []) if doc.rendered else []
        code = getattr(error, "code", None) or REFUSES
        path = tuple(path) or tuple(getattr(error, "path", ()))
        index = None if path else _named_role(message, [str(r.get("name", "")) for r in roles],
                                              [str(r.get("image", "")) for r in roles])
        if index is not None:
            path = ("roles", index)
            metadata = roles[index].get("metadata") or {}
            key = next((k for k in sorted(metadata, key=len, reverse=True) if str(k) in message), None)
            if key is not None:
                path += ("metadata", key)
        hint = getattr(error, "hint", None) or f"see the request with: torchspec dryrun -s {self.name} FILE"
        d = doc.source.diagnostic(code, f"the {self.name} scheduler refuses this spec: {message}", path, hint,
                                  key=code == REFUSES)
        _redact(d, doc)
        return d


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
