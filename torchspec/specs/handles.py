"""App handles: the ``{scheduler}://{session_name}/{app_id}`` strings that name a submitted app.

A handle is kept as a plain ``str`` so it can be printed, pasted on a command
line and stored anywhere; :func:`parse_app_handle` is the one place that knows
its shape.
"""

from __future__ import annotations

import re
from typing import NamedTuple, Optional, Pattern, Sequence

from torchspec.errors import UsageError, did_you_mean, did_you_mean_hint

#: ``{scheduler_backend}://{session_name}/{app_id}``; the session name may be empty.
AppHandle = str

# TorchX does not restrict the characters of session names or app ids, so the
# pattern only anchors on the "://" and the last "/"; the session may be empty
# ("local:///app") but must be present as a path segment.
_APP_HANDLE_RE: Pattern[str] = re.compile(r"(?P<scheduler_backend>.+)://(?P<session_name>.*)/(?P<app_id>.+)")

# What no backend can take in a name, and a file system would read as a path: control characters
# (NUL ends a C string), and app ids that are the folder itself or its parent.
_CONTROL_RE: Pattern[str] = re.compile(r"[\x00-\x1f\x7f]")
_DOT_IDS = frozenset({".", ".."})


#: How to write a handle, for every error about one.
HANDLE_HINT = "an app handle looks like local://SESSION/APP_ID, as printed by `torchspec submit`"


class MalformedAppHandleException(UsageError):
    """Raised when a string given as an app handle does not have the handle's shape.

    ``str()`` is TorchX's text (code written for TorchX matches on it); the
    CLI shows ``message`` and ``hint``.
    """

    def __init__(self, app_handle: str, hint: Optional[str] = None, why: Optional[str] = None) -> None:
        """``why`` and ``hint``: what the caller knows better than the handle's shape (a bare app id: whether
        an app here has it, the handles it may mean)."""
        super().__init__(f"malformed app handle {app_handle!r}" + (f": {why}" if why else ""), hint or HANDLE_HINT)
        self.args = (f"{app_handle} is not of the form: <scheduler_backend>://<session_name>/<app_id>",)


class UnknownSchedulerException(UsageError):
    """Raised when a handle or a request names a scheduler backend nobody registered.

    Given the registered names (``known``), it guesses the one meant; every
    scheduler lookup in torchspec raises it this way, so the message and the
    did-you-mean are the same from the CLI, lint and the Python API.
    """

    def __init__(self, scheduler_backend: str, known: Optional[Sequence[str]] = None) -> None:
        self.scheduler_backend = scheduler_backend
        if known is None:
            super().__init__(f"unknown scheduler {scheduler_backend!r}")
            self.args = (f"Scheduler backend: {scheduler_backend} does not exist."
                         f" Use session.scheduler_backends() to see all supported schedulers",)
            return
        names = list(known)
        guess = did_you_mean(scheduler_backend, names)
        hint = did_you_mean_hint(scheduler_backend, names, "registered schedulers")
        if not names:  # even the built-in ones come from torchspec's own entry points: run from a bare source tree
            hint += (": torchspec's own entry points are missing, so it runs from files that were never installed;"
                     " install it (pip install -e . in its checkout, or pip install torchspec-cli)")
        super().__init__(f"unknown scheduler {scheduler_backend!r}", hint)
        mean = f" Did you mean {guess!r}?" if guess else ""
        self.args = (f"Unknown scheduler: {scheduler_backend!r}.{mean}"
                     f" Registered schedulers: {', '.join(names) or 'none'}",)


class UnknownAppException(UsageError):
    """Raised when the app does not exist (any more) or the session does not own it."""

    def __init__(self, app_handle: AppHandle, why: Optional[str] = None) -> None:
        """``why``: how this scheduler comes to forget an app (its ``unknown_app_hint``), for the hint."""
        scheduler = app_handle.split("://", 1)[0] if "://" in app_handle else ""
        super().__init__(f"unknown app {app_handle!r}: the scheduler has no record of it",
                         (f"{why}; " if why else "")
                         + "list the apps with: torchspec list" + (f" -s {scheduler}" if scheduler else ""))
        self.args = (f"Unknown app = {app_handle}. Did you forget to call session.run()?"
                     f" Otherwise, the app may have already finished and purged by the scheduler",)


class ParsedAppHandle(NamedTuple):
    """The three parts of an :data:`AppHandle`; unpacks as ``(scheduler, session, app_id)``."""

    scheduler_backend: str
    session_name: str
    app_id: str


def parse_app_handle(app_handle: AppHandle) -> ParsedAppHandle:
    """Split a handle into its parts; an empty session (``"k8s:///foo"``) gives ``""``.

    Raises :class:`MalformedAppHandleException` when the scheduler, the
    ``/`` before the app id, or the app id itself is missing, when the
    handle holds a control character (NUL, a newline), or when the app id is
    ``.`` or ``..``.
    """
    match = _APP_HANDLE_RE.match(app_handle)
    if match is None or _CONTROL_RE.search(app_handle) or match["app_id"] in _DOT_IDS:
        raise MalformedAppHandleException(app_handle)
    return ParsedAppHandle(match["scheduler_backend"], match["session_name"], match["app_id"])


def make_app_handle(scheduler_backend: str, session_name: str, app_id: str) -> AppHandle:
    """The handle :func:`parse_app_handle` splits back into the same three parts."""
    return f"{scheduler_backend}://{session_name}/{app_id}"


__all__ = [
    "AppHandle",
    "MalformedAppHandleException",
    "ParsedAppHandle",
    "UnknownAppException",
    "UnknownSchedulerException",
    "make_app_handle",
    "parse_app_handle",
]
