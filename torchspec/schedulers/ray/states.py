"""The ray backend's names: job and actor states as AppStates, metadata keys, app ids, and the log-line format.

The lowest module of the package, and one of the few the driver (which runs
inside the Ray job, with nothing but the standard library and ray) imports;
every replica's actor imports it too, as it starts (the driver's actor class
refers to :func:`tag`).  So it imports nothing but the standard library: its
state maps hold the *names* of AppStates, and :func:`job_state` and
:func:`actor_state` import :mod:`torchspec.specs` when called, client side.
On the cluster, ``torchspec.specs`` would be imported (and, uploaded without
bytecode, compiled) by the driver and again by each actor as it starts, for
nothing: a few hundred milliseconds of CPU before the replicas run.

The driver and the scheduler meet only through Ray: the job's metadata
(what the app is), the actors' names (which replica, which attempt), and the
job's log, every line of which the driver tags (:func:`tag`) so that
``logs`` can give each replica its own lines back with their times.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Dict, Optional, Tuple

if TYPE_CHECKING:
    from torchspec.specs import AppState

BACKEND = "ray"
#: Where the dashboard (the Job Submission API) is when neither the run option nor RAY_ADDRESS says.
DEFAULT_ADDRESS = "127.0.0.1:8265"
ENV_ADDRESS = "RAY_ADDRESS"
#: The environment variable of the job's runtime_env that carries the driver's plan, as JSON.
ENV_PLAN = "TORCHSPEC_RAY_PLAN"
#: The environment variable of the job's runtime_env that carries the secrets' values (base64 of JSON:
#: carrier -> value, or carrier -> {key: value} for a mount), which the driver hands each replica its own of; it
#: starts with torchspec.schedulers.secrets.CARRIER_PREFIX, so every carrier is dropped from a replica's env at once.
ENV_SECRETS = "TORCHSPEC_CARRIED_SECRET_ALL"
CARRIER_PREFIX = "TORCHSPEC_CARRIED_SECRET_"
#: The job's entrypoint: the driver, shipped with torchspec (see docs/schedulers/ray.md).
DRIVER_MODULE = "torchspec.schedulers.ray.driver"

#: Job metadata keys torchspec sets; a job whose metadata lacks META_APP is not torchspec's.
META_APP = "torchspec.app"
META_SPEC = "torchspec.spec"
META_SESSION = "torchspec.session"
META_PREFIX = "torchspec."

STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")
#: Exit code of the driver when the app can never be placed (or not within placement_timeout).
EXIT_UNSCHEDULABLE = 75
#: What the driver exits with when it was stopped (SIGTERM): 128 + 15, as a shell reports it.
EXIT_STOPPED = 143
#: Ray's job supervisor SIGKILLs a stopped driver this many seconds after its SIGTERM (3 by default), read from
#: the job's own env_vars: the driver's stop path (every replica SIGTERMed, then SIGKILLed after its grace, then
#: the summary) takes about 2.5 s on an idle cluster and more under load, so the job asks for a margin.
ENV_STOP_WAIT = "RAY_JOB_STOP_WAIT_TIME_S"
STOP_WAIT_S = 30

#: Ray's job states (``ray.job_submission.JobStatus``) as the names of AppStates (:func:`job_state`).
JOB_STATES: Dict[str, str] = {
    "PENDING": "PENDING",
    "RUNNING": "RUNNING",
    "STOPPED": "CANCELLED",
    "SUCCEEDED": "SUCCEEDED",
    "FAILED": "FAILED",
}

#: Ray's actor states as the state of the replica the actor runs.  A DEAD actor is one whose replica ended:
#: the driver kills an actor once its replica exited, so while the job runs, DEAD means the replica is done.
ACTOR_STATES: Dict[str, str] = {
    "DEPENDENCIES_UNREADY": "PENDING",
    "PENDING_CREATION": "PENDING",
    "RESTARTING": "PENDING",
    "ALIVE": "RUNNING",
    "DEAD": "SUCCEEDED",
}

#: What a role's name may be (it names actors, placement groups and log tags).
_ROLE_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9_.-]*[A-Za-z0-9])?$")
#: An app id: the dashboard's host:port, then the submission id (``127.0.0.1:8265-trainer-k3x9q2``), as TorchX.
_APP_ID = re.compile(r"^(?P<address>[A-Za-z0-9_.\-\[\]:]+:\d+)-(?P<sid>[A-Za-z0-9][A-Za-z0-9_.-]*)$")


def job_state(status: str) -> AppState:
    """The AppState of a Ray job status (``JobStatus.RUNNING`` or ``"RUNNING"``); UNKNOWN for any other."""
    from torchspec.specs import AppState

    name = str(getattr(status, "value", status) or "").upper()
    return AppState[JOB_STATES.get(name, "UNKNOWN")]


def actor_state(state: str) -> AppState:
    """The AppState of the replica an actor in Ray's ``state`` runs (``"ALIVE"``); UNKNOWN for any other."""
    from torchspec.specs import AppState

    return AppState[ACTOR_STATES.get(state, "UNKNOWN")]


