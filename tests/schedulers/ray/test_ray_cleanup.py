"""Placement groups never outlive their app, on the real two-node cluster (``ray_cluster``).

A group holds its bundles' CPUs (GPUs on a real cluster) until it is
removed, so every way an app ends is tried here: it succeeds, a replica
fails (with retries first), it is cancelled before its driver created its
groups, while a group waits to be placed, and while it runs.  After each,
no group of the app may be CREATED or PENDING within :data:`~ray_support.GROUPS_GONE_S`.  And
a group that outlived its app anyway (made here: a detached group named
for a finished app, as a driver killed at the wrong moment could leave)
is removed by the backstop once torchspec asks about that app.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import time
from typing import List

from ray_support import JOB_START_S, groups_left_after_end, jobs_said, live_groups, wait_state
from test_ray_cluster import TERMINAL, ray_sched, role, submit  # noqa: F401 - ray_sched: the fixture
from torchspec import specs
from torchspec.schedulers.ray import cleanup
from torchspec.schedulers.ray.cleanup import cleanup_submission, leaked
from torchspec.schedulers.ray.states import META_APP, group_name
from torchspec.specs import AppState

def sid_of(sched, app_id: str) -> str:
    return app_id.rpartition(f"{sched.dashboard_address}-")[2]


def wait_groups(sched, app_id: str, state: str, count: int, timeout: float = 60) -> List[str]:
    """The app's groups once ``count`` of them are in ``state`` (or what there is after ``timeout``)."""
    deadline = time.monotonic() + timeout
    while True:
        groups = live_groups(sched.dashboard_address, sid_of(sched, app_id))
        if len([g for g in groups if g.endswith(f" {state}")]) >= count or time.monotonic() > deadline:
            return groups
        time.sleep(0.25)


def test_an_apps_groups_are_those_named_for_it_or_made_by_its_job_and_live() -> None:
    groups = [{"id": "01", "name": group_name("a-k3x9q2", "trainer"), "state": "CREATED", "job_id": "05000000"},
              {"id": "02", "name": group_name("a-k3x9q2", "ps"), "state": "PENDING", "job_id": ""},
              {"id": "03", "name": "trainer", "state": "RESCHEDULING", "job_id": "05000000"},  # an older driver's
              # an app named a-k3x9q2 has the submission id a-k3x9q2-zzzzzz: its groups are its own
              {"id": "04", "name": group_name("a-k3x9q2-zzzzzz", "trainer"), "state": "CREATED", "job_id": "06000000"},
              {"id": "05", "name": group_name("a-k3x9q2", "old"), "state": "REMOVED", "job_id": "05000000"},
              {"id": "06", "name": "other", "state": "CREATED", "job_id": "07000000"}]
    assert [g["id"] for g in leaked(groups, "a-k3x9q2", "05000000")] == ["01", "02", "03"]
    assert [g["id"] for g in leaked(groups, "a-k3x9q2", "")] == ["01", "02"]  # its driver never connected


def test_the_cleanup_job_runs_the_modules_own_source_once_per_set_of_leftovers() -> None:
    groups = [{"id": "bb"}, {"id": "aa"}]
    job = cleanup_submission("a-k3x9q2", groups)
    program, flag, script, *ids = shlex.split(job["entrypoint"])
    assert (program, flag, ids) == ("python", "-c", ["aa", "bb"])
    assert script == open(cleanup.__file__, encoding="utf-8").read()
    compile(script, "cleanup", "exec")
    assert job["submission_id"].startswith("torchspec-cleanup-a-k3x9q2-")
    assert cleanup_submission("a-k3x9q2", groups[::-1])["submission_id"] == job["submission_id"]
    assert cleanup_submission("a-k3x9q2", groups[:1])["submission_id"] != job["submission_id"]
    assert META_APP not in job["metadata"] and job["entrypoint_num_cpus"] == 0


def test_groups_carry_the_app_id_and_go_when_the_app_succeeds(ray_sched) -> None:
    app = specs.AppDef("named", roles=[role("trainer", "sleep 4", replicas=2), role("ps", "sleep 4")])
    app_id = submit(ray_sched, app)
    sid = sid_of(ray_sched, app_id)
    groups = wait_groups(ray_sched, app_id, "CREATED", 2)
    assert sorted(groups) == [f"{group_name(sid, 'ps')} CREATED", f"{group_name(sid, 'trainer')} CREATED"]
    assert wait_state(ray_sched, app_id, TERMINAL).state == AppState.SUCCEEDED
    assert groups_left_after_end(ray_sched, app_id) == []


