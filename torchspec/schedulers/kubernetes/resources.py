"""A role's container resources and Linux capabilities: what its ``Resource`` asks for, as Kubernetes takes it.

``cpu``, ``memMB``, ``gpu`` and ``devices`` ask for the same amount on both
sides (requests = limits: the pod is Guaranteed).  The capabilities
``kubernetes.requests`` and ``kubernetes.limits`` (resource name ->
quantity, ``null`` for none) change one side or add a resource counted in
units (``hugepages-2Mi: 2Gi``, ``ephemeral-storage: 10Gi``);
``kubernetes.linux_capabilities`` adds Linux capabilities to the container
(``securityContext.capabilities.add``) without making it privileged.  Every
value is checked as the API server would check it, and each problem is
refused at its place in the spec (a :class:`~.flavor.Refusal`).  Pure.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any, Dict, List, Mapping, Optional, Tuple

from torchspec.errors import did_you_mean
from torchspec.schedulers.kubernetes.flavor import Refusal
from torchspec.schedulers.kubernetes.names import is_qualified_name, is_quantity
from torchspec.schedulers.kubernetes.states import (
    CAP_GPU_RESOURCE,
    CAP_LIMITS,
    CAP_LINUX_CAPABILITIES,
    CAP_REQUESTS,
    DEFAULT_GPU_RESOURCE,
    Obj,
)
from torchspec.specs import Role

#: The resources the kubelet may let a container use more of than it requested; every other one (GPUs,
#: hugepages, devices) cannot be overcommitted: its request must equal its limit.
OVERCOMMITTABLE = ("cpu", "memory", "ephemeral-storage")
STANDARD = OVERCOMMITTABLE + ("hugepages-2Mi", "hugepages-1Gi")
#: Linux capabilities (capabilities(7), as Kubernetes names them: without ``CAP_``).
LINUX_CAPABILITIES = (
    "AUDIT_CONTROL", "AUDIT_READ", "AUDIT_WRITE", "BLOCK_SUSPEND", "BPF", "CHECKPOINT_RESTORE", "CHOWN",
    "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "IPC_LOCK", "IPC_OWNER", "KILL", "LEASE",
    "LINUX_IMMUTABLE", "MAC_ADMIN", "MAC_OVERRIDE", "MKNOD", "NET_ADMIN", "NET_BIND_SERVICE", "NET_BROADCAST",
    "NET_RAW", "PERFMON", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYSLOG", "SYS_ADMIN", "SYS_BOOT",
    "SYS_CHROOT", "SYS_MODULE", "SYS_NICE", "SYS_PACCT", "SYS_PTRACE", "SYS_RAWIO", "SYS_RESOURCE", "SYS_TIME",
    "SYS_TTY_CONFIG", "WAKE_ALARM",
)
_SUFFIXES = {"Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40, "Pi": 2 ** 50, "Ei": 2 ** 60,
             "m": Decimal("0.001"), "": 1, "k": 10 ** 3, "M": 10 ** 6, "G": 10 ** 9, "T": 10 ** 12, "P": 10 ** 15,
             "E": 10 ** 18}
_HUGEPAGES = re.compile(r"hugepages-(?P<size>.+)")


def quantity_value(text: str) -> Decimal:
    """The number a quantity (``2Gi``, ``500m``, ``1e3``) stands for, to compare two of them."""
    match = re.fullmatch(r"\+?(?P<number>\d+(?:\.\d*)?|\.\d+)(?P<suffix>[KMGTPE]i|[mkMGTPE]|[eE][-+]?\d+)?", text)
    if match is None:
        raise ValueError(f"not a quantity: {text!r}")
    suffix = match["suffix"] or ""
    number = Decimal(match["number"])
    if suffix[:1] in ("e", "E") and len(suffix) > 1:
        return number * Decimal(10) ** int(suffix[1:])
    return number * Decimal(_SUFFIXES[suffix])


def _as_quantity(value: Any) -> Optional[str]:
    """A capability's value as quantity text (YAML gives ``2`` and ``0.5`` as numbers); None if it is none."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value) if value >= 0 else None
    if isinstance(value, float):
        text = format(Decimal(repr(value)), "f")
        return text if value >= 0 and is_quantity(text) else None
    if isinstance(value, str) and is_quantity(value.strip()):
        try:
            quantity_value(value.strip())
        except (ValueError, InvalidOperation):
            return None
        return value.strip()
    return None


def _resource_name_problem(name: str) -> Optional[str]:
    """Why ``name`` is not a resource a container may ask for; None when it is one."""
    if name in OVERCOMMITTABLE or "/" in name and is_qualified_name(name):
        return None
    hugepages = _HUGEPAGES.fullmatch(name)
    if hugepages:
        return None if is_quantity(hugepages["size"]) else f"{name!r} names no page size (hugepages-2Mi, hugepages-1Gi)"
    guess = did_you_mean(name, STANDARD)
    return (f"{name!r} is no resource Kubernetes knows: cpu, memory, ephemeral-storage, hugepages-SIZE, or an"
            " extended resource with its domain (nvidia.com/gpu)" + (f"; did you mean {guess!r}?" if guess else ""))


