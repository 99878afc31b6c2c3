"""The ``docker`` Scheduler: submit, status, list, logs, cancel and delete against one Docker engine.

It does the talking to the engine; what to create comes from
``translate`` (pure), what the engine's answers mean from ``views``, and
the longer steps live beside it: ``logs`` (reading a replica across its
containers), ``workspace`` (image builds) and ``watcher`` (retries).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, TypeVar, cast

from torchspec.errors import BackendError, MissingExtraError, NotFoundError, UnreachableError
from torchspec.times import utc_from_epoch
from torchspec.schedulers.api import (
    AppEvent,
    IMAGE_ID_PREFIX,
    Capability,
    DescribeAppResponse,
    ListAppResponse,
    Scheduler,
    Stream,
    aware,
    check_replica,
    parse_labels_json,
)
from torchspec.schedulers.secrets import carried_values
from torchspec.schedulers.docker.engine import (
    UNREACHABLE_HINT,
    docker_errors,
    engine_closed,
    ensure_image,
    in_parallel,
    is_unreachable,
    read_app,
    reason,
    stop_container,
    unreachable,
    wait_for_event,
)
from torchspec.schedulers.docker.labels import (
    BUILTIN_NETWORKS,
    CANCELLED_SUFFIX,
    DEFAULT_ENGINE,
    LABEL_APP_ID,
    LABEL_APP_NAME,
    LABEL_KEEP,
    LABEL_METADATA,
    LABEL_NETWORK,
    LABEL_SESSION,
    LABEL_VERSION,
    LIVE_STATUSES,
)
from torchspec.schedulers.docker.logs import replica_lines
from torchspec.schedulers.docker.options import docker_run_opts
from torchspec.schedulers.docker.translate import DockerJob, app_to_job
from torchspec.schedulers.docker.views import AppView, ContainerView, DockerReplicaStatus
from torchspec.schedulers.docker.watcher import start_watcher, watcher_log
from torchspec.schedulers.docker.workspace import build_workspace_image
from torchspec.schedulers.images import check_container_image
from torchspec.schedulers.replicas import dns_label, make_app_id
from torchspec.schedulers.request_timeout import DEFAULT_S, for_cfg, is_timeout, timed_out
from torchspec.specs import (
    NONE,
    AppDef,
    AppDryRunInfo,
    AppState,
    CfgVal,
    ReplicaStatus,
    Role,
    RoleStatus,
    Workspace,
    runopts,
)
from torchspec.version import __version__

if TYPE_CHECKING:
    import docker

logger: logging.Logger = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])

#: How long ``describe``, having found the engine away, waits for the watcher to mark what the engine stopped
#: before it believes a SUCCEEDED: the watcher does within ``watcher.OUTAGE_POLL_S`` of the engine's return.
MARK_WAIT_S = 3.0


def _engine_call(method: F) -> F:
    """``method``, where an engine that does not answer (stopped, restarting) is an ``UnreachableError``:
    the CLI's exit 6 with a hint rather than a traceback, and what ``wait`` rides out."""

    @functools.wraps(method)
    def call(self: "DockerScheduler", *args: Any, **kwargs: Any) -> Any:
        with self.answering(method.__name__):
            return method(self, *args, **kwargs)

    return cast(F, call)


