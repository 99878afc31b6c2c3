"""The ``docker`` scheduler: every replica is a container on one Docker engine.

Everything torchspec needs to know about an app lives in the engine, as
labels on the app's containers, so ``status``, ``logs``, ``list``,
``describe`` and ``cancel`` work from any process and any shell that reaches
the same engine, with no local state:

    torchspec.app-id      the app id (also the prefix of every container name)
    torchspec.role-name   the role; torchspec.replica-id its replica index
    torchspec.attempt     how often torchspec restarted this replica (APPLICATION and ROLE retries)
    torchspec.role        the role as submitted, as JSON: what ``describe`` rebuilds
    torchspec.keep        "1" when cancel must keep the stopped containers

One container per replica, named and reachable as ``{app_id}-{role}-{k}`` on
a network created for the app, so ``$TORCHSPEC_RANK0_HOST`` (what
``${rank0_env}`` names) resolves to the role's replica 0 from every replica.

Retries (see README): REPLICA is the engine's own ``on-failure`` restart
policy, so it goes on even if nothing of torchspec runs.  APPLICATION and ROLE
need someone to restart the other replicas too; a small watcher process
(:mod:`torchspec.schedulers.docker_watcher`), started by ``schedule``,
follows the engine's events and does it.  Replaced containers are kept,
renamed ``NAME.attemptN``, so their logs stay readable.

The module reads in the order every scheduler module does: labels and state
maps, the request whose ``__str__`` is what a dry run prints, the pure
translator (AppDef -> request), the options, the scheduler class,
``create_scheduler``.
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import io
import json
import logging
import os
import re
import subprocess
import sys
import tarfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Pattern, Tuple

from torchspec.errors import BackendError
from torchspec.schedulers.api import DescribeAppResponse, ListAppResponse, Scheduler, Stream, aware
from torchspec.schedulers.logfile import stamped_lines
from torchspec.schedulers.replicas import ENV_RANK0_HOST, dns_label, make_app_id, replica_env
from torchspec.specs import (
    NONE,
    AppDef,
    AppDryRunInfo,
    AppState,
    BindMount,
    CfgVal,
    DeviceMount,
    ReplicaStatus,
    RetryPolicy,
    Role,
    RoleStatus,
    VolumeMount,
    Workspace,
    macros,
    runopts,
)
from torchspec.version import __version__

if TYPE_CHECKING:
    import docker

logger: logging.Logger = logging.getLogger(__name__)

# ----------------------------------------------------------------------------
# Labels, names and state maps
# ----------------------------------------------------------------------------

LABEL_APP_ID = "torchspec.app-id"
LABEL_APP_NAME = "torchspec.app-name"
LABEL_ROLE_NAME = "torchspec.role-name"
LABEL_REPLICA_ID = "torchspec.replica-id"
LABEL_NUM_REPLICAS = "torchspec.num-replicas"
LABEL_ATTEMPT = "torchspec.attempt"
LABEL_ROLE = "torchspec.role"
LABEL_KEEP = "torchspec.keep"
LABEL_NETWORK = "torchspec.network"
LABEL_SESSION = "torchspec.session"
LABEL_VERSION = "torchspec.version"
#: On networks and workspace images torchspec created.
LABEL_WORKSPACE_BASE = "torchspec.workspace-base"

#: ``cancel`` renames the containers it stops, so anyone can tell a cancelled replica from a failed one.
CANCELLED_SUFFIX = ".cancelled"
#: A replica replaced by an APPLICATION or ROLE retry keeps its container as ``NAME.attemptN``.
ATTEMPT_SUFFIX = ".attempt"

#: Networks that exist on every engine and are chosen by name in ``network_mode``.
BUILTIN_NETWORKS = ("host", "none", "bridge")
#: Where a replica finds rank 0 when there are no per-container hostnames (host or no network).
LOCALHOST = "localhost"

#: Role metadata key for the folder the replicas run in (default: the image's WORKDIR).
META_WORKDIR = "docker.working_dir"
#: Resource capability naming the GPUs to use instead of a count, e.g. ``"0,2"``.
CAP_GPU_DEVICE_IDS = "docker.gpu_device_ids"
#: Resource devices Docker can provide: name -> host device path pattern, numbered from 0.
KNOWN_DEVICES = {"vpc.amazonaws.com/efa": "/dev/infiniband/uverbs{}"}

DEFAULT_STOP_TIMEOUT_S = 10
#: How long ``logs -f`` waits for the watcher to replace a failed replica before it stops following.
RETRY_WAIT_S = 120
PULL_POLICIES = ("missing", "always", "never")

#: Docker states of a container that runs or may still run.
_LIVE_STATUSES = ("running", "restarting", "paused", "created")

_DOCKER_STATES: Dict[str, AppState] = {
    "created": AppState.PENDING,
    "restarting": AppState.PENDING,
    "running": AppState.RUNNING,
    "paused": AppState.RUNNING,
    "removing": AppState.CANCELLED,
    "dead": AppState.FAILED,
}


# ----------------------------------------------------------------------------
# The request: what ``dryrun`` prints and ``schedule`` creates
# ----------------------------------------------------------------------------


@dataclass
class DockerContainer:
    """One replica's container, in Docker's own terms.

    ``host_env`` names the variables whose values were copied from the
    submitting shell (``copy_env``): the dry run prints their names, never
    their values, since they are often credentials.
    """

    name: str
    role: str
    replica_id: int
    image: str
    entrypoint: List[str]
    command: List[str]
    env: Dict[str, str]
    labels: Dict[str, str]
    network: str
    hostname: Optional[str] = None
    working_dir: Optional[str] = None
    binds: List[str] = field(default_factory=list)
    volumes: List[str] = field(default_factory=list)
    devices: List[str] = field(default_factory=list)
    nano_cpus: Optional[int] = None
    mem_limit_mb: Optional[int] = None
    shm_size: Optional[str] = None
    gpu_count: int = 0
    gpu_device_ids: List[str] = field(default_factory=list)
    ports: List[int] = field(default_factory=list)
    publish_host_ip: Optional[str] = None
    privileged: bool = False
    restart_max: int = 0
    stop_timeout: int = DEFAULT_STOP_TIMEOUT_S
    host_env: List[str] = field(default_factory=list)

    def create_kwargs(self, api: "docker.APIClient") -> Dict[str, Any]:
        """Keyword arguments of ``APIClient.create_container`` for this container."""
        from docker.types import DeviceRequest

        device_requests = []
        if self.gpu_device_ids:
            device_requests.append(DeviceRequest(device_ids=self.gpu_device_ids, capabilities=[["gpu"]]))
        elif self.gpu_count > 0:
            device_requests.append(DeviceRequest(count=self.gpu_count, capabilities=[["gpu"]]))
        user_network = self.network not in BUILTIN_NETWORKS
        host_config = api.create_host_config(
            binds=self.binds + self.volumes or None,
            devices=self.devices or None,
            device_requests=device_requests or None,
            nano_cpus=self.nano_cpus,
            mem_limit=f"{self.mem_limit_mb}m" if self.mem_limit_mb else None,
            shm_size=self.shm_size,
            port_bindings={port: (self.publish_host_ip,) for port in self.ports} if self.publish_host_ip else None,
            privileged=self.privileged,
            network_mode=self.network,
            restart_policy={"Name": "on-failure", "MaximumRetryCount": self.restart_max} if self.restart_max else None,
        )
        networking_config = None
        if user_network:
            networking_config = api.create_networking_config(
                {self.network: api.create_endpoint_config(aliases=[self.hostname] if self.hostname else None)}
            )
        return dict(
            image=self.image,
            name=self.name,
            entrypoint=self.entrypoint,
            command=self.command,
            hostname=self.hostname,
            environment=self.env,
            labels=self.labels,
            working_dir=self.working_dir,
            ports=self.ports or None,
            host_config=host_config,
            networking_config=networking_config,
            stop_timeout=self.stop_timeout,
            detach=True,
            use_config_proxy=False,
        )

    def describe_lines(self) -> List[str]:
        """The container as a dry run shows it, one setting a line."""
        import shlex

        lines = [f"  {self.name}:", f"    image:      {self.image}"]
        lines.append(f"    command:    {shlex.join(self.entrypoint + self.command)}")
        if self.hostname and self.network not in BUILTIN_NETWORKS:
            lines.append(f"    hostname:   {self.hostname} (network alias on {self.network})")
        elif self.hostname:
            lines.append(f"    hostname:   {self.hostname}")
        lines.append(f"    network:    {self.network}")
        if self.working_dir:
            lines.append(f"    workdir:    {self.working_dir}")
        limits = []
        if self.nano_cpus:
            limits.append(f"cpus={self.nano_cpus / 1e9:g}")
        if self.mem_limit_mb:
            limits.append(f"memory={self.mem_limit_mb}MB")
        if self.gpu_device_ids:
            limits.append(f"gpus=device {','.join(self.gpu_device_ids)}")
        elif self.gpu_count:
            limits.append(f"gpus={self.gpu_count}")
        if self.shm_size:
            limits.append(f"shm={self.shm_size}")
        lines.append(f"    limits:     {' '.join(limits) or 'none'}")
        for mount in self.binds:
            lines.append(f"    bind:       {mount}")
        for mount in self.volumes:
            lines.append(f"    volume:     {mount}")
        for device in self.devices:
            lines.append(f"    device:     {device}")
        if self.ports:
            where = f"published on {self.publish_host_ip} (host port chosen by Docker)" if self.publish_host_ip else (
                "exposed, not published")
            lines.append(f"    ports:      {', '.join(f'{p}/tcp' for p in self.ports)} {where}")
        if self.privileged:
            lines.append("    privileged: true")
        restart = f"on-failure, at most {self.restart_max} times (REPLICA)" if self.restart_max else "no"
        lines.append(f"    restart:    {restart}")
        lines.append(f"    stop grace: {self.stop_timeout}s (SIGTERM, then SIGKILL)")
        lines.append("    env:")
        for key, value in self.env.items():
            shown = "<copied from the submitting environment>" if key in self.host_env else value
            lines.append(f"      {key}={shown}")
        lines.append("    labels:")
        lines += [f"      {key}={value}" for key, value in self.labels.items() if key != LABEL_ROLE]
        lines.append(f"      {LABEL_ROLE}=<the role as JSON, for describe>")
        return lines


@dataclass
class DockerJob:
    """Everything ``schedule`` creates for one app, in the order it creates it."""

    app_id: str
    session_name: str
    network: str
    create_network: bool
    pull: str
    containers: List[DockerContainer]
    engine: str = ""

    @property
    def images(self) -> List[str]:
        return list(dict.fromkeys(c.image for c in self.containers))

    @property
    def volumes(self) -> List[str]:
        return list(dict.fromkeys(v.split(":", 1)[0] for c in self.containers for v in c.volumes))

    def __str__(self) -> str:
        lines = [f"docker app {self.app_id} (session {self.session_name!r})"]
        if self.engine:
            lines.append(f"engine: {self.engine}")
        pulls = {"missing": "pulled only where missing locally", "always": "always pulled", "never": "never pulled"}
        lines.append(f"images ({pulls[self.pull]}):")
        lines += [f"  {image}" for image in self.images]
        if self.create_network:
            lines.append(f"network: {self.network} (created for this app; removed by cancel and delete)")
        else:
            lines.append(f"network: {self.network} (exists already; not created or removed by torchspec)")
        if self.volumes:
            lines.append("volumes (Docker creates a missing one; torchspec never removes volumes):")
            lines += [f"  {volume}" for volume in self.volumes]
        lines.append(f"containers ({len(self.containers)}):")
        for container in self.containers:
            lines += container.describe_lines()
        return "\n".join(lines)


# ----------------------------------------------------------------------------
# Pure translator: AppDef + cfg -> request
# ----------------------------------------------------------------------------


def container_name(app_id: str, role_name: str, replica_id: int) -> str:
    """``{app_id}-{role}-{k}``: the container's name and its hostname on the app's network.

    The role part is shortened so that the whole stays a valid hostname
    (63 characters) for up to a million replicas.
    """
    return f"{app_id}-{dns_label(role_name, max_len=max(1, 55 - len(app_id)))}-{replica_id}"


def copied_env(patterns: Iterable[str], environ: Mapping[str, str]) -> Dict[str, str]:
    """The variables of ``environ`` whose names match one of ``patterns`` (exact names or globs)."""
    wanted = list(patterns)
    return {key: value for key, value in environ.items() if any(fnmatch.fnmatchcase(key, p) for p in wanted)}


def _mounts(role: Role, cwd: str) -> Tuple[List[str], List[str], List[str]]:
    """Docker ``binds``, named ``volumes`` and ``devices`` for the role's mounts.

    A relative bind source is taken relative to ``cwd``, since Docker
    only accepts absolute host paths.
    """
    binds, volumes, devices = [], [], []
    for mount in role.mounts:
        if isinstance(mount, BindMount):
            src = os.path.abspath(os.path.join(cwd, os.path.expanduser(mount.src_path)))
            binds.append(f"{src}:{mount.dst_path}:{'ro' if mount.read_only else 'rw'}")
        elif isinstance(mount, VolumeMount):
            volumes.append(f"{mount.src}:{mount.dst_path}:{'ro' if mount.read_only else 'rw'}")
        elif isinstance(mount, DeviceMount):
            devices.append(f"{mount.src_path}:{mount.dst_path}:{mount.permissions}")
    for name, count in role.resource.devices.items():
        pattern = KNOWN_DEVICES.get(name)
        if pattern is None:
            raise ValueError(
                f"role {role.name!r}: Docker cannot provide the device {name!r};"
                f" it knows {', '.join(sorted(KNOWN_DEVICES))}. Use a device mount instead"
            )
        devices += [f"{pattern.format(i)}:{pattern.format(i)}:rwm" for i in range(count)]
    return binds, volumes, devices


def _stop_timeout(cfg: Mapping[str, CfgVal]) -> int:
    value = cfg.get("stop_timeout")
    seconds = DEFAULT_STOP_TIMEOUT_S if value is None else int(value)  # type: ignore[arg-type]
    if seconds < 0:
        raise ValueError(f"stop_timeout must be 0 or more seconds, not {seconds}")
    return seconds


def _gpu_device_ids(role: Role) -> List[str]:
    value = role.resource.capabilities.get(CAP_GPU_DEVICE_IDS)
    if value is None:
        return []
    if not isinstance(value, (str, int, list, tuple)):
        raise ValueError(f"role {role.name!r}: capability {CAP_GPU_DEVICE_IDS} must be a list or"
                         f" comma-separated GPU ids such as \"0,2\", not {value!r}")
    items = value if isinstance(value, (list, tuple)) else str(value).split(",")
    return [str(item).strip() for item in items if str(item).strip()]


def role_to_containers(
    role: Role,
    app_id: str,
    session_name: str,
    network: str,
    cfg: Mapping[str, CfgVal],
    cwd: str,
    environ: Mapping[str, str],
) -> List[DockerContainer]:
    """One :class:`DockerContainer` per replica of ``role``, macros substituted.

    Each replica's env is, later entries winning: variables copied from the
    submitting shell (``copy_env``), the role's env, the ``env`` run option,
    then torchspec's own variables; ``PYTHONUNBUFFERED=1`` where nobody set it.
    """
    from torchspec.convert import dump_app

    role_json = json.dumps(dump_app(AppDef(name=app_id, roles=[role]))["roles"][0], separators=(",", ":"))
    binds, volumes, devices = _mounts(role, cwd)
    # only user-defined networks resolve container names; on host and none every replica is "localhost"
    per_container_hosts = network not in BUILTIN_NETWORKS
    if network == "bridge" and role.num_replicas > 1:
        raise ValueError(
            f"role {role.name!r} has {role.num_replicas} replicas, but on Docker's default bridge network"
            f" containers cannot find each other by name, so replicas could not reach rank 0: leave the"
            f" network run option unset (a network per app) or name a user-defined network"
        )
    rank0_host = container_name(app_id, role.name, 0) if per_container_hosts else LOCALHOST
    host_env = copied_env(cfg.get("copy_env") or [], environ)  # type: ignore[arg-type]
    raw_env = cfg.get("env")
    extra_env = {str(k): str(v) for k, v in raw_env.items()} if isinstance(raw_env, dict) else {}
    retry = RetryPolicy(role.retry_policy)
    shm = cfg.get("shm_size")
    publish = cfg.get("publish_ports")
    containers = []
    for replica_id in range(role.num_replicas):
        values = macros.Values(img_root="", app_id=app_id, replica_id=str(replica_id), rank0_env=ENV_RANK0_HOST)
        filled = values.apply(role)
        name = container_name(app_id, role.name, replica_id)
        env = dict(host_env)
        env.update(filled.env)
        env.update({key: values.substitute(value) for key, value in extra_env.items()})
        env.update(replica_env(app_id, role.name, replica_id, role.num_replicas, rank0_host))
        env.setdefault("PYTHONUNBUFFERED", "1")
        labels = {
            LABEL_APP_ID: app_id,
            LABEL_ROLE_NAME: role.name,
            LABEL_REPLICA_ID: str(replica_id),
            LABEL_NUM_REPLICAS: str(role.num_replicas),
            LABEL_ATTEMPT: "0",
            LABEL_SESSION: session_name,
            LABEL_NETWORK: network,
            LABEL_VERSION: __version__,
            LABEL_KEEP: "1" if cfg.get("keep_containers") else "0",
            LABEL_ROLE: role_json,
        }
        workdir = filled.metadata.get(META_WORKDIR)
        if workdir is not None and not (isinstance(workdir, str) and workdir.startswith("/")):
            raise ValueError(f"role {role.name!r}: metadata {META_WORKDIR} must be an absolute path, not {workdir!r}")
        containers.append(
            DockerContainer(
                name=name,
                role=role.name,
                replica_id=replica_id,
                image=role.image,
                entrypoint=[filled.entrypoint],
                command=list(filled.args),
                env=env,
                labels=labels,
                network=network,
                hostname=name if network != "host" else None,
                working_dir=str(workdir) if workdir else None,
                binds=binds,
                volumes=volumes,
                devices=devices,
                nano_cpus=int(role.resource.cpu * 1e9) if role.resource.cpu > 0 else None,
                mem_limit_mb=role.resource.memMB if role.resource.memMB > 0 else None,
                shm_size=str(shm) if shm else None,
                gpu_count=max(role.resource.gpu, 0),
                gpu_device_ids=_gpu_device_ids(role),
                ports=sorted(set(role.port_map.values())),
                publish_host_ip=str(cfg.get("publish_host_ip") or "127.0.0.1") if publish else None,
                privileged=bool(cfg.get("privileged")),
                restart_max=role.max_retries if retry == RetryPolicy.REPLICA else 0,
                stop_timeout=_stop_timeout(cfg),
                host_env=[key for key in host_env if env.get(key) == host_env[key]],
            )
        )
    return containers


def app_to_job(
    app: AppDef, cfg: Mapping[str, CfgVal], app_id: str, session_name: str, cwd: str, environ: Mapping[str, str]
) -> DockerJob:
    """The whole request for ``app`` under a resolved ``cfg``; talks to no engine."""
    if not app.roles:
        raise ValueError(f"app {app.name!r} has no roles")
    hosts: Dict[str, str] = {}
    for role in app.roles:
        if role.num_replicas <= 0:
            raise ValueError(f"role {role.name!r} has {role.num_replicas} replicas; it needs at least one")
        host = container_name(app_id, role.name, 0)
        if host in hosts:
            raise ValueError(
                f"roles {hosts[host]!r} and {role.name!r} would share the container names {host[:-2]}-K;"
                f" rename one of them"
            )
        hosts[host] = role.name
    pull = str(cfg.get("pull") or "missing")
    if pull not in PULL_POLICIES:
        raise ValueError(f"pull must be one of {', '.join(PULL_POLICIES)}, not {pull!r}")
    network = str(cfg.get("network") or "")
    create_network = not network
    network = network or f"torchspec-{app_id}"
    containers = [
        c for role in app.roles for c in role_to_containers(role, app_id, session_name, network, cfg, cwd, environ)
    ]
    return DockerJob(
        app_id=app_id,
        session_name=session_name,
        network=network,
        create_network=create_network,
        pull=pull,
        containers=containers,
    )


# ----------------------------------------------------------------------------
# Reading the engine back: what a container says about its replica
# ----------------------------------------------------------------------------


@dataclass
class ContainerView:
    """What ``docker inspect`` says about one container of an app, in torchspec's terms."""

    id: str
    name: str
    role: str
    replica_id: int
    attempt: int
    status: str
    exit_code: Optional[int]
    restart_count: int
    oom_killed: bool
    error: str
    started_at: str
    finished_at: str
    labels: Dict[str, str]
    hostname: str
    ports: Dict[str, Any]
    created: str

    @property
    def cancelled(self) -> bool:
        return self.name.endswith(CANCELLED_SUFFIX)

    @property
    def replaced(self) -> bool:
        """A container an APPLICATION or ROLE retry replaced (renamed ``NAME.attemptN``)."""
        return ATTEMPT_SUFFIX in self.name.rsplit("-", 1)[-1]

    @property
    def state(self) -> AppState:
        if self.status == "exited":
            if self.cancelled:
                return AppState.CANCELLED
            return AppState.SUCCEEDED if self.exit_code == 0 else AppState.FAILED
        if self.cancelled and self.status != "running":
            return AppState.CANCELLED
        return _DOCKER_STATES.get(self.status, AppState.UNKNOWN)

    @property
    def role_spec(self) -> Dict[str, Any]:
        try:
            return json.loads(self.labels.get(LABEL_ROLE, "{}"))
        except ValueError:
            return {}

    @property
    def retry_policy(self) -> str:
        return str(self.role_spec.get("retry_policy", RetryPolicy.APPLICATION.value))

    @property
    def max_retries(self) -> int:
        return int(self.role_spec.get("max_retries", 0) or 0)

    @property
    def retry_pending(self) -> bool:
        """Failed, but the watcher restarts it (APPLICATION or ROLE retries left)."""
        return (
            self.state == AppState.FAILED
            and self.retry_policy in (RetryPolicy.APPLICATION.value, RetryPolicy.ROLE.value)
            and self.attempt < self.max_retries
        )

    @property
    def num_restarts(self) -> int:
        return self.attempt + self.restart_count

    def describe_failure(self) -> str:
        """``trainer/1 exited with code 3 after 2 restarts (OOMKilled)`` and the like."""
        what = f"{self.role}/{self.replica_id} exited with code {self.exit_code}"
        if self.exit_code in (137, 143) and not self.oom_killed:
            what += f" (killed by SIG{'KILL' if self.exit_code == 137 else 'TERM'})"
        if self.num_restarts:
            what += f" after {self.num_restarts} restart{'s' if self.num_restarts != 1 else ''}"
        if self.oom_killed:
            what += " (OOMKilled: it ran out of its memory limit)"
        if self.error:
            what += f": {self.error}"
        return what


