"""The watcher of one app on the ``docker`` scheduler: ``python -m torchspec.schedulers.docker.watcher APP_ID``.

Docker restarts a failed container by itself (REPLICA retries), but it
cannot restart the *other* containers of an app, nor stop them when one
replica has failed for good.  ``DockerScheduler.schedule`` starts this
process (:func:`start_watcher`), detached, to do both:

- a replica failed and its role's policy is APPLICATION (or ROLE) with
  retries left: every container of the app (or of the role) is stopped,
  kept renamed ``NAME.attemptN`` for its logs, and recreated from its own
  ``docker inspect`` with ``torchspec.attempt`` one higher;
- a replica failed for good: the app's other containers are stopped, so a
  failed app never leaves replicas running (as on the local scheduler).

It holds no state: everything it decides comes from the engine, so it can
die and be restarted without harm (retries simply wait for it).  It exits
once the app is finished, cancelled or removed.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import TYPE_CHECKING, Any, Dict, List

from torchspec.schedulers.detached import start_detached
from torchspec.schedulers.docker.engine import in_parallel, read_app, stop_container
from torchspec.schedulers.docker.labels import (
    ATTEMPT_SUFFIX,
    BUILTIN_NETWORKS,
    CANCELLED_SUFFIX,
    LABEL_APP_ID,
    LABEL_ATTEMPT,
    LABEL_NETWORK,
    LIVE_STATUSES,
)
from torchspec.schedulers.docker.views import ContainerView
from torchspec.specs import AppState, RetryPolicy

if TYPE_CHECKING:
    import docker

#: What ``python -m`` runs: this module (whose ``__name__`` is ``__main__`` there, hence the name spelt out).
WATCHER_MODULE = "torchspec.schedulers.docker.watcher"

logger: logging.Logger = logging.getLogger(WATCHER_MODULE)


def watcher_log(app_id: str) -> str:
    """Where the watcher of ``app_id`` writes what it does (under the state folder, as local apps)."""
    from torchspec.schedulers.state_dir import default_state_dir

    return os.path.join(default_state_dir(), "docker", f"{app_id}.watcher.log")


def start_watcher(app_id: str) -> None:
    """Start the detached process that does APPLICATION/ROLE retries and stops an app that failed for good."""
    log_path = watcher_log(app_id)
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    start_detached(WATCHER_MODULE, [app_id], log_path)


def step(client: "docker.DockerClient", app_id: str) -> bool:
    """Act once on the app as the engine shows it now; True when there is nothing left to watch."""
    current = read_app(client, app_id).current
    if not current or any(c.cancelled for c in current):
        return True
    for_good = [c for c in current if c.state == AppState.FAILED and not c.retry_pending]
    if for_good:
        others = [c for c in current if c.status in LIVE_STATUSES]
        if others:
            logger.info("%s failed for good; stopping %d other container(s)", for_good[0].describe_failure(),
                        len(others))
        in_parallel(lambda c: stop_container(client, c.id), others)
        return True
    pending = [c for c in current if c.retry_pending]
    if pending:
        failed = pending[0]
        group = current if failed.retry_policy == RetryPolicy.APPLICATION.value else [
            c for c in current if c.role == failed.role]
        logger.info("%s; %s retry %d of %d: restarting %d container(s)", failed.describe_failure(),
                    failed.retry_policy, failed.attempt + 1, failed.max_retries, len(group))
        restart(client, group)
        return False
    return all(c.state == AppState.SUCCEEDED for c in current)


def restart(client: "docker.DockerClient", group: List[ContainerView]) -> None:
    """Replace each container of ``group`` by a new one, one attempt later; the old ones are kept, renamed.

    A cancel may come while this runs: it renames containers ``NAME.cancelled``.
    Each old container is looked at again just before it is replaced, and
    the restart ends there if it was cancelled (cancel removes what exists).
    """
    in_parallel(lambda c: stop_container(client, c.id), [c for c in group if c.status in LIVE_STATUSES])
    created: List[str] = []
    for c in group:
        attrs = client.api.inspect_container(c.id)
        if str(attrs.get("Name", "")).endswith(CANCELLED_SUFFIX):
            logger.info("%s was cancelled during the restart; stopping", c.name)
            _remove(client, created)
            return
        client.api.rename(c.id, f"{c.name}{ATTEMPT_SUFFIX}{c.attempt}")
        created.append(client.api.create_container_from_config(next_attempt(attrs, c.attempt + 1), name=c.name)["Id"])
    # a cancel that came between our inspect and our rename lost its mark, or already removed the old
    # containers: look once more before starting anything
    view = read_app(client, group[0].labels.get(LABEL_APP_ID, ""))
    ids = {v.id for v in view.containers}
    if any(v.cancelled for v in view.containers) or any(c.id not in ids for c in group):
        logger.info("the app was cancelled during the restart; removing the new containers")
        _remove(client, created)
        return
    in_parallel(client.api.start, created)


def _remove(client: "docker.DockerClient", container_ids: List[str]) -> None:
    for container_id in container_ids:
        try:
            client.api.remove_container(container_id, force=True)
        except Exception as e:  # noqa: BLE001 - best effort: cancel removes what is left
            logger.warning("cannot remove %s: %s", container_id[:12], e)


def next_attempt(attrs: Dict[str, Any], attempt: int) -> Dict[str, Any]:
    """The create request for a container like ``attrs`` (``docker inspect``), labelled with ``attempt``."""
    config = dict(attrs["Config"])
    config["Labels"] = dict(config.get("Labels") or {}, **{LABEL_ATTEMPT: str(attempt)})
    host_config = dict(attrs["HostConfig"])
    config["HostConfig"] = host_config
    network = config["Labels"].get(LABEL_NETWORK, "")
    if host_config.get("NetworkMode") == "host":
        config.pop("Hostname", None)
        config.pop("Domainname", None)
    if network and network not in BUILTIN_NETWORKS:
        config["NetworkingConfig"] = {"EndpointsConfig": {network: {"Aliases": [config.get("Hostname")]}}}
    return config


def watch(client: "docker.DockerClient", app_id: str) -> None:
    """Follow the engine's events for the app and act on each container that ends, until done."""
    events = client.events(filters={"label": [f"{LABEL_APP_ID}={app_id}"], "type": ["container"],
                                    "event": ["die", "destroy"]}, decode=True)
    try:
        if step(client, app_id):  # the app may have ended before we subscribed
            return
        for _ in events:
            if step(client, app_id):
                return
    finally:
        events.close()


def main(argv: List[str]) -> int:
    """Watch the app named in ``argv``; the exit code says whether the watch ended normally."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    if len(argv) != 2:
        print(f"usage: python -m {WATCHER_MODULE} APP_ID", file=sys.stderr)
        return 2
    import docker

    app_id = argv[1]
    logger.info("watching %s", app_id)
    try:
        watch(docker.from_env(), app_id)
    except Exception:  # noqa: BLE001 - a detached process: log why it stops, for the person reading the log
        logger.exception("the watcher of %s stops: retries of this app will not happen", app_id)
        return 1
    logger.info("done with %s", app_id)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
