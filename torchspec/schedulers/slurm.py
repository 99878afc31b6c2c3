"""The ``slurm`` scheduler: one app is one Slurm batch job, one heterogeneous component per role.

``dryrun`` prints the sbatch script, complete: anyone can hand it to
``sbatch`` themselves.  In it, each role is a het-job component (a plain job
when there is one role) and each replica is its own job step, started with
``srun --exact`` in the background so that all of them run at once, with its
own environment (``${replica_id}``, ``${app_id}`` = the Slurm job id,
``${img_root}``, ``${rank0_env}``), which ``env`` sets inside the step only:
a role's ``PATH`` or ``SLURM_*`` never reaches srun or the script, whose own
variables are ``TS_*`` and readonly.  The script waits for the replicas and
ends the job with the first failure's exit code, which stops the others.

Specs and run options may come from anyone: no value may add a line to the
script (bash would run it) or split the job (sbatch's hetjob/packjob), so
run options going into ``#SBATCH`` lines are checked (:func:`sbatch_value`),
the job's name is made safe (:func:`job_name`), and every word of the body
is quoted.  Only a Slurm job id is an app id; nothing else ever names a
folder (``delete slurm://s/..`` must not remove TORCHSPEC_HOME).

The app id is the Slurm job id, so any shell that reaches the controller
finds the job with ``scontrol``/``squeue`` (``sacct`` once the controller
forgot it, where accounting is configured).  What Slurm does not keep lives
in the app's log folder, which must be on a file system the login and
compute nodes share, so it is kept private (folders 0700, files 0600)::

    LOG_ROOT/                     run option log_dir; default $TORCHSPEC_HOME/slurm
        JOBID.batch.log           the batch script's own output (``torchspec submit`` gives sbatch
                                  --output; run by hand, Slurm's default slurm-JOBID.out)
        JOBID/spec.json           the AppDef as submitted: what ``describe`` rebuilds
        JOBID/job.sbatch          the script as submitted
        JOBID/ROLE/K/stdout.log, stderr.log, combined.log
                                  each line "ISO-TIME<TAB>text", stamped as it arrived
        JOBID/ROLE/K/exitcode     written when replica K ended for good
        JOBID/ROLE/K/restarts     how often its step was restarted in place (REPLICA)

The job's comment is ``torchspec:LOG_ROOT`` (then the user's comment), which
is how ``list`` picks torchspec's jobs and ``status`` finds the logs.

Retries (see README): APPLICATION (and ROLE, which Slurm cannot do apart)
requeue the whole job from inside the batch script (``scontrol requeue``,
the job is submitted with ``--requeue``); Slurm counts the restarts.
REPLICA restarts the failed replica's step inside the same allocation.

The module reads in the order every scheduler module does: state maps, the
request whose ``__str__`` is what a dry run prints, the pure translator
(AppDef -> request), reading Slurm's answers, the options, the scheduler
class, ``create_scheduler``.
"""

from __future__ import annotations

import getpass
import json
import logging
import math
import os
import re
import shlex
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Pattern, Sequence, Tuple

from torchspec.errors import BackendError
from torchspec.schedulers.api import DescribeAppResponse, ListAppResponse, Scheduler, Stream, aware
from torchspec.schedulers.logfile import follow_lines
from torchspec.schedulers.replicas import (
    ENV_APP_ID,
    ENV_NUM_REPLICAS,
    ENV_RANK0_HOST,
    ENV_REPLICA_ID,
    ENV_ROLE_NAME,
)
from torchspec.specs import (
    NONE,
    AppDef,
    AppDryRunInfo,
    AppState,
    CfgVal,
    ReplicaStatus,
    RetryPolicy,
    Role,
    RoleStatus,
    macros,
    runopts,
)

logger: logging.Logger = logging.getLogger(__name__)

# ----------------------------------------------------------------------------
# Names and state maps
# ----------------------------------------------------------------------------

#: Every job torchspec submits has a comment starting with this, then its log root.
COMMENT_PREFIX = "torchspec:"
SPEC_FILE = "spec.json"
SCRIPT_FILE = "job.sbatch"
EXITCODE_FILE = "exitcode"
RESTARTS_FILE = "restarts"
LOG_FILES = {Stream.STDOUT: "stdout.log", Stream.STDERR: "stderr.log", Stream.COMBINED: "combined.log"}
#: Resource capability: a gres string (``gpu:a100:4``) used instead of ``--gpus-per-node``.
CAP_GRES = "slurm.gres"
#: Resource capability: a per-role ``--constraint`` (node features), on top of the run option.
CAP_CONSTRAINT = "slurm.constraint"
#: Seconds any one Slurm command may take before the controller counts as not answering.
COMMAND_TIMEOUT_S = 60
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
_STATE_WORDS = {
    "BOOT_FAIL": "a node failed to boot",
    "DEADLINE": "it missed its deadline",
    "NODE_FAIL": "a node failed",
    "OUT_OF_MEMORY": "it ran out of memory",
    "PREEMPTED": "it was preempted",
    "TIMEOUT": "it hit its time limit",
}

_TERMINAL = {AppState.SUCCEEDED, AppState.FAILED, AppState.CANCELLED}


def slurm_state(name: str) -> AppState:
    """The AppState of a Slurm job state; ``CANCELLED by 0`` (sacct) and unknown names are handled."""
    word = (name or "").split()[0].upper() if (name or "").split() else ""
    return SLURM_STATES.get(word.rstrip("+"), AppState.UNKNOWN)


# ----------------------------------------------------------------------------
# The request: what ``dryrun`` prints and ``schedule`` submits
# ----------------------------------------------------------------------------


@dataclass
class SlurmReplica:
    """One replica: its job step's command line, environment and place, with the macros filled in.

    ``args`` and the values of ``env`` may contain :data:`JOB_ID_MARK`, the
    job id that only exists once Slurm accepted the job; the script expands
    it as ``$SLURM_JOB_ID``.
    """

    role: str
    replica_id: int
    args: List[str]
    env: Dict[str, str]


@dataclass
class SlurmComponent:
    """One role as a component of the (het) job: its ``#SBATCH`` lines and its replicas."""

    role: str
    group: int
    sbatch_opts: List[str]
    srun_opts: List[str]
    cwd: str
    one_node_per_replica: bool
    restarts: int
    replicas: List[SlurmReplica] = field(default_factory=list)


