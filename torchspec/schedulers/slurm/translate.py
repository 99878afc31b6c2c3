"""AppDef -> sbatch script: the request ``schedule`` submits, and the pure functions that build and render it.

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
run options going into ``#SBATCH`` lines are checked (``sbatch_value``),
the job's name is made safe (:func:`job_name`), and every word of the body
is quoted.

Retries (see docs/schedulers/slurm.md): APPLICATION (and ROLE, which Slurm cannot do apart)
requeue the whole job from inside the batch script (``scontrol requeue``,
the job is submitted with ``--requeue``); Slurm counts the restarts.
REPLICA restarts the failed replica's step inside the same allocation.

Nothing here talks to Slurm or writes a file; it only looks at the file
system to find each role's image folder and entrypoint.
"""

from __future__ import annotations

import math
import os
import re
import shlex
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple

from torchspec.errors import AppRefusedError
from torchspec.schedulers.secrets import check_env_names, refuse_kubernetes_only
from torchspec.schedulers.api import encode_labels, labels_of
from torchspec.schedulers.replicas import (
    ENV_APP_ID,
    ENV_NUM_REPLICAS,
    ENV_RANK0_HOST,
    ENV_REPLICA_ID,
    ENV_ROLE_NAME,
    check_role_names,
    refuse_elastic,
)
from torchspec.specs.api import role_hosts_env
from torchspec.schedulers.slurm.flags import (
    ClientHelp,
    Extras,
    check_slurm_keys,
    container_opts,
    exclusive_capability,
    extras_of,
    image_of,
)
from torchspec.schedulers.slurm.secrets import StepSecret, replica_lines, role_secrets, script_lines
from torchspec.schedulers.slurm.options import HET_WORDS, default_log_root, requeue_option, run_opt, sbatch_value
from torchspec.schedulers.slurm.order import check_depends_on, ordered_lines, waiting_lines
from torchspec.schedulers.slurm.states import (
    CAP_CONSTRAINT,
    CAP_GRES,
    COMMENT_LABELS,
    COMMENT_PREFIX,
    EXITCODE_FILE, STARTED_FILE, STEP_RC_FILE, WAITING_FILE,  # the files each replica's folder holds
    is_role_name,
)
from torchspec.specs import AppDef, CfgVal, RetryPolicy, Role, macros

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
    #: the container image its replicas run in (pyxis' --container-image), None for a folder
    container: Optional[str] = None
    #: the role's secrets, by carrier (their values travel in sbatch's environment: .secrets)
    secrets: List[StepSecret] = field(default_factory=list)
    #: the roles it starts after, ``(ROLE, finished|ready)`` (its ``depends_on``): the batch script starts it
    depends_on: List[Tuple[str, str]] = field(default_factory=list)


@dataclass
class SlurmBatchRequest:
    """Everything ``schedule`` submits: the job-wide options, one component per role, the spec for describe."""

    app_name: str
    log_root: str
    job_opts: List[str]
    components: List[SlurmComponent]
    max_retries: int
    spec: Dict[str, Any] = field(default_factory=dict)
    #: comment lines of the script's head: what could not be checked here
    notes: List[str] = field(default_factory=list)

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


# ----------------------------------------------------------------------------
# The script's text
# ----------------------------------------------------------------------------

#: Stand for the Slurm job id and for rank 0's host of het group N, known only once the job runs;
#: :func:`shell_word` turns them into ``"$SLURM_JOB_ID"`` and ``"$TS_RANK0_HOST_N"``.
JOB_ID_MARK = "\x00SLURM_JOB_ID\x00"
_RANK0 = re.compile("\x00(RANK0_HOST|HOSTS)_(\\d+)\x00")
_MARKS = re.compile("(\x00SLURM_JOB_ID\x00|\x00(?:RANK0_HOST|HOSTS)_\\d+\x00)")


def rank0_mark(group: int) -> str:
    return f"\x00RANK0_HOST_{group}\x00"


def hosts_mark(group: int) -> str:
    """Stands for ``TORCHSPEC_HOSTS_<ROLE>`` of het group ``group``, known once the job runs (``$TS_HOSTS_N``)."""
    return f"\x00HOSTS_{group}\x00"


