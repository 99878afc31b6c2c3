"""TSM's ``Session``: a named workspace of apps, over torchspec's Runner (so over every scheduler).

``session(name)`` returns a :class:`StandaloneSession`, as TSM's did: it
keeps the apps it ran (or :meth:`~Session.attach`-ed) for as long as the
process lives, and acts on any app by its handle.  ``scheduler="default"``
is the Runner's default scheduler (the config file's ``default_scheduler``,
else ``local``).  Handles are torchspec's (``local://SESSION/APP_ID``), the
session's name in the middle: :meth:`~Session.stop` refuses a handle of
another session (:class:`SessionMismatchException`), the other methods act
on any.
"""

from __future__ import annotations

import abc
import getpass
import os
from datetime import datetime
from typing import Any, Dict, Iterable, List, Optional

from torchspec.runner import Runner
from torchspec.specs import AppDryRunInfo, AppStatus, UnknownAppException, parse_app_handle, runopts
from torchspec.tsm.api import Application, AppNotReRunnableException, Role, RunConfig, SessionMismatchException

#: TSM's name for the scheduler a session runs on when none is named.
DEFAULT = "default"


class Session(abc.ABC):
    """What a TSM session does; :class:`StandaloneSession` is the one :func:`session` returns."""

    def __init__(self, name: str) -> None:
        self._name = name

    def name(self) -> str:
        return self._name

    def run(self, app: Application, scheduler: str = DEFAULT, cfg: Optional[RunConfig] = None) -> str:
        """Run ``app`` on ``scheduler``; its handle.  An attached app cannot run again."""
        if app.is_attached:
            raise AppNotReRunnableException(app)
        return self.schedule(self.dryrun(app, scheduler, cfg))

    @abc.abstractmethod
    def dryrun(self, app: Application, scheduler: str = DEFAULT,
               cfg: Optional[RunConfig] = None) -> AppDryRunInfo:
        """What :meth:`run` would submit, submitting nothing (printable)."""

    @abc.abstractmethod
    def schedule(self, dryrun_info: AppDryRunInfo) -> str:
        """Submit what :meth:`dryrun` returned (its request may have been edited); the handle."""

    @abc.abstractmethod
    def scheduler_backends(self) -> List[str]:
        """Every scheduler this session can run on, ``default`` among them."""

    @abc.abstractmethod
    def run_opts(self) -> Dict[str, runopts]:
        """Each scheduler's run options."""

    @abc.abstractmethod
    def status(self, app_handle: str) -> Optional[AppStatus]:
        """The app's status, None when the scheduler no longer knows it."""

    @abc.abstractmethod
    def wait(self, app_handle: str) -> Optional[AppStatus]:
        """Block until the app ends; its last status, or None when it no longer exists."""

    @abc.abstractmethod
    def list(self) -> Dict[str, Application]:
        """The apps this session ran or attached, by handle."""

    @abc.abstractmethod
    def stop(self, app_handle: str) -> None:
        """Cancel the app (it must be this session's); nothing if it has ended or does not exist."""

    @abc.abstractmethod
    def describe(self, app_handle: str) -> Optional[Application]:
        """The app as this session ran it, else as far as its scheduler can rebuild it; None if unknown."""

    @abc.abstractmethod
    def log_lines(self, app_handle: str, role_name: str, k: int = 0, regex: Optional[str] = None,
                  since: Optional[datetime] = None, until: Optional[datetime] = None) -> Iterable[str]:
        """Replica ``k``'s log lines (a node, not a rank): for people, not for parsing results out of."""

    @abc.abstractmethod
    def attach(self, app_handle: str) -> str:
        """Adopt an app another session ran (rebuilt from its scheduler); its handle."""


class StandaloneSession(Session):
    """A session that lives as long as its process: its apps are kept in memory."""

    def __init__(self, name: str, runner: Optional[Runner] = None, **scheduler_params: Any) -> None:
        super().__init__(name)
        if runner is None:
            from torchspec.runner import get_runner

            runner = get_runner(name, **scheduler_params)
        self._runner = runner
        self._apps: Dict[str, Application] = {}

    def _backend(self, scheduler: str) -> str:
        return self._runner.default_scheduler() if scheduler == DEFAULT else scheduler

    def dryrun(self, app: Application, scheduler: str = DEFAULT,
               cfg: Optional[RunConfig] = None) -> AppDryRunInfo:
        backend = self._backend(scheduler)
        info = self._runner.dryrun(app.to_appdef(backend), backend, cfg=dict(cfg.cfgs) if cfg else None)
        info._tsm_app = app  # type: ignore[attr-defined] - what schedule() records under the handle
        return info

    def schedule(self, dryrun_info: AppDryRunInfo) -> str:
        handle = self._runner.schedule(dryrun_info)
        app = getattr(dryrun_info, "_tsm_app", None)
        if app is not None:
            self._apps[handle] = app
        return handle

    def scheduler_backends(self) -> List[str]:
        return [DEFAULT, *self._runner.scheduler_backends()]

    def run_opts(self) -> Dict[str, runopts]:
        backends = self._runner.scheduler_backends()
        opts = {name: self._runner.scheduler_run_opts(name) for name in backends}
        return {DEFAULT: opts[self._runner.default_scheduler()], **opts}

    def status(self, app_handle: str) -> Optional[AppStatus]:
        status = self._runner.status(app_handle)
        if status is None:
            self._apps.pop(app_handle, None)  # gone from its scheduler: gone from the session
        return status

    def wait(self, app_handle: str) -> Optional[AppStatus]:
        last = self._runner.wait(app_handle)
        # the Runner calls an app that vanished mid-wait CANCELLED; TSM's answer is None
        return None if last is None or self.status(app_handle) is None else last

    def list(self) -> Dict[str, Application]:
        for handle in list(self._apps):
            self.status(handle)
        return dict(self._apps)

    def stop(self, app_handle: str) -> None:
        if parse_app_handle(app_handle).session_name != self._name:
            raise SessionMismatchException(app_handle, self._name)
        status = self.status(app_handle)
        if status is not None and not status.is_terminal():
            self._runner.cancel(app_handle)

    def describe(self, app_handle: str) -> Optional[Application]:
        app = self._apps.get(app_handle)
        if app is not None:
            return app
        appdef = self._runner.describe(app_handle)
        if appdef is None:
            return None
        return Application(name=parse_app_handle(app_handle).app_id,
                           roles=[Role.from_spec(role) for role in appdef.roles])

    def log_lines(self, app_handle: str, role_name: str, k: int = 0, regex: Optional[str] = None,
                  since: Optional[datetime] = None, until: Optional[datetime] = None) -> Iterable[str]:
        if self.status(app_handle) is None:
            raise UnknownAppException(app_handle)
        return self._runner.log_lines(app_handle, role_name, k, regex, since, until)

    def attach(self, app_handle: str) -> str:
        app = self.describe(app_handle)
        if app is None:
            raise UnknownAppException(app_handle)
        app.is_attached = True
        self._apps[app_handle] = app
        return app_handle

    def close(self) -> None:
        self._runner.close()

    def __enter__(self) -> "StandaloneSession":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def session(name: Optional[str] = None, backend: str = "standalone", **scheduler_params: Any) -> Session:
    """A new session named ``name`` (default: ``tsm_USER_PID``); ``backend`` must be ``standalone``, the only
    kind TSM shipped."""
    if backend != "standalone":
        raise ValueError(f"Unsupported session backend: {backend}. Supported values: standalone")
    return StandaloneSession(name or f"tsm_{getpass.getuser()}_{os.getpid()}", **scheduler_params)

