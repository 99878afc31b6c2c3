"""The replica launcher (``torchspec/schedulers/launcher.py``): the replica's exit code passes through, and
nothing the replica started outlives it, whether it exits, is stopped, or the launcher's parent kills it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from typing import List

import pytest

from process_support import processes_with_env, wait_empty
from torchspec.schedulers import launcher

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="subreapers and /proc are Linux's")

#: Leaves a child in its group and one in a session of its own, each tagged so the test can find it.
LEAKY = "sleep 300 & setsid sleep 300 & echo started; wait"


def tagged(tag: str) -> List[int]:
    """Live processes whose environment holds ``LAUNCHER_TEST=tag``."""
    return processes_with_env("LAUNCHER_TEST", tag)


def gone(tag: str, within: float = 5.0) -> bool:
    return not wait_empty(lambda: tagged(tag), within)


def start(argv: List[str], tag: str, **kwargs: object) -> subprocess.Popen:
    env = {**os.environ, "LAUNCHER_TEST": tag}
    return subprocess.Popen(launcher.command(1.0, argv), env=env, start_new_session=True, **kwargs)


def wait_started(tag: str, count: int) -> None:
    deadline = time.monotonic() + 10
    while len(tagged(tag)) < count:
        assert time.monotonic() < deadline, "the replica's children never started"
        time.sleep(0.05)


@pytest.mark.parametrize("argv, code", [(["sh", "-c", "exit 3"], 3), (["sh", "-c", "kill -9 $$"], 137),
                                        (["true"], 0), (["no-such-program-here"], 127)])
def test_the_replica_exit_code_passes_through(argv: List[str], code: int) -> None:
    done = subprocess.run(launcher.command(1.0, argv), capture_output=True, text=True, timeout=30)
    assert done.returncode == code, done.stderr
    if code == 127:
        assert "cannot start no-such-program-here" in done.stderr


def test_when_the_replica_exits_what_it_left_is_ended() -> None:
    tag = uuid.uuid4().hex
    proc = start(["sh", "-c", "sleep 300 & setsid sleep 300 & sleep 0.3; exit 4"], tag)
    assert proc.wait(timeout=30) == 4
    assert gone(tag)


def test_sigterm_ends_the_replica_and_its_setsid_child() -> None:
    tag = uuid.uuid4().hex
    proc = start(["sh", "-c", LEAKY], tag, stdout=subprocess.PIPE)
    wait_started(tag, 5)  # stand-in, keeper, sh, two sleeps
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 128 + signal.SIGTERM
    assert gone(tag)


def test_a_replica_ignoring_sigterm_is_killed_after_the_grace() -> None:
    tag = uuid.uuid4().hex
    proc = start(["sh", "-c", "trap '' TERM; echo started; while :; do sleep 0.1; done"], tag, stdout=subprocess.PIPE)
    wait_started(tag, 3)
    start_at = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 128 + signal.SIGKILL
    assert 0.9 < time.monotonic() - start_at < 5
    assert gone(tag)


def test_a_sigkilled_launcher_still_ends_everything() -> None:
    """What a Ray worker does to its children as it exits: SIGKILL, which the keeper (a grandchild) outlives."""
    tag = uuid.uuid4().hex
    proc = start(["sh", "-c", LEAKY], tag, stdout=subprocess.PIPE)
    wait_started(tag, 5)
    proc.kill()
    proc.wait(timeout=10)
    assert gone(tag)


def test_it_imports_only_the_standard_library_and_the_process_helpers() -> None:
    code = ("import runpy, sys; sys.argv = ['launcher.py']; "
            f"sys.path[0] = {os.path.dirname(os.path.dirname(os.path.dirname(launcher.__file__)))!r}; "
            "import torchspec.schedulers.launcher; "
            "print(' '.join(sorted(m for m in sys.modules if m.partition('.')[0] == 'torchspec')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["torchspec", "torchspec.schedulers", "torchspec.schedulers.exports", "torchspec.schedulers.launcher",
                   "torchspec.schedulers.processes", "torchspec.schedulers.replicas", "torchspec.version"]