def test_a_failing_replica_and_its_retries_leave_no_group(ray_sched) -> None:
    app = specs.AppDef("fails", roles=[role("w", 'sleep 1; [ "$0" = 1 ] && exit 3; sleep 30', replicas=2,
                                            max_retries=1, retry_policy=specs.RetryPolicy.APPLICATION)])
    app_id = submit(ray_sched, app)
    desc = wait_state(ray_sched, app_id, TERMINAL, timeout=90)
    assert desc.state == AppState.FAILED and desc.num_restarts == 1, desc
    assert groups_left_after_end(ray_sched, app_id) == []


def test_cancelled_before_its_driver_placed_anything(ray_sched) -> None:
    """Cancelled at once (the job still PENDING, or its driver starting), then a second app cancelled as its
    driver connects: neither leaves a group."""
    for delay in (0.0, 2.0):
        app_id = submit(ray_sched, specs.AppDef("early", roles=[role("a", "sleep 300")]))
        time.sleep(delay)
        ray_sched.cancel(app_id)
        assert wait_state(ray_sched, app_id, TERMINAL, timeout=60).state == AppState.CANCELLED
        assert groups_left_after_end(ray_sched, app_id) == [], delay


def test_cancelled_while_its_group_waits_to_be_placed_then_a_running_app_cancelled(ray_sched) -> None:
    """A hog holds every CPU of the cluster; the next app's group stays PENDING (it can never be placed while
    the hog runs) until that app is cancelled; asking about the running hog removes none of its groups; the
    hog cancelled while it runs leaves none either."""
    hog_id = submit(ray_sched, specs.AppDef("hog", roles=[role("hog", "sleep 300", replicas=2, cpu=2)]),
                    placement_strategy="STRICT_SPREAD")
    assert wait_state(ray_sched, hog_id, (AppState.RUNNING, *TERMINAL)).state == AppState.RUNNING
    waiter_id = submit(ray_sched, specs.AppDef("waiter", roles=[role("w", "true")]))
    assert wait_groups(ray_sched, waiter_id, "PENDING", 1) == [f"{group_name(sid_of(ray_sched, waiter_id), 'w')}"
                                                               " PENDING"]
    ray_sched.cancel(waiter_id)
    assert wait_state(ray_sched, waiter_id, TERMINAL, timeout=60).state == AppState.CANCELLED
    assert groups_left_after_end(ray_sched, waiter_id) == []

    assert ray_sched.describe(hog_id).state == AppState.RUNNING
    assert live_groups(ray_sched.dashboard_address, sid_of(ray_sched, hog_id)) == [
        f"{group_name(sid_of(ray_sched, hog_id), 'hog')} CREATED"]
    ray_sched.cancel(hog_id)
    assert wait_state(ray_sched, hog_id, TERMINAL, timeout=60).state == AppState.CANCELLED
    assert groups_left_after_end(ray_sched, hog_id) == []


def test_asking_about_an_ended_app_removes_a_group_it_left_behind(ray_sched, ray_cluster) -> None:
    app_id = submit(ray_sched, specs.AppDef("done", roles=[role("a", "true")]))
    assert wait_state(ray_sched, app_id, TERMINAL).state == AppState.SUCCEEDED
    assert groups_left_after_end(ray_sched, app_id) == []
    leaked = group_name(sid_of(ray_sched, app_id), "a")
    # a detached group: Ray never removes it by itself, as nothing removed the group CI saw outlive its app
    code = ("import ray; from ray.util.placement_group import placement_group; ray.init(logging_level='ERROR');"
            f"ray.get(placement_group([{{'CPU': 1}}], name={leaked!r}, lifetime='detached').ready(), timeout=60)")
    subprocess.run([sys.executable, "-c", code], env={**ray_cluster.env(), "RAY_ADDRESS": ray_cluster.gcs},
                   check=True, capture_output=True, timeout=120)
    assert live_groups(ray_sched.dashboard_address, sid_of(ray_sched, app_id)) == [f"{leaked} CREATED"]
    assert ray_sched.describe(app_id).state == AppState.SUCCEEDED  # what status, wait and cancel ask
    # the backstop is a cleanup job: a fresh driver process must start, import ray and connect
    left = groups_left_after_end(ray_sched, app_id, within=JOB_START_S)
    assert left == [], jobs_said(ray_sched.dashboard_address, sid_of(ray_sched, app_id))
    assert {a.app_id for a in ray_sched.list()} >= {app_id}
    assert all("cleanup" not in a.app_id for a in ray_sched.list())  # the backstop's job is not an app
