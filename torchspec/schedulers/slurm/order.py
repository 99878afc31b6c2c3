"""The ordered start of ``depends_on`` in a Slurm batch script: the app stays one job, and the script starts a
role that waits once every replica of each role it names is finished (its ``exitcode`` file says 0) or ready (its
step wrote its ``started`` file on its node); until then the role's replicas have a ``waiting`` file, which
``status`` reads (PENDING, saying what for).  Only the text of the script is built here (see translate.py).
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Callable, List, Sequence

from torchspec.errors import AppRefusedError
from torchspec.schedulers.slurm.states import EXITCODE_FILE, STARTED_FILE, WAITING_FILE

if TYPE_CHECKING:
    from torchspec.schedulers.slurm.translate import SlurmComponent, SlurmReplica

#: How translate.py writes the lines that start one replica (in the background, its pid in TS_PIDS).
ReplicaLines = Callable[["SlurmComponent", "SlurmReplica"], List[str]]

# An app whose roles wait for others (depends_on) starts them from a loop that also collects the replicas as they
# end: bash's `wait -n` does not report a job that ended before it was called, which a role that finished before
# another started would be.
ORDER_FUNCTIONS = rf"""
# Ordered start (depends_on): a role that waits starts once every replica of each role it names has finished
# (exited 0) or is ready (its step started on its node); until then its replicas are PENDING (their
# {WAITING_FILE} file says for what). The first replica to fail still ends the job; a role still waiting never starts.
declare -A TS_REAPED=()
# reap: collect the replicas that ended (bash's own job table says which still run); TS_RC becomes the first
# failure's exit code.
reap() {{
    local running pid rc
    running=" $(jobs -rp | tr '\n' ' ') "
    for pid in "${{TS_PIDS[@]}}"; do
        [[ -n ${{TS_REAPED[$pid]:-}} || $running == *" $pid "* ]] && continue
        TS_REAPED[$pid]=1
        wait "$pid"
        rc=$?
        ((rc == 0 || TS_RC != 0)) || TS_RC=$rc
    done
}}
# role_is ROLE N finished|ready: whether each of ROLE's N replicas exited 0 (finished) or has started (ready).
role_is() {{
    local k
    for ((k = 0; k < $2; k++)); do
        if [[ $3 == finished ]]; then
            [[ $(cat "$TS_LOG_DIR/$1/$k/{EXITCODE_FILE}" 2>/dev/null) == 0 ]] || return 1
        else
            [[ -e $TS_LOG_DIR/$1/$k/{STARTED_FILE} ]] || return 1
        fi
    done
}}
""".strip("\n")


def waits_for(c: "SlurmComponent", verb: str = "to be") -> str:
    """``download to be finished, ps to be ready``: what role ``c`` waits for, in words (role names hold no
    quote or space: see _check_role)."""
    return ", ".join(f"{role} {verb} {when}" for role, when in c.depends_on)


def ordered_lines(components: Sequence["SlurmComponent"], replica_lines: ReplicaLines) -> List[str]:
    """Start each waiting role once its dependencies are met, collecting the replicas as they end."""
    counts = {c.role: len(c.replicas) for c in components}
    waiting = [c for c in components if c.depends_on]
    flags = " + ".join(f"TS_WAITING_{c.group}" for c in waiting)
    lines = ["", ORDER_FUNCTIONS, ""]
    lines += [f"TS_WAITING_{c.group}=1  # role {c.role} waits for {waits_for(c)}" for c in waiting]
    lines += ["TS_RC=0", 'while ((TS_RC == 0)) && [[ -z $TS_STOPPED ]]; do']
    for c in waiting:
        met = " && ".join(f"role_is {shlex.quote(role)} {counts[role]} {when}" for role, when in c.depends_on)
        starts = f"torchspec: role {c.role} starts now ({waits_for(c, verb='is')})"
        lines += [f"    if ((TS_WAITING_{c.group})) && {met}; then",
                  f"        TS_WAITING_{c.group}=0",
                  f"        echo {shlex.quote(starts)} >&2",
                  f'        rm -f -- "$TS_LOG_DIR"/{shlex.quote(c.role)}/*/{WAITING_FILE}']
        for r in c.replicas:
            lines += replica_lines(c, r)
        lines.append("    fi")
    lines += ["    reap",
              f'    (({flags} + ${{#TS_PIDS[@]}} - ${{#TS_REAPED[@]}})) || break  # all started, and all ended',
              "    sleep 1",
              "done",
              "[[ -z $TS_STOPPED ]] || ((TS_RC != 0)) || TS_RC=143  # ended by Slurm (scancel, a node lost)"]
    for c in waiting:
        never = f"torchspec: role {c.role} never started (it waits for {waits_for(c)})"
        lines.append(f"((TS_WAITING_{c.group} == 0)) || echo {shlex.quote(never)} >&2")
    return lines


def waiting_lines(components: Sequence["SlurmComponent"]) -> List[str]:
    """Each replica of a role that waits (depends_on) says so in its waiting file (what status reads), written
    before any replica starts; the role removes them as it starts."""
    lines = []
    for c in (c for c in components if c.depends_on):
        folders = " ".join(shlex.quote(f"{c.role}/{r.replica_id}") for r in c.replicas)
        lines += [f"for d in {folders}; do",
                  f'    echo {shlex.quote("waits for " + waits_for(c))} >"$d/{WAITING_FILE}"',
                  "done"]
    return lines


def check_depends_on(components: Sequence["SlurmComponent"]) -> None:
    """Refuse a role waiting for no other role of the app: the runner refuses it first (TS510), but a caller of
    the scheduler itself may not have gone through the runner, and the script would wait forever."""
    names = {c.role for c in components}
    for c in components:
        for role, _ in c.depends_on:
            if role not in names or role == c.role:
                raise AppRefusedError(f"role {c.role!r} depends on {role!r}, which is no other role of the app")


__all__ = ["ORDER_FUNCTIONS", "check_depends_on", "ordered_lines", "waiting_lines", "waits_for"]
