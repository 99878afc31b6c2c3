"""tests/process_support.py finds what it must (setsid'd descendants included) and nothing else, and its waits end."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from process_support import (
    alive,
    children,
    cpu_seconds,
    finish,
    ignores,
    interruptible,
    processes_with_env,
    wait_empty,
    wait_gone,
)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")


def test_a_marker_finds_the_setsid_descendants_and_the_waits_end_once_they_are_gone() -> None:
    tag = uuid.uuid4().hex
    proc = subprocess.Popen(["sh", "-c", "setsid sleep 300 & sleep 300 & wait"], env={**os.environ, "MARK": tag},
                            start_new_session=True)
    try:
        found = wait_empty(lambda: [] if len(processes_with_env("MARK", tag)) >= 3 else [None], 30)
        assert found == [], "sh and its two sleeps never showed"
        pids = processes_with_env("MARK", tag)
        assert proc.pid in pids and len(pids) == 3, pids
        assert processes_with_env("MARK", tag[:8], substring=True) == pids
        assert processes_with_env("MARK", tag[:8]) == [] and processes_with_env("MARK", "x" + tag) == []
        assert wait_gone(pids, 0.2) == pids  # nothing ended them: all still there at the deadline
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        assert wait_gone(pids, 30) == []  # the shell a zombie of ours (not yet reaped): gone all the same
        assert wait_empty(lambda: processes_with_env("MARK", tag), 30) == []
    finally:
        for pid in processes_with_env("MARK", tag):
            os.kill(pid, signal.SIGKILL)
        proc.wait(timeout=30)


def test_a_zombie_is_gone() -> None:
    proc = subprocess.Popen(["true"])
    assert wait_gone([proc.pid], 30) == []
    os.kill(proc.pid, 0)  # not reaped yet: the pid still exists, as a zombie
    proc.wait(timeout=30)
    assert not alive(proc.pid)


def test_what_a_test_waits_on_before_it_signals() -> None:
    code = "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nt = time.process_time()\n" \
           "while time.process_time() - t < 0.3: pass\nprint('done', flush=True)\ntime.sleep(300)\n"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "done\n"
        assert cpu_seconds(proc.pid) >= 0.3
        assert ignores(proc.pid, signal.SIGINT) and not ignores(proc.pid, signal.SIGTERM)
        assert proc.pid in children(os.getpid())
    finally:
        proc.kill()
        proc.wait(timeout=30)


def test_interruptible_undoes_an_inherited_sigint_ignore() -> None:
    """A test run started ignoring SIGINT passes the ignore on; ``interruptible`` puts the default back."""
    report = [sys.executable, "-c", "import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"]
    ignoring = [sys.executable, "-c", "import signal, subprocess, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
                "sys.exit(subprocess.call(sys.argv[1:]))"]
    inherited = subprocess.run([*ignoring, *report], capture_output=True, text=True, timeout=60)
    assert inherited.stdout == "False\n", inherited  # no KeyboardInterrupt: Ctrl-C does nothing
    restored = subprocess.run([*ignoring, *interruptible(report)], capture_output=True, text=True, timeout=60)
    assert restored.stdout == "True\n", restored


def test_finish_fails_naming_what_a_hung_process_printed() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "print('hello', flush=True); import time; time.sleep(300)"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    start = time.monotonic()
    with pytest.raises(AssertionError, match="hello"):
        finish(proc, timeout=1)
    assert proc.returncode == -signal.SIGKILL and time.monotonic() - start < 30
