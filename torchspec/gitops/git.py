"""The git plumbing of ``torchspec diff``: what changed since a ref, and the files of that ref as a loader Source.

Nothing is checked out and nothing in the repository is written (git runs
with ``--no-optional-locks``, so not even the index is refreshed on disk).
:class:`GitSource` serves the files of one commit to the loader by their
absolute path in the working tree, so a spec at the old commit is loaded by
the same code, with the same folder checks, as the file on disk: its imports,
includes and params file come from that commit too.  Paths outside the
repository (a ``--template-path`` elsewhere) are not versioned and are read
from the disk.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from typing import Iterable

from torchspec.errors import UsageError
from torchspec.loader.source import FILES

_STATUS = {"A": "added", "D": "removed", "M": "modified", "T": "modified", "R": "renamed", "C": "added"}
_SYMLINK = "120000"
_MAX_LINK_HOPS = 40


@dataclass(frozen=True)
class Change:
    """One file that differs between a ref and the working tree; paths are relative to the repository root."""

    status: str  # added, removed, modified or renamed
    path: str  # where it is now (a removed file: where it was)
    old_path: str | None  # where it was at the ref (None: added)


class Repo:
    """A git working tree, found from a folder inside it."""

    def __init__(self, folder: str = ".") -> None:
        try:
            top = self._run(["rev-parse", "--show-toplevel"], cwd=folder).strip()
        except UsageError as e:
            raise UsageError(f"{os.path.abspath(folder)} is not inside a git repository",
                             "run it in a git checkout, or compare two files: torchspec diff OLD NEW") from e
        self.root = os.path.realpath(top)

    # ------------------------------------------------------------ running git

    def git(self, *args: str) -> str:
        """git's output (text) for ``args``, run at the repository root."""
        return self._run(list(args), cwd=self.root)

    @staticmethod
    def _run(args: list[str], cwd: str) -> str:
        try:
            done = subprocess.run(["git", "--no-optional-locks", *args], cwd=cwd, capture_output=True, check=False)
        except FileNotFoundError:
            raise UsageError("git is not installed (torchspec diff --base runs it)") from None
        if done.returncode != 0:
            message = done.stderr.decode(errors="replace").strip().splitlines()
            raise UsageError(f"git {args[0]} failed: {message[-1] if message else done.returncode}")
        return done.stdout.decode("utf-8", errors="surrogateescape")

    # ------------------------------------------------------------ paths

    def rel(self, path: str) -> str:
        """``path`` (absolute, or relative to the current folder) relative to the repository root."""
        real = os.path.realpath(path)
        rel = os.path.relpath(real, self.root)
        return "" if rel == "." else rel.replace(os.sep, "/")

    def abs(self, rel: str) -> str:
        return os.path.join(self.root, *rel.split("/")) if rel else self.root

    # ------------------------------------------------------------ questions

    def commit(self, ref: str) -> str:
        """The commit ``ref`` names; a :class:`UsageError` when it names none."""
        try:
            return self.git("rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}").strip()
        except UsageError:
            raise UsageError(f"{ref!r} is not a commit in {self.root}",
                             "fetch it first (actions/checkout: fetch-depth: 0), or name a branch, tag or sha"
                             ) from None

    def changes(self, commit: str) -> list[Change]:
        """Every file that differs between ``commit`` and the working tree, renames found as ``git diff -M`` does;
        files git does not track yet (and does not ignore) are added."""
        out = self.git("diff", "-M", "--name-status", "-z", "--no-ext-diff", commit, "--")
        fields = out.split("\0")
        found: list[Change] = []
        i = 0
        while i < len(fields) - 1:
            code = fields[i]
            kind = _STATUS.get(code[:1])
            if code[:1] in ("R", "C"):
                old, new = fields[i + 1], fields[i + 2]
                i += 3
                found.append(Change(kind or "modified", new, old if kind == "renamed" else None))
                continue
            path = fields[i + 1]
            i += 2
            if kind is not None:
                found.append(Change(kind, path, None if kind == "added" else path))
        found.extend(Change("added", path, None) for path in self.untracked())
        return found

    def untracked(self) -> list[str]:
        return [p for p in self.git("ls-files", "-z", "--others", "--exclude-standard").split("\0") if p]

    def files(self, paths: Iterable[str] = ()) -> list[str]:
        """Tracked and untracked (not ignored) files under ``paths`` (repository-relative; all when empty)."""
        scope = ["--", *paths] if paths else []
        listed = self.git("ls-files", "-z", "--cached", "--others", "--exclude-standard", *scope).split("\0")
        return sorted({p for p in listed if p and os.path.lexists(self.abs(p))})

    def grep(self, words: Iterable[str], paths: Iterable[str] = ()) -> list[str]:
        """Files of the working tree (tracked and untracked) that contain one of ``words`` (fixed strings)."""
        patterns = [arg for word in sorted(set(words)) for arg in ("-e", word)]
        if not patterns:
            return []
        scope = list(paths)
        done = subprocess.run(["git", "--no-optional-locks", "grep", "-l", "-z", "-F", "-I", "--untracked",
                               *patterns, "--", *scope], cwd=self.root, capture_output=True, check=False)
        if done.returncode not in (0, 1):  # 1: nothing found
            raise UsageError(f"git grep failed: {done.stderr.decode(errors='replace').strip()}")
        return [p for p in done.stdout.decode("utf-8", errors="surrogateescape").split("\0") if p]

    def source(self, commit: str) -> "GitSource":
        return GitSource(self, commit)


