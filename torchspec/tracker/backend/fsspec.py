"""The file tracker: each run's metadata, artifacts and sources as JSON files under a root.

The root (the tracker's config) is a folder, or any fsspec URL
(``s3://bucket/runs``, ``memory://runs``: the fsspec package then does the
I/O).  A run keeps one folder, named for its id made safe as a file name
(``local%3A%2F%2Ftorchspec%2Ftrain-x1``), holding ``metadata.json``,
``artifacts.json`` and ``sources.json``; each write replaces a whole file
(read, merge, write), so two replicas of one job adding metadata at once
may lose one of two keys, as with TorchX's tracker.

Register it as a tracker named ``file`` (the entry point) with the root as
its config::

    [tracker.file]
    config = "/shared/runs"
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any, Iterable, List, Mapping, Optional
from urllib.parse import quote, unquote

from torchspec.tracker.api import Lineage, TrackerArtifact, TrackerBase, TrackerSource

__all__ = ["FsspecTracker", "create"]

_METADATA, _ARTIFACTS, _SOURCES = "metadata.json", "artifacts.json", "sources.json"


class _Folders:
    """Reading and writing files under a local root."""

    def __init__(self, root: str) -> None:
        self.root = os.path.abspath(os.path.expanduser(root))

    def read(self, *parts: str) -> Optional[str]:
        try:
            with open(os.path.join(self.root, *parts), encoding="utf-8") as f:
                return f.read()
        except FileNotFoundError:
            return None

    def write(self, text: str, *parts: str) -> None:
        path = os.path.join(self.root, *parts)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(tmp, path)  # whole, for a reader at the same time

    def children(self) -> List[str]:
        try:
            return sorted(name for name in os.listdir(self.root) if not name.startswith("."))
        except FileNotFoundError:
            return []


class _Fsspec(_Folders):
    """The same on an fsspec file system (``s3://``, ``gs://``, ``memory://``...)."""

    def __init__(self, url: str) -> None:
        try:
            from fsspec.core import url_to_fs
        except ImportError as e:
            from torchspec.install import install_command

            raise ValueError(f"the file tracker's root {url} is a URL, which needs the fsspec package:"
                             f" {install_command('tracker')} (and the file system's own package)") from e
        self.fs, self.root = url_to_fs(url)

    def read(self, *parts: str) -> Optional[str]:
        path = "/".join([self.root.rstrip("/"), *parts])
        return self.fs.cat_file(path).decode("utf-8") if self.fs.exists(path) else None

    def write(self, text: str, *parts: str) -> None:
        path = "/".join([self.root.rstrip("/"), *parts])
        self.fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
        self.fs.pipe_file(path, text.encode("utf-8"))

    def children(self) -> List[str]:
        if not self.fs.exists(self.root):
            return []
        return sorted(entry.rstrip("/").rsplit("/", 1)[-1] for entry in self.fs.ls(self.root, detail=False))


class FsspecTracker(TrackerBase):
    """A tracker keeping runs as JSON files under ``root`` (a folder or an fsspec URL)."""

    def __init__(self, root: str) -> None:
        self.root = root
        self._files = _Fsspec(root) if "://" in root else _Folders(root)

    def _read(self, run_id: str, name: str) -> Any:
        text = self._files.read(quote(run_id, safe=""), name)
        return json.loads(text) if text else None

    def _write(self, run_id: str, name: str, data: Any) -> None:
        self._files.write(json.dumps(data, indent=1, sort_keys=True, default=str), quote(run_id, safe=""), name)

    def add_metadata(self, run_id: str, **kwargs: object) -> None:
        self._write(run_id, _METADATA, {**(self._read(run_id, _METADATA) or {}), **kwargs})

    def metadata(self, run_id: str) -> Mapping[str, object]:
        return self._read(run_id, _METADATA) or {}

    def add_artifact(self, run_id: str, name: str, path: str,
                     metadata: Optional[Mapping[str, object]] = None) -> None:
        found = self._read(run_id, _ARTIFACTS) or {}
        found[name] = {"path": path, "metadata": dict(metadata) if metadata is not None else None}
        self._write(run_id, _ARTIFACTS, found)

    def artifacts(self, run_id: str) -> Mapping[str, TrackerArtifact]:
        return {name: TrackerArtifact(name, item["path"], item.get("metadata"))
                for name, item in (self._read(run_id, _ARTIFACTS) or {}).items()}

    def add_source(self, run_id: str, source_id: str, artifact_name: Optional[str] = None) -> None:
        found = self._read(run_id, _SOURCES) or []
        entry = {"source_run_id": source_id, "artifact_name": artifact_name}
        if entry not in found:
            self._write(run_id, _SOURCES, [*found, entry])

    def sources(self, run_id: str, artifact_name: Optional[str] = None) -> Iterable[TrackerSource]:
        return [TrackerSource(s["source_run_id"], s.get("artifact_name")) for s in self._read(run_id, _SOURCES) or []
                if artifact_name is None or s.get("artifact_name") == artifact_name]

    def run_ids(self, **kwargs: str) -> Iterable[str]:
        runs = [unquote(name) for name in self._files.children()]
        parent = kwargs.get("parent_run_id")
        if parent is None:
            return runs
        return [run for run in runs if any(s.source_run_id == parent for s in self.sources(run))]

    def lineage(self, run_id: str) -> Lineage:
        return Lineage(run_id, list(self.sources(run_id)), list(self.run_ids(parent_run_id=run_id)))


def create(config: Optional[str]) -> FsspecTracker:
    """The entry point's factory: ``config`` is the root (a folder or an fsspec URL)."""
    if not config:
        raise ValueError("the file tracker needs a root folder or URL as its config, e.g. [tracker.file]"
                         ' config = "/shared/runs"')
    return FsspecTracker(config)

