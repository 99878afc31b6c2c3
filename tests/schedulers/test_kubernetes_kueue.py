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
from typing import Any, Dict, Iterator

import pytest

from test_kubernetes_cluster import Target, status, torchspec, wait_state, write_spec  # noqa: F401
from test_kubernetes_cluster import env, k8s_image, real  # noqa: F401 - fixtures

#: every test here runs on the real cluster (through the `real` fixture): run them with the cluster's (last)
pytestmark = pytest.mark.k8s_cluster

pytest.importorskip("kubernetes")


@pytest.fixture
def queue(real: Target) -> Iterator[str]:  # noqa: F811 - the fixture imported above
    """A LocalQueue ``team`` in the test's namespace, on a ClusterQueue of its own with 2 CPUs of quota.

    StrictFIFO: the head of the queue (by priority, then age) waits for room and nothing passes it. Under
    the default, BestEffortFIFO, a workload found inadmissible is set aside and retried later, and CI saw
    a low-priority app that had been set aside first admitted before a high one."""
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
          queueingStrategy: StrictFIFO
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


def queued_spec(path: pathlib.Path, name: str, replicas: int, seconds: int) -> pathlib.Path:
    path.write_text(textwrap.dedent(f"""\
        name: {name}
        roles:
          - name: trainer
            image: torchspec-test/busybox:k8s
            entrypoint: sh
            args: ["-c", "echo start; sleep {seconds}"]
            num_replicas: {replicas}
            resource: {{cpu: 1, memMB: 64}}
        """))
    return path


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


def test_an_app_larger_than_the_quota_stays_pending_with_kueues_reason(real: Target, queue: str,  # noqa: F811
                                                                       tmp_path: pathlib.Path) -> None:
    handle = submit_to(real, queued_spec(tmp_path / "big.yaml", "big", replicas=3, seconds=5), queue)
    st = held_for(handle, 8)
    assert "couldn't assign flavors" in st["msg"] and "cpu" in st["msg"], st["msg"]
    assert torchspec("cancel", handle).returncode == 0


def test_two_apps_that_fit_one_at_a_time_run_one_after_the_other(real: Target, queue: str,  # noqa: F811
                                                                 tmp_path: pathlib.Path) -> None:
    first = submit_to(real, queued_spec(tmp_path / "a.yaml", "first", replicas=2, seconds=8), queue)
    wait_state(first, ("RUNNING",), timeout=60)
    second = submit_to(real, queued_spec(tmp_path / "b.yaml", "second", replicas=2, seconds=1), queue)
    pending = held_for(second, 3)
    assert pending["msg"], pending  # Kueue's reason is shown
    assert status(first)["state"] == "RUNNING"
    done = torchspec("wait", second, "--timeout", "120")
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert status(first)["state"] == "SUCCEEDED"  # the second ran only once the first had ended


def test_priority_classes_order_the_queue(real: Target, queue: str, tmp_path: pathlib.Path) -> None:  # noqa: F811
    blocker = submit_to(real, queued_spec(tmp_path / "blocker.yaml", "blocker", replicas=2, seconds=15), queue)
    wait_state(blocker, ("RUNNING",), timeout=60)
    low = submit_to(real, queued_spec(tmp_path / "low.yaml", "low", replicas=2, seconds=3), queue, priority="low")
    time.sleep(1)  # the low one queued first
    high = submit_to(real, queued_spec(tmp_path / "high.yaml", "high", replicas=2, seconds=3), queue,
                     priority="high")
    for handle in (high, low):
        done = torchspec("wait", handle, "--timeout", "180")
        assert done.returncode == 0, (done.stdout, done.stderr)
    # Kueue lets a Job start by unsuspending it, which stamps its startTime: the high one went first
    assert real.cluster is not None
    started = dict(line.split() for line in real.cluster.kubectl(
        "get", "jobs.batch", "-n", real.ns, "-o",
        "jsonpath={range .items[*]}{.metadata.labels.torchspec\\.dev/app-id} {.status.startTime}{\"\\n\"}{end}"
    ).stdout.splitlines() if line.strip())
    app = {h: h.rsplit(":", 1)[1] for h in (high, low)}
    assert started[app[high]] < started[app[low]], started


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
