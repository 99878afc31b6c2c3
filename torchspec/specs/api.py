"""The spec objects: ``AppDef``, ``Role``, ``Resource`` and friends, as in ``torchx.specs.api``.

These are plain dataclasses: no I/O, no colour, no scheduler code.  Status
types, run options and app handles live in modules of their own and are
re-exported here, so ``from torchspec.specs.api import AppState`` works as
it does for TorchX users.
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field
from enum import Enum
from string import Template
from typing import Any, Callable, Dict, Generic, List, Mapping, Optional, TypeVar, Union

from torchspec.specs.handles import (
    AppHandle,
    MalformedAppHandleException,
    ParsedAppHandle,
    UnknownAppException,
    UnknownSchedulerException,
    make_app_handle,
    parse_app_handle,
)
from torchspec.specs.runopts import CfgVal, InvalidRunConfigException, get_type_name, runopt, runopts, to_dict
from torchspec.specs.status import (
    NONE,
    AppState,
    AppStatus,
    AppStatusError,
    ReplicaState,
    ReplicaStatus,
    RoleStatus,
    is_started,
    is_terminal,
)

#: used as the "*" scheduler backend
ALL: str = "all"
#: sentinel for missing string attributes such as image or entrypoint
MISSING: str = "<MISSING>"


@dataclass
class Resource:
    """What each replica of a role needs: logical CPUs, GPUs, memory in MB, plus scheduler-specific extras.

    Prefer named resources (``named_resources["aws_p3.8xlarge"]``) over raw numbers.
    """

    cpu: int
    gpu: int
    memMB: int
    capabilities: Dict[str, Any] = field(default_factory=dict)
    devices: Dict[str, int] = field(default_factory=dict)

    @staticmethod
    def copy(original: "Resource", **capabilities: Any) -> "Resource":
        """A copy with ``capabilities`` added; given keys win over the original's."""
        merged = dict(original.capabilities)
        merged.update(capabilities)
        return Resource(cpu=original.cpu, gpu=original.gpu, memMB=original.memMB, capabilities=merged,
                        devices=original.devices)


#: "resources do not matter" (ignored by schedulers)
NULL_RESOURCE: Resource = Resource(cpu=-1, gpu=-1, memMB=-1)


def _null_resource() -> Resource:
    return NULL_RESOURCE


class macros:
    """Placeholders that schedulers fill in per replica, in ``Role.args`` items and ``Role.env`` values.

    Macros anywhere else in a Role are NOT substituted.

    1. ``img_root``: root folder of the pulled image
    2. ``app_id``: the app's id as assigned by the scheduler
    3. ``replica_id``: the replica's index in its role (kept when a replica is replaced)
    4. ``rank0_env``: the NAME of an environment variable holding rank 0's host; resolve it
       in a shell (``$${rank0_env}`` style) or in the app
    """

    img_root = "${img_root}"
    base_img_root = "${base_img_root}"
    app_id = "${app_id}"
    replica_id = "${replica_id}"
    rank0_env = "${rank0_env}"

    @dataclass
    class Values:
        img_root: str
        app_id: str
        replica_id: str
        rank0_env: str
        base_img_root: str = "DEPRECATED"

        def apply(self, role: "Role") -> "Role":
            """A copy of ``role`` with the macros in its args and env values filled in."""
            role = copy.deepcopy(role)
            role.args = [self.substitute(arg) for arg in role.args]
            role.env = {key: self.substitute(arg) for key, arg in role.env.items()}
            return role

        def substitute(self, arg: str) -> str:
            """Fill the macros into one string; ``$$`` is a literal ``$`` and unknown ``${x}`` stay."""
            return Template(arg).safe_substitute(**asdict(self))