class GitSource:
    """The files of one commit, served to the loader (``LoadOptions.source``) by their path in the working tree.

    Folders are listed with ``git ls-tree`` as they are first needed and blobs
    read through one ``git cat-file --batch``; links in the commit are
    followed as the disk would follow them.  Close it (or use ``with``) to
    stop the ``cat-file`` process.
    """

    def __init__(self, repo: Repo, commit: str) -> None:
        self.repo = repo
        self.commit = commit
        self._folders: dict[str, dict[str, tuple[str, str, str]]] = {}
        self._blobs: dict[str, bytes] = {}
        self._batch: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> "GitSource":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._batch is not None:
            assert self._batch.stdin is not None
            self._batch.stdin.close()
            self._batch.wait()
            self._batch = None

    # ------------------------------------------------------------ Source

    def read(self, path: str, limit: int) -> bytes:
        real = self.realpath(path)
        rel = self._rel(real)
        if rel is None:
            return FILES.read(real, limit)
        entry = self._entry(rel)
        if entry is None:
            raise FileNotFoundError(2, f"No such file or directory at {self.commit[:12]}", path)
        if entry[1] != "blob":
            raise IsADirectoryError(21, "Is a directory", path)
        return self._blob(entry[2])[:limit]

    def realpath(self, path: str) -> str:
        rel = self._rel(os.path.abspath(path))
        if rel is None:
            return FILES.realpath(path)
        parts, resolved, hops = [p for p in rel.split("/") if p not in ("", ".")], [], 0
        while parts:
            part = parts.pop(0)
            if part == "..":
                if not resolved:  # leaves the repository: the disk decides from there
                    return FILES.realpath(os.path.join(self.repo.root, "..", *parts))
                resolved.pop()
                continue
            entry = self._entry("/".join(resolved + [part]))
            if entry is not None and entry[0] == _SYMLINK and hops < _MAX_LINK_HOPS:
                hops += 1
                target = self._blob(entry[2]).decode("utf-8", errors="surrogateescape")
                if os.path.isabs(target):
                    return self.realpath(os.path.join(target, *parts))
                parts = [p for p in target.split("/") if p not in ("", ".")] + parts
                continue
            resolved.append(part)
        return self.repo.abs("/".join(resolved))

    def exists(self, path: str) -> bool:
        rel = self._rel(self.realpath(path))
        return FILES.exists(path) if rel is None else (rel == "" or self._entry(rel) is not None)

    def is_file(self, path: str) -> bool:
        real = self.realpath(path)
        rel = self._rel(real)
        if rel is None:
            return FILES.is_file(real)
        entry = self._entry(rel)
        return entry is not None and entry[1] == "blob" and entry[0] != _SYMLINK

    def size(self, path: str) -> int:
        return len(self.read(path, 1 << 62))

    def stamp(self, path: str) -> object:
        return None  # a commit never changes

    # ------------------------------------------------------------ git

    def _rel(self, path: str) -> str | None:
        root = self.repo.root
        norm = os.path.normpath(path)
        if norm == root:
            return ""
        if norm.startswith(root + os.sep):
            return norm[len(root) + 1:].replace(os.sep, "/")
        return None

    def _entry(self, rel: str) -> tuple[str, str, str] | None:
        """(mode, type, sha) of ``rel`` in the commit, or None."""
        folder, _, name = rel.rpartition("/")
        listing = self._folders.get(folder)
        if listing is None:
            listing = self._folders[folder] = self._list(folder)
        return listing.get(name)

    def _list(self, folder: str) -> dict[str, tuple[str, str, str]]:
        entry = self._entry(folder) if folder else None
        if folder and (entry is None or entry[1] != "tree"):
            return {}
        tree = f"{self.commit}:{folder}" if folder else self.commit
        out = self.repo.git("ls-tree", "-z", tree)
        listing = {}
        for line in out.split("\0"):
            if line:
                meta, _, name = line.partition("\t")
                mode, kind, sha = meta.split()
                listing[name] = (mode, kind, sha)
        return listing

    def _blob(self, sha: str) -> bytes:
        found = self._blobs.get(sha)
        if found is not None:
            return found
        if self._batch is None:
            self._batch = subprocess.Popen(["git", "--no-optional-locks", "cat-file", "--batch"], cwd=self.repo.root,
                                           stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self._batch.stdin is not None and self._batch.stdout is not None
        self._batch.stdin.write(sha.encode() + b"\n")
        self._batch.stdin.flush()
        header = self._batch.stdout.readline().split()
        if len(header) != 3:
            raise FileNotFoundError(2, "No such object", sha)
        data = self._batch.stdout.read(int(header[2]) + 1)[:-1]
        self._blobs[sha] = data
        return data
