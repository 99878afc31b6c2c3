"""The docker backend's names: container labels, name suffixes, role keys and the state map.

Everything torchspec knows about an app lives on the engine as labels on
the app's containers, so this is the vocabulary every other file of the
package (and the watcher process) reads and writes.  It imports nothing
else from the package.
"""

from __future__ import annotations

from typing import Dict

from torchspec.specs import AppState

LABEL_APP_ID = "torchspec.app-id"
LABEL_APP_NAME = "torchspec.app-name"
LABEL_ROLE_NAME = "torchspec.role-name"
LABEL_REPLICA_ID = "torchspec.replica-id"
LABEL_NUM_REPLICAS = "torchspec.num-replicas"
LABEL_ATTEMPT = "torchspec.attempt"
LABEL_ROLE = "torchspec.role"
LABEL_KEEP = "torchspec.keep"
LABEL_NETWORK = "torchspec.network"
LABEL_SESSION = "torchspec.session"
LABEL_VERSION = "torchspec.version"
#: The app's labels (its AppDef.metadata) as JSON, on every container; absent when it has none.
LABEL_METADATA = "torchspec.metadata"
#: On networks and workspace images torchspec created.
LABEL_WORKSPACE_BASE = "torchspec.workspace-base"

#: ``cancel`` renames the containers it stops, so anyone can tell a cancelled replica from a failed one.
CANCELLED_SUFFIX = ".cancelled"
#: A replica replaced by an APPLICATION or ROLE retry keeps its container as ``NAME.attemptN``.
ATTEMPT_SUFFIX = ".attempt"
#: The watcher renames a container that something other than torchspec stopped ``NAME`` + one of these,
#: so the replica reads FAILED and says who stopped it, even where it exited 0 on the SIGTERM.
ENGINE_STOPPED_SUFFIX = ".engine-stopped"
KILLED_SUFFIX = ".killed"
#: suffix -> who stopped the container, as the replica's message says it
OUTSIDE_STOPS: Dict[str, str] = {
    ENGINE_STOPPED_SUFFIX: "by the Docker engine as it shut down (the engine restarted since)",
    KILLED_SUFFIX: "from outside torchspec (docker stop or docker kill)",
}

#: Networks that exist on every engine and are chosen by name in ``network_mode``.
BUILTIN_NETWORKS = ("host", "none", "bridge")
#: Where a replica finds rank 0 when there are no per-container hostnames (host or no network).
LOCALHOST = "localhost"

#: Role metadata key for the folder the replicas run in (default: the image's WORKDIR).
META_WORKDIR = "docker.working_dir"
#: Resource capability naming the GPUs to use instead of a count, e.g. ``"0,2"``.
CAP_GPU_DEVICE_IDS = "docker.gpu_device_ids"
#: Resource devices Docker can provide: name -> host device path pattern, numbered from 0.
KNOWN_DEVICES = {"vpc.amazonaws.com/efa": "/dev/infiniband/uverbs{}"}

DEFAULT_STOP_TIMEOUT_S = 10
#: How long ``logs -f`` waits for the watcher to replace a failed replica before it stops following.
RETRY_WAIT_S = 120
PULL_POLICIES = ("missing", "always", "never")
#: The engine's socket when ``DOCKER_HOST`` is unset.
DEFAULT_ENGINE = "unix:///var/run/docker.sock"

#: Docker states of a container that runs or may still run.
LIVE_STATUSES = ("running", "restarting", "paused", "created")

#: Docker's container states that say the same whoever stopped the container ("exited" depends on it).
DOCKER_STATES: Dict[str, AppState] = {
    "created": AppState.PENDING,
    "restarting": AppState.PENDING,
    "running": AppState.RUNNING,
    "paused": AppState.RUNNING,
    "removing": AppState.CANCELLED,
    "dead": AppState.FAILED,
}
