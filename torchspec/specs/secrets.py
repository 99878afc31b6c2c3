"""A role's secrets and ConfigMaps, named by reference: a name and a key, never the value.

``Role.secrets`` lists :class:`SecretRef` items; each says where the value
goes in the replica:

- ``env``: one key of the secret as one environment variable;
- ``env_prefix``: every key of the secret as a variable, its name the prefix
  plus the key (Kubernetes only: ``envFrom``);
- ``mount``: the secret's keys as files in a folder (every key, or only
  ``key``) (Kubernetes: a Secret or ConfigMap volume; Slurm and Ray: files
  written on each node; local and docker refuse it).

``kind`` is ``secret`` (a Kubernetes Secret) or ``config_map`` (a ConfigMap).
How each scheduler finds and carries the value is the scheduler's business
(:mod:`torchspec.schedulers.secrets`); the spec only names it, so nothing
written from a spec (a dry run, ``render``, the copy kept for ``describe``)
can hold a value.  Plain data: no I/O here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

#: The kinds of object a reference names.
SECRET = "secret"
CONFIG_MAP = "config_map"
KINDS = (SECRET, CONFIG_MAP)


@dataclass(frozen=True)
class SecretRef:
    """One reference of a role to a secret (or ConfigMap) ``name``: ``key`` of it as the variable ``env``,
    every key as variables starting ``env_prefix``, or its keys as files under the folder ``mount``."""

    name: str
    key: Optional[str] = None
    env: Optional[str] = None
    env_prefix: Optional[str] = None
    mount: Optional[str] = None
    kind: str = SECRET

    @property
    def ref(self) -> str:
        """``NAME/KEY``, or ``NAME`` for a reference to every key."""
        return f"{self.name}/{self.key}" if self.key else self.name

    @property
    def placeholder(self) -> str:
        """What a dry run shows where the value goes: ``<secret hf-token/token>``."""
        return f"<{self.kind} {self.ref}>"


__all__ = ["CONFIG_MAP", "KINDS", "SECRET", "SecretRef"]
