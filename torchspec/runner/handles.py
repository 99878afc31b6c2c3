"""A bare app id (``hello-k3x9q2``) where a handle is expected: the handle it means, found on this machine.

People copy the id from ``list`` or a log line more often than the whole
``local://torchspec/hello-k3x9q2``.  Only what this machine knows without
asking any backend counts (the apps this runner submitted, each scheduler's
``app_ids_here``: the ``local`` state folder), so resolving an id never
waits on, or reveals anything to, a remote engine.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List

from torchspec.errors import TorchSpecError, did_you_mean
from torchspec.specs.handles import (
    HANDLE_HINT,
    AppHandle,
    MalformedAppHandleException,
    make_app_handle,
    parse_app_handle,
)

if TYPE_CHECKING:
    from torchspec.schedulers.api import Scheduler

#: the runner's scheduler for a backend name, created on first use
SchedulerOf = Callable[[str], "Scheduler[Any]"]


def resolve_handle(text: str, session: str, submitted: Iterable[AppHandle], scheduler: SchedulerOf,
                   backends: Iterable[str]) -> AppHandle:
    """``text`` if it is shaped as a handle; else the handle of the one app with that id found here: among
    ``submitted`` (the runner's own), then what each of ``backends`` knows (its handles in ``session``).

    Raises:
        MalformedAppHandleException: no app here has that id (the hint guesses one that is close), or
            several do (the hint lists their handles, to pick one).
    """
    if "://" in text:
        return text  # a malformed handle is reported by whoever parses it, as before
    here = _handles_here(session, submitted, scheduler, backends)
    found = [handle for handle, app_id in here.items() if app_id == text]
    if len(found) == 1:
        return found[0]
    if found:
        raise MalformedAppHandleException(text, f"give the whole handle of one: {', '.join(found)}",
                                          f"{len(found)} apps on this machine have that id")
    guess = did_you_mean(text, here.values())
    near = next((handle for handle, app_id in here.items() if app_id == guess), None)
    raise MalformedAppHandleException(text, f"did you mean {near}?" if near else HANDLE_HINT,
                                      "no app on this machine has that id")


def _handles_here(session: str, submitted: Iterable[AppHandle], scheduler: SchedulerOf,
                  backends: Iterable[str]) -> Dict[AppHandle, str]:
    """Handle -> app id of every app known on this machine (a scheduler whose package cannot be loaded, or
    that cannot be made, knows none)."""
    found: Dict[AppHandle, str] = {handle: parse_app_handle(handle).app_id for handle in submitted}
    for backend in backends:
        try:
            ids: List[str] = scheduler(backend).app_ids_here()
        except (ImportError, TorchSpecError):
            continue
        for app_id in ids:
            found.setdefault(make_app_handle(backend, session, app_id), app_id)
    return found


__all__ = ["resolve_handle"]
