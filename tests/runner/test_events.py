"""``torchspec.runner.events``: choosing a replica's events, and following an app to its end, on the real local
scheduler (its supervisor's record); each backend's own reading is tested beside the backend."""

from __future__ import annotations

import pathlib
import sys
import time
from datetime import datetime, timezone

import pytest

from torchspec import specs
from torchspec.errors import NotFoundError, UnsupportedError, UsageError
from torchspec.runner import get_runner
from torchspec.runner.events import follow, parse_replica, select
from torchspec.schedulers.api import AppEvent, Capability, Scheduler, check_replica, in_time_order

T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


def event(reason: str, role: str | None = None, replica: int | None = None, seconds: int = 0) -> AppEvent:
    return AppEvent(T0.replace(second=seconds), "x", reason, reason.lower(), False, role, replica)


def test_a_replica_is_role_or_role_slash_number() -> None:
    assert parse_replica(None) == (None, None)
    assert parse_replica("trainer") == ("trainer", None)
    assert parse_replica("trainer/3") == ("trainer", 3)
    for bad in ("/0", "trainer/", "trainer/x", "trainer/-1"):
        with pytest.raises(UsageError, match="names no replica"):
            parse_replica(bad)


def test_a_role_or_replica_the_app_lacks_is_refused_with_a_guess() -> None:
    roles = {"trainer": 2, "reader": 1}
    check_replica("app", "trainer", 1, roles)
    with pytest.raises(NotFoundError, match="no role 'trainr'") as e:
        check_replica("app", "trainr", 0, roles)
    assert "trainer" in str(e.value.hint)
    with pytest.raises(NotFoundError, match=r"replicas 0\.\.1, not 2"):
        check_replica("app", "trainer", 2, roles)


def test_a_replicas_events_come_with_the_apps_own_and_its_roles() -> None:
    events = [event("Queued"), event("Started", "trainer", 0), event("Started", "trainer", 1),
              event("RoleStarted", "trainer"), event("Started", "reader", 0)]
    assert [(e.reason, e.role, e.replica) for e in select(events, "trainer", 1)] == [
        ("Queued", None, None), ("Started", "trainer", 1), ("RoleStarted", "trainer", None)]
    assert len(select(events, "trainer", None)) == 4
    assert select(events, None, None) == events


def test_time_order_is_stable_and_puts_events_without_a_time_first() -> None:
    late, early = event("Late", seconds=9), event("Early", seconds=1)
    same = [event("First", seconds=5), event("Second", seconds=5)]
    untimed = AppEvent(None, "x", "Untimed", "")
    assert [e.reason for e in in_time_order([late, *same, untimed, early])] == [
        "Untimed", "Early", "First", "Second", "Late"]


class Quiet(Scheduler):
    """The interface's minimum: a scheduler written before events existed."""

    def _submit_dryrun(self, app, cfg):  # type: ignore[no-untyped-def]
        raise NotImplementedError

    def schedule(self, dryrun_info):  # type: ignore[no-untyped-def]
        raise NotImplementedError

    def describe(self, app_id):  # type: ignore[no-untyped-def]
        return None

    def list(self):  # type: ignore[no-untyped-def]
        return []

    def _cancel_existing(self, app_id):  # type: ignore[no-untyped-def]
        pass


def test_a_scheduler_that_cannot_say_is_refused_by_name() -> None:
    quiet = Quiet("quiet", "s")
    assert not quiet.supports(Capability.EVENTS)
    with pytest.raises(UnsupportedError, match="the quiet scheduler cannot say what the engine recorded"):
        quiet.require(Capability.EVENTS)
    with pytest.raises(NotImplementedError):
        quiet.events("x")
    with get_runner() as runner:
        assert all(runner.scheduler_supports(name, Capability.EVENTS)
                   for name in ("local", "docker", "kubernetes", "slurm", "ray"))


def test_following_a_local_app_yields_each_event_once_and_ends_with_the_app(tmp_path: pathlib.Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHSPEC_HOME", str(tmp_path / "home"))
    script = "import sys, time; time.sleep(1); sys.exit(3)"
    role = specs.Role("w", image=str(tmp_path), entrypoint=sys.executable, args=["-c", script], num_replicas=2,
                      max_retries=1)
    with get_runner() as runner:
        handle = runner.run(specs.AppDef("ev", roles=[role]), "local")
        started = time.monotonic()
        seen = list(follow(runner, handle, poll_s=0.5))
        assert runner.status(handle).state == specs.AppState.FAILED
        assert time.monotonic() - started < 60
        one = list(follow(runner, handle, "w/1"))
    said = [(e.reason, e.role, e.replica) for e in seen]
    assert len(set(map(repr, seen))) == len(seen)  # nothing twice
    assert said[0] == ("Submitted", None, None) and said[-1] == ("Failed", None, None)
    for k in (0, 1):  # each replica started, ended, was restarted with the app, and ended again: each end a
        # failure, or a stop by the supervisor as the other replica's failure came first
        ends = {"Failed", "Stopped", "Killed"}
        course = [r for r, role, replica in said if replica == k]
        assert course[0::2] == ["Started", "Started"] and set(course[1::2]) <= ends and len(course) == 4, course
    assert [r for r, _, _ in said].count("Failed") >= 3  # a failure each time, and the app's
    assert ("Restarting", None, None) in said
    assert "exit code 3" in seen[-1].message and seen[-1].warning
    assert {e.replica for e in one} == {None, 1}
