"""Processes that misbehave on the ``local`` scheduler, driven through the real CLI, checked in /proc.

A killed supervisor, replicas that ignore SIGTERM, grandchildren that leave
their process group with ``setsid``, a replica that floods its log, and
submits racing a cancel on one state folder.  Each test asserts what a user
sees (exit code, state, message) and what runs on the machine afterwards.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

import pytest

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conftest import Local

OK, APP_FAILED, APP_CANCELLED = 0, 4, 5

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and process groups: Linux")

#: A replica with a child in its group, one in a session of its own, and one double-forked into a new session
#: (orphaned at once): 4 processes, of which only 2 die with the replica's process group.
TREE = "sleep 1000 & setsid sleep 1000 & (setsid sleep 1000 &); echo up; wait"


def test_a_supervisor_killed_with_sigkill_takes_every_process_of_its_app_along(local: "Local") -> None:
    handle = local.submit(local.spec("orphans", TREE, replicas=2))
    local.wait_running(handle, processes=8)
    supervisor = local.state(handle)["supervisor"]["pid"]
    os.kill(supervisor, signal.SIGKILL)

    # nobody asks for the status: the replicas must not run on unsupervised
    local.wait_for(lambda: not local.processes(handle), timeout=15, what="the app's processes to die")
    status = local.status(handle)
    assert status["state"] == "FAILED"
    assert f"the supervisor (pid {supervisor}) died" in status["msg"] and "stopped" in status["msg"]
    assert {r["state"] for role in status["roles"] for r in role["replicas"]} == {"FAILED"}
    r = local.run("cancel", handle)
    assert r.returncode == OK and "already ended: FAILED" in r.stderr
    assert local.run("wait", handle).returncode == APP_FAILED
    assert not local.processes(handle)


def test_cancel_still_stops_everything_when_the_supervisor_and_its_guard_are_gone(local: "Local") -> None:
    handle = local.submit(local.spec("unguarded", TREE), "-c", "kill_grace_s=1")
    local.wait_running(handle, processes=4)
    supervisor = local.state(handle)["supervisor"]["pid"]
    os.killpg(int(local.stat_fields(supervisor)[2]), signal.SIGKILL)  # the whole group: nobody left to clean up
    local.wait_for(lambda: not local.alive(supervisor), what="the supervisor to die")

    r = local.run("cancel", handle)
    assert r.returncode == OK, r.stderr
    assert not local.processes(handle)
    status = local.status(handle)
    assert status["state"] in ("FAILED", "CANCELLED") and "supervisor" in status["msg"]


def test_replicas_that_ignore_sigterm_are_killed_after_the_grace_period(local: "Local") -> None:
    # SIG_IGN is inherited across exec: the shell and both sleeps ignore SIGTERM
    handle = local.submit(local.spec("stubborn", 'trap "" TERM; sleep 1000 & echo up; sleep 1000', replicas=2),
                          "-c", "kill_grace_s=2")
    local.wait_running(handle, processes=6)
    started = time.monotonic()
    assert local.run("cancel", handle).returncode == OK
    status = local.wait_ended(handle)
    took = time.monotonic() - started
    assert status["state"] == "CANCELLED"
    assert not local.processes(handle)
    assert 2.0 <= took < 2.0 + local.timeout / 2, took
    assert local.run("wait", handle).returncode == APP_CANCELLED
    opts = local.run("runopts", "local").stdout
    assert "kill_grace_s" in opts and "SIGKILL" in opts


def test_grandchildren_in_a_new_session_do_not_survive_cancel(local: "Local") -> None:
    handle = local.submit(local.spec("escapees", TREE, replicas=2), "-c", "kill_grace_s=1")
    local.wait_running(handle, processes=8)
    assert local.run("cancel", handle).returncode == OK
    assert local.wait_ended(handle)["state"] == "CANCELLED"
    assert not local.processes(handle)  # once CANCELLED shows, nothing of the app runs


def test_grandchildren_in_a_new_session_do_not_survive_the_app(local: "Local") -> None:
    handle = local.submit(local.spec("daemons", "(setsid sleep 1000 &); setsid sleep 1000 & echo up"))
    assert local.wait_ended(handle)["state"] == "SUCCEEDED"
    assert not local.processes(handle)


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


def test_a_replica_flooding_its_log_leaves_the_supervisor_small(local: "Local") -> None:
    # lines as fast as `yes` prints them, then one 8 MB line with no newline at all
    script = 'timeout 3 yes; head -c 8000000 /dev/zero | tr "\\0" x; echo; echo done'
    handle = local.submit(local.spec("flood", script))
    supervisor = local.wait_for(lambda: local.state(handle)["supervisor"]["ready"] and local.state(handle)["supervisor"]["pid"],
                          what="the supervisor")
    first = peak = _rss_kib(supervisor)
    while local.state(handle)["state"] not in ("SUCCEEDED", "FAILED"):
        try:
            peak = max(peak, _rss_kib(supervisor))
        except (OSError, StopIteration):
            break
        time.sleep(0.02)
    assert local.status(handle)["state"] == "SUCCEEDED"
    assert peak - first < 32 * 1024, f"the supervisor grew from {first} KiB to {peak} KiB"

    log = local.app_dir(handle) / "r" / "0" / "output.log"
    assert log.stat().st_size > 8_000_000
    r = local.run("logs", handle, "--regex", "^(done|x+)$")
    assert r.returncode == OK, r.stderr
    lines = [line.split(None, 1)[1] for line in r.stdout.splitlines()]
    assert lines[-1] == "done"
    assert sum(len(line) for line in lines[:-1]) == 8_000_000  # the long line, in pieces, nothing lost
    assert max(len(line) for line in lines) <= 1 << 16


def test_two_submits_and_a_cancel_racing_on_one_state_folder(local: "Local") -> None:
    victims = [local.submit(local.spec(f"victim{n}", "echo up; sleep 1000")) for n in range(2)]
    for victim in victims:
        local.wait_running(victim)
    spec = local.spec("racer", "echo racing")
    racers = [local.popen("submit", spec) for _ in range(2)]
    cancels = [local.popen("cancel", victims[0]), local.popen("status", victims[1])]
    handles = []
    for proc in racers + cancels:
        out, err = proc.communicate(timeout=local.timeout)
        assert proc.returncode == OK and "Traceback" not in err, err
        if proc in racers:
            handles.append(out.strip())
    local.started += handles
    assert len(set(handles)) == 2

    for handle in handles:
        status = local.wait_ended(handle)
        assert status["state"] == "SUCCEEDED"
        assert local.run("logs", handle).stdout.split()[-1] == "racing"
    assert local.wait_ended(victims[0])["state"] == "CANCELLED"
    assert local.status(victims[1])["state"] == "RUNNING"  # the cancel touched only its own app
    listed = json.loads(local.run("list", "--json").stdout)
    assert sorted(row["app_handle"] for row in listed) == sorted(handles + victims)
    for handle in handles + victims:
        local.state(handle)  # every state.json is whole JSON
    assert local.run("cancel", victims[1]).returncode == OK
    assert local.wait_ended(victims[1])["state"] == "CANCELLED"
