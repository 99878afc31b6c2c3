"""The controllers of a Kubeflow cluster, played against the API stand-in: what each writes, as it writes it.

:class:`TrainingOperator` is the Kubeflow Training Operator (v1.9) for PyTorchJobs: a pod and a headless
Service per replica (``{job}-master-0``, ``{job}-worker-{i}``, labelled ``training.kubeflow.org/*``, its
variables appended to the container's env) and the job's ``status.conditions`` (Created, Running,
Restarting, Succeeded, Failed, Suspended) with the operator's reasons and messages. :class:`Trainer` is
Kubeflow Trainer (v2.3) for TrainJobs: a JobSet named after the TrainJob built from its
ClusterTrainingRuntime, the JobSet's pods (``{job}-node-0-{k}-xxxxx``, the runtime patch's labels, the
torch plugin's ``PET_*``), and the TrainJob's conditions (Created, Suspended, Complete, Failed).
:class:`Kueue` makes a Workload for a job that names a LocalQueue, keeps it pending with Kueue's message,
then admits it: the Workload admitted, the job unsuspended. Each step is one method a test calls in
order, as the controllers' reconcile loops would act; nothing runs by itself.
"""

from __future__ import annotations

import copy
import hashlib
from typing import Any, Dict, List, Optional

from apiserver import FakeApiServer, rfc3339

Obj = Dict[str, Any]
PYTORCHJOB_API = ("kubeflow.org/v1", "pytorchjobs")
TRAINJOB_API = ("trainer.kubeflow.org/v1alpha1", "trainjobs")
RUNTIME_API = ("trainer.kubeflow.org/v1alpha1", "clustertrainingruntimes")
JOBSET_API = ("jobset.x-k8s.io/v1alpha2", "jobsets")
WORKLOAD_API = ("kueue.x-k8s.io/v1beta1", "workloads")
INDEX_KEY = "batch.kubernetes.io/job-completion-index"

#: Kubeflow Trainer's torch-distributed ClusterTrainingRuntime (manifests/base/runtimes/torch_distributed.yaml;
#: v2.3's torch policy has no numProcPerNode any more, see tests/kube/crds).
TORCH_DISTRIBUTED: Obj = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime",
    "metadata": {"name": "torch-distributed"},
    "spec": {"mlPolicy": {"numNodes": 1, "torch": {}},
             "template": {"spec": {"replicatedJobs": [{"name": "node", "template": {
                 "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                 "spec": {"template": {"spec": {"containers": [{
                     "name": "node", "image": "pytorch/pytorch:2.7.1-cuda12.6-cudnn9-runtime",
                     "command": ["/bin/bash", "-c", "echo 'Torch Distributed Runtime'"]}]}}}}}]}}},
}


def condition(kind: str, status: bool, reason: str, message: str, updated: bool = True) -> Obj:
    """A status condition; ``updated`` False for a metav1.Condition (Trainer, Kueue), which has no lastUpdateTime."""
    now = rfc3339()
    out = {"type": kind, "status": "True" if status else "False", "reason": reason, "message": message,
           "lastTransitionTime": now}
    return {**out, "lastUpdateTime": now} if updated else out


def owner_ref(owner: Obj) -> Obj:
    return {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}


def suffix(text: str) -> str:
    """The five random characters a generated name ends with, made repeatable."""
    return hashlib.sha1(text.encode()).hexdigest()[:5]


class _Controller:
    api: tuple[str, str] = ("", "")

    def __init__(self, srv: FakeApiServer, namespace: str = "default") -> None:
        self.srv, self.ns = srv, namespace

    def get(self, name: str) -> Obj:
        found = self.srv.get(*self.api, self.ns, name)
        assert found is not None, f"no {self.api[1]} {name}"
        return found

    def conditions(self, name: str) -> List[Obj]:
        return list((self.get(name).get("status") or {}).get("conditions") or [])

    def say(self, name: str, *new: Obj, **status: Any) -> None:
        """Write conditions as the operators do: one entry per type, updated in place, the rest kept."""
        conds = {c["type"]: c for c in self.conditions(name)}
        for c in new:
            conds[c["type"]] = c
        old = {k: v for k, v in (self.get(name).get("status") or {}).items() if k != "conditions"}
        self.srv.set_status(*self.api, self.ns, name, {**old, **status, "conditions": list(conds.values())})

    def pod(self, owner: Obj, template: Obj, name: str, labels: Obj, env: List[Obj], annotations: Obj,
            hostname: str = "", subdomain: str = "") -> str:
        spec = copy.deepcopy(template["spec"])
        spec["containers"][0]["env"] = list(spec["containers"][0].get("env") or []) + env
        if hostname:
            spec.update(hostname=hostname, subdomain=subdomain)
        pod = {"apiVersion": "v1", "kind": "Pod", "spec": spec,
               "metadata": {"name": name, "labels": {**(template.get("metadata") or {}).get("labels", {}), **labels},
                            "annotations": annotations, "ownerReferences": [owner_ref(owner)]}}
        self.srv.create("v1", "pods", self.ns, pod)
        self.srv.set_pod_phase(self.ns, name, "Pending")
        return name

    def pods(self, name: str, selector: str) -> List[str]:
        return sorted(p["metadata"]["name"] for p in self.srv.pods(self.ns, f"{selector}={name}"))

    def set_all(self, pods: List[str], phase: str, exit_code: Optional[int] = None) -> None:
        for pod in pods:
            self.srv.set_pod_phase(self.ns, pod, phase, exit_code=exit_code)