@dataclass
class SlurmBatchRequest:
    """Everything ``schedule`` submits: the job-wide options, one component per role, the spec for describe."""

    app_name: str
    log_root: str
    job_opts: List[str]
    components: List[SlurmComponent]
    max_retries: int
    spec: Dict[str, Any] = field(default_factory=dict)

    @property
    def het(self) -> bool:
        return len(self.components) > 1

    def script(self) -> str:
        """The sbatch script; :meth:`__str__` too, so the dry run is exactly what is submitted."""
        return render_script(self)

    def sbatch_args(self) -> List[str]:
        """The command ``schedule`` hands the script to.

        ``--output`` is given here, not in the script: Slurm opens it before the
        script runs and fails the job when its folder is missing, while the
        script creates its log folders itself and so also runs when a user
        hands the dry run to ``sbatch`` on a fresh log root.
        """
        return ["sbatch", "--parsable", f"--output={self.log_root}/%j.batch.log"]

    def __str__(self) -> str:
        return self.script()


#: Stand for the Slurm job id and for rank 0's host of het group N, known only once the job runs;
#: :func:`shell_word` turns them into ``"$SLURM_JOB_ID"`` and ``"$TS_RANK0_HOST_N"``.
JOB_ID_MARK = "\x00SLURM_JOB_ID\x00"
_RANK0 = re.compile("\x00RANK0_(\\d+)\x00")
_MARKS = re.compile("(\x00SLURM_JOB_ID\x00|\x00RANK0_\\d+\x00)")


def rank0_mark(group: int) -> str:
    return f"\x00RANK0_{group}\x00"


def shell_word(text: str) -> str:
    """``text`` as one bash word, quoted, with the marks expanded by the shell when the job runs."""
    out = []
    for part in _MARKS.split(text):
        match = _RANK0.fullmatch(part)
        if part == JOB_ID_MARK:
            out.append('"$SLURM_JOB_ID"')
        elif match:
            out.append(f'"$TS_RANK0_HOST_{match.group(1)}"')
        elif part:
            out.append(shlex.quote(part))
    return "".join(out) or "''"


# The script's fixed part: small bash functions that say why they exist.  The script's own variables
# are TS_* and readonly: the replicas' environment never reaches the script (see run_replica).
_FUNCTIONS = r"""
# stamp FILE: copy stdin to FILE and to the replica's combined.log, each line
# prefixed with the time it arrived and a tab (torchspec logs --since/--until).
# mawk (Debian's awk) reads a pipe in blocks unless told -W interactive.
if awk -W version 2>/dev/null | grep -q mawk; then TS_AWK=(awk -W interactive); else TS_AWK=(awk); fi
readonly TS_AWK
stamp() {
    "${TS_AWK[@]}" -v f="$1" -v c="$(dirname "$1")/combined.log" \
        '{ l = strftime("%Y-%m-%dT%H:%M:%S%z") "\t" $0; print l >> f; fflush(f); print l >> c; fflush(c) }'
}

# node_host NODE: the host name of a Slurm node (differs from the node name
# where one host runs several slurmd); what ${rank0_env} hands the replicas.
node_host() {
    local host
    host=$(scontrol show node "$1" -o 2>/dev/null | grep -io 'NodeHostName=[^ ]*' | cut -d= -f2)
    echo "${host:-$1}"
}

# run_replica ROLE K GROUP NODE RESTARTS DIR env K=V... CMD...: replica K of
# ROLE as its own job step (--exact, so that the steps run side by side), in
# folder DIR, on NODE when given; restarted in place up to RESTARTS times
# (REPLICA policy). The replica's environment is set by `env` inside the step,
# so that it cannot change srun or this script (PATH, LOG_DIR, SLURM_*...).
run_replica() {
    local role=$1 k=$2 group=$3 node=$4 restarts=$5 cwd=$6 attempt=0 rc
    local log="$TS_LOG_DIR/$role/$k"
    shift 6
    echo 0 >"$log/restarts"
    while :; do
        SLURM_UMASK=$TS_UMASK srun ${TS_HETJOB:+--het-group="$group"} --exact --nodes=1 --ntasks=1 \
            ${node:+--nodelist="$node"} --job-name="$role/$k" --chdir="$cwd" "${TS_SRUN_OPTS[@]}" "$@" \
            2> >(stamp "$log/stderr.log") | stamp "$log/stdout.log"
        rc=${PIPESTATUS[0]}
        if ((rc == 0 || attempt >= restarts)); then
            wait  # for the stderr stamp, so the log is complete before exitcode says "done"
            echo "$rc" >"$log/exitcode"
            return "$rc"
        fi
        attempt=$((attempt + 1))
        echo "$attempt" >"$log/restarts"
        echo "--- torchspec: restart $attempt of replica $role/$k (exit code $rc) ---" | stamp "$log/stdout.log"
    done
}
""".strip("\n")


