"""torchspec's entry-point groups (schedulers, named resources), read once and cached on disk.

Reading entry points means importing ``importlib.metadata`` and walking every
installed distribution: ~35 ms of each ``status``, ``dryrun`` or ``submit``
on a machine with a hundred packages.  The answer only changes when packages
change, so it is cached in ``$XDG_CACHE_HOME/torchspec/entry-points.json``
under a fingerprint of what the scan would read: every ``sys.path`` folder
with its distributions' ``entry_points.txt`` (modification time and size).
Installing, removing or upgrading a package, editing an entry-points file or
changing ``sys.path`` changes the fingerprint, and the next call scans again.
``TORCHSPEC_NO_CACHE=1`` turns the cache off.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

#: Only these groups are cached: torchspec's own, and TorchX's of the same names (``torchx.schedulers``...),
#: which :func:`entry_points` reads after ours so that a TorchX plug-in package works as it is.
PREFIX = "torchspec."
TORCHX_PREFIX = "torchx."
#: Distributions whose ``torchx.*`` entry points are TorchX's own, made for TorchX's objects: never ours.
_TORCHX_DISTS = frozenset({"torchx", "torchx-nightly"})
#: Changes whenever what the cache holds changes meaning, so an older cache is never read.
_CACHE_FORMAT = "2: torchspec and torchx groups"
_DIST_SUFFIXES = (".dist-info", ".egg-info")


@dataclass(frozen=True)
class EntryPoint:
    """One registration: ``name = value`` in ``group``, by the distribution ``dist``."""

    group: str
    name: str
    value: str
    dist: str

    @property
    def module(self) -> str:
        return self.value.partition(":")[0].strip()

    def load(self) -> Any:
        """The object ``value`` names (``package.module:attr.sub``), imported now."""
        obj = importlib.import_module(self.module)
        attrs = self.value.partition(":")[2].strip()
        for attr in attrs.split(".") if attrs else []:
            obj = getattr(obj, attr)
        return obj


def entry_points(group: str) -> List[EntryPoint]:
    """The entry points of ``group`` (one of torchspec's), in the order ``importlib.metadata`` gives them,
    then those of TorchX's group of the same name (``torchspec.schedulers``: ``torchx.schedulers``), except
    TorchX's own; :attr:`EntryPoint.group` tells them apart."""
    if not group.startswith(PREFIX):
        raise ValueError(f"only torchspec's own groups are read here, not {group!r}")
    theirs = TORCHX_PREFIX + group[len(PREFIX):]
    found = _all()
    return [ep for ep in found if ep.group == group] + [
        ep for ep in found if ep.group == theirs and ep.dist.lower() not in _TORCHX_DISTS]


def _all() -> List[EntryPoint]:
    if os.environ.get("TORCHSPEC_NO_CACHE"):
        return _scan()
    fingerprint = _fingerprint()
    path = _cache_path()
    cached = _read(path, fingerprint)
    if cached is not None:
        return cached
    found = _scan()
    _write(path, fingerprint, found)
    return found


def _fingerprint() -> str:
    """What a scan would read, by name, modification time and size, as one string: any change changes it.

    Kept whole rather than hashed: no collision can return a stale answer, and
    not importing hashlib saves more than comparing a few kilobytes costs.
    A folder counts by the distributions it lists, not its own time: other
    files coming and going (``python -m`` puts the current folder on
    ``sys.path``) change nothing a scan would read.
    """
    parts = [_CACHE_FORMAT]
    for entry in sys.path:
        folder = entry or os.getcwd()
        try:
            parts.append(folder)
            with os.scandir(folder) as found:
                names = sorted(e.name for e in found if e.name.endswith(_DIST_SUFFIXES))
        except OSError:  # missing, a zip file, unreadable: its name and time (or absence) are enough
            continue
        for name in names:
            try:
                st = os.stat(os.path.join(folder, name, "entry_points.txt"))
                parts.append(f"{name}:{st.st_mtime_ns}:{st.st_size}")
            except OSError:
                parts.append(f"{name}:-")
    return "\n".join(parts)


def _scan() -> List[EntryPoint]:
    from importlib import metadata

    out: List[EntryPoint] = []
    everything = metadata.entry_points()  # one walk of the distributions for every group
    for group in sorted(g for g in everything.groups if g.startswith((PREFIX, TORCHX_PREFIX))):
        for ep in everything.select(group=group):
            dist = ep.dist.metadata["Name"] if ep.dist is not None else ""
            out.append(EntryPoint(ep.group, ep.name, ep.value, dist or ""))
    return out


def _cache_path() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "torchspec", "entry-points.json")


#: Fingerprints kept: processes started from different folders see different ``sys.path``s.
_KEEP = 8


def _load(path: str) -> Dict[str, Any]:
    """fingerprint -> [[group, name, value, dist], ...] as stored, newest last; {} when unreadable."""
    try:
        with open(path, encoding="utf-8") as src:
            data = json.load(src)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _read(path: str, fingerprint: str) -> Optional[List[EntryPoint]]:
    """The cached entry points for this fingerprint if well-formed, else None."""
    try:
        return [EntryPoint(*(str(part) for part in item)) for item in _load(path)[fingerprint]]
    except (KeyError, TypeError, ValueError):
        return None


def _write(path: str, fingerprint: str, found: List[EntryPoint]) -> None:
    """Add this fingerprint's answer (keeping the newest few), atomically; a cache that cannot be written
    is only slower, never an error."""
    data = _load(path)
    data.pop(fingerprint, None)
    data[fingerprint] = [[ep.group, ep.name, ep.value, ep.dist] for ep in found]
    kept = dict(list(data.items())[-_KEEP:])
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".entry-points.")
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(kept, out)
        os.replace(tmp, path)
    except OSError:
        pass


__all__ = ["EntryPoint", "entry_points"]
