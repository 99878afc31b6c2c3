"""The ``docker`` scheduler end to end, through the real ``torchspec`` entry point and a real engine.

Every CLI call is a fresh process with a private ``TORCHSPEC_HOME``: nothing
but the engine's labels connects ``submit`` to ``status``, ``logs``,
``list``, ``describe``, ``cancel`` and ``delete``.  The replicas run the
local busybox test image (``busybox_image``); ``docker_cleanup`` removes
whatever labelled containers and networks a test leaves behind.

The image's busybox is Debian's static glibc build: names are resolved with
``nslookup`` (its own resolver), never ``ping``/``wget``; ``sh`` as PID 1
ignores SIGTERM unless a script traps it, so long-running scripts here
``trap 'exit 0' TERM`` to stop at once.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "docker" / "trainer_ps_reader.yaml"
EXE = pathlib.Path(sys.executable).with_name("torchspec")
HANDLE_RE = re.compile(r"^docker://torchspec/([a-z0-9-]+)$")
APP_LABEL = "torchspec.app-id"

# exit codes documented in `torchspec --help`
OK, USAGE, APP_FAILED, APP_CANCELLED, BACKEND = 0, 2, 4, 5, 6

#: A replica that stops at once when Docker (or cancel) sends SIGTERM.
FOREVER = "trap 'exit 0' TERM; sleep 600 & wait"  # every test that runs it cancels it: it must outlast a slow one

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a Linux Docker engine")


class Env:
    """A private TORCHSPEC_HOME and working folder; ``run`` calls the CLI there, in a fresh process."""

    def __init__(self, tmp: pathlib.Path, image: str, name: str = "cli") -> None:
        self.tmp = tmp
        self.image = image
        home = tmp / f"home-{name}"
        self.apps: list[str] = []  # every app id a submit printed, removed by the ``env`` fixture
        self.env = dict(os.environ, NO_COLOR="1", TORCHSPEC_HOME=str(home), XDG_CONFIG_HOME=str(home / "xdg"))
        for key in ("FORCE_COLOR", "TORCHSPEC_DEBUG", "SECRET_TOKEN"):
            self.env.pop(key, None)

    def command(self, *args: str) -> list[str]:
        return ([str(EXE)] if EXE.exists() else [sys.executable, "-m", "torchspec"]) + list(args)

    def run(self, *args: str, timeout: float = 60,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        r = subprocess.run(self.command(*args), check=False, capture_output=True, text=True, cwd=self.tmp,
                           env=dict(self.env, **(env or {})), timeout=timeout)
        if args and args[0] in ("submit", "run"):
            self.apps += [m.group(1) for m in map(HANDLE_RE.match, r.stdout.split()) if m]
        assert "Traceback" not in r.stderr, r.stderr
        return r

    def popen(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(self.command(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                cwd=self.tmp, env=self.env)

    def spec(self, name: str, roles: list[dict[str, Any]]) -> str:
        path = self.tmp / f"{name}.json"  # JSON is YAML
        path.write_text(json.dumps({"name": name, "roles": roles}, indent=2))
        return str(path)

    def role(self, name: str, script: str, replicas: int = 1, **extra: Any) -> dict[str, Any]:
        """A role of ``replicas`` busybox containers running ``sh -c script``."""
        return {"name": name, "image": self.image, "entrypoint": "sh", "args": ["-c", script],
                "num_replicas": replicas, **extra}

    def submit(self, spec: str, *extra: str, expect: int = OK, timeout: float = 90,
               env: dict[str, str] | None = None) -> str:
        r = self.run("submit", "-s", "docker", spec, *extra, timeout=timeout, env=env)
        assert r.returncode == expect, (r.returncode, r.stdout, r.stderr)
        handle = r.stdout.strip()
        assert HANDLE_RE.match(handle), r.stdout  # only the handle on stdout
        return handle

    def status(self, handle: str) -> dict[str, Any]:
        r = self.run("status", handle, "--json")
        assert r.returncode == OK, r.stderr
        return json.loads(r.stdout)  # type: ignore[no-any-return]

    def wait(self, handle: str, timeout: float = 60) -> int:
        r = self.run("wait", handle, "--timeout", str(int(timeout)), timeout=timeout + 30)
        assert r.returncode != 124, f"{handle} still running after {timeout}s: {r.stderr}"
        return r.returncode

    def logs(self, handle: str, *args: str, timeout: float = 60, env: dict[str, str] | None = None) -> str:
        r = self.run("logs", handle, *args, timeout=timeout, env=env)
        assert r.returncode == OK, r.stderr
        return r.stdout


@pytest.fixture
def env(tmp_path: pathlib.Path, busybox_image: str, docker_cleanup: Any) -> Iterator[Env]:
    """The CLI, and afterwards the removal of the apps it submitted.

    ``docker_cleanup`` would remove them too, but on an engine that other test
    runs share it also removes theirs; removing ours first keeps that to a minimum.
    """
    cli = Env(tmp_path, busybox_image)
    yield cli
    remove_apps(docker_cleanup, cli.apps)


def remove_apps(client: Any, apps: list[str], settle_s: float = 0.4) -> None:
    """Remove the apps' containers and networks, again until nothing of them is left for ``settle_s``.

    Again, because an app's watcher may be creating its next attempt meanwhile.
    """
    import docker.errors

    deadline = time.monotonic() + 15
    quiet_since = time.monotonic()
    while time.monotonic() - quiet_since < settle_s and time.monotonic() < deadline:
        found = False
        for app in apps:
            for c in client.api.containers(all=True, filters={"label": f"{APP_LABEL}={app}"}):
                found = True
                try:
                    client.api.remove_container(c["Id"], force=True)
                except docker.errors.APIError:  # gone, or being removed by someone else
                    pass
            for n in client.api.networks(filters={"label": f"{APP_LABEL}={app}"}):
                found = True
                try:
                    client.api.remove_network(n["Id"])
                except docker.errors.APIError:
                    pass
        if found:
            quiet_since = time.monotonic()
        time.sleep(0.2)


def app_id(handle: str) -> str:
    match = HANDLE_RE.match(handle)
    assert match, handle
    return match.group(1)


def containers(client: Any, app: str) -> dict[str, dict[str, Any]]:
    """name -> ``docker inspect`` of every container labelled with the app."""
    found = {}
    for summary in client.api.containers(all=True, filters={"label": f"{APP_LABEL}={app}"}):
        attrs = client.api.inspect_container(summary["Id"])
        found[attrs["Name"].lstrip("/")] = attrs
    return found


def wait_all_stopped(client: Any, app: str, timeout: float = 20) -> None:
    """Once an app has failed for good, its watcher stops the other containers: wait for that."""
    deadline = time.monotonic() + timeout
    while any(c["State"]["Running"] for c in containers(client, app).values()):
        assert time.monotonic() < deadline, f"containers of {app} still run {timeout}s after the app failed"
        time.sleep(0.2)


def networks(client: Any, app: str) -> list[str]:
    return [n["Name"] for n in client.api.networks(filters={"label": f"{APP_LABEL}={app}"})]


def replicas(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``role/k`` -> the replica's status JSON."""
    return {f"{role['role']}/{r['id']}": r for role in status["roles"] for r in role["replicas"]}


