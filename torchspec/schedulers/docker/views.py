"""What the engine says about an app's containers, read back in torchspec's terms.

``docker inspect`` output becomes a :class:`ContainerView` (one container:
its replica, attempt, state and failure) and an :class:`AppView` (all of an
app's containers: which is each replica's current one, the app's state and
message).  Pure: the engine is asked in ``engine.read_app``; ``status``,
``describe``, ``logs``, ``cancel`` and the watcher all decide from these.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Tuple

from torchspec.schedulers.docker.labels import (
    ATTEMPT_SUFFIX,
    CANCELLED_SUFFIX,
    DOCKER_STATES,
    LABEL_ATTEMPT,
    LABEL_REPLICA_ID,
    LABEL_ROLE,
    LABEL_ROLE_NAME,
    OUTSIDE_STOPS,
)
from torchspec.schedulers.api import ReplicaRunStatus
from torchspec.schedulers.order import never_started
from torchspec.specs import AppState, RetryPolicy


@dataclass
class ContainerView:
    """What ``docker inspect`` says about one container of an app, in torchspec's terms."""

    id: str
    name: str
    role: str
    replica_id: int
    attempt: int
    status: str
    exit_code: Optional[int]
    restart_count: int
    oom_killed: bool
    error: str
    started_at: str
    finished_at: str
    labels: Dict[str, str]
    hostname: str
    ports: Dict[str, Any]
    created: str
    #: the id of the image the container runs (``sha256:...``), which the engine resolved from the tag
    image_id: str = ""

    @property
    def cancelled(self) -> bool:
        return cancelled_name(self.name)

    @property
    def stopped_outside(self) -> str:
        """Who stopped the container, where the watcher saw that it was not torchspec (see ``OUTSIDE_STOPS``)."""
        return next((who for suffix, who in OUTSIDE_STOPS.items() if self.name.endswith(suffix)), "")

    @property
    def base_name(self) -> str:
        """The name the replica's containers are created with: without the mark of an outside stop."""
        return next((self.name[:-len(s)] for s in OUTSIDE_STOPS if self.name.endswith(s)), self.name)

    @property
    def replaced(self) -> bool:
        """A container an APPLICATION or ROLE retry replaced (renamed ``NAME.attemptN``)."""
        return replaced_name(self.name)

    @property
    def state(self) -> AppState:
        if self.status == "exited":
            if self.cancelled:
                return AppState.CANCELLED
            if self.stopped_outside:  # its exit code says how it took the SIGTERM, not how its work ended
                return AppState.FAILED
            return AppState.SUCCEEDED if self.exit_code == 0 else AppState.FAILED
        if self.cancelled and self.status != "running":
            return AppState.CANCELLED
        return DOCKER_STATES.get(self.status, AppState.UNKNOWN)

    @property
    def role_spec(self) -> Dict[str, Any]:
        try:
            return json.loads(self.labels.get(LABEL_ROLE, "{}"))
        except ValueError:
            return {}

    @property
    def depends_on(self) -> List[List[str]]:
        """The role's ``depends_on`` as submitted, ``[[ROLE, finished|ready], ...]`` (see schedulers/order.py)."""
        return [[str(d.get("role")), str(d.get("when", "finished"))] for d in self.role_spec.get("depends_on") or []
                if isinstance(d, dict)]

    @property
    def waiting(self) -> bool:
        """Created and never started: the watcher starts it once the roles it depends on finished or run."""
        return self.status == "created" and bool(self.depends_on)

    @property
    def retry_policy(self) -> str:
        return str(self.role_spec.get("retry_policy", RetryPolicy.APPLICATION.value))

    @property
    def max_retries(self) -> int:
        return int(self.role_spec.get("max_retries", 0) or 0)

    @property
    def retry_pending(self) -> bool:
        """Failed, but the watcher restarts it (APPLICATION or ROLE retries left)."""
        return (
            self.state == AppState.FAILED
            and self.retry_policy in (RetryPolicy.APPLICATION.value, RetryPolicy.ROLE.value)
            and self.attempt < self.max_retries
        )

    @property
    def num_restarts(self) -> int:
        return self.attempt + self.restart_count

    def describe_failure(self) -> str:
        """``trainer/1 exited with code 3 after 2 restarts (OOMKilled)`` and the like."""
        who = self.stopped_outside
        what = f"{self.role}/{self.replica_id} " + (
            f"was stopped {who}, exit code {self.exit_code}" if who else f"exited with code {self.exit_code}")
        if self.exit_code in (137, 143) and not self.oom_killed and not who:
            what += f" (killed by SIG{'KILL' if self.exit_code == 137 else 'TERM'})"
        if self.num_restarts:
            what += f" after {self.num_restarts} restart{'s' if self.num_restarts != 1 else ''}"
        if self.oom_killed:
            what += " (OOMKilled: it ran out of its memory limit)"
        if self.error:
            what += f": {self.error}"
        return what

    @property
    def msg(self) -> str:
        """The replica's own message: why it failed, or that a process in it ran out of memory though it exited 0."""
        if self.state == AppState.FAILED:
            return self.describe_failure()
        if self.oom_killed and self.status == "exited":
            return (f"a process in {self.role}/{self.replica_id} was OOMKilled (it ran out of its memory limit),"
                    f" yet the replica exited with code {self.exit_code}")
        return ""


