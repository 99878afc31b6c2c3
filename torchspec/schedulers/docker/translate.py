"""AppDef + run options -> the containers of one app: the request a dry run prints and ``schedule`` creates.

Pure: nothing here talks to an engine or writes a file, so a dry run (and
``lint --scheduler docker``) works without Docker.  :class:`DockerJob` is
the whole request; its ``__str__`` is the dry run's text.
"""

from __future__ import annotations

import fnmatch
import json
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Mapping, Optional, Tuple

from torchspec.errors import AppRefusedError
from torchspec.schedulers.docker.labels import (
    BUILTIN_NETWORKS,
    CAP_GPU_DEVICE_IDS,
    DEFAULT_STOP_TIMEOUT_S,
    KNOWN_DEVICES,
    LABEL_APP_ID,
    LABEL_APP_NAME,
    LABEL_ATTEMPT,
    LABEL_KEEP,
    LABEL_METADATA,
    LABEL_NETWORK,
    LABEL_NUM_REPLICAS,
    LABEL_REPLICA_ID,
    LABEL_ROLE,
    LABEL_ROLE_NAME,
    LABEL_SESSION,
    LABEL_VERSION,
    LOCALHOST,
    META_WORKDIR,
)
from torchspec.schedulers.api import labels_json, labels_of
from torchspec.schedulers.docker.options import pull_policy, stop_timeout
from torchspec.schedulers.images import check_container_images
from torchspec.schedulers.secrets import secret_env_by_role
from torchspec.schedulers.replicas import ENV_ATTEMPT, ENV_RANK0_HOST, dns_label, env_line, hosts_env, replica_env
from torchspec.specs import AppDef, BindMount, CfgVal, DeviceMount, RetryPolicy, Role, VolumeMount, macros
from torchspec.version import __version__

