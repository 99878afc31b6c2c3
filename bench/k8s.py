#!/usr/bin/env python3
"""The kubernetes scheduler and `torchspec apply` on a real cluster, against a Job watch and `kubectl apply`.

    python bench/k8s.py                          # both parts: waits (5 rounds), apply (200 specs, 3 rounds)
    python bench/k8s.py --parts waits --repeat 7
    python bench/k8s.py --parts apply --specs 200 --repeat 3
    python bench/k8s.py --quick                  # a smoke run: 1 round of each, 20 specs

It needs the real cluster of the tests (`scripts/k8s-cluster up`: its admin
kubeconfig, $TORCHSPEC_K8S_KUBECONFIG or /tmp/torchspec-k8s/admin.kubeconfig,
its kubectl, and the image torchspec-test/busybox:k8s on the node); without
one it says why and exits 2.  Each part works in namespaces of its own
(tsb-...), deleted at the end without waiting; it starts, stops and restarts
nothing of the cluster.

waits: one app of --replicas replicas that sleep --seconds and exit 0, run to
its end three ways per round, as bench/waits.py does against the API
stand-in, with its code (floor, runner, cli; a first round warms up,
uncounted):

  floor    the kubernetes client creates the Service and Job torchspec would
           (its dry run, not timed), then watches the Job until it is Complete
           (or SuccessCriteriaMet, said first)
  runner   in process: Runner.run, then Runner.wait (one Runner over all rounds)
  cli      `torchspec submit --wait -s kubernetes -c namespace=NS SPEC`, a fresh process

The cluster's moments come from reference watches of the namespace's Jobs
and pods, streams in a process of their own (nothing polls): when each Job
appeared, when a pod of it was first Running (the kubelet's report, and
torchspec's RUNNING), and when the Job became Complete.  Per way:

  created   submit -> the reference watch sees the Job
  running   submit -> the reference watch sees a pod of it Running
  own       submit -> the way itself knows the app runs (the floor's watch
            sees the Job count a ready replica; Runner.wait's on_change gets
            RUNNING), less the cluster's time from the Job's creation to its
            first Running pod (scheduling, the kubelet's relist: up to a second
            from round to round, and none of the way's doing): what the way adds
  noticed   the Job's success, as the reference watch saw it (Complete, or
            SuccessCriteriaMet where Kubernetes 1.31+ writes it first: the
            floor and torchspec both end there) -> the way returned

Targets: the runner's `own` within 50 ms of the floor's; `noticed` of the
runner and of the CLI within 50 ms of the floor's.

apply: --specs generated spec files (one role, one replica, `sh -c "echo v1"`)
in a git repository made for the run, and the manifests of the same apps for
kubectl: `apply`'s own dry run of each spec, in process and not timed, one
file a spec (the same objects, labels and annotations `torchspec apply`
creates, less the random app id).  Each round makes two namespaces with a
ResourceQuota of `pods: 0`, so that every Job is created but starts no pod
(the same for both sides: Jobs and Services are created, the Job controller's
pod creations are refused), and times, each side a fresh process, the side
going first alternating by round:

  torchspec  `torchspec apply -s kubernetes -c namespace=NS --replace --prune --format json jobs`
             (from the repository's root)
  kubectl    `kubectl apply --prune -l torchspec.dev/session=torchspec
             --prune-allowlist=core/v1/Service --prune-allowlist=batch/v1/Job -f MANIFESTS`

three times: first (everything created), again with nothing changed, and
with 10 specs changed (`echo v2`): torchspec replaces their apps (cancel, then
submit the new one), kubectl prunes the old objects and creates those of the
changed specs' new dry runs, so both end with the same objects.  Between the
first step and the next it sleeps --settle seconds (30): the Job controller
retries each refused pod at 1 s, doubling, so for the first seconds after 400
new Jobs the API server is busy with their refused pod creations and events,
a load the apply of a real repository does not meet (without the pause,
torchspec's unchanged step, which waits on 400 reads, took 1.3 to 1.6x as long
as its changed step, which does more; kubectl's time is mostly its own CPU).
After each step it checks that both namespaces hold the same number of Jobs
and Services, and what each side said it did.  Targets: first <= 1.2x
kubectl, unchanged <= 0.2x, 10 changed <= 0.3x.  A first round of 20 specs
warms up (kubectl's discovery and OpenAPI cache, torchspec's entry points),
uncounted; between rounds it waits for the last round's namespaces to be gone.

A run (waits) or round (apply) during which the kube-apiserver restarted (a
new process on this machine: on a shared cluster, someone else's test of
riding out a restart) is run again, up to three times.  It prints medians,
then PASS or MISS per target, and exits 0 whatever the timings (1 on a MISS
with --fail-on-miss).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, FrozenSet, List, Optional, Tuple, TypeVar

from common import bench_env, median, parse_and_find, proc_matches, timed
from waits import VERDICT, Kubernetes, Vanished, attempt, run_backend  # waits takes this folder off sys.path: import common first

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
from k8s_support import cluster_problem, kubeconfig_path, kubectl_path  # noqa: E402

sys.path.remove(str(REPO / "tests"))

IMAGE = "torchspec-test/busybox:k8s"  # on the node already (scripts/k8s-cluster load)
WAIT_TARGET_S = 0.050  # own and noticed, over the floor's
APPLY_TARGETS = {"first": 1.2, "unchanged": 0.2, "changed": 0.3}  # torchspec / kubectl at most
SESSION_LABEL = "torchspec.dev/session=torchspec"  # on every object torchspec creates
T = TypeVar("T")


class Cluster:
    """The real cluster's clients, and namespaces of this run (deleted at the end, not waited for)."""

    def __init__(self, kubeconfig: str, kubectl: str) -> None:
        import kubernetes

        self.kubeconfig, self.kubectl = kubeconfig, kubectl
        client = kubernetes.config.new_client_from_config(config_file=kubeconfig)
        self.core, self.batch = kubernetes.client.CoreV1Api(client), kubernetes.client.BatchV1Api(client)
        self.namespaces: List[str] = []

    def new_namespace(self, prefix: str, no_pods: bool = False) -> str:
        """A fresh namespace; with ``no_pods`` a ResourceQuota of 0 pods in it (Jobs are made, pods refused)."""
        name = f"tsb-{prefix}-{uuid.uuid4().hex[:6]}"
        self.core.create_namespace({"metadata": {"name": name, "labels": {"torchspec-bench": "k8s"}}})
        self.namespaces.append(name)
        if no_pods:
            self.core.create_namespaced_resource_quota(name, {"metadata": {"name": "no-pods"},
                                                              "spec": {"hard": {"pods": "0"}}})
        return name

    def delete(self, names: List[str]) -> None:
        """Delete namespaces without waiting (gone already is fine)."""
        import kubernetes

        for name in names:
            try:
                self.core.delete_namespace(name)
            except kubernetes.client.ApiException as e:
                if e.status != 404:
                    raise
            self.namespaces.remove(name)

    def wait_gone(self, names: List[str], timeout: float = 300) -> None:
        """Block (a watch) until none of ``names`` exists any more."""
        from kubernetes import watch

        left = set(names)
        deadline = time.monotonic() + timeout
        while left and time.monotonic() < deadline:
            listed = self.core.list_namespace(label_selector="torchspec-bench=k8s")
            left &= {ns.metadata.name for ns in listed.items}
            if not left:
                return
            for event in watch.Watch().stream(self.core.list_namespace, label_selector="torchspec-bench=k8s",
                                              resource_version=listed.metadata.resource_version,
                                              timeout_seconds=max(1, int(deadline - time.monotonic()))):
                if event["type"] == "DELETED":
                    left.discard(event["object"].metadata.name)
                    if not left:
                        return
        if left:
            raise RuntimeError(f"namespaces still there after {timeout:.0f} s: {sorted(left)}")

    def counts(self, ns: str) -> Tuple[int, int]:
        """Jobs and Services in ``ns`` that are not being deleted."""
        live = lambda items: sum(1 for o in items if o.metadata.deletion_timestamp is None)  # noqa: E731
        return (live(self.batch.list_namespaced_job(ns).items), live(self.core.list_namespaced_service(ns).items))

    @staticmethod
    def server_pids() -> FrozenSet[int]:
        """The kube-apiserver processes on this machine (scripts/k8s-cluster runs it here): a restart changes
        them; none for a cluster elsewhere (then restarts go unseen)."""
        return frozenset(pid for pid, cmd in proc_matches([b"kube-apiserver"])
                         if cmd.split()[0].endswith("/kube-apiserver"))

    def wait_back(self, timeout: float = 180) -> None:
        """Return once the API server answers again, asking once a second (between measurements only)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.core.list_namespace(limit=1)
                return
            except Exception:  # noqa: BLE001 - not back yet
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)

    def unless_restarted(self, fn: Callable[[], T]) -> T:
        """``fn()``; :class:`Vanished` (run it again) where the API server restarted meanwhile: on a shared
        cluster, someone else's test of riding out a restart."""
        before = self.server_pids()
        try:
            result = fn()
        except Vanished:
            raise
        except Exception as e:  # noqa: BLE001 - a failure with the server restarted is the restart's
            self.wait_back()  # a server stopping (SIGTERM) refuses connections for a while before it exits
            if self.server_pids() == before:
                raise
            raise Vanished(f"the API server restarted while it ran ({type(e).__name__})") from None
        if self.server_pids() != before:
            self.wait_back()
            raise Vanished("the API server restarted while it ran")
        return result

    def close(self) -> None:
        self.delete(list(self.namespaces))


