"""A pod the cluster takes away (evicted, preempted, drained) is not a failure of the app: the Job (and each
replicated Job of a JobSet) carries a podFailurePolicy that ignores pods with the DisruptionTarget condition, so
the pod is replaced without spending ``max_retries``.  The manifests here; on the real cluster, an app with
``max_retries: 0`` whose running pod is evicted through the Eviction API goes on and ends SUCCEEDED, the replacement
seeing ``TORCHSPEC_ATTEMPT=1`` and ``status`` counting one restart, a disruption."""

from __future__ import annotations

import json
import pathlib
import time
from typing import Any, Dict, List

import pytest

from torchspec import specs
from torchspec.schedulers.kubernetes.job import IGNORE_DISRUPTIONS
from torchspec.schedulers.kubernetes.scheduler import KubernetesScheduler

from test_kubernetes_cluster import (Target, open_gate, real, status, submit, torchspec, until_open,  # noqa: F401
                                     wait_state, write_spec)
from test_kubernetes_cluster import env, k8s_image  # noqa: F401 - fixtures


def jobs(flavor: str, **cfg: Any) -> List[Dict[str, Any]]:
    """The Job specs of a one-role app: the Job's own, or each replicated Job's of the JobSet."""
    app = specs.AppDef("a", [specs.Role("r", image="ghcr.io/acme/train:1", entrypoint="true", num_replicas=2,
                                        metadata=cfg.pop("metadata", {}))])
    objects = KubernetesScheduler("test").submit_dryrun(app, {"flavor": flavor, **cfg}).request.objects
    if flavor == "job":
        return [o["spec"] for o in objects if o["kind"] == "Job"]
    (jobset,) = [o for o in objects if o["kind"] == "JobSet"]
    return [r["template"]["spec"] for r in jobset["spec"]["replicatedJobs"]]


@pytest.mark.parametrize("flavor", ["job", "jobset"])
def test_every_job_ignores_disruptions(flavor: str) -> None:
    assert [j["podFailurePolicy"] for j in jobs(flavor)] == [IGNORE_DISRUPTIONS]
    assert IGNORE_DISRUPTIONS == {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget",
                                                                                    "status": "True"}]}]}


@pytest.mark.parametrize("flavor", ["job", "jobset"])
def test_not_where_the_api_server_would_refuse_it(flavor: str) -> None:
    assert ["podFailurePolicy" in j for j in jobs(flavor, k8s_version="1.25")] == [False]  # before 1.26
    assert ["podFailurePolicy" in j for j in jobs(flavor, k8s_version="1.26")] == [True]
    in_place = {"kubernetes.pod_patch": {"spec": {"restartPolicy": "OnFailure"}}}  # needs restartPolicy Never
    assert ["podFailurePolicy" in j for j in jobs(flavor, metadata=in_place)] == [False]


@pytest.mark.parametrize("retry, retries, failed, evicted", [
    ("APPLICATION", 0, "TerminateJob", "RestartJob"), ("APPLICATION", 2, "RestartJob", "RestartJob"),
    ("ROLE", 0, "TerminateJob", "RestartTask"), ("REPLICA", 1, "RestartPod", "RestartPod")])
def test_volcano_restarts_an_evicted_pod_even_without_retries(retry: str, retries: int, failed: str,
                                                               evicted: str) -> None:
    app = specs.AppDef("a", [specs.Role("r", image="ghcr.io/acme/train:1", entrypoint="true", num_replicas=2,
                                        max_retries=retries, retry_policy=specs.RetryPolicy(retry))])
    objects = KubernetesScheduler("test").submit_dryrun(app, {"flavor": "volcano"}).request.objects
    (job,) = [o for o in objects if o["kind"] == "Job"]
    (task,) = job["spec"]["tasks"]
    assert task["policies"] == [{"event": "PodFailed", "action": failed}, {"event": "PodEvicted", "action": evicted}]


def evict(target: Target, pod: str) -> None:
    """The Eviction API, as ``kubectl drain`` and the cluster autoscaler use it."""
    from kubernetes import client, config

    assert target.cluster is not None
    api = client.CoreV1Api(config.new_client_from_config(target.cluster.kubeconfig))
    api.create_namespaced_pod_eviction(pod, target.ns, client.V1Eviction(
        metadata=client.V1ObjectMeta(name=pod, namespace=target.ns)))


def running_pods(target: Target) -> List[str]:
    """``NAME UID`` of each running pod: Volcano names a restarted pod as it named the one before."""
    assert target.cluster is not None
    listed = target.cluster.kubectl("get", "pods", "-n", target.ns, "--field-selector=status.phase=Running", "-o",
                                    "jsonpath={range .items[*]}{.metadata.name} {.metadata.uid}{\"\\n\"}{end}")
    return [line for line in listed.stdout.splitlines() if line.strip()]


@pytest.mark.parametrize("flavor", ["job", "jobset", "volcano"])
def test_an_evicted_pod_is_replaced_and_the_app_succeeds_without_retries(flavor: str, real: Target,
                                                                          tmp_path: pathlib.Path) -> None:
    gate = tmp_path / "gate"
    gate.mkdir()
    script = 'echo "attempt $TORCHSPEC_ATTEMPT"; ' + until_open(gate)
    spec = write_spec(tmp_path / "evicted.yaml", "evicted", script, replicas=1, gate=gate)
    handle = submit(spec, real.ns, flavor)  # max_retries 0: any failure would fail the app
    wait_state(handle, ("RUNNING",), timeout=180)
    deadline = time.monotonic() + 120
    while not (first := running_pods(real)):
        assert time.monotonic() < deadline, "no pod ever ran"
        time.sleep(0.5)
    evict(real, first[0].split()[0])
    deadline = time.monotonic() + 240  # the evicted pod's grace period (sh ignores SIGTERM), then its replacement
    while not (now := [p for p in running_pods(real) if p != first[0]]):
        st = status(handle)
        assert st["state"] not in ("FAILED", "SUCCEEDED", "CANCELLED"), st
        assert time.monotonic() < deadline, f"the evicted pod was never replaced: {st}"
        time.sleep(1)
    assert status(handle)["state"] in ("RUNNING", "PENDING")
    open_gate(gate)
    ended = wait_state(handle, ("SUCCEEDED", "FAILED", "CANCELLED"), timeout=180)
    assert ended["state"] == "SUCCEEDED", (ended, now)
    logs = torchspec("logs", handle)
    assert "attempt 1" in logs.stdout and "attempt 0" not in logs.stdout, logs  # the replacement's log
    if flavor == "volcano":
        return  # Volcano restarts the whole Job (its pods are new, of the same names) and records no event per pod
    (replica,) = ended["roles"][0]["replicas"]
    assert (replica["num_restarts"], replica["restart_causes"]) == (1, {"disruption": 1}), replica
    # events: the Job's controller made a pod, then its replacement once the first was evicted
    said = torchspec("events", handle, "-o", "json")
    assert said.returncode == 0, said.stderr
    created = [e for e in json.loads(said.stdout) if e["reason"] == "SuccessfulCreate"]
    assert len(created) >= 2 and all(e["source"].startswith("Job ") for e in created), created
