"""Reading a replica's log from the engine, across every container it ran in (``torchspec logs``).

A replica may have run in several containers: Docker restarts the same
container (REPLICA retries), the watcher replaces it with a new one
(APPLICATION and ROLE retries).  The engine timestamps each line, which is
what ``--since``/``--until`` select on and how a followed replica resumes
after a restart without repeating lines.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Dict, Iterable, Iterator, Optional, Pattern, Tuple

from torchspec.schedulers.api import Stream
from torchspec.schedulers.docker.engine import docker_errors, read_app
from torchspec.schedulers.docker.labels import RETRY_WAIT_S
from torchspec.schedulers.logfile import stamped_lines
from torchspec.specs import AppState

if TYPE_CHECKING:
    import docker

logger: logging.Logger = logging.getLogger(__name__)


def replica_lines(
    client: "docker.DockerClient",
    app_id: str,
    role_name: str,
    k: int,
    stream: Stream,
    pattern: Optional[Pattern[str]],
    since: Optional[datetime],
    until: Optional[datetime],
    should_tail: bool,
) -> Iterator[str]:
    """The lines of replica ``role_name/k`` in [``since``, ``until``) that ``pattern`` matches, oldest container first.

    Each container after the first is introduced by a
    ``--- torchspec: restart N of replica ROLE/K ---`` line; with
    ``should_tail`` the latest container is followed, and the next one waited
    for, until the replica can write no more.
    """
    # container id -> time of the last line shown from it (None: nothing shown yet)
    shown: Dict[str, Optional[datetime]] = {}
    finished: set[str] = set()
    while True:
        attempts = read_app(client, app_id).replicas_of(role_name, k)
        for c in attempts:
            if c.id in finished:
                continue
            if c.id not in shown and c.attempt > 0:
                marker = f"--- torchspec: restart {c.attempt} of replica {role_name}/{k} ---\n"
                if pattern is None or pattern.search(marker):
                    yield marker
            shown.setdefault(c.id, None)
            follow = should_tail and c is attempts[-1]
            for when, text in container_lines(client, c.id, stream, since, until, follow, after=shown[c.id]):
                if until is not None and when is not None and when >= until:
                    return
                shown[c.id] = when or shown[c.id]
                if pattern is None or pattern.search(text):
                    yield text
            if c is not attempts[-1]:
                finished.add(c.id)
        if not should_tail or not attempts:
            return
        if until is not None and datetime.now(timezone.utc) >= until:
            return
        if not may_write_more(client, app_id, role_name, k, attempts[-1].id):
            return


def may_write_more(client: "docker.DockerClient", app_id: str, role_name: str, k: int, last_id: str) -> bool:
    """Wait until replica ``role_name/k`` runs again (True) or can never run again (False).

    It runs again when Docker restarts its container (REPLICA) or the
    watcher replaces it (APPLICATION, ROLE); a watcher that has not done
    so within ``RETRY_WAIT_S`` is taken to be gone.
    """
    deadline = time.monotonic() + RETRY_WAIT_S
    while time.monotonic() < deadline:
        view = read_app(client, app_id)
        attempts = view.replicas_of(role_name, k)
        if not attempts:
            return False
        latest = attempts[-1]
        if latest.id != last_id or latest.status in ("running", "paused"):
            return True
        if latest.cancelled or view.state in (AppState.FAILED, AppState.CANCELLED, AppState.SUCCEEDED):
            return False
        if latest.status not in ("restarting", "created") and not view.will_replace(latest):
            return False
        time.sleep(0.2)
    logger.warning("%s/%d of %s: no retry came within %ds; stopped following", role_name, k, app_id, RETRY_WAIT_S)
    return False


def container_lines(
    client: "docker.DockerClient",
    container_id: str,
    stream: Stream,
    since: Optional[datetime],
    until: Optional[datetime],
    follow: bool,
    after: Optional[datetime] = None,
) -> Iterator[Tuple[Optional[datetime], str]]:
    """``(time, line)`` of one container's log, read with the engine's timestamps, until it ends."""
    errors = docker_errors()
    params: Dict[str, Any] = dict(
        stdout=stream in (Stream.STDOUT, Stream.COMBINED),
        stderr=stream in (Stream.STDERR, Stream.COMBINED),
        timestamps=True,
    )
    lower = max(filter(None, [since, after]), default=None)
    if lower is not None:
        params["since"] = int(lower.timestamp())
    if until is not None and not follow:
        params["until"] = int(until.timestamp()) + 1
    try:
        if follow:
            chunks: Iterable[bytes] = client.api.logs(container_id, stream=True, follow=True, **params)
        else:
            chunks = [client.api.logs(container_id, stream=False, follow=False, **params)]
        for when, text in stamped_lines(chunks):
            if when is not None and (since is not None and when < since or after is not None and when <= after):
                continue
            yield when, text
    except errors.NotFound:
        return