def view_of(attrs: Mapping[str, Any]) -> ContainerView:
    """A :class:`ContainerView` from ``docker inspect`` output."""
    state = attrs.get("State") or {}
    config = attrs.get("Config") or {}
    labels = dict(config.get("Labels") or {})
    ports = (attrs.get("NetworkSettings") or {}).get("Ports") or {}
    return ContainerView(
        id=attrs["Id"],
        name=str(attrs.get("Name", "")).lstrip("/"),
        role=labels.get(LABEL_ROLE_NAME, ""),
        replica_id=_int(labels.get(LABEL_REPLICA_ID)),
        attempt=_int(labels.get(LABEL_ATTEMPT)),
        status=str(state.get("Status", "")),
        exit_code=state.get("ExitCode") if state.get("Status") in ("exited", "dead") else None,
        restart_count=int(attrs.get("RestartCount") or 0),
        oom_killed=bool(state.get("OOMKilled")),
        error=str(state.get("Error") or ""),
        started_at=str(state.get("StartedAt") or ""),
        finished_at=str(state.get("FinishedAt") or ""),
        labels=labels,
        hostname=str(config.get("Hostname") or ""),
        ports=ports,
        created=str(attrs.get("Created", "")),
    )


def _int(text: Optional[str]) -> int:
    try:
        return int(text or 0)
    except ValueError:
        return 0


