"""The watcher of one app on the ``docker`` scheduler: ``python -m torchspec.schedulers.docker.watcher APP_ID``.

Docker restarts a failed container by itself (REPLICA retries), but it
cannot restart the *other* containers of an app, nor stop them when one
replica has failed for good.  ``DockerScheduler.schedule`` starts this
process (:func:`start_watcher`), detached, to do these, and one more:

- a replica failed and its role's policy is APPLICATION (or ROLE) with
  retries left: every container of the app (or of the role) is stopped,
  kept renamed ``NAME.attemptN`` for its logs, and recreated from its own
  ``docker inspect`` with ``torchspec.attempt`` one higher;
- a replica failed for good: the app's other containers are stopped, so a
  failed app never leaves replicas running (as on the local scheduler);
- a role that waits for others (``depends_on``), whose containers
  ``schedule`` only created, is started once those roles finished (every
  replica exited 0) or run; one that waits for a role that failed is never
  started, and the app's message says so.

The one more is for honest states: a container that something other than
torchspec stopped (the engine shutting down, ``docker stop``) is renamed
``NAME.engine-stopped`` or ``NAME.killed`` once it has ended (see
:class:`Watch`), so its replica reads FAILED, saying who, rather than
SUCCEEDED because it exited 0 on the SIGTERM.

An engine that stops answering (restarted, upgraded) is waited for, up to
``OUTAGE_WAIT_S``; then the watch goes on.  Everything else it decides from
the engine, so it can die and be restarted without harm to retries (they
simply wait for it); only a stop it did not see goes unmarked, and such a
replica reads as its exit code says.  It exits once the app is finished,
cancelled or removed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from typing import TYPE_CHECKING, Any, Dict, List, Set

from torchspec.schedulers.detached import start_detached
from torchspec.schedulers.docker.engine import (
    docker_errors,
    engine_closed,
    in_parallel,
    is_unreachable,
    read_app,
    stop_container,
)
from torchspec.schedulers.docker.labels import (
    ATTEMPT_SUFFIX,
    BUILTIN_NETWORKS,
    CANCELLED_SUFFIX,
    ENGINE_STOPPED_SUFFIX,
    KILLED_SUFFIX,
    LABEL_APP_ID,
    LABEL_ATTEMPT,
    LABEL_NETWORK,
    LIVE_STATUSES,
    OUTSIDE_STOPS,
)
from torchspec.schedulers.docker.views import ContainerView, cancelled_name, replaced_name, view_of
from torchspec.schedulers.order import startable
from torchspec.schedulers.replicas import ENV_ATTEMPT
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


#: How long the watcher waits for an engine that stopped answering (restarted, upgraded) before it gives up.
OUTAGE_WAIT_S = 3600.0
#: How often it asks meanwhile: what the engine stopped is marked about this long after the engine answers again.
OUTAGE_POLL_S = 0.1
#: The signals of a kill event that stop a container: SIGTERM, then SIGKILL (docker stop, the engine's
#: shutdown), or docker kill's SIGKILL; others (docker kill -s HUP) leave it running.
STOP_SIGNALS = ("15", "9")


class Watch:
    """One app, followed through the engine's events until it is done, across restarts of the engine.

    Besides the engine's own record it knows one thing: who stopped a
    container.  A kill event that is neither torchspec's cancel (which
    renames first) nor this watcher's own stop means the engine shut down
    or someone ran ``docker stop``/``kill``; once the container has ended it
    is renamed (``labels.OUTSIDE_STOPS``), so its replica reads FAILED even
    if it exited 0 on the SIGTERM.  The engine shuts down without answering
    new requests, so what it stopped is marked when it answers again.
    """

    def __init__(self, client: "docker.DockerClient", app_id: str) -> None:
        self.client = client
        self.app_id = app_id
        #: containers this watcher stops itself: their kill events are its own
        self.ours: Set[str] = set()
        #: container id -> the suffix it gets: stopped by someone else, not renamed yet
        self.stopped: Dict[str, str] = {}
        #: containers live at the last look and not seen to end since: if the engine goes away, it stops them
        self.live: Set[str] = set()

    def run(self) -> None:
        """Follow the app until it is done; an engine that stops answering is waited for, then followed again."""
        while True:
            try:
                if self.follow():
                    return
            except Exception as e:  # noqa: BLE001 - only the SDK's "no answer" errors are waited out
                if not is_unreachable(e):
                    raise
            if self.await_engine():  # it went away: whatever was live then, it stopped
                for container_id in self.live:
                    self.stopped.setdefault(container_id, ENGINE_STOPPED_SUFFIX)
                self.live = set()
            else:  # the stream ended, yet the engine answers: follow again, but never in a busy loop
                time.sleep(1.0)

    def follow(self) -> bool:
        """One subscription to the app's events: True once the app is done, False when the stream ends.

        The engine replays the events it still holds (``since=0``; only this app's pass the filter), so a
        ``docker stop`` that came before the watcher had started is seen too.
        """
        events = self.client.events(since=0, filters={"label": [f"{LABEL_APP_ID}={self.app_id}"],
                                                      "type": ["container"], "event": ["kill", "die", "destroy", "start"]},
                                    decode=True)
        try:
            for container_id in list(self.stopped):
                self.mark(container_id)
            if self.step():  # the app may have ended before we subscribed
                return True
            for event in events:
                if self.on_event(event):
                    return True
            return False
        finally:
            with contextlib.suppress(Exception):  # a stream the engine cut may not close cleanly
                events.close()

    def on_event(self, event: Dict[str, Any]) -> bool:
        """Act on one event; True when there is nothing left to watch."""
        container_id = str(event.get("id") or "")
        attrs = (event.get("Actor") or {}).get("Attributes") or {}
        if event.get("Action") == "kill":
            name = str(attrs.get("name") or "")
            if (container_id not in self.ours and str(attrs.get("signal")) in STOP_SIGNALS
                    and not cancelled_name(name) and not replaced_name(name)):
                self.stopped.setdefault(container_id, ENGINE_STOPPED_SUFFIX if engine_closed() else KILLED_SUFFIX)
            return False
        self.live.discard(container_id)
        if container_id in self.stopped:
            self.mark(container_id)
        return self.step()

    def mark(self, container_id: str) -> None:
        """Rename a container someone else stopped, if it ended (Docker may have restarted it: REPLICA retries)."""
        suffix = self.stopped[container_id]
        try:
            c = view_of(self.client.api.inspect_container(container_id))
        except docker_errors().NotFound:
            c = None
        if c is not None and c.status == "exited" and not (c.cancelled or c.replaced or c.stopped_outside):
            self.client.api.rename(container_id, c.name + suffix)
            logger.info("%s was stopped %s", c.name, OUTSIDE_STOPS[suffix])
        del self.stopped[container_id]

    def await_engine(self) -> bool:
        """Wait for the engine to answer, up to ``OUTAGE_WAIT_S``; True when it did not at first (it went away)."""
        deadline = time.monotonic() + OUTAGE_WAIT_S
        went_away = False
        while True:
            try:
                self.client.ping()
                if went_away:
                    logger.info("the engine answers again")
                return went_away
            except Exception as e:  # noqa: BLE001 - as in run
                if not is_unreachable(e):
                    raise
            if not went_away:
                logger.warning("the engine does not answer; waiting up to %.0fs for it", OUTAGE_WAIT_S)
                went_away = True
            if time.monotonic() > deadline:
                raise TimeoutError(f"the engine did not answer for {OUTAGE_WAIT_S:.0f}s")
            time.sleep(OUTAGE_POLL_S)

    def step(self) -> bool:
        """Act once on the app as the engine shows it now; True when there is nothing left to watch."""
        current = read_app(self.client, self.app_id).current
        self.live = {c.id for c in current if c.status in LIVE_STATUSES}
        if not current or any(c.cancelled for c in current):
            return True
        for_good = [c for c in current if c.state == AppState.FAILED and not c.retry_pending]
        if for_good:
            others = [c for c in current if c.status in LIVE_STATUSES]
            if others:
                logger.info("%s failed for good; stopping %d other container(s)", for_good[0].describe_failure(),
                            len(others))
            self.ours.update(c.id for c in others)
            in_parallel(lambda c: stop_container(self.client, c.id), others)
            return True
        pending = [c for c in current if c.retry_pending]
        if pending:
            failed = pending[0]
            group = current if failed.retry_policy == RetryPolicy.APPLICATION.value else [
                c for c in current if c.role == failed.role]
            logger.info("%s; %s retry %d of %d: restarting %d container(s)", failed.describe_failure(),
                        failed.retry_policy, failed.attempt + 1, failed.max_retries, len(group))
            self.ours.update(c.id for c in group)
            restart(self.client, group)
            return False
        self.start_waiting(current)
        return all(c.state == AppState.SUCCEEDED for c in current)

    def start_waiting(self, current: List[ContainerView]) -> None:
        """Start the containers of each waiting role whose dependencies are met now (schedulers/order.py)."""
        waiting = {c.role: c.depends_on for c in current if c.waiting}
        states: Dict[str, List[str]] = {}
        for c in current:
            states.setdefault(c.role, []).append(c.state.name)
        ready = startable(list(waiting), waiting, states)
        if ready:
            logger.info("starting %s: the roles they wait for are done or running", ", ".join(ready))
            in_parallel(self.client.api.start, [c.id for c in current if c.waiting and c.role in ready])


def restart(client: "docker.DockerClient", group: List[ContainerView]) -> None:
    """Replace each container of ``group`` by a new one, one attempt later; the old ones are kept, renamed.

    A cancel may come while this runs: it renames containers ``NAME.cancelled``.
    Each old container is looked at again just before it is replaced, and
    the restart ends there if it was cancelled (cancel removes what exists).
    """
    in_parallel(lambda c: stop_container(client, c.id), [c for c in group if c.status in LIVE_STATUSES])
    created: List[str] = []
    renamed: List[str] = []  # renamed here, maybe after a cancel's sweep had looked: removed with the new ones
    for c in group:
        attrs = client.api.inspect_container(c.id)
        if str(attrs.get("Name", "")).endswith(CANCELLED_SUFFIX):
            logger.info("%s was cancelled during the restart; stopping", c.name)
            _remove(client, created + renamed)
            return
        client.api.rename(c.id, f"{c.base_name}{ATTEMPT_SUFFIX}{c.attempt}")
        renamed.append(c.id)
        created.append(client.api.create_container_from_config(next_attempt(attrs, c.attempt + 1),
                                                               name=c.base_name)["Id"])
    # a cancel that came between our inspect and our rename lost its mark, or already removed the old
    # containers: look once more before starting anything
    view = read_app(client, group[0].labels.get(LABEL_APP_ID, ""))
    ids = {v.id for v in view.containers}
    if any(v.cancelled for v in view.containers) or any(c.id not in ids for c in group):
        logger.info("the app was cancelled during the restart; removing the new containers")
        _remove(client, created + renamed)
        return
    waits = {c.base_name for c in group if c.depends_on}  # started by Watch.start_waiting, in their order
    in_parallel(client.api.start, [cid for cid, c in zip(created, group) if c.base_name not in waits])


def _remove(client: "docker.DockerClient", container_ids: List[str]) -> None:
    for container_id in container_ids:
        try:
            client.api.remove_container(container_id, force=True)
        except Exception as e:  # noqa: BLE001 - best effort: cancel removes what is left
            if getattr(getattr(e, "response", None), "status_code", None) != 404:  # gone already: the cancel's
                logger.warning("cannot remove %s: %s", container_id[:12], e)


def next_attempt(attrs: Dict[str, Any], attempt: int) -> Dict[str, Any]:
    """The create request for a container like ``attrs`` (``docker inspect``), labelled with ``attempt``, and
    with ``TORCHSPEC_ATTEMPT`` saying it to the replica (a script that resumes from a checkpoint reads it)."""
    config = dict(attrs["Config"])
    config["Labels"] = dict(config.get("Labels") or {}, **{LABEL_ATTEMPT: str(attempt)})
    env = [line for line in config.get("Env") or [] if not line.startswith(f"{ENV_ATTEMPT}=")]
    config["Env"] = env + [f"{ENV_ATTEMPT}={attempt}"]
    host_config = dict(attrs["HostConfig"])
    config["HostConfig"] = host_config
    network = config["Labels"].get(LABEL_NETWORK, "")
    if host_config.get("NetworkMode") == "host":
        config.pop("Hostname", None)
        config.pop("Domainname", None)
    if network and network not in BUILTIN_NETWORKS:
        config["NetworkingConfig"] = {"EndpointsConfig": {network: {"Aliases": [config.get("Hostname")]}}}
    return config


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
        Watch(docker.from_env(), app_id).run()
    except Exception:  # noqa: BLE001 - a detached process: log why it stops, for the person reading the log
        logger.exception("the watcher of %s stops: retries of this app will not happen", app_id)
        return 1
    logger.info("done with %s", app_id)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
