"""The ray scheduler against a real two-node Ray cluster (``ray_cluster``): no mocks of Ray.

Every app here is small (1 CPU and 64 MB a replica, the nodes have 2 CPUs
each), and every test cancels what it leaves running.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Iterator, List

import pytest

from ray_support import JOB_START_S, groups_left_after_end, jobs_said, wait_state
from torchspec import specs
from torchspec.errors import AppRefusedError
from torchspec.schedulers.api import Stream
from torchspec.schedulers.ray.scheduler import RayScheduler
from torchspec.specs import AppState

TERMINAL = (AppState.SUCCEEDED, AppState.FAILED, AppState.CANCELLED)


def role(name: str, script: str, replicas: int = 1, cpu: int = 1, **extra: object) -> specs.Role:
    return specs.Role(name=name, image="img", entrypoint="bash", args=["-c", script, "${replica_id}", "${app_id}"],
                      num_replicas=replicas, resource=specs.Resource(cpu=cpu, gpu=0, memMB=64), **extra)


@pytest.fixture
def ray_sched(ray_cluster) -> Iterator[RayScheduler]:
    """A scheduler on the test cluster; apps a test leaves running are stopped (and waited for) afterwards."""
    sched = RayScheduler("test", dashboard_address=ray_cluster.address)
    before = {a.app_id for a in sched.list()}
    yield sched
    left = [a.app_id for a in sched.list() if a.app_id not in before and a.state not in TERMINAL]
    for app_id in left:
        sched.cancel(app_id)
    for app_id in left:
        wait_state(sched, app_id, TERMINAL, timeout=60)
    wait_no_placement_groups(ray_cluster.address)


def wait_no_placement_groups(address: str, timeout: float = 120) -> None:
    """Until no placement group holds the cluster's resources: a job reads terminal before Ray has removed its
    groups (a stopped driver may take up to RAY_JOB_STOP_WAIT_TIME_S), and the next test may need every CPU."""
    import time

    from ray.util.state import list_placement_groups

    deadline = time.monotonic() + timeout
    while True:
        held = [g for g in list_placement_groups(address=f"http://{address}", limit=1000, raise_on_missing_output=False)
                if str(getattr(g, "state", "")) in ("CREATED", "PENDING", "RESCHEDULING")]
        if not held or time.monotonic() > deadline:
            assert not held, f"placement groups still hold the cluster {timeout:g} s after the test: {held}"
            return
        time.sleep(0.5)


def submit(sched: RayScheduler, app: specs.AppDef, **cfg: object) -> str:
    return sched.submit(app, {"dashboard_address": sched.dashboard_address, **cfg})


def test_two_roles_run_with_their_macros_and_logs(ray_sched) -> None:
    script = 'echo "replica=$0 app=$1 rank0=$${TORCHSPEC_RANK0_HOST} role=$TORCHSPEC_ROLE_NAME"; echo oops >&2'
    app = specs.AppDef("macros", roles=[role("trainer", script, replicas=2), role("ps", script)])
    start = datetime.now(timezone.utc)
    app_id = submit(ray_sched, app)
    assert app_id.startswith(f"{ray_sched.dashboard_address}-macros-")
    desc = wait_state(ray_sched, app_id, TERMINAL)
    assert desc.state == AppState.SUCCEEDED, desc.msg
    sid = app_id.rpartition(f"{ray_sched.dashboard_address}-")[2]
    assert [r.name for r in desc.roles] == ["trainer", "ps"]
    assert [[(r.id, r.state, r.exit_code) for r in s.replicas] for s in desc.roles_statuses] == [
        [(0, AppState.SUCCEEDED, 0), (1, AppState.SUCCEEDED, 0)], [(0, AppState.SUCCEEDED, 0)]]
    for name, k in (("trainer", 0), ("trainer", 1), ("ps", 0)):
        out = list(ray_sched.log_iter(app_id, name, k, streams=Stream.STDOUT))
        assert len(out) == 1 and out[0].startswith(f"replica={k} app={sid} rank0=") and f"role={name}" in out[0], out
        statuses = desc.roles_statuses[0 if name == "trainer" else 1].replicas
        # rank 0's node address reached every replica: 127.0.0.1 on rank 0's own node
        same_node = k == 0 or statuses[k].hostname == statuses[0].hostname
        assert f"rank0={'127.0.0.1' if k == 0 else ''}" in out[0] if same_node else f"rank0={statuses[0].hostname} " in out[0]
        assert list(ray_sched.log_iter(app_id, name, k, streams=Stream.STDERR)) == ["oops\n"]
        assert sorted(ray_sched.log_iter(app_id, name, k)) == sorted(out + ["oops\n"])
    assert list(ray_sched.log_iter(app_id, "trainer", 1, regex="^oo")) == ["oops\n"]
    assert list(ray_sched.log_iter(app_id, "trainer", 0, until=start)) == []
    assert len(list(ray_sched.log_iter(app_id, "trainer", 0, since=start))) == 2
    listed = {a.app_id: a.state for a in ray_sched.list()}
    assert listed[app_id] == AppState.SUCCEEDED
    with pytest.raises(ValueError, match="has no role 'worker'"):
        list(ray_sched.log_iter(app_id, "worker", 0))


def test_a_role_starts_once_the_one_it_depends_on_finished_and_finds_its_hosts(ray_sched, tmp_path) -> None:
    data = tmp_path / "data"  # this one-host cluster's nodes share the file system
    app = specs.AppDef("ordered", roles=[
        role("download", f"sleep 1; echo fetched > {data}"),
        role("trainer", f'cat {data} && echo "download at $TORCHSPEC_HOSTS_DOWNLOAD"',
             depends_on=[specs.RoleDependency("download")]),
    ])
    app_id = submit(ray_sched, app)
    desc = wait_state(ray_sched, app_id, TERMINAL)
    assert desc.state == AppState.SUCCEEDED, desc.msg  # cat found the file: trainer started after download ended
    node = desc.roles_statuses[0].replicas[0].hostname
    assert list(ray_sched.log_iter(app_id, "trainer", 0, streams=Stream.STDOUT)) == [
        "fetched\n", f"download at {node}\n"]


def test_a_replica_exiting_3_fails_the_app_with_its_exit_code(ray_sched) -> None:
    app = specs.AppDef("fails", roles=[role("trainer", 'if [ "$0" = 1 ]; then exit 3; fi; sleep 30', replicas=2)])
    app_id = submit(ray_sched, app)
    desc = wait_state(ray_sched, app_id, TERMINAL)
    assert desc.state == AppState.FAILED
    assert desc.msg == "trainer/1 exited with code 3"
    replicas = {r.id: r for r in desc.roles_statuses[0].replicas}
    assert (replicas[1].state, replicas[1].exit_code) == (AppState.FAILED, 3)
    assert replicas[0].state == AppState.CANCELLED  # stopped when replica 1 failed, long before its 30 s


def test_replica_retries_restart_only_the_failed_replica(ray_sched, tmp_path) -> None:
    marker = tmp_path / "failed-once"
    script = (f'echo attempt=$TORCHSPEC_ATTEMPT; if [ "$0" = 1 ] && [ ! -e {marker} ]; then touch {marker}; exit 5;'
              ' fi; echo ok')
    app = specs.AppDef("retry", roles=[role("trainer", script, replicas=2, max_retries=1,
                                            retry_policy=specs.RetryPolicy.REPLICA)])
    app_id = submit(ray_sched, app)
    desc = wait_state(ray_sched, app_id, TERMINAL)
    assert desc.state == AppState.SUCCEEDED, desc.msg
    assert [r.num_restarts for r in desc.roles_statuses[0].replicas] == [0, 1]
    assert desc.num_restarts == 1
    attempts = [[line for line in ray_sched.log_iter(app_id, "trainer", k, streams=Stream.STDOUT)
                 if line.startswith("attempt=")] for k in (0, 1)]
    assert attempts == [["attempt=0\n"], ["attempt=0\n", "attempt=1\n"]]  # each run sees which it is
    # events: the driver's account of the retry, and the end
    said = [(e.reason, e.role, e.replica, e.message) for e in ray_sched.events(app_id)]
    assert ("Restarting", "trainer", 1, "trainer/1 exited with code 5; restarting 1 replica(s) (REPLICA retry)"
            ) in said, said
    assert said[0][0] == "Submitted" and said[-1][:3] == ("Succeeded", None, None), said


def test_role_retries_restart_every_replica_of_the_failed_role_and_only_it(ray_sched, ray_cluster, tmp_path) -> None:
    marker = tmp_path / "failed-once"
    script = f'if [ "$0" = 1 ] && [ ! -e {marker} ]; then touch {marker}; exit 5; fi; sleep 1; echo ok'
    trainer = role("trainer", script, replicas=2, max_retries=1, retry_policy=specs.RetryPolicy.ROLE)
    ps = role("ps", "sleep 1; echo ps-ok", max_retries=1, retry_policy=specs.RetryPolicy.ROLE)
    app_id = submit(ray_sched, specs.AppDef("roleretry", roles=[trainer, ps]))
    desc = wait_state(ray_sched, app_id, TERMINAL)
    assert desc.state == AppState.SUCCEEDED, desc.msg
    # trainer/0 did not fail, but its role's policy restarted it with trainer/1; ps, another role, ran once
    assert [[r.num_restarts for r in s.replicas] for s in desc.roles_statuses] == [[1, 1], [0]]
    assert desc.num_restarts == 1
    cluster = ray_sched.cluster(ray_cluster.address)
    actors = cluster.actors(f"torchspec-{app_id.rpartition(ray_cluster.address + '-')[2]}")
    assert sorted(a["name"] for a in actors) == ["ps/0#0", "trainer/0#0", "trainer/0#1", "trainer/1#0", "trainer/1#1"]
    assert list(ray_sched.log_iter(app_id, "ps", 0)) == ["ps-ok\n"]
    assert list(ray_sched.log_iter(app_id, "trainer", 1)) == ["ok\n"]


def test_an_app_that_can_never_fit_is_refused_naming_role_and_resource(ray_sched) -> None:
    app = specs.AppDef("huge", roles=[role("trainer", "true", cpu=64)])
    with pytest.raises(AppRefusedError, match=r"role 'trainer' asks for 64 CPU per replica, but no node has more"
                                              r" than 2 CPU"):
        submit(ray_sched, app)
    too_many = specs.AppDef("many", roles=[role("trainer", "true", replicas=3, cpu=2)])
    with pytest.raises(AppRefusedError, match=r"asks for 6 CPU in all \(trainer: 3 x 2 CPU\), but the whole cluster"
                                              r" has 4 CPU"):
        submit(ray_sched, too_many)
    spread = specs.AppDef("spread", roles=[role("trainer", "true", replicas=3)])
    with pytest.raises(AppRefusedError, match="STRICT_SPREAD.*only 2 node"):
        submit(ray_sched, spread, placement_strategy="STRICT_SPREAD")


def test_pending_while_the_cluster_is_busy_then_cancelled_and_running_cancelled(ray_sched, ray_cluster) -> None:
    hog = specs.AppDef("hog", roles=[role("hog", "echo up; sleep 300", replicas=2, cpu=2)])
    hog_id = submit(ray_sched, hog, placement_strategy="STRICT_SPREAD")
    assert wait_state(ray_sched, hog_id, (AppState.RUNNING, *TERMINAL)).state == AppState.RUNNING
    waiter = specs.AppDef("waiter", roles=[role("w", "echo never")])
    waiter_id = submit(ray_sched, waiter, placement_strategy="SPREAD")
    deadline = time.monotonic() + 60  # the job starts, then its driver waits for its placement group
    desc = ray_sched.describe(waiter_id)
    while "placement groups" not in desc.msg and time.monotonic() < deadline:
        assert desc.state == AppState.PENDING, desc
        time.sleep(0.5)
        desc = ray_sched.describe(waiter_id)
    assert desc.state == AppState.PENDING and "placement groups" in desc.msg, desc
    assert desc.roles_statuses[0].replicas[0].state == AppState.PENDING
    ray_sched.cancel(waiter_id)
    assert wait_state(ray_sched, waiter_id, TERMINAL, timeout=60).state == AppState.CANCELLED

    ray_sched.cancel(hog_id)
    assert wait_state(ray_sched, hog_id, TERMINAL, timeout=60).state == AppState.CANCELLED
    desc = ray_sched.describe(hog_id)
    assert [r.state for r in desc.roles_statuses[0].replicas] == [AppState.CANCELLED] * 2
    assert _placement_groups_left(ray_cluster, [hog_id, waiter_id]) == []
    # the cluster is free again: the next app runs at once
    after = submit(ray_sched, specs.AppDef("after", roles=[role("a", "true", replicas=2, cpu=2)]))
    assert wait_state(ray_sched, after, TERMINAL).state == AppState.SUCCEEDED


def _placement_groups_left(ray_cluster, app_ids: List[str]) -> List[str]:
    """Placement groups of these apps' jobs that are not removed (within 15 s of their end)."""
    from ray.util.state import list_placement_groups

    from torchspec.schedulers.ray.client import _pinned

    sched = RayScheduler("test", dashboard_address=ray_cluster.address)
    jobs = {sched.describe(a).metadata["ray_job_id"] for a in app_ids}
    deadline = time.monotonic() + 15
    while True:
        with _pinned(ray_cluster.url):
            groups = list_placement_groups(address=ray_cluster.url, limit=1000)
        left = [f"{g.name} {g.state}" for g in groups if g.creator_job_id in jobs and str(g.state) != "REMOVED"]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.5)


