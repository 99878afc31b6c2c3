"""The kubernetes scheduler against a fake API server, through the real ``kubernetes`` client.

Nothing is patched or mocked: the scheduler loads the kubeconfig the fake server writes (through
``KUBECONFIG``) and speaks HTTP to it. The tests play the controllers and the kubelet: they create
each Job's pods as the Job controller does (completion-index annotation and label, job-name labels,
ownerReferences, hostname and subdomain), a JobSet's child Jobs and their pods as the JobSet controller
does (``jobset.sigs.k8s.io/*`` labels), a Volcano Job's pods as Volcano does (``volcano.sh/*`` labels),
move them through their phases, write their logs and set the Job/JobSet/Volcano status.
"""

from __future__ import annotations

import copy
import hashlib
import json
import pathlib
import re
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Dict, Iterator, List, Optional

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "kube"))

from apiserver import DeleteOptions, FakeApiServer, rfc3339  # noqa: E402

from torchspec import specs  # noqa: E402
from torchspec.errors import BackendError  # noqa: E402
from torchspec.schedulers.api import Stream  # noqa: E402
from torchspec.schedulers.kubernetes.names import role_key  # noqa: E402
from torchspec.schedulers.kubernetes.scheduler import KubernetesScheduler  # noqa: E402

NS = "default"
AppState = specs.AppState


@pytest.fixture
def apiserver() -> Iterator[FakeApiServer]:
    with FakeApiServer() as server:
        yield server


@pytest.fixture
def kubeconfig(apiserver: FakeApiServer, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The fake cluster's kubeconfig, found the standard way: through KUBECONFIG."""
    path = apiserver.write_kubeconfig(tmp_path / "kubeconfig")
    monkeypatch.setenv("KUBECONFIG", path)
    return path


@pytest.fixture
def sched(kubeconfig: str) -> Iterator[KubernetesScheduler]:
    scheduler = KubernetesScheduler("test")
    yield scheduler
    scheduler.close()


def make_app(name: str = "demo", **trainer: Any) -> specs.AppDef:
    base: Dict[str, Any] = dict(name="trainer", image="busybox:1.36", entrypoint="sh",
                                args=["-c", "echo ${replica_id}"], num_replicas=2,
                                env={"TORCHSPEC_JOB_ID": "kubernetes://test/${app_id}"})
    base.update(trainer)
    return specs.AppDef(name=name, roles=[specs.Role(**base),
                                          specs.Role(name="reader", image="busybox:1.36", entrypoint="sh")])


# ----------------------------------------------------------------------------
# Playing the controllers and the kubelet
# ----------------------------------------------------------------------------


def name_of(app_id: str) -> str:
    """NAME of ``[CONTEXT:]NAMESPACE:NAME[@FLAVOR]``."""
    return app_id.rsplit(":", 1)[1].partition("@")[0]


def kubelet_env(pod_spec: Dict[str, Any], namespace: str) -> Dict[str, str]:
    """The container's env as the kubelet hands it over: ``metadata.namespace`` filled in from the downward
    API, ``$(VAR)`` expanded from the variables before it, ``$$`` a literal ``$`` (other fieldRefs are left out)."""
    env: Dict[str, str] = {}
    for var in pod_spec["containers"][0]["env"]:
        if "value" in var:
            env[var["name"]] = re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                                      lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)),
                                      var["value"])
        elif var["valueFrom"].get("fieldRef", {}).get("fieldPath") == "metadata.namespace":
            env[var["name"]] = namespace
    return env


def torchspec(*argv: str) -> "subprocess.CompletedProcess[str]":
    """The CLI, in a new process (it finds the fake cluster through KUBECONFIG, as a user's shell would)."""
    return subprocess.run([sys.executable, "-m", "torchspec", *argv], capture_output=True, text=True, timeout=120)


def job_pods(srv: FakeApiServer, app_id: str, role: str, attempt: str = "a") -> List[str]:
    """What the Job controller does for an Indexed Job: one pod per index, named {job}-{k}-{random}."""
    name = name_of(app_id)
    job_name = f"{name}-{role_key(name, role)}"
    job = srv.get("batch/v1", "jobs", NS, job_name)
    assert job is not None, job_name
    return [create_pod(srv, job, job["spec"]["template"], f"{job_name}-{k}-{attempt}x{k}zz", k,
                       hostname=f"{job_name}-{k}", extra_labels={"job-name": job_name,
                                                                 "batch.kubernetes.io/job-name": job_name})
            for k in range(job["spec"]["completions"])]


def owner_ref(owner: Dict[str, Any]) -> Dict[str, Any]:
    """The controller reference a controller puts on what it creates (the garbage collector follows it)."""
    return {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}


def create_pod(srv: FakeApiServer, owner: Dict[str, Any], template: Dict[str, Any], pod_name: str, k: int,
               hostname: Optional[str] = None, subdomain: Optional[str] = None, extra_labels: Optional[Dict[str, str]] = None,
               index_key: str = "batch.kubernetes.io/job-completion-index",
               extra_annotations: Optional[Dict[str, str]] = None) -> str:
    """A pod from ``template`` (its labels and annotations copied, as every controller does), with the index
    ``k`` under ``index_key`` as both label and annotation."""
    labels = {**template["metadata"]["labels"], **(extra_labels or {}), index_key: str(k)}
    annotations = {**(template["metadata"].get("annotations") or {}), **(extra_annotations or {}), index_key: str(k)}
    spec = copy.deepcopy(template["spec"])
    if hostname:
        spec["hostname"] = hostname
    if subdomain:
        spec["subdomain"] = subdomain
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": pod_name, "labels": labels, "annotations": annotations,
                        "ownerReferences": [owner_ref(owner)]},
           "spec": spec}
    srv.create("v1", "pods", NS, pod)
    srv.set_pod_phase(NS, pod_name, "Pending")
    return pod_name


def job_condition(srv: FakeApiServer, app_id: str, role: str, kind: str, reason: str = "", message: str = "") -> None:
    name = name_of(app_id)
    condition = {"type": kind, "status": "True", "reason": reason, "message": message}
    srv.set_status("batch/v1", "jobs", NS, f"{name}-{role_key(name, role)}", {"conditions": [condition]})


JOBSET_API = ("jobset.x-k8s.io/v1alpha2", "jobsets")
VOLCANO_API = ("batch.volcano.sh/v1alpha1", "jobs")
CONTROLLED = ("jobset", "volcano")  # the flavors whose controller decides the app's fate as a whole


