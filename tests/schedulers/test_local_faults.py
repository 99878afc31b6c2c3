"""The ``local`` scheduler when the disk under its state folder fails: full (ENOSPC), or read-only (EROFS).

Real mounts, real processes, the real CLI.  A small tmpfs plays the full
disk; a read-only bind mount of the state folder plays a file system the
kernel turned read-only (``remount,ro`` of a file system with files open for
writing is refused, and the supervisor always has some open; a bind mount made
read-only afterwards leaves those open files writable, as the log files stay,
while every new file, such as the next ``state.json``, is refused).  Each test
asserts what the user sees (state, message, exit code, no traceback), that
``state.json`` is still whole JSON, and that no process of the app is left.
Mounting needs root (CAP_SYS_ADMIN): elsewhere the tests skip, saying so.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import signal
import subprocess
import sys
import time
from typing import Any, Dict, Iterator, List

import pytest

import skips
from process_support import alive, app_processes
from scheduler_helpers import wait_for

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mounts and /proc: Linux")

OK, USAGE, APP_FAILED, APP_CANCELLED, BACKEND = 0, 2, 4, 5, 6
ENDED = ("SUCCEEDED", "FAILED", "CANCELLED")

#: Generous, for a loaded 2-core machine; every wait ends as soon as its condition holds.
TIMEOUT_S = 60.0

#: The tmpfs that plays the full disk: a few times what an app folder needs, far less than a flood writes.
DISK = "2m"

#: How much a flooding replica prints: five times the disk.
FLOOD_BYTES = 10_000_000


def _mount(*args: str) -> None:
    """``mount ARGS``; the test skips where this process may not mount (no root, no CAP_SYS_ADMIN)."""
    r = subprocess.run(["mount", *args], capture_output=True, text=True)
    if r.returncode != 0:
        if os.geteuid() != 0 or "permission denied" in r.stderr.lower() or "not permitted" in r.stderr.lower():
            skips.skip_or_fail("MOUNT", f"cannot mount here (needs root with CAP_SYS_ADMIN): {r.stderr.strip()}")
        raise AssertionError(f"mount {' '.join(args)} failed: {r.stderr}")


def _umount(path: pathlib.Path) -> None:
    """Unmount ``path``, lazily where something still holds it: the next test must not inherit a mount."""
    if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


@contextlib.contextmanager
def read_only(path: pathlib.Path) -> Iterator[None]:
    """``path`` read-only for new writes (a read-only bind mount of itself) until the block ends."""
    _mount("--bind", str(path), str(path))
    try:
        _mount("-o", "remount,bind,ro", str(path))
        yield
    finally:
        _umount(path)


class Cli:
    """``python -m torchspec`` on a private TORCHSPEC_HOME, as a user runs it; no command may print a traceback."""

    def __init__(self, tmp: pathlib.Path) -> None:
        self.tmp = tmp
        self.home = tmp / "home"
        self.home.mkdir()
        self.env = dict(os.environ, NO_COLOR="1", TORCHSPEC_HOME=str(self.home), XDG_CONFIG_HOME=str(tmp / "xdg"))
        self.env.pop("TORCHSPEC_DEBUG", None)
        self.handles: List[str] = []

    def run(self, *args: str) -> "subprocess.CompletedProcess[str]":
        r = subprocess.run([sys.executable, "-m", "torchspec", *args], capture_output=True, text=True,
                           cwd=self.tmp, env=self.env, timeout=TIMEOUT_S)
        assert "Traceback" not in r.stdout + r.stderr, r.stdout + r.stderr
        return r

    def spec(self, name: str, script: str) -> str:
        path = self.tmp / f"{name}.json"
        role = {"name": "r", "image": ".", "entrypoint": "sh", "args": ["-c", script]}
        path.write_text(json.dumps({"name": name, "roles": [role]}))
        return str(path)

    def ok(self, *args: str) -> str:
        """What a command that must succeed printed."""
        r = self.run(*args)
        assert r.returncode == OK, (args, r.stderr)
        return r.stdout

    def submit(self, name: str, script: str) -> str:
        self.handles.append(self.ok("submit", self.spec(name, script)).strip())
        return self.handles[-1]

    def status(self, handle: str) -> Dict[str, Any]:
        return json.loads(self.ok("status", handle, "--json"))  # type: ignore[no-any-return]

    def wait_ended(self, handle: str) -> Dict[str, Any]:
        found: List[Dict[str, Any]] = []
        wait_for(lambda: found.append(self.status(handle)) or found[-1]["state"] in ENDED, TIMEOUT_S,
                 f"{handle} to end")
        return found[-1]

    def app_dir(self, handle: str) -> pathlib.Path:
        return self.home / "apps" / handle.rsplit("/", 1)[1]

    def state(self, handle: str) -> Dict[str, Any]:
        """``state.json`` as stored: it must be whole JSON whatever happened to the disk."""
        return json.loads((self.app_dir(handle) / "state.json").read_text())  # type: ignore[no-any-return]

    def processes(self, handle: str) -> List[int]:
        return app_processes(handle.rsplit("/", 1)[1])

    def kill_leftovers(self) -> None:
        """What a failed test left running: the supervisor with its guard, and every process of the app."""
        for handle in self.handles:
            with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
                supervisor = int(self.state(handle)["supervisor"]["pid"] or 0)
                if supervisor and alive(supervisor) and os.getpgid(supervisor) != os.getpgrp():
                    os.killpg(os.getpgid(supervisor), signal.SIGKILL)
            for pid in self.processes(handle):
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)


@pytest.fixture
def cli(tmp_path: pathlib.Path) -> Iterator[Cli]:
    """The CLI on a state folder of its own; afterwards nothing of its apps runs and nothing stays mounted."""
    runner = Cli(tmp_path)
    try:
        yield runner
    finally:
        runner.kill_leftovers()
        for _ in range(3):  # mounts a failed test left, one over the other
            if os.path.ismount(runner.home):
                _umount(runner.home)


@pytest.fixture
def small_disk(cli: Cli) -> Iterator[Cli]:
    """``cli`` with its state folder on a tmpfs of :data:`DISK`; unmounted after its apps are killed."""
    _mount("-t", "tmpfs", "-o", f"size={DISK}", "tmpfs", str(cli.home))
    yield cli  # `cli` kills what is left, then unmounts


def _stored_lines(log: pathlib.Path) -> List[bytes]:
    """The complete stdout lines ``output.log`` holds, as ``logs`` must give them back."""
    complete = log.read_bytes().rpartition(b"\n")[0].split(b"\n")
    return [line[1:] for line in complete if line[:1] == b"o"]


def _says_disk_full(msg: str, cli: Cli, handle: str) -> None:
    assert "No space left on device" in msg and "ENOSPC" in msg, msg
    assert str(cli.app_dir(handle)) in msg, msg  # which folder: the user must know what to clean


def test_a_replica_filling_the_disk_ends_and_its_app_says_the_state_folder_is_full(small_disk: Cli) -> None:
    cli = small_disk
    handle = cli.submit("flood", f"yes | head -c {FLOOD_BYTES}; echo done")

    status = cli.wait_ended(handle)
    assert status["state"] == "SUCCEEDED", status  # the replica's outcome, recorded though the disk is full
    [replica] = status["roles"][0]["replicas"]
    assert (replica["state"], replica["exit_code"]) == ("SUCCEEDED", 0), replica
    _says_disk_full(status["msg"], cli, handle)
    assert cli.state(handle)["state"] == "SUCCEEDED"  # whole JSON, and what status said
    text = cli.run("status", handle)
    assert text.returncode == OK and "No space left on device" in text.stdout, text.stdout
    assert cli.run("describe", handle).returncode == OK

    log = cli.app_dir(handle) / "r" / "0" / "output.log"
    assert log.read_bytes().endswith(b"\n")  # a line cut short by the full disk was taken back
    stored = _stored_lines(log)
    assert stored and set(stored) == {b"y"} and len(stored) < FLOOD_BYTES // 2  # the disk filled up
    r = cli.run("logs", handle)
    assert r.returncode == OK, r.stderr
    shown = [line.split(None, 1)[-1] for line in r.stdout.splitlines()]
    assert len(shown) == len(stored) and set(shown) == {"y"}  # what was written, and no more

    r = cli.run("cancel", handle)
    assert r.returncode == OK and "already ended: SUCCEEDED" in r.stderr, r.stderr
    assert cli.run("wait", handle).returncode == OK
    assert not cli.processes(handle)


def test_an_app_flooding_a_full_disk_runs_on_until_cancelled(small_disk: Cli) -> None:
    cli = small_disk
    handle = cli.submit("endless", "yes")

    running = wait_for_msg(cli, handle, "ENOSPC")
    assert running["state"] == "RUNNING", running  # a full disk loses output; it does not stop the training
    _says_disk_full(running["msg"], cli, handle)
    replica = cli.state(handle)["roles"]["r"]["replicas"][0]["pid"]
    assert alive(replica)
    r = cli.run("logs", handle)
    assert r.returncode == OK and r.stdout.startswith("r/0 y\n"), r.stdout[:200]

    assert cli.run("cancel", handle).returncode == OK
    assert cli.run("wait", handle).returncode == APP_CANCELLED
    status = cli.status(handle)
    assert status["state"] == "CANCELLED" and cli.state(handle)["state"] == "CANCELLED"
    _says_disk_full(status["msg"], cli, handle)
    assert not cli.processes(handle) and not alive(replica)


def wait_for_msg(cli: Cli, handle: str, text: str) -> Dict[str, Any]:
    """The status, once its message says ``text``."""
    found: List[Dict[str, Any]] = []
    wait_for(lambda: found.append(cli.status(handle)) or text in found[-1]["msg"], TIMEOUT_S,
             f"the status of {handle} to say {text!r}")
    return found[-1]


def test_submit_onto_a_full_disk_is_a_clear_error_and_leaves_no_half_app(small_disk: Cli) -> None:
    cli = small_disk
    filler = cli.home / "filler"
    with open(filler, "wb") as out, contextlib.suppress(OSError):
        while True:
            out.write(b"\0" * 65536)
            out.flush()

    r = cli.run("submit", cli.spec("crowded", "echo hi"))
    assert r.returncode == BACKEND, (r.returncode, r.stderr)
    assert "No space left on device" in r.stderr and str(cli.home) in r.stderr and "hint:" in r.stderr, r.stderr
    assert not list((cli.home / "apps").iterdir())  # no half-written app for `list` to trip over
    assert cli.run("list").returncode == OK

    filler.unlink()  # room again: the same state folder works
    handle = cli.submit("roomy", "echo hi")
    assert cli.wait_ended(handle)["state"] == "SUCCEEDED"


def test_submit_into_a_read_only_state_folder_is_a_clear_error(cli: Cli) -> None:
    (cli.home / "apps").mkdir()
    with read_only(cli.home):
        r = cli.run("submit", cli.spec("nowhere", "echo hi"))
        assert r.returncode == BACKEND, (r.returncode, r.stderr)
        assert "Read-only file system" in r.stderr and str(cli.home / "apps") in r.stderr, r.stderr
        assert "hint:" in r.stderr, r.stderr
        r = cli.run("list")
        assert r.returncode == OK, r.stderr
    assert not list((cli.home / "apps").iterdir())


def _flag_script(flag: pathlib.Path) -> str:
    """A replica that runs until ``flag`` (outside the state folder) exists, then exits 0."""
    return f"echo up; while [ ! -e {flag} ]; do sleep 0.1; done; echo bye"


@pytest.mark.parametrize("how", ["cancel", "exit"])
def test_an_app_whose_state_folder_turns_read_only_still_ends_and_says_why(cli: Cli, how: str) -> None:
    flag = cli.tmp / "flag"
    handle = cli.submit("frozen", _flag_script(flag))
    wait_for(lambda: cli.state(handle)["state"] == "RUNNING" and bool(cli.processes(handle)), TIMEOUT_S,
             f"{handle} to run")
    replica = cli.state(handle)["roles"]["r"]["replicas"][0]["pid"]
    with read_only(cli.home):
        status = wait_for_msg(cli, handle, "EROFS")
        assert status["state"] == "RUNNING", status  # the app itself is fine: only its record is not
        assert "Read-only file system" in status["msg"] and str(cli.home) in status["msg"], status["msg"]
        assert cli.run("logs", handle).returncode == OK

        if how == "cancel":
            r = cli.run("cancel", handle)
            assert r.returncode == OK, r.stderr
        else:
            flag.touch()
        wait_for(lambda: not cli.processes(handle), TIMEOUT_S, f"the processes of {handle} to end")
        ended = cli.wait_ended(handle)
        # cancelled or not, the supervisor could not record the end and is gone: every reader reads FAILED
        assert ended["state"] == "FAILED", ended
        assert "Read-only file system" in ended["msg"] and "not recorded" in ended["msg"], ended["msg"]
        assert cli.run("wait", handle).returncode == APP_FAILED
        assert cli.run("cancel", handle).returncode == OK
        assert cli.state(handle)["state"] == "RUNNING"  # untouched: the last state that could be written

    ended = cli.wait_ended(handle)  # writable again: the end is recorded now
    assert cli.state(handle)["state"] == ended["state"] and "not recorded" not in ended["msg"], ended
    assert not cli.processes(handle) and not alive(replica)


@pytest.mark.parametrize("recorded", ["before", "after"])
def test_a_record_that_cannot_be_updated_never_stops_a_process_that_got_its_pid_since(cli: Cli,
                                                                                     recorded: str) -> None:
    """A record may be read long after its replicas are gone and their pids reused (where the end cannot be
    recorded, by every ``status``): only a process that started before the record may be stopped by it."""
    handle = cli.submit("stale", "echo done")
    cli.wait_ended(handle)
    stranger = subprocess.Popen(["sleep", "1000"], start_new_session=True)  # a group leader, like a replica
    try:
        time.sleep(0.1)
        shift = {"before": -60.0, "after": 60.0}[recorded]  # the record's time against the stranger's start
        state = cli.state(handle)
        state.update(state="RUNNING", supervisor=dict(state["supervisor"], heartbeat=time.time() + shift))
        state["roles"]["r"]["replicas"][0].update(state="RUNNING", pid=stranger.pid, pgid=stranger.pid)
        (cli.app_dir(handle) / "state.json").write_text(json.dumps(state))

        status = cli.status(handle)
        assert status["state"] == "FAILED" and "died" in status["msg"], status
        if recorded == "before":
            assert alive(stranger.pid)  # status has returned: what it stops, it has signalled by now
        else:
            wait_for(lambda: not alive(stranger.pid), TIMEOUT_S, "the recorded replica to be stopped")
    finally:
        stranger.kill()
        stranger.wait()

