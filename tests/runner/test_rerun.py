"""``torchspec rerun``: the recorded spec again, exactly, whatever today's file says."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from torchspec.errors import UsageError
from torchspec.runner import get_runner, provenance
from torchspec.runner.rerun import rerun

SPEC = """\
name: job
roles:
  - name: main
    image: .
    entrypoint: sh
    args: ["-c", "echo version v1 token=$TOKEN"]
    env: {TOKEN: "{{ env('MY_TOKEN') }}"}
"""
#: specs.canonical.content_hash of SPEC with MY_TOKEN=first-token (its digest is in the hash), pinned: the
#: record of the rerun must carry the hash of what ran first, not merely one equal to it by the same code
SPEC_HASH = "v1-dea976112457391457f4a9370bcb7c64f711396a"


@pytest.fixture
def folder(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    (tmp_path / "job.yaml").write_text(SPEC)
    monkeypatch.setenv("TORCHSPEC_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("MY_TOKEN", "first-token")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def logs(runner, handle: str) -> str:  # type: ignore[no-untyped-def]
    assert str(runner.wait(handle, wait_interval=0.2).state) == "SUCCEEDED"
    return "".join(runner.log_lines(handle, "main", 0))


def test_an_unchanged_file_reruns_as_it_ran(folder: pathlib.Path) -> None:
    with get_runner() as runner:
        first = runner.run_component("job.yaml", {}, "local", {"kill_grace_s": 7})
        assert "version v1 token=first-token" in logs(runner, first)
        done = rerun(runner, first)
        assert (done.file_state, done.changed, done.previous) == ("unchanged", [], first)
        assert "version v1 token=first-token" in logs(runner, done.handle)
        again = provenance.load(done.handle)
    assert again is not None and again["rerun_of"] == first and again["run_options"]["kill_grace_s"] == 7
    assert provenance.load(first)["content_hash"] == again["content_hash"] == SPEC_HASH  # type: ignore[index]


def test_a_changed_file_is_named_and_the_recorded_spec_runs_unless_from_file(folder: pathlib.Path,
                                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    with get_runner() as runner:
        first = runner.run_component("job.yaml", {}, "local")
        logs(runner, first)
        (folder / "job.yaml").write_text(SPEC.replace("v1", "v2"))
        monkeypatch.setenv("MY_TOKEN", "second-token")  # env() values are read again: never recorded
        done = rerun(runner, first)
        assert done.file_state == "changed" and done.changed == ["roles.main.args"]
        assert "version v1 token=second-token" in logs(runner, done.handle)
        today = rerun(runner, first, from_file=True)
        assert today.from_file and "version v2 token=second-token" in logs(runner, today.handle)
        (folder / "job.yaml").unlink()
        gone = rerun(runner, first, cfg={"kill_grace_s": 9})
        assert gone.file_state == "missing" and "version v1" in logs(runner, gone.handle)
        assert provenance.load(gone.handle)["run_options"]["kill_grace_s"] == 9  # type: ignore[index]
        with pytest.raises(UsageError, match="--from-file"):
            rerun(runner, first, from_file=True)


def test_a_secret_that_is_not_set_is_named_and_nothing_is_submitted(folder: pathlib.Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    with get_runner() as runner:
        first = runner.run_component("job.yaml", {}, "local")
        logs(runner, first)
        monkeypatch.delenv("MY_TOKEN")
        before = len(runner.list("local"))
        with pytest.raises(UsageError, match="read MY_TOKEN with env"):
            rerun(runner, first)
        assert len(runner.list("local")) == before


def test_the_cli(folder: pathlib.Path) -> None:
    def cli(*args: str) -> "subprocess.CompletedProcess[str]":
        return subprocess.run([sys.executable, "-m", "torchspec", *args], capture_output=True, text=True,
                              cwd=folder, env={**os.environ, "NO_COLOR": "1"}, timeout=120)

    first = cli("submit", "--wait", "job.yaml")
    assert first.returncode == 0, first.stderr
    handle = first.stdout.strip()
    (folder / "job.yaml").write_text(SPEC.replace("v1", "v2"))
    again = cli("rerun", handle)
    assert again.returncode == 0 and again.stdout.strip().startswith("local://"), again.stderr
    assert again.stderr == (f"job.yaml has changed since {handle} was submitted: roles.main.args; submitted the"
                            f" spec {handle} ran (--from-file runs today's)\n")
    assert cli("wait", again.stdout.strip()).returncode == 0
    assert "version v1" in cli("logs", again.stdout.strip()).stdout
    # an app this machine did not submit (its record gone): exit 2, saying why
    scheduler, app_id = handle.split("://")[0], handle.rsplit("/", 1)[1]
    (pathlib.Path(os.environ["TORCHSPEC_HOME"]) / "provenance" / scheduler / f"{app_id}.json").unlink()
    orphan = cli("rerun", handle)
    assert orphan.returncode == 2 and "no record of how" in orphan.stderr and "Traceback" not in orphan.stderr
    assert cli("rerun", "local://torchspec/nothing-000000").returncode == 2
