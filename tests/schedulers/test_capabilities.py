"""Capabilities: what a backend declares it can do beyond the minimum, and the one answer when it cannot
("the X scheduler cannot ..." , exit 2) instead of a command silently doing less."""

from __future__ import annotations

import datetime
import os
import pathlib
import subprocess
import sys
from typing import Any, Dict, Iterable, List, Mapping, Optional

import pytest

from torchspec import specs
from torchspec.errors import UnsupportedError
from torchspec.runner import Runner
from torchspec.schedulers.api import Capability, DescribeAppResponse, ListAppResponse, Scheduler, Stream

ROOT = pathlib.Path(__file__).resolve().parents[2]


class Bare(Scheduler[Dict[str, Any]]):
    """A backend that declares nothing: it has only what the interface demands."""

    def __init__(self, session_name: str = "t") -> None:
        super().__init__("bare", session_name)

    def _submit_dryrun(self, app: specs.AppDef, cfg: Mapping[str, Any]) -> specs.AppDryRunInfo[Dict[str, Any]]:
        return specs.AppDryRunInfo({"name": app.name}, repr)

    def schedule(self, dryrun_info: specs.AppDryRunInfo[Any]) -> str:
        return "app-1"

    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        return DescribeAppResponse(app_id=app_id, state=specs.AppState.RUNNING)

    def list(self) -> List[ListAppResponse]:
        return []

    def _cancel_existing(self, app_id: str) -> None:
        pass


class Logs(Bare):
    """Logs now, but nothing more: no following, no time window, no stream apart."""

    def log_iter(self, app_id: str, role_name: str, k: int = 0, regex: Optional[str] = None,
                 since: Optional[datetime.datetime] = None, until: Optional[datetime.datetime] = None,
                 should_tail: bool = False, streams: Optional[Stream] = None) -> Iterable[str]:
        return iter(["line\n"])


def runner_with(scheduler: Scheduler[Any]) -> Runner:
    return Runner("t", {scheduler.backend: lambda session, **kw: scheduler})


NOW = datetime.datetime.now(datetime.timezone.utc)


@pytest.mark.parametrize("request_kwargs, capability, words", [
    ({}, Capability.LOGS, "show logs"),
    ({"should_tail": True}, Capability.FOLLOW_LOGS, "follow logs"),
    ({"since": NOW}, Capability.LOG_WINDOW, "select log lines by time"),
    ({"until": NOW}, Capability.LOG_WINDOW, "select log lines by time"),
    ({"streams": Stream.STDERR}, Capability.LOG_STREAMS, "keep stdout and stderr apart"),
])
def test_a_log_request_the_backend_cannot_honour_is_refused(request_kwargs: Dict[str, Any], capability: Capability,
                                                           words: str) -> None:
    scheduler: Scheduler[Any] = Bare() if capability == Capability.LOGS else Logs()
    with runner_with(scheduler) as runner:
        with pytest.raises(UnsupportedError) as refused:
            runner.check_log_request(f"{scheduler.backend}://t/app-1", **request_kwargs)
        assert str(refused.value).startswith(f"the {scheduler.backend} scheduler cannot {words}")
        assert refused.value.capability == capability.value and refused.value.scheduler == scheduler.backend
        if capability != Capability.LOGS:
            runner.check_log_request("bare://t/app-1")  # the plain request is fine
            runner.check_log_request("bare://t/app-1", streams=Stream.COMBINED)

    class Declared(Logs):
        capabilities = frozenset({capability})

    declared = Declared()
    with runner_with(declared) as runner:
        runner.check_log_request("bare://t/app-1", **request_kwargs)  # declared: allowed


@pytest.mark.parametrize("capability", [Capability.DELETE, Capability.WORKSPACE, Capability.LABELS])
def test_other_capabilities_are_refused_by_name_and_allowed_once_declared(capability: Capability) -> None:
    with runner_with(Bare()) as runner:
        with pytest.raises(UnsupportedError, match=f"the bare scheduler cannot {capability.doing.split(' (')[0]}"):
            runner.require("bare", capability)
        with pytest.raises(UnsupportedError):
            runner.require("bare://t/app-1", capability)  # by an app handle too
        assert not runner.scheduler_supports("bare", capability)

    class Declared(Bare):
        capabilities = frozenset({capability})

    with runner_with(Declared()) as runner:
        runner.require("bare", capability)
        assert runner.scheduler_supports("bare", capability)


def test_depends_on_is_refused_at_its_place_by_a_scheduler_without_role_order() -> None:
    """A plug-in that does not declare ROLE_ORDER would start every role at once: the dry run refuses it."""
    from torchspec.errors import AppRefusedError

    app = specs.AppDef("a", [specs.Role("download", "img", "x"),
                             specs.Role("train", "img", "x", depends_on=[specs.RoleDependency("download")])])
    with pytest.raises(AppRefusedError) as raised:
        Bare().submit_dryrun(app, {})
    assert raised.value.problems == ((("roles", 1, "depends_on"), "role 'train' has depends_on, but the bare"
                                      " scheduler starts every role at once"),)
    assert "`torchspec schedulers` lists them" in (raised.value.hint or "")

    class Declared(Bare):
        capabilities = frozenset({Capability.ROLE_ORDER})

    assert Declared().submit_dryrun(app, {}).request is not None  # declared: the backend's to honour


