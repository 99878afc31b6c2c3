"""Secrets on Slurm: carried in the environment sbatch exports to the job, never in the batch script's text.

``torchspec submit`` reads every secret a role names (:mod:`torchspec.schedulers.secrets`) and runs
``sbatch`` with them in its environment only, one *carrier* variable each
(``TORCHSPEC_CARRIED_SECRET_<ROLE>_<ITEM>``; a mount's files as ``<CARRIER>_KEYS``,
the key names, and ``<CARRIER>_<J>``, the J-th key's value).  sbatch's
default ``--export=ALL`` hands them to the batch script, and Slurm keeps them
with the job, so a requeued job gets them again.  Why this way and not a
file the job reads: a file on the shared file system would outlive a failed
submit and be gone for a requeue; the job's environment is what Slurm
already keeps private to the job's owner and the cluster's administrators
(slurmctld's StateSaveLocation, the batch host's ``/proc``; ``sacct
--env-vars`` where accounting stores job environments).  See
docs/guides/secrets.md.

In the job the script takes every carrier out of its exported environment
at once (they stay shell variables), and hands each role's replica steps
their own carriers only (:func:`replica_lines`).  Each such step starts
under :data:`STEP_SCRIPT`, which sets the role's variables and writes its
mounts' files from the carriers, drops every carrier, and runs the replica;
values go through bash builtins only (``export``, ``printf``), never a
command line.  A mount folder is made 0700 when missing, must be the job
user's and writable by no one else, and its files are removed when the last
replica on that node using the folder ends (a lock and one marker per step
in ``.torchspec-users``; a step SIGKILLed leaves its marker, and the files stay
in the private folder).

Pure: builds text and data; :mod:`.scheduler` runs sbatch.
"""

from __future__ import annotations

import shlex
from typing import Dict, List, Mapping, Sequence, Tuple

from torchspec.schedulers.secrets import carrier
from torchspec.specs import AppDef
from torchspec.version import docs_url

#: (``e`` or ``m``, the variable or mount folder, the carrier, what a dry run shows) of one secret of a role.
StepSecret = Tuple[str, str, str, str]

#: What each replica step of a role with secrets runs first (``bash -c "$TS_SECRET_STEP" torchspec-secrets
#: e VAR CARRIER ... m FOLDER CARRIER ... -- env K=V... COMMAND``): it is in the script as text, and holds no value.
STEP_SCRIPT = r"""
set -u
umask 077
ts_path=$PATH ts_vars=()
ts_dirs=() ts_files=() ts_me=".torchspec-users/${SLURM_JOB_ID:-0}.${SLURM_STEP_ID:-0}.$$"
ts_mount() {  # FOLDER CARRIER: write the carrier's files into FOLDER, the job user's own
    local d=$1 keys="${2}_KEYS" k j=0 v p
    [[ -e $d ]] || mkdir -p -- "$d" || return 1
    p=$(stat -c %A -- "$d") || return 1
    if [[ ! -d $d || -L $d || ! -O $d || ${p:5:1} == w || ${p:8:1} == w ]]; then
        echo "torchspec: secret mount folder $d must be a folder of $(id -un) that no one else may write" >&2
        return 1
    fi
    exec {ts_lock}<"$d" && flock "$ts_lock" || return 1
    mkdir -p -- "$d/.torchspec-users" && : >"$d/$ts_me" || return 1
    for k in ${!keys}; do
        v="${2}_$j"
        printf %s "${!v}" >"$d/$k" || return 1
        ts_files+=("$d/$k")
        j=$((j + 1))
    done
    exec {ts_lock}<&-
    ts_dirs+=("$d")
}
ts_unmount() {  # remove the files where this step was the folder's last user on this node
    local d f PATH=$ts_path  # the step's own, whatever a secret named PATH set for the replica
    for d in "${ts_dirs[@]}"; do
        exec {ts_lock}<"$d" && flock "$ts_lock"
        rm -f -- "$d/$ts_me"
        if rmdir -- "$d/.torchspec-users" 2>/dev/null; then
            for f in "${ts_files[@]}"; do [[ $f == "$d"/* ]] && rm -f -- "$f"; done
        fi
        exec {ts_lock}<&-
    done
}
trap ts_unmount EXIT
trap 'exit 143' TERM
while [[ $1 != -- ]]; do
    case $1 in
        e) ts_vars+=("$2" "$3") ;;
        m) ts_mount "$2" "$3" || exit 1 ;;
    esac
    shift 3
done
shift
# the command is found with the step's PATH, then the variables are set (a secret may be named PATH, as a
# role's env may: it is the replica's, as there)
ts_cmd=$(type -P -- "$1") || ts_cmd=$1
for ((ts_i = 0; ts_i < ${#ts_vars[@]}; ts_i += 2)); do
    ts_v=${ts_vars[ts_i + 1]}
    export "${ts_vars[ts_i]}=${!ts_v}"
done
for ts_v in "${!TORCHSPEC_CARRIED_SECRET_@}"; do unset "$ts_v"; done
"$ts_cmd" "${@:2}"
""".strip("\n")