# --------------------------------------------------------------------------- waits


def follow(namespace: str) -> int:
    """``bench/k8s.py --follow NS``: the reference watches, a process of their own (so that decoding their
    events takes no time from the ways measured): prints ``added JOB T``, ``running JOB T`` (a pod of it
    Running: the kubelet's report, torchspec's RUNNING) and ``ended JOB T`` (Complete), with when the event
    came; a watch the server ends (a restart: someone else's test) is started again."""
    import kubernetes
    from kubernetes import watch

    client = kubernetes.config.new_client_from_config(config_file=os.environ["KUBECONFIG"])
    batch, core = kubernetes.client.BatchV1Api(client), kubernetes.client.CoreV1Api(client)
    lock = threading.Lock()

    def say(what: str, name: Optional[str], when: float) -> None:
        if name:
            with lock:
                print(what, name, f"{when:.6f}", flush=True)

    def on_job(job: Dict[str, Any], when: float) -> None:
        say("added", job["metadata"]["name"], when)
        if any(c["type"] in VERDICT and c["status"] == "True" for c in job["status"].get("conditions") or []):
            say("ended", job["metadata"]["name"], when)

    def on_pod(pod: Dict[str, Any], when: float) -> None:
        if pod["status"].get("phase") == "Running":
            say("running", (pod["metadata"].get("labels") or {}).get("batch.kubernetes.io/job-name"), when)

    def stream(list_fn: Callable[..., Any], note: Callable[[Dict[str, Any], float], None]) -> None:
        while True:
            try:
                for event in watch.Watch().stream(list_fn, namespace, timeout_seconds=3600, deserialize=False):
                    note(event["object"], time.time())
            except Exception:  # noqa: BLE001 - the API server went away for a while: follow again
                time.sleep(1)

    threading.Thread(target=stream, args=(core.list_namespaced_pod, on_pod), daemon=True).start()
    stream(batch.list_namespaced_job, on_job)
    return 0


