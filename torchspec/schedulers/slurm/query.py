"""Reading Slurm's answers: ``scontrol``/``squeue``/``sacct`` output as job views, states and messages.

Pure: the scheduler runs the commands and hands their output here, so every
format Slurm may answer in (``scontrol -o`` before 23.02, ``--json`` since,
``sacct -P`` once the controller forgot the job) is read in one place and
can be tested without a cluster.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from torchspec.schedulers.api import decode_labels
from torchspec.schedulers.slurm.states import COMMENT_LABELS, COMMENT_PREFIX, STATE_WORDS, slurm_state
from torchspec.specs import AppState
from torchspec.times import utc_from_epoch, utc_from_iso


@dataclass
class JobView:
    """What Slurm says about one component of a job (the whole job when it is not het)."""

    job_id: str
    offset: int
    state: str
    reason: str
    exit_code: str
    restarts: int
    comment: str
    nodes: str
    #: when Slurm took the job, last started it, ended it (aware UTC); None where it does not say (yet)
    submitted: Optional[datetime] = None
    started: Optional[datetime] = None
    ended: Optional[datetime] = None

    @property
    def app_state(self) -> AppState:
        return slurm_state(self.state)

    @property
    def log_root(self) -> Optional[str]:
        if not self.comment.startswith(COMMENT_PREFIX):
            return None
        return self.comment[len(COMMENT_PREFIX):].split(" ", 1)[0] or None

    @property
    def labels(self) -> Dict[str, str]:
        return comment_labels(self.comment)


def comment_labels(comment: str) -> Dict[str, str]:
    """The app's labels from a torchspec job's comment (``torchspec:LOG_ROOT labels:WORD ...``); {} without."""
    words = comment.split(" ", 2) if comment.startswith(COMMENT_PREFIX) else []
    if len(words) < 2 or not words[1].startswith(COMMENT_LABELS):
        return {}
    return decode_labels(words[1][len(COMMENT_LABELS):])


_KV = re.compile(r"(\S+?)=(.*?)(?=\s+[A-Za-z][A-Za-z:/]*=|\s*$)")


def parse_scontrol(text: str) -> List[Dict[str, str]]:
    """``scontrol show job -o`` output -> one dict per line (per het component).

    Values may hold spaces (``Comment=``, ``Reason=``); a value runs until
    the next ``Key=``.
    """
    jobs = []
    for line in text.splitlines():
        if not line.strip():
            continue
        jobs.append({m.group(1): m.group(2) for m in _KV.finditer(line.strip())})
    return jobs


def view_from_scontrol(fields: Mapping[str, str]) -> JobView:
    comment = fields.get("Comment", "")
    return JobView(
        job_id=fields.get("JobId", ""),
        offset=int(fields.get("HetJobOffset", "0") or 0),
        state=fields.get("JobState", ""),
        reason=fields.get("Reason", "None"),
        exit_code=fields.get("ExitCode", ""),
        restarts=int(fields.get("Restarts", "0") or 0),
        comment="" if comment == "(null)" else comment,
        nodes=fields.get("NodeList", ""),
        submitted=utc_from_iso(fields.get("SubmitTime")),
        started=utc_from_iso(fields.get("StartTime")),
        ended=utc_from_iso(fields.get("EndTime")),
    )


def _json_exit_code(exit_code: Any) -> str:
    """``CODE:SIGNAL`` from a JSON job's ``exit_code``: an object, or a raw wait status, by data_parser version."""
    if isinstance(exit_code, dict):
        rc = exit_code.get("return_code")
        sig = exit_code.get("signal", {}).get("id") if isinstance(exit_code.get("signal"), dict) else 0
        rc = rc.get("number") if isinstance(rc, dict) else rc
        return f"{rc or 0}:{(sig.get('number') if isinstance(sig, dict) else sig) or 0}"
    if isinstance(exit_code, int):
        return f"{(exit_code >> 8) & 0xFF}:{exit_code & 0x7F}"
    return ""


def view_from_json(job: Mapping[str, Any]) -> JobView:
    """A job of ``scontrol show job --json`` / ``squeue --json`` (data_parser of Slurm 23.02 or later)."""
    state = job.get("job_state", "")
    if isinstance(state, list):
        state = state[0] if state else ""
    offset = job.get("het_job_offset", 0)
    if isinstance(offset, dict):
        offset = offset.get("number", 0) if offset.get("set", True) else 0
    return JobView(
        job_id=str(job.get("job_id", "")),
        offset=int(offset or 0),
        state=str(state),
        reason=str(job.get("state_reason", "None")),
        exit_code=_json_exit_code(job.get("exit_code")),
        restarts=int(job.get("restart_cnt", 0) or 0),
        comment=str(job.get("comment") or ""),
        nodes=str(job.get("nodes", "")),
        submitted=_json_time(job.get("submit_time")),
        started=_json_time(job.get("start_time")),
        ended=_json_time(job.get("end_time")),
    )


