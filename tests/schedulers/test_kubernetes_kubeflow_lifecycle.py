"""The Kubeflow flavors and Kueue through the real ``kubernetes`` client against the API stand-in.

``tests/kube/operators.py`` plays the Training Operator, Trainer and Kueue: each test walks a job the way
they would (created -> running -> succeeded; a failing replica; suspended, then admitted by Kueue) and
reads it back through the scheduler (status, describe, logs, list, cancel) and, once, the CLI.
"""

from __future__ import annotations

import pathlib
import sys
import threading
import time
from typing import Any, Callable, Dict, Tuple

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "kube"))

from apiserver import FakeApiServer  # noqa: E402
from operators import JOBSET_API, PYTORCHJOB_API, RUNTIME_API, TORCH_DISTRIBUTED, TRAINJOB_API, Kueue, \
    TrainingOperator, Trainer  # noqa: E402
from test_kubernetes_lifecycle import NS, apiserver, controller_pods, kubeconfig, kubelet_env, name_of, sched, \
    torchspec  # noqa: E402,F401 - fixtures and helpers shared with the other flavors' lifecycle tests

from torchspec import specs  # noqa: E402
from torchspec.components import find_component  # noqa: E402
from torchspec.errors import BackendError  # noqa: E402
from torchspec.loader import load_app  # noqa: E402
from torchspec.schedulers.kubernetes.scheduler import KubernetesScheduler  # noqa: E402

AppState = specs.AppState


def ddp(j: str = "3x2", **params: str) -> specs.AppDef:
    """dist.ddp, its role named ``train`` after the script."""
    return load_app(find_component("dist.ddp"), {"j": j, "script": "train.py", "image": "ghcr.io/acme/t:1",
                                                 **params})


@pytest.fixture
def runtime(apiserver: FakeApiServer) -> None:
    """The torch-distributed ClusterTrainingRuntime, installed as Kubeflow Trainer ships it."""
    apiserver.create(*RUNTIME_API, None, TORCH_DISTRIBUTED)


def followed_while(kubelet: Callable[[], None], sched: KubernetesScheduler, app_id: str) -> list[str]:
    """Replica train/1's log, followed while ``kubelet`` (in a thread) writes it and ends it: the kubelet starts
    once the follower has read the log's first line, so what it does next (a restart) is seen as it happens
    however slowly the follower started (ci51, on a loaded machine, started it after the restart)."""
    writer = threading.Thread(target=kubelet)
    lines: list[str] = []
    try:
        for line in sched.log_iter(app_id, "train", 1, should_tail=True):
            lines.append(line)
            if not writer.is_alive() and writer.ident is None:
                writer.start()
        return lines
    finally:
        if writer.ident is not None:
            writer.join()


def replicas(desc: Any) -> list[Tuple[int, AppState, str]]:
    return [(r.id, r.state, r.hostname) for role in desc.roles_statuses for r in role.replicas]


# ----------------------------------------------------------------------------
# pytorchjob
# ----------------------------------------------------------------------------


def test_pytorchjob_created_running_succeeded(sched: KubernetesScheduler, apiserver: FakeApiServer) -> None:
    app = ddp()
    app_id = sched.submit(app, {"flavor": "pytorchjob"})
    name = name_of(app_id)
    assert app_id == f"{NS}:{name}@pytorchjob"
    hosts = [f"{name}-master-0", f"{name}-worker-0", f"{name}-worker-1"]
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.PENDING
    assert replicas(desc) == [(k, AppState.PENDING, hosts[k]) for k in range(3)]
    operator = TrainingOperator(apiserver)
    pods = operator.reconcile(name)
    assert pods == hosts and sched.describe(app_id).state == AppState.PENDING  # type: ignore[union-attr]
    for k, pod in enumerate(pods):  # the operator's RANK is the replica id; the id is the handle's
        env = kubelet_env(apiserver.get("v1", "pods", NS, pod)["spec"], NS)  # type: ignore[index]
        assert (env["RANK"], env["TORCHSPEC_APP_ID"], env["MASTER_ADDR"]) == (str(k), app_id, hosts[0])
    operator.running(name)
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.RUNNING and desc.msg == ""
    assert replicas(desc) == [(k, AppState.RUNNING, hosts[k]) for k in range(3)]
    apiserver.append_log(NS, pods[2], "rank 2 says hi\n")
    assert list(sched.log_iter(app_id, "train", 2)) == ["rank 2 says hi\n"]
    operator.succeed(name)
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.SUCCEEDED
    assert [r.exit_code for r in desc.roles_statuses[0].replicas] == [0, 0, 0]  # type: ignore[attr-defined]
    fresh = KubernetesScheduler("another")
    try:
        assert [(a.app_id, a.state) for a in fresh.list()] == [(app_id, AppState.SUCCEEDED)]
        old = fresh.describe(f"{NS}:{name}")  # a handle without the kind (as ids were) is searched for
        assert old is not None and old.app_id == app_id and old.roles == app.roles
        assert old.metadata["flavor"] == "pytorchjob" and old.metadata["objects"] == f"PyTorchJob {name}"
        fresh.cancel(app_id)
        assert apiserver.get(*PYTORCHJOB_API, NS, name) is None and apiserver.pods(NS) == []
        assert apiserver.objects("v1", "services", NS) == [] and fresh.describe(app_id) is None
    finally:
        fresh.close()