def role_secrets(app: AppDef) -> List[List[StepSecret]]:
    """Each role's ``{env}`` and ``{mount}`` secrets, as its steps take them."""
    return [[("e", ref.env, carrier(r, i), ref.placeholder) if ref.env else
             ("m", str(ref.mount), carrier(r, i), ref.placeholder)
             for i, ref in enumerate(role.secrets) if ref.env or ref.mount]
            for r, role in enumerate(app.roles)]


def sbatch_env(values: Mapping[str, str], files: Mapping[str, Mapping[str, str]]) -> Dict[str, str]:
    """The carrier variables sbatch gets, from what :func:`torchspec.schedulers.secrets.read_carried` read."""
    env = dict(values)
    for name, keyed in files.items():
        env[f"{name}_KEYS"] = " ".join(keyed)
        env.update({f"{name}_{j}": value for j, value in enumerate(keyed.values())})
    return env


def script_lines(secrets: Sequence[Sequence[StepSecret]]) -> List[str]:
    """The batch script's lines that take the carriers out of its environment and check each arrived;
    none for an app without secrets."""
    needed = [(c if kind == "e" else f"{c}_KEYS", shown) for role in secrets for kind, _, c, shown in role]
    if not needed:
        return []
    lines = [
        f"# Secrets ({docs_url('guides/secrets')}): sbatch exported their values from `torchspec submit`'s"
        " environment",
        "# (never in this text). They stay shell variables here, and each role's steps get only their own.",
        'for TS_V in "${!TORCHSPEC_CARRIED_SECRET_@}"; do export -n "$TS_V"; done',
        "ts_need() {",
        '    [[ -n ${!1+x} ]] && return',
        '    echo "torchspec: $2 did not reach the job: sbatch exports the submitter\'s environment (--export=ALL,'
        ' the default); was it submitted with torchspec submit, without SBATCH_EXPORT?" >&2',
        "    exit 1",
        "}",
    ]
    lines += [f"ts_need {name} {shlex.quote(shown)}" for name, shown in needed]
    lines += [
        "ts_give() {  # export the carriers named (and a mount's _KEYS and _J) to the steps started after it",
        "    local c v",
        '    for c; do for v in $(compgen -v "$c"); do [[ $v == "$c" || $v == "$c"_* ]] && export "$v"; done; done',
        "}",
        "IFS= read -r -d '' TS_SECRET_STEP <<'TS_END'",
        STEP_SCRIPT,
        "TS_END",
        "readonly TS_SECRET_STEP",
        "",
    ]
    return lines


def replica_lines(secrets: Sequence[StepSecret]) -> Tuple[List[str], List[str]]:
    """For a replica of a role with ``secrets``: the lines before its ``run_replica`` (the comment a dry run
    reads, and handing it its carriers), and the words its step starts with; nothing without secrets."""
    if not secrets:
        return [], []
    shown = ", ".join(f"{target}{'=' if kind == 'e' else ': '}{placeholder}"
                      for kind, target, _, placeholder in secrets)
    before = [f"    # secrets: {shown}", f"    ts_give {' '.join(c for _, _, c, _ in secrets)}"]
    words = ['bash -c "$TS_SECRET_STEP" torchspec-secrets']
    words += [f"{kind} {shlex.quote(target)} {c}" for kind, target, c, _ in secrets]
    return before, words + ["--"]


__all__ = ["STEP_SCRIPT", "StepSecret", "replica_lines", "role_secrets", "sbatch_env", "script_lines"]
