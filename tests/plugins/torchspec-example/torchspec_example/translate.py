"""AppDef -> the example backend's request: pure (no I/O), so a dry run and its tests need no engine."""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping

from torchspec.schedulers.replicas import ENV_RANK0_HOST, env_line, replica_env
from torchspec.specs import AppDef, CfgVal, Role, macros
from torchspec_example.states import RANK0_HOST


@dataclass
class ReplicaLaunch:
    """One process to start: what runs, with which variables, where its output goes."""

    role: str
    replica_id: int
    argv: List[str]
    env: Dict[str, str]
    cwd: str
    #: the replica's files are LOG.out, LOG.err and LOG.exit
    log: str


@dataclass
class ExampleSchedulerRequest:
    """What ``schedule`` receives; its ``__str__`` is what ``torchspec dryrun`` prints."""

    app_id: str
    app_name: str
    folder: str
    kill_grace_s: int
    replicas: List[ReplicaLaunch] = field(default_factory=list)
    #: what ``describe`` gives back later: the spec (secrets hidden) and the labels
    spec: Dict[str, Any] = field(default_factory=dict)
    labels: Dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        lines = [f"# app {self.app_id}: output in {self.folder}"]
        for r in self.replicas:
            env = " ".join(env_line(k, v) for k, v in sorted(r.env.items()))
            lines.append(f"{r.role}/{r.replica_id}: cd {shlex.quote(r.cwd)} && env {env} {shlex.join(r.argv)}")
        return "\n".join(lines)


def app_to_request(app: AppDef, cfg: Mapping[str, CfgVal], app_id: str, cwd: str,
                   state_dir: str) -> ExampleSchedulerRequest:
    """The request for ``app``: one launch per replica, macros filled in as the engine would fill them.

    ``cwd`` (where replicas run, and ``${img_root}``) and ``state_dir`` are
    passed in, not looked up, so that this stays a pure function.
    """
    log_dir = str(cfg.get("log_dir") or os.path.join(state_dir, "example"))
    folder = os.path.join(os.path.abspath(os.path.join(cwd, log_dir)), app_id)
    request = ExampleSchedulerRequest(app_id, app.name, folder, int(cfg.get("kill_grace_s") or 0))
    for role in app.roles:
        for k in range(role.num_replicas):
            request.replicas.append(role_replica(role, k, app_id, cwd, folder))
    return request


def role_replica(role: Role, k: int, app_id: str, cwd: str, folder: str) -> ReplicaLaunch:
    """Replica ``k`` of ``role``: torchspec's variables win over the role's env of the same name."""
    values = macros.Values(img_root=cwd, app_id=app_id, replica_id=str(k), rank0_env=ENV_RANK0_HOST)
    filled = values.apply(role)
    env = {**filled.env, **replica_env(app_id, role.name, k, role.num_replicas, RANK0_HOST)}
    return ReplicaLaunch(role.name, k, [filled.entrypoint, *filled.args], env, cwd,
                         os.path.join(folder, f"{role.name}-{k}"))
