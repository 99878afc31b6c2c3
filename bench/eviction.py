#!/usr/bin/env python3
"""From an eviction to the replacement replica running, on the real cluster: a torchspec app against a bare Job.

    python bench/eviction.py                 # 3 rounds
    python bench/eviction.py --repeat 5

It needs the real cluster of the tests (`scripts/k8s-cluster up`: its admin
kubeconfig, $TORCHSPEC_K8S_KUBECONFIG or /tmp/torchspec-k8s/admin.kubeconfig,
and the image torchspec-test/busybox:k8s on the node); without one it says
why and exits 2.  Each round works in a namespace of its own (tsb-...),
deleted at the end without waiting.

Per round, each side one pod that sleeps until SIGTERM, then exits 143 (a
training script's checkpoint-then-exit; one that ignores SIGTERM holds its
pod, and torchspec's replacement, for its whole grace period; one that
exits 0 completes its Job), run until Running, then evicted through the
Eviction API (as `kubectl drain` and the cluster autoscaler do):

  torchspec  `Runner.run` of a one-replica app with `max_retries: 0` (job
             flavor): its Job ignores pods with the DisruptionTarget
             condition (podFailurePolicy), so the Job controller replaces
             the pod and counts nothing
  job        a bare Job of the same pod with `backoffLimit: 1` and no
             podFailurePolicy: the Job controller's own handling of a lost
             pod, which spends the retry (without it, the Job fails)

timed from the eviction call to a watch (in this process, a stream: nothing
polls) seeing a pod of the Job with another uid Running.  Sides alternate
which goes first by round.  Target: torchspec's median at most the bare
Job's (x1.2): ignoring the disruption must cost nothing, and the Job
controller's backoff after a counted failure (10 s, doubling) does not apply
to an ignored one.  Prints medians, then PASS or MISS, and exits 0 whatever
the timings (1 on a MISS with --fail-on-miss).
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from common import median

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
from k8s_support import cluster_problem, kubeconfig_path  # noqa: E402

sys.path.remove(str(REPO / "tests"))
from k8s import IMAGE, Cluster  # noqa: E402

TARGET = 1.2  # torchspec / bare Job at most
#: a replica that ends on SIGTERM (checkpoint, then exit non-zero: a pod that exits 0 completes its Job), as a
#: training script should; a shell that ignored it would hold its pod for the whole grace period, and with it
#: torchspec's replacement (a Job with a podFailurePolicy replaces a pod once it is gone, never beside it)
SCRIPT = "trap 'exit 143' TERM; sleep 600 & wait"
JOB_NAME = "batch.kubernetes.io/job-name"


def running_pod(cluster: Cluster, ns: str, job: str, other_than: str = "", timeout: float = 300) -> Dict[str, str]:
    """Block (a watch) until a pod of ``job`` whose uid is not ``other_than`` is Running: its name and uid."""
    from kubernetes import watch

    deadline = time.monotonic() + timeout
    listed = cluster.core.list_namespaced_pod(ns, label_selector=f"{JOB_NAME}={job}")
    for pod in listed.items:
        if pod.status.phase == "Running" and pod.metadata.uid != other_than and not pod.metadata.deletion_timestamp:
            return {"name": pod.metadata.name, "uid": pod.metadata.uid}
    for event in watch.Watch().stream(cluster.core.list_namespaced_pod, ns, label_selector=f"{JOB_NAME}={job}",
                                      resource_version=listed.metadata.resource_version,
                                      timeout_seconds=max(1, int(deadline - time.monotonic()))):
        pod = event["object"]
        if (event["type"] != "DELETED" and pod.status.phase == "Running" and pod.metadata.uid != other_than
                and not pod.metadata.deletion_timestamp):
            return {"name": pod.metadata.name, "uid": pod.metadata.uid}
    raise RuntimeError(f"no pod of {job} ran within {timeout:.0f} s")


def evict_and_time(cluster: Cluster, ns: str, job: str) -> float:
    """Seconds from the eviction of the job's running pod to its replacement Running."""
    import kubernetes

    first = running_pod(cluster, ns, job)
    started = time.monotonic()
    cluster.core.create_namespaced_pod_eviction(first["name"], ns, kubernetes.client.V1Eviction(
        metadata=kubernetes.client.V1ObjectMeta(name=first["name"], namespace=ns)))
    running_pod(cluster, ns, job, other_than=first["uid"])
    return time.monotonic() - started


