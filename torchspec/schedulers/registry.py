"""The scheduler registry: every scheduler by name, from the ``torchspec.schedulers`` entry points (and
TorchX's ``torchx.schedulers``, read after ours, so a TorchX plug-in package works as it is).

Re-exported by :mod:`torchspec.schedulers` (``from torchspec.schedulers import
get_scheduler_factory``); it lives here so that importing the package, as
the local supervisor does, costs nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, List, Mapping, Protocol, TypeVar

from torchspec.errors import UsageError
from torchspec.schedulers.api import Scheduler
from torchspec.specs import UnknownSchedulerException

if TYPE_CHECKING:
    from torchspec.entry_points import EntryPoint

#: The entry-point group schedulers register in.
GROUP = "torchspec.schedulers"

# The distribution whose entry points count as built-in: they come first,
# ``local`` leading (installers write entry points in no order we control), so
# the default scheduler never depends on which plug-ins happen to be installed
# (torchspec.version.is_own_dist: torchspec-cli, or torchspec, its name before 0.1.0).
#: The default scheduler when no config names one: the one that needs nothing installed.
DEFAULT_SCHEDULER = "local"


class SchedulerFactory(Protocol):
    """Builds a scheduler for a session; extra keyword arguments a scheduler does not use are ignored."""

    def __call__(self, session_name: str, **kwargs: object) -> Scheduler:
        ...


class DuplicateSchedulerError(UsageError):
    """Two installed packages register a scheduler under the same name.

    An error, not "last one wins": silently running jobs on a different
    backend than the one a user picked is worse than refusing to start.
    """


F = TypeVar("F")


def lookup(name: str, factories: Mapping[str, F]) -> F:
    """``factories[name]``, or :class:`~torchspec.specs.UnknownSchedulerException` naming the
    registered schedulers and guessing the one meant.

    The one scheduler lookup: the registry, the runner, lint and the CLI all
    come through here, so an unknown name reads the same everywhere.
    """
    if name in factories:
        return factories[name]
    raise UnknownSchedulerException(name, list(factories))


class _EntryPointFactory:
    """A :class:`SchedulerFactory` that imports its entry point on first call."""

    def __init__(self, entry_point: EntryPoint) -> None:
        self.entry_point = entry_point

    def __call__(self, session_name: str, **kwargs: object) -> Scheduler:
        factory = self.entry_point.load()
        return factory(session_name, **kwargs)

    def __repr__(self) -> str:
        return f"SchedulerFactory({self.entry_point.name}={self.entry_point.value})"


def _provider(entry_point: EntryPoint) -> str:
    group = "" if entry_point.group == GROUP else f", in {entry_point.group}"  # TorchX's group: say so
    return f"{entry_point.dist or '<unknown package>'} ({entry_point.value}{group})"


def _is_builtin(entry_point: EntryPoint) -> bool:
    from torchspec.version import is_own_dist

    return is_own_dist(entry_point.dist)


def get_scheduler_factories() -> Dict[str, SchedulerFactory]:
    """Every registered scheduler by name, from the installed entry points (as they are now: the cache
    in :mod:`torchspec.entry_points` is invalidated by any change to them).

    Built-in schedulers come first, ``local`` (the default) leading, then
    plug-ins sorted by name.  Raises :class:`DuplicateSchedulerError` naming
    both providers when two packages register the same name.
    """
    from torchspec.entry_points import entry_points  # cached on disk: see torchspec.entry_points

    builtin: List[EntryPoint] = []
    plugins: List[EntryPoint] = []
    seen: Dict[str, EntryPoint] = {}
    for ep in entry_points(GROUP):
        first = seen.get(ep.name)
        if first is not None:
            if first.value == ep.value:
                continue
            raise DuplicateSchedulerError(
                f"scheduler {ep.name!r} is registered twice, by {_provider(first)} and by {_provider(ep)}",
                "uninstall one of them",
            )
        seen[ep.name] = ep
        (builtin if _is_builtin(ep) else plugins).append(ep)
    builtin.sort(key=lambda ep: (ep.name != DEFAULT_SCHEDULER, ep.name))
    plugins.sort(key=lambda ep: ep.name)
    return {ep.name: _EntryPointFactory(ep) for ep in builtin + plugins}


def get_default_scheduler_name() -> str:
    """The first registered scheduler: ``"local"`` with torchspec alone."""
    return next(iter(get_scheduler_factories()))


def get_scheduler_factory(name: str) -> SchedulerFactory:
    """The factory registered as ``name``.

    Raises :class:`~torchspec.specs.UnknownSchedulerException` listing the
    registered names, with a did-you-mean for a near miss.
    """
    return lookup(name, get_scheduler_factories())


def get_schedulers(session_name: str, **scheduler_params: object) -> Dict[str, Scheduler]:
    """One scheduler of every registered kind, each built with the same parameters."""
    return {name: factory(session_name, **scheduler_params) for name, factory in get_scheduler_factories().items()}


__all__ = [
    "DEFAULT_SCHEDULER",
    "GROUP",
    "DuplicateSchedulerError",
    "SchedulerFactory",
    "get_default_scheduler_name",
    "get_scheduler_factories",
    "get_scheduler_factory",
    "get_schedulers",
    "lookup",
]
