"""The Runner: submit AppDefs (or spec files) to schedulers and act on the apps, as ``torchx.runner.api``.

A :class:`Runner` holds scheduler *factories* and builds a scheduler the first
time a backend is used, so a session that only talks to ``local`` never
imports the Kubernetes SDK.  Every method that takes an app handle
(``scheduler://session/app_id``) finds the backend from the handle itself,
so handles printed by one process work in another.

What the runner adds on top of the schedulers, as TorchX's does:

- validation that does not depend on the backend (roles, entrypoint, replicas);
- ``TORCHSPEC_JOB_ID`` in every role's environment: the app's handle, with
  ``${app_id}`` left for the scheduler to fill in at schedule time;
- scheduler constructor parameters from ``TORCHSPEC_*`` environment variables;
- settings from the config files (:mod:`torchspec.config`) when built with a
  ``config``: run option defaults per scheduler and param defaults per component.
"""

from __future__ import annotations

import os
import time
from datetime import datetime
from types import TracebackType
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Dict,
    Iterable,
    Iterator,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Type,
)

from torchspec.errors import OUTAGE_S, UnreachableError
from torchspec.runner import provenance
from torchspec.runner.components import ComponentArgs, component_help, load_component, parse_component_args
from torchspec.runner.options import GivenOptions, resolve_run_options
from torchspec.runner.provenance import Source
from torchspec.runner.torchx_names import (ENV_TORCHSPEC_JOB_ID, ENV_TORCHSPEC_PARENT_RUN_ID, ENV_TORCHX_JOB_ID,
                                           ENV_TORCHX_PARENT_RUN_ID, configured_trackers, job_env,
                                           scheduler_alias, scheduler_params_from_env, tracker_env)
from torchspec.runner.torchx_names import parent_run_id as parent_run_id_from_env
from torchspec.runner.validation import refusals, validate_app
from torchspec.schedulers.api import Capability
from torchspec.specs import (
    AppDef,
    AppDryRunInfo,
    AppHandle,
    AppState,
    AppStatus,
    CfgVal,
    UnknownAppException,
    UnknownSchedulerException,
    macros,
    make_app_handle,
    parse_app_handle,
    runopts,
)

if TYPE_CHECKING:
    from torchspec.config import Config
    from torchspec.schedulers import SchedulerFactory
    from torchspec.schedulers.api import AppEvent, ListAppResponse, Scheduler, Stream
    from torchspec.workspace import PkgInfo, WorkspaceBuilder

#: The session name of :func:`get_runner` when none is given (TorchX uses "torchx").
DEFAULT_SESSION_NAME = "torchspec"