def shell_word(text: str) -> str:
    """``text`` as one bash word, quoted, with the marks expanded by the shell when the job runs."""
    out = []
    for part in _MARKS.split(text):
        match = _RANK0.fullmatch(part)
        if part == JOB_ID_MARK:
            out.append('"$SLURM_JOB_ID"')
        elif match:
            out.append(f'"$TS_{match.group(1)}_{match.group(2)}"')
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

# hosts_of N NODE...: the host names of the first N nodes (all when N is 0),
# comma-separated: what TORCHSPEC_HOSTS_<ROLE> holds.
hosts_of() {
    local n=$1 node out=() IFS=,
    ((n > 0)) || n=$(($# - 1))
    for node in "${@:2:n}"; do out+=("$(node_host "$node")"); done
    echo "${out[*]}"
}

# run_replica ROLE K GROUP NODE RESTARTS DIR env K=V... CMD...: replica K of
# ROLE as its own job step (--exact, so that the steps run side by side), in
# folder DIR, on NODE when given; restarted in place up to RESTARTS times (REPLICA
# policy; TORCHSPEC_ATTEMPT counts those and the job's requeues). Its environment is set by
# `env` inside the step, so that it cannot change srun or this script (PATH, LOG_DIR, SLURM_*...).
run_replica() {
    local role=$1 k=$2 group=$3 node=$4 restarts=$5 cwd=$6 attempt=0 rc requeues=${SLURM_RESTART_COUNT:-0}
    local log="$TS_LOG_DIR/$role/$k"
    shift 6
    echo 0 >"$log/restarts"
    while :; do
        rm -f -- "$log/$TS_STEP_RC"
        SLURM_UMASK=$TS_UMASK srun ${TS_HETJOB:+--het-group="$group"} --exact --nodes=1 --ntasks=1 \
            ${node:+--nodelist="$node"} --job-name="$role/$k" --chdir="$cwd" "${TS_SRUN_OPTS[@]}" \
            sh -c "$TS_RECORD_RC" "$log/$TS_STEP_RC" env TORCHSPEC_ATTEMPT=$((requeues + attempt)) "$@" \
            2> >(stamp "$log/stderr.log") | stamp "$log/stdout.log"
        rc=${PIPESTATUS[0]}
        if [[ -n $TS_STOPPED ]]; then  # the job is being ended (scancel, a node lost): srun's rc says nothing
            wait
            return 143
        fi
        if [[ ! -s $log/$TS_STEP_RC ]]; then  # the node never said how the replica ended: it was lost under it
            echo "--- torchspec: replica $role/$k ended without an exit code from its node (srun: $rc) ---" |
                stamp "$log/stderr.log"
            ((rc == 0)) && rc=1
            if ((attempt >= restarts)); then
                wait
                return "$rc"
            fi
        fi
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

# The script's end: wait for the replicas; the first failure ends (or requeues) the job.
_WAIT_LINES = [
    "", "# The first replica to fail ends the job (Slurm then stops the other steps) with its exit code.", "TS_RC=0",
    'for _ in "${TS_PIDS[@]}"; do',
    "    wait -n",
    "    TS_RC=$?",
    "    ((TS_RC == 0)) || break",
    "done",
]
_END_LINES = [
    "if ((TS_RC != 0)); then",
    '    echo "torchspec: a replica failed with exit code $TS_RC; ending the job" >&2',
    # failures only: a requeue after a preemption counts in $SLURM_RESTART_COUNT, not here
    '    TS_FAILED=$(cat "$TS_LOG_DIR/failed_runs" 2>/dev/null || echo 0)',
    "    if ((TS_FAILED < TS_MAX_RETRIES)); then",
    '        echo "$((TS_FAILED + 1))" >"$TS_LOG_DIR/failed_runs"',
    '        echo "torchspec: requeueing (APPLICATION retry $((TS_FAILED + 1)) of $TS_MAX_RETRIES)" >&2',
    '        scontrol requeue "$SLURM_JOB_ID" && sleep 600  # the requeue ends this script',
    "    fi",
    "fi",
    'exit "$TS_RC"', "",
]


def render_script(request: SlurmBatchRequest) -> str:
    """The sbatch script of ``request``: ``#SBATCH`` lines, then bash that starts every replica.

    Every value in an ``#SBATCH`` line was checked by ``sbatch_value`` (or
    made safe, the job name); everything in the body is a quoted word.
    """
    lines = _sbatch_lines(request) + script_lines([c.secrets for c in request.components]) + _setup_lines(request)
    lines += _log_folder_lines(request) + _rank0_lines(request)
    lines += ["", "TS_PIDS=()"]
    for c in request.components:
        if not c.depends_on:
            for r in c.replicas:
                lines += _replica_lines(c, r)
    lines += ordered_lines(request.components, _replica_lines) if any(c.depends_on for c in request.components) else _WAIT_LINES
    return "\n".join(lines + _END_LINES)


def _sbatch_lines(request: SlurmBatchRequest) -> List[str]:
    """The script's head: what it is, then the job's ``#SBATCH`` lines and each component's."""
    roles = ", ".join(
        f"{c.role} ({len(c.replicas)} replica{'s' if len(c.replicas) != 1 else ''})" for c in request.components
    )
    lines = [
        "#!/bin/bash",
        f"# torchspec app {request.app_name!r} as one Slurm job: {roles}.",
        f"# `torchspec submit -s slurm` submits this script with `{shlex.join(request.sbatch_args())}`;",
        "# `sbatch FILE` runs it too (its own output then goes to Slurm's default, slurm-JOBID.out).",
        f"# Logs: {request.log_root}/JOBID/ROLE/K/{{stdout,stderr,combined}}.log (lines: ISO time, tab, text).",
        *request.notes,
        "#",
    ]
    lines += [f"#SBATCH {opt}" for opt in request.job_opts]
    for c in request.components:
        if c.group > 0:
            lines.append("#SBATCH hetjob")
        where = f"het group {c.group}" if request.het else "the job"
        image = f", in the container image {c.container} (pyxis)" if c.container else ""
        lines.append(f"# {where}: role {c.role}, {len(c.replicas)} replica(s){image}")
        lines += [f"#SBATCH {opt}" for opt in c.sbatch_opts]
    return lines


def _setup_lines(request: SlurmBatchRequest) -> List[str]:
    """The script's own readonly variables and its bash functions."""
    return [
        "",
        "set -uo pipefail",
        "# The logs, exit codes and the spec are the user's own: folders 0700, files 0600. The replicas keep",
        "# the umask the job started with (the submitter's): run_replica hands it to srun as $SLURM_UMASK.",
        'readonly TS_UMASK="$(umask)"',
        "umask 077",
        f"readonly TS_LOG_ROOT={shell_word(request.log_root)}",
        'readonly TS_LOG_DIR="$TS_LOG_ROOT/$SLURM_JOB_ID"',
        f"readonly TS_HETJOB={'1' if request.het else ''}",
        "# APPLICATION retries: how often a failed job requeues itself (failed_runs counts them)",
        f"readonly TS_MAX_RETRIES={request.max_retries}",
        "# Slurm SIGTERMs the script when it ends the job (scancel, a node lost): a replica's step then ends",
        "# without its exit code meaning anything, so none is written for it (see run_replica)",
        "TS_STOPPED=",
        "trap 'TS_STOPPED=1' TERM",
        "# Each replica's own exit code, written on its node by the step itself: srun exits 0 when the node",
        "# under a step fails, so its exit code alone cannot be trusted; and, as it starts, its started file",
        f"readonly TS_STEP_RC={STEP_RC_FILE}",
        f"""readonly TS_RECORD_RC=': >"${{0%/*}}/{STARTED_FILE}"; f=$0; "$@"; rc=$?; echo "$rc" >"$f"; exit "$rc"'""",
        "",
        _FUNCTIONS,
        "",
    ]


def _log_folder_lines(request: SlurmBatchRequest) -> List[str]:
    """Create every replica's log folder; on a requeued run, mark the restart in each log."""
    folders = " ".join(shlex.quote(f"{c.role}/{r.replica_id}") for c in request.components for r in c.replicas)
    return [
        "# Each replica's log folder (and the log root, which sbatch run by hand may not find yet);",
        "# on a requeued run the logs go on, after a marker line.",
        f'mkdir -p -- "$TS_LOG_DIR" && cd "$TS_LOG_DIR" && mkdir -p -- {folders} || exit 1',
        "# Slurm created the batch log (sbatch --output) with the submitter's umask: private too.",
        'chmod go= -- "$TS_LOG_ROOT/$SLURM_JOB_ID.batch.log" 2>/dev/null',
        f"rm -f -- */*/{EXITCODE_FILE} */*/{STEP_RC_FILE} */*/{STARTED_FILE} */*/{WAITING_FILE}",
        'if [[ -n ${SLURM_RESTART_COUNT:-} ]]; then',
        f"    for d in {folders}; do",
        ('        echo "--- torchspec: restart $SLURM_RESTART_COUNT of the job (APPLICATION retry) ---" |'
         ' stamp "$d/stdout.log"'),
        "    done",
        "fi",
    ] + waiting_lines(request.components) + [""]


def _rank0_lines(request: SlurmBatchRequest) -> List[str]:
    """Each component's nodes, its rank 0's host (what ``${rank0_env}`` names) and its hosts (``${hosts_env:ROLE}``)."""
    lines = ["# Per role: rank 0's host (the first node of its component), and every replica's host."]
    for c in request.components:
        nodelist = f"${{SLURM_JOB_NODELIST_HET_GROUP_{c.group}:-$SLURM_JOB_NODELIST}}" if request.het else (
            "$SLURM_JOB_NODELIST")
        lines.append(f'mapfile -t TS_NODES_{c.group} < <(scontrol show hostnames "{nodelist}")')
        lines.append(f"readonly TS_NODES_{c.group}")
        lines.append(f'readonly TS_RANK0_HOST_{c.group}="$(node_host "${{TS_NODES_{c.group}[0]}}")"')
        n = len(c.replicas) if c.one_node_per_replica else 0  # else: the nodes its replicas share
        lines.append(f'readonly TS_HOSTS_{c.group}="$(hosts_of {n} "${{TS_NODES_{c.group}[@]}}")"')
    return lines


def _replica_lines(c: SlurmComponent, r: SlurmReplica) -> List[str]:
    """Start replica ``r`` in the background, on its node, with its environment."""
    q = shlex.quote
    if c.one_node_per_replica:
        node = f'"${{TS_NODES_{c.group}[{r.replica_id}]}}"'
        where = f"node {r.replica_id + 1} of its component"
    elif r.replica_id == 0:
        node, where = f'"${{TS_NODES_{c.group}[0]}}"', "the first node of its component"
    else:
        node, where = '""', "any node of its component"
    command = " ".join(shell_word(a) for a in r.args)
    give, secret_words = replica_lines(c.secrets)
    lines = [
        f"# {c.role}/{r.replica_id} on {where}",
        "(",
        f"    readonly -a TS_SRUN_OPTS=({' '.join(q(o) for o in c.srun_opts)})",
        *give,
        f"    run_replica {q(c.role)} {r.replica_id} {c.group} {node} {c.restarts} {q(c.cwd)}"
        + (" \\" if secret_words else " env \\"),
    ]
    if secret_words:
        lines += [f"        {word} \\" for word in secret_words] + ["        env \\"]
    lines += [f"        {shell_word(f'{key}={value}')} \\" for key, value in r.env.items()]
    return lines + [f"        {command}", ") &", "TS_PIDS+=($!)"]


# ----------------------------------------------------------------------------
# Pure translator: AppDef + cfg -> request
# ----------------------------------------------------------------------------

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: Characters the job's name keeps; any other becomes ``-``.
_JOB_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def job_name(prefix: str, app_name: str) -> str:
    """The job's ``--job-name``: ``prefix`` + the app's name, as letters, digits and ``-_.`` only.

    The app's name comes from a spec, which may come from anyone: it is made
    safe rather than refused, and hetjob/packjob become het-job/pack-job so
    that sbatch cannot take the name for a component separator.
    """
    name = _JOB_NAME_UNSAFE.sub("-", prefix + app_name)
    name = HET_WORDS.sub(lambda m: m.group(0)[:-3] + "-" + m.group(0)[-3:], name)
    return name or "torchspec"


def _no_nul(role: str, what: str, text: str) -> str:
    """``text`` unless it holds a NUL, which no argument or environment value can (and the script uses as a mark)."""
    if "\x00" in text:
        raise AppRefusedError(f"role {role!r}: {what} {text!r} holds a NUL character, which no command line can"
                              f" carry")
    return text


def resolve_image(role: Role, cwd: str) -> str:
    """The role's image as an absolute folder; it must exist here (and, shared, on the compute nodes)."""
    folder = os.path.abspath(os.path.join(cwd, os.path.expanduser(role.image)))
    if not os.path.isdir(folder):
        raise AppRefusedError(
            f"role {role.name!r}: image {role.image!r} is not a folder ({folder}): on Slurm an image is a folder"
            f" on the file system the nodes share, and the entrypoint is relative to it (or a container image,"
            f" docker://NAME:TAG, which needs pyxis)"
        )
    return folder


def _mem_opt(memMB: int) -> str:
    return f"{memMB}M"


def _check_role(role: Role) -> None:
    """Refuse what a role asks for that the slurm scheduler cannot give, or cannot name a log folder after."""
    if not is_role_name(role.name):
        raise AppRefusedError(f"role name {role.name!r} cannot be a log folder name: use letters, digits, _ . -"
                              f" (not only dots)")
    if role.num_replicas <= 0:
        raise AppRefusedError(f"role {role.name!r} has {role.num_replicas} replicas; it needs at least one")
    if role.mounts:
        raise AppRefusedError(f"role {role.name!r} has mounts: the slurm scheduler runs on the nodes' own file systems,"
                              " without containers; use paths that exist there instead")
    if role.resource.devices:
        raise AppRefusedError(f"role {role.name!r} asks for devices {sorted(role.resource.devices)}: on Slurm ask for"
                              f" them as gres, with the resource capability {CAP_GRES!r}")



def _entrypoint(role: Role, img_root: str) -> str:
    """The program each replica of ``role`` runs, found now so that a typo fails the submit."""
    from torchspec.schedulers.entrypoint import resolve_entrypoint

    search_path = role.env.get("PATH", os.environ.get("PATH"))
    entrypoint = resolve_entrypoint(role.name, role.entrypoint, img_root, search_path)
    if "=" in entrypoint:
        # the replica runs as `env K=V ... ENTRYPOINT ARGS`, and env takes any word with "=" for a variable
        raise AppRefusedError(f"role {role.name!r}: entrypoint {entrypoint!r} holds '=', which the slurm scheduler"
                              f" cannot run (env would read it as a variable); rename the file or its folder")
    return entrypoint


def _capability(role: Role, key: str) -> Optional[str]:
    """The role's resource capability ``key``, checked for an ``#SBATCH`` line; None when not given."""
    value = role.resource.capabilities.get(key)
    return sbatch_value(f"role {role.name!r}: resource capability {key}", value) if value else None


def _placement_opts(cfg: Mapping[str, CfgVal], role_constraint: Optional[str], nodelist: Optional[str]
                    ) -> List[str]:
    """The component's ``#SBATCH`` options that say where it may run and who pays."""
    opts: List[str] = []
    for key, flag in (("partition", "--partition"), ("time", "--time"), ("account", "--account"),
                      ("qos", "--qos"), ("exclude", "--exclude")):
        value = run_opt(cfg, key)
        if value:
            opts.append(f"{flag}={value}")
    constraints = [c for c in (run_opt(cfg, "constraint"), role_constraint) if c]
    if constraints:
        opts.append("--constraint=" + "&".join(f"({c})" if "|" in c else c for c in constraints))
    if nodelist:
        opts.append(f"--nodelist={nodelist}")
    return opts


def _sizes(role: Role) -> Tuple[int, int, int]:
    """One replica's (CPUs, GPUs, memory in MB), a negative one read as not asked for."""
    res = role.resource
    return max(res.cpu, 0), max(res.gpu, 0), max(res.memMB, 0)


def _resource_opts(role: Role, per_node: bool, gres: Optional[str]) -> List[str]:
    """The component's ``#SBATCH`` options that size it: nodes or tasks, memory, GPUs, CPUs.

    With ``per_node`` (``one_node_per_replica``) each replica is a node:
    ``--nodes=R --ntasks-per-node=1``, ``--mem`` per node and
    ``--gpus-per-node``.  Without it the replicas are R tasks that Slurm may
    pack onto fewer nodes, so memory is asked per CPU.
    """
    cpu, gpu, mem = _sizes(role)
    if per_node:
        opts = [f"--nodes={role.num_replicas}", "--ntasks-per-node=1"]
        mem_opt, gpu_opt = f"--mem={_mem_opt(mem)}", f"--gpus-per-node={gpu}"
    else:
        opts = [f"--ntasks={role.num_replicas}"]
        mem_opt, gpu_opt = f"--mem-per-cpu={_mem_opt(math.ceil(mem / max(cpu, 1)))}", f"--gpus-per-task={gpu}"
    if mem:
        opts.append(mem_opt)
    if gres:
        opts.append(f"--gres={gres}")
    elif gpu:
        opts.append(gpu_opt)
    if cpu:
        opts.append(f"--cpus-per-task={cpu}")
    return opts


def _srun_opts(role: Role, gres: Optional[str]) -> List[str]:
    """What each replica's step asks for within the component: one replica's CPUs, memory and GPUs."""
    cpu, gpu, mem = _sizes(role)
    opts: List[str] = []
    if cpu:
        opts.append(f"--cpus-per-task={cpu}")
    if mem:
        opts.append(f"--mem={_mem_opt(mem)}")
    if gres:
        opts.append(f"--gres={gres}")
    elif gpu:
        opts.append(f"--gres=gpu:{gpu}")
    return opts


def _replicas(role: Role, group: int, cfg: Mapping[str, CfgVal], img_root: str, entrypoint: str
              ) -> List[SlurmReplica]:
    """One :class:`SlurmReplica` per replica: its command line and environment, macros filled in."""
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
                raise AppRefusedError(f"role {role.name!r}: {key!r} is not a valid environment variable name")
        replicas.append(SlurmReplica(role=role.name, replica_id=k, args=[entrypoint] + list(filled.args), env=env))
    return replicas


def role_to_component(
    role: Role,
    group: int,
    cfg: Mapping[str, CfgVal],
    cwd: str,
    nodelist: Optional[str],
    extras: Optional[Extras] = None,
) -> SlurmComponent:
    """The het component of ``role``: its ``#SBATCH`` lines, and one :class:`SlurmReplica` per replica."""
    _check_role(role)
    extras = extras or Extras(log_root=_log_root(cfg))
    image = image_of(role, cwd)
    in_container = container_opts(role, group, image, extras) if image else []
    if image:  # the entrypoint and ${img_root} are the image's; the step starts in the log root
        img_root, workdir = "", extras.log_root
        entrypoint = _no_nul(role.name, "entrypoint", role.entrypoint)
        if "=" in entrypoint:
            raise AppRefusedError(f"role {role.name!r}: entrypoint {entrypoint!r} holds '=', which env would read"
                                  f" as a variable")
    else:
        img_root = workdir = resolve_image(role, cwd)
        entrypoint = _entrypoint(role, img_root)
    per_node = bool(cfg.get("one_node_per_replica", True))
    gres = _capability(role, CAP_GRES)
    role_constraint = _capability(role, CAP_CONSTRAINT)
    exclusive = exclusive_capability(role)  # the role's own, instead of the run option's
    job_wide = [o for o in extras.sbatch_opts if not (exclusive and o == "--exclusive")]
    policy = RetryPolicy(role.retry_policy)
    return SlurmComponent(
        role=role.name,
        group=group,
        sbatch_opts=(_placement_opts(cfg, role_constraint, nodelist) + _resource_opts(role, per_node, gres)
                     + ([exclusive] if exclusive else []) + job_wide),
        srun_opts=_srun_opts(role, gres) + in_container + extras.srun_opts,
        cwd=workdir,
        one_node_per_replica=per_node,
        restarts=role.max_retries if policy == RetryPolicy.REPLICA else 0,
        replicas=_replicas(role, group, cfg, img_root, entrypoint),
        container=image,
        depends_on=[(d.role, d.when) for d in role.depends_on],
    )


def _log_root(cfg: Mapping[str, CfgVal]) -> str:
    """The run option log_dir (else the default) as an absolute path that may go into the job's options."""
    log_root = os.path.abspath(os.path.expanduser(str(cfg.get("log_dir") or default_log_root())))
    sbatch_value("log_dir", log_root)  # it is part of the comment and of sbatch's --output
    if "%" in log_root:
        raise AppRefusedError(f"log_dir {log_root!r} holds '%', which Slurm's --output would expand (%j, %u...)")
    return log_root


def _nodelists(app: AppDef, cfg: Mapping[str, CfgVal]) -> List[Optional[str]]:
    """The run option nodelist as one node list (or None, free) per role; [] when not given."""
    raw_nodelist = run_opt(cfg, "nodelist") or ""
    nodelists: List[Optional[str]] = [n or None for n in raw_nodelist.split(":")] if raw_nodelist else []
    if nodelists and len(nodelists) != len(app.roles):
        raise AppRefusedError(
            f"nodelist {raw_nodelist!r} has {len(nodelists)} node list(s) for {len(app.roles)} roles:"
            f" give one per role, separated by ':' (an empty one leaves that role free)"
        )
    return nodelists


def _job_opts(app: AppDef, cfg: Mapping[str, CfgVal], log_root: str, app_retries: int) -> List[str]:
    """The job-wide ``#SBATCH`` options: its name, the comment ``list`` and ``status`` read, requeue, mail."""
    name = job_name(run_opt(cfg, "job_name_prefix") or "", app.name)
    comment = COMMENT_PREFIX + log_root
    labels = encode_labels(labels_of(app))
    if labels:
        comment += f" {COMMENT_LABELS}{labels}"
    user_comment = run_opt(cfg, "comment", spaces=True)
    if user_comment:
        comment += " " + user_comment
    job_opts = [
        f"--job-name={name}",
        f"--comment={shlex.quote(comment)}",  # the one value with spaces; sbatch strips the quotes
        requeue_option(cfg, app_retries),
    ]
    mail_user = run_opt(cfg, "mail_user")
    if mail_user:
        job_opts.append(f"--mail-user={mail_user}")
        job_opts.append(f"--mail-type={run_opt(cfg, 'mail_type') or 'END,FAIL'}")
    licenses = run_opt(cfg, "licenses")
    if licenses:
        job_opts.append(f"--licenses={licenses}")
    return job_opts


def app_to_request(app: AppDef, cfg: Mapping[str, CfgVal], cwd: str,
                   helps: Optional[Mapping[str, ClientHelp]] = None) -> SlurmBatchRequest:
    """The whole request for ``app`` under a resolved ``cfg``; talks to no Slurm.  ``helps``: what the
    cluster's ``sbatch --help`` and ``srun --help`` list (by command; unknown when missing), which the
    pass-through flags are checked against and which says whether srun has pyxis."""
    check_role_names(app)  # a role's name names its replicas' log folders
    check_slurm_keys(app)
    refuse_kubernetes_only(app, "slurm", mounts=True)
    refuse_elastic(app, "slurm")  # never a silent start at num_replicas
    log_root = _log_root(cfg)
    nodelists = _nodelists(app, cfg)
    extras = extras_of(cfg, helps or {}, log_root)
    components = [role_to_component(role, g, cfg, cwd, nodelists[g] if nodelists else None, extras)
                  for g, role in enumerate(app.roles)]
    check_depends_on(components)
    hosts = {role_hosts_env(c.role): hosts_mark(c.group) for c in components}  # their values: once the job runs
    for replica in (r for c in components for r in c.replicas):
        replica.env.update(hosts)
    check_env_names(app, {c.role: set(c.replicas[0].env) for c in components if c.replicas})
    for component, secrets in zip(components, role_secrets(app)):
        component.secrets = secrets
    app_retries = max(
        (r.max_retries for r in app.roles if RetryPolicy(r.retry_policy) != RetryPolicy.REPLICA), default=0
    )
    return SlurmBatchRequest(
        app_name=app.name,
        log_root=log_root,
        job_opts=_job_opts(app, cfg, log_root, app_retries),
        components=components,
        max_retries=app_retries,
        notes=extras.notes,
    )
