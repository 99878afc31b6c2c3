"""The app spec objects, as in ``torchx.specs.api``: AppDef, Role, Resource, mounts and macros.

These are plain dataclasses with no I/O.  Statuses, run options and app
handles live in modules of their own (:mod:`~torchspec.specs.status`,
:mod:`~torchspec.specs.runopts`, :mod:`~torchspec.specs.handles`) and are
re-exported here, so code and tests written against ``torchx.specs.api``
find every name at the same place.
"""

from __future__ import annotations

import copy
import os
import re
from dataclasses import asdict, dataclass, field
from enum import Enum
from string import Template
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Callable, Dict, Generic, List, Mapping, Optional, Tuple, TypeVar, Union

from torchspec.specs import cases
from torchspec.specs.dependencies import RoleDependency
from torchspec.specs.secrets import SecretRef

from torchspec.specs.handles import (
    AppHandle,
    MalformedAppHandleException,
    ParsedAppHandle,
    UnknownAppException,
    UnknownSchedulerException,
    make_app_handle,
    parse_app_handle,
)
from torchspec.specs.overrides import _OVERRIDES_LOCK_KEY, _OverridesLock, has_overrides, resolve_override
from torchspec.specs.runopts import (
    CfgVal,
    InvalidRunConfigException,
    get_type_name,
    runopt,
    runopts,
    to_dict,
)
from torchspec.specs.sentinels import ALL, MISSING, NONE, UNKNOWN
from torchspec.specs.status import (
    _APP_STATUS_FORMAT_TEMPLATE,
    _EMBEDDED_ERROR_MESSAGE_RE,
    _RPC_ERROR_MESSAGE_RE,
    _STARTED_STATES,
    _TERMINAL_STATES,
    AppState,
    AppStatus,
    AppStatusError,
    ReplicaState,
    ReplicaStatus,
    RoleStatus,
    is_started,
    is_terminal,
)

if TYPE_CHECKING:
    from pathlib import Path

#: A scheduler's registered name (``"local_docker"``, ``"kubernetes"``...).
SchedulerBackend = str


def TORCHX_HOME(*subdir_paths: str) -> "Path":
    """The folder tools keep their state in (``~/.torchx``, or ``$TORCHX_HOME``), created if missing.

    ``TORCHX_HOME("conda-pack", "out")`` is a sub-folder of it, created too.
    The TorchX name and variable are kept on purpose: torchspec and TorchX
    share caches and state instead of keeping two copies.
    """
    from pathlib import Path  # not at import time: most users of the specs never need a path

    override = os.environ.get("TORCHX_HOME")
    home = Path(override) if override else Path.home() / ".torchx"
    path = home.joinpath(*subdir_paths)
    path.mkdir(parents=True, exist_ok=True)
    return path


@dataclass
class Workspace:
    """Local project folders to ship with a job, each mapped to a folder of the job's image.

    ``projects`` maps a local path to the folder (relative to the image's
    workspace root) it lands in; ``""`` means the root itself, so the common
    case, one project at the root, is ``Workspace({"/path/to/proj": ""})``.
    An empty workspace is falsy: there is nothing to ship.
    """

    projects: Dict[str, str]

    def __bool__(self) -> bool:
        return bool(self.projects)

    def is_unmapped_single_project(self) -> bool:
        """One project copied to the root: the shape that older, path-only workspaces had."""
        return len(self.projects) == 1 and not next(iter(self.projects.values()))

    def merge_into(self, outdir: Union[str, "Path"]) -> None:
        """Copy every project into ``outdir`` (at its mapped folder), merging with what is there."""
        import shutil
        from pathlib import Path

        for src, dst in self.projects.items():
            shutil.copytree(src, Path(outdir) / dst, dirs_exist_ok=True)

    @staticmethod
    def from_str(workspace: str) -> "Workspace":
        """Parse what :meth:`__str__` writes, or one ``path: folder`` entry per line.

        Entries are separated by newlines or ``;``; ``path`` alone or
        ``path:`` maps to the root; lines starting with ``#`` are comments.
        """
        projects: Dict[str, str] = {}
        for line in workspace.replace(";", "\n").splitlines():
            entry = line.strip()
            if not entry or entry.startswith("#"):
                continue
            src, _, dst = entry.rpartition(":") if ":" in entry else (entry, "", "")
            projects[src.strip()] = dst.strip()
        return Workspace(projects=projects)

    def __str__(self) -> str:
        """A single unmapped project is its path; otherwise ``path[:folder]`` entries joined by ``;``."""
        if self.is_unmapped_single_project():
            return next(iter(self.projects))
        return ";".join(f"{src}:{dst}" if dst else src for src, dst in self.projects.items())


