"""The ``docker`` scheduler under faults, on the real engine: what the user sees, and that nothing is lost or left.

Each fault is made for real: the engine's own dockerd is stopped (SIGTERM)
and started again with the arguments it ran with (``engine_stopped`` in
tests/docker_support.py, which always starts it again, since other tests
share it); a replica allocates past its memory limit until the kernel
kills it.  What the user sees is read through the CLI, each call a fresh
process: exit codes, states and messages.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from typing import Any

import pytest

from docker_support import engine_stopped
from test_docker_cli import (  # noqa: F401 - env: the fixture
    APP_FAILED,
    BACKEND,
    OK,
    USAGE,
    Env,
    app_id,
    containers,
    env,
    eventually,
    replicas,
    running,
    wait_all_stopped,
)

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a Linux Docker engine")

#: Exits 0 on SIGTERM (once it said "up"): a replica that checkpoints and leaves cleanly.  Its exit code says
#: nothing of its work.
EXITS_0_ON_TERM = "trap 'exit 0' TERM; echo up; sleep 300 & wait"
#: ``sh`` as PID 1 without a trap ignores SIGTERM: the engine SIGKILLs it after the stop timeout (exit 137).
IGNORES_TERM = 'echo "up ${replica_id}"; sleep 300'
#: The engine waits this long for a container to stop before it SIGKILLs it (also at its own shutdown).
STOP_TIMEOUT = "stop_timeout=2"
#: What a command says while the engine is stopped or restarting, and the message of a replica the engine stopped.
NO_ENGINE = "cannot reach the Docker engine at"
ENGINE_STOPPED = "stopped by the Docker engine as it shut down"


def unreachable(r: Any) -> None:
    """What a command prints while the engine is down: exit 6, the engine named, a hint; never a traceback."""
    assert r.returncode == BACKEND, (r.returncode, r.stdout, r.stderr)
    assert NO_ENGINE in r.stderr and "hint:" in r.stderr and "try again once it answers" in r.stderr, r.stderr
    assert r.stdout == "", r.stdout


def test_an_engine_that_does_not_answer_is_said_in_words(tmp_path: Any) -> None:
    """Every message that gives the SDK's reason (a refused request, a failed pull or build, no engine) says
    an engine's silence in words, never Python's ``('Connection aborted.', FileNotFoundError(2, ...))``."""
    import socket

    import docker
    import requests

    from torchspec.schedulers.docker.engine import reason

    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    for url, words in ((f"unix://{tmp_path}/docker.sock", "its socket does not exist (the engine is not running)"),
                       (f"tcp://127.0.0.1:{port}", "connection refused (the engine is not running")):
        for version in (None, "1.43"):  # None: the client asks the engine for its API version first
            with pytest.raises((docker.errors.DockerException, requests.ConnectionError)) as raised:
                docker.DockerClient(base_url=url, version=version, timeout=5).ping()
            said = reason(raised.value)
            assert said.startswith(words) and "Error(" not in said and "aborted" not in said, said


class Waiter:
    """``torchspec wait HANDLE`` with its stderr read as it comes: off a terminal it prints each state it reads
    there, so its first line says it has read the app's status once, and is waiting."""

    def __init__(self, env: Env, handle: str) -> None:
        self.proc = env.popen("wait", handle)
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)

    def err(self) -> str:
        return "".join(self.lines)

    def end(self, timeout: float) -> tuple[str, str]:
        """stdout and stderr once it ends by itself; killed (and the test failed) if it does not."""
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            pytest.fail(f"still waiting after {timeout}s; printed:\n{self.err()}")
        assert self.proc.stdout is not None
        out = self.proc.stdout.read()
        self.reader.join(30)
        assert "Traceback" not in self.err(), self.err()
        return out, self.err()


def live(client: Any, app: str) -> list[str]:
    """Names of the app's containers that run (or are about to)."""
    return sorted(name for name, c in containers(client, app).items()
                  if c["State"]["Status"] in ("running", "restarting", "created", "paused"))