def cancelled_name(name: str) -> bool:
    """Whether a container of this name was stopped by torchspec's cancel (or delete)."""
    return name.endswith(CANCELLED_SUFFIX)


def replaced_name(name: str) -> bool:
    """Whether a container of this name was replaced by an APPLICATION or ROLE retry (``NAME.attemptN``)."""
    return ATTEMPT_SUFFIX in name.rsplit("-", 1)[-1]


def view_of(attrs: Mapping[str, Any]) -> ContainerView:
    """A :class:`ContainerView` from ``docker inspect`` output."""
    state = attrs.get("State") or {}
    config = attrs.get("Config") or {}
    labels = dict(config.get("Labels") or {})
    ports = (attrs.get("NetworkSettings") or {}).get("Ports") or {}
    return ContainerView(
        id=attrs["Id"],
        name=str(attrs.get("Name", "")).lstrip("/"),
        role=labels.get(LABEL_ROLE_NAME, ""),
        replica_id=_int(labels.get(LABEL_REPLICA_ID)),
        attempt=_int(labels.get(LABEL_ATTEMPT)),
        status=str(state.get("Status", "")),
        exit_code=state.get("ExitCode") if state.get("Status") in ("exited", "dead") else None,
        restart_count=int(attrs.get("RestartCount") or 0),
        oom_killed=bool(state.get("OOMKilled")),
        error=str(state.get("Error") or ""),
        started_at=str(state.get("StartedAt") or ""),
        finished_at=str(state.get("FinishedAt") or ""),
        labels=labels,
        hostname=str(config.get("Hostname") or ""),
        ports=ports,
        created=str(attrs.get("Created", "")),
        image_id=str(attrs.get("Image") or ""),
    )


def _int(text: Optional[str]) -> int:
    try:
        return int(text or 0)
    except ValueError:
        return 0


@dataclass
class AppView:
    """All containers of one app, with each replica's current one picked out."""

    app_id: str
    containers: List[ContainerView]

    @property
    def current(self) -> List[ContainerView]:
        """Each replica's latest container (highest attempt), in role then replica order."""
        latest: Dict[Tuple[str, int], ContainerView] = {}
        for c in self.containers:
            key = (c.role, c.replica_id)
            if key not in latest or c.attempt > latest[key].attempt:
                latest[key] = c
        return sorted(latest.values(), key=lambda c: (self.role_order.index(c.role), c.replica_id))

    @property
    def role_order(self) -> List[str]:
        """Roles in submission order: containers were created in it, and names sort within a role."""
        order: List[str] = []
        for c in sorted(self.containers, key=lambda c: (c.created, c.name)):
            if c.role not in order:
                order.append(c.role)
        return order

    @property
    def state(self) -> AppState:
        current = self.current
        states = [c.state for c in current]
        if AppState.CANCELLED in states:
            return AppState.CANCELLED
        if any(c.state == AppState.FAILED and not c.retry_pending for c in current):
            return AppState.FAILED
        if states and all(s == AppState.SUCCEEDED for s in states):
            return AppState.SUCCEEDED
        if AppState.RUNNING in states:
            return AppState.RUNNING
        return AppState.PENDING

    @property
    def msg(self) -> str:
        current = self.current
        failed = [c for c in current if c.state == AppState.FAILED and not c.retry_pending]
        if failed:
            first = min(failed, key=lambda c: c.finished_at)
            waiting = {c.role: c.depends_on for c in current if c.waiting}
            return first.describe_failure() + never_started(list(waiting), waiting)
        pending = [c for c in current if c.retry_pending]
        if pending:
            c = pending[0]
            return f"{c.describe_failure()}; restarting ({c.retry_policy} retry {c.attempt + 1} of {c.max_retries})"
        restarting = [c for c in current if c.status == "restarting"]
        if restarting:
            return f"{restarting[0].role}/{restarting[0].replica_id} is being restarted by Docker (REPLICA retry)"
        if any(c.cancelled for c in current):
            return "cancelled"
        return ""

    def will_replace(self, container: ContainerView) -> bool:
        """Whether the watcher is about to replace ``container`` for an APPLICATION or ROLE retry.

        True while a replica of its group (the app, or for ROLE its role) has
        failed with retries left, or has already been replaced by a later
        attempt that ``container`` has not caught up with.
        """
        return any(
            (c.retry_pending or c.attempt > container.attempt)
            and (c.retry_policy == RetryPolicy.APPLICATION.value or c.role == container.role)
            for c in self.current
        )

    def replicas_of(self, role: str, replica_id: int) -> List[ContainerView]:
        """Every container replica ``role/replica_id`` ran in, oldest attempt first."""
        found = [c for c in self.containers if c.role == role and c.replica_id == replica_id]
        return sorted(found, key=lambda c: c.attempt)


@dataclass
class DockerReplicaStatus(ReplicaRunStatus):
    """A replica status with why it failed (``ContainerView.msg``), besides the exit code and restarts."""

    msg: str = ""
