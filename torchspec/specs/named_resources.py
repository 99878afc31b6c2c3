"""The named-resource registry: ``named_resources["aws_p3.8xlarge"]`` -> a fresh :class:`Resource`.

Providers register in the ``torchspec.named_resources`` entry-point group,
the same way TorchX providers use ``torchx.named_resources``.  An entry
point's object is either

* a callable returning a Resource: the entry point's name is the resource's
  name (TorchX's documented form)::

      [torchspec.named_resources]
      gpu_x_1 = my_module.resources:gpu_x_1

* or a mapping of names to such callables, registering a whole set at once
  (how torchspec's own ``generic`` and ``aws`` sets are declared).

Precedence, when two providers define the same name, is fixed so that the
answer never depends on install order or ``sys.path``: the built-in sets
come first (generic, then AWS), then every other provider sorted by
distribution name, then entry-point name; a later definition replaces an
earlier one, so a plug-in can redefine a built-in name.  TorchX's own
group, ``torchx.named_resources``, is read after all of ours, so a TorchX
plug-in package works as it is; a name it gives that a ``torchspec.``
plug-in gave too is an error naming both packages.  ``NULL`` and
``MISSING`` (both :data:`NULL_RESOURCE`) are added last and cannot be redefined.

Entry points are read on first use, not at import, and cached;
:func:`clear_named_resources_cache` (or ``named_resources.reload()``) forgets them (after installing a provider
into a running process, or in tests).  A provider that fails to load is
skipped with a warning, so one broken plug-in does not hide every other name.

Note: ``torchspec.specs.named_resources`` (the package attribute) is the
mapping, as in TorchX, and it shadows this module's name there; import from
the module with ``from torchspec.specs.named_resources import ...``, which
goes through ``sys.modules`` and is unaffected.
"""

from __future__ import annotations

import copy
import functools
import importlib
import sys
import threading
import warnings
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Mapping, Optional

from torchspec.errors import UsageError, did_you_mean
from torchspec.specs.api import NULL_RESOURCE, Resource

if TYPE_CHECKING:
    from torchspec.entry_points import EntryPoint

#: The entry-point group providers register in.
ENTRY_POINT_GROUP = "torchspec.named_resources"

#: Makes a fresh Resource each call, so callers may modify what they get.
ResourceFactory = Callable[[], Resource]

# The built-in sets, in precedence order.  They are imported directly rather
# than only through their entry points so the registry works from a source
# tree that was never pip-installed; their entry points are then redundant.
_BUILTIN_PROVIDERS = (
    "torchspec.specs.named_resources_generic",
    "torchspec.specs.named_resources_aws",
)

# Resources TorchX always defines: both mean "the resource does not matter".
_SENTINELS: Dict[str, ResourceFactory] = {
    "NULL": lambda: NULL_RESOURCE,
    "MISSING": lambda: NULL_RESOURCE,
}


def _as_factory(value: Any) -> Optional[ResourceFactory]:
    if isinstance(value, Resource):
        # a ready-made Resource: hand out copies so nobody edits the registered one
        return functools.partial(copy.deepcopy, value)
    return value if callable(value) else None


def _register(table: Dict[str, ResourceFactory], source: str, name: str, provided: Any) -> None:
    """Add one provider's resources to ``table``; warn about (and skip) anything unusable."""
    if isinstance(provided, Mapping):
        for key, value in provided.items():
            factory = _as_factory(value)
            if factory is None:
                warnings.warn(f"{source}: named resource {key!r} is neither a callable nor a Resource; skipped")
            else:
                table[str(key)] = factory
        return
    factory = _as_factory(provided)
    if factory is None:
        warnings.warn(f"{source} is neither a callable, a Resource nor a mapping of them; skipped")
    else:
        table[name] = factory


def _is_builtin(entry_point: EntryPoint) -> bool:
    return entry_point.module in _BUILTIN_PROVIDERS


def _provider_order(entry_point: EntryPoint) -> tuple[str, str, str]:
    return entry_point.dist.lower(), entry_point.name, entry_point.value


def load_named_resources() -> Dict[str, ResourceFactory]:
    """Every registered name and its factory, read fresh from the installed entry points.

    The result is in precedence order (see the module docs).  The entry
    points come from :func:`torchspec.entry_points.entry_points` (cached on
    disk, invalidated when any installed package changes).
    """
    from torchspec.entry_points import entry_points

    table: Dict[str, ResourceFactory] = {}
    for module in _BUILTIN_PROVIDERS:
        _register(table, module, module, importlib.import_module(module).NAMED_RESOURCES)

    plugins = [ep for ep in entry_points(ENTRY_POINT_GROUP) if not _is_builtin(ep)]
    ours = sorted((ep for ep in plugins if ep.group == ENTRY_POINT_GROUP), key=_provider_order)
    torchx = sorted((ep for ep in plugins if ep.group != ENTRY_POINT_GROUP), key=_provider_order)
    given_by: Dict[str, str] = {}  # name -> the plug-in package that gave it, to name both in a clash
    for entry_point in ours + torchx:
        source = f"named resource entry point {entry_point.name} = {entry_point.value}"
        try:
            provided = entry_point.load()
        except Exception as error:  # a broken plug-in must not hide every other name
            warnings.warn(f"{source} failed to load and was skipped: {error!r}")
            continue
        added: Dict[str, ResourceFactory] = {}
        _register(added, source, entry_point.name, provided)
        where = f"{entry_point.dist or '<unknown package>'} ({entry_point.group})"
        if entry_point.group != ENTRY_POINT_GROUP:  # TorchX's group comes after ours and may not redefine
            for name in added:
                if name in given_by:
                    raise UsageError(f"named resource {name!r} is registered twice, by {given_by[name]} and by"
                                     f" {where}", "uninstall one of the packages, or rename one resource")
        given_by.update(dict.fromkeys(added, where))
        table.update(added)

    table.update(_SENTINELS)
    return table