def test_a_failing_replica_restarts_then_fails_the_pytorchjob(sched: KubernetesScheduler,
                                                              apiserver: FakeApiServer) -> None:
    app_id = sched.submit(ddp(max_retries="1"), {"flavor": "pytorchjob"})
    name = name_of(app_id)
    operator = TrainingOperator(apiserver)
    operator.reconcile(name)
    operator.running(name)
    apiserver.append_log(NS, f"{name}-worker-1", "step 1\nloss is NaN\n")
    operator.restart(name, 2, exit_code=3)  # worker 1, restartPolicy OnFailure: its container, in the same pod
    apiserver.append_log(NS, f"{name}-worker-1", "step 1 again\n")
    assert list(sched.log_iter(app_id, "train", 2)) == [
        "step 1\n", "loss is NaN\n", "--- torchspec: restart 1 of replica train/2 ---\n", "step 1 again\n"]
    assert list(sched.log_iter(app_id, "train", 2, regex="step")) == ["step 1\n", "step 1 again\n"]
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.RUNNING
    assert desc.msg == f"pytorchjob is restarting: PyTorchJob {name} is restarting because 1 Worker replica(s) failed."
    assert desc.roles_statuses[0].replicas[2].num_restarts == 1  # type: ignore[attr-defined]
    operator.fail(name, 2, exit_code=3, message="loss is NaN")
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.FAILED
    assert desc.msg == "train/2 exited with code 3 after 1 restart: loss is NaN"
    assert [r.state for r in desc.roles_statuses[0].replicas] == [AppState.RUNNING, AppState.RUNNING,
                                                                  AppState.FAILED]


def test_the_cli_reads_a_pytorchjob(sched: KubernetesScheduler, apiserver: FakeApiServer) -> None:
    app_id = sched.submit(ddp("2x1"), {"flavor": "pytorchjob"})
    operator = TrainingOperator(apiserver)
    pods = operator.reconcile(name_of(app_id))
    operator.running(name_of(app_id))
    apiserver.append_log(NS, pods[1], "step 1\n")
    handle = f"kubernetes://test/{app_id}"
    status = torchspec("status", handle)
    assert status.returncode == 0 and "RUNNING" in status.stdout, status.stdout + status.stderr
    logs = torchspec("logs", handle, "train/1")
    assert logs.returncode == 0 and "step 1" in logs.stdout, logs.stdout + logs.stderr


def test_a_missing_pytorchjob_crd_is_one_clear_error(sched: KubernetesScheduler, apiserver: FakeApiServer) -> None:
    apiserver.fail_next("POST", r"/pytorchjobs$", 404, message="the server could not find the requested resource")
    with pytest.raises(BackendError) as raised:
        sched.submit(ddp(), {"flavor": "pytorchjob"})
    assert "PyTorchJob" in raised.value.message and "pytorchjob" in (raised.value.hint or "")


# ----------------------------------------------------------------------------
# trainjob
# ----------------------------------------------------------------------------