def test_strict_spread_places_replicas_on_both_nodes(ray_sched, ray_cluster) -> None:
    app = specs.AppDef("spread", roles=[role("trainer", "sleep 1", replicas=2, cpu=2)])
    app_id = submit(ray_sched, app, placement_strategy="strict_spread")
    assert wait_state(ray_sched, app_id, TERMINAL).state == AppState.SUCCEEDED
    cluster = ray_sched.cluster(ray_cluster.address)
    actors = cluster.actors(f"torchspec-{app_id.rpartition(ray_cluster.address + '-')[2]}")
    assert sorted(a["name"] for a in actors) == ["trainer/0#0", "trainer/1#0"]
    assert len({a["node_id"] for a in actors}) == 2, actors


def test_placement_timeout_fails_an_app_that_waits_too_long(ray_sched) -> None:
    hog_id = submit(ray_sched, specs.AppDef("hog2", roles=[role("hog", "sleep 300", replicas=2, cpu=2)]),
                    placement_strategy="STRICT_SPREAD")
    assert wait_state(ray_sched, hog_id, (AppState.RUNNING, *TERMINAL)).state == AppState.RUNNING
    late_id = submit(ray_sched, specs.AppDef("late", roles=[role("late", "true")]), placement_timeout=2)
    desc = wait_state(ray_sched, late_id, TERMINAL, timeout=JOB_START_S)  # its driver starts, then waits 2 s
    assert desc.state == AppState.FAILED, jobs_said(ray_sched.dashboard_address, desc.metadata["submission_id"])
    assert "the app cannot be placed" in desc.msg and "late" in desc.msg and "placement_timeout=2s" in desc.msg
    assert groups_left_after_end(ray_sched, late_id) == []  # its driver removed the group that waited
    ray_sched.cancel(hog_id)


