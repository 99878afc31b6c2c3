"""The scheduler interface, as in ``torchx.schedulers.api``.

A scheduler turns an :class:`~torchspec.specs.AppDef` into a request for one
backend (``submit_dryrun``), sends that request (``schedule``) and answers
questions about what it started (``describe``, ``list``, ``log_iter``,
``cancel``).  Dry run and scheduling are separate steps so that a request can
be printed, inspected or tweaked, and tested, without any backend.
"""

from __future__ import annotations

import abc
import re
import time
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import TYPE_CHECKING, Any, ClassVar, Dict, FrozenSet, Generic, Iterable, List, Mapping, Optional, Tuple, TypeVar

from torchspec.errors import AppRefusedError, NotFoundError, UnsupportedError, UsageError
from torchspec.specs import (
    NONE,
    NULL_RESOURCE,
    AppDef,
    AppDryRunInfo,
    AppState,
    ReplicaStatus,
    Role,
    RoleStatus,
    runopts,
)

if TYPE_CHECKING:
    from torchspec.schedulers.app_store import AppStore


class Capability(str, Enum):
    """What a backend can do beyond the interface's minimum, declared in :attr:`Scheduler.capabilities`.

    The runner (and so the CLI) refuses a request that needs a capability the
    scheduler lacks with an :class:`~torchspec.errors.UnsupportedError` naming
    both, instead of the scheduler silently doing less: ``logs -f`` on a
    backend that cannot follow would print what there is and end.
    """

    #: ``log_iter`` at all
    LOGS = "logs"
    #: ``log_iter(should_tail=True)`` follows a replica's output until it can produce no more
    FOLLOW_LOGS = "follow_logs"
    #: ``log_iter`` selects lines by ``since``/``until`` (the backend keeps each line's time)
    LOG_WINDOW = "log_window"
    #: ``log_iter(streams=...)`` keeps stdout and stderr apart
    LOG_STREAMS = "log_streams"
    #: ``delete`` removes an app and what is kept of it, logs included
    DELETE = "delete"
    #: ``build_workspace_and_update_role`` builds a workspace into role 0's image (TorchX's WorkspaceMixin)
    WORKSPACE = "workspace"
    #: ``list`` and ``describe`` give back each app's labels (its ``AppDef.metadata``); ``apply`` needs it
    LABELS = "labels"
    #: a role's ``depends_on`` is kept: it starts after the roles it names finished or run (or, where one
    #: of its modes cannot, the scheduler refuses the app saying why); without it, such an app is refused
    ROLE_ORDER = "role_order"
    #: ``events`` says what the engine recorded about an app (``torchspec events``)
    EVENTS = "events"

    @property
    def doing(self) -> str:
        """What a scheduler without it cannot do, for the error: "the memory scheduler cannot <doing>"."""
        return _DOING[self]


_DOING = {
    Capability.LOGS: "show logs (logs)",
    Capability.FOLLOW_LOGS: "follow logs (logs -f, submit --log)",
    Capability.LOG_WINDOW: "select log lines by time (logs --since/--until)",
    Capability.LOG_STREAMS: "keep stdout and stderr apart (logs --streams)",
    Capability.DELETE: "delete apps (delete)",
    Capability.WORKSPACE: "build a workspace into an image (--workspace)",
    Capability.LABELS: "keep an app's labels (apply, list -l, list --show-labels)",
    Capability.ROLE_ORDER: "start a role after another (depends_on)",
    Capability.EVENTS: "say what the engine recorded about an app (events)",
}


class Stream(str, Enum):
    """Which output of a replica ``log_iter`` reads; a ``str`` so ``"stdout"`` works as well."""

    STDOUT = "stdout"
    STDERR = "stderr"
    COMBINED = "combined"


