"""Provenance: what a submit records (on this machine, and as a label the engine keeps), and what shows it."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
from typing import Any, Dict

import pytest

from torchspec.runner import get_runner
from torchspec.runner import provenance
from torchspec.specs import AppDef, Role

SECRET = "tok-5f0e8a1c"
#: specs.canonical.content_hash of SPEC loaded with lr=0.5 and MY_TOKEN=SECRET (its digest is in the hash)
SPEC_HASH = "v1-dc86d944705c3f49cfb5997cdbe2146ae7602402"
SPEC = """\
params:
  lr: {type: number, default: 0.1}
name: job
roles:
  - name: main
    image: .
    entrypoint: echo
    args: ["{{ lr }}"]
    env: {TOKEN: "{{ env('MY_TOKEN') }}"}
"""


def git(repo: pathlib.Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "Ada", "GIT_AUTHOR_EMAIL": "a@example.com", "GIT_COMMITTER_NAME": "Ada",
           "GIT_COMMITTER_EMAIL": "a@example.com", "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    root = tmp_path / "repo"
    (root / "jobs").mkdir(parents=True)
    (root / "jobs" / "job.yaml").write_text(SPEC)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "a job")
    monkeypatch.setenv("TORCHSPEC_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("MY_TOKEN", SECRET)
    monkeypatch.chdir(root)
    return root


def cli(*args: str, cwd: pathlib.Path) -> "subprocess.CompletedProcess[str]":
    return subprocess.run([sys.executable, "-m", "torchspec", *args], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, "NO_COLOR": "1"}, timeout=120)


def test_a_submit_records_where_the_app_came_from(repo: pathlib.Path, tmp_path: pathlib.Path) -> None:
    commit = git(repo, "rev-parse", "HEAD").strip()
    with get_runner() as runner:
        handle = runner.run_component("jobs/job.yaml", {"lr": "0.5"}, "local", {"kill_grace_s": 3})
        runner.wait(handle, wait_interval=0.2)
        record = runner.provenance(handle)
    assert record is not None
    assert record["handle"] == handle and record["component"] == "jobs/job.yaml"
    assert record["file"] == str(repo / "jobs" / "job.yaml")
    assert record["git"] == {"commit": commit, "branch": "main", "path": "jobs/job.yaml", "dirty": False}
    assert record["params"] == {"lr": "0.5"} and record["scheduler"] == "local"
    assert record["run_options"]["kill_grace_s"] == 3
    assert record["env_read"] == ["MY_TOKEN"] and record["rerun_of"] is None
    assert record["user"] and record["torchspec_version"] and record["submitted_at"].endswith("+00:00")
    role = record["spec"]["roles"][0]
    assert role["args"] == ["0.5"] and role["env"] == {"TOKEN": "<value from env(MY_TOKEN)>"}
    assert "TORCHSPEC_JOB_ID" not in role["env"]  # recorded before torchspec added its variables
    # the hash diff compares: the spec as loaded, with these params (lr=0.5, TOKEN from env(MY_TOKEN)=SECRET,
    # no scheduler or run options), pinned: a change of the canonical form or the hash shows here, and must be
    # deliberate (the records and labels of apps already submitted carry the old hashes)
    assert record["content_hash"] == SPEC_HASH
    kept = list((tmp_path / "state").rglob("*"))
    assert not any(SECRET in p.read_text(errors="replace") for p in kept if p.is_file() and "provenance" in p.parts)


def test_a_dirty_tree_is_recorded_by_a_hash_of_the_change_never_its_text(repo: pathlib.Path) -> None:
    (repo / "jobs" / "job.yaml").write_text(SPEC.replace("echo", "printf"))
    (repo / "notes.txt").write_text("an untracked file with words in it\n")
    with get_runner() as runner:
        handle = runner.run_component("jobs/job.yaml", {}, "local")
        state = runner.provenance(handle)["git"]  # type: ignore[index]
        runner.wait(handle, wait_interval=0.2)
    assert state["dirty"] is True and len(state["diff_sha256"]) == 64
    text = json.dumps(provenance.load(handle))
    assert "printf" not in json.dumps(state) and "untracked file with words" not in text


def test_the_label_travels_with_the_app_and_is_not_shown_as_a_user_label(repo: pathlib.Path) -> None:
    """Another machine sees the summary (here: the local record removed); list and describe leave the label
    out, describe --all shows it; a dry run shows the same label twice (no time in it)."""
    submitted = cli("submit", "jobs/job.yaml", cwd=repo)
    assert submitted.returncode == 0, submitted.stderr
    handle = submitted.stdout.strip()
    assert cli("wait", handle, cwd=repo).returncode == 0
    listed = json.loads(cli("list", "-o", "json", cwd=repo).stdout)
    assert [app["labels"] for app in listed if app["app_handle"] == handle] == [{}]
    with get_runner() as runner:
        (ours,) = [app for app in runner.list("local") if app.app_handle == handle]
    assert ours.provenance is not None and ours.provenance["git"]["path"] == "jobs/job.yaml"
    described = cli("describe", handle, cwd=repo).stdout
    assert described.startswith("# from jobs/job.yaml at ") and provenance.LABEL not in described
    everything = cli("describe", handle, "--all", cwd=repo)
    assert provenance.LABEL in everything.stdout, everything.stderr
    full = json.loads(cli("status", handle, "-o", "json", cwd=repo).stdout)["provenance"]
    scheduler, _, app_id = handle.partition("://")[0], None, handle.rsplit("/", 1)[1]
    (pathlib.Path(os.environ["TORCHSPEC_HOME"]) / "provenance" / scheduler / f"{app_id}.json").unlink()
    summary = json.loads(cli("status", handle, "-o", "json", cwd=repo).stdout)["provenance"]
    # the record's own keys, fewer of them
    assert summary == {key: full[key] for key in ("content_hash", "component", "file", "git", "scheduler", "user",
                                                  "torchspec_version")} | {"images": {}}
    # slurm keeps labels in the job's comment, encoded: the dry run shows them, the same both times
    first, second = (cli("dryrun", "-s", "slurm", "jobs/job.yaml", cwd=repo) for _ in range(2))
    assert first.returncode == 0 and " labels:" in first.stdout and first.stdout == second.stdout, first.stderr


def test_what_is_recorded_without_a_file(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A built-in component is torchspec's own file, not the user's; an AppDef from Python has none."""
    monkeypatch.setenv("TORCHSPEC_HOME", str(tmp_path / "state"))
    monkeypatch.chdir(tmp_path)
    app = AppDef("py", [Role("r", image=".", entrypoint="true")])
    with get_runner() as runner:
        built_in = runner.run_component("utils.echo", {"msg": "hi"}, "local")
        made = runner.run(app, "local")
        records: Dict[str, Any] = {h: runner.provenance(h) for h in (built_in, made)}
        for handle in records:
            runner.wait(handle, wait_interval=0.2)
    assert records[built_in]["component"] == "utils.echo" and records[built_in]["file"] is None
    assert records[built_in]["git"] is None and records[built_in]["params"] == {"msg": "hi"}
    assert records[made]["component"] is None and records[made]["spec"]["name"] == "py"
    assert records[made]["env_read"] == []  # names only of variables the spec holds, whatever else was read
    assert provenance.summary(records[made]).startswith("from an AppDef made in Python\n")


def test_a_record_that_cannot_be_kept_does_not_stop_the_submit(tmp_path: pathlib.Path,
                                                               monkeypatch: pytest.MonkeyPatch,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("TORCHSPEC_HOME", str(tmp_path / "state"))
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "provenance").write_text("a file where the folder goes")
    with get_runner() as runner:
        handle = runner.run(AppDef("x", [Role("r", image=str(tmp_path), entrypoint="true")]), "local")
        assert str(runner.wait(handle, wait_interval=0.2).state) == "SUCCEEDED"  # type: ignore[union-attr]
    assert "could not be kept on this machine" in caplog.text