@dataclass
class Resource:
    """What each replica of a role needs.

    ``cpu`` counts logical cores as the scheduler defines them, ``memMB`` is
    RAM in MB, ``capabilities`` are scheduler-interpreted hardware traits and
    ``devices`` named devices with their counts (e.g. EFA interfaces).
    ``tags`` describe the resource itself rather than the hardware (which
    named resource it came from, whether it is a fraction of a host); see
    :data:`RESOURCE_TAG_NAME` and :data:`RESOURCE_TAG_IS_FRACTIONAL`.  Prefer
    a named resource (``named_resources["aws_p3.8xlarge"]``) to raw numbers.
    """

    cpu: int
    gpu: int
    memMB: int
    capabilities: Dict[str, Any] = field(default_factory=dict)
    devices: Dict[str, int] = field(default_factory=dict)
    tags: Dict[str, Any] = field(default_factory=dict)

    @staticmethod
    def copy(original: "Resource", **capabilities: Any) -> "Resource":
        """A copy of ``original`` with ``capabilities`` merged in; given keys win.

        The copy owns its dicts (devices and tags included), so tweaking a
        named resource never changes what the next lookup of that name returns.
        """
        merged = dict(original.capabilities)
        merged.update(capabilities)
        return Resource(
            cpu=original.cpu,
            gpu=original.gpu,
            memMB=original.memMB,
            capabilities=merged,
            devices=dict(original.devices),
            tags=dict(original.tags),
        )

    def is_fractional(self) -> bool:
        """Whether this resource is a share of a host rather than whole hosts (untagged: no)."""
        return bool(self.tags.get(RESOURCE_TAG_IS_FRACTIONAL, False))

    def get_resource_name(self) -> Optional[str]:
        """The named resource this one was registered as, if it is tagged with it."""
        name = self.tags.get(RESOURCE_TAG_NAME)
        return None if name is None else str(name)


#: ``Resource.tags`` key: the name the resource is registered under.
RESOURCE_TAG_NAME = "resource_name"
#: ``Resource.tags`` key: True for a resource that is a fraction of a host.
RESOURCE_TAG_IS_FRACTIONAL = "is_fractional"


#: "The resource does not matter" (schedulers ignore it); the default of every Role.
NULL_RESOURCE: Resource = Resource(cpu=-1, gpu=-1, memMB=-1)


def _null_resource() -> Resource:
    """Default factory for ``Role.resource``: dataclasses refuse mutable (unhashable) defaults."""
    return NULL_RESOURCE


#: ``$$`` (left alone), or ``${hosts_env:ROLE}`` with ROLE in group 2.
_HOSTS_MACRO = re.compile(r"\$(\$|\{hosts_env:([^{}$]*)\})")
#: What ``${hosts_env:ROLE}`` becomes: this prefix and the role's name as a variable name.
ENV_HOSTS_PREFIX = "TORCHSPEC_HOSTS_"
_NOT_ENV_CHARS = re.compile(r"[^A-Za-z0-9]")


def role_hosts_env(role_name: str) -> str:
    """``TORCHSPEC_HOSTS_<ROLE>``: ``role_name`` upper-cased, every character a variable name cannot hold
    as ``_`` (``parameter-server`` -> ``TORCHSPEC_HOSTS_PARAMETER_SERVER``).  Two roles whose names give one
    variable are refused (lint TS503, and every scheduler), so each variable names one role."""
    return ENV_HOSTS_PREFIX + _NOT_ENV_CHARS.sub("_", role_name).upper()


def hosts_env_clashes(names: List[str]) -> List[Tuple[int, str]]:
    """``(index, message)`` for each role name whose ``TORCHSPEC_HOSTS_<ROLE>`` an earlier role's name gives
    too (``a-b`` after ``a_b``): one of the two roles' hosts would be lost."""
    seen: Dict[str, str] = {}
    found = []
    for index, name in enumerate(names):
        other = seen.setdefault(role_hosts_env(name), name)
        if other != name:
            found.append((index, f"roles {other!r} and {name!r} would both set {role_hosts_env(name)}"))
    return found


#: The hint of every :func:`hosts_env_clashes` problem.
HOSTS_CLASH_HINT = "rename one of them: the variable holding a role's hosts is named after it"


