#!/usr/bin/env python3
"""Submit -> running and end -> noticed latency of the docker, kubernetes and slurm schedulers, against floors.

    python bench/waits.py                              # every backend that can be reached, 5 rounds
    python bench/waits.py --backends docker --repeat 3
    eval "$(scripts/slurm-cluster start)"; python bench/waits.py --backends slurm

One app of N replicas (slurm: 1, for a one-node cluster) that sleep S seconds
and exit 0, run to its end, three ways per backend, rounds interleaved (a
first round warms up, uncounted):

  floor    the backend's own client by hand, blocking on the backend's own
           notice of the end: docker: the SDK creates and starts N containers,
           then `wait`s on each; kubernetes: the client creates the same
           Service and Job, then watches the Job until it is Complete; slurm:
           `srun` of the same command (it returns when the step ends)
  runner   in process: Runner.run, then Runner.wait (one Runner over all rounds)
  cli      `torchspec submit --wait -s BACKEND SPEC`, a fresh process
  sbatch --wait   (slurm only) a batch job, started as torchspec's are (by
           the scheduler's cycle, unlike srun's allocation), and Slurm's own
           wait for it; running is judged against this one on slurm

Two numbers per way, both from the backend's own clock where it has one:
  running  submit -> every replica running (docker: the containers' StartedAt;
           kubernetes: the stand-in's pods created, see below; slurm: the job's
           first line, written by the replica itself)
  noticed  the app's end -> the waiter returned (docker: the containers'
           FinishedAt; kubernetes: when the stand-in's Job became Complete; slurm:
           the time the replica printed just before exiting)

kubernetes runs against the API stand-in of the tests (tests/kube/apiserver.py):
no cluster runs here, so the benchmark plays the Job controller and the kubelet
in a thread that watches the Jobs (no polling): it makes each Job's pods as soon
as the Job appears, reports them Running, and S seconds later Succeeded with the
Job Complete.  Nothing here polls: every wait is a blocking call or a stream.

It prints medians, then ratios against targets with PASS or MISS: running
within 1.5x the floor for the runner, noticed within 50 ms of the floor's.
Backends that cannot be reached are skipped with a note.  It exits 0 whatever
the timings (1 on a MISS with --fail-on-miss).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from common import bench_env, median, parse_and_find

# This folder is first on sys.path and holds docker.py: take it off, or `import docker` imports that.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or os.curdir).resolve() != _HERE]
REPO = _HERE.parent

#: (what, ratio of runner to floor at most, noticed above the floor's at most in seconds)
RUNNING_TARGET = 1.5
NOTICED_TARGET_S = 0.050

Round = Dict[str, Tuple[float, float]]  # way -> (running, noticed), seconds

#: The Job conditions that say it succeeded: Complete, or SuccessCriteriaMet, which Kubernetes 1.31+ writes
#: first (before the pods it ends have terminated) and torchspec counts as the end: like for like.
VERDICT = ("Complete", "SuccessCriteriaMet")


def stamp(text: str) -> float:
    """Epoch seconds of an RFC 3339 time with up to nanoseconds (the engine's, the API's)."""
    text = text.rstrip("Z")
    head, _, frac = text.partition(".")
    return datetime.fromisoformat(head + "+00:00").timestamp() + (float("0." + frac) if frac else 0.0)


class Vanished(RuntimeError):
    """Something of a round was removed by someone else (a shared engine or cluster): run the round again."""


class Backend:
    """What every backend's measurements share: the options, the torchspec command, one Runner over all rounds."""

    name = ""

    def __init__(self, args: argparse.Namespace, ts: List[str], env: Dict[str, str], work: Path) -> None:
        self.args, self.ts, self.env, self.work = args, ts, env, work
        self._runner: Any = None
        self.handles: List[str] = []  # every app submitted, for the clean-up

    @property
    def runner(self) -> Any:
        if self._runner is None:
            from torchspec.runner import get_runner

            self._runner = get_runner()
        return self._runner

    def submit_wait(self, spec: Path, *options: str) -> Tuple[float, str]:
        """``torchspec submit --wait`` of ``spec`` in a fresh process: when it returned (epoch) and the handle."""
        out = subprocess.run(self.ts + ["submit", "--wait", "-s", self.name, *options, str(spec)], env=self.env,
                             cwd=self.work, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        t_ret = time.time()
        self.handles += out.stdout.split()[:1]
        if out.returncode == 5:  # CANCELLED: removed under us (a shared engine's clean-up)
            raise Vanished(f"the app was removed while it ran: {out.stderr.strip()[-200:]}")
        if out.returncode != 0:
            raise RuntimeError(f"torchspec submit --wait exited {out.returncode}: {out.stderr[-300:]}")
        return t_ret, out.stdout.split()[0]

    def close(self) -> None:
        if self._runner is not None:
            self._runner.close()


# --------------------------------------------------------------------------- docker


class Docker(Backend):
    name = "docker"
    image = "torchspec-test/busybox:latest"

    def __init__(self, args: argparse.Namespace, ts: List[str], env: Dict[str, str], work: Path) -> None:
        super().__init__(args, ts, env, work)
        self.client: Any = None

    def reach(self) -> str:
        try:
            import docker

            self.client = docker.from_env()
            self.client.ping()
            self.client.api.inspect_image(self.image)
        except Exception as e:  # noqa: BLE001 - any failure means: skip this backend
            return f"no Docker engine with {self.image} (build it with the docker tests): {' '.join(str(e).split())[:160]}"
        return ""

    def spec(self) -> Path:
        path = self.work / "docker.yaml"
        path.write_text(f"name: bw\nroles:\n  - name: w\n    image: {self.image}\n    entrypoint: sh\n"
                        f"    args: [-c, 'sleep {self.args.seconds}']\n    num_replicas: {self.args.replicas}\n")
        return path

    def times(self, ids: List[str], t0: float, t_ret: float) -> Tuple[float, float]:
        if len(ids) != self.args.replicas:
            raise Vanished(f"{len(ids)} of {self.args.replicas} containers left to read the times of")
        import docker.errors

        try:
            states = [self.client.api.inspect_container(cid)["State"] for cid in ids]
        except docker.errors.NotFound:
            raise Vanished("a container was removed before its times were read") from None
        return (max(stamp(s["StartedAt"]) for s in states) - t0, t_ret - max(stamp(s["FinishedAt"]) for s in states))

    def app_containers(self, app_id: str) -> List[str]:
        return [c["Id"] for c in self.client.api.containers(all=True, filters={"label": f"torchspec.app-id={app_id}"})]

    def remove(self, ids: List[str], app_id: Optional[str] = None) -> None:
        """Remove containers, then the app's network (torchspec makes one per app); gone already is fine."""
        import docker.errors

        for cid in ids:
            try:
                self.client.api.remove_container(cid, force=True)
            except (docker.errors.NotFound, docker.errors.APIError):
                pass  # gone or going already (a clean-up of torchspec's labels by someone else: a shared engine)
        for network in self.client.api.networks(filters={"label": f"torchspec.app-id={app_id}"}) if app_id else []:
            try:
                self.client.api.remove_network(network["Id"])
            except (docker.errors.NotFound, docker.errors.APIError):
                pass

    def floor(self) -> Tuple[float, float]:
        api = self.client.api
        t0 = time.time()
        ids = [api.create_container(self.image, entrypoint=["sh"], command=["-c", f"sleep {self.args.seconds}"],
                                    labels={"torchspec-bench": "waits"})["Id"] for _ in range(self.args.replicas)]
        for cid in ids:
            api.start(cid)
        for cid in ids:
            api.wait(cid)
        try:
            return self.times(ids, t0, time.time())
        finally:
            self.remove(ids)

    def runner_way(self) -> Tuple[float, float]:
        t0 = time.time()
        info = self.runner.dryrun_component(str(self.spec()), {}, "docker")
        handle = self.runner.schedule(info)
        self.handles.append(handle)
        status = self.runner.wait(handle, wait_interval=2)
        t_ret = time.time()
        app_id = handle.rsplit("/", 1)[-1]
        ids = self.app_containers(app_id)
        try:
            if status is None or str(status.state) != "SUCCEEDED":
                raise Vanished(f"the app ended {status.state if status else 'removed'}")
            return self.times(ids, t0, t_ret)
        finally:
            self.remove(ids, app_id)

    def cli(self) -> Tuple[float, float]:
        spec = self.spec()
        t0 = time.time()
        t_ret, handle = self.submit_wait(spec)
        app_id = handle.rsplit("/", 1)[-1]
        ids = self.app_containers(app_id)
        try:
            return self.times(ids, t0, t_ret)
        finally:
            self.remove(ids, app_id)

    def close(self) -> None:
        super().close()
        if self.client is not None:
            for handle in self.handles:  # what a failed round left
                app_id = handle.rsplit("/", 1)[-1]
                self.remove(self.app_containers(app_id), app_id)
            self.client.close()


# --------------------------------------------------------------------------- kubernetes (the API stand-in)


class Kubernetes(Backend):
    name = "kubernetes"
    ns = "default"
    image = "busybox:1.36"

    def __init__(self, args: argparse.Namespace, ts: List[str], env: Dict[str, str], work: Path) -> None:
        super().__init__(args, ts, env, work)
        self.srv: Any = None
        self.batch: Any = None
        self.core: Any = None
        self.running_at: Dict[str, float] = {}
        self.ended_at: Dict[str, float] = {}
        self.seen_running: Dict[str, float] = {}  # job -> when the way's own waiter first saw it running
        self.cfg: Dict[str, str] = {}  # the run options (bench/k8s.py: the namespace)
        self.watch: Any = None

    def reach(self) -> str:
        try:
            import kubernetes  # noqa: F401
        except ImportError:
            return "the kubernetes package is missing"
        sys.path.insert(0, str(REPO / "tests" / "kube"))
        from apiserver import FakeApiServer

        self.srv = FakeApiServer().start()
        kubeconfig = self.srv.write_kubeconfig(self.work / "kubeconfig")
        os.environ["KUBECONFIG"] = self.env["KUBECONFIG"] = kubeconfig
        client = kubernetes.config.new_client_from_config(config_file=kubeconfig)
        self.batch, self.core = kubernetes.client.BatchV1Api(client), kubernetes.client.CoreV1Api(client)
        threading.Thread(target=self.controller, daemon=True).start()
        return ""

    # -- the Job controller and the kubelet, played against the stand-in

    def controller(self) -> None:
        """Pods for each new Job, Running at once; S seconds later Succeeded and the Job Complete."""
        from kubernetes import watch

        self.watch = watch.Watch()
        try:
            for event in self.watch.stream(self.batch.list_namespaced_job, self.ns, timeout_seconds=3600):
                if event["type"] == "ADDED":
                    self.start_job(event["object"].metadata.name)
        except Exception:  # noqa: BLE001 - the stand-in stopped at the end of the benchmark
            pass

    def start_job(self, name: str) -> None:
        job = self.srv.get("batch/v1", "jobs", self.ns, name)
        template, pods = job["spec"]["template"], []
        for k in range(job["spec"].get("completions") or 1):
            index = {"batch.kubernetes.io/job-completion-index": str(k)}
            pod = {"apiVersion": "v1", "kind": "Pod", "spec": copy.deepcopy(template["spec"]),
                   "metadata": {"name": f"{name}-{k}", "labels": {**template["metadata"].get("labels", {}), **index},
                                "annotations": {**(template["metadata"].get("annotations") or {}), **index},
                                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name,
                                                     "uid": job["metadata"]["uid"], "controller": True}]}}
            self.srv.create("v1", "pods", self.ns, pod)
            self.srv.set_pod_phase(self.ns, pod["metadata"]["name"], "Running")
            pods.append(pod["metadata"]["name"])
        self.srv.set_status("batch/v1", "jobs", self.ns, name, {"active": len(pods), "ready": len(pods)})
        self.running_at[name] = time.time()
        threading.Timer(self.args.seconds, self.end_job, (name, pods)).start()

    def end_job(self, name: str, pods: List[str]) -> None:
        for pod in pods:
            self.srv.set_pod_phase(self.ns, pod, "Succeeded", exit_code=0)
        self.srv.set_status("batch/v1", "jobs", self.ns, name, {"succeeded": len(pods), "conditions": [
            {"type": "Complete", "status": "True", "reason": "", "message": ""}]})
        self.ended_at[name] = time.time()

    # -- the three ways

    def app(self) -> Any:
        from torchspec import specs

        return specs.AppDef("bk", roles=[specs.Role(name="w", image=self.image, entrypoint="sh",
                                                    args=["-c", f"sleep {self.args.seconds}"],
                                                    num_replicas=self.args.replicas)])

    def times(self, job: str, t0: float, t_ret: float) -> Tuple[float, float]:
        return self.running_at[job] - t0, t_ret - self.ended_at[job]

    def floor(self) -> Tuple[float, float]:
        """The same objects torchspec creates, created by hand; then a watch of the Job until it is Complete
        or the controller has said so earlier (SuccessCriteriaMet, Kubernetes 1.31+: the verdict torchspec
        counts too); it notes when it first sees a replica ready: running, as torchspec counts it."""
        from kubernetes import watch

        from torchspec.schedulers.kubernetes.scheduler import KubernetesScheduler

        objects = KubernetesScheduler("bench").submit_dryrun(self.app(), dict(self.cfg)).request.objects  # not timed
        t0 = time.time()
        job = ""
        for obj in objects:
            if obj["kind"] == "Service":
                self.core.create_namespaced_service(self.ns, obj)
            else:
                job = self.batch.create_namespaced_job(self.ns, obj).metadata.name
        for event in watch.Watch().stream(self.batch.list_namespaced_job, self.ns,
                                          field_selector=f"metadata.name={job}", timeout_seconds=60):
            status = event["object"].status
            if status.ready:
                self.seen_running.setdefault(job, time.time())
            if any(c.type in VERDICT and c.status == "True" for c in status.conditions or []):
                break
        return self.times(job, t0, time.time())

    def job_of(self, handle: str) -> str:
        from torchspec.schedulers.kubernetes.names import role_key

        name = handle.rsplit(":", 1)[-1]
        return f"{name}-{role_key(name, 'w')}"

    def runner_way(self) -> Tuple[float, float]:
        t0 = time.time()
        handle = self.runner.run(self.app(), "kubernetes", dict(self.cfg))
        job = self.job_of(handle)

        def on_change(status: Any) -> None:
            if str(status.state) == "RUNNING":
                self.seen_running.setdefault(job, time.time())

        self.runner.wait(handle, wait_interval=2, on_change=on_change)
        return self.times(job, t0, time.time())

    def cli(self) -> Tuple[float, float]:
        spec = self.work / "k8s.yaml"
        spec.write_text(f"name: bk\nroles:\n  - name: w\n    image: {self.image}\n    entrypoint: sh\n"
                        f"    args: [-c, 'sleep {self.args.seconds}']\n    num_replicas: {self.args.replicas}\n")
        options = ["-c", ",".join(f"{k}={v}" for k, v in self.cfg.items())] if self.cfg else []
        t0 = time.time()
        t_ret, handle = self.submit_wait(spec, *options)
        return self.times(self.job_of(handle), t0, t_ret)

    def close(self) -> None:
        super().close()
        if self.watch is not None:
            self.watch.stop()
        if self.srv is not None:
            self.srv.stop()


