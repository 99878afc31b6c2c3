"""The local supervisor's one I/O thread: lines split as readline would, every pipe drained, exits reported."""

from __future__ import annotations

import io
import os
import pathlib
import random
import re
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


@pytest.mark.parametrize("stream", ["combined", "stdout", "stderr"])
def test_view_blocks_print_what_the_line_path_prints(tmp_path, stream: str) -> None:
    """``logs`` without a filter reads blocks with two regular expressions: byte for byte what it printed
    line by line (CRs before the newline dropped, bytes that are not UTF-8 replaced, markers in every view)."""
    from torchspec.schedulers.api import Stream
    from torchspec.schedulers.local.logs import OutputParser, view_blocks
    from torchspec.schedulers.logfile import follow_lines

    path = str(tmp_path / "output.log")
    logs = LogWriter(path)
    rng = random.Random(7)
    for i in range(3000):
        kind = rng.choice(["stdout", "stderr", "marker", "crlf", "bad", "empty", "unicode"])
        if kind == "marker":
            logs.marker(f"--- torchspec: restart {i} ---")
        elif kind == "crlf":
            logs.write_lines("stdout", f"progress {i}\r\r\n".encode())
        elif kind == "bad":
            logs.write_lines("stderr", b"bad \xff\xfe byte\n")
        elif kind == "empty":
            logs.write_lines("stdout", b"\n")
        elif kind == "unicode":
            logs.write_lines("stderr", "h\u00e9llo \u4e16\u754c\n".encode())
        else:
            logs.write_lines(kind, f"line {i} of {kind}\nand a second\n".encode())
    logs._file.write(b"olast line, unfinished")
    logs.close()
    prefix = "\x1b[32mrole/0\x1b[0m \\1 "  # colour codes and a backslash: the prefix is taken literally
    with open(path, "rb") as log:
        lines = follow_lines(log, OutputParser(Stream(stream)), None, None, None, False, done=lambda: True)
        expected = "".join(prefix + line.rstrip("\r\n") + "\n" for line in lines).encode("utf-8")
    for size in (1 << 20, 64, 7):  # blocks that end mid-line
        assert b"".join(view_blocks(path, Stream(stream), prefix.encode(), size=size)) == expected
    for plain in ("eval/0 ", "ml/1 ", "other/2 "):  # prefixes that start like a tag are put in once
        with open(path, "rb") as log:
            lines = follow_lines(log, OutputParser(Stream(stream)), None, None, None, False, done=lambda: True)
            expected = "".join(plain + line.rstrip("\r\n") + "\n" for line in lines).encode("utf-8")
        assert b"".join(view_blocks(path, Stream(stream), plain.encode())) == expected


def test_replica_zero_of_each_role_is_launched_before_the_others(tmp_path) -> None:
    """Replica 0 is its role's rank-0 host: a rendezvous that ranks nodes as they join must see it first,
    though the other replicas are launched several at a time."""
    from scheduler_helpers import wait_terminal

    from torchspec import specs
    from torchspec.schedulers.local.scheduler import LocalScheduler

    sched = LocalScheduler("test", state_dir=str(tmp_path / "state"))
    roles = [specs.Role(name=name, image=str(tmp_path), entrypoint="true", num_replicas=12) for name in ("a", "b")]
    app_id = sched.submit(specs.AppDef("order", roles=roles), {})
    assert wait_terminal(sched, app_id).state == specs.AppState.SUCCEEDED
    log = pathlib.Path(sched.app_dir(app_id), "supervisor.log").read_text()
    started = re.findall(r" (\w+/\d+): started pid", log)
    assert started[:2] == ["a/0", "b/0"] and sorted(started) == sorted(f"{r}/{k}" for r in "ab" for k in range(12))