def eventually(what: str, check: Callable[[], Any], timeout: float = 30, every: float = 0.3) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what}"
        time.sleep(every)


def communicate(proc: subprocess.Popen[str], timeout: float) -> tuple[str, str]:
    """stdout and stderr of ``proc`` once it ends by itself; killed (and the test failed) if it does not."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"still running after {timeout}s; printed:\n{out}\n{err}")
    assert "Traceback" not in err, err
    return out, err


def running(env: Env, handle: str, n: int) -> None:
    """Wait until ``status`` says the app and its ``n`` replicas run."""
    def check() -> bool:
        s = env.status(handle)
        return s["state"] == "RUNNING" and [r["state"] for r in replicas(s).values()] == ["RUNNING"] * n
    eventually(f"{handle} to run", check)


# --- 1. the example -----------------------------------------------------------------------------------------------


def test_example_trainer_ps_reader(env: Env, docker_cleanup: Any) -> None:
    r = env.run("submit", "-s", "docker", str(EXAMPLE), "-p", f"image={env.image}", "-p", "trainers=3",
                "-p", "parameter_servers=2", "-p", "serve_s=4", "--wait", timeout=120)
    assert r.returncode == OK, (r.stdout, r.stderr)
    handle = r.stdout.strip()
    app = app_id(handle)

    logs = env.logs(handle)
    for role, n in (("trainer", 3), ("parameter_server", 2)):
        rank0 = f"{app}-{role.replace('_', '-')}-0"
        for k in range(1, n):
            assert re.search(rf"^{role}/{k} +reached rank 0 at {rank0}: {rank0}$", logs, re.MULTILINE), logs
    assert re.search(rf"^reader/0 +reader 0 of 1 on {app}-reader-0$", logs, re.MULTILINE), logs

    status = env.status(handle)
    assert status["state"] == "SUCCEEDED" and status["num_restarts"] == 0, status
    assert [(role["role"], len(role["replicas"])) for role in status["roles"]] == [
        ("trainer", 3), ("parameter_server", 2), ("reader", 1)]
    for name, replica in replicas(status).items():
        role, k = name.split("/")
        assert replica["state"] == "SUCCEEDED" and replica["exit_code"] == 0, (name, replica)
        assert replica["hostname"] == f"{app}-{role.replace('_', '-')}-{k}", (name, replica)

    r = env.run("describe", handle, "--json")
    assert r.returncode == OK, r.stderr
    assert json.loads(r.stdout)["name"] == "tps"  # the app's name (a container label), not its id
    # provenance: the image each role really ran, as the engine resolved the tag
    images = json.loads(env.run("status", handle, "-o", "json").stdout)["provenance"]["images"]
    image_id = subprocess.run(["docker", "image", "inspect", "-f", "{{.Id}}", env.image], capture_output=True,
                              text=True, check=True).stdout.strip()
    assert images == {"trainer": image_id, "parameter_server": image_id, "reader": image_id}
    roles = {role["name"]: role for role in json.loads(r.stdout)["roles"]}
    assert list(roles) == ["trainer", "parameter_server", "reader"]
    assert {name: (role["image"], role["num_replicas"], role["retry_policy"], role["max_retries"])
            for name, role in roles.items()} == {
        "trainer": (env.image, 3, "APPLICATION", 1),
        "parameter_server": (env.image, 2, "REPLICA", 2),
        "reader": (env.image, 1, "APPLICATION", 0),
    }
    assert roles["trainer"]["resource"]["memMB"] == 128 and roles["trainer"]["port_map"] == {"rdzv": 8080}

    # one network of the app's own; each role's resources became the containers' limits
    assert networks(docker_cleanup, app) == [f"torchspec-{app}"]
    limits = {name: (c["HostConfig"]["NetworkMode"], c["HostConfig"]["NanoCpus"], c["HostConfig"]["Memory"] >> 20)
              for name, c in containers(docker_cleanup, app).items()}
    assert limits == {f"{app}-{role}-{k}": (f"torchspec-{app}", 10**9, mb)
                      for role, n, mb in (("trainer", 3, 128), ("parameter-server", 2, 64), ("reader", 1, 64))
                      for k in range(n)}, limits


# --- 2. retries ---------------------------------------------------------------------------------------------------

#: Replica 1 fails with code 3 after a short sleep; replica 0 runs until stopped.
ONE_FAILS = f"""echo "replica ${{replica_id}} starts";
if [ ${{replica_id}} = 1 ]; then sleep 1; echo "replica 1 fails"; exit 3; fi;
{FOREVER}"""


def test_application_retries_restart_every_replica_then_fail(env: Env, docker_cleanup: Any) -> None:
    spec = env.spec("appretry", [env.role("worker", ONE_FAILS, 2, retry_policy="APPLICATION", max_retries=2)])
    handle = env.submit(spec)
    app = app_id(handle)
    follow = env.popen("logs", "-f", handle)  # follows every replica through both restarts
    assert env.wait(handle) == APP_FAILED

    status = env.status(handle)
    assert status["state"] == "FAILED" and status["num_restarts"] == 2, status
    assert "exit" in status["msg"] and "3" in status["msg"], status["msg"]
    reps = replicas(status)
    assert reps["worker/1"]["exit_code"] == 3 and reps["worker/1"]["num_restarts"] == 2, reps
    assert reps["worker/0"]["num_restarts"] == 2, reps  # restarted with the app

    logs = env.logs(handle, "worker/0")
    markers = [line for line in logs.splitlines() if "--- torchspec:" in line]
    assert [m.split(None, 1)[1] for m in markers] == [
        "--- torchspec: restart 1 of replica worker/0 ---", "--- torchspec: restart 2 of replica worker/0 ---"], logs
    assert logs.count("replica 0 starts") == 3, logs
    assert env.logs(handle, "worker/1").count("replica 1 fails") == 3

    found = containers(docker_cleanup, app)
    expected = {f"{app}-worker-{k}{suffix}" for k in (0, 1) for suffix in ("", ".attempt0", ".attempt1")}
    assert set(found) == expected, sorted(found)
    for k in (0, 1):
        assert found[f"{app}-worker-{k}.attempt0"]["Config"]["Labels"]["torchspec.attempt"] == "0"
        assert found[f"{app}-worker-{k}.attempt1"]["Config"]["Labels"]["torchspec.attempt"] == "1"
        assert found[f"{app}-worker-{k}"]["Config"]["Labels"]["torchspec.attempt"] == "2"
    # a failed app leaves nothing running: the watcher stops replica 0
    wait_all_stopped(docker_cleanup, app)
    # the new containers are on the app's network under the same names
    current = found[f"{app}-worker-0"]["NetworkSettings"]["Networks"]
    assert list(current) == [f"torchspec-{app}"] and f"{app}-worker-0" in current[f"torchspec-{app}"]["Aliases"]

    # what `logs -f` printed while the app ran is what `logs` prints now (replicas interleaved there)
    followed, err = communicate(follow, 30)
    assert follow.returncode == OK, err
    assert sorted(followed.splitlines()) == sorted(env.logs(handle).splitlines()), followed


#: Replica 1 fails its first attempt only (a file on a bind-mounted host folder remembers it); replica 0 works
#: until replica 1 has succeeded (another file; at most 2 minutes), unless a retry stops it first: so a retry
#: always finds it running, however slowly a loaded machine gets to the retry.
FAILS_ONCE = """echo "replica ${replica_id} starts, attempt $${TORCHSPEC_ATTEMPT}";
if [ ${replica_id} = 1 ]; then
  [ -f /state/once ] || { touch /state/once; sleep 0.5; echo "first try fails"; exit 3; }; echo "second time lucky";
  touch /state/lucky;
