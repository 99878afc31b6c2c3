"""The ``pytorchjob`` flavor: one Kubeflow Training Operator ``kubeflow.org/v1`` PyTorchJob.

Needs the Training Operator (v1.7 or newer).  It runs one torchrun role, as
``dist.ddp`` renders it: replica 0 is the ``Master``, the other replicas the
``Worker``s, and the operator, not torchspec, wires the rendezvous.  It
gives every node ``MASTER_ADDR``/``MASTER_PORT``, ``RANK`` (the node's rank:
torchspec's replica id) and torchrun's ``PET_*`` defaults (``PET_NNODES``,
``PET_NPROC_PER_NODE`` from ``nprocPerNode``, and for an elastic role the
``elasticPolicy``'s c10d rendezvous), so the command's own rendezvous
options are taken out (see ``torchrun.py``).  The operator finds the port
named ``pytorchjob-port`` in the container named ``pytorch``.  Pods are
``{app}-master-0`` and ``{app}-worker-{i}``, each behind a headless Service
of that name.  Retries are the replica specs' ``restartPolicy`` and
``runPolicy.backoffLimit``.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import List, Mapping, Optional, Tuple

from torchspec.schedulers.kubernetes.flavor import Build, Flavor, Refusal, Version, operator_state, refuse
from torchspec.schedulers.kubernetes.kubeflow import is_elastic, launch_refusals, nproc_per_node, one_role, \
    rendezvous_port, replace_replica_id
from torchspec.schedulers.kubernetes.states import Obj
from torchspec.schedulers.kubernetes.torchrun import Launch, find_launch
from torchspec.schedulers.replicas import ENV_REPLICA_ID
from torchspec.specs import AppDef, AppState, CfgVal, RetryPolicy, Role

#: The labels the operator puts on each pod: ``master`` or ``worker``, and the index within that type.
LABEL_REPLICA_TYPE = "training.kubeflow.org/replica-type"
LABEL_REPLICA_INDEX = "training.kubeflow.org/replica-index"
#: The container the operator sets its variables in and reads the port of.
CONTAINER = "pytorch"
PORT_NAME = "pytorchjob-port"
#: The node's rank, which the operator appends to the container's env: after the role's own variables, so
#: only the command line (and the command's shell, exporting it as TORCHSPEC_REPLICA_ID) can refer to it.
RANK_REF = "$(RANK)"
#: torchrun's c10d port, for an elastic rendezvous whose command named none.
DEFAULT_RDZV_PORT = 29400
_HINT = ("a PyTorchJob runs one torchrun role (as dist.ddp renders it): use -c flavor=jobset for several roles"
         " (a replicated Job each; or job, volcano), -c flavor=trainjob, jobset or job for one role that is not"
         " torchrun")


#: cleanPodPolicy when the user names none.  The operator's own default, None, leaves a pod it created after the
#: job failed (v1.9.3 recreates a replica it had just deleted for the backoff limit, before it sees its own Failed
#: condition) waiting forever for the deleted Master, holding its requests: Running deletes the pods still running
#: or pending once the job ended, and keeps the finished ones with their logs.
DEFAULT_CLEAN_POD_POLICY = "Running"


def _restart_policy(role: Role) -> str:
    """The replica specs' restartPolicy: a failed replica's container restarted in place while retries are left."""
    return "OnFailure" if role.max_retries > 0 else "Never"


def _elastic_policy(b: Build, role: Role, launch: Launch, port: int) -> Obj:
    """The operator's rendezvous for ``min_replicas`` to ``num_replicas`` nodes: c10d at the Master's host, or
    the etcd server the command named."""
    backend = launch.value("rdzv_backend")
    host = f"{b.app_id}-master-0"
    if backend in ("etcd", "etcd-v2") and ":" in (launch.value("rdzv_endpoint") or ""):
        host = str(launch.value("rdzv_endpoint")).rpartition(":")[0]
    else:
        backend = "c10d"
    policy: Obj = {"rdzvBackend": backend, "rdzvHost": host, "rdzvPort": port, "rdzvId": b.app_id,
                   "minReplicas": role.min_replicas, "maxReplicas": role.num_replicas}
    restarts = launch.value("max_restarts")
    if restarts is not None and restarts.isdigit():
        policy["maxRestarts"] = int(restarts)
    return policy


def _run_policy(b: Build, role: Role) -> Obj:
    policy: Obj = {"backoffLimit": role.max_retries,
                   "cleanPodPolicy": str(b.option("clean_pod_policy") or DEFAULT_CLEAN_POD_POLICY)}
    if b.ttl is not None:
        policy["ttlSecondsAfterFinished"] = b.ttl
    if b.option("active_deadline"):
        policy["activeDeadlineSeconds"] = int(b.option("active_deadline"))
    if b.option("scheduling_queue"):
        policy["schedulingPolicy"] = {"queue": str(b.option("scheduling_queue"))}
    if b.suspend:
        policy["suspend"] = True
    return policy


def _template(template: Obj, port: Optional[int], restart: str) -> Obj:
    """The pod template as the operator wants it: the container named ``pytorch``, the rendezvous port named
    ``pytorchjob-port``, and the node's rank as the replica id."""
    out = copy.deepcopy(template)
    out["spec"]["restartPolicy"] = restart
    container = out["spec"]["containers"][0]
    container["name"] = CONTAINER
    container["args"] = [replace_replica_id(arg, RANK_REF) for arg in container["args"]]
    ports = [p for p in container.pop("ports", []) if p.get("containerPort") != port and p.get("name") != "c10d"]
    if port is not None:
        ports.insert(0, {"name": PORT_NAME, "containerPort": port})
    if ports:
        container["ports"] = ports
    return out


