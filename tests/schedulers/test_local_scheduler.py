"""The local scheduler with real processes: apps, retries, cancel, logs, a dead supervisor, state on disk."""

from __future__ import annotations

import fcntl
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from datetime import datetime, timedelta, timezone
from typing import Any, Dict, List

import pytest

from torchspec import specs
from torchspec.schedulers import get_scheduler_factory
from torchspec.schedulers.api import Stream
from torchspec.schedulers.local.scheduler import LocalScheduler
from torchspec.schedulers.local.state import supervisor_lock_held, update_state

from process_support import alive
from scheduler_helpers import TIMEOUT_S, wait_for, wait_terminal

AppState = specs.AppState


def sh_role(name: str, script: str, image: str, **kwargs: object) -> specs.Role:
    return specs.Role(name=name, image=image, entrypoint="sh", args=["-c", script], **kwargs)  # type: ignore[arg-type]


def state_json(sched: LocalScheduler, app_id: str) -> Dict[str, object]:
    app_dir = sched.app_dir(app_id)
    assert app_dir is not None
    with open(os.path.join(app_dir, "state.json")) as src:
        return json.load(src)


def replica_pid(sched: LocalScheduler, app_id: str, role: str, k: int = 0) -> int:
    return state_json(sched, app_id)["roles"][role]["replicas"][k]["pid"]  # type: ignore[index]


def wait_running(sched: LocalScheduler, app_id: str) -> None:
    """Until state.json shows the app RUNNING with every replica's pid recorded."""

    def running() -> bool:
        state = state_json(sched, app_id)
        pids = [r["pid"] for role in state["roles"].values() for r in role["replicas"]]  # type: ignore[union-attr]
        return state["state"] == "RUNNING" and all(pids)

    wait_for(running, what=f"{app_id} to run")


