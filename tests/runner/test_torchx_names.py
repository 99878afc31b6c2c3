"""TorchX's names in the runner (``torchspec.runner.torchx_names``): job-id variables, the parent run id,
scheduler parameters from ``TORCHX_*``, and TorchX's scheduler names ``local_cwd`` and ``local_docker``."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest
from memory_scheduler import Factory

from torchspec.runner import (ENV_TORCHSPEC_JOB_ID, ENV_TORCHSPEC_PARENT_RUN_ID, ENV_TORCHX_JOB_ID,
                              ENV_TORCHX_PARENT_RUN_ID, Runner, get_runner)
from torchspec.runner.injected import without_injected
from torchspec.specs import AppDef, Resource, Role, UnknownSchedulerException

SESSION = "test_session"
ROOT = pathlib.Path(__file__).resolve().parents[2]


pytestmark = pytest.mark.usefixtures("clean_env")


def app(image: str = "img") -> AppDef:
    return AppDef("hello", roles=[Role(name="greeter", image=image, entrypoint="echo", args=["hi"],
                                       resource=Resource(cpu=1, gpu=0, memMB=64))])


def test_every_role_gets_the_job_id_under_both_names(runner: Runner) -> None:
    env = runner.dryrun(app(), "memory").request.app.roles[0].env
    assert env[ENV_TORCHX_JOB_ID] == env[ENV_TORCHSPEC_JOB_ID] == "memory://test_session/${app_id}"
    assert ENV_TORCHX_PARENT_RUN_ID not in env


def test_torchx_parent_run_id_from_the_caller_is_honoured_and_ours_wins(runner: Runner,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_TORCHX_PARENT_RUN_ID, "torchx-parent")
    env = runner.dryrun(app(), "memory", parent_run_id="argument").request.app.roles[0].env
    assert env[ENV_TORCHSPEC_PARENT_RUN_ID] == env[ENV_TORCHX_PARENT_RUN_ID] == "torchx-parent"
    monkeypatch.setenv(ENV_TORCHSPEC_PARENT_RUN_ID, "ours")
    env = runner.dryrun(app(), "memory").request.app.roles[0].env
    assert env[ENV_TORCHSPEC_PARENT_RUN_ID] == env[ENV_TORCHX_PARENT_RUN_ID] == "ours"


def test_describe_hides_both_names() -> None:
    shown = app()
    shown.roles[0].env.update({ENV_TORCHX_JOB_ID: "h", ENV_TORCHSPEC_JOB_ID: "h", ENV_TORCHX_PARENT_RUN_ID: "p",
                               "MINE": "1"})
    assert without_injected(shown).roles[0].env == {"MINE": "1"}


def test_scheduler_params_come_from_torchx_variables_too(monkeypatch: pytest.MonkeyPatch, factory: Factory) -> None:
    monkeypatch.setenv("TORCHX_REGION", "eu")
    monkeypatch.setenv("TORCHX_ZONE", "b")
    monkeypatch.setenv("TORCHSPEC_ZONE", "a")  # ours wins
    for other in ("TORCHX_JOB_ID", "TORCHX_PARENT_RUN_ID", "TORCHX_TRACKERS", "TORCHX_TRACKER_MLFLOW_CONFIG",
                  "TORCHX_HOME"):
        monkeypatch.setenv(other, "x")  # TorchX's own variables, not scheduler parameters
    assert Runner._get_scheduler_params_from_env() == {"region": "eu", "zone": "a"}


def test_local_cwd_and_local_docker_are_aliases(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    runner = get_runner()
    info = runner.dryrun(app(), "local_cwd")
    assert info._scheduler == "local" and info.cfg["use_cwd"] is True
    assert runner.dryrun(app("."), "local_cwd", cfg={"use_cwd": False}).cfg["use_cwd"] is False  # given wins
    assert runner.run_options("local_cwd", "")["use_cwd"] is True
    assert runner.check_scheduler("local_docker") == "local_docker"
    assert runner.dryrun(app(), "local_docker")._scheduler == "docker"
    with pytest.raises(UnknownSchedulerException):
        runner.check_scheduler("local_dockr")


def test_a_scheduler_registered_as_local_cwd_is_used_as_it_is(factory: Factory) -> None:
    with Runner(SESSION, {"local_cwd": factory}) as runner:
        assert runner.dryrun(app(), "local_cwd")._scheduler == "local_cwd"


def test_the_cli_runs_local_cwd_in_the_working_folder(tmp_path: pathlib.Path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text("name: here\nroles:\n  - name: r\n    image: /\n    entrypoint: pwd\n")
    env = {**os.environ, "TORCHSPEC_HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "torchspec", "submit", "--log", "-s", "local_cwd", str(spec)],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("local://"), done.stdout
    assert f"r/0 {tmp_path}\n" in done.stderr, done.stderr  # not the image's folder, /
