"""The ``local`` scheduler: every replica is a process on this machine, and apps outlive the CLI.

An app maps onto a folder and one detached process.  ``schedule`` writes the
app's folder under the state dir and starts a supervisor
(``python -m torchspec.schedulers.local.supervisor APP_DIR``) that launches
the replicas, timestamps their output into log files, restarts them as the
retry policy says and records everything in ``state.json``.  ``describe``,
``list``, ``log_iter`` and ``cancel`` only read and write that folder, so any
later process (``torchspec status`` in another shell) sees the same app.  A
role's image is a folder on this machine (``.`` is the submitting folder); each
replica runs there in a process group of its own.  The layout of one app::

    $STATE_DIR/apps/hello-k3x9q2/
        spec.json            the AppDef as submitted (macros not substituted)
        request.json         the request: each replica's command, env, cwd, log paths
        state.json           live state, replaced atomically under state.lock
        state.lock
        supervisor.lock      held by the supervisor while it lives
        supervisor.log       the supervisor's own output
        trainer/0/output.log (stdout and stderr, once: see logs.py) and error.json if the replica writes one
    $STATE_DIR/apps/.hello-k3x9q2.reserve
                             disk space set aside until the app's end is recorded: freed for the state
                             when a replica's output fills the disk (see state.py)

The package, lowest module first (each imports only those above it):

- ``states.py``: state names and their AppState, file names, env names, timings
- ``options.py``: the run options and how a cfg is read
- ``request.py``: the request classes (what a dry run prints, what the supervisor reads)
- ``translate.py``: AppDef -> request
- ``processes.py``: is a pid alive, stopping process groups nobody supervises, strays outside them
- ``state.py``: the app folder's file format: atomic ``state.json``, its locks, the state edits
- ``logs.py``: the stored log line format and when a followed log is over
- ``pump.py``: the supervisor's one I/O thread (every replica's pipes and exits)
- ``guard.py``: the supervisor's parent, which stops the app if the supervisor is killed
- ``supervisor.py``: the detached process that runs one app (started without ``site``: it imports only
  the standard library and the modules above)
- ``scheduler.py``: the Scheduler class, which does the I/O

Only :func:`create_scheduler` lives here, and it imports the scheduler when
called, so importing the package (as the entry point registry does) costs
nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from torchspec.schedulers.exports import lazy_exports

if TYPE_CHECKING:
    from torchspec.schedulers.local.scheduler import LocalScheduler


def create_scheduler(session_name: str, **kwargs: Any) -> "LocalScheduler":
    """The ``local`` entry point; ``state_dir`` is the one keyword used, others are ignored."""
    from torchspec.schedulers.local.scheduler import LocalScheduler

    state_dir = kwargs.get("state_dir")
    return LocalScheduler(session_name, state_dir=str(state_dir) if state_dir else None)


#: What the single-file ``torchspec.schedulers.local`` module exported, still importable from the package
#: (loaded from where it now lives on first use).
_EXPORTS = {
    "COMBINED_LOG": "states",
    "OUTPUT_LOG": "states",
    "DEFAULT_KILL_GRACE_S": "options",
    "ENV_APP_ID": "torchspec.schedulers.replicas",
    "ENV_ERROR_FILE": "states",
    "ENV_NUM_REPLICAS": "torchspec.schedulers.replicas",
    "ENV_RANK0_HOST": "torchspec.schedulers.replicas",
    "ENV_REPLICA_ID": "torchspec.schedulers.replicas",
    "ENV_RESTART_COUNT": "states",
    "ENV_ROLE_NAME": "torchspec.schedulers.replicas",
    "LocalReplicaStatus": "scheduler",
    "LocalRequest": "request",
    "LocalScheduler": "scheduler",
    "RANK0_HOST": "states",
    "ReplicaRequest": "request",
    "RoleRequest": "request",
    "STDERR_LOG": "states",
    "STDOUT_LOG": "states",
    "app_to_request": "translate",
    "default_state_dir": "torchspec.schedulers.state_dir",
    "local_run_opts": "options",
    "make_app_id": "torchspec.schedulers.replicas",
    "resolve_entrypoint": "torchspec.schedulers.entrypoint",
    "resolve_image": "translate",
    "role_to_request": "translate",
    "set_cuda_visible_devices": "translate",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = ["create_scheduler", *_EXPORTS]