def test_engine_restart_while_apps_run(env: Env, docker_cleanup: Any) -> None:
    """Stopping the engine stops every container; once it is back, no app may read SUCCEEDED for it, none is lost.

    Three apps: ``mixed`` (a replica that exits 0 on SIGTERM, one the engine
    SIGKILLs), ``clean`` (only the one that exits 0: its waiter must not
    report SUCCEEDED) and ``phoenix`` (REPLICA retries: the engine starts it
    again on its return, and cancel must still stop it).
    """
    client = docker_cleanup
    mixed = env.submit(env.spec("mixed", [env.role("clean", EXITS_0_ON_TERM), env.role("stubborn", IGNORES_TERM)]),
                       "-c", STOP_TIMEOUT)
    clean = env.submit(env.spec("clean", [env.role("clean", EXITS_0_ON_TERM)]), "-c", STOP_TIMEOUT)
    phoenix = env.submit(env.spec("phoenix", [env.role("bird", IGNORES_TERM, retry_policy="REPLICA",
                                                       max_retries=2)]), "-c", STOP_TIMEOUT)
    for handle, n in ((mixed, 2), (clean, 1), (phoenix, 1)):
        running(env, handle, n)
    waiters = {handle: Waiter(env, handle) for handle in (mixed, clean)}
    for handle, waiter in waiters.items():  # each has read the app RUNNING once: it waits, it is not starting
        eventually(f"{handle}'s waiter to read it RUNNING", lambda: f"{handle} RUNNING\n" in waiter.err(), timeout=60)

    with engine_stopped(client) as stop_s:
        assert stop_s < 20, stop_s  # every container obeyed, or was killed after its 2 s
        for args in (("status", mixed), ("describe", mixed), ("status", clean, "--json"), ("cancel", phoenix)):
            started = time.monotonic()
            unreachable(env.run(*args, timeout=30))
            assert time.monotonic() - started < 10, args  # fails at once, no hanging on a socket
        # mixed's waiter may have read its FAILED as the engine stopped it (over a connection it had open);
        # clean has nothing but a replica that exited 0: its waiter cannot know how it ended before the engine is back
        assert waiters[clean].proc.poll() is None, waiters[clean].err()

    # the app that failed: whatever a replica's exit code, it reads FAILED and says the engine stopped it
    first = env.status(mixed)
    assert first["state"] == "FAILED", first

    def marked(handle: str) -> dict[str, Any]:
        s = env.status(handle)
        assert s["state"] == "FAILED", s  # never SUCCEEDED: the engine, not the work, ended its replicas
        return s if all(ENGINE_STOPPED in r["msg"] for r in replicas(s).values()) else {}

    status = eventually("the engine's stops to be marked", lambda: marked(mixed), timeout=15)
    reps = replicas(status)
    assert (reps["clean/0"]["state"], reps["clean/0"]["exit_code"]) == ("FAILED", 0), reps
    assert (reps["stubborn/0"]["state"], reps["stubborn/0"]["exit_code"]) == ("FAILED", 137), reps
    assert ENGINE_STOPPED in status["msg"], status
    table = env.run("status", mixed)
    assert table.returncode == OK and re.search(rf"^clean +0 +FAILED +0 .*{ENGINE_STOPPED}", table.stdout,
                                                re.MULTILINE), table.stdout
    described = env.run("describe", mixed, "--json")
    assert described.returncode == OK, described.stderr
    assert [role["name"] for role in json.loads(described.stdout)["roles"]] == ["clean", "stubborn"]
    assert "up" in env.logs(mixed, "clean/0")  # the logs survive too

    # the waiters report how the apps ended: FAILED, and why (never SUCCEEDED); clean's rode out the outage
    said = {}
    for handle, waiter in waiters.items():
        out, err = waiter.end(30)
        assert (waiter.proc.returncode, out.strip()) == (APP_FAILED, "FAILED"), (handle, out, err)
        said[handle] = err
    assert re.search(rf"{ENGINE_STOPPED}|killed by SIGKILL", said[mixed]), said[mixed]
    assert re.search(rf"clean/0 was {ENGINE_STOPPED}.*, exit code 0$", said[clean], re.MULTILINE), said
    clean_status = eventually("clean's stop to be marked", lambda: marked(clean), timeout=15)
    assert replicas(clean_status)["clean/0"]["exit_code"] == 0, clean_status

    # REPLICA retries: the engine itself started the replica again; cancel stops it and removes the app
    eventually("phoenix to run again", lambda: env.status(phoenix)["state"] == "RUNNING", timeout=15)
    assert env.logs(phoenix).count("up 0") == 2  # one log across both runs
    started = time.monotonic()
    r = env.run("cancel", phoenix)
    assert r.returncode == OK, r.stderr
    assert time.monotonic() - started < 15
    assert containers(client, app_id(phoenix)) == {}
    assert env.run("status", phoenix).returncode == USAGE

    for handle in (mixed, clean):  # nothing the engine stopped came back by itself
        assert live(client, app_id(handle)) == [], handle


def test_docker_stop_outside_torchspec_is_a_failure_that_says_so(env: Env, docker_cleanup: Any) -> None:
    """``docker stop`` on a replica that exits 0 on SIGTERM: not a success (its work was cut short), and the app's
    other replica is stopped as for any failure; ``status`` says who stopped it."""
    handle = env.submit(env.spec("stopped", [env.role("clean", EXITS_0_ON_TERM, 2)]))
    app = app_id(handle)
    eventually("clean/1 to trap SIGTERM", lambda: "up" in env.logs(handle, "clean/1"))
    docker_cleanup.api.stop(f"{app}-clean-1", timeout=5)  # perhaps before the watcher follows the app's events

    assert env.wait(handle, timeout=30) == APP_FAILED
    status = env.status(handle)
    reps = replicas(status)
    outside = "was stopped from outside torchspec (docker stop or docker kill), exit code 0"
    assert (reps["clean/1"]["state"], reps["clean/1"]["exit_code"]) == ("FAILED", 0), reps
    assert outside in reps["clean/1"]["msg"] and outside in status["msg"], status
    assert ENGINE_STOPPED not in status["msg"]
    wait_all_stopped(docker_cleanup, app)
    assert env.run("cancel", handle).returncode == OK  # an ended app: nothing to stop, no error
    assert live(docker_cleanup, app) == []