if TYPE_CHECKING:
    import docker


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
    #: secret variables: VAR -> [the carrier schedule reads its value under, the placeholder a dry run shows]
    secret_env: Dict[str, List[str]] = field(default_factory=dict)
    #: the role's depends_on, ``[[ROLE, finished|ready], ...]``: created by schedule, started by the watcher
    #: once those roles finished or run (the role's JSON label carries it to the watcher)
    depends_on: List[List[str]] = field(default_factory=list)

    def create_kwargs(self, api: "docker.APIClient", carried: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
        """Keyword arguments of ``APIClient.create_container`` for this container; ``carried``: the secret
        values read at submit (torchspec/schedulers/secrets.py), by carrier, which go into the container's env
        only (``docker inspect`` shows that env to whoever may ask the engine)."""
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
            environment={**self.env, **{var: (carried or {})[c] for var, (c, _) in self.secret_env.items()}},
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
        lines.append(f"    limits:     {' '.join(self._limits()) or 'none'}")
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
        if self.depends_on:
            lines.append("    starts after: " + ", ".join(f"{r} is {w}" for r, w in self.depends_on)
                         + " (created now, started by the watcher)")
        lines.append("    env:")
        for key, value in self.env.items():
            shown = f"{key}=<copied from the submitting environment>" if key in self.host_env else env_line(key, value)
            lines.append(f"      {shown}")
        lines += [f"      {key}={shown}" for key, (_, shown) in self.secret_env.items()]
        lines.append("    labels:")
        lines += [f"      {key}={value}" for key, value in self.labels.items() if key != LABEL_ROLE]
        lines.append(f"      {LABEL_ROLE}=<the role as JSON, for describe>")
        return lines

    def _limits(self) -> List[str]:
        """``cpus=2 memory=1024MB ...``: the limits the container runs under, as the dry run names them."""
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
        return limits


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
            raise AppRefusedError(
                f"role {role.name!r}: Docker cannot provide the device {name!r};"
                f" it knows {', '.join(sorted(KNOWN_DEVICES))}. Use a device mount instead"
            )
        devices += [f"{pattern.format(i)}:{pattern.format(i)}:rwm" for i in range(count)]
    return binds, volumes, devices


def _gpu_device_ids(role: Role) -> List[str]:
    value = role.resource.capabilities.get(CAP_GPU_DEVICE_IDS)
    if value is None:
        return []
    if not isinstance(value, (str, int, list, tuple)):
        raise AppRefusedError(f"role {role.name!r}: capability {CAP_GPU_DEVICE_IDS} must be a list or"
                              f" comma-separated GPU ids such as \"0,2\", not {value!r}")
    items = value if isinstance(value, (list, tuple)) else str(value).split(",")
    return [str(item).strip() for item in items if str(item).strip()]


def _check_network(role: Role, network: str) -> None:
    """Refuse several replicas on Docker's default bridge, where containers cannot find each other by name."""
    if network == "bridge" and role.num_replicas > 1:
        raise AppRefusedError(
            f"role {role.name!r} has {role.num_replicas} replicas, but on Docker's default bridge network"
            f" containers cannot find each other by name, so replicas could not reach rank 0: leave the"
            f" network run option unset (a network per app) or name a user-defined network"
        )


def _working_dir(role: Role, filled: Role) -> Optional[str]:
    """The folder the replicas run in (role metadata, macros filled), which Docker needs absolute."""
    workdir = filled.metadata.get(META_WORKDIR)
    if workdir is not None and not (isinstance(workdir, str) and workdir.startswith("/")):
        raise AppRefusedError(
            f"role {role.name!r}: metadata {META_WORKDIR} must be an absolute path, not {workdir!r}")
    return str(workdir) if workdir else None


def _resources(role: Role, cfg: Mapping[str, CfgVal]) -> Dict[str, Any]:
    """The :class:`DockerContainer` fields for the role's resources, ports and the per-container run options."""
    shm = cfg.get("shm_size")
    return dict(
        nano_cpus=int(role.resource.cpu * 1e9) if role.resource.cpu > 0 else None,
        mem_limit_mb=role.resource.memMB if role.resource.memMB > 0 else None,
        shm_size=str(shm) if shm else None,
        gpu_count=max(role.resource.gpu, 0),
        gpu_device_ids=_gpu_device_ids(role),
        ports=sorted(set(role.port_map.values())),
        publish_host_ip=str(cfg.get("publish_host_ip") or "127.0.0.1") if cfg.get("publish_ports") else None,
        privileged=bool(cfg.get("privileged")),
        stop_timeout=stop_timeout(cfg),
    )


def _labels(
    app_id: str, app_name: str, session_name: str, network: str, role: Role, replica_id: int, keep: bool,
    role_json: str
) -> Dict[str, str]:
    """What the engine remembers of the replica for ``status``, ``describe``, ``cancel`` and the watcher."""
    return {
        LABEL_APP_ID: app_id,
        LABEL_APP_NAME: app_name,
        LABEL_ROLE_NAME: role.name,
        LABEL_REPLICA_ID: str(replica_id),
        LABEL_NUM_REPLICAS: str(role.num_replicas),
        LABEL_ATTEMPT: "0",
        LABEL_SESSION: session_name,
        LABEL_NETWORK: network,
        LABEL_VERSION: __version__,
        LABEL_KEEP: "1" if keep else "0",
        LABEL_ROLE: role_json,
    }


def role_to_containers(
    role: Role,
    app_id: str,
    session_name: str,
    network: str,
    cfg: Mapping[str, CfgVal],
    cwd: str,
    environ: Mapping[str, str],
    app_name: str = "",
) -> List[DockerContainer]:
    """One :class:`DockerContainer` per replica of ``role``, macros substituted; ``app_name`` is kept as a
    label for ``describe`` (the app id where not given).

    Each replica's env is, later entries winning: variables copied from the
    submitting shell (``copy_env``), the role's env, the ``env`` run option,
    then torchspec's own variables; ``PYTHONUNBUFFERED=1`` where nobody set it.
    """
    from torchspec.redaction import for_describe
    from torchspec.specs.convert import dump_app

    kept = for_describe(dump_app(AppDef(name=app_id, roles=[role]))["roles"][0])  # secrets hidden
    role_json = json.dumps(kept, separators=(",", ":"))
    binds, volumes, devices = _mounts(role, cwd)
    _check_network(role, network)
    # only user-defined networks resolve container names; on host and none every replica is "localhost"
    rank0_host = replica_host(app_id, role, 0, network)
    host_env = copied_env(cfg.get("copy_env") or [], environ)  # type: ignore[arg-type]
    raw_env = cfg.get("env")
    extra_env = {str(k): str(v) for k, v in raw_env.items()} if isinstance(raw_env, dict) else {}
    restart_max = role.max_retries if RetryPolicy(role.retry_policy) == RetryPolicy.REPLICA else 0
    containers = []
    for replica_id in range(role.num_replicas):
        values = macros.Values(img_root="", app_id=app_id, replica_id=str(replica_id), rank0_env=ENV_RANK0_HOST)
        filled = values.apply(role)
        name = container_name(app_id, role.name, replica_id)
        env = dict(host_env)
        env.update(filled.env)
        env.update({key: values.substitute(value) for key, value in extra_env.items()})
        env.update(replica_env(app_id, role.name, replica_id, role.num_replicas, rank0_host))
        env[ENV_ATTEMPT] = "0"  # the watcher's replacements count up (APPLICATION and ROLE retries)
        env.setdefault("PYTHONUNBUFFERED", "1")
        labels = _labels(app_id, app_name or app_id, session_name, network, role, replica_id, bool(cfg.get("keep_containers")),
                         role_json)
        working_dir = _working_dir(role, filled)
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
                working_dir=working_dir,
                binds=binds,
                volumes=volumes,
                devices=devices,
                restart_max=restart_max,
                host_env=[key for key in host_env if env.get(key) == host_env[key]],
                depends_on=[[d.role, d.when] for d in role.depends_on],
                **_resources(role, cfg),
            )
        )
    return containers