class RealKubernetes(Kubernetes):
    """bench/waits.py's kubernetes ways, on the real cluster; the cluster's moments from ``follow``."""

    image = IMAGE

    def __init__(self, args: argparse.Namespace, ts: List[str], env: Dict[str, str], work: Path,
                 cluster: Cluster) -> None:
        super().__init__(args, ts, env, work)
        self.cluster = cluster
        self.added_at: Dict[str, float] = {}
        self.seen = threading.Condition()
        self.follower: Optional["subprocess.Popen[str]"] = None

    def reach(self) -> str:
        self.ns = self.cluster.new_namespace("waits")
        self.cfg = {"namespace": self.ns}
        os.environ["KUBECONFIG"] = self.env["KUBECONFIG"] = self.cluster.kubeconfig
        self.batch, self.core = self.cluster.batch, self.cluster.core
        self.follower = subprocess.Popen([sys.executable, __file__, "--follow", self.ns], env=self.env,
                                         stdout=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
        threading.Thread(target=self.read_follower, daemon=True).start()
        return ""

    def read_follower(self) -> None:
        """Note the first time ``follow`` reports each moment of each Job."""
        assert self.follower is not None and self.follower.stdout is not None
        moments = {"added": self.added_at, "running": self.running_at, "ended": self.ended_at}
        for line in self.follower.stdout:
            what, job, when = line.split()
            with self.seen:
                moments[what].setdefault(job, float(when))
                self.seen.notify_all()

    def times(self, job: str, t0: float, t_ret: float) -> Tuple[float, ...]:  # type: ignore[override]
        """(running, noticed, own, created) of one way's run, in seconds; see the module docstring."""
        with self.seen:
            if not self.seen.wait_for(lambda: job in self.ended_at, timeout=30):
                raise RuntimeError(f"the reference watch never saw Job {job} Complete")
        if job not in self.running_at:
            raise Vanished(f"the reference watch never saw a pod of {job} Running")
        cluster = self.running_at[job] - self.added_at[job]
        own = self.seen_running.get(job, float("nan")) - t0 - cluster
        return self.running_at[job] - t0, t_ret - self.ended_at[job], own, self.added_at[job] - t0

    def floor(self) -> Tuple[float, ...]:  # type: ignore[override]
        return self.cluster.unless_restarted(super().floor)

    def runner_way(self) -> Tuple[float, ...]:  # type: ignore[override]
        return self.cluster.unless_restarted(super().runner_way)

    def cli(self) -> Tuple[float, ...]:  # type: ignore[override]
        return self.cluster.unless_restarted(super().cli)

    def close(self) -> None:
        if self._runner is not None:
            self._runner.close()
        if self.follower is not None:
            self.follower.terminate()
            self.follower.wait()


def report_waits(rounds: List[Dict[str, Tuple[float, ...]]], replicas: int, seconds: float) -> bool:
    """Print the waits' medians and verdicts; True when a target is missed."""
    med = {way: [median([r[way][i] for r in rounds if r[way][i] == r[way][i]]) for i in range(4)]
           for way in rounds[0]}
    print(f"\nsubmit -> running and end -> noticed, {replicas} replicas sleeping {seconds:g} s,"
          f" {len(rounds)} rounds (medians)")
    print(f"  {'way':<8} {'created':>10} {'running':>10} {'own':>10} {'noticed':>10}")
    for way, (running, noticed, own, created) in med.items():
        cells = [f"{v * 1000:7.1f} ms" if v == v else f"{'-':>10}" for v in (created, running, own, noticed)]
        print(f"  {way:<8} {' '.join(cells)}")
    print("  (created: submit -> the Job exists; running: -> a pod of it Running; own: -> the way knows it runs,"
          " less the cluster's part; noticed: the Job's success (Complete or SuccessCriteriaMet) -> the way returned)")
    missed = False
    checks = [("runner", 2, "submit -> running, less the cluster's part"), ("runner", 1, "end -> noticed"),
              ("cli", 1, "end -> noticed")]
    for way, i, label in checks:
        above = med[way][i] - med["floor"][i]
        ok = above <= WAIT_TARGET_S
        missed |= not ok
        print(f"  {way}: {label}: {above * 1000:+7.1f} ms over the Job watch's"
              f" (target <= {WAIT_TARGET_S * 1000:.0f}) {'PASS' if ok else 'MISS'}")
    return missed


def bench_waits(args: argparse.Namespace, ts: List[str], work: Path, cluster: Cluster) -> bool:
    backend = RealKubernetes(args, ts, dict(os.environ), work, cluster)
    rounds = run_backend(backend, args.repeat)
    return report_waits(rounds, args.replicas, args.seconds) if rounds else False


# --------------------------------------------------------------------------- apply


class ApplyBench:
    """``torchspec apply`` of a folder of specs against ``kubectl apply`` of their dry-run manifests."""

    def __init__(self, args: argparse.Namespace, ts: List[str], env: Dict[str, str], work: Path,
                 cluster: Cluster) -> None:
        self.args, self.ts, self.cluster = args, ts, cluster
        self.env = {**env, "KUBECONFIG": cluster.kubeconfig}
        self.repo, self.manifests = work / "repo", work / "manifests"
        self.specs = self.repo / "jobs"
        self.kubectl = [cluster.kubectl, "--kubeconfig", cluster.kubeconfig, "--cache-dir", str(work / "kubecache")]
        self.repo.mkdir()
        self.git("init", "-q")

    def git(self, *args: str) -> None:
        subprocess.run(["git", "-c", "user.name=bench", "-c", "user.email=bench@example.invalid", *args],
                       cwd=self.repo, check=True, capture_output=True)

    def write_specs(self, version: str, which: List[int]) -> List[Path]:
        """Spec files ``which`` saying ``echo VERSION``, committed; their paths."""
        self.specs.mkdir(parents=True, exist_ok=True)
        paths = []
        for k in which:
            path = self.specs / f"b{k:03d}.yaml"
            path.write_text(f"name: b{k:03d}\nroles:\n  - name: w\n    image: {IMAGE}\n    entrypoint: sh\n"
                            f"    args: [-c, 'echo {version}']\n")
            paths.append(path)
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", version)
        return paths

    def write_manifests(self, paths: List[Path], ns: str) -> None:
        """kubectl's side: each spec's objects from apply's own dry run for ``ns``, a file a spec."""
        import yaml

        from torchspec.gitops.apply import ApplyOptions, dry_run, load_specs
        from torchspec.runner import get_runner

        self.manifests.mkdir(exist_ok=True)
        options = ApplyOptions("kubernetes", cfg={"namespace": ns})
        with get_runner() as runner:
            run_options = runner.run_options("kubernetes", options.cfg)
            steps = load_specs(os.path.realpath(self.repo), [str(p) for p in paths], options, "kubernetes",
                               run_options)
            dry_run(runner, steps, options, "kubernetes", run_options)
        for step in steps:
            if step.action != "create":
                raise RuntimeError(f"{step.path}: {step.action} {step.message}")
            objects = step.request.request.objects
            for obj in objects:
                obj["metadata"]["namespace"] = ns
            (self.manifests / Path(step.path).with_suffix(".yaml").name).write_text(yaml.safe_dump_all(objects))

    def torchspec_apply(self, ns: str) -> Tuple[float, Dict[str, int]]:
        cmd = self.ts + ["apply", "-s", "kubernetes", "-c", f"namespace={ns}", "--replace", "--prune",
                         "--format", "json", "jobs"]
        elapsed, out = timed(cmd, self.env, self.repo, ok=(0, 6))  # 6: a step failed, said in the JSON
        done: Dict[str, int] = {}
        for step in json.loads(out)["steps"]:
            if step["status"] == "failed":
                raise RuntimeError(f"torchspec apply: {step['identity']} failed: {step['message']}")
            done[step["action"]] = done.get(step["action"], 0) + 1
        return elapsed, done

    def kubectl_apply(self, ns: str) -> Tuple[float, Dict[str, int]]:
        cmd = self.kubectl + ["apply", "--prune", "-l", SESSION_LABEL, "--prune-allowlist=core/v1/Service",
                              "--prune-allowlist=batch/v1/Job", "-f", str(self.manifests)]
        elapsed, out = timed(cmd, self.env, self.repo)
        done: Dict[str, int] = {}
        for line in out.splitlines():
            word = line.split()[-1] if line.split() else ""
            done[word] = done.get(word, 0) + 1
        return elapsed, done

    def one_round(self, r: int, n: int) -> Dict[str, Dict[str, float]]:
        """One round of ``n`` specs in two new namespaces, deleted after it; seconds per step and side."""
        tns, kns = self.cluster.new_namespace("apply-ts", True), self.cluster.new_namespace("apply-kc", True)
        try:
            result = self.steps(r, n, tns, kns)
        finally:
            try:
                self.cluster.delete([tns, kns])
            except Exception:  # noqa: BLE001 - the server is away: Cluster.close deletes them at the end
                pass
        self.cluster.wait_gone([tns, kns])
        return result

    def steps(self, r: int, n: int, tns: str, kns: str) -> Dict[str, Dict[str, float]]:
        """first, unchanged, 10 changed, with torchspec in ``tns`` and kubectl in ``kns``."""
        changed = list(range(0, n, n // 10))[:10]
        shutil.rmtree(self.manifests, ignore_errors=True)
        self.write_manifests(self.write_specs("v1", list(range(n))), kns)
        sides: Dict[str, Callable[[str], Tuple[float, Dict[str, int]]]] = {"torchspec": self.torchspec_apply,
                                                                           "kubectl": self.kubectl_apply}
        order = ["torchspec", "kubectl"] if r % 2 else ["kubectl", "torchspec"]
        c = len(changed)
        expect = {"first": ({"create": n}, {"created": 2 * n}),
                  "unchanged": ({"unchanged": n}, {"unchanged": 2 * n}),
                  "changed": ({"replace": c, "unchanged": n - c}, {"created": 2 * c, "unchanged": 2 * (n - c),
                                                                      "pruned": 2 * c})}
        result: Dict[str, Dict[str, float]] = {}
        for step in ("first", "unchanged", "changed"):
            if step == "unchanged":
                time.sleep(self.args.settle)  # the Job controller's retries of the refused pods thin out
            if step == "changed":
                # new dry runs (new app ids) in place of the old files: kubectl prunes what they no longer hold
                self.write_manifests(self.write_specs("v2", changed), kns)
            result[step] = {}
            for side in order:
                result[step][side], done = sides[side](tns if side == "torchspec" else kns)
                want = expect[step][0 if side == "torchspec" else 1]
                if done != want:
                    raise RuntimeError(f"{step}: {side} did {done}, not {want}")
            counts = {ns: self.cluster.counts(ns) for ns in (tns, kns)}
            if counts[tns] != counts[kns] or counts[tns] != (n, n):
                raise RuntimeError(f"{step}: (Jobs, Services) torchspec's {counts[tns]}, kubectl's {counts[kns]},"
                                   f" not ({n}, {n}) each")
        return result

    def run(self) -> List[Dict[str, Dict[str, float]]]:
        rounds = []
        for r in range(self.args.repeat + 1):  # the warm-up round fills the caches: 20 specs do
            n = self.args.specs if r else min(20, self.args.specs)
            result = attempt("apply", lambda: self.cluster.unless_restarted(lambda: self.one_round(r, n)))
            if r:
                rounds.append(result)
            print(f"  apply: {'warm-up' if r == 0 else f'round {r}/{self.args.repeat}'} done: "
                  + ", ".join(f"{step} {t['torchspec']:.2f} s / {t['kubectl']:.2f} s" for step, t in result.items()),
                  file=sys.stderr)
        return rounds


def report_apply(rounds: List[Dict[str, Dict[str, float]]], specs: int) -> bool:
    print(f"\napply of {specs} specs (a Job and a Service each), {len(rounds)} rounds (medians)")
    print(f"  {'step':<12} {'torchspec':>10} {'kubectl':>10} {'ratio':>7}  target")
    missed = False
    for step, target in APPLY_TARGETS.items():
        ts, kc = median([r[step]["torchspec"] for r in rounds]), median([r[step]["kubectl"] for r in rounds])
        ok = ts / kc <= target
        missed |= not ok
        print(f"  {step:<12} {ts:8.3f} s {kc:8.3f} s {ts / kc:7.2f}  <= {target} {'PASS' if ok else 'MISS'}")
    return missed


# --------------------------------------------------------------------------- main


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--parts", default="waits,apply", help="which: waits, apply or both (default)")
    ap.add_argument("--replicas", type=int, default=2, help="waits: replicas of the app (default 2)")
    ap.add_argument("--seconds", type=float, default=1.5, help="waits: how long each replica sleeps (default 1.5)")
    ap.add_argument("--specs", type=int, default=200, help="apply: how many spec files (default 200)")
    ap.add_argument("--settle", type=float, default=30,
                    help="apply: seconds to let the cluster settle after the first step (default 30)")
    ap.add_argument("--repeat", type=int, default=0, help="timed rounds (default: waits 5, apply 3)")
    ap.add_argument("--quick", action="store_true", help="a smoke run: 1 round of each, 20 specs")
    args, ts = parse_and_find(ap)
    if args.quick:
        args.repeat, args.specs, args.settle = 1, min(args.specs, 20), min(args.settle, 5)
    if args.specs < 10:
        ap.error("--specs must be 10 or more (10 of them change)")
    kubeconfig = kubeconfig_path()
    cluster_dir = os.environ.get("TORCHSPEC_K8S_DIR") or os.path.dirname(kubeconfig)
    problem = cluster_problem(kubeconfig, cluster_dir)
    if problem:
        print(f"bench: no real Kubernetes cluster: {problem}; start one with scripts/k8s-cluster up",
              file=sys.stderr)
        return 2
    cluster = Cluster(kubeconfig, kubectl_path(cluster_dir))
    work = Path(tempfile.mkdtemp(prefix="torchspec-bench-k8s-"))
    os.environ.update(bench_env(work))  # the in-process runner reads TORCHSPEC_HOME and the cache from here
    parts, repeat, missed = args.parts.split(","), args.repeat, False
    try:
        if "waits" in parts:
            args.repeat = repeat or 5
            missed |= bench_waits(args, ts, work, cluster)
        if "apply" in parts:
            args.repeat = repeat or 3
            missed |= report_apply(ApplyBench(args, ts, dict(os.environ), work, cluster).run(), args.specs)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        cluster.close()
    return 1 if missed and args.fail_on_miss else 0


if __name__ == "__main__":
    sys.exit(follow(sys.argv[2]) if sys.argv[1:2] == ["--follow"] else main())
