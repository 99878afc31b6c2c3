"""A real, small Ray cluster for the ray scheduler's tests: a head and a worker node on this machine.

``ray_cluster`` (tests/conftest.py) starts it once per test session and stops
it at the end: two ``ray start --block`` processes (head, then a worker node
joining it), each in its own process group, with 2 CPUs, 2 GB of ``memory``
and a 200 MB object store each, every port picked free so that two test runs
(or a user's own cluster) never meet.  SIGTERM ends a ``--block`` node with
all its processes; what survives is killed by process group.

The nodes run without the caller's PYTHONPATH, so that each job's driver
imports torchspec from the copy the job uploads (``py_modules``), as on a
real cluster.  Without ray installed the tests skip; with
``TORCHSPEC_REQUIRE_RAY=1`` (always in CI) they fail instead.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

import pytest

import skips

HOW = "pip install -e '.[ray]' (or run `bash scripts/test`, which does)"
NODE_CPUS = 2
NODE_MEMORY = 2_000_000_000
OBJECT_STORE = 200_000_000
START_TIMEOUT_S = 120
START_TRIES = 3
# Ray turns 127.0.0.1 into the machine's outward address (ray._private.services.resolve_ip_for_localhost), which
# a CI machine's network may not carry; another loopback address it keeps, so the nodes stay on loopback.
NODE_IP = "127.0.0.2"


def ray_or_skip() -> None:
    """Skip (fail under TORCHSPEC_REQUIRE_RAY=1) unless ray with its job submission client is installed."""
    problem = ""
    if importlib.util.find_spec("ray") is None:
        problem = "ray is not installed"
    elif shutil.which("ray", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")) is None:
        problem = "the ray command is not on PATH"
    else:
        try:
            import ray.job_submission  # noqa: F401
            import ray.dashboard  # noqa: F401  (ray[default])
        except ImportError as e:
            problem = f"ray's job submission client is missing ({e}): ray[default] is needed"
    if problem:
        skips.skip_or_fail("RAY", f"{problem}; {HOW}")


def free_ports(n: int) -> List[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


@dataclass
class RayTestCluster:
    """The running test cluster: its dashboard (``address``, host:port), GCS address and node processes."""

    root: Path
    head_args: List[str] = field(default_factory=list)
    address: str = ""
    gcs: str = ""
    procs: List[subprocess.Popen] = field(default_factory=list)
    logs: List[Path] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://{self.address}"

    def env(self) -> Dict[str, str]:
        """The nodes' environment: no proxy (gRPC honours ``http_proxy`` and would send loopback traffic to it),
        no caller's PYTHONPATH, no other cluster's address."""
        env = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONPATH", "RAY_ADDRESS", "RAY_API_SERVER_ADDRESS") and not k.lower().endswith("_proxy")}
        env["RAY_USAGE_STATS_ENABLED"] = "0"
        bindir = os.path.dirname(sys.executable)
        env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
        return env

    def _start(self, name: str, args: List[str]) -> None:
        log = self.root / f"{name}.log"
        ports = free_ports(6)
        args += [f"--dashboard-agent-listen-port={ports[0]}", f"--dashboard-agent-grpc-port={ports[1]}",
                 f"--metrics-export-port={ports[2]}", f"--runtime-env-agent-port={ports[3]}",
                 f"--node-manager-port={ports[4]}", f"--object-manager-port={ports[5]}"]
        ray = shutil.which("ray", path=os.path.dirname(sys.executable)) or "ray"
        cmd = [ray, "start", "--block", "--disable-usage-stats", "--node-ip-address=127.0.0.2",
               f"--num-cpus={NODE_CPUS}", f"--memory={NODE_MEMORY}", f"--object-store-memory={OBJECT_STORE}",
               f"--temp-dir={self.root / name}", *args]
        with open(log, "wb") as out:
            self.procs.append(subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                               env=self.env(), cwd=self.root, start_new_session=True))
        self.logs.append(log)

    def start(self) -> "RayTestCluster":
        gcs, dashboard, client = free_ports(3)
        self.gcs, self.address = f"127.0.0.1:{gcs}", f"127.0.0.1:{dashboard}"
        self.head_args = ["--head", f"--port={gcs}", f"--dashboard-port={dashboard}", "--dashboard-host=127.0.0.1",
                          f"--ray-client-server-port={client}"]
        self._join("head", self.head_args, 1)
        self._join("worker", [f"--address={self.gcs}"], 2)
        return self

    def add_node(self, name: str, resources: Dict[str, float]) -> subprocess.Popen:
        """Start one more worker node (``resources``: its custom resources) and wait until it joined; the
        caller stops it with :meth:`stop_node` (the session's end stops it too)."""
        import json

        return self._join(name, [f"--address={self.gcs}", f"--resources={json.dumps(resources)}"],
                          len(self.nodes()) + 1)

    def _join(self, name: str, args: List[str], n: int, first: bool = False) -> subprocess.Popen:
        """Start a node and wait until the cluster counts ``n`` nodes.  ``ray start`` waits only 30 s (a
        constant in ray/_private/node.py) for its raylet to register with the GCS, which a loaded machine
        can miss (seen in CI: "The current node timed out during startup"): a node whose ``ray start``
        gave up is cleared away and started again, up to :data:`START_TRIES` times."""
        problem = ""
        for attempt in range(START_TRIES):
            self._start(name if attempt == 0 else f"{name}-again{attempt}", list(args))
            if first:
                self.procs.insert(0, self.procs.pop())
            proc = self.procs[0] if first else self.procs[-1]
            problem = self._wait(n, [proc])
            if not problem:
                return proc
            gave_up = proc.poll() is not None
            self.stop_node(proc)  # what it started (a raylet, a GCS) is in its process group
            self.procs.remove(proc)
            if not gave_up:
                break  # it timed out here, where trying again would not help
        self._fail(n, problem)
        raise AssertionError("unreachable")  # pytest.fail raised

    def _wait(self, n: int, watch: List[subprocess.Popen]) -> str:
        """'' once the cluster counts ``n`` live nodes, else what went wrong: a node's ``ray start``
        exited, or :data:`START_TIMEOUT_S` passed."""
        deadline = time.monotonic() + START_TIMEOUT_S
        problem = f"not within {START_TIMEOUT_S} s"
        while time.monotonic() < deadline:
            if any(p.poll() is not None for p in watch):
                return "a ray start process exited"
            try:
                if len(self.nodes()) >= n:
                    return ""
            except Exception as e:  # the dashboard is not up yet
                problem = str(e).splitlines()[0] if str(e) else type(e).__name__
            time.sleep(1)
        return problem

    def _fail(self, n: int, problem: str) -> None:
        """Fail the test with what the nodes printed and what Ray's own processes logged: a start that failed
        in CI is read from this message alone."""
        logs = self.logs + sorted(self.root.glob("*/session_latest/logs/gcs_server.*"))
        logs += sorted(self.root.glob("*/session_latest/logs/raylet.*"))
        tails = "\n".join(f"--- {log}\n" + log.read_text(errors="replace")[-3000:] for log in logs)
        tails += f"\n--- load {os.getloadavg()}, proxies {sorted(k for k in os.environ if k.lower().endswith('_proxy'))}"
        self.stop()
        pytest.fail(f"the Ray test cluster did not come up with {n} node(s): {problem}\n{tails}")

    def stop_head(self) -> None:
        """Stop the head node (SIGTERM, as ``ray stop`` would), its address left free for :meth:`start_head`."""
        head = self.procs[0]
        head.send_signal(signal.SIGTERM)
        try:
            head.wait(timeout=40)
        except subprocess.TimeoutExpired:
            pass
        self.stop_node(head)
        self.procs.remove(head)

    def start_head(self) -> None:
        """Start a head again on the same addresses: a new cluster (Ray keeps no jobs without GCS fault
        tolerance), where the old worker node does not belong (it may give up on the cluster meanwhile)."""
        self._join(f"head{len(self.procs)}", self.head_args, 1, first=True)

    def stop_node(self, proc: subprocess.Popen) -> None:
        """Take a node away as a lost machine would go: SIGKILL to every process of it at once."""
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait(timeout=30)

    def nodes(self) -> List[dict]:
        from ray.util.state import list_nodes

        os.environ["RAY_API_SERVER_ADDRESS"] = self.url  # Ray prefers it to the address given
        try:
            return [n.__dict__ if hasattr(n, "__dict__") else n for n in list_nodes(address=self.url, timeout=10)
                    if str(n.state).endswith("ALIVE")]
        finally:
            os.environ.pop("RAY_API_SERVER_ADDRESS", None)

    def stop(self) -> None:
        """SIGTERM each node (worker first), then SIGKILL what is left of their process groups."""
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                pass
        for proc in self.procs:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            if proc.poll() is None:
                proc.wait(timeout=10)
        self.procs.clear()
        shutil.rmtree(self.root, ignore_errors=True)


def start_cluster() -> RayTestCluster:
    ray_or_skip()
    root = Path(tempfile.mkdtemp(prefix="tsray-", dir="/tmp"))  # unix socket paths under it must stay short
    return RayTestCluster(root).start()


def wait_state(sched, app_id: str, states, timeout: float = 120):
    """The scheduler's DescribeAppResponse once the app is in one of ``states`` (or after ``timeout``).  A
    dashboard that does not answer one poll (seen in CI: a busy machine's state API over 30 s) is asked again,
    as ``Runner.wait`` does (:data:`~torchspec.errors.OUTAGE_S`), until the deadline."""
    from torchspec.errors import UnreachableError

    deadline = time.monotonic() + timeout
    while True:
        try:
            desc = sched.describe(app_id)
        except UnreachableError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1.0)
            continue
        assert desc is not None, f"the cluster does not know {app_id}"
        if desc.state in states or time.monotonic() > deadline:
            return desc
        time.sleep(0.25)