def jobset_pods(srv: FakeApiServer, app_id: str, attempt: str = "a") -> Dict[str, List[str]]:
    """What the JobSet controller and then the Job controller do: per replicated job a child Job
    ``{jobset}-{rjob}-0`` owned by the JobSet, it and its pod template labelled and annotated
    ``jobset.sigs.k8s.io/*`` (restart-attempt: the JobSet's ``status.restarts``), its pods under the JobSet's
    subdomain; then per completion index a pod ``{job}-{k}-{random}`` of that Job, hostname ``{job}-{k}``.
    Returns the pod names per replicated job (= role key)."""
    name = name_of(app_id)
    jobset = srv.get(*JOBSET_API, NS, name)
    assert jobset is not None, name
    restarts = str((jobset.get("status") or {}).get("restarts", 0))
    out: Dict[str, List[str]] = {}
    for rjob in jobset["spec"]["replicatedJobs"]:
        job_name = f"{name}-{rjob['name']}-0"
        marks = {"jobset.sigs.k8s.io/jobset-name": name, "jobset.sigs.k8s.io/replicatedjob-name": rjob["name"],
                 "jobset.sigs.k8s.io/restart-attempt": restarts,
                 "jobset.sigs.k8s.io/replicatedjob-replicas": str(rjob["replicas"]),
                 "jobset.sigs.k8s.io/job-index": "0",
                 "jobset.sigs.k8s.io/job-key": hashlib.sha1(f"{NS}/{job_name}".encode()).hexdigest()}
        spec = copy.deepcopy(rjob["template"]["spec"])
        template_meta = spec["template"].setdefault("metadata", {})
        template_meta["labels"] = {**(template_meta.get("labels") or {}), **marks}
        template_meta["annotations"] = {**(template_meta.get("annotations") or {}), **marks}
        spec["template"]["spec"]["subdomain"] = name  # network.subdomain defaults to the JobSet's name
        spec["suspend"] = False
        job = srv.create("batch/v1", "jobs", NS, {
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": job_name, "labels": dict(marks), "annotations": dict(marks),
                         "ownerReferences": [owner_ref(jobset)]},
            "spec": spec})  # the API server adds job-name and controller-uid to the pod template's labels
        out[rjob["name"]] = [create_pod(srv, job, job["spec"]["template"], f"{job_name}-{k}-{attempt}x{k}zz", k,
                                        hostname=f"{job_name}-{k}")
                             for k in range(spec["completions"])]
    return out


def volcano_pods(srv: FakeApiServer, app_id: str) -> Dict[str, List[str]]:
    """What Volcano's job controller does (createJobPod, then its svc plugin): per task and index a pod
    ``{job}-{task}-{k}`` owned by the Volcano Job, labelled ``volcano.sh/task-index``, ``job-name``,
    ``task-spec``, ``job-namespace``, ``queue-name``, annotated with the same and its PodGroup, job version and
    retry count; hostname its own name, subdomain the job's. Returns the pod names per task (= role key)."""
    name = name_of(app_id)
    vcjob = srv.get(*VOLCANO_API, NS, name)
    assert vcjob is not None, name
    status = vcjob.get("status") or {}
    queue = vcjob["spec"].get("queue") or "default"  # the admission webhook's default
    out: Dict[str, List[str]] = {}
    for task in vcjob["spec"]["tasks"]:
        common = {"volcano.sh/job-name": name, "volcano.sh/task-spec": task["name"], "volcano.sh/queue-name": queue}
        annotations = {**common, "scheduling.k8s.io/group-name": f"{name}-{vcjob['metadata']['uid']}",
                       "volcano.sh/job-version": str(status.get("version", 0)),
                       "volcano.sh/template-uid": f"{name}-{task['name']}",
                       "volcano.sh/job-retry-count": str(status.get("retryCount", 0))}
        out[task["name"]] = [create_pod(srv, vcjob, task["template"], f"{name}-{task['name']}-{k}", k,
                                        hostname=f"{name}-{task['name']}-{k}", subdomain=name,
                                        extra_labels={**common, "volcano.sh/job-namespace": NS},
                                        extra_annotations=annotations, index_key="volcano.sh/task-index")
                             for k in range(task["replicas"])]
    return out


def controller_pods(srv: FakeApiServer, app_id: str, flavor: str, attempt: str = "a") -> Dict[str, List[str]]:
    """Every pod of the app as its flavor's controllers create them, per role key."""
    if flavor == "job":
        name = name_of(app_id)
        keys = [j["metadata"]["labels"]["torchspec.dev/role-name"]
                for j in srv.objects("batch/v1", "jobs", NS, f"torchspec.dev/app-id={name}")]
        return {key: job_pods(srv, app_id, key, attempt) for key in keys}
    return jobset_pods(srv, app_id, attempt) if flavor == "jobset" else volcano_pods(srv, app_id)


def controller_says(srv: FakeApiServer, app_id: str, flavor: str, phase: str, restarts: int = 0) -> None:
    """The status the JobSet or Volcano controller writes for ``phase`` (Pending, Running, Restarting, Failed,
    Completed) after ``restarts`` whole-app restarts. JobSet: ``restarts``, ``replicatedJobsStatus`` and, once it
    is over, a ``Failed``/``Completed`` condition and ``terminalState``. Volcano: ``state.phase``, the pod counts,
    ``taskStatusCount``, ``retryCount`` and ``version``."""
    name = name_of(app_id)
    now = rfc3339()
    if flavor == "jobset":
        jobset = srv.get(*JOBSET_API, NS, name)
        assert jobset is not None
        status: Dict[str, Any] = {"restarts": restarts, "replicatedJobsStatus": [
            {"name": r["name"], "ready": int(phase == "Running"), "succeeded": int(phase == "Completed"),
             "failed": int(phase == "Failed"), "active": int(phase in ("Pending", "Running")), "suspended": 0}
            for r in jobset["spec"]["replicatedJobs"]]}
        if phase in ("Failed", "Completed"):
            reason, message = {
                "Failed": ("ReachedMaxRestarts", "jobset failed due to reaching max number of restarts") if restarts
                else ("FailedJobs", "jobset failed due to job failure"),
                "Completed": ("AllJobsCompleted", "jobset completed successfully")}[phase]
            status["conditions"] = [{"type": phase, "status": "True", "reason": reason, "message": message,
                                     "lastTransitionTime": now}]
            status["terminalState"] = phase
        srv.set_status(*JOBSET_API, NS, name, status)
        return
    vcjob = srv.get(*VOLCANO_API, NS, name)
    assert vcjob is not None
    pods = srv.pods(NS, f"volcano.sh/job-name={name}")
    phases = [p["status"]["phase"] for p in pods]
    tasks: Dict[str, Any] = {}
    for pod in pods:
        counts = tasks.setdefault(pod["metadata"]["labels"]["volcano.sh/task-spec"], {"phase": {}})["phase"]
        counts[pod["status"]["phase"]] = counts.get(pod["status"]["phase"], 0) + 1
    srv.set_status(*VOLCANO_API, NS, name, {
        "state": {"phase": phase, "lastTransitionTime": now}, "minAvailable": vcjob["spec"]["minAvailable"],
        **{key: phases.count(p) for key, p in (("pending", "Pending"), ("running", "Running"),
                                                ("succeeded", "Succeeded"), ("failed", "Failed"))},
        "taskStatusCount": tasks, "retryCount": restarts, "version": restarts,
        "conditions": [{"status": phase, "lastTransitionTime": now}]})