# --------------------------------------------------------------------------- slurm


class Slurm(Backend):
    """One replica (a Slurm cluster on one host may have one node): it writes the time it started and the
    time it ends, to files, from its own clock (the machine's)."""

    name = "slurm"

    def __init__(self, args: argparse.Namespace, ts: List[str], env: Dict[str, str], work: Path) -> None:
        super().__init__(args, ts, env, work)
        self.count = 0

    def reach(self) -> str:
        if shutil.which("srun") is None:
            return "no Slurm client (srun)"
        probe = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True)
        if probe.returncode != 0 or not any(state in probe.stdout for state in ("idle", "mix")):
            return ("no Slurm cluster answers: eval \"$(scripts/slurm-cluster start)\" first"
                    f" ({' '.join(probe.stderr.split())[:120]})")
        return ""

    def command(self) -> Tuple[str, Path, Path]:
        self.count += 1
        start, end = self.work / f"slurm-{self.count}.start", self.work / f"slurm-{self.count}.end"
        return f"date +%s.%N > {start}; sleep {self.args.seconds}; date +%s.%N > {end}", start, end

    @staticmethod
    def times(start: Path, end: Path, t0: float, t_ret: float) -> Tuple[float, float]:
        return float(start.read_text()) - t0, t_ret - float(end.read_text())

    def floor(self) -> Tuple[float, float]:
        """srun: an allocation at once, and the step's end reported to it by the step itself."""
        script, start, end = self.command()
        t0 = time.time()
        subprocess.run(["srun", "-N1", "-n1", "sh", "-c", script], check=True, capture_output=True)
        return self.times(start, end, t0, time.time())

    def sbatch(self) -> Tuple[float, float]:
        """sbatch --wait: a batch job as torchspec submits one (started by the scheduler's cycle), and Slurm's
        own wait for it (which polls the controller on a growing schedule from 2 s)."""
        script, start, end = self.command()
        t0 = time.time()
        subprocess.run(["sbatch", "--wait", f"--output={self.work}/sbatch-%j.out", "--wrap", script], check=True,
                       capture_output=True)
        return self.times(start, end, t0, time.time())

    def app(self, script: str) -> Any:
        from torchspec import specs

        return specs.AppDef("bs", roles=[specs.Role(name="w", image=str(self.work), entrypoint="sh",
                                                    args=["-c", script],
                                                    resource=specs.Resource(cpu=1, gpu=0, memMB=0))])

    def runner_way(self) -> Tuple[float, float]:
        script, start, end = self.command()
        t0 = time.time()
        handle = self.runner.run(self.app(script), "slurm", {"log_dir": str(self.work / "logs")})
        self.runner.wait(handle, wait_interval=2)
        return self.times(start, end, t0, time.time())

    def cli(self) -> Tuple[float, float]:
        script, start, end = self.command()
        spec = self.work / "slurm.yaml"
        spec.write_text(f"name: bs\nroles:\n  - name: w\n    image: {self.work}\n    entrypoint: sh\n"
                        f"    args: [-c, {json.dumps(script)}]\n    resource: {{cpu: 1, gpu: 0, memMB: 0}}\n")
        t0 = time.time()
        t_ret, _ = self.submit_wait(spec, "-c", f"log_dir={self.work / 'logs'}")
        return self.times(start, end, t0, t_ret)


