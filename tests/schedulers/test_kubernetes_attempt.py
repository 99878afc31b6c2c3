"""``TORCHSPEC_ATTEMPT`` on Kubernetes (torchspec/schedulers/kubernetes/attempt.py): what each flavor's pods
carry, the shell that adds the parts up, and a replica that sees its attempt on the API stand-in.  The real
cluster's test (an evicted pod's replacement sees attempt 1) is in test_kubernetes_disruption.py."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
from typing import Any, Dict, List

import pytest

from torchspec import specs
from torchspec.schedulers.kubernetes import attempt
from torchspec.schedulers.kubernetes.flavors import FLAVOR_TABLE, FLAVORS
from torchspec.schedulers.kubernetes.scheduler import KubernetesScheduler
from torchspec.schedulers.kubernetes.status import AppView, pod_view

from kubernetes_support import role_pod

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "kube"))

from node import expand  # noqa: E402

from test_kubernetes_cluster import Target, status, submit, torchspec, wait_state, write_spec  # noqa: E402,F401
from test_kubernetes_cluster import env, stand_in  # noqa: E402,F401 - fixtures


def ddp_app(**role: Any) -> specs.AppDef:
    """One torchrun role, which every flavor runs (the Kubeflow ones only run torchrun)."""
    args = ["-c", "torchrun --nnodes 2 --nproc_per_node 1 --rdzv_backend c10d train.py"]
    return specs.AppDef("a", [specs.Role("trainer", image="ghcr.io/acme/train:1", entrypoint="bash", args=args,
                                         num_replicas=2, **role)])


def container(flavor: str, **cfg: Any) -> Dict[str, Any]:
    objects = KubernetesScheduler("test").submit_dryrun(ddp_app(), {"flavor": flavor, **cfg}).request.objects
    return role_pod(objects, flavor)["spec"]["containers"][0]


def env_sources(c: Dict[str, Any]) -> Dict[str, str]:
    return {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in c.get("env") or [] if "valueFrom" in e}


@pytest.mark.parametrize("flavor", FLAVORS)
def test_every_flavor_runs_the_command_from_the_shell_that_sets_the_attempt(flavor: str) -> None:
    c = container(flavor)
    parts = FLAVOR_TABLE[flavor].attempt_parts
    assert c["command"] == attempt.wrap(["bash"], parts, FLAVOR_TABLE[flavor].wrapper_exports)
    assert {name: env_sources(c)[name] for name, _ in parts} == dict(parts)
    if flavor == "pytorchjob":  # the operator restarts containers in place: only their own count
        assert parts == () and 'export TORCHSPEC_REPLICA_ID="$RANK"' in c["command"][2]


def test_the_parts_each_controller_writes() -> None:
    by_flavor = {f: [path for _, path in FLAVOR_TABLE[f].attempt_parts] for f in ("job", "jobset", "volcano")}
    job = ["metadata.annotations['batch.kubernetes.io/job-index-failure-count']",
           "metadata.annotations['batch.kubernetes.io/job-index-ignored-failure-count']"]
    assert by_flavor == {"job": job, "jobset": job + ["metadata.labels['jobset.sigs.k8s.io/restart-attempt']"],
                         "volcano": ["metadata.annotations['volcano.sh/job-retry-count']"]}


@pytest.mark.parametrize("flavor", ["job", "pytorchjob"])
def test_attempt_env_false_leaves_the_command_as_it_is(flavor: str) -> None:
    c = container(flavor, attempt_env=False)
    if flavor == "job":
        assert c["command"] == ["bash"]
        assert "TORCHSPEC_ATTEMPT_FAILURES" in env_sources(c)  # the parts are still there
    else:  # the rank still needs its shell
        assert c["command"] == ["/bin/sh", "-c", 'export TORCHSPEC_REPLICA_ID="$RANK"; exec "$0" "$@"', "bash"]


def test_a_roles_own_env_cannot_set_the_attempt_or_its_parts() -> None:
    app = ddp_app(env={"TORCHSPEC_ATTEMPT": "7", "TORCHSPEC_ATTEMPT_FAILURES": "9", "MINE": "1"})
    objects = KubernetesScheduler("test").submit_dryrun(app, {}).request.objects
    env = role_pod(objects, "job")["spec"]["containers"][0]["env"]
    assert [e for e in env if e["name"].startswith("TORCHSPEC_ATTEMPT") and "value" in e] == []
    assert {"name": "MINE", "value": "1"} in env


def job_spec(flavor: str = "job", **cfg: Any) -> Dict[str, Any]:
    objects = KubernetesScheduler("test").submit_dryrun(ddp_app(max_retries=2), {"flavor": flavor, **cfg}) \
        .request.objects
    if flavor == "job":
        return next(o["spec"] for o in objects if o["kind"] == "Job")
    return next(o for o in objects if o["kind"] == "JobSet")["spec"]["replicatedJobs"][0]["template"]["spec"]


def retry_fields(spec: Dict[str, Any]) -> Dict[str, Any]:
    return {k: spec[k] for k in ("backoffLimit", "backoffLimitPerIndex", "maxFailedIndexes") if k in spec}


def test_every_job_counts_its_indexes_without_failing_sooner() -> None:
    """A budget per index as large as the Job's own: the Job fails when it did before, and the controller writes
    each index's failures on its pods."""
    assert retry_fields(job_spec()) == {"backoffLimit": 2, "backoffLimitPerIndex": 2, "maxFailedIndexes": 0}
    assert retry_fields(job_spec("jobset")) == {"backoffLimit": 0, "backoffLimitPerIndex": 0, "maxFailedIndexes": 0}
    assert retry_fields(job_spec(k8s_version="1.28")) == {"backoffLimit": 2}  # no per-index limits before 1.29
    in_place = {"kubernetes.pod_patch": {"spec": {"restartPolicy": "OnFailure"}}}
    app = ddp_app(max_retries=2, metadata=in_place)
    objects = KubernetesScheduler("test").submit_dryrun(app, {}).request.objects
    assert retry_fields(next(o["spec"] for o in objects if o["kind"] == "Job")) == {"backoffLimit": 2}


