"""Secrets for the schedulers with no secret store of their own (local, docker, slurm, ray): read when the app is
submitted, on the submitting machine, and handed to the replicas by the engine's own means.

A role's ``{env: VAR, name: NAME, key: KEY}`` reference (``Role.secrets``) is
read, in this order, from:

1. the variable ``TORCHSPEC_SECRET_<NAME>_<KEY>`` of the submitting process
   (NAME and KEY upper-cased, every character but letters and digits as
   ``_``: ``hf-token``/``token`` is ``TORCHSPEC_SECRET_HF_TOKEN_TOKEN``);
2. the file ``<NAME>/<KEY>`` in the secrets folder, ``$TORCHSPEC_SECRETS_DIR``
   or else ``~/.config/torchspec/secrets`` (its content as it is, one final
   newline dropped).

A secret found in neither is a :class:`SecretMissingError` (a usage error,
exit 2) naming it and both places, raised before anything is created; never
an empty value.  Dry runs read nothing: they show :attr:`SecretRef.placeholder`
(``<secret hf-token/token>``).  ``env_prefix`` and ``mount`` need a secret
store that lists keys and makes files in the replica: Kubernetes'; these
schedulers refuse them at dry run (:func:`refuse_kubernetes_only`).

Between submit and the replicas a value travels under a *carrier* variable
(:func:`carriers`: ``TORCHSPEC_CARRIED_SECRET_<ROLE INDEX>_<ITEM INDEX>``) in
the environment of what the engine starts (the local supervisor, the sbatch
process, the Ray job), never in a request file, script, label or log; the
replica's launcher sets ``VAR`` from it and drops every carrier.
"""

from __future__ import annotations

import os
import re
from typing import Dict, List, Set, Tuple

from torchspec.errors import AppRefusedError, UsageError
from torchspec.specs import AppDef, Role
from torchspec.specs.secrets import SecretRef

SOURCE_PREFIX = "TORCHSPEC_SECRET_"
SECRETS_DIR_ENV = "TORCHSPEC_SECRETS_DIR"
#: The variables that carry values from submit to the replicas (the local supervisor knows the prefix too).
CARRIER_PREFIX = "TORCHSPEC_CARRIED_SECRET_"


class SecretMissingError(UsageError):
    """A secret a role names is set neither as a variable nor as a file on the submitting machine (exit 2)."""


def source_variable(ref: SecretRef) -> str:
    """``TORCHSPEC_SECRET_<NAME>_<KEY>``: the variable of the submitting process a value is read from."""
    return SOURCE_PREFIX + re.sub(r"[^A-Z0-9]", "_", f"{ref.name}_{ref.key}".upper())


def secrets_dir() -> str:
    """``$TORCHSPEC_SECRETS_DIR``, else ``~/.config/torchspec/secrets``."""
    return os.path.expanduser(os.environ.get(SECRETS_DIR_ENV) or os.path.join("~", ".config", "torchspec", "secrets"))


def read_value(ref: SecretRef) -> str:
    """The value of ``ref`` on this machine (the variable, else the file), or SecretMissingError naming both."""
    variable = source_variable(ref)
    if os.environ.get(variable):
        return os.environ[variable]
    path = os.path.join(secrets_dir(), ref.name, ref.key or "")
    try:
        with open(path, encoding="utf-8") as f:
            value = f.read()
    except OSError:
        value = ""
    value = value[:-1] if value.endswith("\n") else value
    if not value:
        raise SecretMissingError(f"{ref.kind} {ref.ref!r} (for {ref.env}) is not set on this machine",
                                 f"set {variable}, or write the value into {path}")
    return value


def env_refs(role: Role) -> List[Tuple[int, SecretRef]]:
    """``(index in role.secrets, ref)`` of the role's ``{env: VAR}`` references."""
    return [(i, ref) for i, ref in enumerate(role.secrets) if ref.env]


def carrier(role_index: int, item: int) -> str:
    return f"{CARRIER_PREFIX}{role_index}_{item}"


def carriers(app: AppDef) -> Dict[str, SecretRef]:
    """Carrier variable -> reference, for every ``{env: VAR}`` reference of every role."""
    return {carrier(r, i): ref for r, role in enumerate(app.roles) for i, ref in env_refs(role)}


def carried_values(app: AppDef) -> Dict[str, str]:
    """Carrier variable -> value, every secret read now (submit); all missing ones named in one error."""
    values: Dict[str, str] = {}
    missing: List[SecretMissingError] = []
    for name, ref in carriers(app).items():
        try:
            values[name] = read_value(ref)
        except SecretMissingError as e:
            missing.append(e)
    if missing:
        raise SecretMissingError("; ".join(str(e) for e in missing), "; ".join(e.hint or "" for e in missing))
    return values


def refuse_kubernetes_only(app: AppDef, backend: str) -> None:
    """AppRefusedError naming every ``env_prefix`` and ``mount`` reference, each at its place: ``backend`` reads
    one key at a time at submit and has no secret volume to mount."""
    problems = [(("roles", r, "secrets", i, "env_prefix" if ref.env_prefix is not None else "mount"),
                 f"role {role.name!r}: secret {ref.ref!r}: {backend} carries a secret as one variable"
                 f" ({{env: VAR, name, key}}); {'env_prefix' if ref.env_prefix is not None else 'mount'} needs"
                 " Kubernetes")
                for r, role in enumerate(app.roles) for i, ref in enumerate(role.secrets) if not ref.env]
    if problems:
        raise AppRefusedError("; ".join(what for _, what in problems),
                              "name each key as a variable: {env: VAR, name: NAME, key: KEY}", problems=problems)


def secret_env_by_role(app: AppDef, backend: str, taken_by_role: Dict[str, Set[str]]) -> Dict[str, Dict[str, List[str]]]:
    """Role name -> {VAR: [its carrier, its placeholder]}, for the request a dry run prints and ``schedule`` fills
    from :func:`carried_values`; refuses what ``backend`` cannot carry, and a variable set twice
    (``taken_by_role``: the variables the backend gives each role's replicas)."""
    refuse_kubernetes_only(app, backend)
    check_env_names(app, taken_by_role)
    return {role.name: {ref.env: [carrier(r, i), ref.placeholder] for i, ref in env_refs(role)}  # type: ignore[misc]
            for r, role in enumerate(app.roles)}


def refuse_secrets(app: AppDef, backend: str) -> None:
    """AppRefusedError naming every secret reference, each at its place: ``backend`` does not carry secrets yet
    (rather than starting replicas without them)."""
    problems = [(("roles", r, "secrets", i), f"role {role.name!r}: secret {ref.ref!r}: the {backend} scheduler does"
                 " not carry secrets yet") for r, role in enumerate(app.roles) for i, ref in enumerate(role.secrets)]
    if problems:
        raise AppRefusedError("; ".join(what for _, what in problems),
                              "run it on local, docker or kubernetes, or pass the value with env()", problems=problems)


def check_env_names(app: AppDef, taken_by_role: Dict[str, Set[str]]) -> None:
    """Refuse a secret variable that the role's env or torchspec sets already (one value would be lost)."""
    for r, role in enumerate(app.roles):
        taken = set(role.env) | taken_by_role.get(role.name, set())
        for i, ref in env_refs(role):
            if ref.env in taken:
                raise AppRefusedError(f"role {role.name!r}: secret {ref.ref!r} would set {ref.env}, which the"
                                      " role's env or torchspec sets already", path=("roles", r, "secrets", i, "env"))
