"""What Ray's answers mean for torchspec: a job, its actors and its driver's summary as a DescribeAppResponse. Pure.

- The app's state is the job's (:data:`~.states.JOB_STATES`), except that a
  running job whose driver has not started any replica yet (its placement
  groups wait) is PENDING.
- While the job runs, each replica's state is that of its latest actor
  (``role/k#attempt``), and its restarts are its attempts less one.
- Once the job ended, the driver's summary line (in a failed job's message,
  which holds the tail of its log) says which replica failed with which exit
  code, or why the app could not be placed.
- A job Ray calls STOPPED is CANCELLED only where its driver's log confirms
  that it stopped every replica (:func:`stopped_state`); a driver that
  crashed or was killed reads FAILED, never CANCELLED.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Mapping, Optional, Tuple

from torchspec.schedulers.api import DescribeAppResponse, ReplicaRunStatus
from torchspec.schedulers.ray.states import (
    META_APP,
    META_SESSION,
    META_SPEC,
    SUMMARY,
    actor_state,
    job_state,
    parse_actor_name,
    parse_line,
)
from torchspec.specs import AppState, Role, RoleStatus

#: (role, replica id) -> (latest attempt, its actor's state, its node id)
Latest = Dict[Tuple[str, int], Tuple[int, str, Optional[str]]]


def latest_actors(actors: List[Mapping[str, Any]]) -> Latest:
    """Each replica's latest attempt, from the actors' names; other actors are ignored."""
    latest: Latest = {}
    for actor in actors:
        parsed = parse_actor_name(actor.get("name") or "")
        if parsed is None:
            continue
        role, k, attempt = parsed
        if (role, k) not in latest or latest[(role, k)][0] < attempt:
            latest[(role, k)] = (attempt, str(actor.get("state")), actor.get("node_id"))
    return latest


def parse_summary(message: Optional[str]) -> Optional[Dict[str, Any]]:
    """The driver's last summary line in ``message`` (a failed job's message ends with the log's tail)."""
    for line in reversed((message or "").splitlines()):
        parsed = parse_line(line)
        if parsed is not None and parsed.who == "driver" and parsed.text.startswith(SUMMARY):
            try:
                return json.loads(parsed.text[len(SUMMARY):])
            except ValueError:
                return None
    return None


def rebuild_roles(metadata: Mapping[str, str]) -> List[Role]:
    """The app's roles, from the spec the job's metadata keeps; none for a spec that cannot be read."""
    from torchspec.specs.convert import build_app

    try:
        return build_app(json.loads(metadata.get(META_SPEC) or "{}")).roles
    except (KeyError, TypeError, ValueError):
        return []


def _replica_state(app: AppState, running_job: bool, actor: Optional[Tuple[int, str, Optional[str]]],
                   summary: Optional[Dict[str, Any]], who: str) -> Tuple[AppState, Optional[int]]:
    """One replica's state and exit code."""
    if running_job:
        return (actor_state(actor[1]) if actor else AppState.PENDING), None
    if app == AppState.SUCCEEDED:
        return AppState.SUCCEEDED, 0
    result = ((summary or {}).get("replicas") or {}).get(who)
    if app == AppState.FAILED and result:
        code = result.get("exit_code")
        if code is None:
            return AppState.CANCELLED, None  # stopped by the driver when another replica failed
        return (AppState.SUCCEEDED if code == 0 else AppState.FAILED), code
    return (AppState.CANCELLED if app == AppState.CANCELLED else app), None