class TrainingOperator(_Controller):
    """The Training Operator's PyTorchJob controller."""

    api = PYTORCHJOB_API

    def replicas(self, name: str) -> List[tuple[str, int]]:
        """(replica type, index) of every replica, Master first: replica k of the role."""
        specs = self.get(name)["spec"]["pytorchReplicaSpecs"]
        return [(kind, i) for kind in ("Master", "Worker") if kind in specs for i in range(specs[kind]["replicas"])]

    def pod_name(self, name: str, k: int) -> str:
        kind, i = self.replicas(name)[k]
        return f"{name}-{kind.lower()}-{i}"

    def reconcile(self, name: str) -> List[str]:
        """Created; then, unless suspended, a Service and a pod per replica. Returns the pods, Master first."""
        job = self.get(name)
        self.say(name, condition("Created", True, "PyTorchJobCreated", f"PyTorchJob {self.ns}/{name} is created."))
        if job["spec"].get("runPolicy", {}).get("suspend"):
            self.say(name, condition("Suspended", True, "PyTorchJobSuspended",
                                     f"PyTorchJob {self.ns}/{name} is suspended."),
                     condition("Running", False, "PyTorchJobSuspended", f"PyTorchJob {name} is suspended."))
            return []
        return [self._replica(job, kind, i) for kind, i in self.replicas(name)]

    def _replica(self, job: Obj, kind: str, i: int) -> str:
        name = job["metadata"]["name"]
        spec = job["spec"]
        rank = i + (1 if kind == "Worker" else 0)
        world = sum(r["replicas"] for r in spec["pytorchReplicaSpecs"].values())
        template = spec["pytorchReplicaSpecs"][kind]["template"]
        port = next((p["containerPort"] for p in template["spec"]["containers"][0].get("ports", [])
                     if p.get("name") == "pytorchjob-port"), 23456)
        env = [{"name": "PYTHONUNBUFFERED", "value": "1"}, {"name": "MASTER_PORT", "value": str(port)},
               {"name": "PET_MASTER_PORT", "value": str(port)}, {"name": "MASTER_ADDR", "value": f"{name}-master-0"},
               {"name": "PET_MASTER_ADDR", "value": f"{name}-master-0"}, {"name": "WORLD_SIZE", "value": str(world)},
               {"name": "RANK", "value": str(rank)}, {"name": "PET_NPROC_PER_NODE", "value": spec["nprocPerNode"]},
               {"name": "PET_NODE_RANK", "value": str(rank)}, {"name": "PET_NNODES", "value": str(world)}]
        marks = {"training.kubeflow.org/job-name": name, "training.kubeflow.org/operator-name": "pytorchjob-controller",
                 "training.kubeflow.org/replica-type": kind.lower(), "training.kubeflow.org/replica-index": str(i)}
        if kind == "Master":
            marks["training.kubeflow.org/job-role"] = "master"
        pod = f"{name}-{kind.lower()}-{i}"
        self.srv.create("v1", "services", self.ns, {
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": pod, "labels": dict(marks), "ownerReferences": [owner_ref(job)]},
            "spec": {"clusterIP": "None", "selector": dict(marks),
                     "ports": [{"name": "pytorchjob-port", "port": port}]}})
        return self.pod(job, template, pod, marks, env, {})

    def running(self, name: str) -> None:
        self.set_all(self.pods(name, "training.kubeflow.org/job-name"), "Running")
        self.say(name, condition("Running", True, "PyTorchJobRunning", f"PyTorchJob {self.ns}/{name} is running."),
                 replicaStatuses={k: {"active": v["replicas"]}
                                  for k, v in self.get(name)["spec"]["pytorchReplicaSpecs"].items()})

    def restart(self, name: str, k: int, exit_code: int) -> None:
        """restartPolicy OnFailure: the kubelet restarts the replica's container; the operator says Restarting."""
        pod = self.pod_name(name, k)
        self.srv.set_pod_phase(self.ns, pod, "Running", exit_code=exit_code, restarts=1)
        self.srv.set_pod_phase(self.ns, pod, "Running")
        kind = self.replicas(name)[k][0]
        self.say(name, condition("Running", False, "PyTorchJobRestarting", ""),
                 condition("Restarting", True, "PyTorchJobRestarting",
                           f"PyTorchJob {name} is restarting because 1 {kind} replica(s) failed."))

    def fail(self, name: str, k: int, exit_code: int, message: str = "") -> None:
        """A replica's pod failed with no retries left: the job failed."""
        self.srv.set_pod_phase(self.ns, self.pod_name(name, k), "Failed", exit_code=exit_code, message=message)
        kind = self.replicas(name)[k][0]
        self.say(name, condition("Running", False, "PyTorchJobFailed", ""), condition(
            "Failed", True, "PyTorchJobFailed",
            f"PyTorchJob {self.ns}/{name} is failed because 1 {kind} replica(s) failed."))

    def succeed(self, name: str) -> None:
        self.set_all(self.pods(name, "training.kubeflow.org/job-name"), "Succeeded", exit_code=0)
        self.say(name, condition("Running", False, "PyTorchJobSucceeded", ""), condition(
            "Succeeded", True, "PyTorchJobSucceeded", f"PyTorchJob {self.ns}/{name} successfully completed."))

    def resume(self, name: str) -> List[str]:
        """Unsuspended (by Kueue): Suspended turns False, the pods are created."""
        self.say(name, condition("Suspended", False, "PyTorchJobResumed", f"PyTorchJob {name} is resumed."))
        return self.reconcile(name)