class DockerScheduler(Scheduler[Dict[str, CfgVal]]):
    """Runs each replica as a container on the engine ``DOCKER_HOST`` (or the default socket) points at.

    ``progress`` receives one line per step of a workspace build; the CLI
    points it at the terminal, the library default logs at INFO.
    """

    capabilities = frozenset({Capability.LOGS, Capability.FOLLOW_LOGS, Capability.LOG_WINDOW, Capability.LOG_STREAMS, Capability.DELETE, Capability.WORKSPACE, Capability.LABELS, Capability.ROLE_ORDER,
                              Capability.EVENTS})
    keeps_labels = True  # as a container label

    def __init__(self, session_name: str, client: Optional["docker.DockerClient"] = None,
                 request_timeout: Optional[float] = None) -> None:
        super().__init__("docker", session_name)
        self._client_obj = client
        #: seconds each request to the engine may go unanswered: the SDK's timeout (its streams, logs -f and
        #: the events, set their own); see torchspec.schedulers.request_timeout
        self.request_timeout = request_timeout or float(DEFAULT_S)
        # the engine DOCKER_HOST names, where no client was handed in: a fresh connection can be opened to it
        self._from_env = client is None
        self.progress: Callable[[str], None] = lambda line: logger.info("%s", line)
        # app id -> when describe last read it (epoch seconds): wait_for_change wakes on events since then
        self._read_at: Dict[str, float] = {}
        # when this scheduler first found the engine not answering, since it last believed a SUCCEEDED
        self._lost_at: Optional[float] = None

    # -- the engine ---------------------------------------------------------

    def client(self) -> "docker.DockerClient":
        """A client that has reached the engine, or a :class:`BackendError` that says how to start one."""
        if self._client_obj is not None:
            return self._client_obj
        try:
            import docker
        except ImportError as e:  # the docker extra is not installed: a dry run needs none, talking to an engine does
            raise MissingExtraError.for_import(e, "the docker scheduler") or e

        try:
            client = docker.from_env(timeout=self.request_timeout)
            client.ping()
        except Exception as e:  # noqa: BLE001 - the SDK raises several unrelated types for "no engine"
            if is_timeout(e):
                raise self.timed_out("connecting") from None
            if is_unreachable(e):
                raise unreachable(e, self.where()) from None
            raise BackendError(f"cannot reach the Docker engine at {self.where()}: {reason(e)}",
                               UNREACHABLE_HINT) from None
        self._client_obj = client
        return client

    @staticmethod
    def where() -> str:
        """The engine this scheduler talks to, as the user named it."""
        return os.environ.get("DOCKER_HOST") or f"the default socket ({DEFAULT_ENGINE})"

    def _timed_by(self, cfg: Mapping[str, Any]) -> "docker.DockerClient":
        """The client, its requests bounded by the run option ``request_timeout`` where ``cfg`` sets it."""
        self.request_timeout = for_cfg(cfg, self.request_timeout)
        client = self.client()
        client.api.timeout = self.request_timeout
        return client

    def timed_out(self, what: str) -> UnreachableError:
        return timed_out("the Docker engine", self.where(), self.request_timeout, what, "`docker info`")

    @contextlib.contextmanager
    def answering(self, what: str = "a request") -> Iterator[None]:
        """Turn the SDK's errors for an engine that did not answer (``what``: the request) into an
        :class:`UnreachableError`; one that took the request and said nothing in time is a RequestTimeoutError."""
        try:
            yield
        except MissingExtraError:  # no SDK to ask what its error means
            raise
        except Exception as e:
            if is_timeout(e):
                self._lost_at = self._lost_at or time.time()
                raise self.timed_out(what) from None
            if is_unreachable(e):
                self._lost_at = self._lost_at or time.time()
                raise unreachable(e, self.where()) from None
            raise

    def close(self) -> None:
        if self._client_obj is not None:
            self._client_obj.close()
            self._client_obj = None

    # -- submitting ---------------------------------------------------------

    def _run_opts(self) -> runopts:
        return docker_run_opts()

    def _validate(self, app: AppDef, scheduler: str) -> None:
        """Accept roles without resources: a container without limits gets what the engine has."""

    def _submit_dryrun(self, app: AppDef, cfg: Dict[str, CfgVal]) -> AppDryRunInfo[DockerJob]:
        app_id = make_app_id(dns_label(app.name, max_len=40))
        job = app_to_job(app, cfg, app_id, self.session_name, os.getcwd(), os.environ)
        job.engine = os.environ.get("DOCKER_HOST") or DEFAULT_ENGINE
        return AppDryRunInfo(job, str)

    @_engine_call
    def schedule(self, dryrun_info: AppDryRunInfo[DockerJob]) -> str:
        """Create the network and every container, then start them; all or nothing.

        If anything fails half way, what was created is removed again and
        the error says which step failed.
        """
        job = dryrun_info.request
        carried = carried_values(dryrun_info.app) if dryrun_info.app else {}  # every secret, before anything is made
        client = self._timed_by(dryrun_info._cfg)
        errors = docker_errors()
        for image in job.images:
            ensure_image(client, image, job.pull, self.progress)
        self._check_network_exists(client, job)
        created: List[str] = []
        network_id: Optional[str] = None
        try:
            if job.create_network:
                network_id = client.api.create_network(
                    job.network, driver="bridge", labels={LABEL_APP_ID: job.app_id, LABEL_VERSION: __version__}
                )["Id"]
            for container in job.containers:
                created.append(client.api.create_container(**container.create_kwargs(client.api, carried))["Id"])
            # the engine takes ~0.5 s to start a container and does several at once; a role that waits for
            # others (depends_on) is only created: the watcher starts it
            in_parallel(client.api.start, [cid for cid, c in zip(created, job.containers) if not c.depends_on])
        except errors.APIError as e:
            self._remove(client, created, network_id)
            step = "starting" if len(created) == len(job.containers) else "creating"
            hint = "nothing of the app was left behind"
            if "address pool" in reason(e):  # the engine's default pools hold ~30 bridge networks
                hint += ("; each app gets a network of its own and the engine has no address range left for one:"
                         " remove unused networks (docker network prune), run many apps on one network you create"
                         " (docker network create NAME, then -c network=NAME), or give the engine more ranges"
                         " (default-address-pools in daemon.json)")
            raise BackendError(f"Docker refused {step} app {job.app_id}: {reason(e)}", hint) from None
        try:
            start_watcher(job.app_id)
        except OSError as e:
            logger.warning("cannot start the watcher of %s (%s): APPLICATION and ROLE retries will not happen,"
                           " a replica that fails will not stop the others, and roles with depends_on will not"
                           " start", job.app_id, e)
        return job.app_id

    def _check_network_exists(self, client: "docker.DockerClient", job: DockerJob) -> None:
        """A network named in the run options must exist: torchspec creates only its own per-app networks."""
        if job.create_network or job.network in BUILTIN_NETWORKS:
            return
        try:
            client.api.inspect_network(job.network)
        except docker_errors().NotFound:
            raise BackendError(f"network {job.network!r} does not exist",
                               f"create it with `docker network create {job.network}`,"
                               " or leave the network run option unset for a network per app") from None

    # -- asking -------------------------------------------------------------

    @_engine_call
    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        self._read_at[app_id] = time.time()
        client = self.client()
        view = self._settled(client, read_app(client, app_id))
        if not view.containers:
            return None
        current = view.current
        metadata: Dict[str, str] = {}
        roles_statuses = [RoleStatus(role=name, replicas=_replica_statuses(view, name, metadata))
                          for name in view.role_order]
        first = current[0] if current else None
        if first is not None:
            metadata["session_name"] = first.labels.get(LABEL_SESSION, "")
            metadata["network"] = first.labels.get(LABEL_NETWORK, "")
        for container in current:
            if container.image_id:
                metadata.setdefault(IMAGE_ID_PREFIX + container.role, container.image_id)
        return DescribeAppResponse(
            app_id=app_id,
            state=view.state,
            num_restarts=max((c.num_restarts for c in current), default=0),
            msg=view.msg,
            roles_statuses=roles_statuses,
            roles=_submitted_roles(view),
            metadata=metadata,
            labels=_app_labels(view),
            name=first.labels.get(LABEL_APP_NAME) or None if first is not None else None,
        )

    @_engine_call
    def events(self, app_id: str) -> List[AppEvent]:
        """The engine's events of the app's containers, and their state (:mod:`.events`)."""
        from torchspec.schedulers.docker.events import app_events

        client = self.client()
        return app_events(client, read_app(client, app_id))

    def _settled(self, client: "docker.DockerClient", view: AppView) -> AppView:
        """``view``, unless its SUCCEEDED may be the engine's doing rather than the app's.

        That is a view read while the engine shuts down (a replica that
        exits 0 on its SIGTERM looks done; an ``UnreachableError``, which
        ``wait`` rides out), or one read just after this scheduler found the
        engine away, before the watcher marked what the engine stopped
        (``watcher.Watch``): that mark is waited for, up to ``MARK_WAIT_S``.
        """
        if view.state != AppState.SUCCEEDED:
            return view
        if self._from_env and engine_closed():
            self._lost_at = self._lost_at or time.time()
            raise UnreachableError(f"the Docker engine at {self.where()} is shutting down: how {view.app_id}"
                                   " ended is known once it answers again", UNREACHABLE_HINT)
        lost_at, self._lost_at = self._lost_at, None
        if lost_at is None:
            return view
        marks = {"type": "container", "event": "rename", "label": f"{LABEL_APP_ID}={view.app_id}"}
        wait_for_event(client, marks, lost_at, MARK_WAIT_S)
        return read_app(client, view.app_id)

    @_engine_call
    def wait_for_change(self, app_id: str, timeout: float) -> None:
        """Wake on the engine's next event for one of the app's containers (created, started, died, removed...)
        since the app was last described, or after ``timeout``: a wait ends when the app does, not at a poll."""
        since = self._read_at.get(app_id, time.time())
        wait_for_event(self.client(), {"type": "container", "label": f"{LABEL_APP_ID}={app_id}"}, since, timeout)

    @_engine_call
    def list_where(self, cfg: Mapping[str, Any]) -> List[ListAppResponse]:
        """:meth:`list`, with the run option ``request_timeout`` (``list -s docker -c request_timeout=...``)."""
        self._timed_by(cfg)
        return self.list()

    @_engine_call
    def list(self) -> List[ListAppResponse]:
        """Every app with containers on the engine, oldest first."""
        client = self.client()
        summaries = client.api.containers(all=True, filters={"label": LABEL_APP_ID})
        first_seen: Dict[str, int] = {}
        for summary in summaries:
            app_id = (summary.get("Labels") or {}).get(LABEL_APP_ID, "")
            first_seen[app_id] = min(first_seen.get(app_id, summary.get("Created", 0)), summary.get("Created", 0))
        found = []
        for app_id in sorted(first_seen, key=lambda a: (first_seen[a], a)):
            view = read_app(client, app_id)
            if view.containers:
                found.append(ListAppResponse(app_id=app_id, state=view.state, labels=_app_labels(view),
                                             created=utc_from_epoch(first_seen[app_id])))
        return found

    @_engine_call
    def exists(self, app_id: str) -> bool:
        summaries = self.client().api.containers(all=True, filters={"label": f"{LABEL_APP_ID}={app_id}"})
        return bool(summaries)

    # -- cancelling and deleting -------------------------------------------------

    @_engine_call
    def _cancel_existing(self, app_id: str) -> None:
        """Stop every container of the app (grace period, then SIGKILL); remove them unless kept.

        Containers are renamed ``NAME.cancelled`` first, so the watcher does
        not retry them and ``status`` can tell a cancelled app from a failed one.
        """
        client = self.client()
        view = read_app(client, app_id)
        keep = any(c.labels.get(LABEL_KEEP) == "1" for c in view.containers)
        pending = [c for c in view.current if c.retry_pending and not c.cancelled]
        self._stop_all(client, app_id, also=pending)
        if not keep:
            self._remove_all(client, app_id)

    @_engine_call
    def delete(self, app_id: str) -> None:
        """Stop the app if it runs, then remove its containers (kept ones too) and its network.

        Logs go with the containers.  Volumes are never removed: they hold data.
        """
        client = self.client()
        self._stop_all(client, app_id)
        self._remove_all(client, app_id)
        with contextlib.suppress(OSError):
            os.remove(watcher_log(app_id))

    def _stop_all(self, client: "docker.DockerClient", app_id: str, also: Iterable[ContainerView] = ()) -> None:
        """Mark (rename) and stop every live container of the app, and those in ``also``.

        The watcher may be half way through replacing containers for a retry
        while we stop them, creating new ones as we go; so this repeats until
        a fresh look finds nothing live.
        """
        extra = list(also)
        for _ in range(20):
            view = read_app(client, app_id)
            live = [c for c in view.containers if c.status in LIVE_STATUSES] + extra
            extra = []
            if not live:
                return
            for c in live:
                if not c.cancelled and not c.replaced:
                    try:
                        client.api.rename(c.id, c.name + CANCELLED_SUFFIX)
                    except docker_errors().APIError as e:
                        logger.debug("cannot rename %s: %s", c.name, reason(e))
            in_parallel(lambda c: stop_container(client, c.id), live)
        logger.warning("containers of %s kept appearing while they were being stopped", app_id)

    def _remove_all(self, client: "docker.DockerClient", app_id: str) -> None:
        """Remove every container of the app, again until none is left (see :meth:`_stop_all`), then its network."""
        for _ in range(20):
            view = read_app(client, app_id)
            if not view.containers:
                break
            self._remove(client, [c.id for c in view.containers], None)
        self._remove_networks(client, app_id)

    def _remove(self, client: "docker.DockerClient", container_ids: List[str], network_id: Optional[str]) -> None:
        errors = docker_errors()
        for container_id in container_ids:
            try:
                client.api.remove_container(container_id, force=True)
            except errors.NotFound:
                pass
            except errors.APIError as e:
                logger.warning("cannot remove container %s: %s", container_id[:12], reason(e))
        if network_id:
            try:
                client.api.remove_network(network_id)
            except errors.APIError as e:
                logger.warning("cannot remove network %s: %s", network_id[:12], reason(e))

    def _remove_networks(self, client: "docker.DockerClient", app_id: str) -> None:
        for network in client.api.networks(filters={"label": f"{LABEL_APP_ID}={app_id}"}):
            self._remove(client, [], network["Id"])

    # -- logs ---------------------------------------------------------------

    @_engine_call
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
        """Lines of replica ``k`` of ``role_name``, across every container it ran in.

        The engine timestamps each line; ``since`` (inclusive) and ``until``
        (exclusive) select on that, naive datetimes being local time.  A
        replica that an APPLICATION or ROLE retry replaced shows its earlier
        containers first, each followed by a
        ``--- torchspec: restart N of replica ROLE/K ---`` line.  With
        ``should_tail`` the iterator follows the replica, through Docker's
        own restarts and torchspec's, until it can produce no more.
        """
        client = self.client()
        view = read_app(client, app_id)
        if not view.containers:
            raise NotFoundError(f"unknown app {app_id!r} on the Docker engine")
        check_replica(app_id, role_name, k, {role: 1 + max(c.replica_id for c in view.containers if c.role == role)
                                             for role in view.role_order})
        stream = Stream(streams) if streams is not None else Stream.COMBINED
        pattern = re.compile(regex) if regex else None
        return self._answering_lines(
            replica_lines(client, app_id, role_name, k, stream, pattern, aware(since), aware(until), should_tail))

    def _answering_lines(self, lines: Iterable[str]) -> Iterator[str]:
        """``lines``, read on after the call returned: an engine that stops answering meanwhile is unreachable too."""
        with self.answering():
            yield from lines

    # -- workspaces ---------------------------------------------------------

    @_engine_call
    def build_workspace_and_update_role(self, role: Role, workspace: Any, cfg: Mapping[str, CfgVal]) -> None:
        """Build ``role.image`` with the workspace's files copied on top, and make the role use it.

        The image is tagged by a hash of its base image and the files, so an
        unchanged folder reuses the image built before and builds nothing.
        Files go to the image's working directory; ``.dockerignore`` in a
        project folder is honoured; symbolic links are copied as links.
        """
        check_container_image(role, 0, "docker")  # the base image of the build: `FROM .` builds nothing
        ws = workspace if isinstance(workspace, Workspace) else Workspace.from_str(str(workspace))
        pull = str(cfg.get("pull") or "missing")
        role.image = build_workspace_image(self.client(), role.image, ws, pull, self.progress)