@dataclass
class AppView:
    """All containers of one app, with each replica's current one picked out."""

    app_id: str
    containers: List[ContainerView]

    @property
    def current(self) -> List[ContainerView]:
        """Each replica's latest container (highest attempt), in role then replica order."""
        latest: Dict[Tuple[str, int], ContainerView] = {}
        for c in self.containers:
            key = (c.role, c.replica_id)
            if key not in latest or c.attempt > latest[key].attempt:
                latest[key] = c
        return sorted(latest.values(), key=lambda c: (self.role_order.index(c.role), c.replica_id))

    @property
    def role_order(self) -> List[str]:
        """Roles in submission order: containers were created in it, and names sort within a role."""
        order: List[str] = []
        for c in sorted(self.containers, key=lambda c: (c.created, c.name)):
            if c.role not in order:
                order.append(c.role)
        return order

    @property
    def state(self) -> AppState:
        current = self.current
        states = [c.state for c in current]
        if AppState.CANCELLED in states:
            return AppState.CANCELLED
        if any(c.state == AppState.FAILED and not c.retry_pending for c in current):
            return AppState.FAILED
        if states and all(s == AppState.SUCCEEDED for s in states):
            return AppState.SUCCEEDED
        if AppState.RUNNING in states:
            return AppState.RUNNING
        return AppState.PENDING

    @property
    def msg(self) -> str:
        current = self.current
        failed = [c for c in current if c.state == AppState.FAILED and not c.retry_pending]
        if failed:
            first = min(failed, key=lambda c: c.finished_at)
            return first.describe_failure()
        pending = [c for c in current if c.retry_pending]
        if pending:
            c = pending[0]
            return f"{c.describe_failure()}; restarting ({c.retry_policy} retry {c.attempt + 1} of {c.max_retries})"
        restarting = [c for c in current if c.status == "restarting"]
        if restarting:
            return f"{restarting[0].role}/{restarting[0].replica_id} is being restarted by Docker (REPLICA retry)"
        if any(c.cancelled for c in current):
            return "cancelled"
        return ""

    def will_replace(self, container: ContainerView) -> bool:
        """Whether the watcher is about to replace ``container`` for an APPLICATION or ROLE retry.

        True while a replica of its group (the app, or for ROLE its role) has
        failed with retries left, or has already been replaced by a later
        attempt that ``container`` has not caught up with.
        """
        return any(
            (c.retry_pending or c.attempt > container.attempt)
            and (c.retry_policy == RetryPolicy.APPLICATION.value or c.role == container.role)
            for c in self.current
        )

    def replicas_of(self, role: str, replica_id: int) -> List[ContainerView]:
        """Every container replica ``role/replica_id`` ran in, oldest attempt first."""
        found = [c for c in self.containers if c.role == role and c.replica_id == replica_id]
        return sorted(found, key=lambda c: c.attempt)


