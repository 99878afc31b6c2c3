"""The ``local`` request: what ``dryrun`` prints and what ``schedule`` stores as ``request.json``.

Read back by the supervisor, which should start fast: this module imports no
torchspec module but the package's constants (no specs, no scheduler API),
and its classes are plain ones with the equality and repr of dataclasses,
since importing ``dataclasses`` (which imports ``inspect``) costs more than
the rest of the supervisor's imports.
:mod:`~torchspec.schedulers.local.translate` builds requests from an AppDef.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Tuple

from torchspec.schedulers.local.states import (
    COMBINED_LOG,
    ENV_RESTART_COUNT,
    FORMAT_VERSION,
    OUTPUT_LOG,
    STDERR_LOG,
    STDOUT_LOG,
)
from torchspec.schedulers.replicas import ENV_ATTEMPT

if TYPE_CHECKING:
    from torchspec.schedulers.api import Stream


class _Record:
    """``==``, ``repr`` and a JSON-ready dict over the fields named in ``_fields``, as a dataclass has."""

    _fields: Tuple[str, ...] = ()
    _hidden: Tuple[str, ...] = ()  # left out of the repr

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in self._fields)

    __hash__ = None  # type: ignore[assignment]  # mutable, as dataclasses with eq are

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields if name not in self._hidden)
        return f"{self.__class__.__qualname__}({shown})"

    def as_dict(self) -> Dict[str, Any]:
        """Every field, records (also in lists) as dicts, like ``dataclasses.asdict``."""
        def value(item: Any) -> Any:
            if isinstance(item, _Record):
                return item.as_dict()
            if isinstance(item, list):
                return [value(v) for v in item]
            if isinstance(item, dict):
                return {k: value(v) for k, v in item.items()}
            return item

        return {name: value(getattr(self, name)) for name in self._fields}

    def _assign(self, values: Mapping[str, Any]) -> None:
        """Set every field from ``values`` (an ``__init__``'s ``locals()``)."""
        for name in self._fields:
            setattr(self, name, values[name])


class ReplicaRequest(_Record):
    """How to start one replica.

    ``env`` is what the replica gets on top of the supervisor's environment
    (which is the submitting process's); ``PATH`` is that environment's
    ``PATH`` with ``path_entry`` (the image folder) appended, or prepended
    when ``prepend_path``.
    """

    _fields = ("role", "replica_id", "args", "env", "cwd", "path_entry", "prepend_path", "output", "error_file",
               "secret_env")

    def __init__(self, role: str, replica_id: int, args: List[str], env: Dict[str, str], cwd: str,
                 path_entry: str, prepend_path: bool, output: str, error_file: str,
                 secret_env: Optional[Dict[str, List[str]]] = None) -> None:
        """``secret_env``: variable -> [the supervisor's variable carrying its value, the placeholder a dry run
        shows]; the values themselves are never in the request (see torchspec/schedulers/secrets.py)."""
        secret_env = dict(secret_env or {})
        self._assign(locals())

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> "ReplicaRequest":
        """A replica of ``request.json``; one of FORMAT_VERSION 1 named three log files instead of ``output``."""
        fields = dict(data)
        legacy = [fields.pop(key, None) for key in ("stdout", "stderr", "combined")]
        if "output" not in fields and legacy[0]:
            fields["output"] = os.path.join(os.path.dirname(legacy[0]), OUTPUT_LOG)
        return ReplicaRequest(**fields)

    def legacy_log(self, stream: "Stream") -> str:
        """Where an app of FORMAT_VERSION 1 kept ``stream`` (it has no ``output.log``)."""
        name = {"stdout": STDOUT_LOG, "stderr": STDERR_LOG, "combined": COMBINED_LOG}[getattr(stream, "value", stream)]
        return os.path.join(os.path.dirname(self.output), name)

    def dryrun_lines(self, role: str) -> List[str]:
        """The dry-run lines of this replica, indented under its role's line."""
        import shlex

        from torchspec.schedulers.replicas import env_line  # only dry runs print: the supervisor never loads it

        path = f"{self.path_entry}:$PATH" if self.prepend_path else f"$PATH:{self.path_entry}"
        lines = [
            f"    {role}/{self.replica_id}:",
            f"      command:  {shlex.join(self.args)}",
            f"      cwd:      {self.cwd}",
            f"      PATH:     {path}",
            "      env:",
        ]
        lines += [f"        {env_line(key, value)}" for key, value in self.env.items()]
        lines += [f"        {key}={shown}" for key, (_, shown) in self.secret_env.items()]
        lines.append(f"        {ENV_RESTART_COUNT}=<restarts so far, set at each launch> (also {ENV_ATTEMPT})")
        lines.append(f"      output:   {self.output}")
        return lines


class RoleRequest(_Record):
    """A role's replicas and its retry settings (``retry_policy`` as its string value); ``depends_on``: the
    roles it starts after, ``[[ROLE, finished|ready], ...]`` (see order.py)."""

    _fields = ("name", "max_retries", "retry_policy", "replicas", "depends_on")

    def __init__(self, name: str, max_retries: int, retry_policy: str, replicas: List[ReplicaRequest],
                 depends_on: Optional[List[List[str]]] = None) -> None:
        depends_on = [list(d) for d in depends_on or []]
        self._assign(locals())


class LocalRequest(_Record):
    """Everything the supervisor needs to run the app; stored as ``request.json``.

    ``index_dir`` is the scheduler's own ``apps`` folder when the ``state_dir``
    run option put the app elsewhere: ``schedule`` links the app there so
    status and log commands, which get no run options, still find it.
    ``spec`` is the AppDef as submitted, kept for ``spec.json``; ``labels``
    its metadata, which ``list`` and ``describe`` give back.
    """

    _fields = ("app_id", "app_name", "session_name", "app_dir", "kill_grace_s", "roles", "index_dir", "spec",
               "labels")
    _hidden = ("spec",)

    def __init__(self, app_id: str, app_name: str, session_name: str, app_dir: str, kill_grace_s: int,
                 roles: List[RoleRequest], index_dir: Optional[str] = None,
                 spec: Optional[Dict[str, Any]] = None, labels: Optional[Dict[str, str]] = None) -> None:
        labels = {} if labels is None else labels
        self._assign(locals())
        self.spec: Dict[str, Any] = {} if spec is None else spec

    def to_json(self) -> Dict[str, Any]:
        data = self.as_dict()
        data.pop("spec")
        data["version"] = FORMAT_VERSION
        return data

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> "LocalRequest":
        roles = [
            RoleRequest(
                name=role["name"],
                max_retries=int(role["max_retries"]),
                retry_policy=role["retry_policy"],
                replicas=[ReplicaRequest.from_json(replica) for replica in role["replicas"]],
                depends_on=role.get("depends_on"),
            )
            for role in data["roles"]
        ]
        return LocalRequest(
            app_id=data["app_id"],
            app_name=data["app_name"],
            session_name=data["session_name"],
            app_dir=data["app_dir"],
            kill_grace_s=int(data["kill_grace_s"]),
            roles=roles,
            index_dir=data.get("index_dir"),
            labels=dict(data.get("labels") or {}),
        )

    def role(self, name: str) -> Optional[RoleRequest]:
        return next((role for role in self.roles if role.name == name), None)

    def __str__(self) -> str:
        lines = [
            f"local app {self.app_id} (session {self.session_name!r})",
            f"  app folder: {self.app_dir}",
            f"  kill grace: {self.kill_grace_s}s (SIGTERM, then SIGKILL to each replica's process group)",
        ]
        if self.index_dir:
            lines.append(f"  linked from: {os.path.join(self.index_dir, self.app_id)}")
        if self.labels:
            lines.append("  labels (kept in state.json; describe and list -l read them):")
            lines += [f"    {key}={value}" for key, value in sorted(self.labels.items())]
        for role in self.roles:
            lines.append(
                f"  role {role.name}: {len(role.replicas)} replica(s),"
                f" max_retries={role.max_retries}, retry_policy={role.retry_policy}"
            )
            if role.depends_on:
                lines.append("    starts after: " + ", ".join(f"{r} is {w}" for r, w in role.depends_on))
            for replica in role.replicas:
                lines += replica.dryrun_lines(role.name)
        return "\n".join(lines)


__all__ = ["LocalRequest", "ReplicaRequest", "RoleRequest"]