def _app_labels(view: AppView) -> Dict[str, str]:
    """The app's labels, from the label every container of it carries."""
    return parse_labels_json(view.containers[0].labels.get(LABEL_METADATA)) if view.containers else {}


def _replica_statuses(view: AppView, role_name: str, metadata: Dict[str, str]) -> List[ReplicaStatus]:
    """The status of each replica of ``role_name``; the host ports Docker published go into ``metadata``."""
    replicas: List[ReplicaStatus] = []
    for c in (c for c in view.current if c.role == role_name):
        replicas.append(
            DockerReplicaStatus(
                id=c.replica_id,
                state=c.state,
                role=role_name,
                hostname=c.hostname,
                structured_error_msg=NONE,
                exit_code=c.exit_code,
                num_restarts=c.num_restarts,
                msg=c.msg,
            )
        )
        for port, bindings in (c.ports or {}).items():
            for binding in bindings or []:
                metadata[f"ports.{role_name}/{c.replica_id}.{port}"] = (
                    f"{binding.get('HostIp')}:{binding.get('HostPort')}"
                )
    return replicas


def _submitted_roles(view: AppView) -> List[Role]:
    """The roles as submitted, rebuilt from the JSON each container carries; one that cannot be is left out."""
    from torchspec.specs.convert import build_role

    roles: List[Role] = []
    current = view.current
    for role_name in view.role_order:
        spec = next(c.role_spec for c in current if c.role == role_name)
        try:
            roles.append(build_role(spec))
        except (KeyError, TypeError, ValueError) as e:
            logger.debug("cannot rebuild role %s of %s: %s", role_name, view.app_id, e)
    return roles