def test_docker_stop_is_retried_under_application_retries(env: Env, docker_cleanup: Any) -> None:
    """A replica stopped from outside is a failure like any other: APPLICATION retries restart the app, under the
    replicas' own names (not the name that marks the stop), and cancel still ends it."""
    handle = env.submit(env.spec("retried", [env.role("clean", EXITS_0_ON_TERM, 2, max_retries=1)]))
    app = app_id(handle)
    eventually("clean/1 to trap SIGTERM", lambda: "up" in env.logs(handle, "clean/1"))
    docker_cleanup.api.stop(f"{app}-clean-1", timeout=5)

    def restarted() -> bool:
        s = env.status(handle)
        return s["state"] == "RUNNING" and s["num_restarts"] == 1 and len(live(docker_cleanup, app)) == 2
    eventually("the APPLICATION retry", restarted, timeout=30)
    assert live(docker_cleanup, app) == [f"{app}-clean-0", f"{app}-clean-1"]
    assert sorted(containers(docker_cleanup, app)) == sorted(
        [f"{app}-clean-0", f"{app}-clean-1", f"{app}-clean-0.attempt0", f"{app}-clean-1.attempt0"])
    assert env.run("cancel", handle).returncode == OK
    assert containers(docker_cleanup, app) == {}


def test_out_of_memory_is_a_failure_that_says_so(env: Env, docker_cleanup: Any) -> None:
    """A replica the kernel kills at its memory limit: FAILED, exit 137, OOMKilled in the messages; its peer stopped."""
    hog = env.role("hog", 'echo "allocating"; head -c 200m /dev/zero | tail', resource={"cpu": 1, "memMB": 32})
    handle = env.submit(env.spec("oom", [hog, env.role("peer", "trap 'exit 0' TERM; sleep 300 & wait")]))
    app = app_id(handle)

    r = env.run("wait", handle, "--timeout", "60", timeout=90)
    assert (r.returncode, r.stdout.strip()) == (APP_FAILED, "FAILED"), (r.stdout, r.stderr)
    assert "hog/0 exited with code 137 (OOMKilled: it ran out of its memory limit)" in r.stderr, r.stderr

    status = env.status(handle)
    reps = replicas(status)
    assert (reps["hog/0"]["state"], reps["hog/0"]["exit_code"]) == ("FAILED", 137), reps
    assert "OOMKilled" in reps["hog/0"]["msg"] and "OOMKilled" in status["msg"], status
    assert "OOMKilled" not in reps["peer/0"]["msg"], reps
    table = env.run("status", handle)
    assert re.search(r"^hog +0 +FAILED +137 .*OOMKilled", table.stdout, re.MULTILINE), table.stdout

    hog_container = containers(docker_cleanup, app)[f"{app}-hog-0"]
    assert hog_container["State"]["OOMKilled"] is True and hog_container["HostConfig"]["Memory"] == 32 << 20
    wait_all_stopped(docker_cleanup, app)  # failed for good: the watcher stops the peer
    assert live(docker_cleanup, app) == []


def test_a_process_killed_for_memory_in_a_replica_that_exits_0(env: Env) -> None:
    """The replica's own process decides its state, and its row says that one of its processes was OOMKilled: a
    launcher that ignores its child's death would otherwise hide it.

    Which processes the kernel kills is the kernel's: the hog marks itself its first choice (a process may raise
    its own oom_score_adj), but on a starved machine (two busy loops) the memory of the killed hog is freed late
    and a second OOM kill may take the replica's shell too.  So the test reads the log first: the shell carried
    on after the kill (it printed so) and the replica is SUCCEEDED with the OOM kill named, or it did not and
    the replica is FAILED with 137, the OOM kill named; never SUCCEEDED without the message."""
    # the replica lives on a moment: the engine learns of an OOM kill from an event of its own, which may come
    # after the exit of a container that ends at once
    script = ('head -c 200m /dev/zero | (echo 1000 >/proc/self/oom_score_adj; exec tail); echo "carried on after'
              ' code $?"; sleep 1')
    handle = env.submit(env.spec("oomok", [env.role("hog", script, resource={"cpu": 1, "memMB": 32})]))
    code = env.wait(handle)
    status = env.status(handle)
    hog = replicas(status)["hog/0"]
    if "carried on after code 137" in env.logs(handle):
        assert code == OK and (status["state"], hog["state"], hog["exit_code"]) == ("SUCCEEDED", "SUCCEEDED", 0)
        assert "was OOMKilled (it ran out of its memory limit), yet the replica exited with code 0" in hog["msg"], hog
    else:
        assert code == APP_FAILED and (status["state"], hog["state"], hog["exit_code"]) == ("FAILED", "FAILED", 137)
        assert "OOMKilled: it ran out of its memory limit" in hog["msg"], hog
