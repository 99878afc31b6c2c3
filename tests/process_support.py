"""The one place the tests find processes on this machine, and wait for them to be gone (Linux ``/proc``).

What an app started is found by a variable in its environment, not by its
parent, process group or session: every replica, and everything it starts,
inherits ``TORCHSPEC_APP_ID`` (a Slurm step ``SLURM_JOB_ID``; a test may add
a tag of its own), so a descendant that calls ``setsid`` or is orphaned
cannot hide from a scan of ``/proc/*/environ``.

- ``processes_with_env(name, value)`` / ``app_processes(app_id)``: the live
  processes carrying the marker; ``alive(pid)``: a zombie counts as gone.
- ``wait_gone(pids, timeout)`` / ``wait_empty(find, timeout)``: wait, up to a
  deadline, and return what is still there ([] once nothing is); a test
  asserts on that, so its failure names the survivors.
- ``children``, ``cpu_seconds``, ``ignores``: what a test waits on before it
  signals a process (work done, not time passed, on a loaded machine).
- ``interruptible(argv)``: a command line that Ctrl-C (SIGINT) reaches even
  where the test run itself was started ignoring SIGINT; ``finish(proc,
  timeout)``: its output, or a failure saying what it printed before it hung.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from typing import Callable, Iterable, List, Optional, Sequence, Tuple, TypeVar

T = TypeVar("T")

#: How often the waits look again: a scan of /proc is cheap, and a wait ends as soon as nothing is left.
POLL_S = 0.05


def stat_fields(pid: int) -> List[str]:
    """``/proc/PID/stat`` from the state on (state, ppid, pgrp, session, ...); [] once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as stat:
            # "pid (comm) S ...": comm may hold spaces or parens, the state follows the last ")"
            return stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def alive(pid: int) -> bool:
    """Whether ``pid`` runs.

    A zombie (dead, not yet reaped by a parent that may be slow to, or never)
    counts as gone, but only once all its threads are: a killed
    multi-threaded process shows a zombie main thread while the others still
    exit and still hold its files.  Without ``/proc`` (macOS) a signal probe
    decides.
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # someone else's: it exists
    fields = stat_fields(pid)
    if not fields:
        return not os.path.isdir("/proc/self")  # gone since the probe; or no /proc, where the probe decides
    if fields[0] != "Z":
        return True
    try:
        return len(os.listdir(f"/proc/{pid}/task")) > 1
    except OSError:
        return False


def command_line(pid: int) -> Optional[str]:
    """The arguments of ``pid`` joined by spaces; None once it is gone."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return None


def command_name(pid: int) -> Optional[str]:
    """The name of the program ``pid`` runs (``/proc/PID/comm``, at most 15 characters); None once it is gone."""
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return None


def children(pid: int) -> List[int]:
    """The live children of ``pid``."""
    return [int(e) for e in os.listdir("/proc")
            if e.isdigit() and stat_fields(int(e))[1:2] == [str(pid)] and alive(int(e))]


def cpu_seconds(pid: int) -> float:
    """The CPU time ``pid`` has used (user and system; 0 once it is gone): unlike the clock, what a process
    has done by now does not depend on how loaded the machine is."""
    fields = stat_fields(pid)
    try:
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime (stat's 14, 15)
    except (IndexError, ValueError):
        return 0.0


def ignores(pid: int, sig: int) -> bool:
    """Whether ``pid`` ignores the signal ``sig`` (``SigIgn`` in ``/proc/PID/status``)."""
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8") as status:
            mask = next(int(line.split()[1], 16) for line in status if line.startswith("SigIgn:"))
    except (OSError, StopIteration, IndexError, ValueError):
        return False
    return bool(mask >> (int(sig) - 1) & 1)


def processes_with_env(name: str, value: str, *, substring: bool = False) -> List[int]:
    """Live processes, anywhere on this machine, whose environment holds ``name=value`` (with ``substring``: a
    ``name`` whose value contains ``value``); those we may not read are passed over."""
    exact = f"{name}={value}".encode()
    prefix, part = f"{name}=".encode(), value.encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                items = f.read().split(b"\0")
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if substring:
            carries = any(item.startswith(prefix) and part in item[len(prefix):] for item in items)
        else:
            carries = exact in items
        if carries and alive(int(entry)):
            found.append(int(entry))
    return found


def app_processes(app_id: str) -> List[int]:
    """Live processes whose environment says they belong to ``app_id`` (``TORCHSPEC_APP_ID``, which every
    replica and all it starts inherit)."""
    from torchspec.schedulers.replicas import ENV_APP_ID  # here: bench/docker.py loads this file without torchspec

    return processes_with_env(ENV_APP_ID, app_id)


def wait_empty(find: Callable[[], List[T]], timeout: float) -> List[T]:
    """Call ``find`` until it returns nothing or ``timeout`` seconds pass; what it returned last."""
    deadline = time.monotonic() + timeout
    while True:
        left = find()
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(POLL_S)


def wait_gone(pids: Iterable[int], timeout: float) -> List[int]:
    """Wait until none of ``pids`` runs (:func:`alive`); those still running after ``timeout`` seconds."""
    pids = list(pids)
    return wait_empty(lambda: [pid for pid in pids if alive(pid)], timeout)


# Run by ``interruptible``: SIGINT back to its default, then the command in this process's place.
_DEFAULT_SIGINT = "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execvp(sys.argv[1], sys.argv[1:])"


def interruptible(argv: Sequence[str]) -> List[str]:
    """A command line that runs ``argv`` (same pid, same streams) with SIGINT at its default disposition.

    An ignored signal stays ignored across fork and exec, and a shell without
    job control starts background commands (``pytest ... &`` in a script, some
    CI runners) with SIGINT ignored: then every process a test starts ignores
    Ctrl-C too (Python installs its KeyboardInterrupt handler only where SIGINT
    was at its default), and a test of what Ctrl-C does would wait for nothing.
    """
    return [sys.executable, "-c", _DEFAULT_SIGINT, *argv]


def finish(proc: "subprocess.Popen[str]", timeout: float) -> Tuple[str, str]:
    """``proc.communicate(timeout=...)``; past the timeout, ``proc`` (its process group, where it leads one) is
    SIGKILLed and the test fails with what it printed."""
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            if os.getpgid(proc.pid) == proc.pid:
                os.killpg(proc.pid, signal.SIGKILL)
            else:
                proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"{proc.args} still ran {timeout}s on; it printed:\n{out}\n{err}") from None
