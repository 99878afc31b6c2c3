"""``events`` on the docker scheduler: the engine's events of the app's containers (pure reading, then the real
engine), and a container's state where the engine holds no event of it any more."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from test_docker_cli import OK, APP_FAILED, Env, app_id, env  # noqa: F401 - env: the fixture
from torchspec.schedulers.docker.events import engine_event, state_events
from torchspec.schedulers.docker.views import view_of

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs a Linux Docker engine")

LABELS = {"torchspec.app-id": "a-k3x9q2", "torchspec.role-name": "trainer", "torchspec.replica-id": "1",
          "name": "a-k3x9q2-trainer-1"}


def raw(action: str, **attrs: str) -> dict:
    return {"Type": "container", "Action": action, "Actor": {"ID": "c1", "Attributes": {**LABELS, **attrs}},
            "time": 1764300000, "timeNano": 1764300000123456789}


def test_the_engines_events_say_what_happened_to_which_replica() -> None:
    died = engine_event(raw("die", exitCode="137"))
    assert (died.reason, died.message, died.warning, died.role, died.replica) == (
        "Exited", "exited with code 137", True, "trainer", 1)
    assert died.source == "container a-k3x9q2-trainer-1" and died.time.isoformat() == "2025-11-28T03:20:00.123457+00:00"
    assert not engine_event(raw("die", exitCode="0")).warning
    oom = engine_event(raw("oom"))
    assert oom.reason == "OOMKilled" and oom.warning and "memory" in oom.message
    assert engine_event(raw("kill", signal="15")).message == "sent 15"
    assert engine_event(raw("rename", oldName="/x")).message == "renamed from x"
    assert engine_event(raw("health_status: unhealthy")).message == "health: unhealthy"
    for quiet in ("attach", "exec_start: sh", "resize", "top"):
        assert engine_event(raw(quiet)) is None


def test_a_containers_state_is_its_record_where_the_engine_kept_no_event() -> None:
    inspected = {"Id": "c1", "Name": "/a-k3x9q2-trainer-1", "Created": "2026-01-02T03:04:05.1Z", "RestartCount": 2,
                 "State": {"Status": "exited", "ExitCode": 137, "OOMKilled": True, "StartedAt": "2026-01-02T03:04:06Z",
                           "FinishedAt": "2026-01-02T03:05:00Z", "Error": ""},
                 "Config": {"Labels": {k: v for k, v in LABELS.items() if k != "name"}}}
    said = [(e.reason, e.message, e.warning, e.role, e.replica) for e in state_events(view_of(inspected))]
    assert said == [("Created", "created", False, "trainer", 1),
                    ("Started", "started (the engine restarted it 2 time(s))", False, "trainer", 1),
                    ("OOMKilled", "exited with code 137, OOM-killed (it ran out of memory)", True, "trainer", 1)]
    never = dict(inspected, State={"Status": "created", "StartedAt": "0001-01-01T00:00:00Z",
                                   "FinishedAt": "0001-01-01T00:00:00Z"})
    assert [e.reason for e in state_events(view_of(never))] == ["Created"]


def test_events_of_a_real_app_retried_then_cancelled(env: Env, docker_cleanup: Any) -> None:
    script = 'echo up; if [ "${replica_id}" = 1 ]; then exit 3; fi; trap "exit 0" TERM; sleep 60 & wait'
    spec = env.spec("evd", [env.role("w", script, 2, retry_policy="APPLICATION", max_retries=1)])
    handle = env.submit(spec)
    assert env.wait(handle) == APP_FAILED
    r = env.run("events", handle, "-o", "json")
    assert r.returncode == OK, r.stderr
    events = json.loads(r.stdout)
    by_replica = {k: [e["reason"] for e in events if e["replica"] == k] for k in (0, 1)}
    # two attempts each: created and started twice; replica 1 exited 3 both times
    assert by_replica[1].count("Started") == 2 and by_replica[1].count("Created") == 2, by_replica
    assert [e["message"] for e in events if e["replica"] == 1 and e["reason"] == "Exited"] == [
        "exited with code 3"] * 2
    # the first attempt's containers were renamed NAME.attemptN when they were replaced
    assert any(e["reason"] == "Renamed" for e in events), events
    assert all(e["source"].startswith(f"container {app_id(handle)}-w-") for e in events)
    assert [e["time"] for e in events] == sorted(e["time"] for e in events)
    text = env.run("events", handle, "w/1")
    assert text.returncode == OK and " w/1 " in text.stdout and " w/0 " not in text.stdout, text.stdout