@dataclass
class DescribeAppResponse:
    """What a scheduler knows about a submitted app, as ``Scheduler.describe`` returns it.

    A no-argument constructor and public fields, as in TorchX, because callers
    fill it in piece by piece.  Free-text errors go in ``msg``, JSON errors in
    ``structured_error_msg``.  Where the scheduler kept the app's roles,
    ``roles`` lets the runner rebuild (and re-run) the AppDef.
    """

    app_id: str = "<NOT_SET>"
    state: AppState = AppState.UNSUBMITTED
    num_restarts: int = -1
    msg: str = NONE
    structured_error_msg: str = NONE
    ui_url: Optional[str] = None
    roles_statuses: List[RoleStatus] = field(default_factory=list)
    roles: List[Role] = field(default_factory=list)
    metadata: Dict[str, str] = field(default_factory=dict)
    #: the app's labels: its ``AppDef.metadata`` as submitted, where the scheduler keeps them (``keeps_labels``)
    labels: Dict[str, str] = field(default_factory=dict)
    #: the app's name as submitted (``AppDef.name``), where the scheduler keeps it; None: the runner names
    #: the app by its id
    name: Optional[str] = None


#: ``DescribeAppResponse.metadata`` key of the image a role's replicas actually run, as the engine resolved it
#: (an image id or ``repo@sha256:`` digest, not the tag the spec names): ``image_id.ROLE``.  The provenance
#: shows them (``Runner.provenance``).
IMAGE_ID_PREFIX = "image_id."


@dataclass
class ListAppResponse:
    """One app in ``Scheduler.list()``; the runner fills in ``app_handle``
    (``{scheduler}://{session}/{app_id}``) since only it knows the session name.
    ``labels`` are the app's ``AppDef.metadata`` as submitted, where the scheduler keeps them."""

    app_id: str
    state: AppState
    app_handle: str = "<NOT_SET>"
    labels: Dict[str, str] = field(default_factory=dict)
    #: where the app came from, the summary its provenance label carries (the runner fills it in from the
    #: labels, and takes the label off them); None where the app has none
    provenance: Optional[Dict[str, Any]] = None
    #: when the engine took the app (aware, UTC), as the engine itself records it, so ``list --since`` and
    #: ``cancel --older-than`` agree on every machine; None where the engine does not say
    created: Optional[datetime] = None


@dataclass(frozen=True)
class AppEvent:
    """One thing the engine (or torchspec's own supervisor) recorded about an app: ``torchspec events``, to
    learn why an app is where it is without the engine's own tools.

    ``role`` and ``replica`` say which replica it is about (None: the app, or a whole role), so ``events
    HANDLE trainer/0`` keeps that replica's; ``source`` names the engine's object in its own words (``Pod
    train-k3x9q2-trainer-0-x7b2z``, ``container ...``, ``job 42``) so that the user can look further."""

    #: when the engine recorded it (aware, UTC); None where it does not say
    time: Optional[datetime]
    source: str
    #: one word, the engine's where it has one (Kubernetes' reason, Docker's action, Slurm's state)
    reason: str
    message: str
    #: the engine flags it as trouble (a Kubernetes Warning, a non-zero exit, an OOM kill, a failure)
    warning: bool = False
    role: Optional[str] = None
    replica: Optional[int] = None

    def to_json(self) -> Dict[str, Any]:
        return {"time": self.time.isoformat() if self.time else None, "source": self.source,
                "reason": self.reason, "message": self.message, "warning": self.warning, "role": self.role,
                "replica": self.replica}


def in_time_order(events: Iterable[AppEvent]) -> List[AppEvent]:
    """Oldest first, an event without a time first of all; a stable sort, so events of one time keep the
    engine's order."""
    return sorted(events, key=lambda e: (e.time is not None, e.time.timestamp() if e.time else 0.0))


T = TypeVar("T")


@dataclass
class ReplicaRunStatus(ReplicaStatus):
    """A ReplicaStatus with what most backends also know: the replica's exit code and how often it restarted,
    and where the engine says, why (``restart_causes``: :data:`RESTART_CAUSES` -> how often).

    A subclass, so ``torchspec.specs.ReplicaStatus`` stays exactly TorchX's;
    ``torchspec status`` shows these fields where a backend fills them in.
    """

    exit_code: Optional[int] = None
    num_restarts: int = 0
    restart_causes: Dict[str, int] = field(default_factory=dict)