def test_trainjob_created_running_complete(sched: KubernetesScheduler, apiserver: FakeApiServer,
                                           runtime: None) -> None:
    app_id = sched.submit(ddp(), {"flavor": "trainjob"})
    name = name_of(app_id)
    assert app_id == f"{NS}:{name}@trainjob"
    trainer = Trainer(apiserver)
    pods = trainer.reconcile(name)
    assert len(pods) == 3 and apiserver.get(*JOBSET_API, NS, name) is not None
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.PENDING
    trainer.running(name)
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.RUNNING
    assert replicas(desc) == [(k, AppState.RUNNING, f"{name}-node-0-{k}.{name}") for k in range(3)]
    apiserver.append_log(NS, pods[1], "node 1 up\n")
    assert list(sched.log_iter(app_id, "train", 1)) == ["node 1 up\n"]
    trainer.complete(name)
    assert sched.describe(app_id).state == AppState.SUCCEEDED  # type: ignore[union-attr]
    assert [(a.app_id, a.state) for a in sched.list()] == [(app_id, AppState.SUCCEEDED)]
    sched.cancel(app_id)
    assert apiserver.get(*TRAINJOB_API, NS, name) is None and apiserver.get(*JOBSET_API, NS, name) is None
    assert apiserver.pods(NS) == []


def test_a_failing_node_fails_the_trainjob(sched: KubernetesScheduler, apiserver: FakeApiServer,
                                           runtime: None) -> None:
    app_id = sched.submit(ddp("2x1"), {"flavor": "trainjob"})
    name = name_of(app_id)
    trainer = Trainer(apiserver)
    trainer.reconcile(name)
    trainer.running(name)
    trainer.fail(name, 1, exit_code=2)
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.FAILED and desc.msg == "train/1 exited with code 2"
    assert sched.describe(f"{NS}:{name}").state == AppState.FAILED  # type: ignore[union-attr]


def test_a_failed_trainjob_whose_pods_are_gone_reads_unknown_replicas_not_pending(
        sched: KubernetesScheduler, apiserver: FakeApiServer, runtime: None) -> None:
    """As on the real cluster: the runtime's pods restart in place (OnFailure), so the Job deletes them when
    it fails; the replicas then cannot say how they ended, and must not read as waiting to start."""
    app_id = sched.submit(ddp("2x1"), {"flavor": "trainjob"})
    name = name_of(app_id)
    trainer = Trainer(apiserver)
    trainer.reconcile(name)
    trainer.running(name)
    trainer.fail(name, 1, exit_code=2, remove_pods=True)
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.FAILED
    assert [(r.state, r.exit_code) for r in desc.roles_statuses[0].replicas] == [(AppState.UNKNOWN, None)] * 2
    assert all("pod is gone" in r.msg for r in desc.roles_statuses[0].replicas)  # type: ignore[attr-defined]


@pytest.mark.parametrize("flavor", ["pytorchjob", "trainjob"])
def test_logs_follow_a_replica_until_it_ends(flavor: str, sched: KubernetesScheduler, apiserver: FakeApiServer,
                                             runtime: None) -> None:
    app_id = sched.submit(ddp("2x1"), {"flavor": flavor})
    controller = TrainingOperator(apiserver) if flavor == "pytorchjob" else Trainer(apiserver)
    pods = controller.reconcile(name_of(app_id))
    controller.running(name_of(app_id))
    apiserver.append_log(NS, pods[1], "epoch 0\n")

    def kubelet() -> None:
        for i in (1, 2):
            time.sleep(0.2)
            apiserver.append_log(NS, pods[1], f"epoch {i}\n")
        apiserver.set_pod_phase(NS, pods[1], "Succeeded", exit_code=0)

    assert followed_while(kubelet, sched, app_id) == ["epoch 0\n", "epoch 1\n", "epoch 2\n"]


# ----------------------------------------------------------------------------
# Suspended, then admitted by Kueue: every flavor that queues with Kueue
# ----------------------------------------------------------------------------


def _start(flavor: str, srv: FakeApiServer, app_id: str, resumed: bool) -> None:
    """What the flavor's controllers do with a job suspended (``resumed`` False) or just admitted."""
    name = name_of(app_id)
    if flavor == "pytorchjob":
        operator = TrainingOperator(srv)
        operator.resume(name) if resumed else operator.reconcile(name)
        if resumed:
            operator.running(name)
    elif flavor == "trainjob":
        trainer = Trainer(srv)
        trainer.resume(name) if resumed else trainer.reconcile(name)
        if resumed:
            trainer.running(name)
    elif flavor == "jobset":
        srv.set_status(*JOBSET_API, NS, name, {"conditions": [
            {"type": "Suspended", "status": "False" if resumed else "True",
             "reason": "ResumeJobs" if resumed else "SuspendJobs", "message": ""}]})
    else:
        for job in srv.objects("batch/v1", "jobs", NS, f"torchspec.dev/app-id={name}"):
            srv.set_status("batch/v1", "jobs", NS, job["metadata"]["name"], {"conditions": [
                {"type": "Suspended", "status": "False" if resumed else "True",
                 "reason": "JobResumed" if resumed else "JobSuspended",
                 "message": "Job resumed" if resumed else "Job suspended"}]})
    if resumed and flavor in ("job", "jobset"):
        for pods in controller_pods(srv, app_id, flavor).values():
            for pod in pods:
                srv.set_pod_phase(NS, pod, "Running")


