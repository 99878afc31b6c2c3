"""The ``job`` flavor: per role one Indexed ``batch/v1`` Job, plus one headless Service per app.

Works on any cluster: no controller beyond Kubernetes' own.  The Job of a
role runs ``num_replicas`` pods at once (completions = parallelism), each
knowing its index; the Service gives them the DNS names ``{job}-{k}.{app}``.
Each Job carries its role as JSON, so the app is read back from the Jobs
alone.  :func:`job_spec` is also what each replicated Job of a JobSet is.
"""

from __future__ import annotations

import json
from typing import List, Optional, Tuple

from torchspec.schedulers.kubernetes.flavor import Build, Flavor, Version, role_json, suspended_message, true_conditions
from torchspec.schedulers.kubernetes.states import (
    ANNOTATION_ROLE,
    ANNOTATION_ROLE_INDEX,
    LABEL_APP_ID,
    LABEL_ROLE_NAME,
    DISRUPTION_MIN_VERSION,
    PER_INDEX_MIN_VERSION,
    Obj,
)
from torchspec.specs import AppState, RetryPolicy, Role


def _per_index(k8s_version: Version) -> bool:
    """Whether ``backoffLimitPerIndex`` can be used on the oldest Kubernetes the manifests must work on."""
    return k8s_version is None or k8s_version >= PER_INDEX_MIN_VERSION


def _job_retry_fields(role: Role, k8s_version: Version, in_jobset: bool, replaced: bool) -> Obj:
    """A role's Job fields for its retry policy (see :meth:`JobFlavor.retry_how`); ``replaced``: whether a
    failed pod is replaced by a new one (``restartPolicy: Never``), not restarted in place.

    REPLICA: each index retried alone (``backoffLimitPerIndex``; before 1.29 a
    ``backoffLimit`` the replicas share).  APPLICATION and ROLE: in a JobSet
    the Job fails at the first failed pod so that JobSet restarts everything;
    a lone Job can only replace the failed pod (``backoffLimit``).  Those two
    carry a ``backoffLimitPerIndex`` as large as their ``backoffLimit`` too,
    which changes nothing of when the Job fails (an index cannot fail more
    often than all of them) but has the controller write on each pod how
    often its index failed and was disrupted before: the parts of the
    replica's attempt number (attempt.py).
    """
    retry = RetryPolicy(role.retry_policy)
    per_index = _per_index(k8s_version)
    if retry == RetryPolicy.REPLICA and role.max_retries > 0:
        if per_index:
            return {"backoffLimitPerIndex": role.max_retries, "maxFailedIndexes": 0}
        return {"backoffLimit": role.max_retries}
    budget = 0 if in_jobset else role.max_retries
    if per_index and replaced:
        return {"backoffLimit": budget, "backoffLimitPerIndex": budget, "maxFailedIndexes": 0}
    return {"backoffLimit": budget}


#: A pod the cluster took away (evicted through the Eviction API or a drain, preempted by a pod of higher
#: priority, on a node tainted NoExecute or lost) is replaced without spending the role's retries: Kubernetes
#: marks such a pod with the DisruptionTarget condition, and this rule tells the Job controller to ignore its
#: failure.  A preemption is not a crash: an app with ``max_retries: 0`` goes on.
IGNORE_DISRUPTIONS: Obj = {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget",
                                                                               "status": "True"}]}]}


def _replaced(template: Obj) -> bool:
    """Whether a failed pod is replaced by a new one: ``restartPolicy: Never``, which a pod patch may have
    changed (to OnFailure: the kubelet restarts the container in place)."""
    return ((template.get("spec") or {}).get("restartPolicy") or "Never") == "Never"


def _ignores_disruptions(template: Obj, k8s_version: Version) -> bool:
    """Whether the Job can carry :data:`IGNORE_DISRUPTIONS`: Kubernetes 1.26 on (podFailurePolicy and the
    DisruptionTarget condition on by default), and pods that are not restarted in place (the API server takes
    a podFailurePolicy only with ``restartPolicy: Never``)."""
    return _replaced(template) and (k8s_version is None or k8s_version >= DISRUPTION_MIN_VERSION)


def job_spec(role: Role, template: Obj, k8s_version: Version, ttl: Optional[int], in_jobset: bool = False,
             deadline: Optional[int] = None) -> Obj:
    """The spec of the Indexed Job that runs every replica of ``role`` from ``template``; ``deadline``: the
    seconds it may run, retries included, before the Job controller fails it (reason DeadlineExceeded)."""
    spec: Obj = {"completionMode": "Indexed", "completions": role.num_replicas, "parallelism": role.num_replicas}
    spec.update(_job_retry_fields(role, k8s_version, in_jobset, _replaced(template)))
    if _ignores_disruptions(template, k8s_version):
        spec["podFailurePolicy"] = json.loads(json.dumps(IGNORE_DISRUPTIONS))
    if deadline is not None:
        spec["activeDeadlineSeconds"] = deadline
    if ttl is not None:
        spec["ttlSecondsAfterFinished"] = ttl
    spec["template"] = template
    return spec


def _service(b: Build) -> Obj:
    """The headless Service that gives every pod of the app its DNS name (pods get its name as subdomain)."""
    return {"apiVersion": "v1", "kind": "Service", "metadata": b.meta(b.app_id),
            "spec": {"clusterIP": "None", "selector": {LABEL_APP_ID: b.app_id}, "publishNotReadyAddresses": True}}