def test_logs_follow_a_running_replica_to_its_end(ray_sched) -> None:
    app = specs.AppDef("follow", roles=[role("r", "for i in 1 2 3; do echo line $i; sleep 1; done")])
    app_id = submit(ray_sched, app)
    lines = list(ray_sched.log_iter(app_id, "r", 0, should_tail=True))
    assert lines == ["line 1\n", "line 2\n", "line 3\n"]
    assert ray_sched.describe(app_id).state == AppState.SUCCEEDED


def test_application_retries_restart_every_replica(ray_sched, tmp_path) -> None:
    marker = tmp_path / "failed-once"
    script = f'if [ "$0" = 1 ] && [ ! -e {marker} ]; then touch {marker}; exit 4; fi; sleep 1; echo ok'
    app = specs.AppDef("appretry", roles=[role("trainer", script, replicas=2, max_retries=1)])
    app_id = submit(ray_sched, app)
    desc = wait_state(ray_sched, app_id, TERMINAL)
    assert desc.state == AppState.SUCCEEDED, desc.msg
    assert [r.num_restarts for r in desc.roles_statuses[0].replicas] == [1, 1]
    assert list(ray_sched.log_iter(app_id, "trainer", 0)) == ["ok\n"]  # its first attempt was stopped at its sleep
