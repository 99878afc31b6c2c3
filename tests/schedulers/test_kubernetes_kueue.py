"""Kueue for real: quotas, queueing, priorities and unknown queues, on the cluster of scripts/k8s-cluster.

Kueue v0.17.0 runs there as a process with its webhooks; each test makes a ClusterQueue of its own (two
CPUs of quota) and a LocalQueue in its namespace, and submits through the CLI with ``-c queue=``. The
node has two CPUs, so an app of two one-CPU replicas fills the quota and the node alike.
"""

from __future__ import annotations

import json
import pathlib
import textwrap
import time
import uuid
from datetime import datetime, timezone
from typing import Any, Dict, Iterator, Optional

import pytest

from test_kubernetes_cluster import Target, open_gate, status, torchspec, until_open, wait_state  # noqa: F401
from test_kubernetes_cluster import env, k8s_image, real  # noqa: F401 - fixtures

#: every test here runs on the real cluster (through the `real` fixture): run them with the cluster's (last)
pytestmark = pytest.mark.k8s_cluster


@pytest.fixture
def queue(real: Target) -> Iterator[str]:  # noqa: F811 - the fixture imported above
    """A LocalQueue ``team`` in the test's namespace, on a ClusterQueue of its own with 2 CPUs of quota.

    StrictFIFO: the head of the queue (by priority, then age) waits for room and nothing passes it. Under
    the default, BestEffortFIFO, a workload found inadmissible is set aside and retried later, and CI saw
    a low-priority app that had been set aside first admitted before a high one."""
    yield from local_queue(real)


@pytest.fixture
def preempting_queue(real: Target) -> Iterator[str]:  # noqa: F811 - the fixture imported above
    """As ``queue``, on a ClusterQueue where a workload of higher priority preempts one of lower priority."""
    yield from local_queue(real, "\n          preemption: {withinClusterQueue: LowerPriority}")  # spec's indent


def local_queue(real: Target, more: str = "") -> Iterator[str]:  # noqa: F811
    assert real.cluster is not None
    cq = f"cq-{uuid.uuid4().hex[:8]}"
    real.cluster.kubectl("apply", "-f", "-", input=textwrap.dedent(f"""\
        apiVersion: kueue.x-k8s.io/v1beta2
        kind: ResourceFlavor
        metadata: {{name: default-flavor}}
        ---
        apiVersion: kueue.x-k8s.io/v1beta2
        kind: ClusterQueue
        metadata: {{name: {cq}}}
        spec:
          namespaceSelector: {{}}
          queueingStrategy: StrictFIFO{more}
          resourceGroups:
          - coveredResources: [cpu, memory]
            flavors:
            - name: default-flavor
              resources:
              - {{name: cpu, nominalQuota: 2}}
              - {{name: memory, nominalQuota: 1Gi}}
        ---
        apiVersion: kueue.x-k8s.io/v1beta2
        kind: LocalQueue
        metadata: {{name: team, namespace: {real.ns}}}
        spec: {{clusterQueue: {cq}}}
        ---
        apiVersion: kueue.x-k8s.io/v1beta2
        kind: WorkloadPriorityClass
        metadata: {{name: high}}
        value: 1000
        ---
        apiVersion: kueue.x-k8s.io/v1beta2
        kind: WorkloadPriorityClass
        metadata: {{name: low}}
        value: 10
        """))
    yield "team"
    real.cluster.kubectl("delete", "clusterqueue", cq, "--wait=false", check=False)