def stop_outside_state_lock(pid: int, app_dir: str) -> None:
    """SIGSTOP ``pid`` at a moment it does not hold the app's state lock, which would block the test."""
    while True:
        os.kill(pid, signal.SIGSTOP)
        fd = os.open(os.path.join(app_dir, "state.lock"), os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            os.kill(pid, signal.SIGCONT)
            time.sleep(0.01)
        finally:
            os.close(fd)


def lines(sched: LocalScheduler, app_id: str, role: str, k: int = 0, **kwargs: object) -> List[str]:
    return [line.rstrip("\n") for line in sched.log_iter(app_id, role, k, **kwargs)]  # type: ignore[arg-type]


def test_multi_role_app_succeeds_and_each_replica_sees_its_own_ids(sched: LocalScheduler, tmp_path) -> None:
    script = "echo rid=${replica_id} env=$TORCHSPEC_REPLICA_ID mine=$MINE app=${app_id} rank0=$${${rank0_env}}"
    app = specs.AppDef(
        "multi",
        roles=[
            sh_role("trainer", script, str(tmp_path), num_replicas=3, env={"MINE": "r${replica_id}"}),
            specs.Role(
                "ps",
                image=str(tmp_path),
                entrypoint=sys.executable,
                args=["-c", "import os; print(os.getcwd(), os.environ['TORCHSPEC_ROLE_NAME'], '${img_root}')"],
            ),
        ],
    )
    app_id = sched.submit(app, {})
    assert app_id.startswith("multi-") and len(app_id) == len("multi-") + 6

    desc = wait_terminal(sched, app_id)
    assert desc.state == AppState.SUCCEEDED, desc.msg
    assert desc.num_restarts == 0
    assert [(r.role, [(x.id, x.state, x.hostname) for x in r.replicas]) for r in desc.roles_statuses] == [
        ("trainer", [(k, AppState.SUCCEEDED, "localhost") for k in range(3)]),
        ("ps", [(0, AppState.SUCCEEDED, "localhost")]),
    ]
    assert [role.name for role in desc.roles] == ["trainer", "ps"]
    assert desc.roles[0].args == ["-c", script]  # as submitted: macros not substituted
    for k in range(3):
        assert lines(sched, app_id, "trainer", k) == [f"rid={k} env={k} mine=r{k} app={app_id} rank0=localhost"]
    assert lines(sched, app_id, "ps") == [f"{tmp_path} ps {tmp_path}"]


def test_status_from_another_process_after_the_submitter_is_gone(state_dir: str, tmp_path) -> None:
    submitter = LocalScheduler("test", state_dir=state_dir)
    app_id = submitter.submit(specs.AppDef("bg", roles=[sh_role("r", "sleep 0.3; echo done", str(tmp_path))]), {})
    submitter.close()
    del submitter

    probe = textwrap.dedent(
        f"""
        import time
        from torchspec import specs
        from torchspec.schedulers import get_scheduler_factory
        sched = get_scheduler_factory("local")("other-session", state_dir={state_dir!r})
        deadline = time.monotonic() + {TIMEOUT_S}
        while True:
            desc = sched.describe({app_id!r})
            if specs.is_terminal(desc.state) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        print(desc.state.name, desc.roles[0].name, "".join(sched.log_iter({app_id!r}, "r")).strip())
        print([app.app_id for app in sched.list()])
        """
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=TIMEOUT_S + 30)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["SUCCEEDED r done", f"[{app_id!r}]"]




def fail_once(role: str, replicas_that_fail: str = "*") -> str:
    """A script that fails (exit 3) the first time it runs for replica ids matching a shell pattern."""
    return (
        f"echo start $TORCHSPEC_RESTART_COUNT; m=marker-{role}-${{replica_id}};"
        f" case ${{replica_id}} in {replicas_that_fail}) if [ ! -e $m ]; then touch $m; exit 3; fi;; esac;"
        f" sleep 0.2"
    )


def test_retry_policy_application_restarts_every_replica(sched: LocalScheduler, tmp_path) -> None:
    role = sh_role("a", fail_once("a", "0"), str(tmp_path), num_replicas=2, max_retries=1,
                   retry_policy=specs.RetryPolicy.APPLICATION)
    app_id = sched.submit(specs.AppDef("app", roles=[role]), {"kill_grace_s": 1})
    desc = wait_terminal(sched, app_id)
    assert desc.state == AppState.SUCCEEDED, desc.msg
    assert desc.num_restarts == 1
    assert state_json(sched, app_id)["app_restarts"] == 1
    log0 = lines(sched, app_id, "a", 0)
    assert log0 == ["start 0", "--- torchspec: restart 1 of replica a/0 (exit code 3) ---", "start 1"]
    # replica 1 was stopped (it may not have printed anything yet) and started again
    log1 = lines(sched, app_id, "a", 1, regex="restart|start 1")
    assert len(log1) == 2 and log1[1] == "start 1"
    assert log1[0].startswith("--- torchspec: restart 1 of replica a/1 (exit code ")


def test_retry_policy_role_restarts_only_that_role(sched: LocalScheduler, tmp_path) -> None:
    app = specs.AppDef(
        "app",
        roles=[
            sh_role("a", fail_once("a", "0"), str(tmp_path), num_replicas=2, max_retries=1,
                    retry_policy=specs.RetryPolicy.ROLE),
            sh_role("b", "echo b start; sleep 0.5", str(tmp_path)),
        ],
    )
    app_id = sched.submit(app, {"kill_grace_s": 1})
    desc = wait_terminal(sched, app_id)
    assert desc.state == AppState.SUCCEEDED, desc.msg
    assert desc.num_restarts == 1
    state = state_json(sched, app_id)
    assert state["roles"]["a"]["restarts"] == 1  # type: ignore[index]
    assert [r["restarts"] for r in state["roles"]["a"]["replicas"]] == [1, 1]  # type: ignore[index]
    restarted = lines(sched, app_id, "a", 1, regex="restart|start 1")  # it may be stopped before printing
    assert len(restarted) == 2 and restarted[1] == "start 1"
    assert restarted[0].startswith("--- torchspec: restart 1 of replica a/1 (exit code ")
    assert lines(sched, app_id, "b") == ["b start"]


def test_retry_policy_replica_restarts_only_the_failed_replica(sched: LocalScheduler, tmp_path) -> None:
    app = specs.AppDef(
        "app",
        roles=[
            sh_role("a", fail_once("a"), str(tmp_path), num_replicas=2, max_retries=1,
                    retry_policy=specs.RetryPolicy.REPLICA),
            sh_role("b", "echo b start; sleep 0.5", str(tmp_path), retry_policy=specs.RetryPolicy.REPLICA),
        ],
    )
    app_id = sched.submit(app, {})
    desc = wait_terminal(sched, app_id)
    assert desc.state == AppState.SUCCEEDED, desc.msg
    assert desc.num_restarts == 2
    for k in range(2):
        assert lines(sched, app_id, "a", k) == [
            "start 0",
            f"--- torchspec: restart 1 of replica a/{k} (exit code 3) ---",
            "start 1",
        ]
    assert lines(sched, app_id, "b") == ["b start"]


def test_retries_used_up_fail_the_app_with_exit_codes(sched: LocalScheduler, tmp_path) -> None:
    app = specs.AppDef(
        "app",
        roles=[
            sh_role("a", "echo try $TORCHSPEC_RESTART_COUNT $TORCHSPEC_ATTEMPT; exit 7", str(tmp_path), max_retries=2,
                    retry_policy=specs.RetryPolicy.REPLICA),
            sh_role("b", "sleep 100", str(tmp_path)),
        ],
    )
    app_id = sched.submit(app, {"kill_grace_s": 1})
    desc = wait_terminal(sched, app_id)
    assert desc.state == AppState.FAILED
    assert desc.num_restarts == 2
    assert "a/0" in desc.msg and "exit code 7" in desc.msg and "max_retries=2" in desc.msg
    assert lines(sched, app_id, "a", regex="^try") == ["try 0 0", "try 1 1", "try 2 2"]
    statuses = {r.role: r.replicas[0].state for r in desc.roles_statuses}
    assert statuses == {"a": AppState.FAILED, "b": AppState.CANCELLED}
    assert not alive(replica_pid(sched, app_id, "b"))


def test_cancel_kills_every_process_of_every_replica(sched: LocalScheduler, tmp_path) -> None:
    role = sh_role("r", "sleep 100 & echo $! > child-${replica_id}.pid; sleep 100", str(tmp_path), num_replicas=2)
    app_id = sched.submit(specs.AppDef("app", roles=[role]), {"kill_grace_s": 2})
    child_files = [tmp_path / f"child-{k}.pid" for k in range(2)]
    wait_for(lambda: all(f.exists() and f.read_text().strip() for f in child_files), what="children to start")
    wait_running(sched, app_id)
    assert sched.describe(app_id).state == AppState.RUNNING  # type: ignore[union-attr]
    pids = [int(f.read_text()) for f in child_files] + [replica_pid(sched, app_id, "r", k) for k in range(2)]
    assert all(alive(pid) for pid in pids)

    sched.cancel(app_id)
    desc = wait_terminal(sched, app_id)
    assert desc.state == AppState.CANCELLED
    assert [x.state for x in desc.roles_statuses[0].replicas] == [AppState.CANCELLED] * 2
    wait_for(lambda: not any(alive(pid) for pid in pids), timeout=10, what="every process to be gone")
    sched.cancel(app_id)  # idempotent on a finished app
    assert sched.describe(app_id).state == AppState.CANCELLED  # type: ignore[union-attr]


def test_cancel_right_after_submit_is_not_lost(sched: LocalScheduler, tmp_path) -> None:
    # The supervisor is most likely still starting: the request waits in state.json for it.
    app_id = sched.submit(specs.AppDef("quick", roles=[sh_role("r", "sleep 100", str(tmp_path))]), {})
    sched.cancel(app_id)
    assert wait_terminal(sched, app_id).state == AppState.CANCELLED
    pid = replica_pid(sched, app_id, "r")
    assert pid is None or not alive(pid)


def test_cancel_escalates_to_sigkill_after_the_grace_period(sched: LocalScheduler, tmp_path) -> None:
    # SIG_IGN is inherited, so neither sh nor its sleep can be stopped by SIGTERM
    role = sh_role("r", "trap '' TERM; echo ready; sleep 100", str(tmp_path))
    app_id = sched.submit(specs.AppDef("app", roles=[role]), {"kill_grace_s": 1})
    wait_for(lambda: lines(sched, app_id, "r") == ["ready"], what="the replica to start")
    wait_running(sched, app_id)
    pid = replica_pid(sched, app_id, "r")
    started = time.monotonic()
    sched.cancel(app_id)
    assert wait_terminal(sched, app_id).state == AppState.CANCELLED
    assert time.monotonic() - started >= 0.9
    assert not alive(pid)


def test_logs_by_stream_regex_and_time(sched: LocalScheduler, tmp_path) -> None:
    script = "echo out1; echo err1 >&2; echo out2; sleep 0.3; echo late"
    before = datetime.now()
    app_id = sched.submit(specs.AppDef("logs", roles=[sh_role("r", script, str(tmp_path))]), {})
    assert wait_terminal(sched, app_id).state == AppState.SUCCEEDED

    assert lines(sched, app_id, "r", streams=Stream.STDOUT) == ["out1", "out2", "late"]
    assert lines(sched, app_id, "r", streams="stderr") == ["err1"]  # type: ignore[arg-type]
    assert sorted(lines(sched, app_id, "r")) == ["err1", "late", "out1", "out2"]
    assert lines(sched, app_id, "r", regex=r"^out\d$") == ["out1", "out2"]
    assert list(sched.log_iter(app_id, "r", streams=Stream.STDOUT))[0] == "out1\n"

    assert lines(sched, app_id, "r", since=before, streams=Stream.STDOUT) == ["out1", "out2", "late"]
    assert lines(sched, app_id, "r", since=datetime.now() + timedelta(minutes=1)) == []
    assert lines(sched, app_id, "r", until=before) == []

    # stored once, in output.log: a stream tag per line and a time mark before a line after a pause;
    # cut between out2 and late by the mark written before late
    app_dir = sched.app_dir(app_id)
    assert app_dir is not None
    with open(os.path.join(app_dir, "r", "0", "output.log"), "rb") as src:
        stored = src.read().splitlines()
    content = [line for line in stored if not line.startswith(b"t")]  # the two pipes race: order across streams varies
    assert sorted(content) == [b"eerr1", b"olate", b"oout1", b"oout2"] and content[-1] == b"olate"
    marks = [datetime.fromtimestamp(float(line[1:]), timezone.utc) for line in stored if line.startswith(b"t")]
    assert marks == sorted(marks) and stored[-2].startswith(b"t")  # late came 0.3 s later: a mark of its own
    assert lines(sched, app_id, "r", since=marks[-1], streams=Stream.STDOUT) == ["late"]
    assert lines(sched, app_id, "r", until=marks[-1], streams=Stream.STDOUT) == ["out1", "out2"]
    assert not os.path.exists(os.path.join(app_dir, "r", "0", "combined.log"))  # nothing is written twice

    with pytest.raises(ValueError, match="no role 'nope'; its roles: r"):
        sched.log_iter(app_id, "nope")
    with pytest.raises(ValueError, match="replicas 0..0, not 3"):
        sched.log_iter(app_id, "r", 3)
    with pytest.raises(ValueError):
        sched.log_iter(app_id, "r", streams="both")  # type: ignore[arg-type]


def test_should_tail_follows_the_replica_to_its_end(sched: LocalScheduler, tmp_path) -> None:
    script = "for i in 1 2 3 4; do echo line $i; sleep 0.2; done"
    app_id = sched.submit(specs.AppDef("tail", roles=[sh_role("r", script, str(tmp_path))]), {})
    followed = lines(sched, app_id, "r", should_tail=True)
    assert followed == ["line 1", "line 2", "line 3", "line 4"]
    assert sched.describe(app_id).state == AppState.SUCCEEDED  # type: ignore[union-attr]


def test_should_tail_ends_with_a_finished_replica_while_others_run(sched: LocalScheduler, tmp_path) -> None:
    app = specs.AppDef(
        "tail",
        roles=[sh_role("quick", "echo hi", str(tmp_path)), sh_role("slow", "sleep 100", str(tmp_path))],
    )
    app_id = sched.submit(app, {"kill_grace_s": 1})
    started = time.monotonic()
    assert lines(sched, app_id, "quick", should_tail=True) == ["hi"]
    assert time.monotonic() - started < 30
    assert sched.describe(app_id).state == AppState.RUNNING  # type: ignore[union-attr]


def test_dead_supervisor_is_reported_failed_and_its_replicas_stopped(sched: LocalScheduler, tmp_path) -> None:
    app_id = sched.submit(specs.AppDef("orphan", roles=[sh_role("r", "echo up; sleep 100", str(tmp_path))]), {})
    wait_for(lambda: lines(sched, app_id, "r") == ["up"], what="the replica to start")
    wait_running(sched, app_id)
    supervisor = state_json(sched, app_id)["supervisor"]["pid"]  # type: ignore[index]
    replica = replica_pid(sched, app_id, "r")
    os.kill(supervisor, signal.SIGKILL)

    desc = wait_terminal(sched, app_id)
    assert desc.state == AppState.FAILED
    assert f"the supervisor (pid {supervisor}) died" in desc.msg
    assert desc.roles_statuses[0].replicas[0].state == AppState.FAILED
    wait_for(lambda: not alive(replica), timeout=10, what="the orphaned replica to be stopped")


def test_a_stalled_supervisor_is_reported_but_its_app_keeps_running(sched: LocalScheduler, tmp_path) -> None:
    # As after a laptop suspend: the supervisor is alive but its heartbeat is old.
    app_id = sched.submit(specs.AppDef("stall", roles=[sh_role("r", "echo up; sleep 100", str(tmp_path))]), {})
    wait_for(lambda: lines(sched, app_id, "r") == ["up"], what="the replica to start")
    wait_running(sched, app_id)
    supervisor = state_json(sched, app_id)["supervisor"]["pid"]  # type: ignore[index]
    app_dir = sched.app_dir(app_id)
    assert app_dir is not None
    stop_outside_state_lock(supervisor, app_dir)
    try:

        def age(state: Dict[str, Any]) -> None:
            state["supervisor"]["heartbeat"] -= 3600

        update_state(app_dir, age)
        desc = sched.describe(app_id)
        assert desc is not None and desc.state == AppState.RUNNING
        assert re.search(r"no heartbeat from the supervisor for 36\d\ds: it may be stalled", desc.msg)
    finally:
        os.kill(supervisor, signal.SIGCONT)
    wait_for(lambda: "heartbeat" not in sched.describe(app_id).msg, what="a fresh heartbeat")  # type: ignore[union-attr]
    assert alive(replica_pid(sched, app_id, "r"))


def test_cancel_with_a_dead_supervisor_stops_the_replicas_itself(sched: LocalScheduler, tmp_path) -> None:
    app_id = sched.submit(specs.AppDef("orphan", roles=[sh_role("r", "echo up; sleep 100", str(tmp_path))]),
                          {"kill_grace_s": 1})
    wait_for(lambda: lines(sched, app_id, "r") == ["up"], what="the replica to start")
    wait_running(sched, app_id)
    supervisor = state_json(sched, app_id)["supervisor"]["pid"]  # type: ignore[index]
    replica = replica_pid(sched, app_id, "r")
    os.killpg(os.getpgid(supervisor), signal.SIGKILL)  # with its guard, which would otherwise stop the app
    # dead, and its lock free: a guard the kernel has not finished killing yet still holds it, so a cancel would
    # take the supervisor for alive and only ask it (ci54, on a busy machine)
    app_dir = sched.app_dir(app_id)
    assert app_dir is not None
    wait_for(lambda: not alive(supervisor) and not supervisor_lock_held(app_dir), timeout=30,
             what="the supervisor to die and its lock to be free")

    sched.cancel(app_id)
    desc = sched.describe(app_id)
    assert desc is not None and desc.state == AppState.CANCELLED
    assert "supervisor was not running" in desc.msg
    assert not alive(replica)


def test_concurrent_submits_get_their_own_apps(state_dir: str, tmp_path) -> None:
    app_ids: List[str] = []
    errors: List[BaseException] = []

    def submit(n: int) -> None:
        try:
            sched = LocalScheduler("test", state_dir=state_dir)
            role = sh_role("r", f"echo app {n}", str(tmp_path))
            app_ids.append(sched.submit(specs.AppDef("same", roles=[role]), {}))
        except BaseException as e:  # surfaced below; a thread cannot fail the test itself
            errors.append(e)

    threads = [threading.Thread(target=submit, args=(n,)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert len(set(app_ids)) == 2

    sched = LocalScheduler("test", state_dir=state_dir)
    outputs = set()
    for app_id in app_ids:
        assert wait_terminal(sched, app_id).state == AppState.SUCCEEDED
        outputs.update(lines(sched, app_id, "r"))
    assert outputs == {"app 0", "app 1"}
    assert sorted(app.app_id for app in sched.list()) == sorted(app_ids)


def test_state_dir_option_puts_the_app_elsewhere_and_links_it(sched: LocalScheduler, tmp_path) -> None:
    elsewhere = tmp_path / "elsewhere"
    app_id = sched.submit(specs.AppDef("moved", roles=[sh_role("r", "echo moved", str(tmp_path))]),
                          {"state_dir": str(elsewhere)})
    assert (elsewhere / "apps" / app_id / "spec.json").is_file()
    assert os.path.islink(os.path.join(sched.state_dir, "apps", app_id))
    assert wait_terminal(sched, app_id).state == AppState.SUCCEEDED
    assert lines(sched, app_id, "r") == ["moved"]
    assert [app.app_id for app in sched.list()] == [app_id]
    assert [app.app_id for app in LocalScheduler("x", state_dir=str(elsewhere)).list()] == [app_id]


def test_default_state_dir_comes_from_the_environment(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TORCHSPEC_HOME", str(tmp_path / "home"))
    assert get_scheduler_factory("local")("s").state_dir == str(tmp_path / "home")  # type: ignore[attr-defined]
    monkeypatch.delenv("TORCHSPEC_HOME")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert LocalScheduler("s").state_dir == str(tmp_path / "xdg" / "torchspec")
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert LocalScheduler("s").state_dir == str(tmp_path / ".local" / "state" / "torchspec")


def test_files_on_disk_are_the_documented_layout(sched: LocalScheduler, tmp_path, monkeypatch) -> None:
    role = sh_role("r", "echo hi", ".", env={"X": "${replica_id}"})
    monkeypatch.chdir(tmp_path)
    app_id = sched.submit(specs.AppDef("disk", roles=[role]), {})
    wait_terminal(sched, app_id)
    app_dir = sched.app_dir(app_id)
    assert app_dir is not None
    names = sorted(os.listdir(app_dir))
    assert names == ["r", "request.json", "spec.json", "state.json", "state.lock", "supervisor.lock", "supervisor.log"]
    assert sorted(os.listdir(os.path.join(app_dir, "r", "0"))) == ["output.log"]
    with open(os.path.join(app_dir, "spec.json")) as src:
        spec = json.load(src)
    assert spec["roles"][0]["image"] == "." and spec["roles"][0]["env"] == {"X": "${replica_id}"}
    with open(os.path.join(app_dir, "request.json")) as src:
        request = json.load(src)
    replica = request["roles"][0]["replicas"][0]
    assert replica["cwd"] == str(tmp_path) and replica["env"]["X"] == "0"
    state = state_json(sched, app_id)
    assert state["state"] == "SUCCEEDED" and state["supervisor"]["ready"] is True  # type: ignore[index]


def test_a_program_that_cannot_start_fails_its_replica(sched: LocalScheduler, tmp_path) -> None:
    info = sched.submit_dryrun(specs.AppDef("broken", roles=[sh_role("r", "true", str(tmp_path))]), {})
    info.request.roles[0].replicas[0].args = [str(tmp_path / "no-such-program")]
    app_id = sched.schedule(info)
    desc = wait_terminal(sched, app_id)
    assert desc.state == AppState.FAILED
    assert "exit code 127" in desc.msg
    [message] = lines(sched, app_id, "r", streams=Stream.STDERR)
    assert message.startswith("torchspec: cannot start") and "no-such-program" in message


def test_a_replica_error_file_becomes_the_structured_error(sched: LocalScheduler, tmp_path) -> None:
    script = """echo '{"message": {"message": "boom", "errorCode": 3}}' > $TORCHELASTIC_ERROR_FILE; exit 3"""
    app_id = sched.submit(specs.AppDef("err", roles=[sh_role("r", script, str(tmp_path))]), {})
    desc = wait_terminal(sched, app_id)
    assert desc.state == AppState.FAILED
    assert json.loads(desc.structured_error_msg) == {"message": {"message": "boom", "errorCode": 3}}
    assert desc.roles_statuses[0].replicas[0].structured_error_msg == desc.structured_error_msg


def test_unknown_apps(sched: LocalScheduler) -> None:
    for app_id in ("nope-123456", "../etc", ".hidden", ""):
        assert sched.describe(app_id) is None
        assert not sched.exists(app_id)
        sched.cancel(app_id)
    with pytest.raises(ValueError, match="unknown app"):
        sched.log_iter("nope-123456", "r")
    assert sched.list() == []


def test_logs_of_an_app_from_the_three_file_format_still_read(sched: LocalScheduler, tmp_path) -> None:
    """Apps submitted by torchspec before output.log kept stdout.log, stderr.log and combined.log."""
    from torchspec.schedulers.local.translate import ReplicaRequest

    app_id = sched.submit(specs.AppDef("old", roles=[sh_role("r", "true", str(tmp_path))]), {})
    wait_terminal(sched, app_id)
    replica_dir = os.path.join(sched.app_dir(app_id) or "", "r", "0")
    os.remove(os.path.join(replica_dir, "output.log"))
    stamp = "2026-11-22T21:14:12.366000+00:00"
    for name, text in (("stdout.log", "out\n"), ("stderr.log", "err\n"), ("combined.log", "out\nerr\n")):
        with open(os.path.join(replica_dir, name), "w") as out:
            out.writelines(f"{stamp}\t{line}\n" for line in text.splitlines())
    assert lines(sched, app_id, "r") == ["out", "err"]
    assert lines(sched, app_id, "r", streams=Stream.STDERR) == ["err"]
    old = ReplicaRequest.from_json({"role": "r", "replica_id": 0, "args": ["true"], "env": {}, "cwd": "/",
                                    "path_entry": "/", "prepend_path": False, "stdout": "/a/r/0/stdout.log",
                                    "stderr": "/a/r/0/stderr.log", "combined": "/a/r/0/combined.log",
                                    "error_file": "/a/r/0/error.json"})
    assert old.output == "/a/r/0/output.log" and old.legacy_log(Stream.COMBINED) == "/a/r/0/combined.log"
