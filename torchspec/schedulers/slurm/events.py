"""What happened to a Slurm app, for ``torchspec events``: the job's own record, and its log folder's.

Slurm keeps, per job (each component of a het job), when it was submitted,
last started and ended, its state and the reason for it (why it is pending:
``Resources``, ``Priority``, ``Dependency``, ``QOSMaxJobsPerUserLimit``...),
how often it was requeued (preempted, a node failed, ``scontrol requeue``)
and on which nodes it runs.  What Slurm does not keep, torchspec's batch
script writes in the log folder: a replica's steps restarted in place
(REPLICA retries), its final exit code, what it waits for (``depends_on``);
each file's time is when it was written.  Pure but for reading that folder.
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import List, Optional, Sequence

from torchspec.schedulers.api import AppEvent, in_time_order
from torchspec.schedulers.slurm.logs import read_int, replica_folders, waiting_for
from torchspec.schedulers.slurm.query import JobView, job_message
from torchspec.schedulers.slurm.states import EXITCODE_FILE, RESTARTS_FILE, STARTED_FILE
from torchspec.times import utc_from_epoch

#: pending reasons that will not go by themselves: the job may never start
_NEVER_FITS = ("BadConstraints", "PartitionConfig", "PartitionNodeLimit", "ReqNodeNotAvail", "JobHeldAdmin",
               "launch failed")
#: Slurm's states in which a job is over and did not succeed: its end is a warning
_BAD_ENDS = ("FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "CANCELLED")


def job_events(views: Sequence[JobView], job_dir: Optional[str]) -> List[AppEvent]:
    """The app's events: each job component's, then each replica's from the log folder, oldest first."""
    events: List[AppEvent] = []
    for view in views:
        events += component_events(view, len(views) > 1)
    if job_dir and os.path.isdir(job_dir):
        for role, count in replica_folders(job_dir):
            for k in range(count):
                events += replica_events(job_dir, role, k)
    return in_time_order(events)


def component_events(view: JobView, het: bool) -> List[AppEvent]:
    """What Slurm says of one job (component): submitted, requeued, started, pending and why, ended and how."""
    source = f"job {view.job_id}" + (f"+{view.offset}" if het else "")
    state = view.state.split()[0] if view.state else ""
    found = []
    if view.submitted:
        found.append(AppEvent(view.submitted, source, "Submitted", "submitted"))
    if state == "PENDING":
        # as of the last time Slurm decided; the reason changes as the queue does, a new event each time
        reason = view.reason if view.reason not in ("", "None") else "waiting to be scheduled"
        latest = max((t for t in (view.submitted, view.started, view.ended) if t), default=None)
        found.append(AppEvent(latest, source, "Pending", f"pending: {reason}", reason.startswith(_NEVER_FITS)))
    if view.restarts:
        found.append(AppEvent(view.started, source, "Requeued",
                              f"requeued {view.restarts} time(s): preempted, a node failed, or scontrol requeue",
                              True))
    if view.started and state != "PENDING":
        found.append(AppEvent(view.started, source, "Started", f"started on {view.nodes or 'its nodes'}"))
    if view.ended and state not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED"):
        found.append(AppEvent(view.ended, source, state.title().replace("_", "") or "Ended",
                              job_message(view) or f"{state} (exit code {view.exit_code})", state in _BAD_ENDS))
    return found


def replica_events(job_dir: str, role: str, k: int) -> List[AppEvent]:
    """What the batch script wrote for replica ``k`` of ``role``: started, restarted in place, waits, ended."""
    folder = os.path.join(job_dir, role, str(k))
    source = f"replica folder {role}/{k}"
    found = []
    started = _written(os.path.join(folder, STARTED_FILE))
    if started:
        found.append(AppEvent(started, source, "Started", "its step started", False, role, k))
    restarts = read_int(os.path.join(folder, RESTARTS_FILE))
    if restarts:
        found.append(AppEvent(_written(os.path.join(folder, RESTARTS_FILE)), source, "Restarted",
                              f"its step was restarted in place {restarts} time(s) (REPLICA retries)", True, role, k))
    waits = waiting_for(job_dir, role, k)
    if waits:
        found.append(AppEvent(None, source, "Waiting", waits, False, role, k))
    code = read_int(os.path.join(folder, EXITCODE_FILE))
    if code is not None:
        found.append(AppEvent(_written(os.path.join(folder, EXITCODE_FILE)), source, "Exited",
                              f"exited with code {code}", code != 0, role, k))
    return found


def _written(path: str) -> Optional[datetime]:
    try:
        return utc_from_epoch(os.stat(path).st_mtime)
    except OSError:
        return None
