"""What every scheduler gives each replica: an app id, a name, and torchspec's environment variables.

Kept in one place so that a replica sees the same variables whichever
scheduler started it, and so that a new backend does not invent its own.
"""

from __future__ import annotations

import os
import re
import string
from typing import TYPE_CHECKING, Callable, Dict


if TYPE_CHECKING:
    from torchspec.specs import AppDef, Role

#: Environment variables every replica gets (besides its role's env).
ENV_APP_ID = "TORCHSPEC_APP_ID"
ENV_ROLE_NAME = "TORCHSPEC_ROLE_NAME"
ENV_REPLICA_ID = "TORCHSPEC_REPLICA_ID"
ENV_NUM_REPLICAS = "TORCHSPEC_NUM_REPLICAS"
#: Which run of the replica this is, 0 on the first: a script decides from it whether to resume (set at each
#: launch by the backends that know it: local, slurm).
ENV_ATTEMPT = "TORCHSPEC_ATTEMPT"
#: What ``${rank0_env}`` becomes: the NAME of this variable, which holds the host of the role's replica 0.
ENV_RANK0_HOST = "TORCHSPEC_RANK0_HOST"

_SUFFIX_ALPHABET = string.ascii_lowercase + string.digits
_UNSAFE_NAME_CHARS = re.compile(r"[^A-Za-z0-9_.-]+")
_NOT_DNS = re.compile(r"[^a-z0-9-]+")


def is_elastic(role: "Role") -> bool:
    """Whether the role may run with fewer nodes than it asks for (``min_replicas``, dist.ddp's ``j=1:4x2``)."""
    return role.min_replicas is not None and role.min_replicas < role.num_replicas


def refuse_elastic(app: "AppDef", backend: str) -> None:
    """AppRefusedError naming every elastic role, at its ``min_replicas``: ``backend`` starts every replica (and
    waits for all), so a role that says it can run on fewer would silently wait for the rest."""
    from torchspec.errors import AppRefusedError

    problems = [(("roles", i, "min_replicas"), f"role {r.name!r}: min_replicas={r.min_replicas} (of {r.num_replicas}):"
                 f" the {backend} scheduler starts every replica and cannot run on fewer")
                for i, r in enumerate(app.roles) if is_elastic(r)]
    if problems:
        raise AppRefusedError("; ".join(what for _, what in problems), "drop min_replicas (or give it num_replicas);"
                              " on Kubernetes -c flavor=pytorchjob runs an elastic role", problems=problems)


def make_app_id(app_name: str, suffix: str | None = None) -> str:
    """``{name}-{6 random chars}``, e.g. ``hello-k3x9q2``: unique, readable, and safe as a folder name."""
    base = _UNSAFE_NAME_CHARS.sub("-", app_name).strip("-.")[:48] or "app"
    if suffix is None:
        suffix = _random_suffix(6)
    return f"{base}-{suffix}"


def _random_suffix(size: int) -> str:
    """``size`` characters drawn uniformly from the OS's randomness, as ``secrets.choice`` would, without
    importing ``secrets`` (it imports hmac and hashlib: ~6 ms of each submit here)."""
    limit = 256 - 256 % len(_SUFFIX_ALPHABET)  # bytes at or over this would favour the first characters
    chars: list[str] = []
    while len(chars) < size:
        chars.extend(_SUFFIX_ALPHABET[b % len(_SUFFIX_ALPHABET)] for b in os.urandom(size) if b < limit)
    return "".join(chars[:size])


def dns_label(text: str, max_len: int = 63) -> str:
    """``text`` as an RFC 1123 label (lowercase letters, digits, inner ``-``), for hostnames.

    ``My_Trainer`` becomes ``my-trainer``; an empty result becomes ``x`` so
    that a hostname never has an empty part.
    """
    label = _NOT_DNS.sub("-", text.lower()).strip("-")[:max_len].strip("-")
    return label or "x"


def replica_env(app_id: str, role_name: str, replica_id: int, num_replicas: int, rank0_host: str) -> Dict[str, str]:
    """The variables torchspec sets in every replica; they win over the role's env of the same name."""
    return {
        ENV_APP_ID: app_id,
        ENV_ROLE_NAME: role_name,
        ENV_REPLICA_ID: str(replica_id),
        ENV_NUM_REPLICAS: str(num_replicas),
        ENV_RANK0_HOST: rank0_host,
    }


_CONTROL = re.compile("[\x00-\x1f\x7f\x85\u2028\u2029]")
_ESCAPES = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def env_line(key: str, value: str) -> str:
    """``KEY=value`` for a dry run, always on one line.

    A value holding a newline (or another control character) is shown the
    way bash writes it, ``KEY=$'a\\nb'``: printed raw, its second line would
    read as another variable (``a\\nFOO=bar`` as FOO) or as output of its own.
    """
    if not _CONTROL.search(value):
        return f"{key}={value}"
    escaped = value.replace("\\", "\\\\").replace("'", "\\'")
    escaped = _CONTROL.sub(lambda m: _ESCAPES.get(m.group(), f"\\u{ord(m.group()):04x}"), escaped)
    return f"{key}=$'{escaped}'"


def hosts_env(app: "AppDef", host: Callable[["Role", int], str]) -> Dict[str, str]:
    """``TORCHSPEC_HOSTS_<ROLE>`` of every role of ``app``: ``host(role, k)`` of each replica, comma-separated,
    replica 0 first.  Every replica of every role gets them all, whichever backend started it, so a role finds
    another without knowing the backend's naming (what ``${hosts_env:ROLE}`` names)."""
    from torchspec.specs.api import role_hosts_env  # here: the local supervisor imports this module, bare

    return {role_hosts_env(r.name): ",".join(host(r, k) for k in range(r.num_replicas)) for r in app.roles}


def check_role_names(app: "AppDef") -> None:
    """Refuse an app without roles, or with two roles of one name (a role's name names its replicas)."""
    from torchspec.errors import AppRefusedError  # here: the local supervisor imports this module, bare

    if not app.roles:
        raise AppRefusedError(f"app {app.name!r} has no roles")
    names = [r.name for r in app.roles]
    for name in names:
        if names.count(name) > 1:
            raise AppRefusedError(f"app {app.name!r} has two roles named {name!r}")


__all__ = [
    "ENV_APP_ID",
    "ENV_NUM_REPLICAS",
    "ENV_RANK0_HOST",
    "ENV_REPLICA_ID",
    "ENV_ROLE_NAME",
    "check_role_names",
    "dns_label",
    "env_line",
    "hosts_env",
    "make_app_id",
    "replica_env",
]