def _json_time(value: Any) -> Optional[datetime]:
    """A JSON job's time: seconds since the epoch, bare or as ``{set, number}`` by data_parser version; 0 and
    unset are None."""
    if isinstance(value, dict):
        value = value.get("number") if value.get("set", True) and not value.get("infinite") else None
    return utc_from_epoch(value) if isinstance(value, (int, float)) else None


#: What ``sacct`` is asked for, in the order :func:`parse_sacct` reads it.
SACCT_FIELDS = "JobID,State,ExitCode,Comment,NodeList"


def parse_sacct(text: str) -> List[JobView]:
    """``sacct -n -P -X -o SACCT_FIELDS`` output -> one view per het component, in offset order."""
    views = []
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) < 5:
            continue
        job, _, offset = parts[0].partition("+")
        views.append(JobView(job_id=job, offset=int(offset or 0), state=parts[1], reason="None",
                             exit_code=parts[2], restarts=0, comment=parts[3], nodes=parts[4]))
    return sorted(views, key=lambda v: v.offset)


#: ``squeue -o``'s format for :func:`parse_squeue_list`: the comment last, as it may hold ``|``.
SQUEUE_LIST_FORMAT = "%i|%T|%V|%k"


def parse_squeue_list(text: str) -> List[Tuple[str, AppState, Dict[str, str], Optional[datetime]]]:
    """``squeue -h -o`` :data:`SQUEUE_LIST_FORMAT` output -> (job id, state, labels, submit time in UTC) of each
    job torchspec submitted, oldest first.  squeue prints the submit time in its own local time, with no zone.

    A het job is listed once, by its leader (offset 0).
    """
    found: Dict[str, Tuple[str, AppState, Dict[str, str], Optional[datetime]]] = {}
    for line in text.splitlines():
        job, state, submitted, comment = (line.split("|", 3) + ["", "", ""])[:4]
        leader, _, offset = job.strip().partition("+")
        if not comment.startswith(COMMENT_PREFIX) or offset not in ("", "0"):
            continue
        found[leader] = (leader, slurm_state(state), comment_labels(comment), utc_from_iso(submitted))
    return [found[job] for job in sorted(found, key=int)]


def job_message(leader: JobView) -> str:
    """Why the job is where it is: the pending reason, the exit code, what ended it."""
    state = leader.state.split()[0] if leader.state else ""
    app_state = leader.app_state
    reason = leader.reason if leader.reason not in ("", "None", "(null)") else ""
    if app_state == AppState.PENDING:
        msg = f"{state.lower()}" + (f": {reason}" if reason else "")
        if leader.restarts:
            msg += f" (restart {leader.restarts})"
        return msg
    if app_state == AppState.FAILED:
        code, _, sig = leader.exit_code.partition(":")
        details = [STATE_WORDS[state]] if state in STATE_WORDS else []
        if code and code != "0":
            details.append(f"exit code {code}")
        if sig and sig != "0":
            details.append(f"signal {sig}")
        text = f"{state}: {', '.join(details)}" if details else state
        return text + (f" ({reason})" if reason else "")
    if app_state == AppState.CANCELLED:
        return "cancelled" + (f" ({reason})" if reason else "")
    return ""


def job_state(views: Sequence[JobView]) -> AppState:
    """The app's state from its components: one failed or cancelled component decides, else the leader."""
    states = [v.app_state for v in views]
    for decisive in (AppState.CANCELLED, AppState.FAILED):
        if decisive in states:
            return decisive
    return states[0]


def replica_state(component: Optional[JobView], code: Optional[int], waiting: bool = False,
                  app_over: bool = False) -> AppState:
    """A replica's state: its exit code where it wrote one (in this run), else its component's; PENDING while
    its role waits for another in a running job (``waiting``: depends_on), UNKNOWN once the job ended before it
    started, or the app did (``app_over``: another component failed, and this one's batch step is still ending)."""
    component_state = component.app_state if component else AppState.UNKNOWN
    if component_state == AppState.PENDING:
        return AppState.PENDING
    if code is not None:
        return AppState.SUCCEEDED if code == 0 else AppState.FAILED
    if waiting:
        return AppState.PENDING if component_state == AppState.RUNNING and not app_over else AppState.UNKNOWN
    if component_state == AppState.SUCCEEDED:
        return AppState.UNKNOWN  # the job ended well but this replica left no exit code
    return component_state


def forgotten_job_state(replica_states: Sequence[AppState]) -> AppState:
    """The state of a job Slurm forgot (and no accounting knows): all its replicas' exit codes can tell."""
    if replica_states and all(s == AppState.SUCCEEDED for s in replica_states):
        return AppState.SUCCEEDED
    if AppState.FAILED in replica_states:
        return AppState.FAILED
    return AppState.UNKNOWN


def unreachable(stderr: str) -> bool:
    """Whether a Slurm command failed because no controller answered (rather than refusing the request)."""
    return any(s in stderr for s in (
        "Unable to contact slurm controller", "Could not establish a configuration source",
        "Connection refused", "Socket timed out", "Zero Bytes were transmitted",
    ))


def first_line(text: str) -> str:
    return text.splitlines()[0] if text else ""