def render_script(request: SlurmBatchRequest) -> str:
    """The sbatch script of ``request``: ``#SBATCH`` lines, then bash that starts every replica.

    Every value in an ``#SBATCH`` line was checked by :func:`sbatch_value` (or
    made safe, the job name); everything in the body is a quoted word.
    """
    q = shlex.quote
    roles = ", ".join(
        f"{c.role} ({len(c.replicas)} replica{'s' if len(c.replicas) != 1 else ''})" for c in request.components
    )
    lines = [
        "#!/bin/bash",
        f"# torchspec app {request.app_name!r} as one Slurm job: {roles}.",
        f"# `torchspec submit -s slurm` submits this script with `{shlex.join(request.sbatch_args())}`;",
        "# `sbatch FILE` runs it too (its own output then goes to Slurm's default, slurm-JOBID.out).",
        f"# Logs: {request.log_root}/JOBID/ROLE/K/{{stdout,stderr,combined}}.log (lines: ISO time, tab, text).",
        "#",
    ]
    lines += [f"#SBATCH {opt}" for opt in request.job_opts]
    for c in request.components:
        if c.group > 0:
            lines.append("#SBATCH hetjob")
        where = f"het group {c.group}" if request.het else "the job"
        lines.append(f"# {where}: role {c.role}, {len(c.replicas)} replica(s)")
        lines += [f"#SBATCH {opt}" for opt in c.sbatch_opts]
    lines += [
        "",
        "set -uo pipefail",
        "# The logs, exit codes and the spec are the user's own: folders 0700, files 0600. The replicas keep",
        "# the umask the job started with (the submitter's): run_replica hands it to srun as $SLURM_UMASK.",
        'readonly TS_UMASK="$(umask)"',
        "umask 077",
        f"readonly TS_LOG_ROOT={shell_word(request.log_root)}",
        'readonly TS_LOG_DIR="$TS_LOG_ROOT/$SLURM_JOB_ID"',
        f"readonly TS_HETJOB={'1' if request.het else ''}",
        "# APPLICATION retries: how often a failed job requeues itself ($SLURM_RESTART_COUNT counts them)",
        f"readonly TS_MAX_RETRIES={request.max_retries}",
        "",
        _FUNCTIONS,
        "",
        "# Each replica's log folder (and the log root, which sbatch run by hand may not find yet);",
        "# on a requeued run the logs go on, after a marker line.",
    ]
    folders = " ".join(q(f"{c.role}/{r.replica_id}") for c in request.components for r in c.replicas)
    lines += [
        f'mkdir -p -- "$TS_LOG_DIR" && cd "$TS_LOG_DIR" && mkdir -p -- {folders} || exit 1',
        "# Slurm created the batch log (sbatch --output) with the submitter's umask: private too.",
        'chmod go= -- "$TS_LOG_ROOT/$SLURM_JOB_ID.batch.log" 2>/dev/null',
        f"rm -f -- */*/{EXITCODE_FILE}",
        'if [[ -n ${SLURM_RESTART_COUNT:-} ]]; then',
        f"    for d in {folders}; do",
        ('        echo "--- torchspec: restart $SLURM_RESTART_COUNT of the job (APPLICATION retry) ---" |'
         ' stamp "$d/stdout.log"'),
        "    done",
        "fi",
        "",
        "# Rank 0's host per role: the first node of its component.",
    ]
    for c in request.components:
        nodelist = f"${{SLURM_JOB_NODELIST_HET_GROUP_{c.group}:-$SLURM_JOB_NODELIST}}" if request.het else (
            "$SLURM_JOB_NODELIST")
        lines.append(f'mapfile -t TS_NODES_{c.group} < <(scontrol show hostnames "{nodelist}")')
        lines.append(f"readonly TS_NODES_{c.group}")
        lines.append(f'readonly TS_RANK0_HOST_{c.group}="$(node_host "${{TS_NODES_{c.group}[0]}}")"')
    lines += ["", "TS_PIDS=()"]
    for c in request.components:
        for r in c.replicas:
            if c.one_node_per_replica:
                node = f'"${{TS_NODES_{c.group}[{r.replica_id}]}}"'
                where = f"node {r.replica_id + 1} of its component"
            elif r.replica_id == 0:
                node, where = f'"${{TS_NODES_{c.group}[0]}}"', "the first node of its component"
            else:
                node, where = '""', "any node of its component"
            command = " ".join(shell_word(a) for a in r.args)
            lines += [
                f"# {c.role}/{r.replica_id} on {where}",
                "(",
                f"    readonly -a TS_SRUN_OPTS=({' '.join(q(o) for o in c.srun_opts)})",
                f"    run_replica {q(c.role)} {r.replica_id} {c.group} {node} {c.restarts} {q(c.cwd)} env \\",
            ]
            lines += [f"        {shell_word(f'{key}={value}')} \\" for key, value in r.env.items()]
            lines += [f"        {command}", ") &", "TS_PIDS+=($!)"]
    lines += [
        "",
        "# The first replica to fail ends the job (Slurm then stops the other steps) with its exit code.",
        "TS_RC=0",
        'for _ in "${TS_PIDS[@]}"; do',
        "    wait -n",
        "    TS_RC=$?",
        "    ((TS_RC == 0)) || break",
        "done",
        "if ((TS_RC != 0)); then",
        '    echo "torchspec: a replica failed with exit code $TS_RC; ending the job" >&2',
        "    if ((${SLURM_RESTART_COUNT:-0} < TS_MAX_RETRIES)); then",
        ('        echo "torchspec: requeueing (APPLICATION retry $((${SLURM_RESTART_COUNT:-0} + 1))'
         ' of $TS_MAX_RETRIES)" >&2'),
        '        scontrol requeue "$SLURM_JOB_ID" && sleep 600  # the requeue ends this script',
        "    fi",
        "fi",
        'exit "$TS_RC"',
        "",
    ]
    return "\n".join(lines)


# ----------------------------------------------------------------------------
# Pure translator: AppDef + cfg -> request
# ----------------------------------------------------------------------------

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ROLE_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")
#: A Slurm job id, the only app id this scheduler hands out; anything else names no job (and no folder).
_JOB_ID = re.compile(r"[0-9]+")
#: Words sbatch (or its burst-buffer plugins, or older sbatch) may read as a het-job separator
#: anywhere in an ``#SBATCH`` line, which would split the job.
_HET_WORDS = re.compile(r"hetjob|packjob", re.IGNORECASE)
#: Characters the job's name keeps; any other becomes ``-``.
_JOB_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def is_job_id(app_id: str) -> bool:
    """Whether ``app_id`` can be a Slurm job id: digits only, so it never reaches a path as ``..`` or ``/``."""
    return bool(_JOB_ID.fullmatch(app_id or ""))


def sbatch_value(what: str, value: object, spaces: bool = False) -> str:
    """``value`` as it may stand in an ``#SBATCH`` line; ValueError naming ``what`` if it cannot.

    A newline (any control character) would end the ``#SBATCH`` line and
    start a line bash runs, which also ends sbatch's reading of options;
    ``#``, quotes and backslashes are sbatch's own syntax in those lines; the
    words hetjob/packjob may split the job into het components; and
    whitespace ends the option's value unless it is quoted (only the comment
    is, so only it may have spaces).
    """
    text = str(value)
    for ch in text:
        if not ch.isprintable():
            raise ValueError(f"{what} {text!r} holds the control character {ch!r}, which cannot go into an"
                             f" #SBATCH line (it would end the line and start a command)")
        if ch in "#'\\\"":
            raise ValueError(f"{what} {text!r} holds {ch!r}, which sbatch reads as its own syntax in #SBATCH lines")
        if ch.isspace() and not (spaces and ch == " "):
            raise ValueError(f"{what} {text!r} contains whitespace, which it cannot hold in an #SBATCH line")
    match = _HET_WORDS.search(text)
    if match:
        raise ValueError(f"{what} {text!r} holds the word {match.group(0)!r}, which sbatch may read as the start"
                         f" of another het-job component")
    return text


def job_name(prefix: str, app_name: str) -> str:
    """The job's ``--job-name``: ``prefix`` + the app's name, as letters, digits and ``-_.`` only.

    The app's name comes from a spec, which may come from anyone: it is made
    safe rather than refused, and hetjob/packjob become het-job/pack-job so
    that sbatch cannot take the name for a component separator.
    """
    name = _JOB_NAME_UNSAFE.sub("-", prefix + app_name)
    name = _HET_WORDS.sub(lambda m: m.group(0)[:-3] + "-" + m.group(0)[-3:], name)
    return name or "torchspec"


def _run_opt(cfg: Mapping[str, CfgVal], key: str, spaces: bool = False) -> Optional[str]:
    """The run option ``key`` as it may go into an ``#SBATCH`` line, or None when not given."""
    value = cfg.get(key)
    return sbatch_value(f"run option {key}", value, spaces) if value else None


