"""App handles: ``scheduler://session/app_id`` names an app on a scheduler."""

from __future__ import annotations

import re
from typing import NamedTuple

#: ``{scheduler_backend}://{session_name}/{app_id}``
AppHandle = str

_HANDLE = re.compile(r"(?P<scheduler_backend>.+)://(?P<session_name>.+)/(?P<app_id>.+)")


class MalformedAppHandleException(Exception):
    def __init__(self, app_handle: str) -> None:
        super().__init__(f"{app_handle} is not of the form: <scheduler_backend>://<session_name>/<app_id>")


class UnknownSchedulerException(Exception):
    def __init__(self, scheduler_backend: str) -> None:
        super().__init__(
            f"Scheduler backend: {scheduler_backend} does not exist."
            f" Use session.scheduler_backends() to see all supported schedulers"
        )


class UnknownAppException(Exception):
    """The app does not exist, or this session does not own it."""

    def __init__(self, app_handle: AppHandle) -> None:
        super().__init__(
            f"Unknown app = {app_handle}. Did you forget to call session.run()?"
            f" Otherwise, the app may have already finished and purged by the scheduler"
        )


class ParsedAppHandle(NamedTuple):
    scheduler_backend: str
    session_name: str
    app_id: str


def parse_app_handle(app_handle: AppHandle) -> ParsedAppHandle:
    """Split a handle into ``(scheduler_backend, session_name, app_id)``."""
    match = _HANDLE.match(app_handle)
    if not match:
        raise MalformedAppHandleException(app_handle)
    gd = match.groupdict()
    return ParsedAppHandle(gd["scheduler_backend"], gd["session_name"], gd["app_id"])


def make_app_handle(scheduler_backend: str, session_name: str, app_id: str) -> AppHandle:
    return f"{scheduler_backend}://{session_name}/{app_id}"
