"""The local supervisor's one I/O thread: lines split as readline would, every pipe drained, exits reported."""

from __future__ import annotations

import io
import os
import random
import subprocess
import sys
import threading

import pytest

from torchspec.schedulers.local.logs import LogWriter
from torchspec.schedulers.local.pump import MAX_LINE, Pump, split_lines


def readline_lines(data: bytes) -> list:
    """What the thread-per-pipe supervisor stored: readline(MAX_LINE) pieces, each ended with a newline."""
    out, src = [], io.BytesIO(data)
    while True:
        line = src.readline(MAX_LINE)
        if not line:
            return out
        out.append(line if line.endswith(b"\n") else line + b"\n")


@pytest.mark.parametrize("seed", range(5))
def test_split_lines_matches_readline(seed: int) -> None:
    rng = random.Random(seed)
    data = b"".join(b"x" * rng.choice([0, 1, 80, MAX_LINE - 1, MAX_LINE, MAX_LINE + 1, 3 * MAX_LINE + 5]) + b"\n"
                    for _ in range(20)) + b"tail without newline"
    lines, rest = split_lines(data)
    assert lines + ([rest + b"\n"] if rest else []) == readline_lines(data)


def test_write_lines_tags_every_line(tmp_path) -> None:
    path = str(tmp_path / "output.log")
    logs = LogWriter(path)
    logs.write_lines("stderr", b"one\ntwo\n\nthree\n")
    logs.close()
    body = [line for line in open(path, "rb").read().splitlines() if not line.startswith(b"t")]
    assert body == [b"eone", b"etwo", b"e", b"ethree"]


def test_pump_copies_both_streams_and_reports_the_exit(tmp_path) -> None:
    script = ("import sys\nsys.stdout.write('a\\n' * 3000)\nsys.stderr.write('b' * 70000)\n"
              "sys.stdout.write('last, no newline')\n")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    path = str(tmp_path / "output.log")
    logs = LogWriter(path)
    pump = Pump()
    exited = threading.Event()
    drain = pump.follow([(proc.stdout, "stdout"), (proc.stderr, "stderr")], logs)
    watched = pump.watch_exit(proc.pid, exited.set)
    assert drain.done.wait(30)
    if watched:
        assert exited.wait(30)
    assert proc.wait() == 0
    logs.close()
    lines = [line for line in open(path, "rb").read().splitlines() if not line.startswith(b"t")]
    assert [line for line in lines if line.startswith(b"o")] == [b"oa"] * 3000 + [b"olast, no newline"]
    assert [line for line in lines if line.startswith(b"e")] == [b"e" + b"b" * MAX_LINE, b"e" + b"b" * 4464]
    assert proc.stdout.closed and proc.stderr.closed


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="no pidfds here")
def test_pump_reports_each_exit_once_even_for_many(tmp_path) -> None:
    pump = Pump()
    seen = []
    lock = threading.Lock()
    done = threading.Event()
    procs = [subprocess.Popen(["true"]) for _ in range(50)]

    def on_exit(pid: int) -> None:
        with lock:
            seen.append(pid)
            if len(seen) == len(procs):
                done.set()

    for proc in procs:
        assert pump.watch_exit(proc.pid, lambda pid=proc.pid: on_exit(pid))
    assert done.wait(30)
    assert sorted(seen) == sorted(p.pid for p in procs)
    for proc in procs:
        assert proc.wait() == 0
