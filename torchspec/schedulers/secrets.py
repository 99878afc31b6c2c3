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

A ``{mount: /folder, name: NAME[, key: KEY]}`` reference (slurm and ray,
whose replicas run on the nodes' own file systems) is KEY read as above, or
without a key every file of the folder ``<NAME>/`` in the secrets folder
(a variable cannot say which keys a secret has).

A secret found in neither is a :class:`SecretMissingError` (a usage error,
exit 2) naming it and both places, raised before anything is created; never
an empty value.  Dry runs read nothing: they show :attr:`SecretRef.placeholder`
(``<secret hf-token/token>``).  ``env_prefix`` needs a secret store that
lists keys (Kubernetes'), and ``mount`` a replica that can be given files
(Kubernetes, slurm, ray): the others refuse them at dry run
(:func:`refuse_kubernetes_only`).

Between submit and the replicas a value travels under a *carrier* variable
(:func:`carriers`: ``TORCHSPEC_CARRIED_SECRET_<ROLE INDEX>_<ITEM INDEX>``) in
the environment of what the engine starts (the local supervisor, the sbatch
process, the Ray job), never in a request file, script, label or log; the
replica's launcher sets ``VAR`` from it (or writes the mount's files) and
drops every carrier.
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
    """The value of ``ref``'s key on this machine (the variable, else the file), or SecretMissingError naming
    both."""
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
        raise SecretMissingError(f"{ref.kind} {ref.ref!r} (for {ref.env or ref.mount}) is not set on this machine",
                                 f"set {variable}, or write the value into {path}")
    return value


#: A key that can be a file name in a mount folder (a Kubernetes key, but never ``.`` or ``..``).
_FILE_KEY = re.compile(r"[-._a-zA-Z0-9]+")


def is_file_key(key: str) -> bool:
    """Whether ``key`` can name a file of a mount folder, and nothing above it."""
    return bool(_FILE_KEY.fullmatch(key)) and key not in (".", "..")


def read_files(ref: SecretRef) -> Dict[str, str]:
    """Key -> value of a ``{mount}`` reference: its key (:func:`read_value`), or every file of
    ``<secrets dir>/<name>/`` whose name can be a key; SecretMissingError where there is none."""
    if ref.key:
        return {ref.key: read_value(ref)}
    folder = os.path.join(secrets_dir(), ref.name)
    try:
        names = sorted(n for n in os.listdir(folder) if is_file_key(n) and os.path.isfile(os.path.join(folder, n)))
    except OSError:
        names = []
    files = {n: read_value(SecretRef(name=ref.name, key=n, mount=ref.mount, kind=ref.kind)) for n in names}
    if not files:
        raise SecretMissingError(f"{ref.kind} {ref.ref!r} (for {ref.mount}) has no keys on this machine",
                                 f"write each key's value into a file of {folder} (a mount without key takes"
                                 " every file there)")
    return files


def env_refs(role: Role) -> List[Tuple[int, SecretRef]]:
    """``(index in role.secrets, ref)`` of the role's ``{env: VAR}`` references."""
    return [(i, ref) for i, ref in enumerate(role.secrets) if ref.env]


def carrier(role_index: int, item: int) -> str:
    return f"{CARRIER_PREFIX}{role_index}_{item}"


def carriers(app: AppDef) -> Dict[str, SecretRef]:
    """Carrier variable -> reference, for every ``{env: VAR}`` reference of every role."""
    return {carrier(r, i): ref for r, role in enumerate(app.roles) for i, ref in env_refs(role)}


def mount_refs(role: Role) -> List[Tuple[int, SecretRef]]:
    """``(index in role.secrets, ref)`` of the role's ``{mount: /folder}`` references."""
    return [(i, ref) for i, ref in enumerate(role.secrets) if ref.mount]


def carried_values(app: AppDef) -> Dict[str, str]:
    """Carrier variable -> value, every ``{env}`` secret read now (submit); all missing ones named in one error."""
    return read_carried(app)[0]


def read_carried(app: AppDef) -> Tuple[Dict[str, str], Dict[str, Dict[str, str]]]:
    """Every secret of ``app`` read now (submit): carrier -> value of each ``{env}`` reference, and carrier ->
    {key: value} of each ``{mount}`` reference; all missing ones named in one SecretMissingError."""
    values: Dict[str, str] = {}
    files: Dict[str, Dict[str, str]] = {}
    missing: List[SecretMissingError] = []
    for r, role in enumerate(app.roles):
        for i, ref in enumerate(role.secrets):
            try:
                if ref.env:
                    values[carrier(r, i)] = read_value(ref)
                elif ref.mount:
                    files[carrier(r, i)] = read_files(ref)
            except SecretMissingError as e:
                missing.append(e)
    if missing:
        raise SecretMissingError("; ".join(str(e) for e in missing), "; ".join(e.hint or "" for e in missing))
    return values, files


def refuse_kubernetes_only(app: AppDef, backend: str, mounts: bool = False) -> None:
    """AppRefusedError naming every ``env_prefix`` reference, and every ``mount`` one unless ``mounts`` (the
    backend writes files in its replicas' folders), each at its place: ``backend`` reads one key at a time at
    submit, and (without ``mounts``) has no secret volume to mount.  A relative mount folder, and a mount's key
    that cannot be a file name, are refused too (a spec built in Python skips lint's TS509)."""
    problems = []
    for r, role in enumerate(app.roles):
        for i, ref in enumerate(role.secrets):
            if ref.env or (mounts and ref.mount):
                if ref.mount and not ref.mount.startswith("/"):
                    problems.append((("roles", r, "secrets", i, "mount"), f"role {role.name!r}: secret {ref.ref!r}:"
                                     f" mount folder {ref.mount!r} is not absolute"))
                if ref.mount and ref.key and not is_file_key(ref.key):
                    problems.append((("roles", r, "secrets", i, "key"), f"role {role.name!r}: secret {ref.ref!r}:"
                                     f" key {ref.key!r} cannot be a file name in {ref.mount}"))
                continue
            target = "env_prefix" if ref.env_prefix is not None else "mount"
            carries = "as one variable ({env: VAR, name, key}) or as files ({mount: /folder, name})" if mounts \
                else "as one variable ({env: VAR, name, key})"
            problems.append((("roles", r, "secrets", i, target), f"role {role.name!r}: secret {ref.ref!r}: {backend}"
                             f" carries a secret {carries}; {target} needs Kubernetes"))
    if problems:
        raise AppRefusedError("; ".join(what for _, what in problems),
                              "name each key as a variable: {env: VAR, name: NAME, key: KEY}"
                              + (", or mount the secret as files: {mount: /folder, name: NAME}" if mounts else ""),
                              problems=problems)


def secret_env_by_role(app: AppDef, backend: str, taken_by_role: Dict[str, Set[str]]) -> Dict[str, Dict[str, List[str]]]:
    """Role name -> {VAR: [its carrier, its placeholder]}, for the request a dry run prints and ``schedule`` fills
    from :func:`carried_values`; refuses what ``backend`` cannot carry, and a variable set twice
    (``taken_by_role``: the variables the backend gives each role's replicas)."""
    refuse_kubernetes_only(app, backend)
    check_env_names(app, taken_by_role)
    return {role.name: {ref.env: [carrier(r, i), ref.placeholder] for i, ref in env_refs(role)}  # type: ignore[misc]
            for r, role in enumerate(app.roles)}


def check_env_names(app: AppDef, taken_by_role: Dict[str, Set[str]]) -> None:
    """Refuse a secret variable that the role's env or torchspec sets already (one value would be lost)."""
    for r, role in enumerate(app.roles):
        taken = set(role.env) | taken_by_role.get(role.name, set())
        for i, ref in env_refs(role):
            if ref.env in taken:
                raise AppRefusedError(f"role {role.name!r}: secret {ref.ref!r} would set {ref.env}, which the"
                                      " role's env or torchspec sets already", path=("roles", r, "secrets", i, "env"))