def _no_nul(role: str, what: str, text: str) -> str:
    """``text`` unless it holds a NUL, which no argument or environment value can (and the script uses as a mark)."""
    if "\x00" in text:
        raise ValueError(f"role {role!r}: {what} {text!r} holds a NUL character, which no command line can carry")
    return text


def default_log_root() -> str:
    """``$TORCHSPEC_HOME/slurm`` (else ``~/.local/state/torchspec/slurm``): on a login node, home is shared."""
    from torchspec.schedulers.state_dir import default_state_dir

    return os.path.join(default_state_dir(), "slurm")


def resolve_image(role: Role, cwd: str) -> str:
    """The role's image as an absolute folder; it must exist here (and, shared, on the compute nodes)."""
    folder = os.path.abspath(os.path.join(cwd, os.path.expanduser(role.image)))
    if not os.path.isdir(folder):
        raise ValueError(
            f"role {role.name!r}: image {role.image!r} is not a folder ({folder}): on Slurm an image is a folder"
            f" on the file system the nodes share, and the entrypoint is relative to it"
        )
    return folder


def _mem_opt(memMB: int) -> str:
    return f"{memMB}M"


def role_to_component(
    role: Role,
    group: int,
    cfg: Mapping[str, CfgVal],
    cwd: str,
    nodelist: Optional[str],
) -> SlurmComponent:
    """The het component of ``role``: its ``#SBATCH`` lines, and one :class:`SlurmReplica` per replica.

    With ``one_node_per_replica`` (the default, as TorchX) each replica is a
    node: ``--nodes=R --ntasks-per-node=1``, ``--mem`` per node and
    ``--gpus-per-node``.  Without it the replicas are R tasks that Slurm may
    pack onto fewer nodes, so memory is asked per CPU.
    """
    from torchspec.schedulers.entrypoint import resolve_entrypoint

    if not _ROLE_NAME.match(role.name) or not role.name.strip("."):
        raise ValueError(f"role name {role.name!r} cannot be a log folder name: use letters, digits, _ . -"
                         f" (not only dots)")
    if role.num_replicas <= 0:
        raise ValueError(f"role {role.name!r} has {role.num_replicas} replicas; it needs at least one")
    if role.mounts:
        raise ValueError(
            f"role {role.name!r} has mounts: the slurm scheduler runs on the nodes' own file systems,"
            f" without containers; use paths that exist there instead"
        )
    if role.resource.devices:
        raise ValueError(
            f"role {role.name!r} asks for devices {sorted(role.resource.devices)}: on Slurm ask for them as gres,"
            f" with the resource capability {CAP_GRES!r}"
        )
    img_root = resolve_image(role, cwd)
    search_path = role.env.get("PATH", os.environ.get("PATH"))
    entrypoint = resolve_entrypoint(role.name, role.entrypoint, img_root, search_path)
    if "=" in entrypoint:
        # the replica runs as `env K=V ... ENTRYPOINT ARGS`, and env takes any word with "=" for a variable
        raise ValueError(f"role {role.name!r}: entrypoint {entrypoint!r} holds '=', which the slurm scheduler"
                         f" cannot run (env would read it as a variable); rename the file or its folder")
    res = role.resource
    per_node = bool(cfg.get("one_node_per_replica", True))
    cpu, gpu, mem = max(res.cpu, 0), max(res.gpu, 0), max(res.memMB, 0)
    gres = res.capabilities.get(CAP_GRES)
    if gres:
        gres = sbatch_value(f"role {role.name!r}: resource capability {CAP_GRES}", gres)
    role_constraint = res.capabilities.get(CAP_CONSTRAINT)
    if role_constraint:
        role_constraint = sbatch_value(f"role {role.name!r}: resource capability {CAP_CONSTRAINT}", role_constraint)
    opts: List[str] = []
    srun_opts: List[str] = []
    for key, flag in (("partition", "--partition"), ("time", "--time"), ("account", "--account"),
                      ("qos", "--qos"), ("exclude", "--exclude")):
        value = _run_opt(cfg, key)
        if value:
            opts.append(f"{flag}={value}")
    constraints = [c for c in (_run_opt(cfg, "constraint"), role_constraint) if c]
    if constraints:
        opts.append("--constraint=" + "&".join(f"({c})" if "|" in c else c for c in constraints))
    if nodelist:
        opts.append(f"--nodelist={nodelist}")
    if per_node:
        opts += [f"--nodes={role.num_replicas}", "--ntasks-per-node=1"]
        if mem:
            opts.append(f"--mem={_mem_opt(mem)}")
        if gres:
            opts.append(f"--gres={gres}")
        elif gpu:
            opts.append(f"--gpus-per-node={gpu}")
    else:
        opts.append(f"--ntasks={role.num_replicas}")
        if mem:
            opts.append(f"--mem-per-cpu={_mem_opt(math.ceil(mem / max(cpu, 1)))}")
        if gres:
            opts.append(f"--gres={gres}")
        elif gpu:
            opts.append(f"--gpus-per-task={gpu}")
    if cpu:
        opts.append(f"--cpus-per-task={cpu}")
        srun_opts.append(f"--cpus-per-task={cpu}")
    if mem:
        srun_opts.append(f"--mem={_mem_opt(mem)}")
    if gres:
        srun_opts.append(f"--gres={gres}")
    elif gpu:
        srun_opts.append(f"--gres=gpu:{gpu}")

    raw_env = cfg.get("env")
    extra_env = {str(k): str(v) for k, v in raw_env.items()} if isinstance(raw_env, dict) else {}
    # before the macros are filled in, which put NUL-delimited marks of their own (JOB_ID_MARK)
    for text in [role.entrypoint, *map(str, role.args), *map(str, role.env.values()), *extra_env.values()]:
        _no_nul(role.name, "argument or environment value", text)
    replicas = []
    for k in range(role.num_replicas):
        values = macros.Values(img_root=img_root, app_id=JOB_ID_MARK, replica_id=str(k), rank0_env=ENV_RANK0_HOST)
        filled = values.apply(role)
        env: Dict[str, str] = dict(filled.env)
        env.update({key: values.substitute(value) for key, value in extra_env.items()})
        env.update({
            ENV_APP_ID: JOB_ID_MARK,
            ENV_ROLE_NAME: role.name,
            ENV_REPLICA_ID: str(k),
            ENV_NUM_REPLICAS: str(role.num_replicas),
            ENV_RANK0_HOST: rank0_mark(group),  # its value is known once the job runs
        })
        env.setdefault("PYTHONUNBUFFERED", "1")
        for key in env:
            if not _ENV_NAME.match(key):
                raise ValueError(f"role {role.name!r}: {key!r} is not a valid environment variable name")
        replicas.append(SlurmReplica(role=role.name, replica_id=k, args=[entrypoint] + list(filled.args), env=env))
    policy = RetryPolicy(role.retry_policy)
    return SlurmComponent(
        role=role.name,
        group=group,
        sbatch_opts=opts,
        srun_opts=srun_opts,
        cwd=img_root,
        one_node_per_replica=per_node,
        restarts=role.max_retries if policy == RetryPolicy.REPLICA else 0,
        replicas=replicas,
    )


