"""``torchspec events`` through the real entry point, on the local scheduler: text, json, one replica, following
an app to its end, and the errors (exit 2) for a replica or app that is not there."""

from __future__ import annotations

import json
import pathlib
import sys

import pytest

from test_lifecycle import Env

OK, USAGE = 0, 2


@pytest.fixture
def env(tmp_path: pathlib.Path) -> Env:
    return Env(tmp_path)


def submit(env: Env, script: str, replicas: int = 1) -> str:
    spec = env.spec("ev", [{"name": "w", "image": str(env.tmp), "entrypoint": sys.executable, "args": ["-c", script],
                            "num_replicas": replicas}])
    r = env.run("submit", "-s", "local", spec)
    assert r.returncode == OK, r.stderr
    return r.stdout.strip()


def test_follow_prints_each_event_as_it_comes_and_ends_with_the_app(env: Env) -> None:
    handle = submit(env, "import sys, time; time.sleep(1); sys.exit(4)", replicas=2)
    r = env.run("events", handle, "-f")
    assert r.returncode == OK, r.stderr
    lines = r.stdout.splitlines()
    assert "Submitted" in lines[0] and "Failed" in lines[-1] and "exit code 4" in lines[-1]
    assert sum(" w/0 " in line and " Started " in line for line in lines) == 1
    assert all(line[:4].isdigit() and line.rstrip().endswith(")") for line in lines)  # time first, source last

    again = env.run("events", handle)  # what -f printed is what is recorded
    assert again.returncode == OK and again.stdout == r.stdout

    one = env.run("events", handle, "w/1", "-o", "json")
    assert one.returncode == OK, one.stderr
    events = json.loads(one.stdout)
    assert {e["replica"] for e in events} == {None, 1}
    # it failed too, or was stopped as replica 0's failure ended the app first
    assert any(e["reason"] in ("Failed", "Stopped") and e["role"] == "w" for e in events)
    assert events[-1]["reason"] == "Failed" and events[-1]["warning"] and events[-1]["role"] is None
    assert all(e["time"].endswith("+00:00") for e in events)


def test_follow_as_json_is_one_object_a_line(env: Env) -> None:
    handle = submit(env, "pass")
    r = env.run("events", handle, "-f", "--json")
    assert r.returncode == OK, r.stderr
    events = [json.loads(line) for line in r.stdout.splitlines()]
    assert events[0]["reason"] == "Submitted" and events[-1]["reason"] == "Succeeded"


@pytest.mark.parametrize("replica, says", [("x/0", "no role 'x'; its roles: w"), ("w/5", "replicas 0..0, not 5"),
                                           ("w/a", "names no replica")])
def test_a_replica_the_app_lacks_is_a_usage_error(env: Env, replica: str, says: str) -> None:
    handle = submit(env, "pass")
    r = env.run("events", handle, replica)
    assert r.returncode == USAGE and says in r.stderr, r.stderr


def test_an_unknown_app_is_a_usage_error(env: Env) -> None:
    r = env.run("events", "local://torchspec/nothing-abc123")
    assert r.returncode == USAGE and "nothing-abc123" in r.stderr, r.stderr
