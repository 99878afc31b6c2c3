"""``list --state/--user/--since`` and the bulk ``cancel``/``delete`` (several handles, or a selection), through the
real entry point on the ``local`` scheduler; a scheduler that cannot be reached is a docker engine that is not
there (a socket path with nothing behind it)."""

from __future__ import annotations

import getpass
import json
import os
import pathlib
import subprocess
import sys
import time
from typing import List

import pytest

from test_lifecycle import Env

OK, USAGE, BACKEND = 0, 2, 6


@pytest.fixture
def env(tmp_path: pathlib.Path) -> Env:
    return Env(tmp_path)


def submit(env: Env, name: str, seconds: float) -> str:
    spec = env.tmp / f"{name}.json"
    spec.write_text(json.dumps({"name": name, "roles": [{
        "name": "w", "image": str(env.tmp), "entrypoint": sys.executable,
        "args": ["-c", f"import time; time.sleep({seconds})"]}]}))
    r = env.run("submit", "-s", "local", str(spec))
    assert r.returncode == OK, r.stderr
    return r.stdout.strip()


def listed(env: Env, *args: str) -> List[dict]:
    r = env.run("list", "-s", "local", "-o", "json", *args)
    assert r.returncode == OK, r.stderr
    return json.loads(r.stdout)


def states(env: Env) -> dict:
    return {a["app_handle"]: a["state"] for a in listed(env)}


def wait_until_state(env: Env, handle: str, state: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while states(env).get(handle) != state:
        assert time.monotonic() < deadline, f"{handle} never {state}: {states(env)}"
        time.sleep(0.2)


def test_list_filters_by_state_user_and_age(env: Env) -> None:
    done = submit(env, "quick", 0)
    wait_until_state(env, done, "SUCCEEDED")
    running = submit(env, "slow", 600)
    wait_until_state(env, running, "RUNNING")
    try:
        assert [a["app_handle"] for a in listed(env, "--state", "running")] == [running]
        assert [a["app_handle"] for a in listed(env, "--state", "SUCCEEDED,RUNNING")] == [done, running]
        assert len(listed(env, "--user", getpass.getuser())) == 2 and listed(env, "--user", "someone-else") == []
        assert len(listed(env, "--since", "10m")) == 2 and listed(env, "--since", "2999-01-01T00:00:00Z") == []
        created = [a["created"] for a in listed(env)]
        assert all(c and c.endswith("+00:00") for c in created), created  # the engine's record, in UTC
        r = env.run("list", "-s", "local", "--state", "RUNING")
        assert r.returncode == USAGE and "did you mean 'RUNNING'?" in r.stderr
        r = env.run("list", "-s", "local", "--state", "FAILED")
        assert r.returncode == OK and r.stderr.strip() == "no apps on local with state FAILED"
    finally:
        env.run("cancel", running)


def test_cancel_and_delete_by_selection_show_ask_and_act(env: Env) -> None:
    handles = [submit(env, f"s{i}", 600) for i in range(3)]
    for handle in handles:
        wait_until_state(env, handle, "RUNNING")
    r = env.run("cancel", "--state", "RUNNING")  # stdin is no terminal here: no one can be asked
    assert r.returncode == USAGE and "add --yes" in r.stderr and "3 app(s)" in r.stderr
    r = env.run("cancel", "--state", "RUNNING", "--dry-run")
    assert r.returncode == OK and [line.split()[0] for line in r.stdout.splitlines()] == handles
    assert set(states(env).values()) == {"RUNNING"}  # a dry run cancels nothing
    r = env.run("cancel", "--state", "RUNNING", "--older-than", "1h", "--yes")
    assert r.returncode == OK and "nothing to cancel" in r.stderr
    r = env.run("cancel", handles[0], "-l", "x")
    assert r.returncode == USAGE and "not both" in r.stderr
    assert env.run("cancel").returncode == USAGE
    r = env.run("cancel", "--state", "RUNNING", "--yes")
    assert r.returncode == OK, r.stderr
    assert r.stderr.splitlines() == [f"cancelled {h}" for h in handles]
    assert set(states(env).values()) == {"CANCELLED"}
    r = env.run("delete", "-s", "local", "--state", "CANCELLED", "--older-than", "0s", "--yes")
    assert r.returncode == OK and r.stderr.splitlines() == [f"deleted {h}" for h in handles]
    assert states(env) == {}


def test_several_handles_go_on_past_an_unknown_one(env: Env) -> None:
    first, second = submit(env, "a", 600), submit(env, "b", 600)
    r = env.run("cancel", first, "local://torchspec/nope-123456", second, "--yes")
    assert r.returncode == USAGE
    assert f"cancelled {first}" in r.stderr and f"cancelled {second}" in r.stderr and "nope-123456" in r.stderr
    assert set(states(env).values()) == {"CANCELLED"}
    r = env.run("cancel", first, second, "--yes")
    assert r.returncode == OK and "already ended: CANCELLED" in r.stderr


def test_a_scheduler_that_cannot_be_reached_is_named_and_the_rest_acted_on(env: Env) -> None:
    handle = submit(env, "here", 600)
    wait_until_state(env, handle, "RUNNING")
    env.env["DOCKER_HOST"] = f"unix://{env.tmp}/no-engine.sock"
    r = env.run("cancel", "-s", "docker", "-s", "local", "--state", "RUNNING", "--yes")
    assert r.returncode == BACKEND, r.stderr
    assert "error: docker:" in r.stderr and f"cancelled {handle}" in r.stderr
    assert states(env)[handle] == "CANCELLED"


@pytest.mark.parametrize("answer, cancelled", [("y", True), ("n", False)])
def test_at_a_terminal_it_asks_first(env: Env, answer: str, cancelled: bool) -> None:
    handles = [submit(env, f"t{i}", 600) for i in range(2)]
    for handle in handles:
        wait_until_state(env, handle, "RUNNING")
    controller, terminal = os.openpty()
    try:
        proc = subprocess.Popen(env.command("cancel", "--state", "RUNNING"), stdin=terminal, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, cwd=env.tmp, env=env.env)
        os.write(controller, f"{answer}\n".encode())
        out, err = proc.communicate(timeout=60)
    finally:
        os.close(controller)
        os.close(terminal)
    assert proc.returncode == OK, err
    assert "cancel these 2 app(s)? [y/N]" in err and all(h in err for h in handles)
    assert set(states(env).values()) == ({"CANCELLED"} if cancelled else {"RUNNING"})
    env.run("cancel", "--state", "RUNNING", "--yes")
