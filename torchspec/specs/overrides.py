"""Lazily computed Role attributes (``Role.overrides``), as TorchX resolves them.

A component may not know a value when it builds the Role (an image that is
still being built, an entrypoint fetched from a service), so it puts a
zero-argument callable or an awaitable in ``Role.overrides[attr]``.  The first
read of ``role.attr`` runs it once, stores the result on the role and leaves a
memo in ``overrides`` that still answers when called, which is what code
reading the raw dict expects.
"""

from __future__ import annotations

import inspect
import threading
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Dict, Optional, TypeVar

if TYPE_CHECKING:
    import asyncio

T = TypeVar("T")

# One re-entrant lock: a producer may read another overridden attribute of the
# same role on the same thread, and concurrent readers must not run a producer twice.
_RESOLVE_LOCK = threading.RLock()


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
    raises leaves ``overrides`` as it was, so a later read retries.
    """
    entry = overrides[name]
    if not isinstance(entry, _Resolved):
        with _RESOLVE_LOCK:
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


__all__ = ["resolve_override"]
