"""The slurm backend's run options, and the check every value going into an ``#SBATCH`` line passes.

Run options may come from anyone (a shared config, a spec's defaults): none
may add a line to the script, which bash would run, or split the job into
het-job components, so :func:`sbatch_value` checks each one before it is
written.
"""

from __future__ import annotations

import os
import re
from typing import Dict, List, Mapping, Optional

from torchspec.errors import AppRefusedError
from torchspec.schedulers import grace, request_timeout
from torchspec.specs import CfgVal, runopts

#: Words sbatch (or its burst-buffer plugins, or older sbatch) may read as a het-job separator
#: anywhere in an ``#SBATCH`` line, which would split the job.
HET_WORDS = re.compile(r"hetjob|packjob", re.IGNORECASE)


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
    opts.add("licenses", type_=str, default=None, help="licenses the job needs, e.g. matlab:2,fluent (--licenses)")
    opts.add("exclusive", type_=bool, default=False,
             help="give every role's nodes to the job alone (--exclusive); per role: the capability slurm.exclusive")
    opts.add("signal", type_=str, default=None,
             help="signal the replicas SECONDS before the time limit, as SIGNAL[@SECONDS], e.g. USR1@120"
             " (--signal; R: allowed, B: refused)")
    opts.add("preemption", type_=str, default="requeue",
             help="what a preemption (or a node lost, scontrol requeue) does: requeue (--requeue: the job runs"
             " again without spending max_retries) or fail (--no-requeue, unless APPLICATION retries need it)")
    opts.add("sbatch_args", type_=List[str], default=None,
             help="more sbatch flags for every role's component, as #SBATCH lines: --name or --name=value"
             " (with -c: --name VALUE), checked against the cluster's sbatch --help")
    opts.add("srun_args", type_=List[str], default=None,
             help="more srun flags for every replica's step, like sbatch_args, checked against srun --help")
    grace.add_option(opts, "refused: on Slurm it is the cluster's, a partition's GraceTime and KillWait")
    request_timeout.add_option(opts)
    return opts


#: The values of the ``preemption`` run option.
PREEMPTION = ("requeue", "fail")


def requeue_option(cfg: Mapping[str, CfgVal], app_retries: int) -> str:
    """``--requeue`` or ``--no-requeue``: a preemption (a node lost, ``scontrol requeue``) requeues the job
    unless ``preemption=fail``; APPLICATION retries requeue the job themselves, so they need ``--requeue``
    whatever it says.  AppRefusedError for a value that is neither, and for ``grace_period`` (:func:`refuse_grace`,
    checked here since every app's script asks this)."""
    refuse_grace(cfg)
    preemption = str(cfg.get("preemption") or "requeue")
    if preemption not in PREEMPTION:
        raise AppRefusedError(f"run option preemption={preemption!r}: give requeue or fail",
                              "requeue: a preempted job runs again (the default); fail: it ends FAILED")
    return "--requeue" if app_retries > 0 or preemption == "requeue" else "--no-requeue"


def default_log_root() -> str:
    """``$TORCHSPEC_HOME/slurm`` (else ``~/.local/state/torchspec/slurm``): on a login node, home is shared."""
    from torchspec.schedulers.state_dir import default_state_dir

    return os.path.join(default_state_dir(), "slurm")


def sbatch_value(what: str, value: object, spaces: bool = False) -> str:
    """``value`` as it may stand in an ``#SBATCH`` line; AppRefusedError naming ``what`` if it cannot.

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
            raise AppRefusedError(f"{what} {text!r} holds the control character {ch!r}, which cannot go into an"
                                  f" #SBATCH line (it would end the line and start a command)")
        if ch in "#'\\\"":
            raise AppRefusedError(f"{what} {text!r} holds {ch!r}, which sbatch reads as its own syntax in #SBATCH"
                                  f" lines")
        if ch.isspace() and not (spaces and ch == " "):
            raise AppRefusedError(f"{what} {text!r} contains whitespace, which it cannot hold in an #SBATCH line")
    match = HET_WORDS.search(text)
    if match:
        raise AppRefusedError(f"{what} {text!r} holds the word {match.group(0)!r}, which sbatch may read as the"
                              f" start of another het-job component")
    return text


def run_opt(cfg: Mapping[str, CfgVal], key: str, spaces: bool = False) -> Optional[str]:
    """The run option ``key`` as it may go into an ``#SBATCH`` line, or None when not given."""
    value = cfg.get(key)
    return sbatch_value(f"run option {key}", value, spaces) if value else None


def refuse_grace(cfg: Mapping[str, CfgVal]) -> None:
    """Slurm gives no job its own time between SIGTERM and SIGKILL: refuse ``grace_period`` rather than drop it."""
    if cfg.get(grace.KEY) is not None:
        raise AppRefusedError(f"run option {grace.KEY}: on Slurm the time between SIGTERM and SIGKILL is the"
                              " cluster's (a partition's GraceTime when a job is preempted, KillWait at its time"
                              " limit), not a job's",
                              "leave it out; to warn the job before its time limit, give -c signal=USR1@120 and"
                              " handle USR1")
