"""The ``jobset`` flavor: one ``jobset.x-k8s.io/v1alpha2`` JobSet, a replicated Job per role.

Needs the JobSet controller.  Each role is an Indexed Job (the same spec as
the ``job`` flavor's), and JobSet itself provides the headless Service and
pod hostnames ``{jobset}-{role}-0-{k}``.  What JobSet adds is restarting the
whole app: APPLICATION (and ROLE, which JobSet cannot restart alone) retries
become its ``failurePolicy``.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from torchspec.schedulers.kubernetes import attempt
from torchspec.schedulers.kubernetes.flavor import (Build, Flavor, Refusal, Version, suspended_message,
                                                     true_conditions)
from torchspec.schedulers.kubernetes.job import job_spec
from torchspec.schedulers.kubernetes.states import Obj
from torchspec.specs import AppDef, AppState, RetryPolicy, Role
from torchspec.specs.dependencies import FINISHED, READY

#: ``depends_on``'s ``when`` -> the status of a JobSet's ``dependsOn``
_STATUS = {FINISHED: "Complete", READY: "Ready"}


def _failure_policy(app: AppDef, keys: Dict[str, str], deadline: bool = False) -> Obj:
    """APPLICATION (and ROLE, which JobSet cannot restart on its own) -> restart the JobSet, at most
    the largest ``max_retries`` of those roles; a REPLICA role's Job failing (its per-index retries
    spent) fails the JobSet at once, and so does a Job past its ``deadline`` (the app's time limit)."""
    restarts = max((r.max_retries for r in app.roles if RetryPolicy(r.retry_policy) != RetryPolicy.REPLICA),
                   default=0)
    policy: Obj = {"maxRestarts": restarts}
    rules = [{"name": "deadlineExceeded", "action": "FailJobSet", "onJobFailureReasons": ["DeadlineExceeded"]}] \
        if deadline and restarts else []
    replica_roles = [keys[r.name] for r in app.roles if RetryPolicy(r.retry_policy) == RetryPolicy.REPLICA]
    if replica_roles and restarts:
        rules.append({"name": "replicaRetriesSpent", "action": "FailJobSet", "targetReplicatedJobs": replica_roles})
    if rules:
        policy["rules"] = rules
    return policy


class JobSetFlavor(Flavor):
    name = "jobset"
    summary = "a JobSet; needs the JobSet controller"
    api_version = "jobset.x-k8s.io/v1alpha2"
    kind = "JobSet"
    plural = "jobsets"
    takes = ("ttl", "priority_class", "priority", "active_deadline")
    carries = {
        "needs": "JobSet", "roles": "any number (a replicated Job each)", "entrypoint": "any",
        "elastic": "refused: starts every replica", "retries": "failurePolicy: the whole app restarts",
        "ports": "yes", "mounts": "yes", "pod_patch": "yes", "replica_id": "yes",
        "queue": "Kueue, the whole app (spec.suspend)",
        "deadline": "its Jobs' activeDeadlineSeconds, per attempt; exceeded: the JobSet fails",
        "order": "dependsOn (Complete, Ready): one earlier role per role",
    }

    def replica_host(self, app_id: str, key: str, k: int) -> str:
        return f"{app_id}-{key}-0-{k}.{app_id}"  # {jobset}-{replicated job}-{job index}-{pod index}

    def build(self, b: Build) -> List[Obj]:
        spec: Obj = {"suspend": True} if b.suspend else {}
        spec.update({
            "network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True},
            "failurePolicy": _failure_policy(b.app, b.keys, b.active_deadline is not None),
            "replicatedJobs": [{"name": b.keys[r.name], "replicas": 1,
                                **({"dependsOn": [{"name": b.keys[d.role], "status": _STATUS[d.when]}
                                                  for d in r.depends_on]} if r.depends_on else {}),
                                "template": {"spec": job_spec(r, b.templates[r.name], b.k8s_version, None,
                                                              in_jobset=True, deadline=b.active_deadline)}}
                               for r in b.app.roles],
        })
        if b.ttl is not None:
            spec["ttlSecondsAfterFinished"] = b.ttl
        return [b.top_object(self, spec)]

    def notes(self, b: Build) -> List[str]:
        if b.active_deadline is not None and _failure_policy(b.app, b.keys)["maxRestarts"]:
            return [f"active_deadline={b.active_deadline}: each attempt's Jobs may run that long (a restart starts"
                    " the clock again); a Job past it fails the JobSet, not restarted"]
        return []

    def order_refusals(self, app: AppDef) -> List[Refusal]:
        """JobSet's webhook takes one ``dependsOn`` per replicated Job, naming one listed before it."""
        refusals = []
        names = [r.name for r in app.roles]
        for i, r in enumerate(app.roles):
            if len(r.depends_on) > 1:
                refusals.append(Refusal(("roles", i, "depends_on", 1), f"role {r.name!r} depends on"
                                        f" {len(r.depends_on)} roles; a JobSet's replicated Job takes one"))
            for j, d in enumerate(r.depends_on[:1]):
                if d.role in names and names.index(d.role) > i:
                    refusals.append(Refusal(("roles", i, "depends_on", j, "role"), f"role {r.name!r} depends on"
                                            f" {d.role!r}, listed after it; a JobSet starts replicated Jobs in"
                                            " their order"))
        return refusals

    def retry_how(self, role: Role, k8s_version: Version) -> str:
        retry, n = RetryPolicy(role.retry_policy), role.max_retries
        if retry == RetryPolicy.REPLICA:
            return f"backoffLimitPerIndex={n} in its Job, then FailJobSet"
        widened = ", ROLE widened to APPLICATION" if retry == RetryPolicy.ROLE else ""
        return f"failurePolicy.maxRestarts (whole JobSet restarted{widened})"

    def controller_state(self, top: List[Obj]) -> Tuple[Optional[AppState], str]:
        conds = true_conditions(top[0])
        if "Failed" in conds:
            return AppState.FAILED, f"jobset failed: {conds['Failed'].get('message', '')}".strip()
        if "Completed" in conds:
            return AppState.SUCCEEDED, ""
        if "Suspended" in conds or (top[0].get("spec") or {}).get("suspend"):
            return AppState.PENDING, suspended_message("jobset", conds.get("Suspended"))
        return None, ""

    def restarts(self, status: Obj) -> int:
        return int(status.get("restarts") or 0)

    template_paths = {"replicatedJobs": "spec.replicatedJobs[{i}].template.spec.template"}
    attempt_parts = (attempt.FAILURES, attempt.DISRUPTIONS, attempt.JOBSET_RESTARTS)

    def pod_templates(self, obj: Obj) -> List[Tuple[str, Obj]]:
        return [(f"replicatedJobs[{i}]", ((r.get("template") or {}).get("spec") or {}).get("template") or {})
                for i, r in enumerate((obj.get("spec") or {}).get("replicatedJobs") or [])]


FLAVOR = JobSetFlavor()
