"""The Ray client's REST path (torchspec/schedulers/ray/client.py) against a stand-in dashboard on loopback:
what each SDK call becomes, how HTTP errors read, and that reading a job imports no Ray at all.  The real
cluster's tests (test_ray_cli.py, test_ray_cluster.py) run the same code against Ray's own dashboard."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, Iterator, List, Tuple
from urllib.parse import parse_qs, urlsplit

import pytest

from torchspec.errors import BackendError
from torchspec.schedulers.ray.client import RayCluster

JOB = {"status": "SUCCEEDED", "job_id": "02000000", "submission_id": "a-1", "message": "done",
       "metadata": {"torchspec.app": "x"}, "start_time": 1, "end_time": 2, "driver_exit_code": 0}


class Dashboard:
    """Canned answers by (method, path); every request recorded with its query."""

    def __init__(self) -> None:
        self.answers: Dict[Tuple[str, str], Tuple[int, bytes]] = {}
        self.seen: List[Tuple[str, str, Dict[str, List[str]]]] = []

    def answer(self, method: str, path: str, body: Any, status: int = 200) -> None:
        self.answers[(method, path)] = (status, body if isinstance(body, bytes) else json.dumps(body).encode())


@pytest.fixture
def dashboard() -> Iterator[Tuple[Dashboard, str]]:
    board = Dashboard()

    class Handler(BaseHTTPRequestHandler):
        def _any(self) -> None:
            url = urlsplit(self.path)
            board.seen.append((self.command, url.path, parse_qs(url.query)))
            status, body = board.answers.get((self.command, url.path), (404, b"Job does not exist"))
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_DELETE = _any

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield board, f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_each_call_is_the_request_the_sdk_sends(dashboard: Tuple[Dashboard, str]) -> None:
    board, address = dashboard
    board.answer("GET", "/api/jobs/a-1", JOB)
    board.answer("GET", "/api/jobs/", [JOB])
    board.answer("GET", "/api/jobs/a-1/logs", {"logs": "line\n"})
    board.answer("POST", "/api/jobs/a-1/stop", {"stopped": True})
    board.answer("DELETE", "/api/jobs/a-1", {"deleted": True})
    cluster = RayCluster(address)
    job = cluster.job("a-1")
    assert (job.status, job.submission_id, job.metadata, job.runtime_env) == ("SUCCEEDED", "a-1", JOB["metadata"], None)
    assert [j.job_id for j in cluster.call("list_jobs")] == ["02000000"]
    assert cluster.call("get_job_status", "a-1") == "SUCCEEDED"
    assert cluster.call("get_job_logs", "a-1") == "line\n"
    assert cluster.call("stop_job", "a-1") is True and cluster.call("delete_job", "a-1") is True
    assert cluster.job("nope") is None  # a 404, as Ray answers a job it does not know


def test_state_lists_send_the_state_apis_filters(dashboard: Tuple[Dashboard, str]) -> None:
    board, address = dashboard
    actor = {"name": "t/0#0", "state": "ALIVE", "node_id": "n1"}
    board.answer("GET", "/api/v0/actors", {"result": True, "msg": "", "data": {"result": {"result": [actor]}}})
    assert RayCluster(address, timeout=7).actors("torchspec-a-1") == [actor]
    (_, path, query), = board.seen
    assert query["filter_keys"] == ["ray_namespace"] and query["filter_predicates"] == ["="]
    assert query["filter_values"] == ["torchspec-a-1"] and query["timeout"] == ["7"] and query["limit"] == ["10000"]


def test_errors_read_as_the_sdks_do(dashboard: Tuple[Dashboard, str]) -> None:
    board, address = dashboard
    board.answer("DELETE", "/api/jobs/a-1", b"it is in a non-terminal state RUNNING", status=500)
    board.answer("GET", "/api/jobs/a-2", b"<html>proxy</html>")
    board.answer("GET", "/api/v0/nodes", {"result": False, "msg": "GCS unreachable", "data": {}})
    cluster = RayCluster(address)
    with pytest.raises(RuntimeError, match="status code 500: it is in a non-terminal state RUNNING"):
        cluster.call("delete_job", "a-1")
    with pytest.raises(BackendError, match="something other than JSON"):
        cluster.job("a-2")
    with pytest.raises(BackendError, match="did not answer list_nodes: GCS unreachable"):
        cluster.nodes()


def test_nothing_answering_is_a_backend_error() -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(BackendError, match=f"no Ray cluster answers at http://127.0.0.1:{port}"):
        RayCluster(f"127.0.0.1:{port}").job("a-1")


def test_reading_a_job_imports_no_ray(dashboard: Tuple[Dashboard, str]) -> None:
    """The point of the REST path: status, wait, cancel and list start in a fraction of Ray's import time."""
    board, address = dashboard
    board.answer("GET", "/api/jobs/a-1", JOB)
    script = ("import sys\nfrom torchspec.schedulers.ray.client import RayCluster\n"
              f"print(RayCluster({address!r}).job('a-1').status)\n"
              "print(sorted({m.split('.')[0] for m in sys.modules} & {'ray', 'requests', 'aiohttp'}))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.stdout.splitlines() == ["SUCCEEDED", "[]"], done.stderr


def test_token_authentication_goes_through_the_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ray's token headers are the SDK's to make: with RAY_AUTH_MODE=token no REST request is sent."""
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    cluster = RayCluster("127.0.0.1:1")
    calls: List[str] = []

    class Sdk:
        def get_job_info(self, submission_id: str) -> Dict[str, str]:
            calls.append(submission_id)
            return {"status": "RUNNING"}

    cluster._client = Sdk()
    assert cluster.call("get_job_info", "a-1") == {"status": "RUNNING"} and calls == ["a-1"]


def test_following_a_log_adds_what_the_stream_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ray's log stream may close when the job ends before its last lines went out (seen in CI: a replica's
    final line missing from ``logs -f``): what the whole log holds beyond the stream follows it."""
    monkeypatch.setenv("RAY_AUTH_MODE", "token")  # every call through the SDK stand-in below
    cluster = RayCluster("127.0.0.1:1")
    whole = "trainer/0 line 1\ntrainer/0 line 2\nps/0 last\n"

    class Sdk:
        async def _stream(self):
            yield whole[:10]
            yield whole[10:20]

        def tail_job_logs(self, submission_id: str):
            return self._stream()

        def get_job_logs(self, submission_id: str) -> str:
            return whole

    cluster._client = Sdk()
    assert "".join(cluster.tail("a-1")) == whole
    Sdk.get_job_logs = lambda self, submission_id: whole[:20]  # the stream had it all: nothing twice
    assert "".join(cluster.tail("a-1")) == whole[:20]


def test_pinning_the_address_is_safe_across_threads() -> None:
    """``logs -f`` follows every replica in a thread of its own; two unpinning at once raised KeyError (ci60)."""
    import os
    from concurrent.futures import ThreadPoolExecutor

    from torchspec.schedulers.ray.client import API_SERVER_ENV, _pinned

    def pin(k: int) -> None:
        for _ in range(300):
            with _pinned(f"http://127.0.0.1:{k}"):
                assert os.environ[API_SERVER_ENV] == f"http://127.0.0.1:{k}"

    before, interval = os.environ.get(API_SERVER_ENV), sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch often: the race shows in a few hundred pins
    try:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(pin, range(8)))
    finally:
        sys.setswitchinterval(interval)
    assert os.environ.get(API_SERVER_ENV) == before