def is_role_name(name: str) -> bool:
    return bool(_ROLE_NAME.match(name or ""))


def make_app_id(address: str, submission_id: str) -> str:
    return f"{address}-{submission_id}"


def split_app_id(app_id: str) -> Optional[Tuple[str, str]]:
    """(dashboard address, submission id) of an app id; None for anything else."""
    match = _APP_ID.match(app_id or "")
    return (match.group("address"), match.group("sid")) if match else None


# -- actors: one per replica attempt -------------------------------------------


def actor_name(role: str, replica_id: int, attempt: int) -> str:
    """``trainer/1#0``: the actor of replica 1 of role trainer, first attempt (unique within the job's namespace)."""
    return f"{role}/{replica_id}#{attempt}"


def parse_actor_name(name: str) -> Optional[Tuple[str, int, int]]:
    """(role, replica id, attempt) of an actor the driver named; None for any other actor."""
    match = re.fullmatch(r"(.+)/(\d+)#(\d+)", name or "")
    return (match.group(1), int(match.group(2)), int(match.group(3))) if match else None


# -- placement groups: one per role -------------------------------------------


def group_prefix(submission_id: str) -> str:
    """``torchspec-trainer-k3x9q2/``: how the name of every placement group of the app starts.

    A submission id and a role name never hold ``/``, so no other app's groups
    start the same (``torchspec-a-k3x9q2-`` would also start the groups of an
    app named ``a-k3x9q2``); the backstop finds an app's groups by it alone.
    """
    return f"torchspec-{submission_id}/"


def group_name(submission_id: str, role: str) -> str:
    """``torchspec-trainer-k3x9q2/trainer``: the placement group of ``role`` (its bundles: one per replica)."""
    return group_prefix(submission_id) + role


# -- log lines -------------------------------------------------------------------

#: The tag the driver's replicas put on each of their lines, and the driver on its own.
_TAG = re.compile(r"\[torchspec (?P<who>driver|[A-Za-z0-9_.-]+/\d+) (?:(?P<stream>stdout|stderr) )?"
                  r"(?P<time>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z)\] ?")
#: The driver's last line: what each replica did, as JSON (``describe`` reads it from a failed job's message).
SUMMARY = "summary "


@dataclass(frozen=True)
class LogLine:
    """One tagged line of the job's log: who wrote it, which stream, when, and the text (ending in ``\\n``)."""

    who: str
    stream: Optional[str]
    time: datetime
    text: str


def now_stamp() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def tag(who: str, stream: Optional[str], text: str, stamp: Optional[str] = None) -> str:
    """``[torchspec trainer/0 stdout 2026-01-02T03:04:05.678901Z] text``: a line as it goes into the job's log."""
    middle = f"{who} {stream}" if stream else who
    return f"[torchspec {middle} {stamp or now_stamp()}] {text}"


def parse_line(line: str) -> Optional[LogLine]:
    """The tagged line inside one line of the job's log (after Ray's ``(actor pid=...)`` prefix); None if untagged."""
    match = _TAG.search(line)
    if match is None:
        return None
    when = datetime.strptime(match.group("time"), "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
    text = line[match.end():]
    return LogLine(match.group("who"), match.group("stream"), when, text if text.endswith("\n") else text + "\n")