def replica_host(app_id: str, role: Role, k: int, network: str) -> str:
    """The host name of replica ``k`` of ``role`` from the other containers: its container's name on the app's
    network (only user-defined networks resolve container names; on host and none every replica is localhost)."""
    return container_name(app_id, role.name, k) if network not in BUILTIN_NETWORKS else LOCALHOST


def _check_roles(app: AppDef, app_id: str) -> None:
    """Refuse an app without roles, a role without replicas, and two roles whose container names would clash."""
    if not app.roles:
        raise AppRefusedError(f"app {app.name!r} has no roles")
    hosts: Dict[str, str] = {}
    for role in app.roles:
        if role.num_replicas <= 0:
            raise AppRefusedError(f"role {role.name!r} has {role.num_replicas} replicas; it needs at least one")
        host = container_name(app_id, role.name, 0)
        if host in hosts:
            raise AppRefusedError(
                f"roles {hosts[host]!r} and {role.name!r} would share the container names {host[:-2]}-K;"
                f" rename one of them"
            )
        hosts[host] = role.name


def app_to_job(
    app: AppDef, cfg: Mapping[str, CfgVal], app_id: str, session_name: str, cwd: str, environ: Mapping[str, str]
) -> DockerJob:
    """The whole request for ``app`` under a resolved ``cfg``; talks to no engine."""
    _check_roles(app, app_id)
    pull = pull_policy(cfg)
    check_container_images(app, "docker")
    network = str(cfg.get("network") or "")
    create_network = not network
    network = network or f"torchspec-{app_id}"
    containers = [
        c for role in app.roles
        for c in role_to_containers(role, app_id, session_name, network, cfg, cwd, environ, app_name=app.name)
    ]
    hosts = hosts_env(app, lambda role, k: replica_host(app_id, role, k, network))
    for container in containers:
        container.env.update(hosts)
    by_role = secret_env_by_role(app, "docker", {c.role: set(c.env) for c in containers})
    for container in containers:
        container.secret_env = dict(by_role[container.role])
    labels = labels_of(app)
    for container in containers if labels else []:
        container.labels[LABEL_METADATA] = labels_json(labels)
    return DockerJob(
        app_id=app_id,
        session_name=session_name,
        network=network,
        create_network=create_network,
        pull=pull,
        containers=containers,
    )
