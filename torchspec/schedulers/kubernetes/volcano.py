"""The ``volcano`` flavor: one ``batch.volcano.sh/v1alpha1`` Job, a task per role, gang scheduled.

Needs Volcano.  The whole app starts only when every pod can (``minAvailable``
is the sum of the replicas), Volcano's ``svc`` plugin gives pods the DNS
names ``{job}-{task}-{k}.{job}``, and each pod's index is a label Volcano
writes.  Retries are the tasks' ``policies``: restart the job, the task or
the pod on ``PodFailed``.
"""

from __future__ import annotations

from typing import List, Optional, Tuple

from torchspec.schedulers.kubernetes import attempt
from torchspec.schedulers.kubernetes.flavor import Build, Flavor, Version
from torchspec.schedulers.kubernetes.states import VOLCANO_INDEX_KEY, VOLCANO_STATES, Obj
from torchspec.schedulers.replicas import ENV_REPLICA_ID
from torchspec.specs import AppState, RetryPolicy, Role

#: What a failed (or evicted) pod makes Volcano do, per retry policy, while retries are left.
_ACTIONS = {RetryPolicy.APPLICATION: "RestartJob", RetryPolicy.ROLE: "RestartTask", RetryPolicy.REPLICA: "RestartPod"}


def _policies(role: Role) -> Tuple[List[Obj], Optional[int]]:
    """A task's policies and maxRetry for its role's retry policy.  An evicted pod (drained, preempted) is not a
    failure of the app: it restarts what the retry policy restarts even with ``max_retries: 0``, where a failed
    pod ends the job.  Volcano counts both in one ``maxRetry`` (its default, 3, where the role has none)."""
    retry, n = RetryPolicy(role.retry_policy), role.max_retries
    failed = _ACTIONS[retry] if n > 0 else "TerminateJob"
    policies = [{"event": "PodFailed", "action": failed}, {"event": "PodEvicted", "action": _ACTIONS[retry]}]
    return policies, (n if n > 0 else None)


def _tasks(b: Build) -> Tuple[List[Obj], int]:
    """A task per role, and the job's own maxRetry: the most any APPLICATION role may restart it."""
    tasks = []
    job_retries = 0
    for role in b.app.roles:
        policies, max_retry = _policies(role)
        task: Obj = {"name": b.keys[role.name], "replicas": role.num_replicas, "minAvailable": role.num_replicas,
                     "policies": policies}
        if max_retry is not None:
            task["maxRetry"] = max_retry
            if RetryPolicy(role.retry_policy) == RetryPolicy.APPLICATION:
                job_retries = max(job_retries, max_retry)
        task["template"] = b.templates[role.name]
        tasks.append(task)
    return tasks, job_retries


class VolcanoFlavor(Flavor):
    name = "volcano"
    summary = "a Volcano Job, gang scheduled"
    api_version = "batch.volcano.sh/v1alpha1"
    kind = "Job"
    plural = "jobs"
    kueue = False  # the queue run option is the Volcano queue
    takes = ("ttl", "priority_class")  # Kueue does not manage Volcano Jobs: no Kueue priority
    lacks = {"active_deadline": "a Volcano Job has no time limit (no activeDeadlineSeconds; a pod's own would fail"
                                " only that pod, which the job's policies may restart)"}
    carries = {
        "needs": "Volcano", "roles": "any number (a task each)", "entrypoint": "any",
        "elastic": "refused: starts every replica", "retries": "policies: RestartJob, RestartTask, RestartPod",
        "ports": "yes", "mounts": "yes", "pod_patch": "yes", "replica_id": "yes",
        "queue": "the Volcano queue (spec.queue)",
        "deadline": "refused: a Volcano Job has none",
        "order": "refused: Volcano starts every task at once (use -c flavor=jobset)",
    }
    scheduler_name = "volcano"
    attempt_parts = (attempt.VOLCANO_RESTARTS,)  # its pods carry no Job counts

    def index_env(self) -> List[Obj]:
        return [{"name": ENV_REPLICA_ID,
                 "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{VOLCANO_INDEX_KEY}']"}}}]

    def build(self, b: Build) -> List[Obj]:
        tasks, job_retries = _tasks(b)
        spec: Obj = {"schedulerName": self.scheduler_name, "minAvailable": sum(r.num_replicas for r in b.app.roles),
                     "plugins": {"svc": [], "env": []}}
        if job_retries:
            spec["maxRetry"] = job_retries
        if b.queue:
            spec["queue"] = b.queue
        if b.priority_class:
            spec["priorityClassName"] = b.priority_class
        if b.ttl is not None:
            spec["ttlSecondsAfterFinished"] = b.ttl
        spec["tasks"] = tasks
        return [b.top_object(self, spec)]

    def retry_how(self, role: Role, k8s_version: Version) -> str:
        retry, n = RetryPolicy(role.retry_policy), role.max_retries
        return f"PodFailed -> {_ACTIONS[retry]}, maxRetry={n}" if n else "PodFailed -> TerminateJob"

    def controller_state(self, top: List[Obj]) -> Tuple[Optional[AppState], str]:
        state = (top[0].get("status") or {}).get("state") or {}
        phase = state.get("phase") or ""
        mapped = VOLCANO_STATES.get(phase)
        if mapped == AppState.FAILED:
            return mapped, f"volcano job {phase}: {state.get('message') or state.get('reason') or ''}".strip()
        if mapped == AppState.SUCCEEDED:
            return mapped, ""
        return None, f"volcano job {phase}" if phase in ("Pending", "Inqueue") else ""

    def restarts(self, status: Obj) -> int:
        return int(status.get("retryCount") or 0)

    template_paths = {"tasks": "spec.tasks[{i}].template"}

    def pod_templates(self, obj: Obj) -> List[Tuple[str, Obj]]:
        tasks = (obj.get("spec") or {}).get("tasks") or []
        return [(f"tasks[{i}]", t.get("template") or {}) for i, t in enumerate(tasks)]


FLAVOR = VolcanoFlavor()
