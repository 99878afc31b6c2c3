"""Built-in components through ``get_runner()`` on the real ``local`` scheduler, end to end.

Each test gets its own ``TORCHSPEC_HOME`` (where the local scheduler keeps
apps and logs), an empty ``XDG_CONFIG_HOME`` and a tmp working folder, so
nothing on the machine is read or written.
"""

from __future__ import annotations

import os
import pathlib
import sys
import time
from typing import Iterator

import pytest

from torchspec.runner import Runner, get_runner
from torchspec.specs import AppState, AppStatus

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="the local scheduler needs POSIX process groups")

TIMEOUT_S = 60


@pytest.fixture
def runner(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Runner]:
    for key in list(os.environ):
        if key.upper().startswith("TORCHSPEC_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("TORCHSPEC_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.chdir(tmp_path)
    with get_runner() as r:
        yield r


def finish(runner: Runner, handle: str) -> AppStatus:
    """``Runner.wait`` with a deadline: poll until terminal, then let wait() return the final status."""
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        status = runner.status(handle)
        assert status is not None, handle
        if status.is_terminal():
            break
        time.sleep(0.1)
    else:
        runner.cancel(handle)
        pytest.fail(f"{handle} did not finish in {TIMEOUT_S}s")
    final = runner.wait(handle, wait_interval=0.1)
    assert final is not None
    return final


def test_echo_runs_and_logs(runner: Runner) -> None:
    assert "local" in runner.scheduler_backends()
    handle = runner.run_component("utils.echo", {"msg": "hello from ${replica_id}"}, "local")
    assert handle.startswith("local://torchspec/")
    status = finish(runner, handle)
    assert status.state == AppState.SUCCEEDED, status
    assert list(runner.log_lines(handle, "echo", k=0)) == ["hello from 0\n"]


def test_the_job_sees_its_own_handle(runner: Runner) -> None:
    handle = runner.run_component("utils.sh", ["script=echo $TORCHSPEC_JOB_ID"], None)  # the default: local
    assert finish(runner, handle).state == AppState.SUCCEEDED
    assert list(runner.log_lines(handle, "sh")) == [f"{handle}\n"]


def test_a_bare_app_id_is_found_in_the_state_folder_or_names_every_handle_it_may_mean(runner: Runner) -> None:
    """A fresh runner (the CLI's, in a later process) finds the id in local's state folder; where two
    schedulers know it, it guesses neither."""
    from torchspec.schedulers.local import create_scheduler
    from torchspec.specs import MalformedAppHandleException, parse_app_handle

    handle = runner.run_component("utils.echo", {"msg": "hi"}, "local")
    finish(runner, handle)
    app_id = parse_app_handle(handle).app_id
    with get_runner() as fresh:
        assert fresh.resolve_handle(app_id) == handle
    with Runner("torchspec", {"local": create_scheduler, "again": create_scheduler}) as both:
        with pytest.raises(MalformedAppHandleException) as raised:
            both.resolve_handle(app_id)
    assert raised.value.hint == f"give the whole handle of one: {handle}, again://torchspec/{app_id}"