#: Why a replica restarted, as ``ReplicaRunStatus.restart_causes`` names it: it failed (exited non-zero, was
#: killed), or the cluster took it away (a ``disruption``: evicted, preempted or its node lost; Kubernetes
#: deletes such a pod, so which of the three is gone with it).
RESTART_CAUSES = ("failure", "disruption")


@dataclass
class ReplicaWhyStatus(ReplicaRunStatus):
    """A ReplicaRunStatus that also says why the replica is in its state, where the engine or torchspec knows
    (Kubernetes: ImagePullBackOff...; Slurm: the role it waits for)."""

    msg: str = ""


@dataclass
class RequestProblem:
    """One thing a scheduler's own check found wrong in the request built from one spec document.

    ``key`` is what the caller handed to :meth:`RequestCheck.add` with that
    request; ``path`` points into the rendered spec (``("roles", 1)``, or
    ``()`` for the document as a whole), so lint can put the problem on a line.
    """

    key: Any
    path: Tuple[Any, ...]
    message: str
    hint: Optional[str] = None
    #: the lint code, where it is not the check's own ``code`` (kubernetes: TS604 for what the server refuses)
    code: Optional[str] = None


class RequestCheck(abc.ABC):
    """A scheduler's own checks of the requests its dry runs build, for ``torchspec lint --scheduler``.

    Kubernetes validates its manifests against the API schemas and CRDs here.
    Requests are collected with :meth:`add` and checked together in
    :meth:`finish`, so that expensive set-up (loading schemas) happens once
    per lint run.  ``cfg`` is the cfg the dry runs should use (a check may
    pin an option, e.g. the Kubernetes version to render for); ``notes`` says
    what could not be checked.
    """

    #: the lint code of every problem this check reports
    code: str = "TS602"

    def __init__(self, cfg: Mapping[str, Any]) -> None:
        self.cfg: Dict[str, Any] = dict(cfg)
        self.notes: List[str] = []

    @abc.abstractmethod
    def add(self, key: Any, request: Any, spec: Mapping[str, Any]) -> None:
        """Remember ``request`` (a dry run's ``request``), built from the rendered spec document ``spec``."""

    @abc.abstractmethod
    def finish(self) -> List[RequestProblem]:
        """Check everything added since the last call."""