class macros:
    """Placeholders a scheduler fills in per replica, in ``Role.args`` items, ``Role.env`` values
    and (nested) ``Role.metadata`` strings.  Macros in any other Role field are NOT substituted.

    1. ``img_root``: root folder of the pulled image
    2. ``app_id``: the app's id as the scheduler assigned it
    3. ``replica_id``: the replica's index within its role; a replacement
       replica keeps the index of the one it replaces
    4. ``rank0_env``: the NAME of an environment variable that holds rank 0's
       host; expand it in a shell (wrap the command in ``sh -c``) or in the app.
       Not every scheduler provides it.
    5. ``hosts_env``: written ``${hosts_env:ROLE}``, the NAME of the environment
       variable (``TORCHSPEC_HOSTS_<ROLE>``) that holds the host names of ROLE's
       replicas, comma-separated, replica 0 first: every replica of every role
       gets one such variable per role of the app, on every scheduler, so a
       trainer finds its parameter server without knowing a flavor's DNS names.

    ``base_img_root`` is deprecated and kept for old specs.
    """

    img_root = "${img_root}"
    base_img_root = "${base_img_root}"
    app_id = "${app_id}"
    replica_id = "${replica_id}"
    rank0_env = "${rank0_env}"

    @staticmethod
    def hosts_env(role_name: str) -> str:
        """``${hosts_env:ROLE}``: the macro naming the variable with ``role_name``'s hosts."""
        return "${hosts_env:%s}" % role_name

    @dataclass
    class Values:
        """The values of the macros for one replica.

        ``rank0_env`` defaults to its own placeholder so that substituting
        leaves ``${rank0_env}`` in place on schedulers that cannot provide it
        (and for callers written before the macro existed).
        """

        img_root: str
        app_id: str
        replica_id: str
        rank0_env: str = "${rank0_env}"
        base_img_root: str = "DEPRECATED"

        def apply(self, role: "Role") -> "Role":
            """A copy of ``role`` with the macros filled in; ``role`` itself is unchanged.

            Override producers cannot always be deep-copied (a coroutine
            cannot), so the copy shares the role's ``overrides`` dict: whichever
            role resolves an override first resolves it for both.
            """
            overrides = role.overrides
            role.overrides = {}
            try:
                clone = copy.deepcopy(role)
            finally:
                role.overrides = overrides
            if has_overrides(overrides):
                clone.overrides = overrides

            clone.args = [self.substitute(arg) for arg in clone.args]
            clone.env = {key: self.substitute(value) for key, value in clone.env.items()}
            clone.metadata = self._apply_nested(clone.metadata)
            return clone

        def _apply_nested(self, data: Dict[str, Any]) -> Dict[str, Any]:
            """Substitute every str inside ``data``, through nested dicts and lists, in place."""

            def visit(value: Any) -> Any:
                if isinstance(value, str):
                    return self.substitute(value)
                if isinstance(value, dict):
                    for key in value:
                        value[key] = visit(value[key])
                elif isinstance(value, list):
                    for index, item in enumerate(value):
                        value[index] = visit(item)
                return value

            visit(data)
            return data

        def to_dict(self) -> Dict[str, Any]:
            """The macro names and their values, as :meth:`substitute` uses them."""
            return asdict(self)

        def substitute(self, arg: str) -> str:
            """``arg`` with the macros filled in; ``$$`` is a literal ``$`` and unknown ``${x}`` stay.

            ``${hosts_env:ROLE}`` is filled in first (string.Template cannot read a name with ``:``);
            an escaped ``$${hosts_env:ROLE}`` is left for Template, which makes it literal.
            """
            arg = _HOSTS_MACRO.sub(lambda m: m.group(0) if m.group(1) == "$" else role_hosts_env(m.group(2)), arg)
            return Template(arg).safe_substitute(**self.to_dict())


class RetryPolicy(str, Enum):
    """What a scheduler restarts when a replica fails (non-zero exit, host crash, preemption, eviction).

    Every scheduler supports APPLICATION; see a scheduler's docs for the others.

    1. REPLICA: replace only the failed replica, the others keep running (use
       with torchelastic, e.g. the ``dist.ddp`` component, so the survivors
       admit the replacement).
    2. APPLICATION: restart the whole app.
    3. ROLE: restart every replica of the failed replica's role, not the whole app.
    """

    REPLICA = "REPLICA"
    APPLICATION = "APPLICATION"
    ROLE = "ROLE"


class MountType(str, Enum):
    BIND = "bind"
    VOLUME = "volume"
    DEVICE = "device"


@dataclass
class BindMount:
    """``mount --bind`` a host path into the worker; how exactly is up to the scheduler."""

    src_path: str
    dst_path: str
    read_only: bool = False