def torchspec_side(cluster: Cluster, ns: str) -> float:
    from torchspec import specs
    from torchspec.runner import get_runner

    role = specs.Role("main", image=IMAGE, entrypoint="sh", args=["-c", SCRIPT],
                      resource=specs.Resource(cpu=0, gpu=0, memMB=32), max_retries=0)
    with get_runner() as runner:
        handle = runner.run(specs.AppDef("evicted", roles=[role]), "kubernetes", cfg={"namespace": ns})
        app = handle.rsplit(":", 1)[1]
        job = next(j.metadata.name for j in cluster.batch.list_namespaced_job(ns).items
                   if (j.metadata.labels or {}).get("torchspec.dev/app-id") == app)
        try:
            return evict_and_time(cluster, ns, job)
        finally:
            runner.cancel(handle)


def bare_side(cluster: Cluster, ns: str, template: Dict[str, Any]) -> float:
    body = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "bare"},
            "spec": {"backoffLimit": 1, "template": copy.deepcopy(template)}}
    cluster.batch.create_namespaced_job(ns, body)
    try:
        return evict_and_time(cluster, ns, "bare")
    finally:
        cluster.batch.delete_namespaced_job("bare", ns, propagation_policy="Background")


def bare_template() -> Dict[str, Any]:
    """The pod the torchspec side runs, as a plain template: the same image, command and resources."""
    return {"spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 30, "containers": [{
        "name": "main", "image": IMAGE, "imagePullPolicy": "IfNotPresent", "command": ["sh", "-c", SCRIPT],
        "resources": {"requests": {"memory": "32Mi"}, "limits": {"memory": "32Mi"}}}]}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--fail-on-miss", action="store_true")
    args = ap.parse_args()
    kubeconfig = kubeconfig_path()
    cluster_dir = os.environ.get("TORCHSPEC_K8S_DIR", "/tmp/torchspec-k8s")
    problem = cluster_problem(kubeconfig, cluster_dir)
    if problem:
        print(f"no cluster: {problem} (scripts/k8s-cluster up)", file=sys.stderr)
        return 2
    os.environ["KUBECONFIG"] = kubeconfig
    cluster = Cluster(kubeconfig, "kubectl")
    times: Dict[str, List[float]] = {"torchspec": [], "job": []}
    try:
        for r in range(args.repeat):
            ns = cluster.new_namespace("evict")
            order: List[str] = ["torchspec", "job"] if r % 2 == 0 else ["job", "torchspec"]
            for side in order:
                took = torchspec_side(cluster, ns) if side == "torchspec" else bare_side(cluster, ns, bare_template())
                times[side].append(took)
                print(f"round {r + 1}: {side:9} eviction -> replacement Running {took:.2f} s", flush=True)
            cluster.delete([ns])
    finally:
        cluster.close()
    ts, job = median(times["torchspec"]), median(times["job"])
    ratio: Optional[float] = ts / job if job else None
    verdict = "PASS" if ratio is not None and ratio <= TARGET else "MISS"
    print(f"\nmedian eviction -> replacement Running: torchspec {ts:.2f} s, bare Job {job:.2f} s; "
          f"ratio {ratio:.2f} (target <= {TARGET}): {verdict}")
    return 1 if verdict == "MISS" and args.fail_on_miss else 0


if __name__ == "__main__":
    sys.exit(main())