class Trainer(_Controller):
    """Kubeflow Trainer's TrainJob controller, and the JobSet and Job controllers under it."""

    api = TRAINJOB_API

    def reconcile(self, name: str) -> List[str]:
        """The runtime's JobSet (suspended with the TrainJob), Created; unless suspended, the node pods."""
        trainjob = self.get(name)
        runtime = self.srv.get(*RUNTIME_API, None, trainjob["spec"]["runtimeRef"]["name"])
        assert runtime is not None, "the runtime the TrainJob refers to"
        suspended = bool(trainjob["spec"].get("suspend"))
        if self.srv.get(*JOBSET_API, self.ns, name) is None:
            self.srv.create(*JOBSET_API, self.ns, self._jobset(trainjob, runtime, suspended))
        self.say(name, condition("Created", True, "JobsCreationSucceeded", "Succeeded to create Jobs", False))
        if suspended:
            self.say(name, condition("Suspended", True, "Suspended", "TrainJob is suspended", False))
            return []
        return self._pods(trainjob)

    def _jobset(self, trainjob: Obj, runtime: Obj, suspended: bool) -> Obj:
        """The JobSet: the runtime's node job with the trainer's fields and torchspec's patch applied."""
        name, trainer = trainjob["metadata"]["name"], trainjob["spec"]["trainer"]
        rjob = copy.deepcopy(runtime["spec"]["template"]["spec"]["replicatedJobs"][0])
        patch = trainjob["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]
        pod = rjob["template"]["spec"]["template"]
        patched = patch["template"]["spec"]["template"]
        pod.setdefault("metadata", {}).setdefault("labels", {}).update(patched["metadata"].get("labels", {}))
        container = pod["spec"]["containers"][0]
        for key in ("image", "command", "args", "env"):
            container[key] = copy.deepcopy(trainer[key])
        container["resources"] = copy.deepcopy(trainer.get("resourcesPerNode") or {})
        container.update({k: v for k, v in patched["spec"]["containers"][0].items() if k != "name"})
        pod["spec"].update({k: v for k, v in patched["spec"].items() if k != "containers"})
        pod["spec"]["restartPolicy"] = "OnFailure"
        rjob["template"]["spec"].update(completionMode="Indexed", completions=trainer["numNodes"],
                                        parallelism=trainer["numNodes"])
        return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                "metadata": {"name": name, "labels": {"trainer.kubeflow.org/trainjob-name": name},
                             "ownerReferences": [owner_ref(trainjob)]},
                "spec": {"suspend": suspended, "replicatedJobs": [rjob]}}

    def _pods(self, trainjob: Obj) -> List[str]:
        name = trainjob["metadata"]["name"]
        jobset = self.srv.get(*JOBSET_API, self.ns, name)
        assert jobset is not None
        template = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
        nodes, nproc = trainjob["spec"]["trainer"]["numNodes"], trainjob["spec"]["trainer"].get("numProcPerNode")
        rank = {"fieldRef": {"fieldPath": f"metadata.annotations['{INDEX_KEY}']"}}
        env = [{"name": "PET_NNODES", "value": str(nodes)},
               {"name": "PET_NPROC_PER_NODE", "value": str(nproc or "auto")},
               {"name": "PET_NODE_RANK", "valueFrom": rank},
               {"name": "PET_MASTER_ADDR", "value": f"{name}-node-0-0.{name}"},
               {"name": "PET_MASTER_PORT", "value": "29400"}]
        marks = {"jobset.sigs.k8s.io/jobset-name": name, "jobset.sigs.k8s.io/replicatedjob-name": "node",
                 "jobset.sigs.k8s.io/job-index": "0"}
        return [self.pod(jobset, template, f"{name}-node-0-{k}-{suffix(f'{name}{k}')}", {**marks, INDEX_KEY: str(k)},
                         env, {**marks, INDEX_KEY: str(k)}, hostname=f"{name}-node-0-{k}", subdomain=name)
                for k in range(nodes)]

    def node_pods(self, name: str) -> List[str]:
        return self.pods(name, "jobset.sigs.k8s.io/jobset-name")

    def running(self, name: str) -> None:
        self.set_all(self.node_pods(name), "Running")
        self.say(name, jobsStatus=[{"name": "node", "active": 1, "ready": 1, "succeeded": 0, "failed": 0,
                                    "suspended": 0}])

    def fail(self, name: str, k: int, exit_code: int, remove_pods: bool = False) -> None:
        """Node ``k`` fails; ``remove_pods``: as the real Job controller then does with pods that restart in
        place (restartPolicy OnFailure, JobSet's default), the node pods are deleted."""
        pod = next(p for p in self.node_pods(name) if p.startswith(f"{name}-node-0-{k}-"))
        self.srv.set_pod_phase(self.ns, pod, "Failed", exit_code=exit_code)
        if remove_pods:
            for pod in self.node_pods(name):
                self.srv.store.delete(self.srv.registry.get("v1", "pods"), self.ns, pod)
        self.say(name, condition("Failed", True, "JobSetFailed", "jobset failed due to job failure", False))

    def complete(self, name: str) -> None:
        self.set_all(self.node_pods(name), "Succeeded", exit_code=0)
        self.say(name, condition("Complete", True, "JobSetCompleted", "jobset completed successfully", False))

    def resume(self, name: str) -> List[str]:
        self.say(name, condition("Suspended", False, "Resumed", "TrainJob is resumed", False))
        jobset = self.srv.get(*JOBSET_API, self.ns, name)
        assert jobset is not None
        self.srv.store.patch(self.srv.registry.get(*JOBSET_API), self.ns, name, "application/merge-patch+json",
                             {"spec": {"suspend": False}})
        return self.reconcile(name)