@dataclass
class VolumeMount:
    """Mount a persistent volume, named (or identified) by ``src``, into the worker."""

    src: str
    dst_path: str
    read_only: bool = False


@dataclass
class DeviceMount:
    """Expose a host device in the worker; ``permissions`` from r (read), w (write), m (mknod)."""

    src_path: str
    dst_path: str
    permissions: str = "rwm"


@dataclass
class Role:
    """A set of identical replicas with one duty in an app (trainer, parameter server, reader...).

    ``image`` is whatever the scheduler knows how to fetch and run (a container
    image, a tarball URL, a folder).  ``num_replicas`` replicas run
    ``entrypoint`` with ``args`` and ``env``, each guaranteed at least
    ``resource``.  With ``min_replicas`` set, an elastic scheduler may start
    the job with fewer replicas (schedulers without autoscaling ignore it).
    ``port_map`` names ports (``{"tensorboard": 9090}``); ``metadata`` keys
    follow ``$scheduler.$key``.  ``base_image`` is deprecated.

    ``secrets`` (torchspec's, after TorchX's fields, so TorchX-style calls
    are unchanged) names secrets and ConfigMaps by reference for env
    variables or files (:class:`~torchspec.specs.secrets.SecretRef`).
    ``depends_on`` (torchspec's too) holds the role back until other roles
    have finished or are ready (:class:`~torchspec.specs.dependencies.RoleDependency`).

    ``overrides`` maps attribute names to a zero-argument callable or an
    awaitable that computes the attribute on first read (see
    :mod:`torchspec.specs.overrides`).
    """

    name: str
    image: str
    min_replicas: Optional[int] = None
    base_image: Optional[str] = None
    entrypoint: str = MISSING
    args: List[str] = field(default_factory=list)
    env: Dict[str, str] = field(default_factory=dict)
    num_replicas: int = 1
    max_retries: int = 0
    retry_policy: RetryPolicy = RetryPolicy.APPLICATION
    resource: Resource = field(default_factory=_null_resource)
    port_map: Dict[str, int] = field(default_factory=dict)
    metadata: Dict[str, Any] = field(default_factory=dict)
    mounts: List[Union[BindMount, VolumeMount, DeviceMount]] = field(default_factory=list)
    overrides: Dict[str, Any] = field(default_factory=dict)
    secrets: List[SecretRef] = field(default_factory=list)
    depends_on: List[RoleDependency] = field(default_factory=list)

    def __getattribute__(self, name: str) -> Any:
        if name == "overrides" or name.startswith("__"):
            return object.__getattribute__(self, name)
        overrides = object.__getattribute__(self, "__dict__").get("overrides")
        if overrides and name in overrides:
            return resolve_override(self, name, overrides)
        return object.__getattribute__(self, name)

    def pre_proc(self, scheduler: str, dryrun_info: "AppDryRunInfo[Any]") -> "AppDryRunInfo[Any]":
        """Adjust a scheduler's request for this role.

        Called by ``Scheduler.submit_dryrun`` once per role, in ``AppDef.roles``
        order; subclasses override it for role-specific tweaks the generic
        request cannot express.
        """
        return dryrun_info


@dataclass
class AppDef:
    """A distributed app: its roles plus metadata (whose meaning is scheduler-specific)."""

    name: str
    roles: List[Role] = field(default_factory=list)
    metadata: Dict[str, str] = field(default_factory=dict)


T = TypeVar("T")


class AppDryRunInfo(Generic[T]):
    """The request a scheduler would submit, plus how to print it (``print(info)`` shows it).

    ``_app``, ``_cfg`` and ``_scheduler`` are back references that
    ``Runner.dryrun`` and ``Scheduler.submit_dryrun`` fill in after
    construction; read them through :attr:`app` and :attr:`cfg`.
    """

    def __init__(self, request: T, fmt: Callable[[T], str]) -> None:
        self.request = request
        self._fmt = fmt
        self._app: Optional[AppDef] = None
        self._cfg: Mapping[str, CfgVal] = {}
        self._scheduler: Optional[str] = None

    @property
    def app(self) -> Optional[AppDef]:
        """The app this request was made for, once a dryrun has set it."""
        return self._app

    @property
    def cfg(self) -> Mapping[str, CfgVal]:
        """The resolved cfg, read-only: changing it would not change the request anyway."""
        return MappingProxyType(dict(self._cfg))

    def __repr__(self) -> str:
        return self._fmt(self.request)


