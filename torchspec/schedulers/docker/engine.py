"""Small steps of talking to a Docker engine, shared by the scheduler, the log reader, workspace builds and the watcher.

Reading an app back (:func:`read_app`), stopping a container with its own
grace period, pulling an image as the pull policy says, and turning the
SDK's errors into the engine's own words.  The ``docker`` SDK is imported
only inside the functions that use it.
"""

from __future__ import annotations

import logging
import re
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple

from torchspec.errors import BackendError, UnreachableError
from torchspec.schedulers.docker.labels import DEFAULT_STOP_TIMEOUT_S, LABEL_APP_ID
from torchspec.schedulers.docker.views import AppView, ContainerView, view_of

if TYPE_CHECKING:
    import docker

logger: logging.Logger = logging.getLogger(__name__)


def docker_errors() -> Any:
    """The SDK's ``docker.errors`` module, imported on first use so that importing torchspec costs nothing."""
    import docker.errors

    return docker.errors


def reason(e: BaseException) -> str:
    """The engine's own explanation of an error, without the SDK's HTTP noise; an engine that did not answer
    in words (``its socket does not exist``), not Python's (``FileNotFoundError(2, ...)``)."""
    explanation = getattr(e, "explanation", None)
    if explanation:
        return str(explanation.decode() if isinstance(explanation, bytes) else explanation)
    text = str(e)
    if is_unreachable(e):
        said = next((said for words, said in _NO_ANSWER if words in text), None)
        if said is not None:
            return said
    match = re.search(r"\((.*)\)\)?$", text)
    return match.group(1) if "Connection" in text and match else text


#: What to do when the engine does not answer; an engine that restarts keeps every app's containers and labels.
UNREACHABLE_HINT = ("start it (e.g. `sudo systemctl start docker`, or `sudo dockerd &`), or point DOCKER_HOST at a"
                    " running engine; an engine that is restarting keeps the apps: try again once it answers")

#: Words of an error that say the engine did not answer at all -> what to tell the user.
_NO_ANSWER = (
    ("No such file or directory", "its socket does not exist (the engine is not running)"),
    ("Connection refused", "connection refused (the engine is not running, or listens elsewhere)"),
    ("timed out", "the engine did not answer in time"),
    ("Connection aborted", "the engine closed the connection (it stopped or restarted)"),
    ("Connection reset", "the engine closed the connection (it stopped or restarted)"),
)


def is_unreachable(e: BaseException) -> bool:
    """Whether ``e`` means the engine did not answer at all (no socket, connection refused or cut, a timeout)
    rather than refused: the SDK raises ``requests``' errors for the one, ``APIError`` for the other."""
    import requests.exceptions

    if isinstance(e, docker_errors().APIError):
        return False
    if isinstance(e, (requests.exceptions.ConnectionError, requests.exceptions.Timeout,
                      requests.exceptions.ChunkedEncodingError)):
        return True
    # docker.from_env() asks the engine for its API version and wraps the failure in a DockerException
    return isinstance(e, docker_errors().DockerException) and "server API version" in str(e)


def unreachable(e: BaseException, where: str) -> UnreachableError:
    """The :class:`UnreachableError` for ``e`` (see :func:`is_unreachable`), naming the engine at ``where``."""
    return UnreachableError(f"cannot reach the Docker engine at {where}: {reason(e)}", UNREACHABLE_HINT)


def engine_closed() -> bool:
    """Whether the engine refuses new connections while answering on those already open: it is shutting down
    (it closes its API first, then stops every container, telling the streams open what it does)."""
    import docker

    try:
        fresh = docker.from_env(timeout=5)  # asks for the API version: a first request
    except Exception as e:  # noqa: BLE001 - the SDK raises several unrelated types for "no engine"
        return is_unreachable(e)
    try:
        fresh.ping()
        return False
    except Exception as e:  # noqa: BLE001
        return is_unreachable(e)
    finally:
        fresh.close()


def split_image(image: str) -> Tuple[str, Optional[str]]:
    """``repo:tag`` -> (repo, tag); a ``:`` inside a registry host (``host:5000/repo``) is not a tag."""
    if "@" in image:
        return image, None
    name, sep, tag = image.rpartition(":")
    if sep and "/" not in tag:
        return name, tag
    return image, "latest"