QUEUED: Dict[str, Tuple[str, str]] = {"pytorchjob": PYTORCHJOB_API, "trainjob": TRAINJOB_API, "jobset": JOBSET_API,
                                      "job": ("batch/v1", "jobs")}


@pytest.mark.parametrize("flavor", sorted(QUEUED))
def test_suspended_reads_pending_with_kueues_reason_until_admitted(flavor: str, sched: KubernetesScheduler,
                                                                   apiserver: FakeApiServer, runtime: None) -> None:
    app = ddp("2x1") if flavor in ("pytorchjob", "trainjob") else specs.AppDef("one", [specs.Role(
        "train", "busybox:1.36", entrypoint="sh", num_replicas=2)])
    app_id = sched.submit(app, {"flavor": flavor, "queue": "team-a", "priority": "low"})
    name = name_of(app_id)
    kueue = Kueue(apiserver)
    objects = [j["metadata"]["name"] for j in apiserver.objects(*QUEUED[flavor], NS, f"torchspec.dev/app-id={name}")]
    assert objects and all(apiserver.get(*QUEUED[flavor], NS, o)["metadata"]["labels"][  # type: ignore[index]
        "kueue.x-k8s.io/priority-class"] == "low" for o in objects)
    for obj in objects:
        kueue.queue(QUEUED[flavor], obj)
    _start(flavor, apiserver, app_id, resumed=False)
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.PENDING
    assert "is suspended, waiting for a queue to admit it" in desc.msg
    assert desc.msg.endswith("; Kueue: couldn't assign flavors to pod set main: insufficient unused quota for cpu"
                             " in flavor default-flavor, 4 more needed")
    assert [(a.app_id, a.state) for a in sched.list()] == [(app_id, AppState.PENDING)]
    for obj in objects:
        kueue.admit(QUEUED[flavor], obj)
    _start(flavor, apiserver, app_id, resumed=True)
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.RUNNING and desc.msg == "", desc.msg


def test_a_suspended_app_with_pods_left_reads_pending_not_running(sched: KubernetesScheduler,
                                                                  apiserver: FakeApiServer) -> None:
    """Kueue preempts a running workload by suspending it: until its pods are gone, it is not RUNNING."""
    app_id = sched.submit(ddp("2x1"), {"flavor": "pytorchjob", "queue": "team-a"})
    name = name_of(app_id)
    operator = TrainingOperator(apiserver)
    Kueue(apiserver).admit(PYTORCHJOB_API, name)
    operator.reconcile(name)
    operator.running(name)
    assert sched.describe(app_id).state == AppState.RUNNING  # type: ignore[union-attr]
    apiserver.store.patch(apiserver.registry.get(*PYTORCHJOB_API), NS, name, "application/merge-patch+json",
                          {"spec": {"runPolicy": {"suspend": True}}})
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.PENDING and "suspended" in desc.msg


def test_logs_follow_a_pytorchjob_replica_through_a_restart_in_place(sched: KubernetesScheduler,
                                                                     apiserver: FakeApiServer) -> None:
    app_id = sched.submit(ddp("2x1", max_retries="2"), {"flavor": "pytorchjob"})
    operator = TrainingOperator(apiserver)
    pods = operator.reconcile(name_of(app_id))
    operator.running(name_of(app_id))
    apiserver.append_log(NS, pods[1], "epoch 0\n")

    def kubelet() -> None:
        time.sleep(0.3)
        operator.restart(name_of(app_id), 1, exit_code=1)
        time.sleep(0.3)
        apiserver.append_log(NS, pods[1], "epoch 0 again\n")
        apiserver.set_pod_phase(NS, pods[1], "Succeeded", exit_code=0)

    assert followed_while(kubelet, sched, app_id) == [
        "epoch 0\n", "--- torchspec: restart 1 of replica train/1 ---\n", "epoch 0 again\n"]