def restart_app(srv: FakeApiServer, app_id: str, flavor: str) -> int:
    """A whole-app restart, as the controller does one: the JobSet controller deletes its child Jobs (their pods
    go with them) and counts ``status.restarts``; Volcano (RestartJob) deletes every pod and counts
    ``status.retryCount``. Returns the count; the new pods are the caller's to create (:func:`controller_pods`)."""
    name = name_of(app_id)
    if flavor == "jobset":
        jobs = srv.registry.get("batch/v1", "jobs")
        for job in srv.objects("batch/v1", "jobs", NS, f"jobset.sigs.k8s.io/jobset-name={name}"):
            srv.store.delete(jobs, NS, job["metadata"]["name"], DeleteOptions(propagation="Foreground"))
        restarts = int((srv.get(*JOBSET_API, NS, name) or {}).get("status", {}).get("restarts", 0)) + 1
        controller_says(srv, app_id, flavor, "Running", restarts)
    else:
        pods = srv.registry.get("v1", "pods")
        for pod in srv.pods(NS, f"volcano.sh/job-name={name}"):
            srv.store.delete(pods, NS, pod["metadata"]["name"])
        restarts = int((srv.get(*VOLCANO_API, NS, name) or {}).get("status", {}).get("retryCount", 0)) + 1
        controller_says(srv, app_id, flavor, "Restarting", restarts)
    return restarts


# ----------------------------------------------------------------------------
# job flavor: submit, status, logs, cancel, list, describe
# ----------------------------------------------------------------------------


def test_submit_creates_the_service_then_a_job_per_role(sched: KubernetesScheduler, apiserver: FakeApiServer) -> None:
    app_id = sched.submit(make_app(), {})
    name = name_of(app_id)
    assert app_id == f"{NS}:{name}"
    service = apiserver.get("v1", "services", NS, name)
    assert service is not None and service["spec"]["clusterIP"] == "None"
    jobs = {j["metadata"]["name"]: j for j in apiserver.objects("batch/v1", "jobs", NS)}
    assert set(jobs) == {f"{name}-trainer", f"{name}-reader"}
    trainer = jobs[f"{name}-trainer"]
    assert trainer["spec"]["completionMode"] == "Indexed" and trainer["spec"]["parallelism"] == 2
    env = kubelet_env(trainer["spec"]["template"]["spec"], NS)
    assert env["TORCHSPEC_JOB_ID"] == f"kubernetes://test/{app_id}"  # the handle, namespace included
    assert env["TORCHSPEC_APP_ID"] == app_id
    posts = [r.path for r in apiserver.requests if r.verb == "POST"]
    assert posts == [f"/api/v1/namespaces/{NS}/services"] + [f"/apis/batch/v1/namespaces/{NS}/jobs"] * 2


def test_status_follows_the_pods(sched: KubernetesScheduler, apiserver: FakeApiServer) -> None:
    app_id = sched.submit(make_app(), {})
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.PENDING
    assert desc.name == "demo"  # the app's name, kept in an annotation: the objects' names are the app id
    assert [(r.role, [x.id for x in r.replicas]) for r in desc.roles_statuses] == [("trainer", [0, 1]), ("reader", [0])]

    t0, t1 = job_pods(apiserver, app_id, "trainer")
    r0, = job_pods(apiserver, app_id, "reader")
    assert sched.describe(app_id).state == AppState.PENDING  # type: ignore[union-attr]
    for pod in (t0, t1, r0):
        apiserver.set_pod_phase(NS, pod, "Running")
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.RUNNING
    replica = desc.roles_statuses[0].replicas[1]
    assert replica.state == AppState.RUNNING and replica.hostname == f"{name_of(app_id)}-trainer-1.{name_of(app_id)}"

    apiserver.set_pod_phase(NS, t0, "Succeeded", exit_code=0)
    apiserver.set_pod_phase(NS, t1, "Running", restarts=2)
    apiserver.set_pod_phase(NS, t1, "Failed", exit_code=3, message="loss is NaN")
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.RUNNING  # the Job controller has not decided yet
    failed = desc.roles_statuses[0].replicas[1]
    assert failed.state == AppState.FAILED and failed.exit_code == 3 and failed.num_restarts == 2  # type: ignore
    assert "trainer/1 exited with code 3 after 2 restarts: loss is NaN" in failed.msg  # type: ignore

    job_condition(apiserver, app_id, "trainer", "Failed", "BackoffLimitExceeded", "Job has reached the backoff limit")
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.FAILED
    assert desc.msg == "trainer/1 exited with code 3 after 2 restarts: loss is NaN"
    assert desc.num_restarts == 2


def test_a_replaced_pod_counts_as_a_restart_and_success_needs_every_job(sched: KubernetesScheduler,
                                                                        apiserver: FakeApiServer) -> None:
    app_id = sched.submit(make_app(max_retries=1), {})
    t0, t1 = job_pods(apiserver, app_id, "trainer")
    apiserver.set_pod_phase(NS, t1, "Failed", exit_code=1)
    time.sleep(1.1)  # creationTimestamp has one-second precision
    job = apiserver.get("batch/v1", "jobs", NS, f"{name_of(app_id)}-trainer")
    assert job is not None
    t1b = create_pod(apiserver, job, job["spec"]["template"], f"{name_of(app_id)}-trainer-1-b", 1)  # the replacement
    apiserver.set_pod_phase(NS, t1b, "Succeeded", exit_code=0)
    apiserver.set_pod_phase(NS, t0, "Succeeded", exit_code=0)
    desc = sched.describe(app_id)
    assert desc is not None
    replica = desc.roles_statuses[0].replicas[1]
    assert replica.state == AppState.SUCCEEDED and replica.num_restarts == 1  # type: ignore[attr-defined]
    job_condition(apiserver, app_id, "trainer", "Complete")
    assert sched.describe(app_id).state == AppState.RUNNING  # type: ignore[union-attr]  # reader still going
    job_condition(apiserver, app_id, "reader", "Complete")
    assert sched.describe(app_id).state == AppState.SUCCEEDED  # type: ignore[union-attr]


@pytest.mark.parametrize("verdict, state", [("SuccessCriteriaMet", AppState.SUCCEEDED),
                                            ("FailureTarget", AppState.FAILED)])
def test_the_job_controllers_verdict_counts_before_its_pods_have_ended(sched: KubernetesScheduler,
                                                                      apiserver: FakeApiServer, verdict: str,
                                                                      state: AppState) -> None:
    """Kubernetes 1.31+ writes SuccessCriteriaMet or FailureTarget first, Complete or Failed once the pods
    it ends have terminated (the real cluster does: test_kubernetes_cluster.py)."""
    app_id = sched.submit(make_app(), {})
    for role in ("trainer", "reader"):
        job_condition(apiserver, app_id, role, verdict, "BackoffLimitExceeded" if state == AppState.FAILED else "",
                      "Job has reached the specified backoff limit" if state == AppState.FAILED else "")
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == state
    if state == AppState.FAILED:
        assert "BackoffLimitExceeded" in desc.msg or "exited" in desc.msg, desc.msg