@dataclass
class DockerReplicaStatus(ReplicaStatus):
    """A ReplicaStatus with what the engine knows: exit code and restarts (a subclass, so TorchX's type is kept)."""

    exit_code: Optional[int] = None
    num_restarts: int = 0


def read_app(client: "docker.DockerClient", app_id: str) -> AppView:
    """Every container of ``app_id``, inspected; an empty view when the engine has none."""
    api = client.api
    summaries = api.containers(all=True, filters={"label": f"{LABEL_APP_ID}={app_id}"})
    found: Dict[str, ContainerView] = {}

    def inspect(container_id: str) -> None:
        try:
            found[container_id] = view_of(api.inspect_container(container_id))
        except _docker_errors().NotFound:
            pass  # removed between the list and the inspect

    ids = [summary["Id"] for summary in summaries]
    _in_parallel(inspect, ids)
    return AppView(app_id=app_id, containers=[found[i] for i in ids if i in found])


# ----------------------------------------------------------------------------
# Options
# ----------------------------------------------------------------------------


def docker_run_opts() -> runopts:
    """The run options of ``docker``; declared once, here."""
    opts = runopts()
    opts.add(
        "network",
        type_=str,
        default=None,
        help="network for the containers: host, none, bridge or an existing network's name"
        " (default: a new network per app, with a hostname per replica, removed with the app)",
    )
    opts.add("copy_env", type_=List[str], default=None,
             help="environment variables to copy from the submitting shell: names or globs, e.g. AWS_*;HF_TOKEN")
    opts.add("env", type_=Dict[str, str], default=None,
             help="extra environment variables for every replica, as KEY:VALUE;KEY2:VALUE2; they override the role's")
    opts.add("privileged", type_=bool, default=False, help="run the containers privileged")
    opts.add("shm_size", type_=str, default=None, help="size of /dev/shm, e.g. 2g (Docker's default is 64m)")
    opts.add("publish_ports", type_=bool, default=False,
             help="publish every port of a role's port_map on a host port Docker picks (see status)")
    opts.add("publish_host_ip", type_=str, default="127.0.0.1",
             help="host address published ports listen on (0.0.0.0 for every interface)")
    opts.add("pull", type_=str, default="missing",
             help="when to pull images: missing (only images not present locally), always, never")
    opts.add("keep_containers", type_=bool, default=False,
             help="cancel stops the containers but keeps them (and their logs) until torchspec delete")
    opts.add("stop_timeout", type_=int, default=DEFAULT_STOP_TIMEOUT_S,
             help="seconds between SIGTERM and SIGKILL when containers are stopped")
    return opts