def app_to_request(app: AppDef, cfg: Mapping[str, CfgVal], cwd: str) -> SlurmBatchRequest:
    """The whole request for ``app`` under a resolved ``cfg``; talks to no Slurm."""
    if not app.roles:
        raise ValueError(f"app {app.name!r} has no roles")
    names = [r.name for r in app.roles]
    for name in names:
        if names.count(name) > 1:
            raise ValueError(f"app {app.name!r} has two roles named {name!r}")
    log_root = os.path.abspath(os.path.expanduser(str(cfg.get("log_dir") or default_log_root())))
    sbatch_value("log_dir", log_root)  # it is part of the comment and of sbatch's --output
    if "%" in log_root:
        raise ValueError(f"log_dir {log_root!r} holds '%', which Slurm's --output would expand (%j, %u...)")
    raw_nodelist = _run_opt(cfg, "nodelist") or ""
    nodelists: List[Optional[str]] = [n or None for n in raw_nodelist.split(":")] if raw_nodelist else []
    if nodelists and len(nodelists) != len(app.roles):
        raise ValueError(
            f"nodelist {raw_nodelist!r} has {len(nodelists)} node list(s) for {len(app.roles)} roles:"
            f" give one per role, separated by ':' (an empty one leaves that role free)"
        )
    components = [
        role_to_component(role, g, cfg, cwd, nodelists[g] if nodelists else None) for g, role in enumerate(app.roles)
    ]
    name = job_name(_run_opt(cfg, "job_name_prefix") or "", app.name)
    comment = COMMENT_PREFIX + log_root
    user_comment = _run_opt(cfg, "comment", spaces=True)
    if user_comment:
        comment += " " + user_comment
    app_retries = max(
        (r.max_retries for r in app.roles if RetryPolicy(r.retry_policy) != RetryPolicy.REPLICA), default=0
    )
    job_opts = [
        f"--job-name={name}",
        f"--comment={shlex.quote(comment)}",  # the one value with spaces; sbatch strips the quotes
        "--requeue" if app_retries > 0 else "--no-requeue",
    ]
    mail_user = _run_opt(cfg, "mail_user")
    if mail_user:
        job_opts.append(f"--mail-user={mail_user}")
        job_opts.append(f"--mail-type={_run_opt(cfg, 'mail_type') or 'END,FAIL'}")
    return SlurmBatchRequest(
        app_name=app.name,
        log_root=log_root,
        job_opts=job_opts,
        components=components,
        max_retries=app_retries,
    )


# ----------------------------------------------------------------------------
# Reading Slurm back
# ----------------------------------------------------------------------------


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

    @property
    def app_state(self) -> AppState:
        return slurm_state(self.state)

    @property
    def log_root(self) -> Optional[str]:
        if not self.comment.startswith(COMMENT_PREFIX):
            return None
        return self.comment[len(COMMENT_PREFIX):].split(" ", 1)[0] or None


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
    )


def view_from_json(job: Mapping[str, Any]) -> JobView:
    """A job of ``scontrol show job --json`` / ``squeue --json`` (data_parser of Slurm 23.02 or later)."""
    state = job.get("job_state", "")
    if isinstance(state, list):
        state = state[0] if state else ""
    exit_code = job.get("exit_code")
    if isinstance(exit_code, dict):
        rc = exit_code.get("return_code")
        sig = exit_code.get("signal", {}).get("id") if isinstance(exit_code.get("signal"), dict) else 0
        rc = rc.get("number") if isinstance(rc, dict) else rc
        exit_text = f"{rc or 0}:{(sig.get('number') if isinstance(sig, dict) else sig) or 0}"
    elif isinstance(exit_code, int):
        exit_text = f"{(exit_code >> 8) & 0xFF}:{exit_code & 0x7F}"
    else:
        exit_text = ""
    offset = job.get("het_job_offset", 0)
    if isinstance(offset, dict):
        offset = offset.get("number", 0) if offset.get("set", True) else 0
    return JobView(
        job_id=str(job.get("job_id", "")),
        offset=int(offset or 0),
        state=str(state),
        reason=str(job.get("state_reason", "None")),
        exit_code=exit_text,
        restarts=int(job.get("restart_cnt", 0) or 0),
        comment=str(job.get("comment") or ""),
        nodes=str(job.get("nodes", "")),
    )


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
        details = [_STATE_WORDS[state]] if state in _STATE_WORDS else []
        if code and code != "0":
            details.append(f"exit code {code}")
        if sig and sig != "0":
            details.append(f"signal {sig}")
        text = f"{state}: {', '.join(details)}" if details else state
        return text + (f" ({reason})" if reason else "")
    if app_state == AppState.CANCELLED:
        return "cancelled" + (f" ({reason})" if reason else "")
    return ""


# ----------------------------------------------------------------------------
# Options
# ----------------------------------------------------------------------------


def slurm_run_opts() -> runopts:
    """The run options of ``slurm``; declared once, here."""
    opts = runopts()
    opts.add("partition", type_=str, default=None, help="partition to run in (default: the cluster's)")
    opts.add("time", type_=str, default=None, help="time limit of the job, e.g. 1:00:00 or 2-00:00:00 (--time)")
    opts.add("account", type_=str, default=None, help="account to charge (--account)")
    opts.add("qos", type_=str, default=None, help="quality of service (--qos)")
    opts.add("constraint", type_=str, default=None, help="node features every role needs (--constraint)")
    opts.add("nodelist", type_=str, default=None,
             help="nodes each role must run on, one Slurm node list per role separated by ':',"
             " e.g. node[1-2]:node3 (empty for a free role)")
    opts.add("exclude", type_=str, default=None, help="nodes never to use, as a Slurm node list (--exclude)")
    opts.add("job_name_prefix", type_=str, default=None, help="put before the app name to make the job's name")
    opts.add("comment", type_=str, default=None,
             help="text added to the job's comment (which starts with torchspec:LOG_DIR)")
    opts.add("mail_user", type_=str, default=None, help="address Slurm mails about the job (--mail-user)")
    opts.add("mail_type", type_=str, default=None, help="events to mail about (--mail-type; default END,FAIL)")
    opts.add("log_dir", type_=str, default=None,
             help="folder for the logs, on a file system the nodes share (default: $TORCHSPEC_HOME/slurm,"
             " else ~/.local/state/torchspec/slurm)")
    opts.add("one_node_per_replica", type_=bool, default=True,
             help="give each replica a node of its own (as TorchX); false lets Slurm pack a role's replicas"
             " as tasks onto fewer nodes")
    opts.add("env", type_=Dict[str, str], default=None,
             help="extra environment variables for every replica, as KEY:VALUE;KEY2:VALUE2")
    return opts


