"""The example scheduler, end to end: from Python (the runner) and from the CLI, each test in a state folder
of its own.  Run them with ``pytest`` after ``pip install -e .`` (the entry point must be installed)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator, List

import pytest

from torchspec.runner import get_runner
from torchspec.schedulers.app_store import AppStore
from torchspec.specs import AppDef, AppState, Role
from torchspec_example.scheduler import group_alive, pid_alive
from torchspec_example.states import BACKEND

SPEC = """\
name: greet
metadata: {team: ml}
roles:
  - name: greeter
    image: .
    entrypoint: sh
    args: ["-c", "echo hello from $TORCHSPEC_REPLICA_ID of ${app_id}; echo oops >&2"]
    num_replicas: 2
"""


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A state folder (and working folder) of this test's own, for the runner and the CLI alike."""
    monkeypatch.setenv("TORCHSPEC_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "greet.yaml").write_text(SPEC)
    yield tmp_path


def cli(*args: str) -> "subprocess.CompletedProcess[str]":
    return subprocess.run([sys.executable, "-m", "torchspec", *args], capture_output=True, text=True, timeout=120)


def app(name: str, command: str, replicas: int = 1) -> AppDef:
    return AppDef(name, roles=[Role(name="main", image=".", entrypoint="sh", args=["-c", command],
                                    num_replicas=replicas)])


def recorded_pids(app_id: str) -> List[int]:
    record = AppStore(BACKEND).get(app_id) or {}
    return [r["pid"] for r in record.get("replicas", [])]


def recorded_pgids(app_id: str) -> List[int]:
    record = AppStore(BACKEND).get(app_id) or {}
    return [r["pgid"] for r in record.get("replicas", [])]


def test_dryrun_prints_every_replica_and_starts_nothing() -> None:
    r = cli("dryrun", "-s", BACKEND, "-c", "kill_grace_s=1", "greet.yaml")
    assert r.returncode == 0, r.stderr
    assert "greeter/0:" in r.stdout and "greeter/1:" in r.stdout and "TORCHSPEC_REPLICA_ID=1" in r.stdout
    assert AppStore(BACKEND).app_ids() == []
    bad = cli("dryrun", "-s", BACKEND, "-c", "kill_grace_s=-1", "greet.yaml")
    assert bad.returncode == 2 and "kill_grace_s=-1 must be 0 to 3600" in bad.stderr, bad.stderr


def test_an_app_runs_to_success_and_keeps_its_logs() -> None:
    with get_runner() as runner:
        handle = runner.run(app("two", "echo hi from $TORCHSPEC_REPLICA_ID; echo err >&2", 2), BACKEND)
        status = runner.wait(handle, wait_interval=0.1, timeout=60)
        assert status is not None and status.state == AppState.SUCCEEDED
        assert list(runner.log_lines(handle, "main", k=1, streams="stdout")) == ["hi from 1\n"]
        assert list(runner.log_lines(handle, "main", k=0, streams="stderr")) == ["err\n"]
        assert list(runner.log_lines(handle, "main", k=0, regex="^hi")) == ["hi from 0\n"]


def test_a_failing_app_fails_with_its_exit_code() -> None:
    with get_runner() as runner:
        handle = runner.run(app("bad", "exit 3"), BACKEND)
        status = runner.wait(handle, wait_interval=0.1, timeout=60)
        assert status is not None and status.state == AppState.FAILED
        replica = status.roles[0].replicas[0]
        assert getattr(replica, "exit_code") == 3 and "exited with code 3" in status.msg


def test_the_cli_submits_waits_and_shows_logs_list_and_describe() -> None:
    submitted = cli("submit", "-s", BACKEND, "greet.yaml")
    assert submitted.returncode == 0, submitted.stderr
    handle = submitted.stdout.strip().splitlines()[-1]
    assert handle.startswith(f"{BACKEND}://")
    waited = cli("wait", handle)
    assert waited.returncode == 0 and "SUCCEEDED" in cli("status", handle).stdout, waited.stderr
    logs = cli("logs", handle)
    app_id = handle.rpartition("/")[2]
    assert f"greeter/0 hello from 0 of {app_id}" in logs.stdout and "greeter/1 oops" in logs.stdout, logs.stderr
    listed = cli("list", "-s", BACKEND, "-l", "team=ml")
    assert handle in listed.stdout, listed.stderr
    described = cli("describe", app_id)
    assert described.returncode == 0 and "greet" in described.stdout, described.stderr


def test_cancel_leaves_no_process() -> None:
    with get_runner() as runner:
        handle = runner.run(app("sleepy", "sleep 60", 2), BACKEND)
        app_id = handle.rpartition("/")[2]
        pids = recorded_pids(app_id)
        assert len(pids) == 2 and all(pid_alive(pid) for pid in pids)
    cancelled = cli("cancel", handle)
    assert cancelled.returncode == 0, cancelled.stderr
    assert not any(pid_alive(pid) for pid in pids)
    assert not any(group_alive(pgid) for pgid in recorded_pgids(app_id))
    assert "CANCELLED" in cli("status", handle).stdout
    deleted = cli("delete", handle)
    assert deleted.returncode == 0 and AppStore(BACKEND).get(app_id) is None, deleted.stderr
    assert cli("status", handle).returncode != 0


def test_the_grace_period_is_the_one_the_app_was_submitted_with() -> None:
    """``cancel`` gets only the app id: the run option reaches it through the store."""
    with get_runner() as runner:
        handle = runner.run(app("stubborn", "trap '' TERM; sleep 60"), BACKEND, cfg={"kill_grace_s": 0})
        app_id = handle.rpartition("/")[2]
        assert (AppStore(BACKEND).get(app_id) or {})["kill_grace_s"] == 0
        started = time.monotonic()
        runner.cancel(handle)  # SIGTERM is ignored: SIGKILL comes after 0 s, not after the default 5
        assert time.monotonic() - started < 4
        assert not any(pid_alive(pid) for pid in recorded_pids(app_id))
        status = runner.status(handle)
        assert status is not None and status.state == AppState.CANCELLED
        assert os.path.isdir(str((AppStore(BACKEND).get(app_id) or {})["folder"]))