# ----------------------------------------------------------------------------
# The scheduler
# ----------------------------------------------------------------------------


def _docker_errors() -> Any:
    import docker.errors

    return docker.errors


class DockerScheduler(Scheduler[Dict[str, CfgVal]]):
    """Runs each replica as a container on the engine ``DOCKER_HOST`` (or the default socket) points at.

    ``progress`` receives one line per step of a workspace build; the CLI
    points it at the terminal, the library default logs at INFO.
    """

    def __init__(self, session_name: str, client: Optional["docker.DockerClient"] = None) -> None:
        super().__init__("docker", session_name)
        self._client_obj = client
        self.progress: Callable[[str], None] = lambda line: logger.info("%s", line)

    # -- the engine ---------------------------------------------------------

    def client(self) -> "docker.DockerClient":
        """A client that has reached the engine, or a :class:`BackendError` that says how to start one."""
        if self._client_obj is not None:
            return self._client_obj
        import docker

        where = os.environ.get("DOCKER_HOST") or "the default socket (unix:///var/run/docker.sock)"
        try:
            client = docker.from_env()
            client.ping()
        except Exception as e:  # noqa: BLE001 - the SDK raises several unrelated types for "no engine"
            raise BackendError(
                f"cannot reach the Docker engine at {where}: {_reason(e)}",
                "start it (e.g. `sudo systemctl start docker`, or `sudo dockerd &`),"
                " or point DOCKER_HOST at a running engine",
            ) from None
        self._client_obj = client
        return client

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
        job.engine = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
        return AppDryRunInfo(job, str)

    def schedule(self, dryrun_info: AppDryRunInfo[DockerJob]) -> str:
        """Create the network and every container, then start them; all or nothing.

        If anything fails half way, what was created is removed again and
        the error says which step failed.
        """
        job = dryrun_info.request
        client = self.client()
        errors = _docker_errors()
        self._ensure_images(client, job)
        if not job.create_network and job.network not in BUILTIN_NETWORKS:
            try:
                client.api.inspect_network(job.network)
            except errors.NotFound:
                raise BackendError(f"network {job.network!r} does not exist",
                                   f"create it with `docker network create {job.network}`,"
                                   " or leave the network run option unset for a network per app") from None
        created: List[str] = []
        network_id: Optional[str] = None
        try:
            if job.create_network:
                network_id = client.api.create_network(
                    job.network, driver="bridge", labels={LABEL_APP_ID: job.app_id, LABEL_VERSION: __version__}
                )["Id"]
            for container in job.containers:
                created.append(client.api.create_container(**container.create_kwargs(client.api))["Id"])
            # the engine takes ~0.5 s to start a container and does several at once
            _in_parallel(client.api.start, created)
        except errors.APIError as e:
            self._remove(client, created, network_id)
            step = "starting" if len(created) == len(job.containers) else "creating"
            raise BackendError(f"Docker refused {step} app {job.app_id}: {_reason(e)}",
                               "nothing of the app was left behind") from None
        try:
            _start_watcher(job.app_id)
        except OSError as e:
            logger.warning("cannot start the watcher of %s (%s): APPLICATION and ROLE retries will not happen,"
                           " and a replica that fails will not stop the others", job.app_id, e)
        return job.app_id

    def _ensure_images(self, client: "docker.DockerClient", job: DockerJob) -> None:
        for image in job.images:
            self._ensure_image(client, image, job.pull)

    def _ensure_image(self, client: "docker.DockerClient", image: str, pull: str) -> None:
        """Pull ``image`` if the pull policy asks for it; under ``missing`` a local image is never pulled."""
        errors = _docker_errors()
        present = True
        try:
            client.api.inspect_image(image)
        except errors.ImageNotFound:
            present = False
        if present and pull != "always":
            return
        if pull == "never":
            raise BackendError(f"image {image!r} is not on the engine and the pull policy is never",
                               "build or load it (docker build/load/import), or use -c pull=missing")
        self.progress(f"pulling {image}")
        try:
            repository, tag = _split_image(image)
            client.api.pull(repository, tag=tag)
        except errors.APIError as e:
            if present:
                logger.warning("cannot pull %s, using the local copy: %s", image, _reason(e))
                return
            raise BackendError(f"cannot pull image {image!r}: {_reason(e)}",
                               "check its name and registry access, or build it locally") from None

    # -- asking -------------------------------------------------------------

    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        from torchspec.convert import build_role

        view = read_app(self.client(), app_id)
        if not view.containers:
            return None
        current = view.current
        roles_statuses: List[RoleStatus] = []
        roles: List[Role] = []
        metadata: Dict[str, str] = {}
        for role_name in view.role_order:
            replicas: List[ReplicaStatus] = []
            for c in (c for c in current if c.role == role_name):
                replicas.append(
                    DockerReplicaStatus(
                        id=c.replica_id,
                        state=c.state,
                        role=role_name,
                        hostname=c.hostname,
                        structured_error_msg=NONE,
                        exit_code=c.exit_code,
                        num_restarts=c.num_restarts,
                    )
                )
                for port, bindings in (c.ports or {}).items():
                    for binding in bindings or []:
                        metadata[f"ports.{role_name}/{c.replica_id}.{port}"] = (
                            f"{binding.get('HostIp')}:{binding.get('HostPort')}"
                        )
            roles_statuses.append(RoleStatus(role=role_name, replicas=replicas))
            spec = next(c.role_spec for c in current if c.role == role_name)
            try:
                roles.append(build_role(spec))
            except (KeyError, TypeError, ValueError) as e:
                logger.debug("cannot rebuild role %s of %s: %s", role_name, app_id, e)
        first = current[0] if current else None
        if first is not None:
            metadata["session_name"] = first.labels.get(LABEL_SESSION, "")
            metadata["network"] = first.labels.get(LABEL_NETWORK, "")
        return DescribeAppResponse(
            app_id=app_id,
            state=view.state,
            num_restarts=max((c.num_restarts for c in current), default=0),
            msg=view.msg,
            roles_statuses=roles_statuses,
            roles=roles,
            metadata=metadata,
        )

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
                found.append(ListAppResponse(app_id=app_id, state=view.state))
        return found

    def exists(self, app_id: str) -> bool:
        summaries = self.client().api.containers(all=True, filters={"label": f"{LABEL_APP_ID}={app_id}"})
        return bool(summaries)

    # -- cancelling and deleting -------------------------------------------------

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

    def delete(self, app_id: str) -> None:
        """Stop the app if it runs, then remove its containers (kept ones too) and its network.

        Logs go with the containers.  Volumes are never removed: they hold data.
        """
        client = self.client()
        self._stop_all(client, app_id)
        self._remove_all(client, app_id)
        with contextlib.suppress(OSError):
            os.remove(_watcher_log(app_id))

    def _stop_all(self, client: "docker.DockerClient", app_id: str, also: Iterable[ContainerView] = ()) -> None:
        """Mark (rename) and stop every live container of the app, and those in ``also``.

        The watcher may be half way through replacing containers for a retry
        while we stop them, creating new ones as we go; so this repeats until
        a fresh look finds nothing live.
        """
        extra = list(also)
        for _ in range(20):
            view = read_app(client, app_id)
            live = [c for c in view.containers if c.status in _LIVE_STATUSES] + extra
            extra = []
            if not live:
                return
            for c in live:
                if not c.cancelled and not c.replaced:
                    try:
                        client.api.rename(c.id, c.name + CANCELLED_SUFFIX)
                    except _docker_errors().APIError as e:
                        logger.debug("cannot rename %s: %s", c.name, _reason(e))
            _in_parallel(lambda c: _stop(client, c.id), live)
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
        errors = _docker_errors()
        for container_id in container_ids:
            try:
                client.api.remove_container(container_id, force=True)
            except errors.NotFound:
                pass
            except errors.APIError as e:
                logger.warning("cannot remove container %s: %s", container_id[:12], _reason(e))
        if network_id:
            try:
                client.api.remove_network(network_id)
            except errors.APIError as e:
                logger.warning("cannot remove network %s: %s", network_id[:12], _reason(e))

    def _remove_networks(self, client: "docker.DockerClient", app_id: str) -> None:
        for network in client.api.networks(filters={"label": f"{LABEL_APP_ID}={app_id}"}):
            self._remove(client, [], network["Id"])

    # -- logs ---------------------------------------------------------------

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
            raise ValueError(f"unknown app {app_id!r} on the Docker engine")
        roles = view.role_order
        if role_name not in roles:
            raise ValueError(f"app {app_id!r} has no role {role_name!r}; its roles: {', '.join(roles)}")
        ids = sorted({c.replica_id for c in view.containers if c.role == role_name})
        if k not in ids:
            raise ValueError(f"role {role_name!r} of app {app_id!r} has replicas 0..{max(ids)}, not {k}")
        stream = Stream(streams) if streams is not None else Stream.COMBINED
        pattern = re.compile(regex) if regex else None
        return self._lines(client, app_id, role_name, k, stream, pattern, aware(since), aware(until), should_tail)

    def _lines(
        self,
        client: "docker.DockerClient",
        app_id: str,
        role_name: str,
        k: int,
        stream: Stream,
        pattern: Optional[Pattern[str]],
        since: Optional[datetime],
        until: Optional[datetime],
        should_tail: bool,
    ) -> Iterator[str]:
        # container id -> time of the last line shown from it (None: nothing shown yet)
        shown: Dict[str, Optional[datetime]] = {}
        finished: set[str] = set()
        while True:
            attempts = read_app(client, app_id).replicas_of(role_name, k)
            for c in attempts:
                if c.id in finished:
                    continue
                if c.id not in shown and c.attempt > 0:
                    marker = f"--- torchspec: restart {c.attempt} of replica {role_name}/{k} ---\n"
                    if pattern is None or pattern.search(marker):
                        yield marker
                shown.setdefault(c.id, None)
                follow = should_tail and c is attempts[-1]
                for when, text in _container_lines(client, c.id, stream, since, until, follow, after=shown[c.id]):
                    if until is not None and when is not None and when >= until:
                        return
                    shown[c.id] = when or shown[c.id]
                    if pattern is None or pattern.search(text):
                        yield text
                if c is not attempts[-1]:
                    finished.add(c.id)
            if not should_tail or not attempts:
                return
            if until is not None and datetime.now(timezone.utc) >= until:
                return
            if not self._may_write_more(client, app_id, role_name, k, attempts[-1].id):
                return

    def _may_write_more(self, client: "docker.DockerClient", app_id: str, role_name: str, k: int, last_id: str) -> bool:
        """Wait until replica ``role_name/k`` runs again (True) or can never run again (False).

        It runs again when Docker restarts its container (REPLICA) or the
        watcher replaces it (APPLICATION, ROLE); a watcher that has not done
        so within ``RETRY_WAIT_S`` is taken to be gone.
        """
        deadline = time.monotonic() + RETRY_WAIT_S
        while time.monotonic() < deadline:
            view = read_app(client, app_id)
            attempts = view.replicas_of(role_name, k)
            if not attempts:
                return False
            latest = attempts[-1]
            if latest.id != last_id or latest.status in ("running", "paused"):
                return True
            if latest.cancelled or view.state in (AppState.FAILED, AppState.CANCELLED, AppState.SUCCEEDED):
                return False
            if latest.status not in ("restarting", "created") and not view.will_replace(latest):
                return False
            time.sleep(0.2)
        logger.warning("%s/%d of %s: no retry came within %ds; stopped following", role_name, k, app_id, RETRY_WAIT_S)
        return False

    # -- workspaces ---------------------------------------------------------

    def build_workspace_and_update_role(self, role: Role, workspace: Any, cfg: Mapping[str, CfgVal]) -> None:
        """Build ``role.image`` with the workspace's files copied on top, and make the role use it.

        The image is tagged by a hash of its base image and the files, so an
        unchanged folder reuses the image built before and builds nothing.
        Files go to the image's working directory; ``.dockerignore`` in a
        project folder is honoured; symbolic links are copied as links.
        """
        ws = workspace if isinstance(workspace, Workspace) else Workspace.from_str(str(workspace))
        client = self.client()
        errors = _docker_errors()
        self._ensure_image(client, role.image, str(cfg.get("pull") or "missing"))
        base_id = client.api.inspect_image(role.image)["Id"]
        context, digest = workspace_context(role.image, base_id, ws)
        tag = f"torchspec-workspace:{digest[:16]}"
        try:
            client.api.inspect_image(tag)
            self.progress(f"workspace unchanged: reusing image {tag}")
            role.image = tag
            return
        except errors.ImageNotFound:
            pass
        self.progress(f"building image {tag} from {role.image} and {ws}")
        try:
            for chunk in client.api.build(fileobj=io.BytesIO(context), custom_context=True, tag=tag, rm=True,
                                          forcerm=True, pull=False, decode=True,
                                          labels={LABEL_WORKSPACE_BASE: role.image, LABEL_VERSION: __version__}):
                if "error" in chunk:
                    raise BackendError(f"building the workspace image failed: {chunk['error'].strip()}")
                text = str(chunk.get("stream", "")).strip()
                if text:
                    self.progress(text)
        except errors.APIError as e:
            raise BackendError(f"building the workspace image failed: {_reason(e)}") from None
        role.image = tag