class Kueue:
    """Kueue's job integrations: a Workload per queued job; admitting one unsuspends its job."""

    #: where each kind is suspended
    SUSPEND = {"PyTorchJob": {"spec": {"runPolicy": {"suspend": False}}}, "TrainJob": {"spec": {"suspend": False}},
               "JobSet": {"spec": {"suspend": False}}, "Job": {"spec": {"suspend": False}}}

    def __init__(self, srv: FakeApiServer, namespace: str = "default") -> None:
        self.srv, self.ns = srv, namespace

    def queue(self, api: tuple[str, str], name: str,
              message: str = "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor"
                             " default-flavor, 4 more needed") -> Obj:
        """The pending Workload for the job ``name`` (its QuotaReserved False with Kueue's reason)."""
        job = self.srv.get(*api, self.ns, name)
        assert job is not None
        labels = job["metadata"]["labels"]
        workload = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload",
                    "metadata": {"name": f"{job['kind'].lower()}-{name}-{suffix(name)}",
                                 "labels": {"kueue.x-k8s.io/job-uid": job["metadata"]["uid"]},
                                 "ownerReferences": [owner_ref(job)]},
                    "spec": {"queueName": labels["kueue.x-k8s.io/queue-name"],
                             "priorityClassName": labels.get("kueue.x-k8s.io/priority-class", ""), "podSets": []}}
        created = self.srv.create(*WORKLOAD_API, self.ns, workload)
        self.srv.set_status(*WORKLOAD_API, self.ns, created["metadata"]["name"],
                            {"conditions": [condition("QuotaReserved", False, "Pending", message, False)]})
        return created

    def admit(self, api: tuple[str, str], name: str) -> None:
        """Quota reserved and admitted; the job unsuspended, for its controller to start."""
        job = self.srv.get(*api, self.ns, name)
        assert job is not None
        for workload in self.srv.objects(*WORKLOAD_API, self.ns, f"kueue.x-k8s.io/job-uid={job['metadata']['uid']}"):
            self.srv.set_status(*WORKLOAD_API, self.ns, workload["metadata"]["name"], {"conditions": [
                condition("QuotaReserved", True, "QuotaReserved", "Quota reserved in ClusterQueue team", False),
                condition("Admitted", True, "Admitted", "The workload is admitted", False)]})
        self.srv.store.patch(self.srv.registry.get(*api), self.ns, name, "application/merge-patch+json",
                             self.SUSPEND[job["kind"]])