class Scheduler(abc.ABC, Generic[T]):
    """The interface every backend implements; ``T`` is the type of its resolved cfg.

    Implementers write ``_submit_dryrun``, ``schedule``, ``describe``,
    ``list`` and ``_cancel_existing``; ``log_iter``, ``run_opts``, ``close``
    and ``_validate`` have defaults worth overriding.

    Labels: an app's ``AppDef.metadata`` (string keys and values) are its
    labels.  A scheduler that stores them with the app (``labels_of(app)``
    at dry run; an annotation, container labels, the job's comment, its state
    file) and gives them back in ``ListAppResponse.labels`` and
    ``DescribeAppResponse.labels`` says so with ``keeps_labels = True``;
    ``torchspec apply`` finds what it submitted by them, and refuses a
    scheduler that does not keep them.
    """

    #: what this backend can do beyond the minimum (see :class:`Capability`); a backend declares all it has.
    #: For backends written before capabilities existed, :meth:`supports` also infers LABELS from
    #: ``keeps_labels``, WORKSPACE from a ``build_workspace_and_update_role`` method, and LOGS and DELETE from
    #: overriding ``log_iter`` and ``delete``.
    capabilities: ClassVar[FrozenSet[Capability]] = frozenset()
    #: whether ``list`` and ``describe`` give back each app's labels (its ``AppDef.metadata``); the same as
    #: declaring :attr:`Capability.LABELS`
    keeps_labels: bool = False
    #: how this scheduler comes to forget an app it ran (``status`` of it is then an unknown app): the
    #: CLI's hint says so; None where it only forgets apps deleted on purpose
    unknown_app_hint: Optional[str] = None
    #: what to do instead where this scheduler lacks :attr:`Capability.ROLE_ORDER` (its refusal's hint)
    role_order_hint: Optional[str] = None

    def __init__(self, backend: str, session_name: str) -> None:
        self.backend = backend
        self.session_name = session_name
        self._store: Optional["AppStore"] = None

    def supports(self, capability: Capability) -> bool:
        """Whether this scheduler has ``capability``: declared in :attr:`capabilities`, or (for backends
        written before they existed) shown by what it implements."""
        if capability in type(self).capabilities:
            return True
        cls = type(self)
        inferred = {
            Capability.LABELS: bool(self.keeps_labels),
            Capability.WORKSPACE: callable(getattr(self, "build_workspace_and_update_role", None)),
            Capability.LOGS: cls.log_iter is not Scheduler.log_iter,
            Capability.DELETE: cls.delete is not Scheduler.delete,
            Capability.EVENTS: cls.events is not Scheduler.events,
        }
        return inferred.get(capability, False)

    def require(self, capability: Capability, hint: Optional[str] = None) -> None:
        """Raise :class:`~torchspec.errors.UnsupportedError` unless this scheduler :meth:`supports` it."""
        if not self.supports(capability):
            raise UnsupportedError(f"the {self.backend} scheduler cannot {capability.doing}",
                                   hint or "`torchspec schedulers` lists what each scheduler can do",
                                   scheduler=self.backend, capability=capability.value)

    def check_log_request(self, should_tail: bool = False, since: Optional[datetime] = None,
                          until: Optional[datetime] = None, streams: Optional["Stream"] = None) -> None:
        """Raise :class:`~torchspec.errors.UnsupportedError` for a ``log_iter`` request this scheduler cannot
        honour in full: following, a time window, one stream alone.  ``log_iter`` is not checked itself (a
        TorchX backend may ignore what it cannot do); the CLI asks this first, so ``logs -f`` on a backend
        that cannot follow says so rather than printing what there is and ending."""
        for needed, capability, hint in (
                (True, Capability.LOGS, None),
                (should_tail, Capability.FOLLOW_LOGS, "leave out -f to print what there is now"),
                (since is not None or until is not None, Capability.LOG_WINDOW, "leave out --since/--until"),
                (streams is not None and Stream(streams) != Stream.COMBINED, Capability.LOG_STREAMS,
                 "leave out --streams: both streams come together")):
            if needed:
                self.require(capability, hint)

    @property
    def store(self) -> "AppStore":
        """What this backend keeps per app on this machine, found again from the app id alone.

        ``status``, ``logs``, ``cancel`` and ``describe`` get only the app id: a
        run option the app was submitted with (a queue folder, a server) must
        be recoverable from it.  Put it in the id where it is short and stable
        (kubernetes puts the namespace there), in the engine where the engine
        keeps it (labels), or here: ``self.store.put(app_id, {...})`` in
        ``schedule``, ``self.store.get(app_id)`` later.  One JSON file per app
        under ``$TORCHSPEC_HOME/store/BACKEND/``, written atomically under a
        lock; see :class:`~torchspec.schedulers.app_store.AppStore`.
        """
        store = getattr(self, "_store", None)  # a subclass may not call this class's __init__
        if store is None:
            from torchspec.schedulers.app_store import AppStore

            store = self._store = AppStore(self.backend)
        return store

    def close(self) -> None:
        """Free what this object holds; only schedulers with local state need it.

        Must not raise and may be called several times.  Apps the scheduler
        started are not stopped by it unless its docs say so.
        """

    def wait_for_change(self, app_id: str, timeout: float) -> None:
        """Return once something about the app may have changed, or after ``timeout`` seconds.

        :meth:`Runner.wait <torchspec.runner.Runner.wait>` calls it between
        two looks at the app's status.  The default sleeps; a backend that can
        be told of changes (a state file, the engine's events, the API's
        watch) returns as soon as one happens, so a wait ends when the app does.
        """
        time.sleep(max(0.0, timeout))

    def submit(self, app: AppDef, cfg: T, workspace: Optional[str] = None) -> str:
        """Dry-run then schedule ``app``; returns the new app's id.

        Mostly for tests: users go through the runner, which also injects the
        job-id environment variables.  ``workspace`` needs a scheduler that can
        build one (a ``build_workspace_and_update_role`` method, as TorchX's
        ``WorkspaceMixin``); others refuse it rather than silently ignoring it.
        """
        if workspace:
            build = getattr(self, "build_workspace_and_update_role", None)
            if build is None:
                raise AppRefusedError(f"scheduler {self.backend!r} does not support workspaces (got {workspace!r})")
            build(app.roles[0], workspace, cfg)
        dryrun_info = self.submit_dryrun(app, cfg)
        return self.schedule(dryrun_info)

    @abc.abstractmethod
    def schedule(self, dryrun_info: AppDryRunInfo[Any]) -> str:
        """Send the request of ``dryrun_info`` to the backend; returns the app id.

        Implement this rather than ``submit``: ``submit`` is a dry run followed
        by this call, and ``schedule`` alone lets users edit the request first.
        """
        raise NotImplementedError()

    def submit_dryrun(self, app: AppDef, cfg: T) -> AppDryRunInfo[Any]:
        """The request ``schedule`` would send, without sending it.

        ``cfg`` is resolved against :meth:`run_opts` (defaults filled in, types
        checked), every role's ``pre_proc`` may adjust the request in
        ``app.roles`` order, and the app and cfg are attached for the runner.
        """
        resolved_cfg: Any = self.run_opts().resolve(cfg)  # type: ignore[arg-type]
        self._refuse_role_order(app)
        dryrun_info = self._submit_dryrun(app, resolved_cfg)
        for role in app.roles:
            dryrun_info = role.pre_proc(self.backend, dryrun_info)
        dryrun_info._app = app
        dryrun_info._cfg = resolved_cfg
        return dryrun_info

    def _refuse_role_order(self, app: AppDef) -> None:
        """Refuse ``depends_on`` on a scheduler that does not declare :attr:`Capability.ROLE_ORDER` (a plug-in
        written before it existed, say): it would start every role at once, breaking the spec's promise."""
        if self.supports(Capability.ROLE_ORDER):
            return
        problems = [(("roles", i, "depends_on"), f"role {r.name!r} has depends_on, but the {self.backend} scheduler"
                     " starts every role at once") for i, r in enumerate(app.roles) if r.depends_on]
        if problems:
            raise AppRefusedError("; ".join(m for _, m in problems), self.role_order_hint or "drop depends_on and"
                                  " have the role wait itself (for a file, or a port of $TORCHSPEC_HOSTS_<ROLE>),"
                                  " or use a scheduler that keeps the order (`torchspec schedulers` lists them)",
                                  problems=problems)

    @abc.abstractmethod
    def _submit_dryrun(self, app: AppDef, cfg: T) -> AppDryRunInfo[Any]:
        """Build the backend request from ``app`` and an already resolved ``cfg``."""
        raise NotImplementedError()

    def request_check(self, cfg: Mapping[str, Any], settings: Mapping[str, Any]) -> Optional[RequestCheck]:
        """The checks ``lint --scheduler`` runs on this scheduler's requests, beyond the dry run itself.

        ``settings`` are lint's options for such checks, by flag
        (``{"--k8s-version": (...), "--crd": (...)}``); a scheduler that uses
        none of them refuses any that is set, rather than ignoring it.  None:
        the dry run is all there is to check.
        """
        given = [flag for flag, value in settings.items() if value]
        if given:
            verb = "does" if len(given) == 1 else "do"
            raise UsageError(f"{' and '.join(given)} {verb} not apply to --scheduler {self.backend}",
                             "they are settings of another scheduler's checks (--k8s-version, --crd: kubernetes)")
        return None

    def run_opts(self) -> runopts:
        """The cfg keys this scheduler accepts: a ``--help`` for ``run``."""
        return self._run_opts()

    def _run_opts(self) -> runopts:
        """Where subclasses declare their options; :meth:`run_opts` may add shared ones on top."""
        return runopts()

    @abc.abstractmethod
    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        """The app's status and, where known, its roles; None if the app does not exist."""
        raise NotImplementedError()

    @abc.abstractmethod
    def list(self) -> List[ListAppResponse]:
        """The apps this scheduler knows of, with their states (a prototype API in TorchX too)."""
        raise NotImplementedError()

    def list_where(self, cfg: Mapping[str, Any]) -> List[ListAppResponse]:
        """The apps where a submission with the resolved ``cfg`` goes (Kubernetes: the cfg's namespace and
        context); by default :meth:`list`, for schedulers whose run options do not move apps out of its sight."""
        return self.list()

    def exists(self, app_id: str) -> bool:
        """True if the app was submitted and the scheduler still knows it."""
        return self.describe(app_id) is not None

    def app_ids_here(self) -> List[str]:
        """The ids of the apps this scheduler knows from this machine alone, asking no backend (the ``local``
        state folder); empty where only a backend could tell.  ``torchspec status ID`` takes an id that one
        scheduler finds here for that app's handle, so no command contacts an engine to guess.  By default the
        apps this backend keeps in its :attr:`store`."""
        return self.store.app_ids()

    @abc.abstractmethod
    def _cancel_existing(self, app_id: str) -> None:
        """Kill an app known to exist; :meth:`cancel` checks that first."""
        raise NotImplementedError()

    def cancel(self, app_id: str) -> None:
        """Ask for the app to be killed; a no-op for an app that does not exist.

        Idempotent from one thread; does not wait for the app to reach
        CANCELLED (use the runner's ``wait`` for that).
        """
        if self.exists(app_id):
            self._cancel_existing(app_id)

    def delete(self, app_id: str) -> None:
        """Cancel the app if it runs, then remove what the scheduler keeps of it (logs included).

        For backends that keep finished apps around (Docker's stopped
        containers); a no-op for an app that does not exist.  Raises
        ``NotImplementedError`` where a scheduler cannot remove apps.
        """
        raise NotImplementedError(f"{self.__class__.__qualname__} cannot delete apps")

    def events(self, app_id: str) -> List[AppEvent]:
        """What the engine recorded about the app, oldest first (:func:`in_time_order`): its objects' and
        replicas' transitions, and why (scheduled, pulled, started, exited with a code, OOM-killed, evicted,
        preempted, waiting for resources).  Raises ``NotImplementedError`` where a scheduler cannot say."""
        raise NotImplementedError(f"{self.__class__.__qualname__} cannot say what happened to an app")

    def log_iter(
        self,
        app_id: str,
        role_name: str,
        k: int = 0,
        regex: Optional[str] = None,
        since: Optional[datetime] = None,
        until: Optional[datetime] = None,
        should_tail: bool = False,
        streams: Optional[Stream] = None,
    ) -> Iterable[str]:
        """The log lines of replica ``k`` of ``role_name``.

        - ``regex`` keeps only the lines it matches (``re.search``).
        - ``since``/``until`` bound the lines by time where the scheduler
          keeps times; others ignore them.
        - ``should_tail`` follows the output like ``tail -f`` until the app
          (or the replica) can produce no more, then ends; without it the
          iterator ends at the end of what is available now.
        - ``streams`` picks stdout, stderr or both; a scheduler that cannot
          separate them raises ``ValueError`` for a stream it lacks.

        Lines keep their whitespace and end with ``\\n``.  Calling this for
        an app that does not exist is undefined (check :meth:`exists`), each
        call starts a new iterator, and logs may be gone once the scheduler
        purged them.  Raises ``NotImplementedError`` where logs are not
        supported.
        """
        raise NotImplementedError(f"{self.__class__.__qualname__} does not support application log iteration")

    def _validate(self, app: AppDef, scheduler: str) -> None:
        """Refuse an app this scheduler cannot run, with :class:`~torchspec.errors.AppRefusedError` (a ``ValueError``).

        By default every role needs a resource, since most backends must
        size what they allocate; schedulers that ignore resources override it.
        """
        for i, role in enumerate(app.roles):
            if role.resource == NULL_RESOURCE:
                raise AppRefusedError(
                    f"role {role.name!r} has no resource, and the {scheduler} scheduler sizes what it allocates"
                    f" from each role's resource",
                    "give the role one, e.g. `resource: {cpu: 1, memMB: 1024}`",
                    path=("roles", i, "resource"))