class RetryPolicy(str, Enum):
    """What a scheduler restarts when a replica fails (every scheduler supports APPLICATION).

    1. REPLICA: replace the failed replica only; the others keep running.
    2. APPLICATION: restart the whole app.
    3. ROLE: restart every replica of the failed replica's role.
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
    """``mount --bind`` a host path into the worker."""

    src_path: str
    dst_path: str
    read_only: bool = False


@dataclass
class VolumeMount:
    """Mount a persistent volume, named by ``src``, into the worker."""

    src: str
    dst_path: str
    read_only: bool = False


@dataclass
class DeviceMount:
    """Expose a host device in the worker; permissions default to read, write and mknod."""

    src_path: str
    dst_path: str
    permissions: str = "rwm"


@dataclass
class Role:
    """A set of replicas with one duty in an app (trainer, parameter server, reader...).

    ``image`` is whatever the scheduler runs (a container image, a folder...);
    ``metadata`` keys follow ``$scheduler.$key``.
    """

    name: str
    image: str
    min_replicas: Optional[int] = None
    base_image: Optional[str] = None  # deprecated in TorchX
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

    def pre_proc(self, scheduler: str, dryrun_info: "AppDryRunInfo[Any]") -> "AppDryRunInfo[Any]":
        """Hook to adjust a scheduler request for this role; called per role, in order, by submit_dryrun."""
        return dryrun_info


@dataclass
class AppDef:
    """A distributed app: roles plus metadata (whose meaning is scheduler-specific)."""

    name: str
    roles: List[Role] = field(default_factory=list)
    metadata: Dict[str, str] = field(default_factory=dict)


T = TypeVar("T")


class AppDryRunInfo(Generic[T]):
    """The request a scheduler would submit, and how to print it (``print(info)`` is what dryrun shows)."""

    def __init__(self, request: T, fmt: Callable[[T], str]) -> None:
        self.request = request
        self._fmt = fmt
        # back references set by Runner.dryrun and Scheduler.submit_dryrun
        self._app: Optional[AppDef] = None
        self._cfg: Mapping[str, CfgVal] = {}
        self._scheduler: Optional[str] = None

    def __repr__(self) -> str:
        return self._fmt(self.request)


def parse_mounts(opts: List[str]) -> List[Union[BindMount, VolumeMount, DeviceMount]]:
    """Typed mounts from Docker-style options, each mount starting with ``type=``.

    ``["type=bind", "src=/host", "dst=/ctr", "readonly", "type=device", "src=/dev/fuse"]``:
    bind: ``src``, ``dst``, ``readonly``; volume: ``src`` (name or id), ``dst``,
    ``readonly``; device: ``src``, optional ``dst`` (default: src), ``perm``
    from r, w, m (default rwm; ``permissions`` is accepted too).
    """
    groups: List[Dict[str, str]] = []
    current: Dict[str, str] = {}
    for opt in opts:
        key, _, val = opt.partition("=")
        if key == "type":
            current = {}
            groups.append(current)
        elif not groups:
            raise KeyError("type must be specified first")
        current[key] = val

    mounts: List[Union[BindMount, VolumeMount, DeviceMount]] = []
    for group in groups:
        kind = group.get("type")
        if kind == MountType.BIND:
            mounts.append(BindMount(src_path=group["src"], dst_path=group["dst"], read_only="readonly" in group))
        elif kind == MountType.VOLUME:
            mounts.append(VolumeMount(src=group["src"], dst_path=group["dst"], read_only="readonly" in group))
        elif kind == MountType.DEVICE:
            src = group["src"]
            perm = group.get("perm", group.get("permissions", "rwm"))
            for c in perm:
                if c not in "rwm":
                    raise ValueError(f"{c} is not a valid permission flags must one of r,w,m")
            mounts.append(DeviceMount(src_path=src, dst_path=group.get("dst", src), permissions=perm))
        else:
            valid = [str(item.value) for item in MountType]
            raise ValueError(f"invalid mount type {repr(kind)}, must be one of {valid}")
    return mounts


from torchspec.specs.named_resources import get_named_resources, named_resources  # noqa: E402  (needs Resource)

__all__ = [
    "ALL", "MISSING", "NONE", "NULL_RESOURCE", "AppDef", "AppDryRunInfo", "AppHandle", "AppState", "AppStatus",
    "AppStatusError", "BindMount", "CfgVal", "DeviceMount", "InvalidRunConfigException",
    "MalformedAppHandleException", "MountType", "ParsedAppHandle", "ReplicaState", "ReplicaStatus", "Resource",
    "RetryPolicy", "Role", "RoleStatus", "UnknownAppException", "UnknownSchedulerException", "VolumeMount",
    "get_named_resources", "get_type_name", "is_started", "is_terminal", "macros", "make_app_handle",
    "named_resources", "parse_app_handle", "parse_mounts", "runopt", "runopts", "to_dict",
]