def test_a_backend_written_before_capabilities_keeps_what_it_implements() -> None:
    """Inferred: LABELS from keeps_labels, WORKSPACE from build_workspace_and_update_role, LOGS and DELETE
    from overriding log_iter and delete; what cannot be inferred (following, a window, streams) is not."""

    class Old(Logs):
        keeps_labels = True

        def build_workspace_and_update_role(self, role: specs.Role, workspace: str, cfg: Any) -> None:
            pass

        def delete(self, app_id: str) -> None:
            pass

    old = Old()
    assert {c for c in Capability if old.supports(c)} == {Capability.LOGS, Capability.LABELS,
                                                          Capability.WORKSPACE, Capability.DELETE}
    assert {c for c in Capability if Bare().supports(c)} == set()


def test_every_builtin_backend_declares_its_capabilities_and_they_hold() -> None:
    """Declared, not inferred; and each declared one is implemented (a delete of its own, a workspace
    builder), each missing one refused. kubernetes merges a pod's streams; ray keeps no app labels."""
    from torchspec.schedulers.docker.scheduler import DockerScheduler
    from torchspec.schedulers.kubernetes.scheduler import KubernetesScheduler
    from torchspec.schedulers.local.scheduler import LocalScheduler
    from torchspec.schedulers.ray.scheduler import RayScheduler
    from torchspec.schedulers.slurm.scheduler import SlurmScheduler

    everything_but = {
        LocalScheduler: {Capability.WORKSPACE},
        DockerScheduler: set(),
        KubernetesScheduler: {Capability.WORKSPACE, Capability.LOG_STREAMS},
        SlurmScheduler: {Capability.WORKSPACE},
        RayScheduler: {Capability.WORKSPACE, Capability.LABELS},
    }
    for cls, lacks in everything_but.items():
        assert cls.capabilities == frozenset(Capability) - lacks, cls.__name__
        assert (cls.delete is not Scheduler.delete) == (Capability.DELETE in cls.capabilities)
        assert hasattr(cls, "build_workspace_and_update_role") == (Capability.WORKSPACE in cls.capabilities)
        assert bool(cls.keeps_labels) == (Capability.LABELS in cls.capabilities), cls.__name__


def cli(*args: str, tmp_path: pathlib.Path) -> "subprocess.CompletedProcess[str]":
    env = {**os.environ, "NO_COLOR": "1", "TORCHSPEC_HOME": str(tmp_path / "home")}
    return subprocess.run([sys.executable, "-m", "torchspec", *args], capture_output=True, text=True, cwd=tmp_path,
                          env=env, timeout=60)


def test_the_cli_says_what_a_builtin_scheduler_cannot_do_before_asking_its_backend(tmp_path: pathlib.Path) -> None:
    """No cluster, no Ray, nothing submitted: each refusal comes first, exit 2, one message and a hint."""
    cases = [
        (["logs", "--streams", "stdout", "kubernetes://torchspec/default:job-abc123"],
         "the kubernetes scheduler cannot keep stdout and stderr apart (logs --streams)"),
        (["list", "-s", "ray", "-l", "team=ml"], "the ray scheduler cannot keep an app's labels"),
        (["list", "-s", "ray", "--show-labels"], "the ray scheduler cannot keep an app's labels"),
        (["submit", "--workspace", ".", "-s", "local", str(ROOT / "examples" / "hello.yaml")],
         "the local scheduler cannot build a workspace into an image (--workspace)"),
        (["dryrun", "--workspace", ".", "-s", "slurm", str(ROOT / "examples" / "hello.yaml")],
         "the slurm scheduler cannot build a workspace into an image (--workspace)"),
    ]
    for args, message in cases:
        done = cli(*args, tmp_path=tmp_path)
        assert done.returncode == 2 and done.stderr.startswith(f"error: {message}"), (args, done.stderr)
        assert "hint:" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "home" / "apps").exists()  # the local submit was refused before it started anything


def test_schedulers_lists_what_each_can_do(tmp_path: pathlib.Path) -> None:
    import json

    done = cli("schedulers", "-o", "json", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    listed = {s["name"]: s["capabilities"] for s in json.loads(done.stdout)}
    assert "log_streams" not in listed["kubernetes"] and "labels" not in listed["ray"]
    assert listed["docker"] == [c.value for c in Capability]
    text = cli("schedulers", tmp_path=tmp_path).stdout
    assert any(line.split()[0] == "kubernetes" and "log_window" in line.split() for line in text.splitlines())