@pytest.mark.parametrize("setup, expected", [
    (dict(phase="Pending", waiting_reason="ImagePullBackOff", message='Back-off pulling image "busybox:1.36"'),
     'trainer/0 cannot pull its image (ImagePullBackOff): Back-off pulling image "busybox:1.36"'),
    (dict(phase="Pending", waiting_reason="ErrImagePull", message="not found"),
     "trainer/0 cannot pull its image (ErrImagePull): not found"),
    (dict(phase="Failed", exit_code=137, reason="OOMKilled"),
     "trainer/0 exited with code 137 (OOMKilled: it ran out of its memory limit)"),
    (dict(phase="Failed", reason="Evicted", message="The node was low on resource: memory."),
     "trainer/0 failed (Evicted): The node was low on resource: memory."),
])
def test_status_spells_out_what_went_wrong(sched: KubernetesScheduler, apiserver: FakeApiServer,
                                           setup: Dict[str, Any], expected: str) -> None:
    app_id = sched.submit(make_app(), {})
    t0, _ = job_pods(apiserver, app_id, "trainer")
    apiserver.set_pod_phase(NS, t0, **setup)
    desc = sched.describe(app_id)
    assert desc is not None and desc.msg == expected
    assert desc.roles_statuses[0].replicas[0].msg == expected  # type: ignore[attr-defined]


def test_status_says_when_a_pod_cannot_be_scheduled(sched: KubernetesScheduler, apiserver: FakeApiServer) -> None:
    app_id = sched.submit(make_app(), {})
    t0, _ = job_pods(apiserver, app_id, "trainer")
    message = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
    apiserver.set_status("v1", "pods", NS, t0, {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}]})
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.PENDING
    assert desc.msg == f"trainer/0 cannot be scheduled (Unschedulable): {message}"


@pytest.mark.parametrize("flavor", ["job", *CONTROLLED])
def test_logs_read_and_follow_a_replica(sched: KubernetesScheduler, apiserver: FakeApiServer, flavor: str) -> None:
    app_id = sched.submit(make_app(), {"flavor": flavor})
    t0, t1 = controller_pods(apiserver, app_id, flavor)["trainer"]
    apiserver.set_pod_phase(NS, t0, "Running")
    apiserver.set_pod_phase(NS, t1, "Running")
    old = datetime.now(timezone.utc) - timedelta(hours=1)
    apiserver.append_log(NS, t0, "old line\n", timestamp=old)
    apiserver.append_log(NS, t0, "step 1\nERROR boom\n")
    apiserver.append_log(NS, t1, "other replica\n")
    assert list(sched.log_iter(app_id, "trainer", 0)) == ["old line\n", "step 1\n", "ERROR boom\n"]
    assert list(sched.log_iter(app_id, "trainer", 0, regex="ERROR")) == ["ERROR boom\n"]
    assert list(sched.log_iter(app_id, "trainer", 0, since=old + timedelta(minutes=30))) == ["step 1\n", "ERROR boom\n"]
    assert list(sched.log_iter(app_id, "trainer", 0, until=old + timedelta(minutes=30))) == ["old line\n"]
    assert list(sched.log_iter(app_id, "trainer", 1)) == ["other replica\n"]
    assert list(sched.log_iter(app_id, "reader", 0)) == []  # its container has not started

    def kubelet() -> None:
        for i in range(3):
            time.sleep(0.2)
            apiserver.append_log(NS, t0, f"later {i}\n")
        apiserver.set_pod_phase(NS, t0, "Succeeded", exit_code=0)

    writer = threading.Thread(target=kubelet)
    writer.start()
    followed = list(sched.log_iter(app_id, "trainer", 0, should_tail=True,
                                   since=old + timedelta(minutes=30)))
    writer.join()
    assert followed == ["step 1\n", "ERROR boom\n", "later 0\n", "later 1\n", "later 2\n"]
    with pytest.raises(ValueError, match="no role"):
        sched.log_iter(app_id, "nope", 0)
    with pytest.raises(ValueError, match="replicas 0..1"):
        sched.log_iter(app_id, "trainer", 2)
    with pytest.raises(ValueError, match="combined"):
        sched.log_iter(app_id, "trainer", 0, streams=Stream.STDERR)


def test_logs_follow_a_replica_into_its_replacement_pod(sched: KubernetesScheduler, apiserver: FakeApiServer) -> None:
    app_id = sched.submit(make_app(max_retries=1), {})
    t0, _ = job_pods(apiserver, app_id, "trainer")
    apiserver.set_pod_phase(NS, t0, "Running")
    apiserver.append_log(NS, t0, "first try\n")

    def controller() -> None:
        time.sleep(0.3)
        apiserver.set_pod_phase(NS, t0, "Failed", exit_code=1)
        time.sleep(1.1)
        job = apiserver.get("batch/v1", "jobs", NS, f"{name_of(app_id)}-trainer")
        assert job is not None
        pod = create_pod(apiserver, job, job["spec"]["template"], f"{name_of(app_id)}-trainer-0-second", 0)
        apiserver.set_pod_phase(NS, pod, "Running")
        apiserver.append_log(NS, pod, "second try\n")
        time.sleep(0.3)
        apiserver.set_pod_phase(NS, pod, "Succeeded", exit_code=0)

    thread = threading.Thread(target=controller)
    thread.start()
    lines = list(sched.log_iter(app_id, "trainer", 0, should_tail=True))
    thread.join()
    assert lines == ["first try\n", "--- torchspec: restart 1 of replica trainer/0 ---\n", "second try\n"]


@pytest.mark.parametrize("flavor", CONTROLLED)
def test_logs_follow_a_replica_through_a_whole_app_restart(sched: KubernetesScheduler, apiserver: FakeApiServer,
                                                           flavor: str) -> None:
    """JobSet and Volcano restart an app by deleting its pods: following must wait for the new ones."""
    app_id = sched.submit(make_app(max_retries=1), {"flavor": flavor})
    t0 = controller_pods(apiserver, app_id, flavor)["trainer"][0]
    apiserver.set_pod_phase(NS, t0, "Running")
    apiserver.append_log(NS, t0, "first try\n")

    def controller() -> None:
        time.sleep(0.3)
        apiserver.set_pod_phase(NS, t0, "Failed", exit_code=1)
        time.sleep(0.5)
        restart_app(apiserver, app_id, flavor)
        time.sleep(0.5)
        pod = controller_pods(apiserver, app_id, flavor, attempt="b")["trainer"][0]
        apiserver.set_pod_phase(NS, pod, "Running")
        apiserver.append_log(NS, pod, "second try\n")
        time.sleep(0.3)
        apiserver.set_pod_phase(NS, pod, "Succeeded", exit_code=0)
        controller_says(apiserver, app_id, flavor, "Completed", 1)

    thread = threading.Thread(target=controller)
    thread.start()
    lines = list(sched.log_iter(app_id, "trainer", 0, should_tail=True))
    thread.join()
    assert lines == ["first try\n", "--- torchspec: restart 1 of replica trainer/0 ---\n", "second try\n"]