def workspace_context(base_image: str, base_id: str, workspace: Workspace) -> Tuple[bytes, str]:
    """A build context (tar) with a Dockerfile that copies the workspace onto ``base_image``, and its hash.

    The tar is byte-for-byte reproducible (sorted entries, zero times and
    owners), so equal folders give equal hashes.
    """
    files: Dict[str, str] = {}
    for src, dst in workspace.projects.items():
        root = os.path.abspath(src)
        if not os.path.isdir(root):
            raise ValueError(f"workspace {src!r} is not a folder")
        ignore = _dockerignore(root)
        # a "!" pattern may re-include a file inside an excluded folder, so folders are pruned only without one
        prune = not any(negate for negate, _ in ignore)
        for folder, dirs, names in os.walk(root):
            dirs.sort()
            rel_folder = os.path.relpath(folder, root)
            for name in sorted(names) + [d for d in dirs if os.path.islink(os.path.join(folder, d))]:
                rel = os.path.normpath(os.path.join(rel_folder, name)).replace(os.sep, "/")
                if rel in (".dockerignore",) or _ignored(rel, ignore):
                    continue
                files[os.path.normpath(os.path.join("ws", dst, rel))] = os.path.join(folder, name)
            dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(folder, d)) and not (
                prune and _ignored(os.path.normpath(os.path.join(rel_folder, d)).replace(os.sep, "/"), ignore))]
    dockerfile = f"FROM {base_image}\nCOPY ws/ ./\n".encode()
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        _add_bytes(tar, "Dockerfile", dockerfile)
        _add_bytes(tar, ".dockerignore", b"Dockerfile\n.dockerignore\n")
        for arcname in sorted(files):
            info = tar.gettarinfo(files[arcname], arcname=arcname)
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            if info.isfile():
                with open(files[arcname], "rb") as src_file:
                    tar.addfile(info, src_file)
            elif info.issym() or info.isdir():
                tar.addfile(info)
    data = out.getvalue()
    digest = hashlib.sha256(base_id.encode() + b"\0" + data).hexdigest()
    return data, digest


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), 0o644
    tar.addfile(info, io.BytesIO(data))