class _FactoryTable(Mapping[str, ResourceFactory]):
    """The registered factories, loaded on first use and cached until :meth:`clear`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loaded: Optional[Dict[str, ResourceFactory]] = None

    def _table(self) -> Dict[str, ResourceFactory]:
        loaded = self._loaded
        if loaded is None:
            with self._lock:
                if self._loaded is None:
                    self._loaded = load_named_resources()
                loaded = self._loaded
        return loaded

    def clear(self) -> None:
        with self._lock:
            self._loaded = None

    def __getitem__(self, name: str) -> ResourceFactory:
        return self._table()[name]

    def __contains__(self, name: object) -> bool:
        return name in self._table()

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._table()))

    def __len__(self) -> int:
        return len(self._table())

    def __repr__(self) -> str:
        return f"<named resource factories: {list(self._table())}>" if self._loaded else "<named resource factories>"


_FACTORIES = _FactoryTable()


def _active_factories() -> Mapping[str, ResourceFactory]:
    """The factory table in use: ``torchspec.specs._named_resource_factories``.

    TorchX keeps the table at ``torchx.specs._named_resource_factories`` and
    its tests swap it out there; reading it through the package keeps that seam.
    """
    package = sys.modules.get(__package__ or "torchspec.specs")
    table: Mapping[str, ResourceFactory] = getattr(package, "_named_resource_factories", _FACTORIES)
    return table


class _NamedResourcesLibrary(Mapping[str, Resource]):
    """``named_resources``: a read-only mapping from registered names to fresh Resources.

    ``name in named_resources`` and iteration (over names, in precedence
    order) do not build any Resource.  A missing name raises ``KeyError``
    that suggests the closest registered name, or lists them all.
    """

    def __getitem__(self, key: str) -> Resource:
        factories = _active_factories()
        if key in factories:
            return factories[key]()
        names = list(factories.keys())
        guess = did_you_mean(key, names)
        hint = f"Did you mean `{guess}`?" if guess else f"Registered named resources: {names}"
        raise KeyError(f"No named resource found for `{key}`. {hint}")

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key in _active_factories()

    def __iter__(self) -> Iterator[str]:
        return iter(list(_active_factories().keys()))

    def __len__(self) -> int:
        return len(list(_active_factories().keys()))

    def __repr__(self) -> str:
        return f"named_resources({named_resource_names()})"

    def reload(self) -> None:
        """Read the entry points again on next use, e.g. after a provider was installed into this process.

        Same as :func:`clear_named_resources_cache`; here so that code holding
        only ``named_resources`` can refresh it.
        """
        clear_named_resources_cache()


#: The registry as a mapping: ``named_resources["gpu.small"]``, ``"gpu.small" in named_resources``.
named_resources: _NamedResourcesLibrary = _NamedResourcesLibrary()


def get_named_resources(res: str) -> Resource:
    """The Resource registered as ``res``; same as ``named_resources[res]``.

    Register your own by pointing an entry point of the
    ``torchspec.named_resources`` group at a function returning a Resource::

        # my_module/resources.py
        def gpu_x_1() -> Resource:
            return Resource(cpu=2, gpu=2, memMB=64 * 1024)

        # pyproject.toml
        [project.entry-points."torchspec.named_resources"]
        gpu_x_1 = "my_module.resources:gpu_x_1"
    """
    return named_resources[res]


def named_resource_names() -> List[str]:
    """Every registered name, sorted (for "did you mean" hints and listings)."""
    return sorted(named_resources)


def clear_named_resources_cache() -> None:
    """Forget the loaded entry points; the next lookup reads them again."""
    _FACTORIES.clear()


def resource(
    cpu: Optional[int] = None,
    gpu: Optional[int] = None,
    memMB: Optional[int] = None,
    h: Optional[str] = None,
) -> Resource:
    """A Resource from raw numbers, or from the named resource ``h`` (which then wins).

    Raw numbers left out (or 0) take small defaults: 2 cpus, no gpu, 1024 MB.
    These are local on purpose so nobody grows a dependency on them.
    """
    if h:
        return get_named_resources(h)
    default_cpu, default_gpu, default_mem_mb = 2, 0, 1024
    return Resource(cpu=cpu or default_cpu, gpu=gpu or default_gpu, memMB=memMB or default_mem_mb)


__all__ = [
    "ENTRY_POINT_GROUP",
    "ResourceFactory",
    "clear_named_resources_cache",
    "get_named_resources",
    "load_named_resources",
    "named_resource_names",
    "named_resources",
    "resource",
]