def test_cancel_deletes_every_object_and_pod(sched: KubernetesScheduler, apiserver: FakeApiServer) -> None:
    app_id = sched.submit(make_app(), {})
    pods = job_pods(apiserver, app_id, "trainer") + job_pods(apiserver, app_id, "reader")
    assert len(apiserver.pods(NS)) == len(pods) == 3
    other = sched.submit(make_app(name="other"), {})
    job_pods(apiserver, other, "reader")
    sched.cancel(app_id)
    name = name_of(app_id)
    assert apiserver.objects("batch/v1", "jobs", NS, f"torchspec.dev/app-id={name}") == []
    assert apiserver.pods(NS, f"torchspec.dev/app-id={name}") == []  # a Job's pods are orphaned by default
    assert apiserver.get("v1", "services", NS, name) is None
    assert sched.describe(app_id) is None
    assert len(apiserver.objects("batch/v1", "jobs", NS)) == 2 and len(apiserver.pods(NS)) == 1  # the other app
    sched.cancel(app_id)  # a no-op now


def test_list_and_describe_from_a_new_scheduler(sched: KubernetesScheduler, apiserver: FakeApiServer) -> None:
    app = make_app(port_map={"c10d": 29500}, max_retries=2, retry_policy=specs.RetryPolicy.REPLICA,
                   resource=specs.Resource(cpu=2, gpu=0, memMB=1024),
                   mounts=[specs.VolumeMount("data", "/data", read_only=True)])
    first = sched.submit(app, {})
    time.sleep(1.1)
    second = sched.submit(make_app(name="second"), {})
    fresh = KubernetesScheduler("another-session")
    try:
        listed = fresh.list()
        assert [(a.app_id, a.state) for a in listed] == [(first, AppState.PENDING), (second, AppState.PENDING)]
        desc = fresh.describe(first)
        assert desc is not None and [r.name for r in desc.roles] == ["trainer", "reader"]
        assert desc.roles[0] == app.roles[0] and desc.roles[1] == app.roles[1]
        assert desc.metadata["flavor"] == "job" and desc.metadata["session_name"] == "test"
        assert fresh.describe(name_of(first)) is not None  # a bare name: the context's namespace
        assert fresh.describe(f"{NS}:nope-123456") is None
        assert fresh.exists(first) and not fresh.exists("nope")
    finally:
        fresh.close()


# ----------------------------------------------------------------------------
# All or nothing, and one clear error per API failure
# ----------------------------------------------------------------------------


def test_a_failure_half_way_deletes_what_was_created(sched: KubernetesScheduler, apiserver: FakeApiServer) -> None:
    info = sched.submit_dryrun(make_app(), {})
    name = info.request.app_id
    # The second Job's name is taken (a create of two identical POSTs cannot be told apart by fail_next).
    squatter = copy.deepcopy(info.request.objects[2])
    squatter["metadata"]["labels"] = {"owner": "someone-else"}
    apiserver.create("batch/v1", "jobs", NS, squatter)
    with pytest.raises(BackendError) as raised:
        sched.schedule(info)
    message = raised.value.message
    assert f"creating Job {name}-reader" in message and "already exists" in message
    assert f"deleted again what was created before it: Service {name}, Job {name}-trainer" in message
    assert apiserver.get("v1", "services", NS, name) is None
    assert apiserver.get("batch/v1", "jobs", NS, f"{name}-trainer") is None
    assert apiserver.get("batch/v1", "jobs", NS, f"{name}-reader") is not None  # not ours: left alone


def test_an_injected_failure_on_the_jobs_deletes_the_service(sched: KubernetesScheduler,
                                                             apiserver: FakeApiServer) -> None:
    apiserver.fail_next("POST", r"/jobs$", 500)
    with pytest.raises(BackendError, match=r"error 500.*deleted again what was created before it: Service"):
        sched.submit(make_app(), {})
    assert apiserver.objects("v1", "services", NS) == [] and apiserver.objects("batch/v1", "jobs", NS) == []


def test_forbidden_is_one_clear_error(sched: KubernetesScheduler, apiserver: FakeApiServer) -> None:
    apiserver.fail_next("POST", r"/services$", 403)
    with pytest.raises(BackendError) as raised:
        sched.submit(make_app(), {})
    assert "(forbidden)" in raised.value.message and 'User "fake-user" cannot create resource "services"' in \
        raised.value.message
    assert raised.value.hint and "RBAC" in raised.value.hint
    assert "deleted again" not in raised.value.message  # nothing had been created
    apiserver.fail_next("GET", r"/pods$", 403)
    app_id = sched.submit(make_app(), {})
    with pytest.raises(BackendError, match=r"reading app .* \(forbidden\)"):
        sched.describe(app_id)


def test_conflict_is_one_clear_error(sched: KubernetesScheduler, apiserver: FakeApiServer) -> None:
    apiserver.fail_next("POST", r"/jobs$", 409)
    with pytest.raises(BackendError) as raised:
        sched.submit(make_app(), {})
    assert "(conflict)" in raised.value.message and raised.value.hint
    assert apiserver.objects("v1", "services", NS) == []


def test_a_missing_namespace_is_one_clear_error(sched: KubernetesScheduler) -> None:
    with pytest.raises(BackendError, match=r'namespace nowhere \(not found\): namespaces "nowhere" not found'):
        sched.submit(make_app(), {"namespace": "nowhere"})


def test_an_unreachable_cluster_is_one_clear_error(sched: KubernetesScheduler, apiserver: FakeApiServer) -> None:
    app_id = sched.submit(make_app(), {})
    apiserver.stop()
    for call in (lambda: sched.describe(app_id), sched.list, lambda: sched.submit(make_app(), {})):
        with pytest.raises(BackendError) as raised:
            call()
        assert f"cannot reach the Kubernetes API server at {apiserver.url}" in raised.value.message
        assert "Connection refused" in raised.value.message and raised.value.hint


