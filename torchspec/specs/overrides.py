"""Lazily computed Role attributes (``Role.overrides``), as TorchX resolves them.

A component may not know a value when it builds the Role (an image that is
still being built, an entrypoint fetched from a service), so it puts a
zero-argument callable or an awaitable in ``Role.overrides[attr]``.  The first
read of ``role.attr`` runs it once, stores the result on the role and leaves a
memo in ``overrides`` that still answers when called, which is what code
reading the raw dict expects.

Each ``overrides`` dict carries its own re-entrant lock, stored in the dict
under :data:`_OVERRIDES_LOCK_KEY` the first time one of its producers runs:
roles that share the dict (``macros.Values.apply`` copies do) then share the
lock, so a producer runs once however many threads read concurrently, while
a slow producer of one dict never holds up reads of another.  Values already
resolved are read without taking any lock.
"""

from __future__ import annotations

import inspect
import threading
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Dict, Optional, TypeVar

if TYPE_CHECKING:
    import asyncio

T = TypeVar("T")

#: The reserved ``overrides`` key holding the dict's :class:`_OverridesLock`.  It
#: starts with ``__`` so it can never name a Role attribute that reads go through.
_OVERRIDES_LOCK_KEY = "__overrides_lock__"


class _OverridesLock:
    """The single-flight lock of one ``overrides`` dict.

    Re-entrant, because a producer may read another overridden attribute of
    the same role on the same thread.  It is state, not part of a role's
    value: a deep copy gets a fresh lock (a lock cannot be copied) and any two
    compare equal, so roles that differ only in having resolved something
    are still equal.
    """

    __slots__ = ("lock",)

    def __init__(self) -> None:
        self.lock: Any = threading.RLock()

    def __deepcopy__(self, memo: Dict[int, Any]) -> "_OverridesLock":
        return _OverridesLock()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _OverridesLock)

    def __hash__(self) -> int:
        return hash(_OverridesLock)

    def __repr__(self) -> str:
        return "<overrides lock>"


def _lock_of(overrides: Dict[str, Any]) -> _OverridesLock:
    """The dict's lock, minted on first use; ``setdefault`` is atomic, so racing threads get the same one."""
    holder = overrides.get(_OVERRIDES_LOCK_KEY)
    if isinstance(holder, _OverridesLock):
        return holder
    minted: _OverridesLock = overrides.setdefault(_OVERRIDES_LOCK_KEY, _OverridesLock())
    return minted


def has_overrides(overrides: Dict[str, Any]) -> bool:
    """Whether ``overrides`` holds any attribute at all (its lock alone does not count)."""
    return any(key != _OVERRIDES_LOCK_KEY for key in overrides)


class _Resolved:
    """The memo left in ``overrides`` after a producer ran: callable, and recognisably done."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __call__(self) -> Any:
        return self.value

    def __repr__(self) -> str:
        return f"<resolved override: {self.value!r}>"


async def _await(awaitable: Awaitable[T]) -> T:
    return await awaitable


def _running_loop() -> "Optional[asyncio.AbstractEventLoop]":
    import asyncio

    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _resolve_awaitable(awaitable: Awaitable[T]) -> T:
    """Block until ``awaitable`` is done, from sync code, whether or not a loop runs here.

    A future belongs to the loop that created it, so it is awaited on that loop
    when the loop runs elsewhere; a future of the loop running in this very
    thread cannot be waited for without deadlocking, so that is an error.
    asyncio is imported here, not at module level, to keep ``import torchspec.specs`` light.
    """
    import asyncio
    import concurrent.futures

    running = _running_loop()
    if isinstance(awaitable, asyncio.Future):
        owner = awaitable.get_loop()
        if owner is running:
            raise RuntimeError(
                "cannot resolve an override bound to the event loop currently running in this thread;"
                " await it instead"
            )
        if owner.is_running():
            result: T = asyncio.run_coroutine_threadsafe(_await(awaitable), owner).result()
            return result
    if running is None:
        return asyncio.run(_await(awaitable))
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, _await(awaitable)).result()


def resolve_override(owner: object, name: str, overrides: Dict[str, Any]) -> Any:
    """The value of ``owner.name`` from ``overrides[name]``, computing and storing it on first use.

    Roles may share one ``overrides`` dict (``macros.Values.apply`` copies
    share it), so the memo in the dict, not the owner's own attribute, is the
    value every sharer sees; it is copied onto the owner so that ``vars()``
    and deep copies agree with what attribute reads return.  A producer that
    raises leaves ``overrides`` as it was, so a later read retries.  Only an
    unresolved entry takes the dict's lock.
    """
    entry = overrides[name]
    if not isinstance(entry, _Resolved):
        with _lock_of(overrides).lock:
            entry = overrides[name]
            if not isinstance(entry, _Resolved):
                if inspect.isawaitable(entry):
                    value = _resolve_awaitable(entry)
                else:
                    producer: Callable[[], Any] = entry
                    value = producer()
                entry = _Resolved(value)
                overrides[name] = entry
    if vars(owner).get(name) is not entry.value:
        object.__setattr__(owner, name, entry.value)
    return entry.value


__all__ = ["_OVERRIDES_LOCK_KEY", "_OverridesLock", "has_overrides", "resolve_override"]