# Docker's spellings are accepted besides the short ones.
_MOUNT_OPT_MAP: Mapping[str, str] = {
    "type": "type",
    "destination": "dst",
    "dst": "dst",
    "target": "dst",
    "read_only": "readonly",
    "readonly": "readonly",
    "source": "src",
    "src": "src",
    "perm": "perm",
    "permissions": "perm",
}


def parse_mounts(opts: Union[str, List[str]]) -> List[Union[BindMount, VolumeMount, DeviceMount]]:
    """Typed mounts from Docker-style options; every mount starts with its ``type=``.

    ``opts`` is a list (``["type=bind", "src=/data", "dst=/data", "readonly"]``)
    or the same joined by commas (``"type=bind,src=/data,dst=/data,readonly"``);
    several mounts follow each other in one list.

    - bind: ``src`` (a leading ``~`` is expanded), ``dst``, optional ``readonly``
    - volume: ``src`` (volume name or id), ``dst``, optional ``readonly``
    - device: ``src``, optional ``dst`` (default: ``src``), optional ``perm`` from r, w, m (default rwm)

    Raises ``KeyError`` for an unknown option, an option before the first
    ``type``, or a missing ``src``/``dst``; ``ValueError`` for an unknown type
    or permission flag.
    """
    items = [item for item in opts.split(",") if item] if isinstance(opts, str) else opts
    groups: List[Dict[str, str]] = []
    for item in items:
        key, _, val = item.partition("=")
        if key not in _MOUNT_OPT_MAP:
            raise KeyError(f"unknown mount option {key}, must be one of {list(_MOUNT_OPT_MAP.keys())}")
        key = _MOUNT_OPT_MAP[key]
        if key == "type":
            groups.append({})
        elif not groups:
            raise KeyError("type must be specified first")
        groups[-1][key] = val

    mounts: List[Union[BindMount, VolumeMount, DeviceMount]] = []
    for group in groups:
        kind = group.get("type")
        if kind == MountType.BIND:
            src_path = group["src"]
            if src_path.startswith("~"):
                src_path = os.path.expanduser(src_path)
            mounts.append(BindMount(src_path=src_path, dst_path=group["dst"], read_only="readonly" in group))
        elif kind == MountType.VOLUME:
            mounts.append(VolumeMount(src=group["src"], dst_path=group["dst"], read_only="readonly" in group))
        elif kind == MountType.DEVICE:
            src = group["src"]
            perm = group.get("perm", "rwm")
            for flag in perm:
                if flag not in "rwm":
                    raise ValueError(f"{flag} is not a valid permission flags must one of r,w,m")
            mounts.append(DeviceMount(src_path=src, dst_path=group.get("dst", src), permissions=perm))
        else:
            valid = [str(item.value) for item in MountType]
            raise ValueError(f"invalid mount type {repr(kind)}, must be one of {valid}")
    return mounts


__all__ = [
    "ALL",
    "MISSING",
    "NONE",
    "NULL_RESOURCE",
    "UNKNOWN",
    "AppDef",
    "AppDryRunInfo",
    "AppHandle",
    "AppState",
    "AppStatus",
    "AppStatusError",
    "BindMount",
    "CfgVal",
    "DeviceMount",
    "ENV_HOSTS_PREFIX",
    "HOSTS_CLASH_HINT",
    "InvalidRunConfigException",
    "MalformedAppHandleException",
    "MountType",
    "ParsedAppHandle",
    "ReplicaState",
    "RoleDependency",
    "ReplicaStatus",
    "Resource",
    "RetryPolicy",
    "Role",
    "RoleStatus",
    "RESOURCE_TAG_IS_FRACTIONAL",
    "RESOURCE_TAG_NAME",
    "SchedulerBackend",
    "TORCHX_HOME",
    "UnknownAppException",
    "UnknownSchedulerException",
    "VolumeMount",
    "Workspace",
    "cases",
    "get_type_name",
    "hosts_env_clashes",
    "is_started",
    "is_terminal",
    "macros",
    "make_app_handle",
    "parse_app_handle",
    "parse_mounts",
    "role_hosts_env",
    "runopt",
    "runopts",
    "to_dict",
    # private, but TorchX's own tests import them from torchx.specs.api
    "_APP_STATUS_FORMAT_TEMPLATE",
    "_EMBEDDED_ERROR_MESSAGE_RE",
    "_OVERRIDES_LOCK_KEY",
    "_OverridesLock",
    "_RPC_ERROR_MESSAGE_RE",
    "_STARTED_STATES",
    "_TERMINAL_STATES",
]
