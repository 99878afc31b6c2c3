"""The ray scheduler under faults, on the real two-node cluster: nothing of a replica outlives its app.

A replica here leaves children behind on purpose: one in its process group
(``sleep &``) and one in a session of its own (``setsid sleep &``).  Every
process a replica started carries ``TORCHSPEC_APP_ID`` in its environment,
so the tests find what is left by reading ``/proc`` (both nodes run on this
machine).
"""

from __future__ import annotations

import os
import signal
import time
from typing import List

import pytest

from process_support import app_processes, command_line, wait_empty
from ray_support import groups_left_after_end, wait_state
from test_ray_cli import site  # noqa: F401 - the fixture
from test_ray_cluster import TERMINAL, ray_sched, role, submit  # noqa: F401 - ray_sched: the fixture
from torchspec import specs
from torchspec.specs import AppState

#: Starts two children that outlive it unless something ends them, then waits (or fails with $1).
LEAVES_CHILDREN = 'sleep 300 & setsid sleep 300 & echo started; sleep 0.5; [ -n "$FAIL_WITH" ] && exit "$FAIL_WITH"; wait'
#: How long the tests give an end to reach every process.
GONE_WITHIN_S = float(os.environ.get("GONE", "15"))


def processes_of(sid: str) -> List[str]:
    """``pid cmdline`` of every live process whose TORCHSPEC_APP_ID is ``sid`` (the app's submission id)."""
    return [f"{pid} {command}" for pid in app_processes(sid) if (command := command_line(pid)) is not None]


def sid_of(sched, app_id: str) -> str:
    return app_id.rpartition(f"{sched.dashboard_address}-")[2]


def wait_for(what, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while True:
        value = what()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.25)


def left_after(sid: str) -> List[str]:
    """What is still running of the app ``GONE_WITHIN_S`` after its end (at once when nothing is)."""
    return wait_empty(lambda: processes_of(sid), GONE_WITHIN_S)


def started(sched, sid: str, replicas: int) -> List[str]:
    """The app's processes once each replica started its two children (3 processes and a launcher each)."""
    found = wait_for(lambda: len([p for p in processes_of(sid) if " 300" in p]) >= 2 * replicas)
    assert found, f"the replicas of {sid} never started their children"
    return processes_of(sid)


def test_cancel_ends_every_process_of_every_replica(ray_sched) -> None:
    app = specs.AppDef("leaky", roles=[role("w", LEAVES_CHILDREN, replicas=2)])
    app_id = submit(ray_sched, app)
    sid = sid_of(ray_sched, app_id)
    started(ray_sched, sid, 2)
    ray_sched.cancel(app_id)
    assert wait_state(ray_sched, app_id, TERMINAL, timeout=60).state == AppState.CANCELLED
    assert left_after(sid) == []


@pytest.mark.parametrize("policy", [specs.RetryPolicy.REPLICA, specs.RetryPolicy.ROLE,
                                    specs.RetryPolicy.APPLICATION])
def test_retries_and_the_app_end_leave_nothing(ray_sched, policy: specs.RetryPolicy) -> None:
    """Replica 1 fails with children running, is retried once as the policy says (stopping the replicas the
    policy restarts with it), fails again, and the app ends: every attempt's processes are gone."""
    script = '[ "$0" = 1 ] && export FAIL_WITH=3; ' + LEAVES_CHILDREN
    app = specs.AppDef("fails", roles=[role("w", script, replicas=2, max_retries=1, retry_policy=policy)])
    app_id = submit(ray_sched, app)
    sid = sid_of(ray_sched, app_id)
    desc = wait_state(ray_sched, app_id, TERMINAL, timeout=90)
    assert desc.state == AppState.FAILED and desc.roles_statuses[0].replicas[1].num_restarts == 1, desc
    assert "w/1 exited with code 3" in desc.msg, desc.msg
    assert left_after(sid) == []


