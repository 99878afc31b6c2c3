"""One run option on every backend, ``grace_period``: the seconds a replica has between the stop signal (SIGTERM)
and the kill, so a training job stopped by a cancel, a retry or the cluster can write its checkpoint first.

Each engine says it its own way, which this option becomes: Kubernetes' ``terminationGracePeriodSeconds`` (also
what an eviction or a preemption gives the pod), Docker's stop timeout, the local supervisor's and the Ray
launcher's wait before SIGKILL.  Two backends had an option of their own before (local ``kill_grace_s``, docker
``stop_timeout``); those names stay, and one given with a different ``grace_period`` is refused.  Slurm's grace
is the cluster's (a partition's ``GraceTime`` on preemption, ``KillWait`` at the time limit), so the slurm
backend refuses the option with that said (its ``signal`` option warns a job before its time limit).
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from torchspec.errors import AppRefusedError

KEY = "grace_period"
HELP = ("seconds a replica has between SIGTERM and SIGKILL when it is stopped (cancel, retry, eviction): time to"
        " write a checkpoint; the same option on every backend")


def add_option(opts: Any, what: str = "") -> None:
    """Add ``grace_period`` to a backend's run options (``what``: how this backend keeps it)."""
    opts.add(KEY, type_=int, default=None, help=HELP + (f" ({what})" if what else ""))


def grace_period(cfg: Mapping[str, Any], older: Optional[str] = None, older_default: Optional[int] = None
                 ) -> Optional[int]:
    """The grace period ``cfg`` asks for, in whole seconds: ``grace_period``, else the backend's ``older`` option;
    None where neither is given.  A negative value, or the two names given different values, is refused."""
    value = cfg.get(KEY)
    before = cfg.get(older) if older else None
    if before == older_default:
        before = None  # the older option's default, filled in: not asked for
    if value is not None and before is not None and int(value) != int(before):
        raise AppRefusedError(f"run options {KEY}={value} and {older}={before} disagree",
                              f"give {KEY} alone ({older} is its older name on this scheduler)")
    chosen = value if value is not None else before
    if chosen is None:
        return None
    if int(chosen) < 0:
        raise AppRefusedError(f"run option {KEY if value is not None else older}={chosen} must be 0 or more seconds")
    return int(chosen)
