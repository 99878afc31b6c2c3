"""Which spec files a change since a git ref touches: the specs it edits, and the specs that use what it edits.

A changed file is a spec when lint would take it for one (its extension, and
:func:`torchspec.lint.looks_like_spec` on its text at either side).  Any
other changed file (a template, a macro file, a params file) touches the
specs rendered from it, which the loader names (``LoadedDocument.dependencies``).
Loading every spec of the repository to ask would make ``diff`` as slow as
lint, so only the specs that could use the file are loaded: ``git grep`` for
its name (and, transitively, for the names of the templates that mention it)
finds them, and the loader's answer decides.  A name built at render time
(``{% include name ~ ".j2" %}``) is not found; a ``--params-file`` inside the
repository that changed touches every spec in scope.
"""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass, field
from typing import Iterable, Iterator

from torchspec.gitops.git import Change, GitSource, Repo
from torchspec.lint import looks_like_spec
from torchspec.loader.source import FILES, FORMATS, MAX_FILE_BYTES, Source, decode

#: How many rounds of "templates that mention a changed template" are followed.
_MAX_ROUNDS = 8


@dataclass
class Candidate:
    """A spec file to compare: changed itself (``change``), or maybe through a file it uses (``uses``)."""

    path: str  # repository-relative, in the working tree (removed files: where it was)
    old_path: str | None  # at the ref
    status: str
    #: changed non-spec files it may use; empty for a spec that changed itself
    uses: list[str] = field(default_factory=list)
    #: the reason when known without loading (a changed params file)
    reasons: list[str] = field(default_factory=list)


def candidates(repo: Repo, changes: list[Change], source: GitSource, paths: Iterable[str] = (),
               params_file: str | None = None) -> Iterator[Candidate]:
    """The specs in ``paths`` (repository-relative; everything when empty) that ``changes`` may touch."""
    scope = [p.rstrip("/") for p in paths]
    specs: dict[str, Candidate] = {}
    others: set[str] = set()
    for change in changes:
        if _is_spec(repo, change, source):
            if _in_scope(change.path, scope) or (change.old_path and _in_scope(change.old_path, scope)):
                specs[change.path] = Candidate(change.path, change.old_path, change.status)
        else:
            others.update(p for p in (change.path, change.old_path) if p)
    yield from specs.values()
    if not others:
        return
    params_rel = repo.rel(params_file) if params_file else None
    if params_rel in others:
        for path in repo.files(scope):
            if path not in specs and _spec_text(repo.abs(path), FILES):
                yield Candidate(path, path, "modified", reasons=[f"the params file {params_rel} changed"])
        return
    for path in _users(repo, others, scope):
        if path not in specs:
            yield Candidate(path, path, "modified", uses=sorted(others))


def _users(repo: Repo, changed: set[str], scope: list[str]) -> list[str]:
    """Spec files of the working tree that mention a changed file's name, directly or through templates."""
    words = {posixpath.basename(p) for p in changed}
    seen: set[str] = set()
    found: list[str] = []
    for _ in range(_MAX_ROUNDS):
        hits = [h for h in repo.grep(words) if h not in seen and h not in changed]
        if not hits:
            break
        seen.update(hits)
        new_words = set()
        for hit in hits:
            if _spec_text(repo.abs(hit), FILES):
                if _in_scope(hit, scope):
                    found.append(hit)
            else:
                new_words.add(posixpath.basename(hit))
        words = new_words - words
        if not words:
            break
    return sorted(found)


def _is_spec(repo: Repo, change: Change, source: GitSource) -> bool:
    if change.status != "removed" and _spec_text(repo.abs(change.path), FILES):
        return True
    return change.old_path is not None and _spec_text(repo.abs(change.old_path), source)


def _spec_text(path: str, source: Source) -> bool:
    """Whether the file at ``path`` (in ``source``) is one lint would take for a spec."""
    if os.path.splitext(path)[1].lower() not in FORMATS:
        return False
    try:
        data = source.read(path, MAX_FILE_BYTES + 1)
    except OSError:
        return False
    text, problem = decode(data, path)
    return problem is None and text is not None and looks_like_spec(text)


def _in_scope(path: str, scope: list[str]) -> bool:
    return not scope or any(s in ("", ".") or path == s or path.startswith(s + "/") for s in scope)