def queued_spec(path: pathlib.Path, name: str, replicas: int, seconds: int = 0,
                gate: Optional[pathlib.Path] = None) -> pathlib.Path:
    """An app of ``replicas`` one-CPU replicas that sleep ``seconds``, or with ``gate`` run until the test opens
    it (test_kubernetes_cluster.until_open): held as long as the test needs, however loaded the machine."""
    wait = until_open(gate) if gate else f"sleep {seconds}"
    mounts = f"\n    mounts: [{json.dumps(f'type=bind,src={gate},dst={gate}')}]" if gate else ""
    path.write_text(textwrap.dedent(f"""\
        name: {name}
        roles:
          - name: trainer
            image: torchspec-test/busybox:k8s
            entrypoint: sh
            args: ["-c", {json.dumps("echo start; " + wait)}]
            num_replicas: {replicas}
            resource: {{cpu: 1, memMB: 64}}""") + mounts + "\n")
    return path


def gate_in(tmp_path: pathlib.Path) -> pathlib.Path:
    gate = tmp_path / "gate"
    gate.mkdir()
    return gate


def start_times(real: Target) -> Dict[str, float]:
    """When each app's Job started (Kueue lets a Job start by unsuspending it, which stamps its startTime;
    whole seconds), by app id."""
    assert real.cluster is not None
    out = real.cluster.kubectl(
        "get", "jobs.batch", "-n", real.ns, "-o",
        "jsonpath={range .items[*]}{.metadata.labels.torchspec\\.dev/app-id} {.status.startTime}{\"\\n\"}{end}"
    ).stdout
    found = {}
    for line in out.splitlines():
        if line.strip():
            app, stamp = line.split()
            found[app] = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()
    return found


def app_of(handle: str) -> str:
    return handle.rsplit(":", 1)[1]


