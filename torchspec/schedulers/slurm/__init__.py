"""The ``slurm`` scheduler: one app is one Slurm batch job, one heterogeneous component per role.

Each role is a het-job component (a plain job when there is one role) and
each replica its own job step (``srun --exact``), all started by one sbatch
script, which is exactly what ``dryrun`` prints.  The app id is the Slurm job
id; what Slurm does not keep (the spec, the replicas' stamped logs and exit
codes) lives in a private log folder on the file system the nodes share.
The job's comment is ``torchspec:LOG_ROOT`` (then the user's comment), which
is how ``list`` picks torchspec's jobs and ``status`` finds the logs.

The package, from the bottom up:

- ``states.py``: Slurm job states as AppStates, file names, what an id may be.
- ``options.py``: the run options, and the check of every ``#SBATCH`` value.
- ``flags.py``: ``slurm.*`` keys, signal, exclusive, sbatch_args/srun_args (checked against ``--help``), pyxis images.
- ``translate.py``: the request (its text is the sbatch script) and AppDef -> request; pure.
- ``query.py``: what ``scontrol``/``squeue``/``sacct`` answer, as job views and states; pure.
- ``logs.py``: the log folder: its layout, private writes, reading it back, following a log.
- ``scheduler.py``: :class:`SlurmScheduler`, which runs the Slurm commands.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from torchspec.schedulers.exports import lazy_exports

if TYPE_CHECKING:
    from torchspec.schedulers.slurm.scheduler import SlurmScheduler


def create_scheduler(session_name: str, **kwargs: Any) -> SlurmScheduler:
    """The ``slurm`` entry point; ``request_timeout`` (``TORCHSPEC_REQUEST_TIMEOUT``) bounds each Slurm command,
    other keyword arguments are ignored."""
    from torchspec.schedulers.request_timeout import seconds
    from torchspec.schedulers.slurm.scheduler import SlurmScheduler

    return SlurmScheduler(session_name, request_timeout=seconds(kwargs.get("request_timeout")))


#: What the single-file ``torchspec.schedulers.slurm`` module exported, still importable from the package
#: (loaded from where it now lives on first use).
_EXPORTS = {
    "JobView": "query",
    "SLURM_STATES": "states",
    "SlurmBatchRequest": "translate",
    "SlurmComponent": "translate",
    "SlurmReplica": "translate",
    "SlurmReplicaStatus": "scheduler",
    "SlurmScheduler": "scheduler",
    "app_to_request": "translate",
    "is_job_id": "states",
    "job_message": "query",
    "job_name": "translate",
    "parse_log_line": "logs",
    "parse_scontrol": "query",
    "render_script": "translate",
    "role_to_component": "translate",
    "sbatch_value": "options",
    "slurm_run_opts": "options",
    "slurm_state": "states",
    "view_from_json": "query",
    "view_from_scontrol": "query",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = ["create_scheduler", *_EXPORTS]