def stop_container(client: "docker.DockerClient", container_id: str) -> None:
    """Stop with the container's own grace period (set at creation); gone already is fine."""
    errors = docker_errors()
    try:
        timeout = client.api.inspect_container(container_id)["Config"].get("StopTimeout") or DEFAULT_STOP_TIMEOUT_S
        client.api.stop(container_id, timeout=int(timeout))
    except errors.NotFound:
        pass
    except errors.APIError as e:
        logger.warning("cannot stop container %s: %s", container_id[:12], reason(e))


def in_parallel(fn: Callable[[Any], Any], items: List[Any]) -> None:
    """Run ``fn`` over ``items`` on threads (the engine works on several requests at once),
    so stopping 16 containers takes one grace period, not 16; the first exception is raised."""
    if len(items) <= 1:
        for item in items:
            fn(item)
        return
    with ThreadPoolExecutor(max_workers=min(8, len(items))) as pool:
        list(pool.map(fn, items))


def read_app(client: "docker.DockerClient", app_id: str) -> AppView:
    """Every container of ``app_id``, inspected; an empty view when the engine has none."""
    api = client.api
    summaries = api.containers(all=True, filters={"label": f"{LABEL_APP_ID}={app_id}"})
    found: Dict[str, ContainerView] = {}

    def inspect(container_id: str) -> None:
        try:
            found[container_id] = view_of(api.inspect_container(container_id))
        except docker_errors().NotFound:
            pass  # removed between the list and the inspect

    ids = [summary["Id"] for summary in summaries]
    in_parallel(inspect, ids)
    return AppView(app_id=app_id, containers=[found[i] for i in ids if i in found])


def ensure_image(client: "docker.DockerClient", image: str, pull: str, progress: Callable[[str], None]) -> None:
    """Pull ``image`` if the pull policy asks for it; under ``missing`` a local image is never pulled."""
    errors = docker_errors()
    present = True
    try:
        client.api.inspect_image(image)
    except errors.ImageNotFound:
        present = False
    if present and pull != "always":
        return
    if pull == "never":
        raise BackendError(f"image {image!r} is not on the engine and the pull policy is never",
                           "build or load it (docker build/load/import), or use -c pull=missing")
    progress(f"pulling {image}")
    try:
        repository, tag = split_image(image)
        client.api.pull(repository, tag=tag)
    except errors.APIError as e:
        if present:
            logger.warning("cannot pull %s, using the local copy: %s", image, reason(e))
            return
        raise BackendError(f"cannot pull image {image!r}: {reason(e)}",
                           "check its name and registry access, or build it locally") from None


def wait_for_event(client: "docker.DockerClient", filters: Dict[str, Any], since: float, timeout: float) -> bool:
    """Block until the engine reports an event matching ``filters`` at or after ``since`` (epoch seconds),
    or ``timeout`` seconds pass; True when an event came.

    The engine's event stream is asked for ``since`` (events between then and
    now are replayed, so none is lost between a status read and this call)
    ``until`` now + ``timeout`` (the engine ends the stream then).  Where the
    stream cannot be had, or ends early (an engine whose clock is ahead), the
    rest of ``timeout`` is slept, as a plain poll would.

    The SDK reads the stream with no timeout at all; a hung engine would hold
    ``wait`` for ever.  So it is asked here with a read deadline: ``timeout``,
    when the engine should end it, plus the client's request timeout.
    """
    deadline = time.monotonic() + max(0.0, timeout)
    until = time.time() + max(0.0, timeout)
    api = client.api
    try:
        from docker.utils import convert_filters

        limit = api.timeout if isinstance(api.timeout, (int, float)) else None
        response = api._get(api._url("/events"), stream=True, timeout=None if limit is None else (
            limit, max(0.0, timeout) + limit), params={
                "since": f"{since:.9f}", "until": f"{until:.9f}", "filters": convert_filters(filters)})
        api._raise_for_status(response)
        try:
            for _ in api._stream_helper(response, decode=True):
                return True
        finally:
            response.close()
    except Exception as e:  # noqa: BLE001 - no events: fall back to sleeping, as the default wait does
        logger.debug("no event stream from the engine: %s", e)
    time.sleep(max(0.0, deadline - time.monotonic()))
    return False