def _dockerignore(root: str) -> List[Tuple[bool, Pattern[str]]]:
    """The patterns of ``root/.dockerignore`` as (is an exception, compiled regex), in order."""
    try:
        with open(os.path.join(root, ".dockerignore"), encoding="utf-8") as f:
            lines = [line.strip() for line in f]
    except OSError:
        return []
    patterns = []
    for line in lines:
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        text = os.path.normpath(line[1:].strip() if negate else line).lstrip("/")
        if text and text != ".":
            patterns.append((negate, re.compile(_ignore_regex(text))))
    return patterns


def _ignore_regex(pattern: str) -> str:
    """Docker's ``.dockerignore`` matching as a regex: ``*`` and ``?`` stay within one path part,
    ``**`` spans any number of parts, and a pattern also matches everything below what it names."""
    out, i = "", 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
            continue
        if pattern.startswith("**", i):
            out, i = out + ".*", i + 2
            continue
        if c == "*":
            out += "[^/]*"
        elif c == "?":
            out += "[^/]"
        elif c == "[" and "]" in pattern[i + 1:]:
            end = pattern.index("]", i + 1)
            body = pattern[i + 1:end]
            out += "[" + ("^" + body[1:] if body.startswith("^") else re.escape(body).replace("\\-", "-")) + "]"
            i = end
        elif c == "\\" and i + 1 < len(pattern):
            i += 1
            out += re.escape(pattern[i])
        else:
            out += re.escape(c)
        i += 1
    return f"^{out}(?:/.*)?$"


