"""The named-resource registry: ``named_resources["aws_p3.8xlarge"]`` -> Resource.

Providers register in the ``torchspec.named_resources`` entry-point group,
the built-in sets exactly like a third-party package.  An entry point loads
either a callable returning a Resource (the entry point's name is the
resource's name, as TorchX documents) or a mapping of names to such
callables (a whole set).  Built-in sets load first, then every other
provider in name order, so a plug-in may redefine a built-in name.
"""

from __future__ import annotations

import difflib
from importlib import metadata
from typing import Callable, Iterator, Mapping

from torchspec.specs.api import NULL_RESOURCE, Resource

GROUP = "torchspec.named_resources"
_BUILTIN = ("generic", "aws")


def load_named_resources() -> dict[str, Callable[[], Resource]]:
    """Every registered resource factory, read fresh from the installed entry points."""
    found: dict[str, Callable[[], Resource]] = {}
    eps = sorted(metadata.entry_points(group=GROUP),
                 key=lambda ep: (ep.name not in _BUILTIN, _BUILTIN.index(ep.name) if ep.name in _BUILTIN else 0,
                                 ep.name))
    for ep in eps:
        loaded = ep.load()
        if isinstance(loaded, Mapping):
            found.update(loaded)
        elif callable(loaded):
            found[ep.name] = loaded
        else:
            raise TypeError(f"named resource entry point {ep.name!r} ({ep.value}) is neither a callable nor a mapping")
    found.setdefault("NULL", lambda: NULL_RESOURCE)
    found.setdefault("MISSING", lambda: NULL_RESOURCE)
    return found


class _NamedResourcesLibrary(Mapping[str, Resource]):
    """A lazy, read-only mapping; loads the entry points on first use."""

    def __init__(self) -> None:
        self._factories: dict[str, Callable[[], Resource]] | None = None

    def _load(self) -> dict[str, Callable[[], Resource]]:
        if self._factories is None:
            self._factories = load_named_resources()
        return self._factories

    def reload(self) -> None:
        """Forget what was loaded, e.g. after installing a provider in the same process."""
        self._factories = None

    def __getitem__(self, key: str) -> Resource:
        factories = self._load()
        if key not in factories:
            close = difflib.get_close_matches(key, list(factories), n=3)
            hint = f" Did you mean: {', '.join(close)}?" if close else ""
            raise KeyError(f"Unknown named resource: {key!r}.{hint} "
                           f"Registered: {len(factories)} names; see torchspec.specs.named_resources")
        return factories[key]()

    def __contains__(self, key: object) -> bool:
        return key in self._load()

    def __iter__(self) -> Iterator[str]:
        return iter(self._load())

    def __len__(self) -> int:
        return len(self._load())

    def __repr__(self) -> str:
        return f"named_resources({sorted(self._load())})"


named_resources = _NamedResourcesLibrary()


def get_named_resources(res: str) -> Resource:
    """The Resource registered under ``res`` (see :data:`named_resources`)."""
    return named_resources[res]