def driver_pid(sid: str) -> int:
    """The pid of the app's driver (the job's entrypoint, ``python -m``), whose plan names the submission id."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:  # python -m DRIVER, not the shell Ray runs it in
                if b"torchspec.schedulers.ray.driver" not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{name}/environ", "rb") as f:
                if sid.encode() in f.read():
                    return int(name)
        except OSError:
            continue
    return 0


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSEGV], ids=["SIGKILL", "crash"])
def test_a_driver_that_dies_leaves_no_replica_and_never_reads_cancelled(ray_sched, sig: int) -> None:
    app = specs.AppDef("orphans", roles=[role("w", LEAVES_CHILDREN, replicas=2)])
    app_id = submit(ray_sched, app)
    sid = sid_of(ray_sched, app_id)
    started(ray_sched, sid, 2)
    pid = wait_for(lambda: driver_pid(sid), timeout=10)
    assert pid, "the driver's process was not found"
    os.kill(pid, sig)
    desc = wait_state(ray_sched, app_id, TERMINAL, timeout=60)
    assert desc.state == AppState.FAILED, desc
    assert "driver" in desc.msg, desc.msg
    assert left_after(sid) == []
    assert groups_left_after_end(ray_sched, app_id) == []  # Ray's removal, or the backstop's job


def test_a_node_lost_under_a_replica_fails_the_app_naming_the_node(ray_sched, ray_cluster) -> None:
    """A third node, the only one with the resource the replica asks for, is killed while the replica runs
    there: the app is FAILED saying the node was lost, and nothing of the replica is left running."""
    node = ray_cluster.add_node("lost", {"lost_node": 1})
    try:
        app = specs.AppDef("lost", roles=[role("w", LEAVES_CHILDREN, cpu=1)])
        app.roles[0].resource.capabilities["lost_node"] = 1
        app_id = submit(ray_sched, app)
        sid = sid_of(ray_sched, app_id)
        started(ray_sched, sid, 1)
        ray_cluster.stop_node(node)
        desc = wait_state(ray_sched, app_id, TERMINAL, timeout=120)
        assert desc.state == AppState.FAILED, desc
        assert "w/0 failed: its actor died" in desc.msg and "lost" in desc.msg, desc.msg
        assert left_after(sid) == []
    finally:
        ray_cluster.stop_node(node)


def test_the_head_restarted_under_an_app(site: str, tmp_path) -> None:
    """On a cluster of its own: while the head is down, status and cancel are a clear backend error (exit 6);
    once a head is back on the same address, status says the cluster does not know the app (Ray keeps no
    job across a head restart without GCS fault tolerance), and a new app runs."""
    import ray_support
    from test_ray_cli import cli, spec
    from test_ray_cli import role as cli_role

    cluster = ray_support.start_cluster()
    try:
        cfg = f"dashboard_address={cluster.address}"
        path = spec(tmp_path, "sleeper", [cli_role("a", "sleep 300")])
        handle = cli(site, tmp_path, "submit", "-s", "ray", "-c", cfg, path).stdout.strip()
        assert handle.startswith("ray://"), handle
        sid = handle.split(f"{cluster.address}-", 1)[1]
        wait_for(lambda: processes_of(sid), timeout=60)
        cluster.stop_head()
        for command in ("status", "cancel"):
            down = cli(site, tmp_path, command, handle)
            assert down.returncode == 6 and f"no Ray cluster answers at http://{cluster.address}" in down.stderr, down
        assert left_after(sid) == []  # the head's end took the job's driver and actors with it
        cluster.start_head()
        gone_app = cli(site, tmp_path, "status", handle)
        assert gone_app.returncode == 2 and "restart" in gone_app.stderr, gone_app.stderr
        again = cli(site, tmp_path, "submit", "-s", "ray", "-c", cfg, "--wait",
                    spec(tmp_path, "after", [cli_role("a", "true")]))
        assert again.returncode == 0, again.stderr
    finally:
        cluster.stop()