def submit_to(real: Target, spec: pathlib.Path, queue: str, **more: str) -> str:  # noqa: F811
    cfg = ",".join(f"{k}={v}" for k, v in {"namespace": real.ns, "queue": queue, **more}.items())
    done = torchspec("submit", "-s", "kubernetes", "-c", cfg, str(spec))
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def held_for(handle: str, seconds: float) -> Dict[str, Any]:
    """The app's status, checked to stay PENDING for ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        st = status(handle)
        assert st["state"] == "PENDING", st
        if time.monotonic() > deadline:
            return st
        time.sleep(1)


def queued_in_kueue(handle: str, timeout: float = 60) -> None:
    """Wait until Kueue holds the app's Workload in its queue: the app is PENDING with Kueue's reason."""
    deadline = time.monotonic() + timeout
    while not held_for(handle, 0)["msg"]:
        assert time.monotonic() < deadline, f"Kueue gave {handle} no reason within {timeout:g} s"
        time.sleep(0.5)


def test_an_app_larger_than_the_quota_stays_pending_with_kueues_reason(real: Target, queue: str,  # noqa: F811
                                                                       tmp_path: pathlib.Path) -> None:
    handle = submit_to(real, queued_spec(tmp_path / "big.yaml", "big", replicas=3, seconds=5), queue)
    st = held_for(handle, 8)
    assert "couldn't assign flavors" in st["msg"] and "cpu" in st["msg"], st["msg"]
    assert torchspec("cancel", handle).returncode == 0


def test_two_apps_that_fit_one_at_a_time_run_one_after_the_other(real: Target, queue: str,  # noqa: F811
                                                                 tmp_path: pathlib.Path) -> None:
    gate = gate_in(tmp_path)
    first = submit_to(real, queued_spec(tmp_path / "a.yaml", "first", replicas=2, gate=gate), queue)
    wait_state(first, ("RUNNING",), timeout=60)
    second = submit_to(real, queued_spec(tmp_path / "b.yaml", "second", replicas=2, seconds=1), queue)
    pending = held_for(second, 3)  # while the first runs (until the gate opens)
    assert pending["msg"], pending  # Kueue's reason is shown
    assert status(first)["state"] == "RUNNING"
    opened = int(time.time())  # startTime's whole seconds: the second cannot start before this
    open_gate(gate)
    done = torchspec("wait", second, "--timeout", "180")
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert status(first)["state"] == "SUCCEEDED"
    assert start_times(real)[app_of(second)] >= opened  # the second ran only once the first had ended


def test_priority_classes_order_the_queue(real: Target, queue: str, tmp_path: pathlib.Path) -> None:  # noqa: F811
    gate = gate_in(tmp_path)
    blocker = submit_to(real, queued_spec(tmp_path / "blocker.yaml", "blocker", replicas=2, gate=gate), queue)
    wait_state(blocker, ("RUNNING",), timeout=60)
    low = submit_to(real, queued_spec(tmp_path / "low.yaml", "low", replicas=2, seconds=3), queue, priority="low")
    # the low one queued first: Kueue has its Workload (it gives a reason), created no later than this second;
    # the high one's is made in a later second, so the order is priority's, not age's
    queued_in_kueue(low)
    queued = int(time.time())
    while int(time.time()) <= queued:
        time.sleep(0.05)
    high = submit_to(real, queued_spec(tmp_path / "high.yaml", "high", replicas=2, seconds=3), queue,
                     priority="high")
    queued_in_kueue(high)  # both wait in the queue before the blocker ends
    open_gate(gate)
    for handle in (high, low):
        done = torchspec("wait", handle, "--timeout", "180")
        assert done.returncode == 0, (done.stdout, done.stderr)
    started = start_times(real)  # the high one went first
    assert started[app_of(high)] < started[app_of(low)], started


def test_a_queue_that_does_not_exist_shows_pending_with_kueues_reason(real: Target, queue: str,  # noqa: F811
                                                                     tmp_path: pathlib.Path) -> None:
    # Kueue takes such a job all the same: its Workload stays inadmissible, with the reason
    handle = submit_to(real, queued_spec(tmp_path / "lost.yaml", "lost", replicas=1, seconds=1), "no-such-queue")
    deadline = time.monotonic() + 60
    while "doesn't exist" not in (st := held_for(handle, 0))["msg"] and time.monotonic() < deadline:
        time.sleep(1)
    assert "LocalQueue no-such-queue doesn't exist" in st["msg"], st["msg"]
    described = torchspec("status", handle)
    assert "no-such-queue" in described.stdout + described.stderr
    listed = json.loads(torchspec("list", "-s", "kubernetes", "-c", f"namespace={real.ns}", "--json").stdout)
    assert [a for a in listed if a["app_handle"] == handle], listed


def test_a_preempted_app_waits_pending_never_failed_and_runs_again(real: Target, preempting_queue: str,  # noqa: F811
                                                                  tmp_path: pathlib.Path) -> None:
    """Kueue preempts the running low-priority app for a high-priority one (it suspends its Job): the low app
    reads PENDING with Kueue's reason while the high one runs, never FAILED, and runs again once it is done."""
    gate = gate_in(tmp_path)
    low = submit_to(real, queued_spec(tmp_path / "low.yaml", "low", replicas=2, gate=gate), preempting_queue,
                    priority="low")
    wait_state(low, ("RUNNING",), timeout=120)
    high = submit_to(real, queued_spec(tmp_path / "high.yaml", "high", replicas=2, seconds=3), preempting_queue,
                     priority="high")
    seen = []
    deadline = time.monotonic() + 240
    while (high_state := status(high)["state"]) not in ("SUCCEEDED", "FAILED", "CANCELLED"):
        st = status(low)
        seen.append((st["state"], st["msg"]))
        assert st["state"] != "FAILED" and time.monotonic() < deadline, seen
        time.sleep(1)
    assert high_state == "SUCCEEDED"
    assert any(state == "PENDING" and msg for state, msg in seen), seen  # preempted: waiting, with Kueue's word
    wait_state(low, ("RUNNING",), timeout=180)  # admitted again once the quota freed
    open_gate(gate)
    done = torchspec("wait", low, "--timeout", "180")
    assert done.returncode == 0, (done.stdout, done.stderr)
    said = torchspec("events", low, "-o", "json")
    assert said.returncode == 0, said.stderr
    assert any("reempt" in e["reason"] + e["message"] for e in json.loads(said.stdout)), said.stdout
