"""Schedulers, mirroring ``torchx.schedulers``: where an app runs and how to ask about it.

Every scheduler, built-in or not, registers a factory in the
``torchspec.schedulers`` entry-point group::

    [project.entry-points."torchspec.schedulers"]
    local = "torchspec.schedulers.local:create_scheduler"

A factory is called as ``factory(session_name, **kwargs)`` and returns a
:class:`~torchspec.schedulers.api.Scheduler`.  Factories are imported only
when called, so a backend whose SDK is missing (or a broken plug-in) costs
nothing until someone asks for it.

The package imports nothing up front: the registry
(:mod:`~torchspec.schedulers.registry`) and the API
(:mod:`~torchspec.schedulers.api`) load on first use of one of their names,
so a process that needs only one backend module (the local supervisor)
does not pay for either.
"""

from __future__ import annotations

from torchspec.schedulers.exports import lazy_exports

_API = ("DescribeAppResponse", "ListAppResponse", "Scheduler", "Stream", "filter_regex", "split_lines")
_REGISTRY = ("DEFAULT_SCHEDULER", "GROUP", "DuplicateSchedulerError", "SchedulerFactory",
             "get_default_scheduler_name", "get_scheduler_factories", "get_scheduler_factory", "get_schedulers",
             "lookup")
__getattr__, __dir__ = lazy_exports(__name__, {**{name: "api" for name in _API},
                                               **{name: "registry" for name in _REGISTRY}})
__all__ = sorted(_API + _REGISTRY)