# ----------------------------------------------------------------------------
# The scheduler
# ----------------------------------------------------------------------------


@dataclass
class SlurmReplicaStatus(ReplicaStatus):
    """A ReplicaStatus with the replica's exit code and in-place restarts, where the log folder has them."""

    exit_code: Optional[int] = None
    num_restarts: int = 0


class SlurmScheduler(Scheduler[Dict[str, CfgVal]]):
    """Submits each app as one (heterogeneous) batch job with ``sbatch`` and asks ``scontrol`` about it."""

    def __init__(self, session_name: str) -> None:
        super().__init__("slurm", session_name)
        self._version: Optional[Tuple[int, int]] = None

    # -- running Slurm's commands -------------------------------------------------

    def _run(self, args: Sequence[str], check: bool = True, input_text: Optional[str] = None
             ) -> subprocess.CompletedProcess[str]:
        """Run a Slurm client command; a missing command or a silent controller is a BackendError."""
        exe = shutil.which(args[0])
        if exe is None:
            raise BackendError(
                f"{args[0]} not found: the Slurm client commands are not installed here",
                "run torchspec on a login node of the cluster, or install Slurm's client (e.g. apt-get install"
                " slurm-client) with the cluster's slurm.conf",
            )
        try:
            result = subprocess.run([exe, *args[1:]], capture_output=True, text=True, input=input_text,
                                    timeout=COMMAND_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise BackendError(f"`{shlex.join(args)}` did not answer within {COMMAND_TIMEOUT_S}s",
                               "is slurmctld up? (sinfo; scontrol ping)") from None
        err = result.stderr.strip()
        if result.returncode != 0 and _unreachable(err):
            raise BackendError(f"the Slurm controller does not answer: {_first_line(err)}",
                               "check that slurmctld runs (scontrol ping) and that SLURM_CONF names this cluster's"
                               " slurm.conf")
        if check and result.returncode != 0:
            raise BackendError(f"`{shlex.join(args[:2])} ...` failed: {_first_line(err) or result.returncode}")
        return result

    def version(self) -> Tuple[int, int]:
        """Slurm's (major, minor), e.g. (22, 5): decides whether ``scontrol --json`` exists (23.02 on)."""
        if self._version is None:
            out = self._run(["scontrol", "--version"]).stdout
            match = re.search(r"(\d+)\.(\d+)", out)
            self._version = (int(match.group(1)), int(match.group(2))) if match else (0, 0)
        return self._version

    # -- submitting ---------------------------------------------------------

    def _run_opts(self) -> runopts:
        return slurm_run_opts()

    def _validate(self, app: AppDef, scheduler: str) -> None:
        """Accept roles without resources: Slurm then gives the partition's defaults."""

    def _submit_dryrun(self, app: AppDef, cfg: Dict[str, CfgVal]) -> AppDryRunInfo[SlurmBatchRequest]:
        from torchspec.convert import dump_app

        request = app_to_request(app, cfg, os.getcwd())
        request.spec = dump_app(app)
        return AppDryRunInfo(request, str)

    def schedule(self, dryrun_info: AppDryRunInfo[SlurmBatchRequest]) -> str:
        """``sbatch --parsable`` the script; then keep the spec and script next to the logs."""
        request = dryrun_info.request
        _private_dir(request.log_root)
        script = request.script()
        result = self._run(request.sbatch_args(), check=False, input_text=script)
        if result.returncode != 0:
            why = _first_line(result.stderr.strip()).removeprefix("sbatch: error: ")
            raise BackendError(f"sbatch refused the job: {why or f'exit code {result.returncode}'}",
                               "run `torchspec dryrun -s slurm ...` and `sbatch --test-only` on its output for details")
        job_id = result.stdout.strip().split(";")[0].strip()
        if not is_job_id(job_id):
            raise BackendError(f"sbatch answered {result.stdout.strip()!r}, not a job id")
        job_dir = os.path.join(request.log_root, job_id)
        _private_dir(job_dir)  # the script, once it runs, creates it 0700 too (umask 077)
        _write(os.path.join(job_dir, SPEC_FILE), json.dumps(request.spec, indent=1))
        _write(os.path.join(job_dir, SCRIPT_FILE), script)
        default = default_log_root()
        if os.path.abspath(request.log_root) != os.path.abspath(default):
            # so that status finds the logs even once Slurm forgot the job (and its comment)
            _private_dir(default)
            link = os.path.join(default, job_id)
            if not os.path.lexists(link):
                os.symlink(job_dir, link)
        return job_id

    # -- asking -------------------------------------------------------------

    def read_job(self, app_id: str) -> List[JobView]:
        """Every component of job ``app_id`` as the controller knows it; [] once it forgot the job."""
        if not is_job_id(app_id):
            return []
        if self.version() >= (23, 2):
            result = self._run(["scontrol", "show", "job", "--json", app_id], check=False)
            if result.returncode == 0:
                jobs = json.loads(result.stdout).get("jobs", [])
                return sorted((view_from_json(j) for j in jobs), key=lambda v: v.offset)
        else:
            result = self._run(["scontrol", "show", "job", "-o", app_id], check=False)
            if result.returncode == 0:
                return sorted((view_from_scontrol(f) for f in parse_scontrol(result.stdout)), key=lambda v: v.offset)
        if "Invalid job id" in result.stderr:
            return self._read_sacct(app_id)
        raise BackendError(f"cannot read job {app_id}: {_first_line(result.stderr.strip())}")

    def _read_sacct(self, app_id: str) -> List[JobView]:
        """The job from accounting, where configured; [] without accounting or when it does not know it."""
        if shutil.which("sacct") is None:
            return []
        result = self._run(["sacct", "-n", "-P", "-X", "-j", app_id, "-o", "JobID,State,ExitCode,Comment,NodeList"],
                           check=False)
        views = []
        for line in result.stdout.splitlines() if result.returncode == 0 else []:
            parts = line.split("|")
            if len(parts) < 5:
                continue
            job, _, offset = parts[0].partition("+")
            views.append(JobView(job_id=job, offset=int(offset or 0), state=parts[1], reason="None",
                                 exit_code=parts[2], restarts=0, comment=parts[3], nodes=parts[4]))
        return sorted(views, key=lambda v: v.offset)

    def _job_dir(self, app_id: str, views: List[JobView]) -> Optional[str]:
        """The app's log folder, as a real path: from the job's comment, else the default log root (or its link).

        Only a job id names a folder, and the folder must really be the job's
        own, directly under its log root: ``delete`` removes it, and an id
        such as ``..`` or a stray link must never lead it anywhere else.  The
        one link followed is the one ``schedule`` leaves in the default log
        root for a job logging elsewhere; it must lead to a folder named as
        the job.
        """
        if not is_job_id(app_id):
            return None
        default = default_log_root()
        roots = [str(v.log_root) for v in views if v.log_root] + [default]
        for root in roots:
            path = os.path.join(root, app_id)
            real = os.path.realpath(path)
            if not os.path.isdir(real) or os.path.basename(real) != app_id:
                continue
            if os.path.dirname(real) == os.path.realpath(root):
                return real
            if root == default and os.path.islink(path):
                return real
        return None

    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        from torchspec.convert import build_app

        if not is_job_id(app_id):
            return None  # not a job id: no job, and no folder to read
        views = self.read_job(app_id)
        job_dir = self._job_dir(app_id, views)
        if views and views[0].log_root is None:
            return None  # a job torchspec did not submit
        if not views and job_dir is None:
            return None
        spec = _read_json(os.path.join(job_dir, SPEC_FILE)) if job_dir else None
        roles: List[Role] = []
        if spec:
            try:
                roles = build_app(spec).roles
            except (KeyError, TypeError, ValueError) as e:
                logger.debug("cannot rebuild the roles of %s: %s", app_id, e)
        leader = views[0] if views else None
        by_offset = {v.offset: v for v in views}
        # (role, replicas, its component): from the spec; for a job handed to sbatch by hand (no spec)
        # from the replicas' log folders, so that status and logs still show them
        layout = [(r.name, r.num_replicas, by_offset.get(g, leader)) for g, r in enumerate(roles)]
        if not spec and job_dir:
            layout = [(name, count, leader) for name, count in _replica_folders(job_dir)]
        roles_statuses: List[RoleStatus] = []
        failed: List[str] = []
        replica_states: List[AppState] = []
        for name, count, component in layout:
            replicas: List[ReplicaStatus] = []
            for k in range(count):
                rdir = os.path.join(job_dir, name, str(k)) if job_dir else ""
                code = _read_int(os.path.join(rdir, EXITCODE_FILE)) if rdir else None
                restarts = _read_int(os.path.join(rdir, RESTARTS_FILE)) if rdir else None
                state = _replica_state(component, code)
                replica_states.append(state)
                if code:
                    failed.append(f"{name}/{k} exited with code {code}")
                replicas.append(SlurmReplicaStatus(
                    id=k, state=state, role=name, hostname=component.nodes if component else "",
                    structured_error_msg=NONE, exit_code=code, num_restarts=restarts or 0,
                ))
            roles_statuses.append(RoleStatus(role=name, replicas=replicas))
        if leader is not None:
            state = _job_state(views)
            msg = job_message(leader)
            if failed and state == AppState.FAILED:
                msg = f"{'; '.join(failed)} ({msg})" if msg else "; ".join(failed)
            restarts = leader.restarts
        else:
            # Slurm forgot the job and there is no accounting: the replicas' exit codes are all there is.
            if replica_states and all(s == AppState.SUCCEEDED for s in replica_states):
                state = AppState.SUCCEEDED
            elif AppState.FAILED in replica_states:
                state = AppState.FAILED
            else:
                state = AppState.UNKNOWN
            msg = f"Slurm no longer knows job {app_id}; state from its log folder {job_dir}"
            restarts = 0
        metadata = {"log_dir": job_dir or "", "session_name": self.session_name}
        if leader is not None:
            metadata["nodes"] = ",".join(v.nodes for v in views if v.nodes)
        return DescribeAppResponse(app_id=app_id, state=state, num_restarts=restarts, msg=msg,
                                   roles_statuses=roles_statuses, roles=roles, metadata=metadata)

    def exists(self, app_id: str) -> bool:
        if not is_job_id(app_id):
            return False
        views = self.read_job(app_id)
        if views:
            return views[0].log_root is not None
        return self._job_dir(app_id, views) is not None

    def list(self) -> List[ListAppResponse]:
        """The user's jobs that torchspec submitted (comment ``torchspec:...``) and Slurm still knows, oldest first."""
        out = self._run(["squeue", "-h", "-t", "all", "-u", getpass.getuser(), "-o", "%i|%T|%k"]).stdout
        found: Dict[str, AppState] = {}
        for line in out.splitlines():
            job, _, rest = line.partition("|")
            state, _, comment = rest.partition("|")
            leader, _, offset = job.strip().partition("+")
            if not comment.startswith(COMMENT_PREFIX) or offset not in ("", "0"):
                continue
            found[leader] = slurm_state(state)
        return [ListAppResponse(app_id=j, state=s) for j, s in sorted(found.items(), key=lambda kv: int(kv[0]))]

    # -- cancelling and deleting -------------------------------------------------

    def _cancel_existing(self, app_id: str) -> None:
        """``scancel`` the job: Slurm signals every step (SIGTERM, SIGKILL after KillWait) of every component."""
        if is_job_id(app_id):  # scancel takes more than ids (e.g. 12_[1-3]); only a job id is an app
            self._run(["scancel", app_id])

    def delete(self, app_id: str) -> None:
        """Cancel the job if it runs, then remove its log folder (Slurm forgets jobs by itself).

        Does nothing for an id that is no job id, or a job torchspec did not
        submit; removes only the folder :meth:`_job_dir` vouches for.
        """
        if not is_job_id(app_id):
            return
        views = self.read_job(app_id)
        job_dir = self._job_dir(app_id, views)
        if views and views[0].log_root is None:
            return
        if views and _job_state(views) not in _TERMINAL:
            self._run(["scancel", app_id])
        if job_dir:
            shutil.rmtree(job_dir, ignore_errors=True)
            batch_log = os.path.join(os.path.dirname(job_dir), f"{app_id}.batch.log")
            if os.path.exists(batch_log):
                os.remove(batch_log)
            link = os.path.join(default_log_root(), app_id)
            if os.path.islink(link):
                os.remove(link)

    # -- logs ---------------------------------------------------------------

    def log_iter(
        self,
        app_id: str,
        role_name: str,
        k: int = 0,
        regex: Optional[str] = None,
        since: Optional[datetime] = None,
        until: Optional[datetime] = None,
        should_tail: bool = False,
        streams: Optional[Stream] = None,
    ) -> Iterable[str]:
        """Lines of replica ``k`` of ``role_name`` from its log files, without their timestamps.

        ``since`` (inclusive) and ``until`` (exclusive) select on the time each
        line reached the batch script (to the second).  With ``should_tail``
        the iterator follows the file until the job is over, or until this
        replica exited 0.  Files appear when the job starts: following a
        pending job waits for them.
        """
        views = self.read_job(app_id) if is_job_id(app_id) else []
        job_dir = self._job_dir(app_id, views)  # None for anything but a job id
        if job_dir is None:
            raise ValueError(f"unknown app {app_id!r}: no such Slurm job with a torchspec log folder")
        spec = _read_json(os.path.join(job_dir, SPEC_FILE)) or {}
        counts = {r.get("name"): int(r.get("num_replicas", 1) or 1) for r in spec.get("roles", [])}
        if not _ROLE_NAME.match(role_name) or not role_name.strip(".") or k < 0:
            # a job submitted by hand has no spec to check against: never let the name leave the folder
            raise ValueError(f"app {app_id!r} has no replica {role_name!r}/{k}")
        if counts and role_name not in counts:
            raise ValueError(f"app {app_id!r} has no role {role_name!r}; its roles: {', '.join(counts)}")
        if counts and not 0 <= k < counts[role_name]:
            raise ValueError(f"role {role_name!r} of app {app_id!r} has replicas 0..{counts[role_name] - 1}, not {k}")
        stream = Stream(streams) if streams is not None else Stream.COMBINED
        path = os.path.join(job_dir, role_name, str(k), LOG_FILES[stream])
        pattern = re.compile(regex) if regex else None
        return self._follow(app_id, path, pattern, aware(since), aware(until), should_tail)

    def _follow(self, app_id: str, path: str, pattern: Optional[Pattern[str]], since: Optional[datetime],
                until: Optional[datetime], should_tail: bool) -> Iterator[str]:
        exitcode = os.path.join(os.path.dirname(path), EXITCODE_FILE)
        while not os.path.exists(path):
            if not should_tail or self._over(app_id, exitcode):
                return
            time.sleep(POLL_S)
        with open(path, "rb") as log:
            yield from follow_lines(log, lambda raw, _: parse_log_line(raw), pattern, since, until, should_tail,
                                    done=lambda: self._over(app_id, exitcode), poll_s=POLL_S)

    def _over(self, app_id: str, exitcode: str) -> bool:
        """True once the replica can write no more: it exited 0, or the job is over."""
        if _read_int(exitcode) == 0:
            return True
        views = self.read_job(app_id)
        return not views or _job_state(views) in _TERMINAL


def _job_state(views: List[JobView]) -> AppState:
    """The app's state from its components: one failed or cancelled component decides, else the leader."""
    states = [v.app_state for v in views]
    for decisive in (AppState.CANCELLED, AppState.FAILED):
        if decisive in states:
            return decisive
    return states[0]


def _replica_state(component: Optional[JobView], code: Optional[int]) -> AppState:
    """A replica's state: its exit code where it wrote one (in this run), else its component's."""
    job_state = component.app_state if component else AppState.UNKNOWN
    if job_state == AppState.PENDING:
        return AppState.PENDING
    if code is not None:
        return AppState.SUCCEEDED if code == 0 else AppState.FAILED
    if job_state == AppState.SUCCEEDED:
        return AppState.UNKNOWN  # the job ended well but this replica left no exit code
    return job_state


def _replica_folders(job_dir: str) -> List[Tuple[str, int]]:
    """(role, number of replicas) as the batch script laid out ``job_dir``: ROLE/K folders, K from 0."""
    found = []
    for name in sorted(os.listdir(job_dir)):
        path = os.path.join(job_dir, name)
        if not _ROLE_NAME.match(name) or not os.path.isdir(path) or os.path.islink(path):
            continue
        ids = {int(k) for k in os.listdir(path) if is_job_id(k) and os.path.isdir(os.path.join(path, k))}
        count = 0
        while count in ids:
            count += 1
        if count:
            found.append((name, count))
    return found


def _unreachable(stderr: str) -> bool:
    return any(s in stderr for s in (
        "Unable to contact slurm controller", "Could not establish a configuration source",
        "Connection refused", "Socket timed out", "Zero Bytes were transmitted",
    ))


def _first_line(text: str) -> str:
    return text.splitlines()[0] if text else ""


def _private_dir(path: str) -> None:
    """Create ``path`` (and its parents) if missing; a folder this creates is 0700.

    The log root is on a file system others share; what torchspec keeps there
    (spec, script, logs) is the user's alone.  A folder that already existed
    keeps its mode, except a job's own folder, which is always made 0700.
    """
    if not os.path.isdir(path):
        os.makedirs(path, mode=0o700, exist_ok=True)
        os.chmod(path, 0o700)
    elif is_job_id(os.path.basename(path)):
        os.chmod(path, 0o700)


def _write(path: str, text: str) -> None:
    """Write ``text`` to ``path`` atomically, as a 0600 file (it may name paths, arguments, env values)."""
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        os.remove(tmp)
    except FileNotFoundError:
        pass
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def _read_json(path: str) -> Optional[Dict[str, Any]]:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        return data if isinstance(data, dict) else None
    except (OSError, ValueError):
        return None


def _read_int(path: str) -> Optional[int]:
    try:
        with open(path, encoding="utf-8") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def parse_log_line(raw: bytes) -> Tuple[Optional[datetime], str]:
    """``2026-11-23T15:24:11+0000<TAB>text`` -> (aware time, ``text``); other lines keep everything."""
    stamp, sep, rest = raw.partition(b"\t")
    if sep and len(stamp) == 24 and stamp[4:5] == b"-" and stamp[10:11] == b"T":
        try:
            return datetime.strptime(stamp.decode("ascii"), "%Y-%m-%dT%H:%M:%S%z"), rest.decode(
                "utf-8", errors="replace")
        except ValueError:
            pass
    return None, raw.decode("utf-8", errors="replace")


# ----------------------------------------------------------------------------
# Factory
# ----------------------------------------------------------------------------


def create_scheduler(session_name: str, **kwargs: Any) -> SlurmScheduler:
    """The ``slurm`` entry point; keyword arguments are ignored."""
    return SlurmScheduler(session_name)


__all__ = [
    "SLURM_STATES",
    "JobView",
    "SlurmBatchRequest",
    "SlurmComponent",
    "SlurmReplica",
    "SlurmScheduler",
    "app_to_request",
    "create_scheduler",
    "is_job_id",
    "job_message",
    "job_name",
    "parse_log_line",
    "parse_scontrol",
    "render_script",
    "role_to_component",
    "sbatch_value",
    "slurm_run_opts",
    "slurm_state",
    "view_from_json",
    "view_from_scontrol",
]
