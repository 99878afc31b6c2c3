"""Trackers from the config (ours and .torchxconfig's) reach every role under both names; the ``tracker``
commands read what a real local job recorded."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

import tracker_support

from torchspec.config import Config, load_config
from torchspec.errors import UsageError
from torchspec.runner import Runner
from torchspec.runner.injected import without_injected
from torchspec.runner.trackers import open_tracker
from torchspec.specs import AppDef, Resource, Role

pytestmark = pytest.mark.usefixtures("clean_env")
ROOT = pathlib.Path(__file__).resolve().parents[2]


def app() -> AppDef:
    return AppDef("hello", roles=[Role(name="r", image="img", entrypoint="echo", resource=Resource(1, 0, 64))])


def config(tmp_path: pathlib.Path, text: str, name: str = ".torchspec.toml") -> Config:
    (tmp_path / name).write_text(text)
    return load_config(str(tmp_path))


def test_configured_trackers_reach_every_role_under_both_names(tmp_path: pathlib.Path, factory) -> None:  # type: ignore[no-untyped-def]
    cfg = config(tmp_path, '[tracker.file]\nconfig = "/shared/runs"\n[tracker.other]\n')
    with Runner("s", {"memory": factory}, config=cfg) as runner:
        env = runner.dryrun(app(), "memory").request.app.roles[0].env
    assert env["TORCHSPEC_TRACKERS"] == env["TORCHX_TRACKERS"] == "file,other"
    assert env["TORCHSPEC_TRACKER_FILE_CONFIG"] == env["TORCHX_TRACKER_FILE_CONFIG"] == "/shared/runs"
    assert "TORCHX_TRACKER_OTHER_CONFIG" not in env
    shown = app()
    shown.roles[0].env.update(env)
    assert without_injected(shown).roles[0].env == {}  # describe shows the app as written


def test_the_callers_torchx_trackers_names_them_instead(tmp_path: pathlib.Path, factory,  # type: ignore[no-untyped-def]
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = config(tmp_path, '[tracker.file]\nconfig = "/shared/runs"\n[tracker.other]\n')
    monkeypatch.setenv("TORCHX_TRACKERS", "file")
    with Runner("s", {"memory": factory}, config=cfg) as runner:
        env = runner.dryrun(app(), "memory").request.app.roles[0].env
    assert env["TORCHX_TRACKERS"] == "file" and env["TORCHX_TRACKER_FILE_CONFIG"] == "/shared/runs"


def test_a_torchxconfig_names_trackers_and_their_config(tmp_path: pathlib.Path) -> None:
    cfg = config(tmp_path, "[torchx:tracker]\nfile=\n\n[tracker:file]\nconfig=/shared/runs\n", ".torchxconfig")
    assert open_tracker(cfg)[0] == "file"
    from torchspec.config import trackers

    assert trackers(cfg) == {"file": "/shared/runs"}


def test_open_tracker_says_what_is_wrong(tmp_path: pathlib.Path) -> None:
    with pytest.raises(UsageError, match="no tracker is configured"):
        open_tracker(Config())
    cfg = config(tmp_path, '[tracker.file]\nconfig = "/shared/runs"\n')
    with pytest.raises(UsageError) as caught:
        open_tracker(cfg, "fille")
    assert caught.value.hint == "did you mean 'file'?"


JOB = """\
from torchspec.tracker import app_run_from_env
run = app_run_from_env()
run.add_metadata(lr=0.1, epochs=2)
run.add_artifact("model", "/shared/model.pt", {"format": "torchscript"})
print("recorded", run.job_id())
"""


def test_a_local_job_records_and_the_cli_reads_it_back(tmp_path: pathlib.Path) -> None:
    cli, handle = tracker_support.run_local_job(tmp_path, f'[tracker.file]\nconfig = "{tmp_path / "runs"}"\n', JOB)
    assert cli("tracker", "list", "jobs").stdout.split() == [handle]
    assert cli("tracker", "list", "metadata", handle).stdout.splitlines() == ["epochs = 2", "lr = 0.1"]
    artifacts = json.loads(cli("tracker", "list", "artifacts", "-o", "json", handle).stdout)
    assert artifacts == {"model": {"path": "/shared/model.pt", "metadata": {"format": "torchscript"}}}
    assert cli("tracker", "lineage", handle).stdout.splitlines() == [handle]
    unknown = cli("tracker", "list", "jobs", "--tracker", "fille")
    assert unknown.returncode == 2 and "did you mean 'file'" in unknown.stderr, unknown.stderr
    tracked = tracker_support.tracked_section(handle, tmp_path, tmp_path / "home")
    for text in ("<h3>file</h3>", "<td>lr</td><td>0.1</td>", "<td>model</td><td>/shared/model.pt</td>",
                 "format=torchscript"):
        assert text in tracked, tracked
