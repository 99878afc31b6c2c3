"""Talking to a Ray cluster's dashboard: the Job Submission API and the State API, over HTTP.

Reading, stopping and deleting jobs and listing actors, nodes and placement
groups are plain REST requests (:meth:`RayCluster.rest`) to the routes Ray's
own SDK calls (``/api/jobs/...``, the Jobs REST API Ray documents, and
``/api/v0/...``, the State API's): importing Ray's SDK costs about two CPU
seconds, which every ``status``, ``wait``, ``cancel``, ``list`` and ``logs``
would pay, and CI jobs run many.  Submitting (which packs and uploads the
working directory) and following a log (a websocket) go through Ray's
``JobSubmissionClient``, as does everything where Ray's token authentication
is on (``RAY_AUTH_MODE=token``), whose headers the SDK knows how to make.

``ray`` is imported here, inside the functions, and nowhere else on the
client side: dry runs, lint and the CLI's help never pay for it.  Every
failure to reach the dashboard becomes a :class:`~torchspec.errors.BackendError`
(exit code 6) naming the address.  Ray's job client sends its requests with
no timeout at all: :func:`_timed_client` bounds each by the request timeout
(:mod:`torchspec.schedulers.request_timeout`), as :meth:`RayCluster.rest`
bounds its own, so a dashboard that accepts and never answers is a
:class:`~torchspec.errors.RequestTimeoutError`, not a hang.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import logging
import os
import threading
import urllib.error
import urllib.parse
import urllib.request
import warnings
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple

from torchspec.errors import BackendError, MissingExtraError
from torchspec.schedulers.request_timeout import DEFAULT_S, is_timeout, timed_out

API_SERVER_ENV = "RAY_API_SERVER_ADDRESS"
QUIET_LOGGERS = ("ray.dashboard.modules.dashboard_sdk", "ray._private.runtime_env.packaging",
                 "ray.dashboard.modules.job.sdk")
_HOW = ("start one (ray start --head --dashboard-host=127.0.0.1), or point torchspec at yours:"
        " -c dashboard_address=HOST:PORT, or RAY_ADDRESS=http://HOST:PORT")


_PIN_LOCK = threading.RLock()


@contextlib.contextmanager
def _pinned(url: str) -> Iterator[None]:
    """Ray's clients take ``RAY_API_SERVER_ADDRESS`` (else ``RAY_ADDRESS``) over the address they are given:
    pin it to ``url`` while one is made, so that the run option wins.  One thread at a time: ``logs -f``
    follows replicas in threads, and two unpinning at once raised KeyError (seen in CI)."""
    with _PIN_LOCK:
        before = os.environ.get(API_SERVER_ENV)
        os.environ[API_SERVER_ENV] = url
        try:
            yield
        finally:
            if before is None:
                os.environ.pop(API_SERVER_ENV, None)
            else:
                os.environ[API_SERVER_ENV] = before


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Ray's client logs each package it uploads at INFO on stderr; torchspec's output stays its own."""
    loggers = [logging.getLogger(name) for name in QUIET_LOGGERS]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def _ray_missing(e: ImportError) -> MissingExtraError:
    return MissingExtraError(f"the ray scheduler needs Ray's job submission client, which is not installed ({e})",
                             "ray", "or 'ray[default]'")


#: the SDK methods :meth:`RayCluster.call` sends as REST requests: (HTTP method, path, the answer's field the SDK
#: returns, or "" for the whole answer); ``{}`` in the path is the job's id
REST_CALLS: Dict[str, Tuple[str, str, str]] = {
    "get_job_info": ("GET", "/api/jobs/{}", ""),
    "get_job_status": ("GET", "/api/jobs/{}", "status"),
    "list_jobs": ("GET", "/api/jobs/", ""),
    "get_job_logs": ("GET", "/api/jobs/{}/logs", "logs"),
    "stop_job": ("POST", "/api/jobs/{}/stop", "stopped"),
    "delete_job": ("DELETE", "/api/jobs/{}", "deleted"),
}


class Reply(Dict[str, Any]):
    """A JSON object of the dashboard's, read by attribute as the SDK's ``JobDetails`` and state objects are;
    a field the answer lacks reads None, as the SDK's defaults do."""

    def __getattr__(self, name: str) -> Any:
        return self.get(name)


def _require_ray() -> None:
    """The REST path needs no Ray, but the ray scheduler does (submit is Ray's SDK): a command run without the
    ray extra says so up front, whatever it is, rather than work for some commands only.  Looked up, not
    imported."""
    try:
        found = importlib.util.find_spec("ray") is not None
    except (ImportError, ValueError) as e:
        raise _ray_missing(ImportError(str(e))) from None
    if not found:
        raise _ray_missing(ImportError("No module named 'ray'"))