else
  trap 'echo "replica 0 stopped"; exit 0' TERM;
  (for n in $(seq 600); do [ -f /state/lucky ] && break; sleep 0.2; done) & wait; echo "replica 0 done";
fi"""


def test_retry_once_then_succeed_under_each_policy(env: Env, docker_cleanup: Any, tmp_path: pathlib.Path) -> None:
    """APPLICATION restarts the whole app, ROLE the failed role, REPLICA the failed container; all then succeed."""
    handles = {}
    for policy in ("APPLICATION", "ROLE", "REPLICA"):
        state = tmp_path / f"state-{policy}"
        state.mkdir()
        roles = [env.role("main", FAILS_ONCE, 2, retry_policy=policy, max_retries=2,
                          mounts=[f"type=bind,src={state},dst=/state"])]
        if policy != "REPLICA":  # a role that never fails, and its own retry policy
            roles.append(env.role("peer", 'echo "peer starts"; sleep 2; echo "peer done"', retry_policy=policy,
                                  max_retries=2))
        handles[policy] = env.submit(env.spec(f"once-{policy.lower()}", roles))

    for policy, handle in handles.items():
        app = app_id(handle)
        assert env.wait(handle) == OK, (policy, env.status(handle))
        status = env.status(handle)
        reps = replicas(status)
        assert status["state"] == "SUCCEEDED" and status["num_restarts"] == 1, (policy, status)
        assert {name: (r["state"], r["exit_code"]) for name, r in reps.items()} == {
            name: ("SUCCEEDED", 0) for name in reps}, (policy, reps)
        assert reps["main/1"]["num_restarts"] == 1, (policy, reps)
        main1 = env.logs(handle, "main/1")
        assert main1.index("first try fails") < main1.index("second time lucky"), (policy, main1)
        main0 = env.logs(handle, "main/0")
        names = sorted(containers(docker_cleanup, app))
        if policy == "REPLICA":  # the engine restarted main/1 in place; main/0 ran once, undisturbed
            assert reps["main/0"]["num_restarts"] == 0, reps
            assert names == [f"{app}-main-0", f"{app}-main-1"], names
            assert main0.count("replica 0 starts") == 1 and "stopped" not in main0, main0
            assert "restart 1" not in main1 and main1.count("replica 1 starts") == 2, main1
            # the engine restarts the same container: its environment, TORCHSPEC_ATTEMPT too, is what it was
            assert main1.count("replica 1 starts, attempt 0") == 2, main1
        else:  # torchspec replaced main's containers (and under APPLICATION peer's too)
            assert reps["main/0"]["num_restarts"] == 1, (policy, reps)
            assert "--- torchspec: restart 1 of replica main/1 ---" in main1, main1
            assert main0.count("replica 0 starts") == 2 and "replica 0 stopped" in main0, main0
            for log, k in ((main0, 0), (main1, 1)):  # each replacement is told its attempt
                assert log.index(f"replica {k} starts, attempt 0") < log.index(f"replica {k} starts, attempt 1"), log
            replaced = [f"{app}-main-0.attempt0", f"{app}-main-1.attempt0"]
            if policy == "APPLICATION":
                replaced.append(f"{app}-peer-0.attempt0")
            assert names == sorted([f"{app}-main-0", f"{app}-main-1", f"{app}-peer-0"] + replaced), (policy, names)
            peer_restarts = 1 if policy == "APPLICATION" else 0
            assert reps["peer/0"]["num_restarts"] == peer_restarts, (policy, reps)
            assert env.logs(handle, "peer/0").count("peer starts") == 1 + peer_restarts


def test_replica_retries_are_the_engines_own(env: Env, docker_cleanup: Any) -> None:
    script = 'echo "replica ${replica_id} starts"; if [ ${replica_id} = 1 ]; then sleep 0.5; exit 3; fi; sleep 2'
    spec = env.spec("repretry", [env.role("worker", script, 2, retry_policy="REPLICA", max_retries=2)])
    handle = env.submit(spec)
    app = app_id(handle)
    assert env.wait(handle) == APP_FAILED

    status = env.status(handle)
    reps = replicas(status)
    assert status["state"] == "FAILED", status
    assert (reps["worker/1"]["state"], reps["worker/1"]["exit_code"], reps["worker/1"]["num_restarts"]) == (
        "FAILED", 3, 2), reps
    assert reps["worker/0"]["num_restarts"] == 0, reps
    found = containers(docker_cleanup, app)
    assert sorted(found) == [f"{app}-worker-0", f"{app}-worker-1"]  # the engine restarts in place
    assert found[f"{app}-worker-1"]["RestartCount"] == 2
    assert found[f"{app}-worker-1"]["HostConfig"]["RestartPolicy"] == {"Name": "on-failure", "MaximumRetryCount": 2}
    assert found[f"{app}-worker-0"]["RestartCount"] == 0
    assert env.logs(handle, "worker/1").count("replica 1 starts") == 3


def test_role_retries_restart_only_the_failing_role(env: Env, docker_cleanup: Any) -> None:
    spec = env.spec("roleretry", [
        env.role("steady", f'echo "replica ${{replica_id}} starts"; {FOREVER}', 2, retry_policy="ROLE", max_retries=1),
        env.role("flaky", ONE_FAILS, 2, retry_policy="ROLE", max_retries=1),
    ])
    handle = env.submit(spec)
    app = app_id(handle)
    assert env.wait(handle) == APP_FAILED

    found = containers(docker_cleanup, app)
    assert sorted(found) == sorted([f"{app}-steady-0", f"{app}-steady-1", f"{app}-flaky-0", f"{app}-flaky-1",
                                    f"{app}-flaky-0.attempt0", f"{app}-flaky-1.attempt0"])
    labels = {name: c["Config"]["Labels"]["torchspec.attempt"] for name, c in found.items()}
    assert labels[f"{app}-steady-0"] == labels[f"{app}-steady-1"] == "0", labels
    assert labels[f"{app}-flaky-0"] == labels[f"{app}-flaky-1"] == "1", labels
    reps = replicas(env.status(handle))
    assert reps["steady/0"]["num_restarts"] == 0 and reps["flaky/1"]["num_restarts"] == 1, reps
    assert reps["flaky/1"]["exit_code"] == 3
    assert env.logs(handle, "steady/0").count("replica 0 starts") == 1
    # failed for good: the watcher stops the steady role (the app is FAILED from the moment flaky/1 gave up)
    wait_all_stopped(docker_cleanup, app)


# --- 3. logs ------------------------------------------------------------------------------------------------------


def test_logs_follow_streams_regex_since(env: Env) -> None:
    script = ('for i in 1 2 3; do echo "line $i of ${replica_id}"; sleep 1; done; '
              'echo "oops ${replica_id}" >&2; echo "last line of ${replica_id}"')
    before = datetime.now(timezone.utc) - timedelta(seconds=1)
    handle = env.submit(env.spec("talk", [env.role("talker", script, 2)]))
    follow = env.popen("logs", "-f", handle)
    out, err = communicate(follow, 45)
    assert follow.returncode == OK, err
    for k in (0, 1):
        for i in (1, 2, 3):
            assert re.search(rf"^talker/{k} +line {i} of {k}$", out, re.MULTILINE), out
        assert re.search(rf"^talker/{k} +last line of {k}$", out, re.MULTILINE), out
        assert re.search(rf"^talker/{k} +oops {k}$", out, re.MULTILINE), out
    assert env.status(handle)["state"] == "SUCCEEDED"

    err_only = env.logs(handle, "--streams", "stderr")
    assert re.findall(r"oops \d", err_only) == ["oops 0", "oops 1"] and "line" not in err_only, err_only
    out_only = env.logs(handle, "talker/1", "--streams", "stdout")
    assert "oops" not in out_only and "last line of 1" in out_only and "of 0" not in out_only, out_only
    assert re.findall(r"line \d of \d", env.logs(handle, "--regex", r"line 2")) == ["line 2 of 0", "line 2 of 1"]
    after = datetime.now(timezone.utc)
    time.sleep(1.1)

    def local(moment: datetime, zone: str) -> str:
        """``moment`` as a naive ISO time on a clock in ``zone``: what --since/--until mean without a zone."""
        return moment.astimezone(ZoneInfo(zone)).replace(tzinfo=None).isoformat()

    for zone in ("America/New_York", "Asia/Kolkata"):  # behind, and ahead of, the engine's UTC stamps
        tz = {"TZ": zone}
        assert env.logs(handle, "--since", local(after, zone), env=tz) == "", zone
        assert env.logs(handle, "--since", local(before, zone), env=tz).count("\n") == 10, zone
    assert env.logs(handle, "--until", local(before, "America/New_York"), env={"TZ": "America/New_York"}) == ""
    assert env.run("logs", handle, "talker/7").returncode == USAGE


# --- 4. and 5. cancel and delete, from any process ----------------------------------------------------------------


def test_list_status_and_cancel_from_another_process(env: Env, docker_cleanup: Any, tmp_path: pathlib.Path) -> None:
    # a grace period no busy machine's cancel comes near: one that waited it out took SIGTERM for nothing
    handle = env.submit(env.spec("sleepers", [env.role("sleeper", FOREVER, 3)]), "-c", "grace_period=300")
    app = app_id(handle)
    other = Env(tmp_path, env.image, name="other")  # another TORCHSPEC_HOME: no local state shared with submit
    running(other, handle, 3)
    assert len(containers(docker_cleanup, app)) == 3 and networks(docker_cleanup, app) == [f"torchspec-{app}"]

    r = other.run("list", "-s", "docker", "--json")
    assert r.returncode == OK, r.stderr
    listed = {entry["app_handle"]: entry for entry in json.loads(r.stdout)}
    created = listed[handle].pop("created")  # the engine's record, in UTC (test_load checks its value)
    assert created.endswith("+00:00"), created
    assert listed[handle] == {"app_handle": handle, "app_id": app, "state": "RUNNING", "labels": {}}, listed[handle]
    table = other.run("status", handle)
    assert table.returncode == OK, table.stderr
    assert re.findall(rf"^sleeper +(\d) +RUNNING .*{app}-sleeper-\1\b", table.stdout, re.MULTILINE) == ["0", "1", "2"]

    waiter = env.popen("wait", handle)  # a cancel removes the app: wait must end, not poll forever
    started = time.monotonic()
    r = other.run("cancel", handle, timeout=240)
    assert r.returncode == OK, r.stderr
    # SIGTERM is obeyed: the cancel did not wait out the 300 s grace (a loaded CI machine took 8.1 s, ci54 19.5 s)
    assert time.monotonic() - started < 200
    assert containers(docker_cleanup, app) == {}
    assert networks(docker_cleanup, app) == []
    r = env.run("status", handle)
    assert r.returncode == USAGE and app in r.stderr, r.stderr
    out, err = communicate(waiter, 30)
    # it saw the stopped containers (renamed NAME.cancelled), or found the app already removed
    assert waiter.returncode == 5 and out.strip() == "CANCELLED", (out, err)
    assert "cancelled" in err, err


def test_cancel_during_application_retries_leaves_nothing(env: Env, docker_cleanup: Any) -> None:
    """Cancel while the watcher is replacing containers: nothing of the app may survive, nor come back."""
    script = f'echo "replica ${{replica_id}} starts"; if [ ${{replica_id}} = 1 ]; then exit 3; fi; {FOREVER}'
    handle = env.submit(env.spec("churn", [env.role("worker", script, 3, retry_policy="APPLICATION",
                                                    max_retries=50)]))
    app = app_id(handle)
    eventually("two APPLICATION retries", lambda: env.status(handle)["num_restarts"] >= 2, timeout=180)

    # a cancel stops each container (its grace period) while the watcher may be replacing them: on a loaded
    # engine that took over 60 s (ci53, beside the load test)
    assert env.run("cancel", handle, timeout=240).returncode == OK
    time.sleep(3)  # long enough for a watcher still at work to create the next attempt
    assert {name: c["State"]["Status"] for name, c in containers(docker_cleanup, app).items()} == {}
    assert networks(docker_cleanup, app) == []
    r = env.run("status", handle)
    assert r.returncode == USAGE, (r.stdout, r.stderr)


def test_cancel_keeps_containers_until_delete(env: Env, docker_cleanup: Any) -> None:
    script = f'echo "sleeper up ${{replica_id}}"; {FOREVER}'
    handle = env.submit(env.spec("keeper", [env.role("sleeper", script, 2)]), "-c", "keep_containers=true")
    app = app_id(handle)
    running(env, handle, 2)

    assert env.run("cancel", handle).returncode == OK
    status = env.status(handle)
    assert status["state"] == "CANCELLED", status
    assert {r["state"] for r in replicas(status).values()} == {"CANCELLED"}
    assert env.wait(handle) == APP_CANCELLED
    found = containers(docker_cleanup, app)
    assert sorted(found) == [f"{app}-sleeper-0.cancelled", f"{app}-sleeper-1.cancelled"]
    assert all(c["State"]["Status"] == "exited" for c in found.values())
    assert networks(docker_cleanup, app) == [f"torchspec-{app}"]
    assert re.findall(r"sleeper up \d", env.logs(handle)) == ["sleeper up 0", "sleeper up 1"]  # logs kept too

    r = env.run("delete", handle)
    assert r.returncode == OK, r.stderr
    assert containers(docker_cleanup, app) == {} and networks(docker_cleanup, app) == []
    assert env.run("status", handle).returncode == USAGE


# --- 6. mounts ----------------------------------------------------------------------------------------------------


def test_bind_mounts_read_only_and_read_write(env: Env, tmp_path: pathlib.Path) -> None:
    ro, rw = tmp_path / "ro", tmp_path / "rw"
    ro.mkdir()
    rw.mkdir()
    (ro / "input.txt").write_text("hello from the host\n")
    script = ('cat /mnt/ro/input.txt; touch /mnt/ro/new 2>&1 || echo "touch refused"; '
              'echo "written by ${replica_id}" > /mnt/rw/out.txt && echo "wrote rw"')
    spec = env.spec("mounts", [env.role("main", script, mounts=[
        f"type=bind,src={ro},dst=/mnt/ro,readonly",
        {"type": "bind", "src_path": str(rw), "dst_path": "/mnt/rw"},
    ])])
    handle = env.submit(spec, "--wait")
    logs = env.logs(handle)
    assert "hello from the host" in logs and "Read-only file system" in logs and "touch refused" in logs, logs
    assert "wrote rw" in logs
    assert not (ro / "new").exists()
    assert (rw / "out.txt").read_text() == "written by 0\n"


# --- 7. workspaces ------------------------------------------------------------------------------------------------


@pytest.fixture
def workspace_images(docker_cleanup: Any) -> Iterator[set[str]]:
    """Ids of the ``torchspec-workspace`` images made during the test; removed (with their containers) afterwards."""
    import docker.errors

    client = docker_cleanup

    def ids() -> set[str]:
        return {image["Id"] for image in client.api.images(name="torchspec-workspace")}

    before = ids()
    yield before
    for image_id in ids() - before:
        for c in client.api.containers(all=True, filters={"ancestor": image_id, "label": APP_LABEL}):
            client.api.remove_container(c["Id"], force=True)
        try:
            client.api.remove_image(image_id, force=True)
        except docker.errors.APIError:  # still used by a container another run made; it is that run's to remove
            pass


def test_workspace_builds_reuses_and_rebuilds(env: Env, docker_cleanup: Any, workspace_images: set[str],
                                              tmp_path: pathlib.Path) -> None:
    client = docker_cleanup
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "run.sh").write_text('echo "workspace says $(cat data.txt)"\n'
                               '[ -e secret.txt ] && echo "secret leaked" || echo "no secret here"\n')
    (ws / "data.txt").write_text(f"version one {uuid.uuid4().hex}\n")  # unique: never an image from another run
    (ws / "secret.txt").write_text("hunter2\n")
    (ws / ".dockerignore").write_text("secret.txt\n")
    spec = env.spec("ws", [env.role("main", "sh run.sh")])

    def tags() -> dict[str, list[str]]:
        return {image["Id"]: sorted(image.get("RepoTags") or [])
                for image in client.api.images(name="torchspec-workspace")}

    def submit() -> tuple[str, str]:
        r = env.run("submit", "-s", "docker", "--workspace", str(ws), spec, "--wait", timeout=120)
        assert r.returncode == OK, (r.stdout, r.stderr)
        return r.stdout.strip(), r.stderr

    handle, err = submit()
    assert re.search(r"^workspace: building image torchspec-workspace:[0-9a-f]{16} from ", err, re.MULTILINE), err
    logs = env.logs(handle)
    assert "workspace says version one" in logs and "no secret here" in logs and "leaked" not in logs, logs
    image = containers(client, app_id(handle))[f"{app_id(handle)}-main-0"]["Config"]["Image"]
    assert re.fullmatch(r"torchspec-workspace:[0-9a-f]{16}", image), image
    after_first = tags()
    assert len(set(after_first) - workspace_images) == 1

    handle2, err = submit()
    assert f"workspace: workspace unchanged: reusing image {image}" in err and "building" not in err, err
    assert tags() == after_first  # nothing built
    assert containers(client, app_id(handle2))[f"{app_id(handle2)}-main-0"]["Config"]["Image"] == image

    (ws / "secret.txt").write_text("hunter3\n")  # ignored: still the same image
    assert "reusing image" in submit()[1]
    (ws / "data.txt").write_text(f"version two {uuid.uuid4().hex}\n")
    handle3, err = submit()
    image3 = containers(client, app_id(handle3))[f"{app_id(handle3)}-main-0"]["Config"]["Image"]
    assert image3 != image and re.fullmatch(r"torchspec-workspace:[0-9a-f]{16}", image3), image3
    assert f"building image {image3}" in err
    assert "workspace says version two" in env.logs(handle3)


def test_workspace_dockerignore_follows_docker_semantics(env: Env, workspace_images: set[str],
                                                         tmp_path: pathlib.Path) -> None:
    """The files a ``docker build`` of the folder would copy, and no others (checked against Docker 20.10).

    Docker matches patterns with Go's filepath.Match: ``*`` stays within one
    folder (``*.md`` is top-level only), ``**/`` also matches no folder at
    all, and ``!`` re-includes a file inside an excluded folder.
    """
    ws = tmp_path / "ws"
    (ws / "proj" / "build").mkdir(parents=True)
    for name in ("README.md", "top.pyc", "proj/keep.txt", "proj/deep.pyc", "proj/notes.md", "proj/build/out.o",
                 "proj/build/keep.o"):
        (ws / name).write_text(f"{name} {uuid.uuid4().hex}\n")
    (ws / ".dockerignore").write_text("**/*.pyc\nproj/build/\n!proj/build/keep.o\n*.md\n")
    spec = env.spec("ignore", [env.role("main", "find /proj /README.md /top.pyc -type f 2>/dev/null | sort")])
    r = env.run("submit", "-s", "docker", "--workspace", str(ws), spec, "--wait", timeout=120)
    assert r.returncode == OK, (r.stdout, r.stderr)
    files = [line.split(None, 1)[1] for line in env.logs(r.stdout.strip()).splitlines()]
    assert files == ["/proj/build/keep.o", "/proj/keep.txt", "/proj/notes.md"], files


# --- 8. no engine -------------------------------------------------------------------------------------------------


def test_no_engine_is_a_backend_error(env: Env) -> None:
    spec = env.spec("noengine", [env.role("main", "echo hi")])
    gone = {"DOCKER_HOST": "unix:///nonexistent.sock"}
    for args in (("submit", "-s", "docker", spec), ("status", "docker://torchspec/x-abc123")):
        r = env.run(*args, env=gone)
        assert r.returncode == BACKEND, (args, r.returncode, r.stderr)
        assert "cannot reach the Docker engine at unix:///nonexistent.sock" in r.stderr, r.stderr
        assert "DOCKER_HOST" in r.stderr and "start" in r.stderr, r.stderr
        assert r.stdout == ""


# --- 9. dry run ---------------------------------------------------------------------------------------------------


def test_dryrun_shows_everything_but_copied_secrets(env: Env, docker_cleanup: Any) -> None:
    secret = {"SECRET_TOKEN": "hunter2"}
    r = env.run("dryrun", "-s", "docker", str(EXAMPLE), "-p", f"image={env.image}", "-c", "copy_env=SECRET_TOKEN",
                env=secret)
    assert r.returncode == OK, r.stderr
    out = r.stdout
    assert "hunter2" not in out and "hunter2" not in r.stderr
    assert "SECRET_TOKEN=<copied from the submitting environment>" in out, out
    match = re.search(r"^network: torchspec-(tps-[a-z0-9]+) \(created for this app", out, re.MULTILINE)
    assert match, out
    app = match.group(1)
    names = re.findall(r"^  (\S+):$", out, re.MULTILINE)
    assert names == [f"{app}-trainer-{k}" for k in range(3)] + [f"{app}-parameter-server-{k}" for k in range(2)] + [
        f"{app}-reader-0"], names
    assert out.count("limits:     cpus=1 memory=128MB") == 3 and out.count("limits:     cpus=1 memory=64MB") == 3
    assert "restart:    on-failure, at most 2 times (REPLICA)" in out
    assert containers(docker_cleanup, app) == {} and networks(docker_cleanup, app) == []  # nothing submitted

    count = 'echo "token has $(printf %s "$SECRET_TOKEN" | wc -c) chars"'
    handle = env.submit(env.spec("secret", [env.role("main", count)]),
                        "-c", "copy_env=SECRET_TOKEN", env=secret)
    assert env.wait(handle) == OK
    [container] = containers(docker_cleanup, app_id(handle)).values()
    assert "SECRET_TOKEN=hunter2" in container["Config"]["Env"]
    assert "token has 7 chars" in env.logs(handle)


# --- 10. run options ----------------------------------------------------------------------------------------------


def test_run_options(env: Env, docker_cleanup: Any) -> None:
    client = docker_cleanup
    script = 'echo "FOO=$FOO rank0=$TORCHSPEC_RANK0_HOST"'

    # env reaches the replica; network=host makes no network of its own
    handle = env.submit(env.spec("hostnet", [env.role("main", script, 2)]), "-c", "env=FOO:bar,network=host")
    app = app_id(handle)
    assert env.wait(handle) == OK
    logs = env.logs(handle)
    assert logs.count("FOO=bar rank0=localhost") == 2, logs
    assert networks(client, app) == []
    assert {c["HostConfig"]["NetworkMode"] for c in containers(client, app).values()} == {"host"}

    # a misspelt option is a usage error with a suggestion, before anything runs
    r = env.run("submit", "-s", "docker", env.spec("typo", [env.role("main", script)]), "-c", "netwrk=host")
    assert r.returncode == USAGE and "did you mean 'network'" in r.stderr, r.stderr

    # pull=never: a missing image fails clearly, creating nothing
    missing = f"torchspec-test/no-such-image:{uuid.uuid4().hex[:8]}"
    spec = env.spec("nopull", [{**env.role("main", script), "image": missing}])
    r = env.run("submit", "-s", "docker", spec, "-c", "pull=never")
    assert r.returncode == BACKEND, (r.returncode, r.stderr)
    assert missing in r.stderr and "pull policy is never" in r.stderr, r.stderr
    assert r.stdout == ""

    # pull=never with the image present: runs, and the engine saw no pull
    since = int(time.time()) - 1
    handle = env.submit(env.spec("local", [env.role("main", script)]), "-c", "pull=never")
    assert env.wait(handle) == OK
    until = int(time.time()) + 1
    pulls = list(client.events(since=since, until=until, decode=True, filters={"type": "image", "event": "pull"}))
    assert pulls == [], pulls
    assert "FOO= rank0=" in env.logs(handle)


def test_wait_for_change_wakes_on_the_engines_event(env: Env, docker_cleanup: Any) -> None:
    """A wait ends when a container does (the engine's event stream), not at the next poll."""
    from torchspec.schedulers.docker.scheduler import DockerScheduler

    # the container runs until the test lets it go: a file in a folder it mounts (an exec or a signal would be
    # an event of the container's own, waking the wait before the exit)
    gate = env.tmp / "gate"
    gate.mkdir()
    handle = env.submit(env.spec("gated", [env.role("w", "while [ ! -e /gate/go ]; do sleep 0.1; done", 1,
                                                    mounts=[f"type=bind,src={gate},dst=/gate"])]))
    app = app_id(handle)
    sched = DockerScheduler("test", client=docker_cleanup)
    assert sched.describe(app) is not None
    start = time.monotonic()
    sched.wait_for_change(app, 0.3)  # the container runs on: the whole timeout passes
    assert time.monotonic() - start >= 0.3
    sched.describe(app)
    releasing = threading.Event()  # set before the file is made: the exit may wake the wait at once

    def release() -> None:
        releasing.set()
        (gate / "go").touch()

    timer = threading.Timer(0.2, release)
    timer.start()
    start = time.monotonic()
    try:
        sched.wait_for_change(app, 120)  # woken by its exit, long before the timeout
        assert releasing.is_set(), "woke before the container was let go"
        assert time.monotonic() - start < 60
    finally:
        timer.join()
    assert env.wait(handle) == OK
