"""The Scheduler base class and helpers, through a minimal in-memory scheduler."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

import pytest

from torchspec import specs
from torchspec.schedulers.api import (
    DescribeAppResponse,
    ListAppResponse,
    Scheduler,
    Stream,
    decode_labels,
    encode_labels,
    filter_regex,
    labels_json,
    labels_of,
    parse_labels_json,
    split_lines,
)


class MemoryScheduler(Scheduler[Dict[str, Any]]):
    """Keeps apps in a dict; records the calls the base class makes."""

    def __init__(self, session_name: str = "test") -> None:
        super().__init__("memory", session_name)
        self.apps: Dict[str, specs.AppDef] = {}
        self.cancelled: List[str] = []

    def _run_opts(self) -> specs.runopts:
        opts = specs.runopts()
        opts.add("foo", type_=str, default="bar", help="a test option")
        return opts

    def _submit_dryrun(self, app: specs.AppDef, cfg: Mapping[str, Any]) -> specs.AppDryRunInfo[Dict[str, Any]]:
        return specs.AppDryRunInfo({"name": app.name, "cfg": dict(cfg), "pre_proc": []}, repr)

    def schedule(self, dryrun_info: specs.AppDryRunInfo[Any]) -> str:
        app = dryrun_info.app
        assert app is not None
        self.apps[app.name] = app
        return app.name

    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        if app_id not in self.apps:
            return None
        return DescribeAppResponse(app_id=app_id, state=specs.AppState.RUNNING, roles=self.apps[app_id].roles)

    def list(self) -> List[ListAppResponse]:
        return [ListAppResponse(app_id=name, state=specs.AppState.RUNNING) for name in self.apps]

    def _cancel_existing(self, app_id: str) -> None:
        self.cancelled.append(app_id)


class TaggingRole(specs.Role):
    def pre_proc(self, scheduler: str, dryrun_info: specs.AppDryRunInfo[Any]) -> specs.AppDryRunInfo[Any]:
        dryrun_info.request["pre_proc"].append((scheduler, self.name))
        return dryrun_info


def app() -> specs.AppDef:
    return specs.AppDef(
        "app",
        roles=[
            TaggingRole("a", image="img", entrypoint="x", resource=specs.Resource(cpu=1, gpu=0, memMB=1)),
            TaggingRole("b", image="img", entrypoint="x", resource=specs.Resource(cpu=1, gpu=0, memMB=1)),
        ],
    )


def test_submit_is_dryrun_then_schedule() -> None:
    sched = MemoryScheduler()
    assert sched.submit(app(), {}) == "app"
    assert sched.exists("app") and not sched.exists("other")
    assert [r.app_id for r in sched.list()] == ["app"]


def test_submit_dryrun_resolves_cfg_runs_pre_proc_and_attaches_app() -> None:
    sched = MemoryScheduler()
    the_app = app()
    info = sched.submit_dryrun(the_app, {})
    assert info.request["cfg"] == {"foo": "bar"}
    assert info.request["pre_proc"] == [("memory", "a"), ("memory", "b")]
    assert info.app is the_app and dict(info.cfg) == {"foo": "bar"}
    with pytest.raises(specs.InvalidRunConfigException):
        sched.submit_dryrun(the_app, {"foo": 1})


def test_submit_refuses_a_workspace_it_cannot_build() -> None:
    with pytest.raises(ValueError, match="does not support workspaces"):
        MemoryScheduler().submit(app(), {}, workspace="/src")


def test_cancel_only_existing_apps() -> None:
    sched = MemoryScheduler()
    sched.cancel("app")
    assert sched.cancelled == []
    sched.submit(app(), {})
    sched.cancel("app")
    assert sched.cancelled == ["app"]


def test_defaults_of_optional_methods() -> None:
    sched = MemoryScheduler()
    with pytest.raises(NotImplementedError, match="MemoryScheduler does not support application log iteration"):
        sched.log_iter("app", "a")
    sched.close()
    sched.close()
    sched._validate(app(), "memory")
    no_resource = specs.AppDef("x", roles=[specs.Role("ok", image="img", entrypoint="x", resource=specs.Resource(1, 0, 64)),
                                           specs.Role("r", image="img", entrypoint="x")])
    with pytest.raises(ValueError) as refused:  # a ValueError, as TorchX's
        sched._validate(no_resource, "memory")
    # one sentence naming the role (not its image) and what is missing; the hint says how to give one
    assert str(refused.value) == ("role 'r' has no resource, and the memory scheduler sizes what it allocates"
                                  " from each role's resource")
    assert "resource:" in refused.value.hint and refused.value.path == ("roles", 1, "resource")


def test_response_defaults_match_torchx() -> None:
    desc = DescribeAppResponse()
    assert (desc.app_id, desc.state, desc.num_restarts, desc.msg, desc.structured_error_msg, desc.ui_url) == (
        "<NOT_SET>", specs.AppState.UNSUBMITTED, -1, specs.NONE, specs.NONE, None,
    )
    assert desc.roles == [] and desc.roles_statuses == [] and desc.metadata == {}
    assert ListAppResponse("a", specs.AppState.RUNNING).app_handle == "<NOT_SET>"


def test_stream_values() -> None:
    assert [s.value for s in Stream] == ["stdout", "stderr", "combined"]
    assert Stream("stderr") is Stream.STDERR and Stream.COMBINED == "combined"


def test_filter_regex_searches_anywhere() -> None:
    assert list(filter_regex("b+", ["abc", "xyz", "bb"])) == ["abc", "bb"]
    assert list(filter_regex("^x", ["abc", "xyz"])) == ["xyz"]


def test_split_lines_keeps_newlines() -> None:
    assert split_lines("a\nb\n\nc") == ["a\n", "b\n", "\n", "c"]
    assert split_lines("") == []
    assert split_lines("\n") == ["\n"]


def test_labels_are_the_apps_metadata_and_survive_free_text() -> None:
    labels = labels_of(specs.AppDef("a", metadata={"torchspec.dev/apply-id": "jobs/a b=c.yaml", "n": 1}))  # type: ignore
    assert labels == {"torchspec.dev/apply-id": "jobs/a b=c.yaml", "n": "1"}
    word = encode_labels(labels)
    assert word and all(c.isalnum() or c in "-_" for c in word) and decode_labels(word) == labels
    assert encode_labels({}) == "" and decode_labels("") == {} and decode_labels("not*base64") == {}
    assert parse_labels_json(labels_json(labels)) == labels
    assert parse_labels_json("[1]") == {} and parse_labels_json(None) == {} and parse_labels_json("{") == {}
    assert not MemoryScheduler().keeps_labels  # a backend says so when it keeps them


def test_app_ids_are_the_name_and_six_random_characters() -> None:
    import re

    from torchspec.schedulers.replicas import make_app_id

    ids = [make_app_id("My job!") for _ in range(300)]
    assert all(re.fullmatch(r"My-job-[a-z0-9]{6}", app_id) for app_id in ids)
    assert len(set(ids)) == len(ids)
    assert set("".join(app_id[-6:] for app_id in ids)) == set("abcdefghijklmnopqrstuvwxyz0123456789")
    assert make_app_id("x", suffix="abc123") == "x-abc123"
