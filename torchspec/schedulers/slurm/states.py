"""The slurm backend's names: Slurm job states as AppStates, the files of a log folder, what an id may be.

The lowest module of the package: everything else reads these, this reads
nothing of the package.
"""

from __future__ import annotations

import re
from typing import Dict, FrozenSet

from torchspec.schedulers.api import Stream
from torchspec.specs import AppState

#: Every job torchspec submits has a comment starting with this, then its log root.
COMMENT_PREFIX = "torchspec:"
#: Then, for an app with labels (its AppDef.metadata), this and the labels as one word (``encode_labels``).
COMMENT_LABELS = "labels:"
SPEC_FILE = "spec.json"
SCRIPT_FILE = "job.sbatch"
EXITCODE_FILE = "exitcode"
#: What the replica's step writes on its node as it ends (its exit code): a step whose node failed writes none.
STEP_RC_FILE = "step.rc"
RESTARTS_FILE = "restarts"
#: What a replica's step writes on its node as it starts: the replica is ready (``depends_on`` ... ``ready``).
STARTED_FILE = "started"
#: A replica of a role that waits for another (``depends_on``): what it waits for, until it is started.
WAITING_FILE = "waiting"
LOG_FILES = {Stream.STDOUT: "stdout.log", Stream.STDERR: "stderr.log", Stream.COMBINED: "combined.log"}
#: Resource capability: a gres string (``gpu:a100:4``) used instead of ``--gpus-per-node``.
CAP_GRES = "slurm.gres"
#: Resource capability: a per-role ``--constraint`` (node features), on top of the run option.
CAP_CONSTRAINT = "slurm.constraint"
#: Resource capability: true (or user, mcs, topo) gives the role's nodes to it alone (``--exclusive``).
CAP_EXCLUSIVE = "slurm.exclusive"
#: How often ``logs -f`` asks Slurm whether the job is still alive.
POLL_S = 1.0

#: Every job state of Slurm 22.05-24.x (``squeue --help``, ``man squeue``), as an AppState.
#: COMPLETING counts as RUNNING: the job is not over until every process is gone.
SLURM_STATES: Dict[str, AppState] = {
    "BOOT_FAIL": AppState.FAILED,
    "CANCELLED": AppState.CANCELLED,
    "COMPLETED": AppState.SUCCEEDED,
    "COMPLETING": AppState.RUNNING,
    "CONFIGURING": AppState.PENDING,
    "DEADLINE": AppState.FAILED,
    "FAILED": AppState.FAILED,
    "NODE_FAIL": AppState.FAILED,
    "OUT_OF_MEMORY": AppState.FAILED,
    "PENDING": AppState.PENDING,
    "PREEMPTED": AppState.FAILED,
    "REQUEUED": AppState.PENDING,
    "REQUEUE_FED": AppState.PENDING,
    "REQUEUE_HOLD": AppState.PENDING,
    "RESIZING": AppState.RUNNING,
    "RESV_DEL_HOLD": AppState.PENDING,
    "REVOKED": AppState.CANCELLED,
    "RUNNING": AppState.RUNNING,
    "SIGNALING": AppState.RUNNING,
    "SPECIAL_EXIT": AppState.FAILED,
    "STAGE_OUT": AppState.RUNNING,
    "STOPPED": AppState.PENDING,
    "SUSPENDED": AppState.PENDING,
    "TIMEOUT": AppState.FAILED,
}

#: Why a job ended, in words, for the status message.
STATE_WORDS = {
    "BOOT_FAIL": "a node failed to boot",
    "DEADLINE": "it missed its deadline",
    "NODE_FAIL": "a node failed",
    "OUT_OF_MEMORY": "it ran out of memory",
    "PREEMPTED": "it was preempted",
    "TIMEOUT": "it hit its time limit",
}

TERMINAL: FrozenSet[AppState] = frozenset({AppState.SUCCEEDED, AppState.FAILED, AppState.CANCELLED})

#: What a role's name may be, since it names the replicas' log folders.
ROLE_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")
#: A Slurm job id, the only app id this scheduler hands out; anything else names no job (and no folder).
_JOB_ID = re.compile(r"[0-9]+")


def slurm_state(name: str) -> AppState:
    """The AppState of a Slurm job state; ``CANCELLED by 0`` (sacct) and unknown names are handled."""
    word = (name or "").split()[0].upper() if (name or "").split() else ""
    return SLURM_STATES.get(word.rstrip("+"), AppState.UNKNOWN)


def is_job_id(app_id: str) -> bool:
    """Whether ``app_id`` can be a Slurm job id: digits only, so it never reaches a path as ``..`` or ``/``."""
    return bool(_JOB_ID.fullmatch(app_id or ""))


def is_role_name(name: str) -> bool:
    """Whether ``name`` can name a role's log folder: letters, digits, ``_ . -``, and not only dots."""
    return bool(ROLE_NAME.match(name)) and bool(name.strip("."))