def _base_amounts(role: Role) -> Dict[str, str]:
    """What cpu, memMB, gpu and devices ask for (on both sides)."""
    res = role.resource
    amounts: Dict[str, str] = {}
    if res.cpu > 0:
        amounts["cpu"] = str(res.cpu)
    if res.memMB > 0:
        amounts["memory"] = f"{res.memMB}Mi"
    if res.gpu > 0:
        amounts[res.capabilities.get(CAP_GPU_RESOURCE) or DEFAULT_GPU_RESOURCE] = str(res.gpu)
    for name, count in res.devices.items():
        if count > 0:
            amounts[name] = str(count)
    return amounts


def _side(role: Role, index: int, cap: str, amounts: Dict[str, str], out: List[Refusal]) -> None:
    """Apply the capability ``cap`` (a mapping of resource name -> quantity or null) to ``amounts``."""
    given = role.resource.capabilities.get(cap)
    if given is None:
        return
    at = ("roles", index, "resource", "capabilities", cap)
    where = f"role {role.name!r}: capability {cap}"
    if not isinstance(given, Mapping):
        out.append(Refusal(at, f"{where} must map resource names to quantities (cpu: 500m, hugepages-2Mi: 2Gi),"
                           f" not {given!r}"))
        return
    for name, value in given.items():
        problem = _resource_name_problem(str(name))
        if problem:
            out.append(Refusal(at + (name,), f"{where}: {problem}"))
        elif value is None:
            amounts.pop(str(name), None)
        elif _as_quantity(value) is None:
            out.append(Refusal(at + (name,), f"{where}: {name}={value!r} is not a Kubernetes quantity (e.g. 2,"
                               " 500m, 10Gi, 1.5G)"))
        else:
            amounts[str(name)] = str(_as_quantity(value))


def _balance(role: Role, index: int, requests: Dict[str, str], limits: Dict[str, str], out: List[Refusal]) -> None:
    """What the API server checks between the two sides: a request is at most its limit; a resource that cannot
    be overcommitted has one amount (given on one side, it is written on both); hugepages come with cpu or memory."""
    caps = ("roles", index, "resource", "capabilities")
    for name in sorted(set(requests) | set(limits)):
        if name not in OVERCOMMITTABLE:
            request, limit = requests.setdefault(name, limits.get(name, "")), limits.setdefault(name, requests[name])
            if quantity_value(request) != quantity_value(limit):
                out.append(Refusal(caps + (CAP_REQUESTS, name), f"role {role.name!r}: {name} cannot be overcommitted:"
                                   f" its request ({request}) must equal its limit ({limit})"))
        elif name in requests and name in limits and quantity_value(requests[name]) > quantity_value(limits[name]):
            out.append(Refusal(caps + (CAP_REQUESTS, name), f"role {role.name!r}: requests {requests[name]} {name},"
                               f" more than its limit {limits[name]}"))
    if any(_HUGEPAGES.fullmatch(n) for n in requests) and not {"cpu", "memory"} & (set(requests) | set(limits)):
        out.append(Refusal(caps + (CAP_LIMITS,), f"role {role.name!r}: a container with hugepages must also ask for"
                           " cpu or memory (Kubernetes refuses it otherwise): set resource.cpu or memMB"))


def container_resources(role: Role, index: int) -> Tuple[Obj, List[Refusal]]:
    """The container's ``resources`` (requests and limits), and every problem of the role's
    ``kubernetes.requests``/``kubernetes.limits``, each at its place (``index``: the role's in the app)."""
    base = _base_amounts(role)
    requests, limits = dict(base), dict(base)
    out: List[Refusal] = []
    _side(role, index, CAP_REQUESTS, requests, out)
    _side(role, index, CAP_LIMITS, limits, out)
    if not out:
        _balance(role, index, requests, limits, out)
    resources: Obj = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    return resources, out


def linux_capabilities(role: Role, index: int) -> Tuple[List[str], List[Refusal]]:
    """The Linux capabilities the role's ``kubernetes.linux_capabilities`` adds (a list, or text split at commas
    and spaces; ``CAP_`` may lead), and a refusal for each that Linux does not have."""
    given = role.resource.capabilities.get(CAP_LINUX_CAPABILITIES)
    if given is None:
        return [], []
    at = ("roles", index, "resource", "capabilities", CAP_LINUX_CAPABILITIES)
    items = re.split(r"[,\s]+", given.strip()) if isinstance(given, str) else given
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        return [], [Refusal(at, f"role {role.name!r}: capability {CAP_LINUX_CAPABILITIES} is a list of Linux"
                            f" capabilities ([IPC_LOCK, SYS_PTRACE]), not {given!r}")]
    added: List[str] = []
    out: List[Refusal] = []
    for i, item in enumerate(items):
        name = item.strip().upper()
        name = name[4:] if name.startswith("CAP_") else name
        if name in LINUX_CAPABILITIES:
            added += [name] if name not in added else []
            continue
        guess = did_you_mean(name, LINUX_CAPABILITIES)
        out.append(Refusal(at + ((i,) if not isinstance(given, str) else ()),
                           f"role {role.name!r}: capability {CAP_LINUX_CAPABILITIES}: {item!r} is no Linux capability"
                           + (f": did you mean {guess!r}?" if guess else " (see capabilities(7))")))
    return added, out
