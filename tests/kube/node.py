"""The Job controller and a kubelet, played against the API stand-in by a thread, so that apps run by themselves.

With :class:`FakeNode` running, an app submitted to the stand-in goes through its life as on a cluster
with only the built-in controllers (flavor ``job``): each Indexed Job gets a pod per completion index
(named, labelled and annotated as the Job controller does), each pod's container runs as a process of
this machine (its command and args with ``$(VAR)`` expanded from its env, as the kubelet does), its
output becomes the pod's log, its exit code the container's, and the Job gets the Complete or Failed
condition (with ``backoffLimit``: a failed index is replaced while failures stay within it, the new pod
annotated with the index's failures under ``backoffLimitPerIndex``; each pod has its own /dev/shm). A pod
deleted (cancel, or the garbage collector after its Job) has its process killed. It exists so that the
real-cluster lifecycle tests (tests/schedulers/test_kubernetes_cluster.py) also run against the
stand-in: every difference between the two shows up as a test that passes on one and fails on the other.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

from apiserver import FakeApiServer
from torchspec.schedulers.kubernetes.attempt import STARTS_FILE

Obj = Dict[str, Any]
INDEX_KEY = "batch.kubernetes.io/job-completion-index"
INDEX_FAILURE_COUNT = "batch.kubernetes.io/job-index-failure-count"
#: how long after a container's log ends its pod's status says so (about what a real kubelet takes here)
STATUS_LAG_S = 0.5
_VAR = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def expand(text: str, env: Dict[str, str]) -> str:
    """The kubelet's ``$(VAR)`` expansion: a known variable's value, ``$$`` a literal ``$``, else left as is."""
    return _VAR.sub(lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)), text)


def container_env(pod: Obj) -> Dict[str, str]:
    """The first container's env as the kubelet hands it over (downward API: namespace, name, annotations, labels)."""
    meta = pod["metadata"]
    env: Dict[str, str] = {}
    for var in pod["spec"]["containers"][0].get("env") or []:
        if "value" in var:
            env[var["name"]] = expand(var["value"], env)
            continue
        path = ((var.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath", "")
        keyed = re.fullmatch(r"metadata\.(annotations|labels)\['(.+)'\]", path)
        if path == "metadata.namespace":
            env[var["name"]] = meta["namespace"]
        elif path == "metadata.name":
            env[var["name"]] = meta["name"]
        elif keyed:
            env[var["name"]] = (meta.get(keyed.group(1)) or {}).get(keyed.group(2), "")
    return env


class FakeNode:
    """A thread that plays the Job controller and the kubelet until :meth:`stop`."""

    def __init__(self, srv: FakeApiServer, period_s: float = 0.05) -> None:
        self.srv = srv
        self.period_s = period_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fake-node", daemon=True)
        self._procs: Dict[Tuple[str, str], subprocess.Popen] = {}  # (namespace, pod) -> its container
        self._made: Dict[str, int] = {}  # Job uid -> pods made (for names)
        self._shm = tempfile.mkdtemp(prefix="fake-node-shm-")  # each pod's /dev/shm, a folder in it

    def __enter__(self) -> "FakeNode":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        for proc in self._procs.values():
            self._kill(proc)
        shutil.rmtree(self._shm, ignore_errors=True)

    # -- the loop

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            try:
                self._reconcile()
            except KeyError:  # an object deleted between the list and the write: the next round sees it
                continue

    def _reconcile(self) -> None:
        for job in self.srv.objects("batch/v1", "jobs"):
            self._job(job)
        live = set()
        for pod in self.srv.pods():
            key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
            live.add(key)
            phase = (pod.get("status") or {}).get("phase")
            if phase == "Pending" and key not in self._procs and "deletionTimestamp" not in pod["metadata"]:
                self._start(pod)
        for key in [k for k in self._procs if k not in live]:
            self._kill(self._procs.pop(key))

    # -- the Job controller

    def _pods_of(self, job: Obj) -> List[Obj]:
        uid = job["metadata"]["uid"]
        return [p for p in self.srv.pods(job["metadata"]["namespace"])
                if any(ref.get("uid") == uid for ref in p["metadata"].get("ownerReferences") or [])]

    def _job(self, job: Obj) -> None:
        spec, status = job["spec"], job.get("status") or {}
        if spec.get("suspend") or any(c["type"] in ("Complete", "Failed") for c in status.get("conditions") or []):
            return
        pods = self._pods_of(job)
        by_index: Dict[int, List[Obj]] = {}
        for pod in pods:
            by_index.setdefault(int(pod["metadata"]["annotations"][INDEX_KEY]), []).append(pod)
        failed = sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Failed")
        succeeded = {k for k, ps in by_index.items() if any(p["status"].get("phase") == "Succeeded" for p in ps)}
        completions = spec.get("completions") or 1
        if failed > (spec.get("backoffLimit") if spec.get("backoffLimit") is not None else 6):
            self._finish(job, "Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit",
                         len(succeeded), failed)
            for pod in pods:
                if pod["status"].get("phase") in ("Pending", "Running"):
                    self.srv.store.delete(self.srv.registry.get("v1", "pods"), pod["metadata"]["namespace"],
                                          pod["metadata"]["name"])
            return
        if len(succeeded) == completions:
            self._finish(job, "Complete", "CompletionsReached", "Reached expected number of succeeded pods",
                         len(succeeded), failed)
            return
        for k in range(completions):
            if not any(p["status"].get("phase") in ("Pending", "Running", "Succeeded") for p in by_index.get(k, [])):
                failed_before = [p for p in by_index.get(k, []) if p["status"].get("phase") == "Failed"]
                self._make_pod(job, k, len(failed_before))

    def _make_pod(self, job: Obj, k: int, failed: int = 0) -> None:
        """Pod ``k`` of the Job; under backoffLimitPerIndex annotated with its index's ``failed`` pods before."""
        uid = job["metadata"]["uid"]
        n = self._made.get(uid, 0)
        self._made[uid] = n + 1
        name = job["metadata"]["name"]
        template = job["spec"]["template"]
        labels = {**(template["metadata"].get("labels") or {}), "job-name": name,
                  "batch.kubernetes.io/job-name": name, INDEX_KEY: str(k)}
        pod_spec = dict(template["spec"], hostname=f"{name}-{k}")
        pod = self.srv.create_pod_for(job, f"{name}-{k}-{uid[:4]}{n:x}", labels=labels, spec=pod_spec,
                                      namespace=job["metadata"]["namespace"])
        annotations = {**(template["metadata"].get("annotations") or {}), INDEX_KEY: str(k)}
        if job["spec"].get("backoffLimitPerIndex") is not None:
            annotations[INDEX_FAILURE_COUNT] = str(failed)
        pods = self.srv.registry.get("v1", "pods")
        self.srv.store.put_spec_field(pods, pod["metadata"]["namespace"], pod["metadata"]["name"],
                                      "metadata.annotations", annotations)

    def _finish(self, job: Obj, kind: str, reason: str, message: str, succeeded: int, failed: int) -> None:
        condition = {"type": kind, "status": "True", "reason": reason, "message": message}
        self.srv.set_status("batch/v1", "jobs", job["metadata"]["namespace"], job["metadata"]["name"],
                            {"conditions": [condition], "succeeded": succeeded, "failed": failed})

    # -- the kubelet

    def _start(self, pod: Obj) -> None:
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        container = pod["spec"]["containers"][0]
        env = container_env(pod)
        argv = [expand(a, env) for a in (container.get("command") or []) + (container.get("args") or [])]
        shm = os.path.join(self._shm, pod["metadata"]["uid"])  # the pod's own /dev/shm, for its start count
        os.makedirs(shm, exist_ok=True)
        argv = [a.replace(STARTS_FILE, os.path.join(shm, os.path.basename(STARTS_FILE))) for a in argv]
        proc = subprocess.Popen(argv, env={**env, "PATH": os.environ.get("PATH", "/usr/bin:/bin")},
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        self._procs[(ns, name)] = proc
        self.srv.set_pod_phase(ns, name, "Running")
        threading.Thread(target=self._watch, args=(ns, name, proc), daemon=True).start()

    def _watch(self, ns: str, name: str, proc: subprocess.Popen) -> None:
        assert proc.stdout is not None
        for line in iter(proc.stdout.readline, b""):
            try:
                self.srv.append_log(ns, name, line.decode(errors="replace"))
            except KeyError:  # deleted
                break
        code = proc.wait()
        if self._procs.get((ns, name)) is not proc:
            return  # killed because its pod went away
        try:
            self.srv.end_log(ns, name)
            time.sleep(STATUS_LAG_S)  # as a real kubelet: the log ends, the pod's status follows
            self.srv.set_pod_phase(ns, name, "Succeeded" if code == 0 else "Failed", exit_code=code)
        except KeyError:
            pass

    @staticmethod
    def _kill(proc: subprocess.Popen) -> Optional[int]:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return proc.wait()
