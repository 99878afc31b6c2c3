"""``torchspec lint``: find spec files, load each one, collect every diagnostic.

Lint never raises for a bad spec; it returns a :class:`LintResult` for the
reporters.  Required params that nobody passed get typed stand-in values
(checks on what they feed are skipped) so that a spec which needs params at
submit time still lints clean in CI.

Further checks of loaded files plug in as :class:`FileCheck` objects
(``LintOptions.checks``).  The one torchspec has, the dry run on a scheduler
(``lint --scheduler``: TS601, TS602), lives in the runner layer, since lint
knows no scheduler: :func:`torchspec.runner.check.lint_paths` adds it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping, Protocol, Sequence

from torchspec.errors import Diagnostic, UsageError
from torchspec import codes
from torchspec.lint.result import EXIT_ERRORS, EXIT_OK, EXIT_USAGE, LintResult
from torchspec.loader import LoadedFile, LoadOptions, load_text
from torchspec.loader.sandbox import inside
from torchspec.loader.source import FORMATS, MAX_FILE_BYTES, detect_format, read_text, too_large
from torchspec.errors import did_you_mean

if TYPE_CHECKING:
    from torchspec.config import Config

__all__ = ["FileCheck", "LintOptions", "LintResult", "lint_paths", "lint_text", "discover", "EXIT_OK", "EXIT_ERRORS",
           "EXIT_USAGE"]

SKIP_DIRS = {".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv", ".tox", ".nox",
             ".mypy_cache", ".pytest_cache", ".ruff_cache", ".eggs"}
#: What a file found in a folder must contain to be taken for a spec: a top-level roles key
#: with an entrypoint somewhere, or a $schema naming the AppDef schema.
_ROLES_KEY = re.compile(r"""(?m)^(?:\[\[\s*roles\s*\]\]|["']?roles["']?\s*[:=])|^\s{0,2}"roles"\s*:""")
_ENTRYPOINT = re.compile(r"""["']?entrypoint["']?\s*[:=]""")
_APPDEF_SCHEMA = re.compile(r"""(?m)^#\s*yaml-language-server:\s*\$schema=\S*appdef|"\$schema"\s*:\s*"[^"]*appdef""")
#: JSON Schema documents (ours included) describe roles and entrypoints without being specs.
_JSON_SCHEMA = re.compile(r""""\$schema"\s*:\s*"https?://json-schema\.org/""")


def looks_like_spec(text: str) -> bool:
    """Whether a file found while walking a folder should be linted as a spec."""
    if _APPDEF_SCHEMA.search(text):
        return True
    if _JSON_SCHEMA.search(text):
        return False
    return bool(_ROLES_KEY.search(text) and _ENTRYPOINT.search(text))


class FileCheck(Protocol):
    """A check lint runs on every file that loaded, after its own (``check_file``), then once at the end.

    Its diagnostics go into the ``out`` list of the file they are about, also
    from ``finish``; ``notes`` says what it could not check.
    """

    #: the codes it reports: a check none of whose codes is selected is not run
    codes: Sequence[str]
    notes: list[str]

    def check_file(self, loaded: LoadedFile, out: list[Diagnostic]) -> None:
        ...

    def finish(self) -> None:
        ...


@dataclass
class LintOptions:
    select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    params: Mapping[str, str] = field(default_factory=dict)
    params_file: str | None = None
    template_paths: tuple[str, ...] = ()
    max_file_bytes: int = MAX_FILE_BYTES
    #: skip named files that do not look like specs too (pre-commit passes every staged YAML file)
    only_specs: bool = False
    #: also dry-run each spec on this scheduler (TS601; kubernetes: TS602 too): torchspec.runner.check
    scheduler: str | None = None
    #: the scheduler's run options: a mapping, or ``-c`` text such as ``"flavor=jobset,queue=q"``
    scheduler_cfg: Mapping[str, Any] | str = field(default_factory=dict)
    #: kubernetes: the versions to validate manifests for (default: the oldest and newest bundled)
    k8s_versions: tuple[str, ...] = ()
    #: kubernetes: CRD files to validate custom kinds (JobSet, Volcano Job) against
    crd_paths: tuple[str, ...] = ()
    #: where ``[scheduler.NAME]`` run option defaults come from (as for submit); None: none
    config: "Config | None" = None
    #: further checks of each loaded file (the scheduler check is one)
    checks: Sequence[FileCheck] = ()
    #: unsaved editor buffers, path -> text: imported templates are read from here before the disk
    overlays: Mapping[str, str] = field(default_factory=dict)
    #: processes that load files at once in :func:`lint_paths`; 0: one per CPU (see :func:`jobs_for`)
    jobs: int = 0
    #: ``FILE.py:FUNCTION`` components are checked from their syntax tree (TS511); with this, also run
    #: (``--allow-python-components``): the spec ``torchspec convert`` makes of each, called with ``params``
    #: as its arguments, is linted too
    allow_python_components: bool = False


def check_codes(entries: Iterable[str]) -> list[str]:
    """Normalise --select/--ignore entries (codes, prefixes like TS5, or names); unknown ones are usage errors."""
    out = []
    for entry in entries:
        entry = entry.strip()
        if not entry:
            continue
        found = codes.get(entry)
        if found:
            out.append(found.code)
        elif re.fullmatch(r"(?i)TS\d{0,2}", entry) and any(c.startswith(entry.upper()) for c in codes.CODES):
            out.append(entry.upper())
        else:
            guess = did_you_mean(entry, list(codes.CODES) + list(codes.NAMES))
            raise UsageError(f"unknown lint code {entry!r}",
                             f"did you mean {guess!r}?" if guess else "see the codes with: torchspec lint --explain all")
    return out


def is_selected(code: str, select: list[str], ignore: list[str]) -> bool:
    if select and not any(code.startswith(s) for s in select):
        return False
    return not any(code.startswith(i) for i in ignore)


def discover(paths: Iterable[str], exclude: Iterable[str] = (),
             skipped: list[str] | None = None) -> Iterator[tuple[str, bool]]:
    """``(path, named)`` for each candidate file; ``named`` files were given explicitly.

    A file found in a folder is read only if it is a regular file inside
    that folder: a symlink out of it (``x.yaml -> ~/.aws/credentials``,
    ``-> /proc/self/environ``) or to a FIFO or a device (which would hang
    the read) is skipped, and said so in ``skipped``.  A repository can hold
    such symlinks; files named on the command line are the caller's choice.
    """
    patterns = list(exclude)

    def excluded(path: str) -> bool:
        if not patterns:
            return False
        import fnmatch

        rel = os.path.normpath(path)
        return any(fnmatch.fnmatch(rel, p) or fnmatch.fnmatch(os.path.basename(rel), p) for p in patterns)

    for path in paths:
        if os.path.isdir(path):
            root = os.path.realpath(path)
            for folder, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not excluded(os.path.join(folder, d)))
                for name in sorted(files):
                    full = os.path.join(folder, name)
                    if os.path.splitext(name)[1].lower() not in FORMATS or excluded(full):
                        continue
                    why = _unsafe_to_read(full, root)
                    if why is None:
                        yield full, False
                    elif skipped is not None:
                        skipped.append(f"skipped {full}: {why}")
        elif os.path.exists(path):
            if not excluded(path):
                yield path, True
        else:
            from torchspec.components import refuse_python

            refuse_python(path, "lint (without --allow-python-components)")
            raise UsageError(f"no such file or folder: {path}")


def _unsafe_to_read(path: str, root: str) -> str | None:
    """Why a file found under ``root`` must not be read (see :func:`discover`), or None."""
    import stat

    real = os.path.realpath(path)
    if not inside(real, [root]):
        return f"a symlink to {real}, outside the folder linted"
    try:
        mode = os.stat(real).st_mode
    except OSError:
        return None  # reading reports it (TS001)
    return None if stat.S_ISREG(mode) else "not a regular file (a FIFO, socket or device)"


#: Fewer files than this are linted in one process: starting others costs more than it saves.
PARALLEL_FROM = 64


def lint_paths(paths: Iterable[str], options: LintOptions | None = None) -> LintResult:
    from torchspec.components import is_python_component

    run = _Run(options or LintOptions())
    paths = list(paths)
    python = [p for p in paths if is_python_component(p) and not os.path.exists(p)]
    found = [(path, named and not run.options.only_specs)
             for path, named in discover([p for p in paths if p not in python], run.options.exclude,
                                         run.result.notes)]
    for ref in python:
        run_python(run, ref)
    jobs = 1 if run.checks else jobs_for(run.options.jobs, len(found))
    if jobs > 1:
        for outcome in _lint_in_processes(found, run.load_options, jobs):
            if outcome is not None:
                run.record(*outcome)
    else:
        for path, named in found:
            run.add(lint_file(path, named, run.load_options))
    return run.finish()


def run_python(run: "_Run", ref: str) -> None:
    """A Python component: its function checked from the file's syntax tree (TS511, the code never runs);
    with ``allow_python_components``, and only when it meets the standard, the spec it makes linted too."""
    from torchspec.lint.component import lint_component

    path, found = lint_component(ref)
    if found or not run.options.allow_python_components:
        run.record(path, found, [])
        return
    from torchspec.components.convert import load_converted

    run.add(load_converted(ref, run.load_options))


def jobs_for(asked: int, files: int) -> int:
    """How many processes lint ``files`` files: ``asked`` (0: one per CPU this process may use), none below
    :data:`PARALLEL_FROM` files and at most one per half of that, and one wherever a child cannot be forked
    safely.

    Linting is CPU-bound Python, so one process uses one core; the files are
    independent, so the others divide them.  Children are forked (they inherit
    the loaded schema and modules, ~2 ms each), which Linux does safely from a
    process with a single thread: elsewhere, or beside other threads, lint
    runs in this process.
    """
    if asked == 1 or files < PARALLEL_FROM or not _fork_is_safe():
        return 1
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(asked or cpus, files // (PARALLEL_FROM // 2)))


def _fork_is_safe() -> bool:
    """Linux, and no other thread that could hold a lock the child would inherit held."""
    import sys
    import threading

    return sys.platform.startswith("linux") and threading.active_count() == 1


_Outcome = tuple[str, list[Diagnostic], list[str]]


def _lint_in_processes(found: list[tuple[str, bool]], options: LoadOptions, jobs: int) -> Iterator[_Outcome | None]:
    """Each file's outcome (None: not a spec), in the order of ``found``, linted by ``jobs`` forked processes."""
    import functools
    import multiprocessing

    chunk = max(1, min(64, len(found) // (jobs * 8)))
    with multiprocessing.get_context("fork").Pool(jobs, initializer=_leave_ctrl_c_to_the_parent) as pool:
        yield from pool.imap(functools.partial(_outcome, options=options), found, chunk)


def _leave_ctrl_c_to_the_parent() -> None:
    """In a lint process: Ctrl-C reaches the whole process group; the parent stops (and ends) the others, so
    they print no traceback of their own."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _outcome(item: tuple[str, bool], options: LoadOptions) -> _Outcome | None:
    """In a lint process: what the parent needs of one file (the loaded documents stay here)."""
    loaded = lint_file(item[0], item[1], options)
    if loaded is None:
        return None
    return loaded.path, loaded.all_diagnostics(), _env_read(loaded)


def _env_read(loaded: LoadedFile) -> list[str]:
    return sorted({name for doc in loaded.documents for name in doc.env_read})


def lint_text(text: str, path: str = "<string>", options: LintOptions | None = None,
              fmt: str | None = None) -> LintResult:
    """Lint ``text`` held in memory (an editor's buffer) as :func:`lint_paths` lints the file ``path``.

    The same codes, messages, positions and hints; imports are found next to
    ``path`` (and in ``options.overlays`` first).  ``fmt`` defaults to the
    format ``path``'s extension names.  With ``options.only_specs``, text that
    does not look like a spec gives a result with no files.
    """
    run = _Run(options or LintOptions())
    if len(text) * 4 > run.options.max_file_bytes and len(text.encode("utf-8")) > run.options.max_file_bytes:
        run.add(LoadedFile(path, diagnostics=[too_large(path, run.options.max_file_bytes)]))
    elif not run.options.only_specs or looks_like_spec(text):
        run.add(load_text(text, path, fmt or detect_format(path), run.load_options))
    return run.finish()


class _Run:
    """One lint run: the options checked once, then each loaded file added, then the result."""

    def __init__(self, options: LintOptions) -> None:
        self.options = options
        self.select = check_codes(options.select)
        self.ignore = check_codes(options.ignore)
        self.load_options = LoadOptions(params=options.params, params_file=options.params_file,
                                        template_paths=options.template_paths,
                                        max_file_bytes=options.max_file_bytes, lint=True, overlays=options.overlays)
        if options.scheduler and not any("TS601" in check.codes for check in options.checks):
            raise UsageError("linting against a scheduler runs its dry run: use torchspec.runner.check.lint_paths",
                             "from torchspec.runner.check import lint_paths")
        self.checks = [c for c in options.checks if any(is_selected(code, self.select, self.ignore)
                                                        for code in c.codes)]
        self.result = LintResult()
        self.per_file: list[list[Diagnostic]] = []

    def add(self, loaded: LoadedFile | None) -> None:
        if loaded is None:
            return
        found = loaded.all_diagnostics()
        for check in self.checks:
            check.check_file(loaded, found)
        self.record(loaded.path, found, _env_read(loaded))

    def record(self, path: str, found: list[Diagnostic], env_read: list[str]) -> None:
        """One file's outcome, linted here or in another process."""
        self.result.files.append(path)
        self.per_file.append(found)
        if env_read:
            self.result.env_read[path] = env_read

    def finish(self) -> LintResult:
        for check in self.checks:
            check.finish()  # e.g. kubernetes manifests are validated together, into each file's list
            self.result.notes.extend(check.notes)
        self.result.diagnostics.extend(d for found in self.per_file for d in found
                                       if is_selected(d.code, self.select, self.ignore))
        return self.result


def lint_file(path: str, named: bool, options: LoadOptions) -> LoadedFile | None:
    """The loaded file, or None when a file found in a folder is not a spec at all."""
    text, problem = read_text(path, options.max_file_bytes)
    if problem is not None:
        return LoadedFile(path, diagnostics=[problem])
    assert text is not None
    if not named and not looks_like_spec(text):
        return None
    return load_text(text, path, detect_format(path), options)
