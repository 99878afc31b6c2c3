"""TSM's session (``torchspec.tsm.session``) on the real local scheduler: run, wait, status, list, describe,
log_lines, stop, attach, and the session's own rules (another session's handle, re-running an attached app)."""

from __future__ import annotations

import pathlib
import sys
from typing import Iterator

import pytest

import torchspec.tsm as tsm
from torchspec.specs import AppState, UnknownAppException

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the local scheduler's processes")


@pytest.fixture
def here(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TORCHSPEC_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    return tmp_path


@pytest.fixture
def session(here: pathlib.Path) -> Iterator[tsm.StandaloneSession]:
    made = tsm.session(name="my_session")
    assert isinstance(made, tsm.StandaloneSession)
    with made:
        yield made


def echo(text: str, name: str = "hello") -> tsm.Application:
    role = tsm.Role(name="greeter").runs("echo", text).on(tsm.Container(image=".")).replicas(2)
    return tsm.Application(name=name).of(role)


def sleeper() -> tsm.Application:
    return tsm.Application(name="sleeper").of(tsm.Role(name="s").runs("sleep", "600").on(tsm.Container(image=".")))


def test_run_wait_status_list_describe_and_logs(session: tsm.StandaloneSession) -> None:
    app = echo("hi there")
    handle = session.run(app, scheduler="local")
    assert handle.startswith("local://my_session/hello-")
    final = session.wait(handle)
    assert final is not None and final.state == AppState.SUCCEEDED
    assert session.status(handle).state == AppState.SUCCEEDED  # type: ignore[union-attr]
    assert session.list() == {handle: app}
    assert session.describe(handle) is app
    assert [line.rstrip("\n") for line in session.log_lines(handle, "greeter", k=1)] == ["hi there"]


def test_the_default_scheduler_and_the_backends(session: tsm.StandaloneSession) -> None:
    assert session.scheduler_backends()[:2] == ["default", "local"]
    opts = session.run_opts()
    assert [name for name, _ in opts["default"]] == [name for name, _ in opts["local"]]
    handle = session.run(echo("x"))  # scheduler="default": the local scheduler here
    assert handle.startswith("local://my_session/")
    assert session.wait(handle).state == AppState.SUCCEEDED  # type: ignore[union-attr]


def test_dryrun_then_schedule_what_it_returned(session: tsm.StandaloneSession) -> None:
    cfg = tsm.RunConfig()
    cfg.set("kill_grace_s", 2)
    info = session.dryrun(echo("a"), "local", cfg)
    assert "echo a" in str(info)
    handle = session.schedule(info)
    assert session.wait(handle).state == AppState.SUCCEEDED  # type: ignore[union-attr]


def test_stop_cancels_this_sessions_app_only(session: tsm.StandaloneSession) -> None:
    handle = session.run(sleeper(), "local")
    other = handle.replace("/my_session/", "/other_session/")
    with pytest.raises(tsm.SessionMismatchException, match="not a handle in the current session: my_session"):
        session.stop(other)
    session.stop(handle)
    assert session.wait(handle).state == AppState.CANCELLED  # type: ignore[union-attr]
    session.stop(handle)  # ended: nothing to do


def test_another_session_attaches_an_app_and_cannot_rerun_it(session: tsm.StandaloneSession) -> None:
    handle = session.run(echo("from the first"), "local")
    session.wait(handle)
    with tsm.session(name="second") as second:  # type: ignore[attr-defined]
        assert second.attach(handle) == handle
        attached = second.list()[handle]
        assert attached.is_attached and [r.name for r in attached.roles] == ["greeter"]
        assert attached.roles[0].num_replicas == 2 and attached.roles[0].args == ["from the first"]
        with pytest.raises(tsm.AppNotReRunnableException):
            second.run(attached, "local")


def test_an_unknown_app(session: tsm.StandaloneSession) -> None:
    handle = "local://my_session/nothing-here"
    assert session.status(handle) is None and session.describe(handle) is None and session.wait(handle) is None
    with pytest.raises(UnknownAppException):
        list(session.log_lines(handle, "greeter"))
    with pytest.raises(UnknownAppException):
        session.attach(handle)