PARTS = (attempt.FAILURES, attempt.DISRUPTIONS, attempt.JOBSET_RESTARTS)


def run_wrapped(shm: pathlib.Path, env: Dict[str, str]) -> subprocess.CompletedProcess:
    """The wrapped command, run as the kubelet would: the script after its ``$(VAR)`` expansion, /dev/shm
    being ``shm``; the command prints the attempt and its arguments."""
    command = attempt.wrap(["sh", "-c", 'echo "$TORCHSPEC_ATTEMPT|$*"', "x", "a b", "$c"], PARTS)
    argv = [expand(a, env).replace(attempt.STARTS_FILE, str(shm / "starts")) for a in command]
    return subprocess.run(argv, env={"PATH": os.environ["PATH"], **env}, capture_output=True, text=True, timeout=30)


def test_the_shell_adds_the_parts_and_the_starts_in_its_pod(tmp_path: pathlib.Path) -> None:
    first = run_wrapped(tmp_path, {})
    assert (first.returncode, first.stdout, first.stderr) == (0, "0|a b $c\n", "")
    assert run_wrapped(tmp_path, {}).stdout == "1|a b $c\n"  # restarted in place: the pod's /dev/shm remembers
    fresh = tmp_path / "new-pod"
    fresh.mkdir()
    parts = {"TORCHSPEC_ATTEMPT_FAILURES": "1", "TORCHSPEC_ATTEMPT_DISRUPTIONS": "2",
             "TORCHSPEC_ATTEMPT_APP_RESTARTS": ""}  # a label that is not there reads as ""
    assert run_wrapped(fresh, parts).stdout == "3|a b $c\n"
    (fresh / "starts").write_text("garbage\n")
    assert run_wrapped(fresh, parts).stdout == "3|a b $c\n"
    unwritable = run_wrapped(tmp_path / "no" / "such" / "dir", {})
    assert (unwritable.returncode, unwritable.stdout, unwritable.stderr) == (0, "0|a b $c\n", "")


def test_the_kubelet_leaves_the_script_as_it_is() -> None:
    script = attempt.script(PARTS, ['TORCHSPEC_REPLICA_ID="$RANK"'])
    known = {name: "5" for name, _ in PARTS} | {"RANK": "1", "f": "x", "starts": "2"}
    assert expand(script, known) == script


def pod(name: str, index: int, phase: str, created: str, annotations: Dict[str, str],
        disrupted: bool = False) -> Dict[str, Any]:
    conditions = [{"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}] \
        if disrupted else []
    return {"metadata": {"name": name, "uid": name, "creationTimestamp": created,
                         "labels": {"torchspec.dev/role-name": "trainer"},
                         "annotations": {"batch.kubernetes.io/job-completion-index": str(index), **annotations}},
            "spec": {}, "status": {"phase": phase, "conditions": conditions}}


def view(pods: List[Dict[str, Any]]) -> AppView:
    return AppView(app_id="a", namespace="ns", flavor="job", top=[], pods=[v for p in pods if (v := pod_view(p))])


def test_restarts_by_cause_from_the_jobs_counts_and_the_pods_still_there() -> None:
    counted = view([pod("p2", 0, "Running", "2", {"batch.kubernetes.io/job-index-failure-count": "1",
                                                   "batch.kubernetes.io/job-index-ignored-failure-count": "1"})])
    assert counted.restart_causes("trainer", 0) == {"failure": 1, "disruption": 1}
    assert counted.restarts_of("trainer", 0) == 2
    listed = view([pod("p0", 0, "Failed", "0", {}), pod("p1", 0, "Failed", "1", {}, disrupted=True),
                   pod("p2", 0, "Running", "2", {})])  # no counts (before 1.29): the pods say
    assert listed.restart_causes("trainer", 0) == {"failure": 1, "disruption": 1}
    assert view([pod("p0", 0, "Running", "0", {})]).restart_causes("trainer", 0) == {}


def test_a_retried_replica_sees_attempt_1_and_status_says_why(stand_in: Target, tmp_path: pathlib.Path) -> None:
    """On the stand-in (its Job controller annotates the new pod with its index's failures, as Kubernetes does
    under backoffLimitPerIndex): the first run fails, the second sees attempt 1 and succeeds."""
    spec = write_spec(tmp_path / "retried.yaml", "retried", 'echo "attempt $TORCHSPEC_ATTEMPT"; '
                      '[ "$TORCHSPEC_ATTEMPT" = 1 ]', replicas=1)
    spec.write_text(spec.read_text() + "    max_retries: 1\n")
    handle = submit(spec, stand_in.ns, "job")
    st = wait_state(handle, ("SUCCEEDED", "FAILED"), timeout=120)
    assert st["state"] == "SUCCEEDED", st
    (replica,) = st["roles"][0]["replicas"]
    assert (replica["num_restarts"], replica["restart_causes"]) == (1, {"failure": 1})
    logs = torchspec("logs", handle)
    assert "attempt 1" in logs.stdout, logs
    table = torchspec("status", handle)
    assert "1 (1 failure)" in table.stdout, table.stdout