def describe_job(app_id: str, job: Any, actors: List[Mapping[str, Any]], node_ips: Mapping[str, str],
                 stopped_log: Optional[str] = None) -> DescribeAppResponse:
    """The DescribeAppResponse of a torchspec job (``JobDetails``), its actors and the nodes' addresses;
    ``stopped_log``: the log of a STOPPED job (:func:`stopped_state` reads it)."""
    metadata = dict(getattr(job, "metadata", None) or {})
    roles = rebuild_roles(metadata)
    latest = latest_actors(actors)
    state = job_state(getattr(job, "status", ""))
    running_job = state == AppState.RUNNING
    if running_job and not latest:
        state = AppState.PENDING  # the driver waits for its placement groups (or is starting)
    summary = parse_summary(getattr(job, "message", None)) if state == AppState.FAILED else None
    if state == AppState.CANCELLED and stopped_log is not None:
        state, summary = stopped_state(stopped_log)
    roles_statuses = []
    for role in roles:
        replicas = []
        for k in range(role.num_replicas):
            actor = latest.get((role.name, k))
            replica_state, code = _replica_state(state, running_job, actor, summary, f"{role.name}/{k}")
            replicas.append(ReplicaRunStatus(
                id=k, state=replica_state, role=role.name, hostname=node_ips.get(actor[2] or "", "") if actor else "",
                exit_code=code, num_restarts=actor[0] if actor else 0))
        roles_statuses.append(RoleStatus(role=role.name, replicas=replicas))
    return DescribeAppResponse(
        app_id=app_id, state=state, num_restarts=max((a[0] for a in latest.values()), default=0),
        msg=_message(state, running_job, job, summary), roles_statuses=roles_statuses, roles=roles,
        ui_url=None, metadata={"submission_id": str(getattr(job, "submission_id", "") or ""),
                               "ray_job_id": str(getattr(job, "job_id", "") or ""),
                               "session_name": metadata.get(META_SESSION, "")},
        name=metadata.get(META_APP) or None)


def stopped_state(log: str) -> Tuple[AppState, Optional[Dict[str, Any]]]:
    """What a job Ray calls STOPPED really is: CANCELLED when its driver confirmed every replica stopped (its
    CANCELLED summary), or never got to start one (no line of its own); the summary's state when the app ended
    as it was stopped; otherwise FAILED: the driver crashed or was killed without stopping its replicas."""
    summary = parse_summary(log)
    if summary is not None:
        return AppState[summary.get("state") or "FAILED"], summary
    started = any((parsed := parse_line(line)) is not None and parsed.who == "driver" for line in log.splitlines())
    if not started:
        return AppState.CANCELLED, None
    return AppState.FAILED, {"driver_lost": "the job was stopped, but its driver ended without confirming that its"
                                            " replicas stopped (it crashed or was killed; see its log)"}


def _message(state: AppState, running_job: bool, job: Any, summary: Optional[Dict[str, Any]]) -> str:
    if state == AppState.PENDING and running_job:
        return "waiting for the placement groups (every replica starts once all of them are placed)"
    if state != AppState.FAILED:
        return str(getattr(job, "message", "") or "")
    if summary and summary.get("driver_lost"):
        return summary["driver_lost"]
    if summary and summary.get("unschedulable"):
        return f"the app cannot be placed: {summary['unschedulable']}"
    later = f"; {summary['never_started']}" if summary and summary.get("never_started") else ""
    if summary and summary.get("failed") and summary.get("reason"):
        return f"{summary['failed']} failed: {summary['reason']}{later}"
    if summary and summary.get("failed"):
        return f"{summary['failed']} exited with code {summary.get('exit_code')}{later}"
    code = getattr(job, "driver_exit_code", None)
    # without a summary the driver itself died: a signal shows as -N, or 128+N from the shell Ray runs it in
    died = -code if isinstance(code, int) and code < 0 else code - 128 if isinstance(code, int) and code > 128 else 0
    if died:
        import signal

        try:
            name = signal.Signals(died).name
        except ValueError:
            name = f"signal {died}"
        return (f"the driver died, killed by {name} (exit code {code}), before the app ended; each replica's"
                " launcher ends what the replica started once Ray ends its actor")
    message = str(getattr(job, "message", "") or "")
    return message.splitlines()[0] if message else f"the driver exited with code {code}"