def test_context_and_namespace_come_from_the_kubeconfig(apiserver: FakeApiServer, tmp_path: pathlib.Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    apiserver.add_namespace("team")
    monkeypatch.setenv("KUBECONFIG", apiserver.write_kubeconfig(tmp_path / "kc", namespace="team", context="lab"))
    scheduler = KubernetesScheduler("test")
    try:
        app_id = scheduler.submit(make_app(), {"context": "lab"})
        assert app_id == f"lab:team:{name_of(app_id)}"
        # list knows no context (the cluster does not): ids in the current one, the same app
        assert [a.app_id for a in scheduler.list()] == [f"team:{name_of(app_id)}"]
        with pytest.raises(BackendError, match="kubeconfig|context"):
            scheduler.submit(make_app(), {"context": "missing"})
    finally:
        scheduler.close()
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "does-not-exist"))
    with pytest.raises(BackendError):
        KubernetesScheduler("test").list()


def two_contexts(lab: FakeApiServer, elsewhere: FakeApiServer, path: pathlib.Path) -> str:
    """A kubeconfig whose current context, ``elsewhere``, is another cluster than the ``lab`` context's."""
    configs = [json.loads(pathlib.Path(server.write_kubeconfig(path.with_suffix(f".{name}"), context=name)).read_text())
               for server, name in ((lab, "lab"), (elsewhere, "elsewhere"))]
    merged = {**configs[1], **{key: configs[0][key] + configs[1][key] for key in ("clusters", "users", "contexts")}}
    path.write_text(json.dumps(merged))
    return str(path)


def test_an_app_submitted_through_another_context_is_reached_through_its_id(
        apiserver: FakeApiServer, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeApiServer() as elsewhere:
        monkeypatch.setenv("KUBECONFIG", two_contexts(apiserver, elsewhere, tmp_path / "kubeconfig"))
        submitter = KubernetesScheduler("test")
        app_id = submitter.submit(make_app(), {"context": "lab"})
        submitter.close()
        name = name_of(app_id)
        assert app_id == f"lab:{NS}:{name}"
        fresh = KubernetesScheduler("test")  # as a later `torchspec status` is: in the current context
        try:
            assert fresh.describe(f"{NS}:{name}") is None  # the current context is another cluster
            desc = fresh.describe(app_id)
            assert desc is not None and desc.app_id == app_id and desc.metadata["context"] == "lab"
            t0, _ = job_pods(apiserver, app_id, "trainer")
            apiserver.set_pod_phase(NS, t0, "Running")
            apiserver.append_log(NS, t0, "hello\n")
            assert list(fresh.log_iter(app_id, "trainer", 0)) == ["hello\n"]
            # the pod's TORCHSPEC_JOB_ID is the handle the CLI reaches the app with
            job = apiserver.get("batch/v1", "jobs", NS, f"{name}-trainer")
            assert job is not None
            handle = kubelet_env(job["spec"]["template"]["spec"], NS)["TORCHSPEC_JOB_ID"]
            assert handle == f"kubernetes://test/{app_id}"
            status = torchspec("status", "--json", handle)
            assert status.returncode == 0, status.stderr
            assert json.loads(status.stdout)["state"] == "RUNNING"
            assert torchspec("cancel", handle).returncode == 0
            assert apiserver.objects("batch/v1", "jobs", NS) == [] and apiserver.pods(NS) == []
            assert fresh.describe(app_id) is None
            assert not [r for r in elsewhere.requests if r.verb in ("POST", "DELETE")]
        finally:
            fresh.close()


def test_an_id_no_app_can_have_is_an_unknown_app(sched: KubernetesScheduler, apiserver: FakeApiServer,
                                                 kubeconfig: str) -> None:
    for app_id in ("default:x=y", "Bad_NS:demo", ":default:demo"):
        assert sched.describe(app_id) is None and not sched.exists(app_id)
        sched.cancel(app_id)  # a no-op
        with pytest.raises(ValueError, match="unknown app"):
            sched.log_iter(app_id, "trainer", 0)
    assert apiserver.requests == []  # not even asked: a label selector of "x=y" is an API error
    out = torchspec("status", "kubernetes://s/default:x=y")
    assert out.returncode == 2 and "unknown app" in out.stderr


# ----------------------------------------------------------------------------
# jobset and volcano: submit, status, cancel
# ----------------------------------------------------------------------------


def test_jobset_submit_status_cancel(sched: KubernetesScheduler, apiserver: FakeApiServer) -> None:
    app_id = sched.submit(make_app(max_retries=2), {"flavor": "jobset"})
    name = name_of(app_id)
    jobset = apiserver.get("jobset.x-k8s.io/v1alpha2", "jobsets", NS, name)
    assert jobset is not None and jobset["spec"]["failurePolicy"]["maxRestarts"] == 2
    assert apiserver.objects("batch/v1", "jobs", NS) == [] and apiserver.objects("v1", "services", NS) == []
    assert sched.describe(app_id).state == AppState.PENDING  # type: ignore[union-attr]
    # The JobSet controller's pods (via child Jobs; owned by the JobSet here, for the garbage collector)
    pods = []
    for rjob in jobset["spec"]["replicatedJobs"]:
        template = rjob["template"]["spec"]["template"]
        for k in range(rjob["template"]["spec"]["completions"]):
            pods.append(create_pod(apiserver, jobset, template, f"{name}-{rjob['name']}-0-{k}-abcde", k,
                                   hostname=f"{name}-{rjob['name']}-0-{k}", subdomain=name))
    for pod in pods:
        apiserver.set_pod_phase(NS, pod, "Running")
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.RUNNING and desc.metadata["flavor"] == "jobset"
    assert desc.roles_statuses[0].replicas[1].hostname == f"{name}-trainer-0-1.{name}"
    apiserver.set_status("jobset.x-k8s.io/v1alpha2", "jobsets", NS, name, {"restarts": 1, "conditions": [
        {"type": "Failed", "status": "True", "reason": "FailedJobs", "message": "jobset failed due to job failure"}]})
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.FAILED and desc.num_restarts == 1
    assert "jobset failed due to job failure" in desc.msg
    apiserver.set_status("jobset.x-k8s.io/v1alpha2", "jobsets", NS, name, {"conditions": [
        {"type": "Completed", "status": "True", "reason": "AllJobsCompleted", "message": ""}]})
    assert sched.describe(app_id).state == AppState.SUCCEEDED  # type: ignore[union-attr]
    assert [a.app_id for a in sched.list()] == [app_id]
    sched.cancel(app_id)
    assert apiserver.get("jobset.x-k8s.io/v1alpha2", "jobsets", NS, name) is None
    assert apiserver.pods(NS) == [] and sched.describe(app_id) is None


def test_volcano_submit_status_cancel(sched: KubernetesScheduler, apiserver: FakeApiServer) -> None:
    app_id = sched.submit(make_app(), {"flavor": "volcano", "queue": "research"})
    name = name_of(app_id)
    vcjob = apiserver.get("batch.volcano.sh/v1alpha1", "jobs", NS, name)
    assert vcjob is not None and vcjob["spec"]["queue"] == "research" and vcjob["spec"]["minAvailable"] == 3
    assert apiserver.objects("batch/v1", "jobs", NS) == []
    pods = []
    for task in vcjob["spec"]["tasks"]:
        for k in range(task["replicas"]):
            pods.append(create_pod(apiserver, vcjob, task["template"], f"{name}-{task['name']}-{k}", k,
                                   hostname=f"{name}-{task['name']}-{k}", subdomain=name,
                                   index_key="volcano.sh/task-index"))
    apiserver.set_status("batch.volcano.sh/v1alpha1", "jobs", NS, name, {"state": {"phase": "Pending"}})
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.PENDING
    for pod in pods:
        apiserver.set_pod_phase(NS, pod, "Running")
    apiserver.set_status("batch.volcano.sh/v1alpha1", "jobs", NS, name, {"state": {"phase": "Running"}})
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.RUNNING
    assert [len(r.replicas) for r in desc.roles_statuses] == [2, 1]
    apiserver.set_pod_phase(NS, pods[1], "Failed", exit_code=2)
    apiserver.set_status("batch.volcano.sh/v1alpha1", "jobs", NS, name,
                         {"state": {"phase": "Terminated", "reason": "PodFailed"}, "retryCount": 0})
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.FAILED and desc.msg == "trainer/1 exited with code 2"
    apiserver.set_status("batch.volcano.sh/v1alpha1", "jobs", NS, name, {"state": {"phase": "Completed"}})
    assert sched.describe(app_id).state == AppState.SUCCEEDED  # type: ignore[union-attr]
    assert [a.app_id for a in sched.list()] == [app_id]
    sched.cancel(app_id)
    assert apiserver.get("batch.volcano.sh/v1alpha1", "jobs", NS, name) is None and apiserver.pods(NS) == []


def expected_host(app_id: str, flavor: str, role: str, k: int) -> str:
    """The hostname the flavor's controllers give replica ``k``, under the app's subdomain."""
    name = name_of(app_id)
    return f"{name}-{role}-0-{k}.{name}" if flavor == "jobset" else f"{name}-{role}-{k}.{name}"


@pytest.mark.parametrize("flavor", CONTROLLED)
def test_status_while_the_pods_go_from_pending_to_running(sched: KubernetesScheduler, apiserver: FakeApiServer,
                                                          flavor: str) -> None:
    app_id = sched.submit(make_app(), {"flavor": flavor})
    desc = sched.describe(app_id)  # no pods yet
    assert desc is not None and desc.state == AppState.PENDING
    assert [(r.role, [(x.id, x.state, x.hostname) for x in r.replicas]) for r in desc.roles_statuses] == [
        ("trainer", [(k, AppState.PENDING, expected_host(app_id, flavor, "trainer", k)) for k in (0, 1)]),
        ("reader", [(0, AppState.PENDING, expected_host(app_id, flavor, "reader", 0))])]

    pods = controller_pods(apiserver, app_id, flavor)
    (t0, t1), (r0,) = pods["trainer"], pods["reader"]
    controller_says(apiserver, app_id, flavor, "Pending")
    message = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
    apiserver.set_status("v1", "pods", NS, t1, {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}]})
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.PENDING
    assert desc.msg == f"trainer/1 cannot be scheduled (Unschedulable): {message}"
    assert [[x.state for x in r.replicas] for r in desc.roles_statuses] == [[AppState.PENDING] * 2, [AppState.PENDING]]
    assert [x.hostname for x in desc.roles_statuses[0].replicas] == [expected_host(app_id, flavor, "trainer", k)
                                                                     for k in (0, 1)]
    apiserver.set_pod_phase(NS, t1, "Pending")  # scheduled now: its container is being created
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.PENDING
    assert desc.msg == ("volcano job Pending" if flavor == "volcano" else "")

    apiserver.set_pod_phase(NS, t0, "Running")
    apiserver.set_pod_phase(NS, t1, "Running")  # the reader's container is still being created
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.RUNNING
    assert [[x.state for x in r.replicas] for r in desc.roles_statuses] == [[AppState.RUNNING] * 2, [AppState.PENDING]]
    apiserver.set_pod_phase(NS, r0, "Running")
    controller_says(apiserver, app_id, flavor, "Running")
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.RUNNING and desc.num_restarts == 0 and desc.msg == ""
    assert all(x.state == AppState.RUNNING for r in desc.roles_statuses for x in r.replicas)
    assert [(a.app_id, a.state) for a in sched.list()] == [(app_id, AppState.RUNNING)]