class Runner:
    """Runs AppDefs and spec files on schedulers, and answers for the apps it (or anyone) started.

    Args:
        name: the session name, part of every app handle this runner makes.
        scheduler_factories: backend name -> ``factory(session_name, **scheduler_params)``;
            the first one is the default scheduler unless the config names another.
        component_defaults: component name (or spec path) -> param -> value as ``-p``
            text; used below the caller's component args and above the config files.
        scheduler_params: keyword arguments for every scheduler factory, on top of the
            ones read from ``TORCHSPEC_*`` environment variables.
        config: settings from :func:`torchspec.config.load_config`; None reads no files
            (as TorchX's Runner, which leaves ``.torchxconfig`` to the CLI).
    """

    def __init__(
        self,
        name: str,
        scheduler_factories: Mapping[str, "SchedulerFactory"],
        component_defaults: Optional[Mapping[str, Mapping[str, str]]] = None,
        scheduler_params: Optional[Mapping[str, object]] = None,
        *,
        config: Optional["Config"] = None,
    ) -> None:
        self._name = name
        self._scheduler_factories: Dict[str, SchedulerFactory] = dict(scheduler_factories)
        self._scheduler_params: Dict[str, Any] = {
            **self._get_scheduler_params_from_env(),
            **(scheduler_params or {}),
        }
        self._scheduler_instances: Dict[str, Scheduler[Any]] = {}
        self._apps: Dict[AppHandle, AppDef] = {}
        self._component_defaults: Dict[str, Dict[str, str]] = {
            k: dict(v) for k, v in (component_defaults or {}).items()
        }
        self._config = config

    @property
    def config(self) -> Optional["Config"]:
        """The settings this runner was built with (None: it reads no config files)."""
        return self._config

    @staticmethod
    def _get_scheduler_params_from_env() -> Dict[str, str]:
        """``TORCHSPEC_FOO_BAR=x`` (or TorchX's ``TORCHX_FOO_BAR=x``) -> ``{"foo_bar": "x"}``
        (:func:`~torchspec.runner.torchx_names.scheduler_params_from_env`)."""
        return scheduler_params_from_env()

    # ------------------------------------------------------------ lifetime

    def __enter__(self) -> "Runner":
        return self

    def __exit__(
        self,
        type: Optional[Type[BaseException]],
        value: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> bool:
        # False: an exception raised inside the ``with`` block propagates.
        self.close()
        return False

    def close(self) -> None:
        """Close every scheduler this runner created; safe to call more than once.

        The runner must not be used afterwards.  Apps keep running: closing a
        scheduler frees the client, it does not cancel what it started.
        """
        for scheduler in self._scheduler_instances.values():
            scheduler.close()
        self._scheduler_instances.clear()

    def name(self) -> str:
        return self._name

    # ------------------------------------------------------------ submitting

    def run_component(
        self,
        component: str,
        component_args: ComponentArgs,
        scheduler: Optional[str],
        cfg: Optional[Mapping[str, CfgVal]] = None,
        workspace: Optional[str] = None,
        parent_run_id: Optional[str] = None,
        *,
        params_file: Optional[str] = None,
        app_name: Optional[str] = None,
        template_paths: Sequence[str] = (),
    ) -> AppHandle:
        """Load a component (a spec file, or a built-in such as ``dist.ddp``), then run it.

        ``component_args`` are the component's params: a mapping of name to
        value, or a list of ``name=value`` strings (TorchX's ``--name value``
        and ``-- trailing args`` forms work too; trailing args become the
        ``args`` param).  ``scheduler`` None means :meth:`default_scheduler`.
        ``app_name`` picks one app of a spec file that holds several; ``template_paths`` are further folders
        its templates may import from (default: the config's ``[lint] template_paths``).

        Raises:
            ComponentNotFoundError: ``component`` is neither a file nor a built-in.
            SpecError: the spec or its params are invalid (every problem at once).
        """
        dryrun_info = self.dryrun_component(component, component_args, scheduler, cfg=cfg, workspace=workspace,
                                            parent_run_id=parent_run_id, params_file=params_file,
                                            app_name=app_name, template_paths=template_paths)
        return self.schedule(dryrun_info)

    def dryrun_component(
        self,
        component: str,
        component_args: ComponentArgs,
        scheduler: Optional[str],
        cfg: Optional[Mapping[str, CfgVal]] = None,
        workspace: Optional[str] = None,
        parent_run_id: Optional[str] = None,
        *,
        params_file: Optional[str] = None,
        app_name: Optional[str] = None,
        template_paths: Sequence[str] = (),
    ) -> AppDryRunInfo[Any]:
        """What :meth:`run_component` would submit, without submitting it.

        Params come from ``component_args``, then ``params_file``, then the
        component defaults (this runner's, then the config files'), then the
        spec's own defaults.
        """
        app = self.load_component(component, component_args, params_file=params_file, app_name=app_name,
                                  template_paths=template_paths)
        source = Source(component, parse_component_args(component_args), params_file)
        return self.dryrun(app, scheduler, cfg=cfg, workspace=workspace, parent_run_id=parent_run_id, source=source)

    def load_component(
        self,
        component: str,
        component_args: ComponentArgs = None,
        *,
        params_file: Optional[str] = None,
        app_name: Optional[str] = None,
        template_paths: Sequence[str] = (),
    ) -> AppDef:
        """The AppDef a component renders to with these args and the configured defaults
        (the one named ``app_name`` of a file that holds several): a spec file, a Python component
        (``FILE.py:FUNCTION``), an installed package's component, or a built-in, in that order."""
        return load_component(component, component_args, self._config, self._component_defaults,
                              params_file=params_file, app_name=app_name, template_paths=tuple(template_paths))

    def default_component(self) -> Optional[str]:
        """The component the config names for a run that names none (``.torchxconfig``'s ``[cli:run]
        component``, ``[cli] default_component``); None where it names none."""
        from torchspec.config import default_component

        return default_component(self._config) if self._config is not None else None

    def component_help(self, component: str) -> Optional[str]:
        """A Python component's own help (its arguments, from its signature and docstring, with the
        configured defaults), as ``torchspec submit FILE.py:FUNCTION --help`` prints it; None for a spec."""
        return component_help(component, self._config, self._component_defaults)

    def run(
        self,
        app: AppDef,
        scheduler: Optional[str],
        cfg: Optional[Mapping[str, CfgVal]] = None,
        workspace: Optional[str] = None,
        parent_run_id: Optional[str] = None,
    ) -> AppHandle:
        """Dry-run then schedule ``app``; returns its handle.

        Subclasses customise :meth:`schedule` rather than this method.
        """
        dryrun_info = self.dryrun(app, scheduler, cfg=cfg, workspace=workspace, parent_run_id=parent_run_id,
                                  source=Source())
        return self.schedule(dryrun_info)

    def schedule(self, dryrun_info: AppDryRunInfo[Any]) -> AppHandle:
        """Submit the request of a dry run, possibly edited by the caller; returns the app's handle.

        Editing ``dryrun_info.request`` reaches scheduler features the spec
        cannot express; use it sparingly, as it ties the caller to one backend's
        request format.
        """
        scheduler = dryrun_info._scheduler
        app = dryrun_info._app
        if scheduler is None or app is None:
            raise ValueError("dryrun_info did not come from Runner.dryrun (it names no scheduler or app)")
        sched = self._scheduler(scheduler)
        with refusals(scheduler):
            app_id = sched.schedule(dryrun_info)
        app_handle = make_app_handle(scheduler, self._name, app_id)
        provenance.save(app_handle, getattr(dryrun_info, "_provenance", None))
        self._apps[app_handle] = app
        return app_handle

    def dryrun(
        self,
        app: AppDef,
        scheduler: Optional[str],
        cfg: Optional[Mapping[str, CfgVal]] = None,
        workspace: Optional[str] = None,
        parent_run_id: Optional[str] = None,
        *,
        source: Optional[Source] = None,
    ) -> AppDryRunInfo[Any]:
        """The request ``app`` would be submitted as; ``print()`` it to see it.

        With ``source`` (where the app came from: what :meth:`run`, :meth:`run_component` and
        :meth:`dryrun_component` give) the provenance is recorded (:mod:`torchspec.runner.provenance`): its
        summary goes with the app as a label, and :meth:`schedule` keeps the whole record.

        Checks the app (:class:`~torchspec.errors.AppRefusedError`, a ValueError, with TorchX's
        messages), adds the job-id
        environment variables to every role (in place, as TorchX does), fills
        ``cfg`` in from the config file's ``[scheduler.NAME]`` table (``cfg``
        wins; a ``None`` value counts as not given) and the scheduler's defaults, builds the workspace into role 0's
        image where the scheduler supports it, and lets the scheduler validate
        the app before it builds the request.
        """
        scheduler, implied = scheduler_alias(scheduler or self.default_scheduler(), self._scheduler_factories)
        validate_app(app)
        sched = self._scheduler(scheduler)
        resolved_cfg = resolve_run_options(scheduler, sched.run_opts(), cfg, self._config, strict=False,
                                           implied=implied)
        recorded = provenance.record(app, source, scheduler, resolved_cfg) if source is not None else None
        if recorded is not None:
            app.metadata[provenance.LABEL] = provenance.label(recorded)
        parent = parent_run_id_from_env(parent_run_id)
        trackers = tracker_env(configured_trackers(self._config))
        for role in app.roles:
            # ${app_id} is a macro: the scheduler substitutes it once it has assigned the id.
            role.env.update(job_env(make_app_handle(scheduler, self._name, macros.app_id), parent))
            role.env.update(trackers)
        with refusals(scheduler):
            if workspace:
                self._build_workspace(sched, scheduler, app, workspace, resolved_cfg)
            sched._validate(app, scheduler)
            dryrun_info = sched.submit_dryrun(app, resolved_cfg)
        dryrun_info._scheduler = scheduler
        dryrun_info._provenance = recorded  # type: ignore[attr-defined]
        return dryrun_info

    @staticmethod
    def _build_workspace(sched: "Scheduler[Any]", scheduler: str, app: AppDef, workspace: str,
                         cfg: Mapping[str, CfgVal]) -> None:
        """Build role 0's image with the workspace on top, where the scheduler can (TorchX's WorkspaceMixin)."""
        import logging  # only here: it costs every command's start-up

        logger = logging.getLogger(__name__)
        build = getattr(sched, "build_workspace_and_update_role", None)
        if build is None:
            logger.info("scheduler %s does not build workspaces; ignoring workspace %s", scheduler, workspace)
            return
        role = app.roles[0]
        old_image = role.image
        build(role, workspace, cfg)
        if role.image != old_image:
            logger.info("built image %s from %s and workspace %s for role[0]=%s",
                        role.image, old_image, workspace, role.name)

    # ------------------------------------------------------------ schedulers

    def default_scheduler(self) -> str:
        """The config file's ``default_scheduler``, else the first registered scheduler."""
        if self._config is not None:
            from torchspec.config import default_scheduler

            configured = default_scheduler(self._config)
            if configured:
                return configured
        if not self._scheduler_factories:
            raise UnknownSchedulerException("<default>", [])
        return next(iter(self._scheduler_factories))

    def scheduler_run_opts(self, scheduler: str) -> runopts:
        """The run options (cfg keys) ``scheduler`` accepts."""
        return self._scheduler(scheduler).run_opts()

    def scheduler_keeps_labels(self, scheduler: str) -> bool:
        """Whether ``scheduler`` stores each app's labels (its metadata) and lists them (Capability.LABELS)."""
        return self.scheduler_supports(scheduler, Capability.LABELS)

    def scheduler_supports(self, scheduler: str, capability: "Capability") -> bool:
        """Whether ``scheduler`` has ``capability`` (``Scheduler.supports``)."""
        return bool(self._scheduler(scheduler).supports(capability))

    def require(self, scheduler_or_handle: str, capability: "Capability", hint: Optional[str] = None) -> None:
        """UnsupportedError (exit 2) unless the scheduler (by name, or of a handle) has ``capability``."""
        name = parse_app_handle(scheduler_or_handle)[0] if "://" in scheduler_or_handle else scheduler_or_handle
        self._scheduler(name).require(capability, hint)

    def check_log_request(self, app_handle: AppHandle, *, should_tail: bool = False, since: Optional[datetime] = None,
                          until: Optional[datetime] = None, streams: Optional["Stream"] = None) -> None:
        """Refuse a :meth:`log_lines` request the app's scheduler cannot honour in full (``Scheduler.
        check_log_request``); :meth:`log_lines` passes every request on, as TorchX's does."""
        self._scheduler_app_id(app_handle)[0].check_log_request(should_tail, since, until, streams)

    def run_options(self, scheduler: str, given: GivenOptions = None, *, strict: bool = True) -> Dict[str, CfgVal]:
        """``scheduler``'s cfg from ``given`` (``-c`` text or a mapping) over the config file's and its defaults.

        Strict by default (unknown keys are errors), as on a command line; see
        :func:`torchspec.runner.options.resolve_run_options`.
        """
        scheduler, implied = scheduler_alias(scheduler, self._scheduler_factories)
        return resolve_run_options(scheduler, self.scheduler_run_opts(scheduler), given, self._config, strict=strict,
                                   implied=implied)

    def check_scheduler(self, scheduler: Optional[str]) -> str:
        """``scheduler`` (None: the default one) once it is known to be registered.

        Raises :class:`~torchspec.specs.UnknownSchedulerException` with a did-you-mean otherwise.
        """
        from torchspec.schedulers import lookup

        name = scheduler or self.default_scheduler()
        lookup(scheduler_alias(name, self._scheduler_factories)[0], self._scheduler_factories)
        return name

    def build_standalone_workspace(self, workspace_builder: "WorkspaceBuilder[Any, Any]",
                                   sync: bool = True) -> "PkgInfo[Any]":
        """Build a workspace apart from any scheduler (TorchX's API): ``workspace_builder.build_workspace``;
        with ``sync`` False the builder may finish in the background, through the PkgInfo's lazy overrides."""
        return workspace_builder.build_workspace(sync)

    def scheduler_backends(self) -> List[str]:
        """Every scheduler name this runner can use."""
        return list(self._scheduler_factories.keys())

    # ------------------------------------------------------------ the apps

    def status(self, app_handle: AppHandle) -> Optional[AppStatus]:
        """The app's status, or None if the scheduler does not know it (any more)."""
        scheduler, _, app_id = self._scheduler_app_id(app_handle)
        desc = scheduler.describe(app_id)
        if not desc:
            self._apps.pop(app_handle, None)
            return None
        return AppStatus(
            desc.state,
            desc.num_restarts,
            msg=desc.msg,
            structured_error_msg=desc.structured_error_msg,
            ui_url=desc.ui_url,
            roles=desc.roles_statuses,
        )

    def wait(
        self,
        app_handle: AppHandle,
        wait_interval: float = 10,
        *,
        timeout: Optional[float] = None,
        on_change: Optional[Callable[[AppStatus], None]] = None,
    ) -> Optional[AppStatus]:
        """Block until the app is terminal (or ``timeout`` seconds pass) and return its last status.

        None if the app does not exist when the wait begins.  An app that
        vanishes while being waited on was removed on purpose (``cancel`` on
        docker and kubernetes removes what it stopped, ``delete`` removes any
        app): waiting on would never end, so it counts as CANCELLED, with a
        message saying why.  When ``timeout`` passes first, the status returned
        is not terminal.

        Between two looks at the status it waits for the scheduler to report a
        change (``Scheduler.wait_for_change``: the local scheduler is woken by
        its state file, so a wait ends when the app does), at most on a
        growing schedule (see :func:`poll_delays`) from a few tens of
        milliseconds up to ``wait_interval`` seconds, so a backend that cannot
        tell is still polled often at first and gently later.  ``on_change`` is called with the first status and with
        every status that differs from the one before.
        """
        status = self.status(app_handle)
        if status is None:
            return None
        if on_change is not None:
            on_change(status)
        deadline = None if timeout is None else time.monotonic() + timeout
        delays = poll_delays(wait_interval)
        scheduler, _, app_id = self._scheduler_app_id(app_handle)
        outage: Optional[float] = None  # since when the backend has not answered
        while not status.is_terminal():
            if deadline is not None and time.monotonic() >= deadline:
                break
            pause = next(delays)
            try:
                scheduler.wait_for_change(app_id, pause if deadline is None else
                                          min(pause, deadline - time.monotonic()))
                previous, status = status, self._status_or_cancelled(app_handle, status)
                outage = None
            except UnreachableError:  # a restarted API server, say: ride it out for a while
                outage = outage or time.monotonic()
                if time.monotonic() - outage > OUTAGE_S:
                    raise
                time.sleep(min(1.0, pause))
                continue
            if on_change is not None and status != previous:
                on_change(status)
        return status

    def _status_or_cancelled(self, app_handle: AppHandle, previous: AppStatus) -> AppStatus:
        """The app's status; CANCELLED (with why) when the app vanished since ``previous``."""
        status = self.status(app_handle)
        if status is not None:
            return status
        return AppStatus(AppState.CANCELLED, previous.num_restarts,
                         msg="the app no longer exists: it was cancelled or deleted, and the scheduler removed it")

    def resolve_handle(self, text: str) -> AppHandle:
        """The handle ``text`` means: itself, or for a bare app id (``hello-k3x9q2``) the handle of the one app
        with that id known on this machine, asking no backend (see :mod:`torchspec.runner.handles`)."""
        from torchspec.runner.handles import resolve_handle

        return resolve_handle(text, self._name, list(self._apps), self._scheduler, self.scheduler_backends())

    def require_status(self, app_handle: AppHandle) -> AppStatus:
        """The app's status; :class:`~torchspec.specs.UnknownAppException` when the scheduler does not know it.

        For callers to whom an unknown app is an error rather than an answer
        (every CLI command that acts on one).
        """
        status = self.status(app_handle)
        if status is None:
            raise self._unknown(app_handle)
        return status

    def _unknown(self, app_handle: AppHandle) -> UnknownAppException:
        """The error for an app the scheduler does not know, with the scheduler's word on how that happens."""
        scheduler, _, _ = self._scheduler_app_id(app_handle)
        return UnknownAppException(app_handle, getattr(scheduler, "unknown_app_hint", None))

    def cancel(self, app_handle: AppHandle) -> None:
        """Ask the scheduler to stop the app; a no-op for an unknown or finished app.

        Returns once the request is made: the app reaches CANCELLED (or FAILED)
        later, which :meth:`wait` observes.
        """
        scheduler, _, app_id = self._scheduler_app_id(app_handle)
        status = self.status(app_handle)
        if status is not None and not status.is_terminal():
            scheduler.cancel(app_id)

    def delete(self, app_handle: AppHandle) -> None:
        """Stop the app if it runs and remove everything the scheduler keeps of it, logs included.

        Raises ``NotImplementedError`` for schedulers that cannot remove apps.
        """
        scheduler, _, app_id = self._scheduler_app_id(app_handle)
        scheduler.delete(app_id)
        self._apps.pop(app_handle, None)

    def events(self, app_handle: AppHandle) -> List["AppEvent"]:
        """What the app's engine recorded about it, oldest first (``Scheduler.events``); UnsupportedError where
        its scheduler cannot say, UnknownAppException for an app it does not know."""
        scheduler, _, app_id = self._scheduler_app_id(app_handle)
        scheduler.require(Capability.EVENTS)
        self.require_status(app_handle)
        return scheduler.events(app_id)

    def stop(self, app_handle: AppHandle) -> None:
        """Same as :meth:`cancel`, kept for TorchX code (which deprecates it)."""
        import warnings

        warnings.warn("This method will be deprecated in the future, please use `cancel` instead.",
                      PendingDeprecationWarning, stacklevel=2)
        self.cancel(app_handle)

    def describe(self, app_handle: AppHandle) -> Optional[AppDef]:
        """The app as submitted when this runner submitted it, else as far as the scheduler can rebuild it.

        None if the app does not exist or the scheduler cannot describe it.
        """
        scheduler, _, app_id = self._scheduler_app_id(app_handle)
        app = self._apps.get(app_handle)
        if not app:
            desc = scheduler.describe(app_id)
            if desc:
                app = AppDef(name=getattr(desc, "name", None) or app_id, roles=desc.roles, metadata=dict(desc.labels))
        return app

    def log_lines(
        self,
        app_handle: AppHandle,
        role_name: str,
        k: int = 0,
        regex: Optional[str] = None,
        since: Optional[datetime] = None,
        until: Optional[datetime] = None,
        should_tail: bool = False,
        streams: Optional["Stream"] = None,
    ) -> Iterable[str]:
        """The log lines of replica ``k`` (a node, not a rank) of ``role_name``, newlines kept.

        What is returned, and for how long logs are kept, is up to the scheduler
        (see ``Scheduler.log_iter``): show logs to people, do not parse results
        out of them.

        Raises:
            UnknownAppException: the scheduler does not know the app.
        """
        scheduler, _, app_id = self._scheduler_app_id(app_handle)
        if not self.status(app_handle):
            raise self._unknown(app_handle)
        return scheduler.log_iter(app_id, role_name, k, regex, since, until, should_tail, streams=streams)

    def log_blocks(self, app_handle: AppHandle, role_name: str, k: int, prefix: bytes,
                   streams: Optional["Stream"] = None) -> Optional[Iterable[bytes]]:
        """What :meth:`log_lines` gives without a filter or tail, each line after ``prefix``, as UTF-8 blocks;
        None where the scheduler has no such fast path (``log_blocks``, torchspec's own; local has one)."""
        scheduler, _, app_id = self._scheduler_app_id(app_handle)
        blocks = getattr(scheduler, "log_blocks", None)
        if blocks is None:
            return None
        if not self.status(app_handle):
            raise self._unknown(app_handle)
        return blocks(app_id, role_name, k, streams, prefix)  # type: ignore[no-any-return]

    def list(self, scheduler: str, cfg: Optional[Mapping[str, CfgVal]] = None) -> List["ListAppResponse"]:
        """The apps ``scheduler`` knows of, each with its handle filled in for this session.

        With ``cfg`` (run options, resolved as for :meth:`dryrun`), the apps where a submission with them
        goes (``Scheduler.list_where``: the namespace ``-c namespace=`` names on Kubernetes).
        """
        sched = self._scheduler(scheduler)
        if cfg is None:
            apps = sched.list()
        else:
            apps = sched.list_where(resolve_run_options(scheduler, sched.run_opts(), cfg, self._config, strict=False))
        for app in apps:
            app.app_handle = make_app_handle(scheduler, self._name, app.app_id)
            app.labels, app.provenance = provenance.split_labels(app.labels)  # the user's labels, and where from
        return apps

    def provenance(self, app_handle: AppHandle) -> Optional[Dict[str, Any]]:
        """Where the app came from (:mod:`torchspec.runner.provenance`): the record kept when this machine
        submitted it, else the summary its labels carry (``{"hash", "file", "commit", ...}``), with ``images``:
        what each role runs, as the engine resolved it (container backends); None: neither."""
        scheduler, _, app_id = self._scheduler_app_id(app_handle)
        desc = scheduler.describe(app_id)
        found = provenance.load(app_handle) or (provenance.split_labels(desc.labels)[1] if desc else None)
        if found is not None and desc is not None:
            found["images"] = provenance.images(desc.metadata)
        return found

    # ------------------------------------------------------------ internals

    def _scheduler(self, scheduler: str) -> "Scheduler[Any]":
        """The scheduler for a backend, created on first use with this runner's parameters.

        Raises:
            UnknownSchedulerException: no factory is registered under that name
                (the message lists the names and guesses the one meant).
        """
        scheduler = scheduler_alias(scheduler, self._scheduler_factories)[0]  # TorchX's local_cwd://... handles
        sched = self._scheduler_instances.get(scheduler)
        if sched is None:
            from torchspec.schedulers import lookup

            factory = lookup(scheduler, self._scheduler_factories)
            sched = factory(self._name, **self._scheduler_params)
            self._scheduler_instances[scheduler] = sched
        return sched

    def _scheduler_app_id(self, app_handle: AppHandle) -> Tuple["Scheduler[Any]", str, str]:
        """The scheduler, backend name and app id a handle names (MalformedAppHandleException if it is none)."""
        backend, _, app_id = parse_app_handle(app_handle)
        return self._scheduler(backend), backend, app_id

    def __repr__(self) -> str:
        return f"Runner(name={self._name}, schedulers={self._scheduler_factories}, apps={self._apps})"


def get_runner(
    name: Optional[str] = None,
    component_defaults: Optional[Mapping[str, Mapping[str, str]]] = None,
    **scheduler_params: Any,
) -> Runner:
    """A Runner over every registered scheduler, with the config files of the working folder applied.

    Usage::

        with get_runner() as runner:
            handle = runner.run_component("utils.echo", {"msg": "hi"}, "local")
            print(runner.wait(handle, wait_interval=1))

    Args:
        name: the session name (default ``torchspec``), part of every app handle.
        component_defaults: param defaults per component, above the config files'.
        scheduler_params: keyword arguments for every scheduler factory.
    """
    from torchspec.config import load_config
    from torchspec.schedulers import get_scheduler_factories

    return Runner(name or DEFAULT_SESSION_NAME, get_scheduler_factories(), component_defaults,
                  scheduler_params=scheduler_params, config=load_config())


# ---------------------------------------------------------------- helpers


def poll_delays(longest: float, first: float = 0.05, factor: float = 1.5) -> Iterator[float]:
    """Pauses between status polls: ``first`` seconds, growing by ``factor`` up to ``longest``."""
    delay = min(first, longest)
    while True:
        yield delay
        delay = min(delay * factor, longest)


__all__ = [
    "DEFAULT_SESSION_NAME",
    "ENV_TORCHSPEC_JOB_ID",
    "ENV_TORCHSPEC_PARENT_RUN_ID",
    "ENV_TORCHX_JOB_ID",
    "ENV_TORCHX_PARENT_RUN_ID",
    "ComponentArgs",
    "Runner",
    "get_runner",
    "parse_component_args",
    "poll_delays",
]