def check_replica(app_id: str, role_name: str, k: int, replicas: Mapping[str, int]) -> None:
    """Refuse a ``log_iter`` of a role or replica the app does not have, in every backend's one wording.

    ``replicas`` is role name -> number of replicas, in the app's role order.
    Raises :class:`~torchspec.errors.NotFoundError` (a ``ValueError``).
    """
    if role_name not in replicas:
        from torchspec.errors import did_you_mean_hint

        raise NotFoundError(f"app {app_id!r} has no role {role_name!r}; its roles: {', '.join(replicas)}",
                            did_you_mean_hint(role_name, list(replicas)))
    if not 0 <= k < replicas[role_name]:
        raise NotFoundError(f"role {role_name!r} of app {app_id!r} has replicas 0..{replicas[role_name] - 1}, not {k}")


def aware(moment: Optional[datetime]) -> Optional[datetime]:
    """``moment`` with a time zone; a naive one is local time, as ``datetime.now()`` gives.

    ``log_iter`` callers pass either; schedulers compare them with the aware
    times their logs carry.
    """
    if moment is None or moment.tzinfo is not None:
        return moment
    return moment.astimezone()


def labels_of(app: AppDef) -> Dict[str, str]:
    """The labels a scheduler stores for ``app``: its metadata, keys and values as text."""
    return {str(key): str(value) for key, value in app.metadata.items()}