@pytest.mark.parametrize("flavor", CONTROLLED)
def test_a_failed_pod_then_the_controller_fails_the_app(sched: KubernetesScheduler, apiserver: FakeApiServer,
                                                        flavor: str) -> None:
    app_id = sched.submit(make_app(max_retries=1), {"flavor": flavor})  # one whole-app restart
    pods = controller_pods(apiserver, app_id, flavor)
    for pod in pods["trainer"] + pods["reader"]:
        apiserver.set_pod_phase(NS, pod, "Running")
    controller_says(apiserver, app_id, flavor, "Running")
    apiserver.set_pod_phase(NS, pods["trainer"][1], "Failed", exit_code=3, message="loss is NaN")
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.RUNNING  # the controller has not acted yet
    failed = desc.roles_statuses[0].replicas[1]
    assert (failed.state, failed.exit_code, failed.num_restarts) == (AppState.FAILED, 3, 0)  # type: ignore
    assert failed.msg == desc.msg == "trainer/1 exited with code 3: loss is NaN"  # type: ignore[attr-defined]
    assert desc.roles_statuses[0].replicas[0].state == AppState.RUNNING

    assert restart_app(apiserver, app_id, flavor) == 1
    pods = controller_pods(apiserver, app_id, flavor, attempt="b")
    for pod in pods["trainer"] + pods["reader"]:
        apiserver.set_pod_phase(NS, pod, "Running")
    controller_says(apiserver, app_id, flavor, "Running", restarts=1)
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.RUNNING and desc.num_restarts == 1 and desc.msg == ""
    replica = desc.roles_statuses[0].replicas[1]
    assert (replica.state, replica.exit_code) == (AppState.RUNNING, None)  # type: ignore[attr-defined]

    apiserver.set_pod_phase(NS, pods["trainer"][0], "Failed", exit_code=3, reason="Error")
    assert sched.describe(app_id).state == AppState.RUNNING  # type: ignore[union-attr]
    controller_says(apiserver, app_id, flavor, "Failed", restarts=1)
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.FAILED and desc.num_restarts == 1
    assert desc.msg == "trainer/0 exited with code 3"
    failed = desc.roles_statuses[0].replicas[0]
    assert (failed.state, failed.exit_code) == (AppState.FAILED, 3)  # type: ignore[attr-defined]
    assert [(a.app_id, a.state) for a in sched.list()] == [(app_id, AppState.FAILED)]


