"""The ``docker`` scheduler: every replica is a container on one Docker engine.

Everything torchspec needs to know about an app lives in the engine, as
labels on the app's containers, so ``status``, ``logs``, ``list``,
``describe`` and ``cancel`` work from any process and any shell that reaches
the same engine, with no local state:

    torchspec.app-id      the app id (also the prefix of every container name)
    torchspec.role-name   the role; torchspec.replica-id its replica index
    torchspec.attempt     how often torchspec restarted this replica (APPLICATION and ROLE retries)
    torchspec.role        the role as submitted, as JSON: what ``describe`` rebuilds
    torchspec.keep        "1" when cancel must keep the stopped containers

One container per replica, named and reachable as ``{app_id}-{role}-{k}`` on
a network created for the app, so ``$TORCHSPEC_RANK0_HOST`` (what
``${rank0_env}`` names) resolves to the role's replica 0 from every replica.

Retries (see docs/schedulers/docker.md): REPLICA is the engine's own ``on-failure`` restart
policy, so it goes on even if nothing of torchspec runs.  APPLICATION and ROLE
need someone to restart the other replicas too; a small watcher process
(:mod:`torchspec.schedulers.docker.watcher`), started by ``schedule``,
follows the engine's events and does it.  Replaced containers are kept,
renamed ``NAME.attemptN``, so their logs stay readable.  The watcher also
renames a container that the engine's shutdown or a ``docker stop`` ended
(``NAME.engine-stopped``, ``NAME.killed``): its replica reads FAILED, even
if it exited 0 on the SIGTERM.

The package, lowest first (each file imports only those above it):

    labels.py     label keys, name suffixes, role keys, Docker state -> AppState
    options.py    the run options (``-c``) and the checks of their values
    translate.py  AppDef -> DockerJob/DockerContainer, the request a dry run prints (pure)
    views.py      ``docker inspect`` read back: ContainerView, AppView (pure)
    engine.py     small engine steps: read_app, stop, pull, the SDK's errors
    logs.py       a replica's log across every container it ran in
    workspace.py  workspace images and ``.dockerignore`` matching
    watcher.py    the detached process that does APPLICATION/ROLE retries
    scheduler.py  DockerScheduler: submit, status, list, logs, cancel, delete
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from torchspec.schedulers.exports import lazy_exports

if TYPE_CHECKING:
    from torchspec.schedulers.docker.scheduler import DockerScheduler


def create_scheduler(session_name: str, **kwargs: Any) -> DockerScheduler:
    """The ``docker`` entry point; a ``client`` keyword (a ``docker.DockerClient``) is used if given,
    ``request_timeout`` (``TORCHSPEC_REQUEST_TIMEOUT``) bounds each request to the engine."""
    from torchspec.schedulers.docker.scheduler import DockerScheduler
    from torchspec.schedulers.request_timeout import seconds

    return DockerScheduler(session_name, client=kwargs.get("client"),
                           request_timeout=seconds(kwargs.get("request_timeout")))


#: What the single-file ``torchspec.schedulers.docker`` module exported, still importable from the package
#: (loaded from where it now lives on first use).
_EXPORTS = {
    "AppView": "views",
    "ContainerView": "views",
    "DockerContainer": "translate",
    "DockerJob": "translate",
    "DockerReplicaStatus": "views",
    "DockerScheduler": "scheduler",
    "LABEL_APP_ID": "labels",
    "LABEL_APP_NAME": "labels",
    "LABEL_ATTEMPT": "labels",
    "LABEL_KEEP": "labels",
    "LABEL_NETWORK": "labels",
    "LABEL_NUM_REPLICAS": "labels",
    "LABEL_REPLICA_ID": "labels",
    "LABEL_ROLE": "labels",
    "LABEL_ROLE_NAME": "labels",
    "LABEL_SESSION": "labels",
    "LABEL_VERSION": "labels",
    "LABEL_WORKSPACE_BASE": "labels",
    "app_to_job": "translate",
    "container_name": "translate",
    "copied_env": "translate",
    "docker_run_opts": "options",
    "read_app": "engine",
    "role_to_containers": "translate",
    "workspace_context": "workspace",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = ["create_scheduler", *_EXPORTS]
