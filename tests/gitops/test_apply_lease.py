"""``torchspec apply --lock kubernetes``: runs take turns on a Lease, on the API stand-in and on the real cluster.

Two applies started together submit each job once; a holder killed with
SIGKILL (a process holding it as apply does, or apply itself half way through
its submissions) leaves a Lease the next apply takes once it expires; a
holder that lives makes ``--lock-timeout`` run out (exit 124, naming it); no
cluster is exit 6 naming the server; a refusal on leases says which rights
are missing, and the Role docs/guides/gitops.md gives grants them.
The Lease's own protocol is tested in tests/kube/test_lease.py.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import time
from datetime import datetime
from typing import Any, Callable, Iterator, Optional

import pytest
from apply_support import Workspace, at_once

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs Linux")

PY = sys.executable
LOCK = ("--lock", "kubernetes")
#: A process holding the Lease as apply does (lease_held), until it is killed: argv name, namespace, duration.
HOLDER = """
import sys, time
from torchspec.gitops.lock import lease_held
with lease_held(sys.argv[1], 30, namespace=sys.argv[2], duration=int(sys.argv[3])) as lease:
    print(lease.identity, flush=True)
    time.sleep(600)
"""


def kube_role(name: str, seconds: int) -> dict:
    return {"name": name, "image": "busybox:1.36", "entrypoint": "sh", "args": ["-c", f"sleep {seconds}"]}


def local_role(name: str, seconds: int) -> dict:
    return {"name": name, "image": ".", "entrypoint": PY, "args": ["-c", f"import time; time.sleep({seconds})"]}


def lease_name(ws: Workspace) -> str:
    return f"torchspec-apply-{ws.scheduler}-{ws.scope}"


#: The killed holder's Lease duration: it stays held at least two thirds of it after the kill (20 s), longer than a
#: new apply takes to start and read it on a loaded machine (12 s was not, under CI's eight workers on two
#: cores), so that apply sees it held and waits.
HOLDER_S = 30
#: The Lease duration where two applies take turns on a real cluster: each holds it through its six submits and
#: renews it every third of this, which a starved process on a loaded machine missed at 15 s (the waiting apply
#: then took the Lease over mid-run, and the first stopped with exit 6), and at 60 s beside a cold Go build.
TURNS_S = "120"


class Holder:
    """A process that takes the Lease and holds it, renewing, until :meth:`kill`."""

    def __init__(self, ws: Workspace, namespace: str, duration: int) -> None:
        self.proc = subprocess.Popen([PY, "-c", HOLDER, lease_name(ws), namespace, str(duration)], env=ws.env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.identity = self.proc.stdout.readline().strip()
        assert self.identity.count(":") == 2, self.proc.communicate(timeout=30)

    def kill(self) -> float:
        """SIGKILL: no release, no last renewal. Returns when it died (monotonic)."""
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        return time.monotonic()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.kill()
        self.proc.communicate()


def expires_in(lease: dict) -> float:
    """Seconds from now until the Lease expires by its own record: renewTime + leaseDurationSeconds."""
    spec = lease["spec"]
    renewed = datetime.fromisoformat(spec["renewTime"].replace("Z", "+00:00")).timestamp()
    return renewed + spec["leaseDurationSeconds"] - time.time()


def waits_then_applies(ws: Workspace, holder: Holder, namespace: str, duration: int,
                       read_lease: Callable[[], dict]) -> None:
    """While ``holder`` lives, apply gives up after --lock-timeout naming it (124); once it is killed, the next
    apply waits for its Lease to expire (its last renewTime + ``duration``, read from the Lease when the holder
    died: a holder starved on a loaded machine renews late, so the wait can be shorter than two thirds of the
    duration, ci51), then submits."""
    ws.write("jobs/a.json", "a", [ws.role("main", 300)])  # type: ignore[attr-defined]
    timed_out = ws.run(*ws.apply_args(*LOCK, "--lock-timeout", "1"))
    assert timed_out.returncode == 124, timed_out.stderr
    assert re.search(rf"another torchspec apply holds the Lease {namespace}/{lease_name(ws)} \(waited \d+s\): "
                     rf"held by {holder.identity}, renewed", timed_out.stderr), timed_out.stderr
    assert f"waiting for the Lease {namespace}/{lease_name(ws)}: held by {holder.identity}" in timed_out.stderr
    assert ws.listed() == []

    died = holder.kill()
    expected = expires_in(read_lease())  # the holder can renew no more
    assert expected <= duration + 1, expected
    r = ws.run(*ws.apply_args(*LOCK, "--lock-timeout", "90"))
    waited = time.monotonic() - died
    assert r.returncode == 0, r.stderr
    assert f"held by {holder.identity}" in r.stderr
    # never before the Lease expired; and then soon (the slack: an apply starting on a loaded machine; ci51: 23 s
    # after it expired, ci53: 45 s, beside the load test's 50 concurrent CLI processes)
    assert expected - 1 <= waited <= max(expected, 0) + 75, (waited, expected)
    assert [a["labels"]["torchspec.dev/apply-id"] for a in ws.listed()] == ["jobs/a.json"]


# ---------------------------------------------------------------- the API stand-in


@pytest.fixture
def apiserver() -> Iterator[Any]:
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "kube"))
    from apiserver import FakeApiServer

    with FakeApiServer() as server:
        server.add_namespace("ml")
        yield server


@pytest.fixture
def ws(tmp_path: pathlib.Path, apiserver: Any) -> Workspace:
    kubeconfig = apiserver.write_kubeconfig(tmp_path / "kubeconfig")
    workspace = Workspace(tmp_path, "kubernetes", cfg="namespace=ml", extra_env={"KUBECONFIG": kubeconfig})
    workspace.role = kube_role  # type: ignore[attr-defined]
    return workspace


def stored_lease(apiserver: Any, ws: Workspace, namespace: str = "ml") -> Optional[dict]:
    return apiserver.get("coordination.k8s.io/v1", "leases", namespace, lease_name(ws))  # type: ignore[no-any-return]


def test_two_applies_at_once_take_turns_on_the_lease(ws: Workspace, apiserver: Any) -> None:
    # a Lease of TURNS_S: beside a cold CI's Go build (ci49) the first apply went 40 s of the default 60 s
    # without a renewal and stopped (exit 6), as it must when its Lease may have expired
    reports = at_once(ws, kube_role, runs=2, jobs=4, extra=(*LOCK, "--lock-duration", TURNS_S))
    assert sorted(r["summary"]["done"] for r in reports) == [0, 4]
    lease = stored_lease(apiserver, ws)
    assert lease is not None and lease["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "torchspec"}
    spec = lease["spec"]
    assert "holderIdentity" not in spec and spec["leaseDurationSeconds"] == int(TURNS_S)  # released by the second
    assert spec["leaseTransitions"] == 1  # created by one run, taken over by the other


def test_a_holder_that_lives_times_apply_out_and_one_killed_lets_it_in(ws: Workspace, apiserver: Any) -> None:
    holder = Holder(ws, "ml", duration=HOLDER_S)
    try:
        waits_then_applies(ws, holder, "ml", HOLDER_S,
                           lambda: stored_lease(apiserver, ws))  # type: ignore[arg-type,return-value]
    finally:
        holder.stop()
    spec = stored_lease(apiserver, ws)["spec"]  # type: ignore[index]
    assert "holderIdentity" not in spec and spec["leaseTransitions"] == 1


def test_the_lease_of_another_scheduler_lives_in_the_kubeconfig_namespace(tmp_path: pathlib.Path,
                                                                          apiserver: Any) -> None:
    """-s local: the kubernetes run options of the config ([scheduler.kubernetes]) say where, else the kubeconfig."""
    kubeconfig = apiserver.write_kubeconfig(tmp_path / "kubeconfig", namespace="ml")
    ws = Workspace(tmp_path, "local", extra_env={"KUBECONFIG": kubeconfig})
    ws.write("jobs/a.json", "a", [local_role("main", 1)])
    try:
        assert ws.apply(*LOCK)["by_id"]["jobs/a.json"]["status"] == "done"
        assert stored_lease(apiserver, ws, "ml") is not None
        config = pathlib.Path(ws.env["XDG_CONFIG_HOME"]) / "torchspec" / "config.toml"
        config.parent.mkdir(parents=True)
        config.write_text('[scheduler.kubernetes]\nnamespace = "default"\n')
        ws.apply(*LOCK)
        assert stored_lease(apiserver, ws, "default") is not None
    finally:
        ws.cancel_all()


def test_the_config_can_choose_the_lease(ws: Workspace, apiserver: Any) -> None:
    ws.write("jobs/a.json", "a", [kube_role("main", 1)])
    config = ws.root / ".torchspec.toml"
    config.write_text('[apply]\nlock = "kubernetes"\nlock_duration = 40\n')
    assert ws.apply()["by_id"]["jobs/a.json"]["status"] == "done"
    assert stored_lease(apiserver, ws)["spec"]["leaseDurationSeconds"] == 40  # type: ignore[index]
    ws.apply("--lock-duration", "45")  # long: a starved run on a loaded machine still renews in time
    assert stored_lease(apiserver, ws)["spec"]["leaseDurationSeconds"] == 45  # type: ignore[index]
    version = stored_lease(apiserver, ws)["metadata"]["resourceVersion"]  # type: ignore[index]
    assert ws.apply("--lock-file", str(ws.root.parent / "a.lock"))["summary"]["done"] == 0  # a file: not the Lease
    assert stored_lease(apiserver, ws)["metadata"]["resourceVersion"] == version  # type: ignore[index]
    config.write_text('[apply]\nlock = "etcd"\n')
    bad = ws.run(*ws.apply_args())
    assert bad.returncode == 2 and 'apply.lock must be "file" or "kubernetes", not \'etcd\'' in bad.stderr


def test_the_cli_offers_the_locks_apply_knows() -> None:
    from torchspec.cli.apply_cmd import _LOCKS
    from torchspec.gitops.lock import LOCKS, lease_name

    assert _LOCKS == LOCKS
    assert lease_name("kubernetes", "default") == "torchspec-apply-kubernetes-default"
    assert lease_name("local", "Team_A") == "torchspec-apply-local-team-a-" + lease_name("local", "Team_A")[-8:]
    assert lease_name("local", "Team_A") != lease_name("local", "team-a")


def test_lease_errors_are_clear(ws: Workspace, apiserver: Any) -> None:
    ws.write("jobs/a.json", "a", [kube_role("main", 1)])
    apiserver.fail_next("POST", r"/leases$", 403)
    refused = ws.run(*ws.apply_args(*LOCK))
    assert refused.returncode == 6 and "forbidden" in refused.stderr
    assert "needs get, create and update on leases (coordination.k8s.io) in the namespace ml" in refused.stderr

    mixed = ws.run(*ws.apply_args(*LOCK, "--lock-file", "x.lock"))
    assert mixed.returncode == 2 and "--lock-file is for --lock file" in mixed.stderr

    address = apiserver.url
    apiserver.stop()
    gone = ws.run(*ws.apply_args(*LOCK))
    assert gone.returncode == 6 and f"cannot reach the Kubernetes API server at {address}" in gone.stderr
    assert "Lease ml/" in gone.stderr
    assert ws.run(*ws.apply_args(*LOCK, "--plan")).returncode == 6  # a plan takes no lock, but lists


# ---------------------------------------------------------------- the real cluster


@pytest.fixture
def real_ns(k8s_cluster: Any) -> str:
    return k8s_cluster.new_namespace("lease")  # type: ignore[no-any-return]


def real_ws(tmp_path: pathlib.Path, k8s_cluster: Any, namespace: str, scheduler: str,
            kubeconfig: str = "") -> Workspace:
    env = {"KUBECONFIG": kubeconfig or k8s_cluster.kubeconfig}
    if scheduler == "kubernetes":
        ws = Workspace(tmp_path, "kubernetes", cfg=f"namespace={namespace},flavor=job", extra_env=env)
        ws.role = kube_role  # type: ignore[attr-defined]
    else:  # the Lease's namespace from [scheduler.kubernetes] in the user config
        ws = Workspace(tmp_path, scheduler, extra_env=env)
        config = pathlib.Path(ws.env["XDG_CONFIG_HOME"]) / "torchspec" / "config.toml"
        config.parent.mkdir(parents=True)
        config.write_text(f'[scheduler.kubernetes]\nnamespace = "{namespace}"\n')
        ws.role = local_role  # type: ignore[attr-defined]
    return ws


def real_lease(k8s_cluster: Any, namespace: str, ws: Workspace) -> dict:
    got = k8s_cluster.kubectl("get", "lease", "-n", namespace, lease_name(ws), "-o", "json")
    return json.loads(got.stdout)  # type: ignore[no-any-return]


@pytest.mark.parametrize("scheduler", ["local", "kubernetes"])
def test_real_cluster_two_applies_at_once_submit_each_job_once(tmp_path: pathlib.Path, k8s_cluster: Any,
                                                               real_ns: str, scheduler: str) -> None:
    ws = real_ws(tmp_path, k8s_cluster, real_ns, scheduler)
    try:
        reports = at_once(ws, ws.role, runs=2, jobs=6,  # type: ignore[attr-defined]
                          extra=(*LOCK, "--lock-duration", TURNS_S))
    finally:
        ws.cancel_all()
    assert sorted(r["summary"]["done"] for r in reports) == [0, 6]
    spec = real_lease(k8s_cluster, real_ns, ws)["spec"]
    assert "holderIdentity" not in spec and spec["leaseTransitions"] == 1


def test_real_cluster_a_killed_holder_lease_expires_and_the_next_apply_proceeds(
        tmp_path: pathlib.Path, k8s_cluster: Any, real_ns: str) -> None:
    ws = real_ws(tmp_path, k8s_cluster, real_ns, "local")
    holder = Holder(ws, real_ns, duration=HOLDER_S)
    try:
        assert real_lease(k8s_cluster, real_ns, ws)["spec"]["holderIdentity"] == holder.identity
        waits_then_applies(ws, holder, real_ns, HOLDER_S, lambda: real_lease(k8s_cluster, real_ns, ws))
    finally:
        holder.stop()
        ws.cancel_all()
    spec = real_lease(k8s_cluster, real_ns, ws)["spec"]
    assert "holderIdentity" not in spec and spec["leaseTransitions"] == 1


def test_real_cluster_an_apply_killed_half_way_leaves_the_rest_to_the_next(tmp_path: pathlib.Path,
                                                                            k8s_cluster: Any, real_ns: str) -> None:
    """SIGKILL an apply half way through its submits, so while it holds the Lease (20 s): the next waits for it
    to expire, then submits what the first did not, each job once.

    Half way is seen on the event itself: the first app's folder under the apply's TORCHSPEC_HOME (an apply
    submits only while it holds the Lease). Polling the Lease with kubectl instead raced the 40 local submits,
    which a quiet machine finishes before a kubectl call returns."""
    ws = real_ws(tmp_path, k8s_cluster, real_ns, "local")
    jobs = 40
    for i in range(jobs):
        ws.write(f"jobs/j{i:02d}.json", f"j{i:02d}", [{"name": "main", "image": ".", "entrypoint": "true"}])
    apps = pathlib.Path(ws.env["TORCHSPEC_HOME"]) / "apps"
    # 20 s: with 3 s a starved first apply lost the Lease, with 10 s one whose API server was slow for 7.5 s did (ci60)
    first = ws.popen(*ws.apply_args(*LOCK, "--lock-duration", "20"))
    try:
        deadline = time.monotonic() + 60
        while first.poll() is None and not (apps.is_dir() and any(apps.glob("j*"))):
            assert time.monotonic() < deadline, "the first apply submitted nothing within 60 s"
            time.sleep(0.005)
        assert first.poll() is None, f"the first apply ended before it could be killed: {first.communicate()}"
        os.kill(first.pid, signal.SIGKILL)
        assert first.wait(timeout=30) == -signal.SIGKILL, "the first apply ended before it could be killed"
        # a killed holder never released the Lease: it still names it (until the next apply takes it)
        assert real_lease_holder(k8s_cluster, real_ns, ws), "the first apply submitted without holding the Lease"
        died, submitted = time.monotonic(), len(ws.listed())
        second = ws.apply(*LOCK)
        assert time.monotonic() - died >= 1.5  # it waited for the Lease to expire
        assert second["summary"]["done"] == jobs - submitted and second["summary"]["unchanged"] == submitted
        listed = [a["labels"]["torchspec.dev/apply-id"] for a in ws.listed()]
        assert sorted(listed) == sorted(set(listed)) and len(listed) == jobs
    finally:
        first.kill()
        first.communicate()
        ws.cancel_all()


def real_lease_holder(k8s_cluster: Any, namespace: str, ws: Workspace) -> str:
    got = k8s_cluster.kubectl("get", "lease", "-n", namespace, lease_name(ws), "-o", "jsonpath={.spec.holderIdentity}",
                              check=False)
    return got.stdout.strip() if got.returncode == 0 else ""


def test_real_cluster_rbac_refusal_names_the_rights_and_the_readme_role_grants_them(
        tmp_path: pathlib.Path, k8s_cluster: Any, real_ns: str) -> None:
    """A service account with no rights gets the server's 403 and what to ask for; the Role and RoleBinding
    docs/guides/gitops.md gives are enough."""
    k8s_cluster.kubectl("create", "serviceaccount", "ci", "-n", real_ns)
    token = k8s_cluster.kubectl("create", "token", "ci", "-n", real_ns).stdout.strip()
    admin = json.loads(k8s_cluster.kubectl("config", "view", "--raw", "--minify", "-o", "json").stdout)
    kubeconfig = tmp_path / "ci.kubeconfig"
    kubeconfig.write_text(json.dumps({  # JSON is YAML
        "apiVersion": "v1", "kind": "Config", "current-context": "ci",
        "clusters": [{"name": "real", "cluster": admin["clusters"][0]["cluster"]}],
        "users": [{"name": "ci", "user": {"token": token}}],
        "contexts": [{"name": "ci", "context": {"cluster": "real", "user": "ci", "namespace": real_ns}}]}))
    ws = real_ws(tmp_path, k8s_cluster, real_ns, "local", kubeconfig=str(kubeconfig))
    ws.write("jobs/a.json", "a", [local_role("main", 1)])
    refused = ws.run(*ws.apply_args(*LOCK))
    assert refused.returncode == 6, refused.stderr
    assert (f'leases.coordination.k8s.io is forbidden: User "system:serviceaccount:{real_ns}:ci" cannot create '
            f'resource "leases" in API group "coordination.k8s.io" in the namespace "{real_ns}"') in refused.stderr
    assert f"needs get, create and update on leases (coordination.k8s.io) in the namespace {real_ns}" in refused.stderr
    assert ws.listed() == []

    k8s_cluster.kubectl("create", "role", "torchspec-apply", "-n", real_ns, "--verb=get,create,update",
                        "--resource=leases.coordination.k8s.io")
    k8s_cluster.kubectl("create", "rolebinding", "torchspec-apply", "-n", real_ns, "--role=torchspec-apply",
                        f"--serviceaccount={real_ns}:ci")
    try:
        deadline = time.monotonic() + 30  # the authorizer sees the binding within moments
        while "forbidden" in (granted := ws.run(*ws.apply_args(*LOCK))).stderr and time.monotonic() < deadline:
            time.sleep(0.5)
        assert granted.returncode == 0, granted.stderr
        assert ws.apply(*LOCK)["by_id"]["jobs/a.json"]["action"] == "unchanged"  # takes over the released Lease
    finally:
        ws.cancel_all()
    assert real_lease(k8s_cluster, real_ns, ws)["spec"]["leaseTransitions"] == 1