#: The states of a placement group that holds, or waits for, the cluster's resources.
LIVE_GROUP_STATES = ("CREATED", "PENDING", "RESCHEDULING")


def live_groups(address: str, submission_id: str, job_id: str = "") -> List[str]:
    """``name STATE`` of each live placement group of an app: named for its submission id, or made by its
    driver's Ray job (``job_id``), as a group named otherwise would be; sorted."""
    from ray.util.state import list_placement_groups

    from torchspec.schedulers.ray.client import _pinned
    from torchspec.schedulers.ray.states import group_prefix

    with _pinned(f"http://{address}"):
        groups = list_placement_groups(address=f"http://{address}", limit=10000, raise_on_missing_output=False)
    return sorted(f"{g.name} {g.state}" for g in groups if str(g.state) in LIVE_GROUP_STATES and (
        (g.name or "").startswith(group_prefix(submission_id)) or (job_id and g.creator_job_id == job_id)))


#: How long an ended app's placement groups may take to go: its driver removes them as it ends.
GROUPS_GONE_S = 10.0
#: How long a job needs to start and do a little on a busy machine (CI runs 8 test workers on 2 cores beside
#: the Kubernetes, Slurm and Docker engines): a fresh driver process that imports ray and connects.
JOB_START_S = 120.0


def groups_left_after_end(sched, app_id: str, within: float = GROUPS_GONE_S) -> List[str]:
    """The ended app's groups still live ``within`` seconds of its end (at once when none is)."""
    desc = sched.describe(app_id)
    sid, job_id = desc.metadata["submission_id"], desc.metadata["ray_job_id"]
    deadline = time.monotonic() + within
    while True:
        left = live_groups(sched.dashboard_address, sid, job_id)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.25)


def jobs_said(address: str, submission_id: str) -> str:
    """Every Ray job of the app (its own and its cleanup jobs): status, message and log, for a failed test's
    message, so that a failure in CI says where the app or its cleanup was."""
    from ray.job_submission import JobSubmissionClient

    client = JobSubmissionClient(f"http://{address}")
    said = []
    for job in client.list_jobs():
        sid = job.submission_id or ""
        if sid == submission_id or sid.startswith(f"torchspec-cleanup-{submission_id}-"):
            log = client.get_job_logs(sid)
            said.append(f"--- {sid}: {job.status} {job.message or ''}\n{log[-3000:]}")
    return "\n".join(said) or f"no job of {submission_id}"