def _job_state(job: Obj) -> Tuple[Optional[AppState], str]:
    """What the Job controller decided for one role's Job, and a message where there is one to give.

    Since Kubernetes 1.31 the controller says its verdict first (FailureTarget, SuccessCriteriaMet), ends
    the pods still running, and only then adds Failed or Complete: the verdict is final, so it counts at
    once (a wait ends with it, tens of milliseconds sooner on a busy cluster).
    """
    conds = true_conditions(job)
    failed = conds.get("Failed") or conds.get("FailureTarget")
    if failed is not None:
        count = int((job.get("status") or {}).get("failed") or 0)
        pods = f" ({count} pod{'s' if count != 1 else ''} failed or deleted)" if count else ""
        return AppState.FAILED, (f"job {job['metadata']['name']} failed: {failed.get('reason', '')}"
                                 f" {failed.get('message', '')}".strip() + pods)
    if "Complete" in conds or "SuccessCriteriaMet" in conds:
        return AppState.SUCCEEDED, ""
    if "Suspended" in conds or (job.get("spec") or {}).get("suspend"):
        return AppState.PENDING, suspended_message(f"job {job['metadata']['name']}", conds.get("Suspended"))
    return None, ""


class JobFlavor(Flavor):
    name = "job"
    summary = "a batch/v1 Job per role + a headless Service; any cluster"
    api_version = "batch/v1"
    kind = "Job"
    plural = "jobs"
    custom = False
    subdomain = True  # with the Indexed Job's hostname {job}-{k}: {job}-{k}.{app_id}
    takes = ("ttl", "priority_class", "priority", "active_deadline")
    carries = {
        "needs": "nothing", "roles": "any number (a Job each)", "entrypoint": "any",
        "elastic": "refused: starts every replica", "retries": "backoffLimit(PerIndex) per Job",
        "ports": "yes", "mounts": "yes", "pod_patch": "yes", "replica_id": "yes",
        "queue": "Kueue, each Job on its own (suspended)",
        "deadline": "each Job's activeDeadlineSeconds (retries included)",
        "order": "refused: Jobs start at once (use -c flavor=jobset)",
    }

    def build(self, b: Build) -> List[Obj]:
        objects = [_service(b)]
        for index, role in enumerate(b.app.roles):
            key = b.keys[role.name]
            annotations = {ANNOTATION_ROLE: json.dumps(role_json(role), separators=(",", ":")),
                           ANNOTATION_ROLE_INDEX: str(index)}
            meta = b.meta(f"{b.app_id}-{key}", annotations)
            meta["labels"].update({LABEL_ROLE_NAME: key, **b.kueue_labels})  # Kueue admits each Job
            spec = job_spec(role, b.templates[role.name], b.k8s_version, b.ttl, deadline=b.active_deadline)
            objects.append({"apiVersion": self.api_version, "kind": self.kind, "metadata": meta,
                            "spec": {"suspend": True, **spec} if b.suspend else spec})
        return objects

    def notes(self, b: Build) -> List[str]:
        if b.suspend and len(b.app.roles) > 1:
            return ["Kueue admits each role's Job on its own, not the app as a whole: use flavor=jobset (or"
                    " pytorchjob, trainjob) to have it admitted all at once"]
        return []

    def retry_how(self, role: Role, k8s_version: Version) -> str:
        retry, n = RetryPolicy(role.retry_policy), role.max_retries
        if retry == RetryPolicy.REPLICA and n and _per_index(k8s_version):
            return f"backoffLimitPerIndex={n} (each replica retried alone; needs Kubernetes >= 1.29)"
        if retry == RetryPolicy.REPLICA and n:
            return f"backoffLimit={n} (Kubernetes < 1.29: {n} retries shared by the role's replicas)"
        return f"backoffLimit={n} (a failed pod is replaced alone; use flavor=jobset to restart all)"

    def app_restarts(self, top: List[Obj]) -> int:
        """The pods each role's Job replaced: its failed pods (deleted ones too, which the API no longer has),
        less the one that ended a Job that failed."""
        total = 0
        for job in top:
            failed = int((job.get("status") or {}).get("failed") or 0)
            ended = "Failed" in true_conditions(job) or "FailureTarget" in true_conditions(job)
            total += max(0, failed - 1) if ended else failed
        return total

    def controller_state(self, top: List[Obj]) -> Tuple[Optional[AppState], str]:
        """Failed as soon as one role's Job failed; succeeded once every Job completed; pending while
        one waits suspended (for Kueue to admit it)."""
        decided = [_job_state(job) for job in top]
        states = [state for state, _ in decided]
        if AppState.FAILED in states:
            return AppState.FAILED, next(message for state, message in decided if message)
        if states and all(s == AppState.SUCCEEDED for s in states):
            return AppState.SUCCEEDED, ""
        message = "; ".join(message for _, message in decided if message)
        return (AppState.PENDING if AppState.PENDING in states else None), message

    def roles_json(self, top: List[Obj]) -> List[Obj]:
        return [json.loads(j["metadata"]["annotations"][ANNOTATION_ROLE]) for j in top]

    def companions(self, app_id: str) -> List[Obj]:
        return [{"apiVersion": "v1", "kind": "Service", "metadata": {"name": app_id}}]


FLAVOR = JobFlavor()
