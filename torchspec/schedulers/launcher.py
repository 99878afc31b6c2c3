"""A replica's launcher: the parent of one replica that ends everything the replica started, whatever happens.

Backends whose replica runs as the child of a process that can die under
it (the ray scheduler's actors: a driver stopped or SIGKILLed, an actor
killed) start the replica through this launcher instead::

    python /path/to/torchspec/schedulers/launcher.py GRACE_S PROGRAM [ARG...]

The launcher is two processes.  The first, the *stand-in*, is the one its
parent started (with ``start_new_session``) and waits on: it forks the
*keeper* and only passes stop signals on to it.  A parent may SIGKILL its
children as it exits (a Ray worker does), which nothing can catch; the
keeper, a grandchild, survives that, and the kernel tells it its parent
died.  The keeper runs PROGRAM in a process group of its own and is a Linux
child subreaper (so a descendant that calls ``setsid`` and is orphaned
becomes its child, not init's).  When the replica exits, or SIGTERM, SIGINT
or SIGHUP arrives, or the stand-in is gone, it ends the rest: SIGTERM to the
replica's group and to every child it holds, up to GRACE_S seconds for them
to go, then SIGKILL to all of them, round after round, until nothing is
left.  Both exit with the replica's exit code (128+N for signal N; 127 when
PROGRAM cannot start).

It is run by path, with the job's Python, on machines where torchspec is
only an uploaded folder: it imports the standard library and
:mod:`torchspec.schedulers.processes` only.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from typing import List, Optional

if __name__ == "__main__":  # run by path: import torchspec from the folder this file is in, not its neighbours
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from torchspec.schedulers.processes import (  # noqa: E402
    children,
    group_alive,
    kill_strays,
    set_child_subreaper,
    signal_group,
    signal_pid,
)

#: prctl(2): the signal this process gets when the thread that started it exits.
_PR_SET_PDEATHSIG = 1
#: The signals that end the replica (a parent's stop, a terminal's).
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
#: How often the launcher looks at whether its parent is still there, where the kernel's signal did not come.
_PARENT_CHECK_S = 1.0


def command(grace_s: float, argv: List[str]) -> List[str]:
    """The command line that runs ``argv`` under a launcher (``grace_s``: SIGTERM to SIGKILL)."""
    return [sys.executable, os.path.abspath(__file__), repr(float(grace_s)), *argv]


class Launcher:
    """The keeper: runs the replica, and ends all it started."""

    def __init__(self, grace_s: float) -> None:
        self.grace_s = grace_s
        self.parent = os.getppid()
        self.stop_reason: Optional[str] = None
        self.code: Optional[int] = None
        self.child: Optional[subprocess.Popen] = None
        self.wake_r, self.wake_w = os.pipe()

    def _on_signal(self, signum: int, frame: object) -> None:
        self.stop_reason = self.stop_reason or signal.Signals(signum).name

    def setup(self) -> None:
        set_child_subreaper()
        for sig in _STOP_SIGNALS:
            signal.signal(sig, self._on_signal)
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)
        os.set_blocking(self.wake_w, False)
        signal.set_wakeup_fd(self.wake_w)
        _parent_death_signal(signal.SIGTERM)
        if os.getppid() != self.parent:  # it died before the kernel was asked
            self.stop_reason = "its parent exited"

    def start(self, argv: List[str]) -> bool:
        try:
            self.child = subprocess.Popen(argv, process_group=0)
        except OSError as e:
            sys.stderr.write(f"cannot start {argv[0]}: {e.strerror or e}\n")
            sys.stderr.flush()
            self.code = 127
            return False
        return True

    def wait(self, timeout: Optional[float]) -> None:
        """Sleep until a signal, the timeout, or the next parent check; reap what exited."""
        step = _PARENT_CHECK_S if timeout is None else max(0.0, min(timeout, _PARENT_CHECK_S))
        try:
            ready, _, _ = select.select([self.wake_r], [], [], step)
            if ready:
                os.read(self.wake_r, 4096)
        except InterruptedError:
            pass
        if os.getppid() != self.parent:
            self.stop_reason = self.stop_reason or "its parent exited"
        self.reap()

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if self.child is not None and pid == self.child.pid:
                self._record(status)

    def _record(self, status: int) -> None:
        assert self.child is not None
        code = self.child.returncode = os.waitstatus_to_exitcode(status)
        self.code = 128 - code if code < 0 else code

    def run(self, argv: List[str]) -> int:
        self.setup()
        if self.stop_reason is None and self.start(argv):
            while self.code is None and self.stop_reason is None:
                self.wait(None)
        self.end()
        return self.code if self.code is not None else 128 + signal.SIGTERM

    def end(self) -> None:
        """SIGTERM the replica's group and every child of ours, ``grace_s`` for them to go, then SIGKILL."""
        group = self.child.pid if self.child is not None else None
        me = os.getpid()
        signal_group(group, signal.SIGTERM)
        for pid, pgid in children(me):
            if pgid != os.getpgrp():
                signal_group(pgid, signal.SIGTERM)
            signal_pid(pid, signal.SIGTERM)
        deadline = time.monotonic() + self.grace_s
        while time.monotonic() < deadline and (children(me) or group_alive(group)):
            self.wait(deadline - time.monotonic())
        signal_group(group, signal.SIGKILL)
        if self.child is not None and self.code is None:  # its exit code, before kill_strays reaps it unread
            try:
                self._record(os.waitpid(self.child.pid, 0)[1])
            except ChildProcessError:
                pass
        kill_strays()
        self.reap()


def _parent_death_signal(sig: int) -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    except (OSError, AttributeError):
        pass


def stand_in(keeper: int) -> int:
    """The launcher's first process, the one its parent holds: passes stop signals on to the keeper (its
    child, which does the work) and exits with its exit code.  The keeper sees this process die, whoever
    kills it, and ends the replica then (the kernel's parent-death signal)."""
    def forward(signum: int, frame: object) -> None:
        signal_pid(keeper, signum)

    for sig in _STOP_SIGNALS:
        signal.signal(sig, forward)
    _parent_death_signal(signal.SIGTERM)
    while True:
        try:
            _, status = os.waitpid(keeper, 0)
        except ChildProcessError:
            return 128 + signal.SIGTERM
        code = os.waitstatus_to_exitcode(status)
        return 128 - code if code < 0 else code


def main(argv: List[str]) -> int:
    if len(argv) < 2:
        sys.stderr.write("usage: launcher.py GRACE_S PROGRAM [ARG...]\n")
        return 2
    grace = float(argv[0])
    keeper = os.fork() if hasattr(os, "fork") else 0
    if keeper:
        os._exit(stand_in(keeper))
    return Launcher(grace).run(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