def _sdk_only() -> bool:
    """Whether Ray's token authentication is on, whose headers only Ray's SDK makes."""
    return os.environ.get("RAY_AUTH_MODE", "").strip().lower() == "token"


_TIMED_CLIENT: Any = None


def _timed_client() -> Any:
    """``JobSubmissionClient`` whose every request (its version check as it is made included) is bounded by
    the timeout it is given; ``_do_request`` is where Ray's clients send each one, since Ray 1.9."""
    global _TIMED_CLIENT
    if _TIMED_CLIENT is None:
        from ray.job_submission import JobSubmissionClient

        class TimedJobSubmissionClient(JobSubmissionClient):  # type: ignore[misc, valid-type]
            def __init__(self, address: str, timeout: float) -> None:
                self._request_timeout = timeout
                super().__init__(address)

            def _do_request(self, method: str, endpoint: str, **kwargs: Any) -> Any:
                kwargs.setdefault("timeout", self._request_timeout)
                return super()._do_request(method, endpoint, **kwargs)

        _TIMED_CLIENT = TimedJobSubmissionClient
    return _TIMED_CLIENT


class RayCluster:
    """One dashboard: a JobSubmissionClient made on first use, and the State API calls torchspec needs."""

    def __init__(self, address: str, timeout: float = DEFAULT_S) -> None:
        self.address = address
        self.url = f"http://{address}"
        #: seconds each request may go unanswered
        self.timeout = timeout
        self._client: Any = None
        self._node_ips: Dict[str, str] = {}

    def unreachable(self, e: BaseException) -> BackendError:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        return BackendError(f"no Ray cluster answers at {self.url}: {first}", _HOW)

    def timed_out(self, what: str) -> BackendError:
        return timed_out("the Ray dashboard", self.url, self.timeout, what, "`ray status` on the head node")

    @property
    def jobs(self) -> Any:
        """The ``JobSubmissionClient``; MissingExtraError when Ray is not installed, BackendError when nothing
        answers at the address."""
        if self._client is None:
            try:
                client_class = _timed_client()
            except ImportError as e:
                raise _ray_missing(e) from None
            try:
                with _pinned(self.url):
                    self._client = client_class(self.url, self.timeout)
            except (ConnectionError, OSError, RuntimeError, ValueError) as e:
                raise (self.timed_out("connecting") if is_timeout(e) else self.unreachable(e)) from None
        return self._client

    def rest(self, method: str, path: str, params: Optional[Dict[str, Any]] = None) -> Any:
        """The JSON answer of one request to the dashboard, bounded by :attr:`timeout`.  Nothing answering is a
        BackendError, no answer in time a RequestTimeoutError; an HTTP error is the RuntimeError Ray's SDK
        raises for it (``Request failed with status code 404: ...``), so callers handle both alike."""
        _require_ray()
        query = f"?{urllib.parse.urlencode(params, doseq=True)}" if params else ""
        request = urllib.request.Request(self.url + path + query, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                body = answer.read()
        except urllib.error.HTTPError as e:
            text = e.read().decode("utf-8", "replace")
            raise RuntimeError(f"Request failed with status code {e.code}: {text}.") from None
        except OSError as e:  # URLError, a refused or reset connection, a timeout
            raise (self.timed_out(path) if is_timeout(e) else self.unreachable(e)) from None
        try:
            return json.loads(body, object_hook=Reply)
        except ValueError:
            raise BackendError(f"the Ray dashboard at {self.url} answered {path} with something other than JSON:"
                               f" {body[:200]!r}") from None

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """``JobSubmissionClient.method(...)`` (as a REST request where :data:`REST_CALLS` has it); a dashboard
        gone away is a BackendError."""
        if method in REST_CALLS and not _sdk_only():
            verb, path, field = REST_CALLS[method]
            answer = self.rest(verb, path.format(urllib.parse.quote(str(args[0]), safe="")) if args else path)
            return answer.get(field) if field else answer
        jobs = self.jobs
        try:
            with _quiet():
                return getattr(jobs, method)(*args, **kwargs)
        except (ConnectionError, OSError) as e:  # requests' errors are OSErrors
            if is_timeout(e):
                raise self.timed_out(method) from None
            if isinstance(e, ConnectionError) or type(e).__module__.startswith("requests"):
                raise self.unreachable(e) from None
            raise

    def job(self, submission_id: str) -> Optional[Any]:
        """The job's ``JobDetails``; None when the cluster does not know it."""
        try:
            return self.call("get_job_info", submission_id)
        except RuntimeError as e:
            if "404" in str(e) or "does not exist" in str(e):
                return None
            raise BackendError(f"cannot read job {submission_id} at {self.url}: {e}") from None

    def _state(self, what: str, filters: Iterable[Tuple[str, str, str]] = (), limit: int = 10000) -> List[Any]:
        """``ray.util.state.<what>`` (``list_actors``...), as the REST request it sends; partial answers are
        taken as they are (``raise_on_missing_output=False``)."""
        if _sdk_only():
            return self._state_sdk(what, filters=list(filters), limit=limit)
        found = list(filters)
        params = {"limit": limit, "timeout": max(1, round(self.timeout)), "detail": "false",
                  "filter_keys": [f[0] for f in found], "filter_predicates": [f[1] for f in found],
                  "filter_values": [f[2] for f in found]}
        answer = self.rest("GET", f"/api/v0/{what[len('list_'):]}", params)
        if answer.get("result") is False:
            raise BackendError(f"the Ray dashboard at {self.url} did not answer {what}: {answer.get('msg')}")
        return list(answer["data"]["result"]["result"])

    def _state_sdk(self, what: str, **kwargs: Any) -> List[Any]:
        self.jobs  # noqa: B018 - connecting first makes a missing cluster one clear error
        try:
            from ray.util import state
        except ImportError as e:
            raise _ray_missing(e) from None
        try:
            with _pinned(self.url):
                return list(getattr(state, what)(address=self.url, timeout=max(1, round(self.timeout)),
                                                 raise_on_missing_output=False, **kwargs))
        except Exception as e:  # the State API wraps HTTP failures in its own exception types
            if is_timeout(e):
                raise self.timed_out(what) from None
            if isinstance(e, ConnectionError):
                raise self.unreachable(e) from None
            raise BackendError(f"the Ray dashboard at {self.url} did not answer {what}: {e}") from None

    def nodes(self) -> List[Dict[str, Any]]:
        """Every node of the cluster as ``{"node_id", "node_ip", "state", "resources_total"}``."""
        nodes = [{"node_id": n.node_id, "node_ip": n.node_ip, "state": str(n.state),
                  "resources_total": dict(n.resources_total or {})} for n in self._state("list_nodes", limit=10000)]
        self._node_ips.update((n["node_id"], n["node_ip"]) for n in nodes)
        return nodes

    def node_ips(self, node_ids: Iterable[Optional[str]]) -> Dict[str, str]:
        """The address of each of ``node_ids`` the cluster knows.  A node id names one node for good, and its
        address does not change: the nodes are listed again only for an id not seen yet, so that ``describe``
        of a running app (polled by ``wait``) costs two round trips, not three."""
        wanted = {node_id for node_id in node_ids if node_id}
        if not wanted <= self._node_ips.keys():
            self.nodes()
        return {node_id: self._node_ips[node_id] for node_id in wanted if node_id in self._node_ips}

    def actors(self, namespace: str) -> List[Dict[str, Any]]:
        """Every actor (alive or dead) in ``namespace``, as ``{"name", "state", "node_id"}``."""
        found = self._state("list_actors", filters=[("ray_namespace", "=", namespace)], limit=10000)
        return [{"name": a.name, "state": str(a.state), "node_id": a.node_id} for a in found]

    def placement_groups(self) -> List[Dict[str, str]]:
        """Every placement group not removed, as ``{"id", "name", "state", "job_id"}`` (``job_id``: the Ray job
        that made it, hex)."""
        found = self._state("list_placement_groups", filters=[("state", "!=", "REMOVED")], limit=10000)
        return [{"id": g.placement_group_id, "name": g.name or "", "state": str(g.state),
                 "job_id": g.creator_job_id or ""} for g in found]

    def tail(self, submission_id: str) -> Iterator[str]:
        """The job's log as it grows, in chunks, until the job ends (``tail_job_logs`` without asyncio).

        Ray's stream can close when the job ends before it sent the log's last lines (seen under load: a
        replica's final line missing), so what the whole log holds beyond what was streamed follows it."""
        loop = asyncio.new_event_loop()
        stream = self.call("tail_job_logs", submission_id)
        streamed = 0
        try:
            while True:
                try:
                    with warnings.catch_warnings():  # Ray's client passes aiohttp an ssl=None it deprecated
                        warnings.filterwarnings("ignore", message="ssl=None is deprecated", category=DeprecationWarning)
                        chunk = loop.run_until_complete(stream.__anext__())
                except StopAsyncIteration:
                    break
                except ConnectionError as e:
                    raise self.unreachable(e) from None
                streamed += len(chunk)
                yield chunk
        finally:
            try:
                loop.run_until_complete(stream.aclose())
            except Exception:
                pass
            loop.close()
        rest = (self.call("get_job_logs", submission_id) or "")[streamed:]
        if rest:
            yield rest