@pytest.mark.parametrize("flavor", CONTROLLED)
def test_a_controlled_app_succeeds_when_its_controller_says_so(sched: KubernetesScheduler, apiserver: FakeApiServer,
                                                               flavor: str) -> None:
    app_id = sched.submit(make_app(), {"flavor": flavor})
    pods = controller_pods(apiserver, app_id, flavor)
    for pod in pods["trainer"] + pods["reader"]:
        apiserver.set_pod_phase(NS, pod, "Succeeded", exit_code=0)
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.RUNNING  # every pod done; the controller has not said so
    controller_says(apiserver, app_id, flavor, "Completed")
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.SUCCEEDED and desc.msg == ""
    assert [x.exit_code for r in desc.roles_statuses for x in r.replicas] == [0, 0, 0]  # type: ignore[attr-defined]


@pytest.mark.parametrize("flavor", CONTROLLED)
def test_list_and_describe_a_controlled_app_from_a_new_scheduler(sched: KubernetesScheduler, apiserver: FakeApiServer,
                                                                 flavor: str) -> None:
    app = make_app(port_map={"c10d": 29500}, max_retries=2, retry_policy=specs.RetryPolicy.REPLICA,
                   resource=specs.Resource(cpu=2, gpu=0, memMB=1024),
                   mounts=[specs.VolumeMount("data", "/data", read_only=True)])
    first = sched.submit(app, {"flavor": flavor})
    pods = controller_pods(apiserver, first, flavor)
    for pod in pods["trainer"] + pods["reader"]:
        apiserver.set_pod_phase(NS, pod, "Running")
    controller_says(apiserver, first, flavor, "Running")
    time.sleep(1.02 - time.time() % 1)  # into the next second: creationTimestamp has one-second precision
    second = sched.submit(make_app(name="second"), {})  # a job-flavor app beside it
    fresh = KubernetesScheduler("another-session")
    try:
        listed = fresh.list()  # a JobSet's child Jobs are no apps of their own
        assert [(a.app_id, a.state) for a in listed] == [(first, AppState.RUNNING), (second, AppState.PENDING)]
        desc = fresh.describe(first)
        assert desc is not None and desc.app_id == first and desc.state == AppState.RUNNING
        assert [(r.name, r.image, r.num_replicas, r.retry_policy, r.max_retries) for r in desc.roles] == [
            ("trainer", "busybox:1.36", 2, specs.RetryPolicy.REPLICA, 2),
            ("reader", "busybox:1.36", 1, specs.RetryPolicy.APPLICATION, 0)]
        assert desc.roles == app.roles
        kind = "JobSet" if flavor == "jobset" else "Job"
        assert desc.metadata["flavor"] == flavor and desc.metadata["session_name"] == "test"
        assert desc.metadata["objects"] == f"{kind} {name_of(first)}"
        assert [(r.role, [(x.id, x.hostname) for x in r.replicas]) for r in desc.roles_statuses] == [
            ("trainer", [(k, expected_host(first, flavor, "trainer", k)) for k in (0, 1)]),
            ("reader", [(0, expected_host(first, flavor, "reader", 0))])]
        assert fresh.describe(name_of(first)) is not None  # a bare name: the context's namespace
        assert fresh.exists(first)
        fresh.cancel(first)
        assert fresh.describe(first) is None and apiserver.pods(NS, f"torchspec.dev/app-id={name_of(first)}") == []
        assert apiserver.objects("batch/v1", "jobs", NS, f"jobset.sigs.k8s.io/jobset-name={name_of(first)}") == []
        assert [a.app_id for a in fresh.list()] == [second]
    finally:
        fresh.close()


def test_a_missing_crd_is_one_clear_error(sched: KubernetesScheduler, apiserver: FakeApiServer) -> None:
    apiserver.fail_next("POST", r"/jobsets$", 404, message="the server could not find the requested resource")
    with pytest.raises(BackendError) as raised:
        sched.submit(make_app(), {"flavor": "jobset"})
    assert "(not found)" in raised.value.message and "CRD is installed" in (raised.value.hint or "")


def test_wait_for_change_wakes_on_the_controllers_write_not_at_the_timeout(sched: KubernetesScheduler,
                                                                           apiserver: FakeApiServer) -> None:
    app_id = sched.submit(make_app(), {})
    assert sched.describe(app_id).state == AppState.PENDING  # type: ignore[union-attr]  # reads the version
    start = time.monotonic()
    sched.wait_for_change(app_id, 0.3)  # nothing happens: the whole timeout
    assert time.monotonic() - start >= 0.3
    sched.describe(app_id)
    woke_after_write(lambda: sched.wait_for_change(app_id, WAKE_TIMEOUT_S),
                     lambda: job_condition(apiserver, app_id, "trainer", "Complete"))


#: Long enough that a wait ending before it can only have been woken (a machine under load included).
WAKE_TIMEOUT_S = 120


def woke_after_write(wait: Callable[[], None], write: Callable[[], None]) -> None:
    """``wait()`` (up to WAKE_TIMEOUT_S) ends after ``write()``, made 0.2 s into it, and long before its timeout:
    woken by the write, neither before it nor at the timeout."""
    writing = threading.Event()  # set as the write begins: the wake may come before write() returns
    timer = threading.Timer(0.2, lambda: (writing.set(), write()))
    timer.start()
    start = time.monotonic()
    try:
        wait()
        assert writing.is_set(), "woke before the write"
        assert time.monotonic() - start < WAKE_TIMEOUT_S / 2
    finally:
        timer.join()


@pytest.mark.parametrize("flavor", CONTROLLED)
def test_wait_for_change_watches_the_custom_object(sched: KubernetesScheduler, apiserver: FakeApiServer,
                                                   flavor: str) -> None:
    app_id = sched.submit(make_app(), {"flavor": flavor, "queue": "default"})
    sched.describe(app_id)
    api = JOBSET_API if flavor == "jobset" else VOLCANO_API
    status = {"restarts": 0} if flavor == "jobset" else {"state": {"phase": "Running"}}
    woke_after_write(lambda: sched.wait_for_change(app_id, WAKE_TIMEOUT_S),
                     lambda: apiserver.set_status(*api, NS, name_of(app_id), status))


def test_list_asks_once_per_kind_whatever_the_number_of_apps(sched: KubernetesScheduler,
                                                             apiserver: FakeApiServer) -> None:
    """``apply`` lists before it plans: with nothing to do that list is all it asks, so it must not grow
    with the apps (it read each app's Jobs and pods again: two requests per app)."""
    ids = [sched.submit(make_app(f"app{i}"), {}) for i in range(6)]
    job_pods(apiserver, ids[0], "trainer")
    apiserver.clear_requests()
    listed = sched.list()
    assert sorted(a.app_id for a in listed) == sorted(ids)
    gets = [r for r in apiserver.requests if r.verb == "GET"]
    assert len(gets) <= 2 + 4, gets  # Jobs, pods, and one list per custom kind (JobSet, Volcano, Kubeflow)
    assert {a.state for a in listed if a.app_id == ids[0]} == {AppState.PENDING}