def labels_json(labels: Mapping[str, str]) -> str:
    """Labels as compact JSON, keys sorted: for a backend that keeps them in one free-text field (an annotation,
    a container label)."""
    import json

    return json.dumps(dict(sorted(labels.items())), separators=(",", ":"), ensure_ascii=False)


def parse_labels_json(text: Optional[str]) -> Dict[str, str]:
    """The labels :func:`labels_json` wrote; {} for anything else (a hand-edited field is no error)."""
    import json

    try:
        data = json.loads(text or "{}")
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def encode_labels(labels: Mapping[str, str]) -> str:
    """Labels as one word of ``[A-Za-z0-9_-]`` (base64url of their JSON): for a backend that keeps them in free
    text that other tools split on spaces or ``=`` (Slurm's job comment); "" for no labels."""
    import base64

    if not labels:
        return ""
    return base64.urlsafe_b64encode(labels_json(labels).encode()).decode().rstrip("=")


def decode_labels(word: str) -> Dict[str, str]:
    """The labels :func:`encode_labels` wrote; {} for anything else."""
    import base64
    import binascii

    try:
        text = base64.urlsafe_b64decode(word + "=" * (-len(word) % 4)).decode()
    except (ValueError, binascii.Error):
        return {}
    return parse_labels_json(text)


def filter_regex(regex: str, data: Iterable[str]) -> Iterable[str]:
    """The items of ``data`` in which ``regex`` matches anywhere (``re.search``), lazily."""
    pattern = re.compile(regex)
    return (datum for datum in data if pattern.search(datum))


def split_lines(text: str) -> List[str]:
    """``text`` cut after each ``\\n``, keeping it; a last piece without one is kept as it is."""
    lines = []
    while text:
        idx = text.find("\n")
        if idx < 0:
            lines.append(text)
            break
        lines.append(text[: idx + 1])
        text = text[idx + 1 :]
    return lines


__all__ = [
    "DescribeAppResponse",
    "ListAppResponse",
    "ReplicaRunStatus",
    "ReplicaWhyStatus",
    "RequestCheck",
    "RequestProblem",
    "Scheduler",
    "Stream",
    "aware",
    "check_replica",
    "decode_labels",
    "encode_labels",
    "filter_regex",
    "labels_json",
    "labels_of",
    "parse_labels_json",
    "split_lines",
]
