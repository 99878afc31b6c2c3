"""The kubernetes scheduler's lifecycle on a real cluster and on the API stand-in, by the same tests.

The real cluster is the one ``scripts/k8s-cluster up`` builds from Kubernetes' Go modules
(``k8s_cluster`` fixture, tests/k8s_support.py): Kubernetes' own API server, controllers and kubelet,
pods that really run the busybox test image (loaded from the local Docker engine, as ``kind load
docker-image`` does), print logs and exit with real codes, and the controllers of the other flavors (JobSet,
Kubeflow Trainer, the Training Operator, Volcano) with their webhooks.
The stand-in is tests/kube/apiserver.py with tests/kube/node.py playing the Job controller and a kubelet
that runs each container's command as a local process (flavor ``job`` only). Each lifecycle test runs
against both (the ``target`` fixture's parameter), so a behaviour the stand-in gets wrong fails there.
Everything goes through the CLI in a new process, as a user's shell would, with ``KUBECONFIG`` naming
the cluster, and every test works in a namespace of its own.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import re
import subprocess
import sys
import textwrap
import time
from typing import Any, Dict, Iterator, List, Optional, Tuple

import uuid
from dataclasses import dataclass

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "kube"))

from apiserver import FakeApiServer  # noqa: E402
from k8s_support import Cluster  # noqa: E402
from node import FakeNode  # noqa: E402

#: some tests here use the real cluster through request.getfixturevalue: run them with the cluster's (last)
pytestmark = pytest.mark.k8s_cluster

#: the test image's tag on the node: not ``latest``, whose pull policy (Always) would reach for a registry
K8S_IMAGE = "torchspec-test/busybox:k8s"


@pytest.fixture(scope="session")
def k8s_image(k8s_cluster: Cluster, docker_client: Any, busybox_image: str) -> str:
    """The busybox test image, tagged for Kubernetes and put on the node."""
    docker_client.images.get(busybox_image).tag(K8S_IMAGE)
    k8s_cluster.load(K8S_IMAGE)
    return K8S_IMAGE


@dataclass
class Target:
    """Where a test's apps run: the real cluster or the stand-in, and a namespace of the test's own there."""

    kind: str
    ns: str
    cluster: Optional[Cluster] = None
    srv: Optional[FakeApiServer] = None

    def leftovers(self) -> List[str]:
        """What the namespace still holds of an app: pods, services, jobs, jobsets, config maps (not Kubernetes' own)."""
        if self.cluster is not None:
            kinds = ("pods,services,jobs.batch,configmaps,jobsets.jobset.x-k8s.io,pytorchjobs.kubeflow.org,"
                     "trainjobs.trainer.kubeflow.org,workloads.kueue.x-k8s.io,jobs.batch.volcano.sh,"
                     "podgroups.scheduling.volcano.sh")
            out = self.cluster.kubectl("get", kinds, "-n", self.ns, "-o", "name").stdout.split()
            return [name for name in out if name != "configmap/kube-root-ca.crt"]
        assert self.srv is not None
        found = []
        for api, plural, kind in (("v1", "pods", "pod"), ("v1", "services", "service"),
                                  ("batch/v1", "jobs", "job.batch"), ("v1", "configmaps", "configmap")):
            found += [f"{kind}/{o['metadata']['name']}" for o in self.srv.objects(api, plural, self.ns)]
        return found

    def apps(self, flavor: str) -> List[str]:
        """The flavor's own objects, one per app (a JobSet's child Jobs are not apps)."""
        return [name for name in self.leftovers() if name.startswith(APP_KINDS[flavor])]


#: flavor pytorchjob runs only a torchrun role, which the busybox image has not: the real Training Operator runs
#: it in test_dist_ddp_trains_with_gloo_across_two_pods (success, logs, delete)
TARGETS = [("stand-in", "job"), ("real", "job"), ("real", "jobset"), ("real", "trainjob"), ("real", "volcano")]
#: the flavors that run one role only
ONE_ROLE = ("trainjob",)
#: the object one app of each flavor is, as ``kubectl get -o name`` names it
APP_KINDS = {"job": "job.batch/", "jobset": "jobset.jobset.x-k8s.io/", "trainjob": "trainjob.trainer.kubeflow.org/",
             "volcano": "job.batch.volcano.sh/"}


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> pytest.MonkeyPatch:
    monkeypatch.setenv("TORCHSPEC_HOME", str(tmp_path / "home"))
    return monkeypatch


@pytest.fixture
def real(request: pytest.FixtureRequest, env: pytest.MonkeyPatch) -> Target:
    """The real cluster, a new namespace on it, and KUBECONFIG naming it."""
    cluster: Cluster = request.getfixturevalue("k8s_cluster")
    request.getfixturevalue("k8s_image")
    env.setenv("KUBECONFIG", cluster.kubeconfig)
    return Target("real", cluster.new_namespace(), cluster=cluster)


@pytest.fixture
def stand_in(env: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> Iterator[Target]:
    """The API stand-in with a fake node running its pods, a new namespace on it, and KUBECONFIG naming it."""
    with FakeApiServer() as srv, FakeNode(srv):
        env.setenv("KUBECONFIG", srv.write_kubeconfig(tmp_path / "kubeconfig"))
        ns = f"t-{uuid.uuid4().hex[:8]}"
        srv.add_namespace(ns)
        yield Target("stand-in", ns, srv=srv)


@pytest.fixture
def target(request: pytest.FixtureRequest) -> Target:
    """The parametrized side: ``stand-in`` or ``real``."""
    return request.getfixturevalue("stand_in" if request.param == "stand-in" else "real")


def lifecycle(test: Any) -> Any:
    """Run ``test(flavor, target, ...)`` on every side and flavor in TARGETS."""
    return pytest.mark.parametrize("target,flavor", TARGETS, indirect=["target"],
                                   ids=[f"{side}-{flavor}" for side, flavor in TARGETS])(test)


def torchspec(*argv: str, timeout: float = 180, cwd: Optional[pathlib.Path] = None
              ) -> "subprocess.CompletedProcess[str]":
    return subprocess.run([sys.executable, "-m", "torchspec", *argv], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL, cwd=cwd)


def write_spec(path: pathlib.Path, name: str, script: str, replicas: int = 2, roles: int = 1,
               gate: Optional[pathlib.Path] = None) -> pathlib.Path:
    """A spec of ``roles`` roles whose replicas run ``script`` in sh (``${replica_id}`` filled in per replica);
    with ``gate``, a folder of this machine each replica mounts at the same path (see ``until_open``)."""
    role_text = ""
    mounts = f"\n  mounts: [{json.dumps(f'type=bind,src={gate},dst={gate}')}]" if gate else ""
    for r in range(roles):
        role_text += textwrap.dedent(f"""\
          - name: {"trainer" if r == 0 else f"worker{r}"}
            image: {K8S_IMAGE}
            entrypoint: sh
            args: ["-c", {json.dumps(script)}]
            num_replicas: {replicas}""") + mounts + "\n"
    path.write_text(f"name: {name}\nroles:\n" + textwrap.indent(role_text, "  "))
    return path


def until_open(gate: pathlib.Path) -> str:
    """The shell of a replica that waits until the test opens ``gate`` (``open_gate``): an app held running as long
    as the test needs, never for a number of seconds that a loaded machine may outlast. The kubelet runs on this
    machine (and the stand-in's node runs replicas as its processes), so the folder is the same file for both."""
    return f"while [ ! -e {gate}/open ]; do sleep 0.2; done"


def open_gate(gate: pathlib.Path) -> None:
    (gate / "open").touch()


def opts(ns: str, flavor: str, **extra: str) -> str:
    return ",".join(f"{k}={v}" for k, v in {"namespace": ns, "flavor": flavor, **extra}.items())


def submit(spec: pathlib.Path, ns: str, flavor: str, *more: str, **options: str) -> str:
    done = torchspec("submit", "-s", "kubernetes", "-c", opts(ns, flavor, **options), *more, str(spec))
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def status(handle: str) -> Dict[str, Any]:
    done = torchspec("status", "--json", handle)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def wait_state(handle: str, states: tuple, timeout: float = 120) -> Dict[str, Any]:
    deadline = time.monotonic() + timeout
    seen: List[str] = []
    while True:
        st = status(handle)
        if not seen or seen[-1] != st["state"]:
            seen.append(st["state"])
        if st["state"] in states:
            return st
        assert time.monotonic() < deadline, f"{handle} never reached {states}: went through {seen}"
        time.sleep(0.5)


#: pods that ignore SIGTERM take their 30 s grace period, longer on a busy node
def wait_gone(target: Target, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while (left := target.leftovers()) and time.monotonic() < deadline:
        time.sleep(1)
    assert left == [], f"left behind in {target.ns}: {left}"


# ----------------------------------------------------------------------------
# The lifecycle, per flavor
# ----------------------------------------------------------------------------


@lifecycle
def test_an_app_runs_to_success_and_its_logs_are_real(target: Target, flavor: str, tmp_path: pathlib.Path) -> None:
    gate = tmp_path / "gate"
    gate.mkdir()
    spec = write_spec(tmp_path / "ok.yaml", "ok",
                      f"echo hello from ${{replica_id}}; {until_open(gate)}; echo bye ${{replica_id}}", gate=gate)
    handle = submit(spec, target.ns, flavor)
    assert handle.startswith("kubernetes://")
    running = wait_state(handle, ("RUNNING", "SUCCEEDED", "FAILED"))
    assert running["state"] == "RUNNING", running  # held running until the gate opens
    listed = torchspec("list", "-s", "kubernetes", "-c", f"namespace={target.ns}", "--json")
    assert listed.returncode == 0, listed.stderr
    assert handle in listed.stdout
    described = torchspec("describe", handle)
    assert described.returncode == 0 and "trainer" in described.stdout, described.stderr
    open_gate(gate)
    done = torchspec("wait", handle, "--timeout", "120")
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "SUCCEEDED" in done.stdout
    final = status(handle)
    replicas = final["roles"][0]["replicas"]
    assert [(r["state"], r["exit_code"]) for r in replicas] == [("SUCCEEDED", 0), ("SUCCEEDED", 0)], final
    assert final["provenance"]["content_hash"].startswith("v1-")
    if target.cluster is not None:  # the image the kubelet ran, resolved from the tag
        assert "sha256:" in final["provenance"]["images"]["trainer"], final["provenance"]
    logs = torchspec("logs", handle)
    assert logs.returncode == 0, logs.stderr
    for k in (0, 1):
        assert f"trainer/{k}" in logs.stdout and f"hello from {k}" in logs.stdout and f"bye {k}" in logs.stdout
    # cancel of an app that has ended changes nothing (as in TorchX); delete removes it and its pods' logs
    assert torchspec("cancel", handle).returncode == 0
    assert target.leftovers()
    assert torchspec("delete", handle).returncode == 0
    wait_gone(target)


def no_retry_runtime(target: Target) -> str:
    """A ClusterTrainingRuntime of the tests' own: Kubeflow's torch-distributed with no retry of a failed pod,
    and pods that are not restarted in place (JobSet's default, OnFailure, has the Job delete them when it
    fails, and with them each replica's exit code)."""
    assert target.cluster is not None
    runtime = json.loads(target.cluster.kubectl("get", "clustertrainingruntime", "torch-distributed", "-o",
                                                "json").stdout)
    name = "torchspec-test-no-retry"
    runtime["metadata"] = {"name": name}
    job = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]
    job["backoffLimit"] = 0
    job["template"]["spec"]["restartPolicy"] = "Never"
    target.cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=json.dumps(runtime))
    return name


@lifecycle
def test_a_failing_replica_fails_the_app_with_its_exit_code(target: Target, flavor: str,
                                                           tmp_path: pathlib.Path) -> None:
    spec = write_spec(tmp_path / "bad.yaml", "bad", 'if [ "${replica_id}" = 1 ]; then echo oops >&2; exit 3; fi;'
                      " sleep 2")
    options = {}
    if flavor == "trainjob":  # the torch-distributed runtime retries a failed pod (its Jobs' backoffLimit: 6)
        options["runtime"] = no_retry_runtime(target)
    handle = submit(spec, target.ns, flavor, **options)
    done = torchspec("wait", handle, "--timeout", "120")
    assert done.returncode == 4, (done.stdout, done.stderr)
    final = status(handle)
    assert final["state"] == "FAILED"
    failed = [r for r in final["roles"][0]["replicas"] if r["state"] == "FAILED"]
    assert [r["id"] for r in failed] == [1] and failed[0]["exit_code"] == 3, final
    assert "oops" in torchspec("logs", handle).stdout


@lifecycle
def test_cancel_leaves_nothing_behind(target: Target, flavor: str, tmp_path: pathlib.Path) -> None:
    spec = write_spec(tmp_path / "long.yaml", "long", "echo up; sleep 600", roles=1 if flavor in ONE_ROLE else 2)
    handle = submit(spec, target.ns, flavor)
    wait_state(handle, ("RUNNING",))
    assert target.leftovers()  # something to remove
    done = torchspec("cancel", handle)
    assert done.returncode == 0, done.stderr
    wait_gone(target)
    gone = torchspec("status", handle)
    assert gone.returncode == 2 and "unknown app" in gone.stderr, gone


@lifecycle
def test_logs_follow_prints_lines_as_they_come_and_ends_with_the_app(target: Target, flavor: str,
                                                                     tmp_path: pathlib.Path) -> None:
    spec = write_spec(tmp_path / "tick.yaml", "tick", "for i in 1 2 3 4; do echo tick $i; sleep 1; done",
                      replicas=1)
    handle = submit(spec, target.ns, flavor)
    wait_state(handle, ("RUNNING", "SUCCEEDED"))
    follow = subprocess.Popen([sys.executable, "-m", "torchspec", "logs", "-f", handle], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        out, err = follow.communicate(timeout=120)
    finally:
        follow.kill()
    assert follow.returncode == 0, err
    assert [line.split(" ", 1)[1] for line in out.splitlines() if "tick" in line] == \
        [f"tick {i}" for i in (1, 2, 3, 4)], (out, err)


@lifecycle
def test_apply_twice_creates_one_job_and_diff_shows_the_manifests(target: Target, flavor: str,
                                                                   tmp_path: pathlib.Path) -> None:
    repo = tmp_path / "repo"
    (repo / "jobs").mkdir(parents=True)
    write_spec(repo / "jobs" / "a.yaml", "alpha", "echo a; sleep 30", replicas=1)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for _ in range(2):
        done = torchspec("apply", "-s", "kubernetes", "-c", opts(target.ns, flavor), "jobs", cwd=repo)
        assert done.returncode == 0, done.stderr
    assert len(target.apps(flavor)) == 1, target.leftovers()
    listed = torchspec("list", "-s", "kubernetes", "-c", f"namespace={target.ns}", "--json")
    assert listed.stdout.count("kubernetes://") == 1, listed.stdout
    new = write_spec(tmp_path / "b.yaml", "alpha", "echo b; sleep 30", replicas=1)
    diff = torchspec("diff", "-s", "kubernetes", "-c", opts(target.ns, flavor), str(repo / "jobs" / "a.yaml"),
                     str(new))
    assert diff.returncode == 1, diff.stderr
    assert "echo b" in diff.stdout


def torch_on_the_node(scripts: pathlib.Path) -> List[str]:
    """dist.ddp's ``-p`` options that run the busybox image with this machine's Python and torch (read-only
    host mounts of /usr and the interpreter's prefixes, the component's ``mounts`` parameter) and the
    folder ``scripts`` as /ddp: no image with PyTorch is at hand (none can be pulled, and this machine's
    CUDA build of torch is gigabytes). Skips where torch is not installed (fails where it is required)."""
    if importlib.util.find_spec("torch") is None:
        skips.skip_or_fail("TORCH", "torch is not installed (bash scripts/test installs torch==2.13.0)")
    pythons = sorted({sys.base_prefix, sys.prefix})
    mounts = ["type=bind,src=/usr,dst=/usr,readonly", "type=bind,src=/usr/lib,dst=/lib,readonly",
              "type=bind,src=/usr/lib64,dst=/lib64,readonly", f"type=bind,src={scripts},dst=/ddp,readonly"]
    mounts += [f"type=bind,src={p},dst={p},readonly" for p in pythons]
    path = ":".join([str(pathlib.Path(p) / "bin") for p in reversed(pythons)] + ["/usr/bin", "/bin"])
    return ["-p", f"image={K8S_IMAGE}", "-p", "cpu=1", "-p", "memMB=1536", "-p", f"mounts={json.dumps(mounts)}",
            "-p", f"env=LOGLEVEL=WARNING,PATH={path},TMPDIR=/dev/shm,HOME=/dev/shm"]


@pytest.mark.parametrize("flavor", ["job", "pytorchjob"])
def test_dist_ddp_trains_with_gloo_across_two_pods(flavor: str, real: Target, tmp_path: pathlib.Path) -> None:
    """The real dist.ddp component, 2 nodes x 1 process: two pods meet at rank 0's DNS name and all_reduce.

    As a ``job`` (torchspec's rendezvous at the Indexed Job's pod 0) and as a ``pytorchjob`` (the Training
    Operator's: it sets MASTER_ADDR and the ranks, and holds the worker in an init container until the
    master's name resolves).

    No image with PyTorch is at hand (none can be pulled, and this machine's CUDA build of torch is
    gigabytes): the busybox image gets this machine's Python (with torch), /usr and the script through
    read-only host mounts, the component's own ``mounts`` parameter."""
    root = pathlib.Path(__file__).resolve().parents[2]
    # pytorchjob: every pod kept (clean_pod_policy=None), since the operator ends the job when the Master
    # succeeds and the default (Running) would delete a Worker finishing a moment later, with its log (ci52)
    keep = ",clean_pod_policy=None" if flavor == "pytorchjob" else ""
    done = torchspec("submit", "-s", "kubernetes", "-c", f"namespace={real.ns},flavor={flavor}{keep}", "dist.ddp",
                     "-p", "j=2x1", "-p", "script=/ddp/train.py", *torch_on_the_node(root / "examples" / "ddp_train"),
                     "--wait", timeout=600)
    handle = done.stdout.strip().splitlines()[0] if done.stdout.strip() else ""
    logs = torchspec("logs", handle).stdout if handle else ""
    assert done.returncode == 0, (done.stderr, logs)
    assert "world_size 2 backend gloo" in logs, logs
    means = re.findall(r"train/(\d) .*rank (\d) all_reduce mean loss ([0-9.]+)", logs)
    assert sorted((replica, rank) for replica, rank, _ in means) == [("0", "0"), ("1", "1")], logs
    assert len({value for _, _, value in means}) == 1, logs  # both ranks hold the same all_reduce result
    assert float(means[0][2]) < 0.05, logs
    assert torchspec("delete", handle).returncode == 0
    wait_gone(real)


def test_a_pytorchjob_whose_rank_fails_fails_and_a_cancelled_one_leaves_nothing(real: Target,
                                                                               tmp_path: pathlib.Path) -> None:
    """The lifecycle tests' failure and cancel for flavor pytorchjob, which runs torchrun roles only: the
    real Training Operator, with this machine's torchrun on the node (as in the dist.ddp test). Rank 1
    exits 3 (torchrun then exits 1) and fails the app; a second app, cancelled while it runs, leaves no
    object behind."""
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    (scripts / "fail.py").write_text(textwrap.dedent("""\
        import os, sys, time
        rank = int(os.environ["RANK"])
        print(f"rank {rank} up", flush=True)
        if rank == 1:
            sys.exit(3)
        time.sleep(60)
        """))
    (scripts / "sleep.py").write_text("import time\nprint('up', flush=True)\ntime.sleep(600)\n")
    failing = torchspec("submit", "-s", "kubernetes", "-c", f"namespace={real.ns},flavor=pytorchjob", "dist.ddp",
                        "-p", "j=2x1", "-p", "script=/ddp/fail.py", *torch_on_the_node(scripts), "--wait",
                        timeout=300)
    handle = failing.stdout.strip().splitlines()[0] if failing.stdout.strip() else ""
    assert failing.returncode == 4 and handle, (failing.stdout, failing.stderr)
    assert status(handle)["state"] == "FAILED"
    # past its backoffLimit (0: max_retries=0) the Training Operator deletes every pod of the job, whatever
    # its cleanPodPolicy, and may then recreate one before it sees the job Failed: that pod waits for the
    # deleted Master forever unless cleanPodPolicy (Running, torchspec's default) has it deleted. What a replica
    # shows while they go depends on when the status is read, so the test reads it once they are gone, when
    # every replica's state and exit code went with its pod
    deadline = time.monotonic() + 120
    while [name for name in real.leftovers() if name.startswith("pod/")]:
        assert time.monotonic() < deadline, f"the failed job's pods are still there: {real.leftovers()}"
        time.sleep(1)
    final = status(handle)
    assert final["state"] == "FAILED", final
    assert [(r["id"], r["state"], r["exit_code"]) for r in final["roles"][0]["replicas"]] == \
        [(0, "UNKNOWN", None), (1, "UNKNOWN", None)], json.dumps(final, indent=1)
    assert all("pod is gone" in r["msg"] for r in final["roles"][0]["replicas"]), json.dumps(final, indent=1)
    assert "failed" in final["msg"] or "exited" in final["msg"], final
    assert torchspec("delete", handle).returncode == 0
    wait_gone(real)

    running = torchspec("submit", "-s", "kubernetes", "-c", f"namespace={real.ns},flavor=pytorchjob", "dist.ddp",
                        "-p", "j=2x1", "-p", "script=/ddp/sleep.py", *torch_on_the_node(scripts))
    assert running.returncode == 0, running.stderr
    handle = running.stdout.strip()
    wait_state(handle, ("RUNNING",))
    assert torchspec("cancel", handle).returncode == 0
    wait_gone(real)
    gone = torchspec("status", handle)
    assert gone.returncode == 2 and "unknown app" in gone.stderr, gone


# ----------------------------------------------------------------------------
# Faults and refusals
# ----------------------------------------------------------------------------


def test_wait_and_logs_follow_go_on_across_an_api_server_restart(real: Target, tmp_path: pathlib.Path) -> None:
    spec = write_spec(tmp_path / "slow.yaml", "slow", "for i in $(seq 1 20); do echo line $i; sleep 1; done",
                      replicas=1)
    handle = submit(spec, real.ns, "job")
    wait_state(handle, ("RUNNING",))
    waiter = subprocess.Popen([sys.executable, "-m", "torchspec", "wait", handle, "--timeout", "400"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    follower = subprocess.Popen([sys.executable, "-m", "torchspec", "logs", "-f", handle],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(3)
    assert real.cluster is not None
    real.cluster.script("restart", "kube-apiserver")
    out, err = waiter.communicate(timeout=420)  # an API server restarted on a loaded machine: over 120 s (ci60)
    assert waiter.returncode == 0, (out, err)
    fout, ferr = follower.communicate(timeout=60)
    assert follower.returncode == 0, ferr
    lines = [line.split(" ", 1)[1] for line in fout.splitlines() if " line " in f" {line}"]
    assert lines[-1] == "line 20", fout
    assert len(lines) == len(set(lines)), f"a line printed twice: {fout}"


def test_a_pod_deleted_under_a_running_app_is_retried_then_fails_saying_so(real: Target,
                                                                             tmp_path: pathlib.Path) -> None:
    """``kubectl delete pod`` under a running replica: the Job counts it as a failure, so the replica is retried
    as max_retries says (its restarts count the deleted pod, though the API no longer has it), and once the
    retries are spent the app is FAILED saying how many pods failed or were deleted, never SUCCEEDED or
    hanging; delete then leaves nothing."""
    assert real.cluster is not None
    spec = write_spec(tmp_path / "deleted.yaml", "deleted", "echo up; sleep 600", replicas=1)
    spec.write_text(spec.read_text() + "    max_retries: 1\n")
    handle = submit(spec, real.ns, "job")

    def delete_the_running_pod() -> None:
        wait_state(handle, ("RUNNING",))
        deadline = time.monotonic() + 60
        while not (running := real.cluster.kubectl("get", "pods", "-n", real.ns, "-o", "name",
                                                   "--field-selector=status.phase=Running").stdout.split()):
            assert time.monotonic() < deadline, "no pod ever ran"
            time.sleep(0.5)
        real.cluster.kubectl("delete", "-n", real.ns, "--wait=true", *running)

    delete_the_running_pod()
    deadline = time.monotonic() + 90
    while (st := status(handle))["num_restarts"] != 1 or st["state"] != "RUNNING":
        assert st["state"] not in ("SUCCEEDED", "FAILED"), st
        assert time.monotonic() < deadline, f"the deleted pod was never retried: {st}"
        time.sleep(0.5)
    delete_the_running_pod()
    st = wait_state(handle, ("FAILED", "SUCCEEDED", "CANCELLED"), timeout=90)
    assert st["state"] == "FAILED" and "2 pods failed or deleted" in st["msg"], st
    done = torchspec("wait", handle, "--timeout", "30")
    assert done.returncode == 4, done
    assert torchspec("delete", handle).returncode == 0  # a finished app keeps its objects until deleted (or ttl)
    wait_gone(real)


def test_a_cluster_that_is_not_there_exits_6_naming_the_server(tmp_path: pathlib.Path, k8s_cluster: Cluster,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    config = pathlib.Path(k8s_cluster.kubeconfig).read_text()
    port = config.split("server: https://127.0.0.1:", 1)[1].split()[0]
    dead = tmp_path / "dead.kubeconfig"
    dead.write_text(config.replace(f"127.0.0.1:{port}", "127.0.0.1:1"))
    monkeypatch.setenv("KUBECONFIG", str(dead))
    spec = write_spec(tmp_path / "x.yaml", "x", "true", replicas=1)
    done = torchspec("submit", "-s", "kubernetes", str(spec))
    assert done.returncode == 6, done
    assert "127.0.0.1:1" in done.stderr and "Traceback" not in done.stderr


def test_a_user_without_rights_gets_the_servers_reason(tmp_path: pathlib.Path, k8s_cluster: Cluster,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", os.path.join(k8s_cluster.dir, "nobody.kubeconfig"))
    spec = write_spec(tmp_path / "x.yaml", "x", "true", replicas=1)
    done = torchspec("submit", "-s", "kubernetes", str(spec))
    assert done.returncode == 6, done
    assert "forbidden" in done.stderr.lower() and "torchspec-nobody" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr



def test_a_trainjob_on_a_runtime_that_is_not_there_gets_the_webhooks_reason(real: Target,
                                                                          tmp_path: pathlib.Path) -> None:
    """Kubeflow Trainer's admission webhook refuses it (a 403 that is not about RBAC): the message names the
    webhook and the runtime, the hint is not the RBAC one, and nothing is created."""
    spec = write_spec(tmp_path / "x.yaml", "x", "true", replicas=1)
    done = torchspec("submit", "-s", "kubernetes", "-c", opts(real.ns, "trainjob", runtime="no-such-runtime"),
                     str(spec))
    assert done.returncode != 0 and "Traceback" not in done.stderr, done
    # Trainer's webhook or Kueue's (both check TrainJobs, in no fixed order) says it
    assert "admission webhook" in done.stderr and re.search(r"""["']no-such-runtime["'] not found""",
                                                            done.stderr), done.stderr
    assert "RBAC" not in done.stderr, done.stderr
    assert real.leftovers() == []


# ----------------------------------------------------------------------------
# The fields teams need (issue 35): requests apart from limits, Linux capabilities, labels, lint's version
# ----------------------------------------------------------------------------

FIELDS = """\
name: fields
metadata: {{team: ml, owner: alice@example.com}}
roles:
  - name: trainer
    image: {image}
    entrypoint: sh
    args: ["-c", "grep CapEff /proc/self/status"]
    resource:
      cpu: 1
      memMB: 64
      capabilities:
        kubernetes.requests: {{cpu: 100m, memory: 32Mi}}
        kubernetes.linux_capabilities: [IPC_LOCK]
"""
#: IPC_LOCK's bit in a process's capability sets (linux/capability.h)
CAP_IPC_LOCK = 14


@pytest.mark.parametrize("target", ["stand-in", "real"], indirect=True)
def test_requests_apart_from_limits_ipc_lock_and_labels_run_and_list_finds_them(target: Target,
                                                                              tmp_path: pathlib.Path) -> None:
    spec = tmp_path / "fields.yaml"
    spec.write_text(FIELDS.format(image=K8S_IMAGE))
    handle = submit(spec, target.ns, "job")
    done = torchspec("wait", handle, "--timeout", "120")
    assert done.returncode == 0 and "SUCCEEDED" in done.stdout, (done.stdout, done.stderr)

    def listed(label: str) -> List[str]:
        found = torchspec("list", "-s", "kubernetes", "-c", f"namespace={target.ns}", "-l", label, "--json")
        assert found.returncode == 0, found.stderr
        return [app["app_handle"] for app in json.loads(found.stdout)]

    assert listed("team=ml") == [handle] and listed("owner=alice@example.com") == [handle]
    assert listed("team=other") == []
    if target.cluster is not None:  # what the cluster made of it: a Burstable pod, IPC_LOCK, the labels
        pods = json.loads(target.cluster.kubectl("get", "pods", "-n", target.ns, "-l",
                                                 "team=ml,owner=alice_example.com", "-o", "json").stdout)["items"]
        (pod,) = pods
        resources = pod["spec"]["containers"][0]["resources"]
        assert resources == {"requests": {"cpu": "100m", "memory": "32Mi"}, "limits": {"cpu": "1", "memory": "64Mi"}}
        assert pod["status"]["qosClass"] == "Burstable" and "privileged" not in json.dumps(pod["spec"])
        jobs = target.cluster.kubectl("get", "jobs.batch,services", "-n", target.ns, "-l", "team=ml", "-o", "name")
        assert len(jobs.stdout.split()) == 2, jobs.stdout  # the Job and the Service
        logs = torchspec("logs", handle)
        assert logs.returncode == 0, logs.stderr
        effective = int(re.search(r"CapEff:\s*([0-9a-f]+)", logs.stdout).group(1), 16)  # type: ignore[union-attr]
        assert effective >> CAP_IPC_LOCK & 1, logs.stdout
    assert torchspec("delete", handle).returncode == 0
    wait_gone(target)


@pytest.mark.parametrize("target", ["stand-in", "real"], indirect=True)
def test_a_native_sidecar_passes_lint_against_the_clusters_version(target: Target, tmp_path: pathlib.Path) -> None:
    """lint reads the cluster's /version (the real one: 1.37; the stand-in says 1.31) and checks against it; a
    native sidecar (Kubernetes 1.29 and newer) passes, and -c k8s_version=1.27 (an older cluster too) refuses it."""
    from test_kubernetes_fields import SIDECAR  # the spec the stand-in's lint tests check

    spec = tmp_path / "sidecar.yaml"
    spec.write_text(textwrap.dedent(SIDECAR))
    done = torchspec("lint", "--scheduler", "kubernetes", str(spec))
    assert done.returncode == 0, (done.stdout, done.stderr)
    version = "1.31" if target.cluster is None else "1.37"
    assert f"checked against Kubernetes {version}, the version of the cluster at" in done.stderr, done.stderr
    older = torchspec("lint", "--scheduler", "kubernetes", "-c", "k8s_version=1.27", str(spec))
    assert older.returncode == 1 and "TS602" in older.stdout and "Kubernetes 1.27 rejects" in older.stdout, older