# --------------------------------------------------------------------------- main


def report(name: str, rounds: List[Round]) -> bool:
    """Print one backend's medians and verdicts; True when a target is missed.

    Running is judged against the way that starts the app as torchspec does (slurm: sbatch, a batch job, not
    srun's allocation); noticed against the floor.
    """
    med = {way: (median([r[way][0] for r in rounds]), median([r[way][1] for r in rounds])) for way in rounds[0]}
    print(f"\n{name}: {len(rounds)} rounds (medians)        running     noticed")
    for way in med:
        print(f"  {way:<30} {med[way][0] * 1000:8.1f} ms {med[way][1] * 1000:8.1f} ms")
    missed = False
    started_as = "sbatch --wait" if "sbatch --wait" in med else "floor"
    for way in ("runner", "cli"):
        ratio = med[way][0] / med[started_as][0]
        above = med[way][1] - med["floor"][1]
        ok_run, ok_notice = ratio <= RUNNING_TARGET, above <= NOTICED_TARGET_S
        missed |= (way == "runner" and not ok_run) or not ok_notice
        run_verdict = ("PASS" if ok_run else "MISS") if way == "runner" else "(info)"
        print(f"  {way}: running {ratio:5.2f}x {started_as} (target <= {RUNNING_TARGET}) {run_verdict};"
              f" noticed {above * 1000:+7.1f} ms over the floor (target <= {NOTICED_TARGET_S * 1000:.0f}) "
              f"{'PASS' if ok_notice else 'MISS'}")
    return missed