class PyTorchJobFlavor(Flavor):
    name = "pytorchjob"
    #: the operator restarts a replica's container in place (restartPolicy OnFailure): the command's shell
    #: counts its starts (attempt.py); nothing on the pod counts more
    attempt_parts = ()
    wrapper_exports = (f'{ENV_REPLICA_ID}="$RANK"',)
    summary = "a Kubeflow PyTorchJob (Master + Workers, the operator's rendezvous) for one torchrun role; needs" \
              " the Training Operator"
    api_version = "kubeflow.org/v1"
    kind = "PyTorchJob"
    plural = "pytorchjobs"
    takes = ("ttl", "priority_class", "priority", "clean_pod_policy", "active_deadline", "scheduling_queue")
    template_paths = {"Master": "spec.pytorchReplicaSpecs.Master.template",
                      "Worker": "spec.pytorchReplicaSpecs.Worker.template"}
    carries = {
        "deadline": "runPolicy.activeDeadlineSeconds",
        "needs": "Kubeflow Training Operator (v1.7+)", "roles": "one; more are refused",
        "entrypoint": "torchrun only, else refused; its rendezvous options become the operator's",
        "elastic": "yes: elasticPolicy, c10d at the Master", "retries": "restartPolicy OnFailure + backoffLimit",
        "ports": "yes; the rendezvous one becomes `pytorchjob-port`", "mounts": "yes", "pod_patch": "yes",
        "replica_id": "args: the operator's `$(RANK)`; env values: refused", "queue": "Kueue (runPolicy.suspend)",
    }

    def index_env(self) -> List[Obj]:
        return []  # the operator's RANK, exported by the command's wrapper

    def replica_host(self, app_id: str, key: str, k: int) -> str:
        return f"{app_id}-master-0" if k == 0 else f"{app_id}-worker-{k - 1}"  # the operator's Service per pod

    def elastic_refusals(self, app: AppDef) -> List[Refusal]:
        """None here: its elasticPolicy runs an elastic role (min_replicas to num_replicas nodes)."""
        return []

    def adapt(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDef:
        role = app.roles[0]
        refusals = one_role(app, "a PyTorchJob")
        launch = find_launch(role)
        if launch is None:
            refusals.insert(0, Refusal(("roles", 0, "entrypoint"), f"role {role.name!r} runs {role.entrypoint}, not"
                                       " torchrun (as its entrypoint, or first in a bash -c script)"))
        else:
            refusals += launch_refusals(role, launch, ("auto", "cpu", "gpu"))
        refusals += [Refusal(("roles", 0, "env", name),
                             f"role {role.name!r}: env {name} uses ${{replica_id}}, which the operator's pods cannot"
                             " have in a variable (read TORCHSPEC_REPLICA_ID or RANK in the program instead)")
                     for name, value in role.env.items() if "${replica_id}" in value]
        refuse(self.name, refusals, _HINT)
        assert launch is not None
        return dataclasses.replace(app, roles=[dataclasses.replace(role, args=launch.args)])

    def build(self, b: Build) -> List[Obj]:
        role = b.app.roles[0]
        launch = find_launch(role)
        assert launch is not None and b.run_app is not None  # adapt refused the app otherwise
        port = rendezvous_port(role, launch)
        if is_elastic(role) and port is None:
            port = DEFAULT_RDZV_PORT
        restart = _restart_policy(role)
        template = _template(b.templates[role.name], port, restart)
        spec: Obj = {"nprocPerNode": nproc_per_node(launch)}
        if is_elastic(role):
            spec["elasticPolicy"] = _elastic_policy(b, role, launch, port or DEFAULT_RDZV_PORT)
        spec["runPolicy"] = _run_policy(b, role)
        spec["pytorchReplicaSpecs"] = {"Master": {"replicas": 1, "restartPolicy": restart, "template": template}}
        if role.num_replicas > 1:
            spec["pytorchReplicaSpecs"]["Worker"] = {"replicas": role.num_replicas - 1, "restartPolicy": restart,
                                                     "template": copy.deepcopy(template)}
        return [b.top_object(self, spec)]

    def notes(self, b: Build) -> List[str]:
        role = b.app.roles[0]
        launch = find_launch(role)
        dropped = ", ".join(launch.dropped) if launch is not None and launch.dropped else "none"
        return [f"role {role.name}: Master + {role.num_replicas - 1} Worker(s); the operator's rendezvous replaces"
                f" torchrun's options ({dropped}); RANK is the replica id"]

    def retry_how(self, role: Role, k8s_version: Version) -> str:
        if role.max_retries == 0:
            return "restartPolicy Never, runPolicy.backoffLimit=0"
        widened = "" if RetryPolicy(role.retry_policy) == RetryPolicy.REPLICA else \
            " (a failed replica restarts alone and rejoins the rendezvous; use flavor=jobset to restart all)"
        return f"restartPolicy OnFailure, runPolicy.backoffLimit={role.max_retries}{widened}"

    def controller_state(self, top: List[Obj]) -> Tuple[Optional[AppState], str]:
        suspend = bool(((top[0].get("spec") or {}).get("runPolicy") or {}).get("suspend"))
        return operator_state(top[0], "pytorchjob", "Succeeded", suspend)

    def pod_index(self, pod: Obj, top: List[Obj]) -> Optional[int]:
        """Master 0 is replica 0, Worker i replica i + 1 (the node's RANK)."""
        labels = (pod.get("metadata") or {}).get("labels") or {}
        index = str(labels.get(LABEL_REPLICA_INDEX, ""))
        kind = str(labels.get(LABEL_REPLICA_TYPE, "")).lower()
        if not index.isdigit() or kind not in ("master", "worker"):
            return None
        return int(index) + (1 if kind == "worker" else 0)

    def pod_templates(self, obj: Obj) -> List[Tuple[str, Obj]]:
        specs = (obj.get("spec") or {}).get("pytorchReplicaSpecs") or {}
        return [(f"{kind}[0]", (specs[kind] or {}).get("template") or {}) for kind in ("Master", "Worker")
                if kind in specs]


FLAVOR = PyTorchJobFlavor()