def _ignored(rel: str, patterns: List[Tuple[bool, Pattern[str]]]) -> bool:
    """Whether ``.dockerignore`` excludes ``rel`` (``/``-separated): the last matching pattern decides."""
    ignored = False
    for negate, regex in patterns:
        if regex.match(rel):
            ignored = not negate
    return ignored


# ----------------------------------------------------------------------------
# Engine helpers
# ----------------------------------------------------------------------------


def _reason(e: BaseException) -> str:
    """The engine's own explanation of an error, without the SDK's HTTP noise."""
    explanation = getattr(e, "explanation", None)
    if explanation:
        return str(explanation.decode() if isinstance(explanation, bytes) else explanation)
    text = str(e)
    match = re.search(r"\((.*)\)\)?$", text)
    return match.group(1) if "Connection" in text and match else text


def _split_image(image: str) -> Tuple[str, Optional[str]]:
    """``repo:tag`` -> (repo, tag); a ``:`` inside a registry host (``host:5000/repo``) is not a tag."""
    if "@" in image:
        return image, None
    name, sep, tag = image.rpartition(":")
    if sep and "/" not in tag:
        return name, tag
    return image, "latest"


def _stop(client: "docker.DockerClient", container_id: str) -> None:
    """Stop with the container's own grace period (set at creation); gone already is fine."""
    errors = _docker_errors()
    try:
        timeout = client.api.inspect_container(container_id)["Config"].get("StopTimeout") or DEFAULT_STOP_TIMEOUT_S
        client.api.stop(container_id, timeout=int(timeout))
    except errors.NotFound:
        pass
    except errors.APIError as e:
        logger.warning("cannot stop container %s: %s", container_id[:12], _reason(e))


def _in_parallel(fn: Callable[[Any], Any], items: List[Any]) -> None:
    """Run ``fn`` over ``items`` on threads (the engine works on several requests at once),
    so stopping 16 containers takes one grace period, not 16; the first exception is raised."""
    if len(items) <= 1:
        for item in items:
            fn(item)
        return
    with ThreadPoolExecutor(max_workers=min(8, len(items))) as pool:
        list(pool.map(fn, items))


def _watcher_log(app_id: str) -> str:
    """Where the watcher of ``app_id`` writes what it does (under the state folder, as local apps)."""
    from torchspec.schedulers.state_dir import default_state_dir

    return os.path.join(default_state_dir(), "docker", f"{app_id}.watcher.log")


def _start_watcher(app_id: str) -> None:
    """Start the detached process that does APPLICATION/ROLE retries and stops an app that failed for good."""
    log_path = _watcher_log(app_id)
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    with open(log_path, "ab") as log:
        subprocess.Popen(
            [sys.executable, "-m", "torchspec.schedulers.docker_watcher", app_id],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )


def _container_lines(
    client: "docker.DockerClient",
    container_id: str,
    stream: Stream,
    since: Optional[datetime],
    until: Optional[datetime],
    follow: bool,
    after: Optional[datetime] = None,
) -> Iterator[Tuple[Optional[datetime], str]]:
    """``(time, line)`` of one container's log, read with the engine's timestamps, until it ends."""
    errors = _docker_errors()
    params: Dict[str, Any] = dict(
        stdout=stream in (Stream.STDOUT, Stream.COMBINED),
        stderr=stream in (Stream.STDERR, Stream.COMBINED),
        timestamps=True,
    )
    lower = max(filter(None, [since, after]), default=None)
    if lower is not None:
        params["since"] = int(lower.timestamp())
    if until is not None and not follow:
        params["until"] = int(until.timestamp()) + 1
    try:
        if follow:
            chunks: Iterable[bytes] = client.api.logs(container_id, stream=True, follow=True, **params)
        else:
            chunks = [client.api.logs(container_id, stream=False, follow=False, **params)]
        for when, text in stamped_lines(chunks):
            if when is not None and (since is not None and when < since or after is not None and when <= after):
                continue
            yield when, text
    except errors.NotFound:
        return


# ----------------------------------------------------------------------------
# Factory
# ----------------------------------------------------------------------------


def create_scheduler(session_name: str, **kwargs: Any) -> DockerScheduler:
    """The ``docker`` entry point; a ``client`` keyword (a ``docker.DockerClient``) is used if given."""
    return DockerScheduler(session_name, client=kwargs.get("client"))


__all__ = [
    "AppView",
    "ContainerView",
    "DockerContainer",
    "DockerJob",
    "DockerReplicaStatus",
    "DockerScheduler",
    "app_to_job",
    "container_name",
    "copied_env",
    "create_scheduler",
    "docker_run_opts",
    "read_app",
    "role_to_containers",
    "workspace_context",
]