def attempt(way: str, fn: Callable[[], Tuple[float, float]], tries: int = 3) -> Tuple[float, float]:
    for i in range(tries):
        try:
            return fn()
        except Vanished as e:
            print(f"  {way}: {e}; running it again", file=sys.stderr)
    raise RuntimeError(f"{way}: gave up after {tries} tries")


def run_backend(backend: Any, repeat: int) -> Optional[List[Round]]:
    why = backend.reach()
    if why:
        print(f"note: {backend.name} skipped: {why}", file=sys.stderr)
        return None
    ways: Dict[str, Callable[[], Tuple[float, float]]] = {"floor": backend.floor, "runner": backend.runner_way,
                                                          "cli": backend.cli}
    if hasattr(backend, "sbatch"):
        ways["sbatch --wait"] = backend.sbatch
    rounds: List[Round] = []
    try:
        for i in range(repeat + 1):
            result = {way: attempt(way, fn) for way, fn in ways.items()}
            if i:
                rounds.append(result)
            print(f"  {backend.name}: {'warm-up' if i == 0 else f'round {i}/{repeat}'} done", file=sys.stderr)
    finally:
        backend.close()
    return rounds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backends", default="docker,kubernetes,slurm", help="which (default: all three)")
    ap.add_argument("--replicas", type=int, default=4, help="replicas of the app (default 4)")
    ap.add_argument("--seconds", type=float, default=1.5, help="how long each replica sleeps (default 1.5)")
    ap.add_argument("--repeat", type=int, default=5, help="timed rounds per backend (default 5)")
    args, ts = parse_and_find(ap)
    work = Path(tempfile.mkdtemp(prefix="torchspec-bench-waits-"))
    os.environ.update(bench_env(work))  # the in-process runner reads TORCHSPEC_HOME and the cache from here
    missed = False
    try:
        classes = {"docker": Docker, "kubernetes": Kubernetes, "slurm": Slurm}
        for name in args.backends.split(","):
            backend = classes[name](args, ts, dict(os.environ), work)
            rounds = run_backend(backend, args.repeat)
            if rounds:
                missed |= report(name, rounds)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if missed and args.fail_on_miss else 0


if __name__ == "__main__":
    sys.exit(main())
