"""Processes on this machine: is a pid alive, stopping groups nobody supervises, and stray descendants.

Shared by the backends that run replicas as processes they own: the
``local`` supervisor and guard, and the replica launcher
(:mod:`torchspec.schedulers.launcher`) the ``ray`` actors start.  Each
replica runs in a process group of its own, so a replica and everything it
spawned are signalled together.  The local supervisor stops its own
replicas; the local scheduler uses :func:`kill_orphans` only for the
replicas of a supervisor that is gone.

A process group does not hold a descendant that calls ``setsid`` (a daemon,
``setsid cmd &``).  On Linux the supervisor and its guard are child
subreapers (:func:`set_child_subreaper`), so such orphans become their
children, whatever session they are in: :func:`kill_strays` kills them when
the app ends, :func:`reap_strays` reaps those that exit on their own.  Where
nobody is left to reap them, :func:`kill_orphans` finds them by the
``TORCHSPEC_APP_ID`` in their environment.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from typing import Callable, Collection, Iterator, List, Optional, Tuple

from torchspec.schedulers.replicas import ENV_APP_ID

# prctl(2)
_PR_SET_CHILD_SUBREAPER = 36

# Rounds of kill_strays/kill_tagged: each round kills what the last one orphaned (a fork bomb ends somewhere).
_STRAY_ROUNDS = 100

# How long to wait for SIGKILLed processes that are not ours to reap to be gone.
_DIE_S = 5.0

# How much later than a record a process may seem to have started and still be the one recorded: /proc gives
# the boot time in whole seconds.
_CLOCK_SLACK_S = 2.0


def pid_alive(pid: Optional[int]) -> bool:
    """True while ``pid`` runs; zombies count as dead.

    A supervisor that died stays a zombie until its parent reaps it: when
    that parent is us (a long-lived process that submitted the app) we reap
    it here, and on Linux ``/proc`` tells zombies of other parents apart.
    """
    if not pid or pid <= 0:
        return False
    try:
        reaped, _ = os.waitpid(pid, os.WNOHANG)
        if reaped == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _linux_zombie(pid)


def _linux_zombie(pid: int) -> bool:
    """True for a zombie whose threads are all gone; False where ``/proc`` cannot tell.

    A killed multi-threaded process shows its main thread as a zombie while
    its other threads are still exiting and still hold its files (and locks),
    so it only counts as dead once it is down to that one zombie thread.
    """
    fields = _stat(pid)
    if not fields or fields[0] != b"Z":
        return False
    try:
        return len(os.listdir(f"/proc/{pid}/task")) <= 1
    except OSError:
        return False


def _stat(pid: int) -> List[bytes]:
    """The fields of ``/proc/PID/stat`` from the state on (state, ppid, pgrp, ...); [] where unreadable."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            # "pid (comm) S ...": comm may hold spaces or parens, the state follows the last ")"
            return stat.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return []


def started_at(pid: int) -> Optional[float]:
    """When process ``pid`` started, in epoch seconds (to about a second); None where ``/proc`` cannot tell."""
    fields = _stat(pid)
    try:
        with open("/proc/stat", "rb") as stat:
            boot = next(int(line.split()[1]) for line in stat if line.startswith(b"btime "))
        return boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22 of stat: start time in ticks
    except (OSError, IndexError, ValueError, StopIteration):
        return None


def _pids() -> Iterator[int]:
    """Every pid ``/proc`` lists; none where there is no ``/proc``."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return
    yield from (int(name) for name in names if name.isdigit())


def signal_pid(pid: int, sig: int) -> bool:
    """Send ``sig`` to process ``pid``; False when it no longer exists (or is no longer ours to signal)."""
    try:
        os.kill(pid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def signal_group(pgid: Optional[int], sig: int) -> bool:
    """Send ``sig`` to a whole process group; False when the group no longer exists."""
    if not pgid or pgid <= 0:
        return False
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def group_alive(pgid: Optional[int]) -> bool:
    """Whether process group ``pgid`` still has a member (zombies too: signal 0 only asks)."""
    return signal_group(pgid, 0)


def kill_groups(pgids: List[Tuple[int, int]], grace_s: float) -> None:
    """Stop process groups that nobody supervises: SIGTERM, wait up to ``grace_s``, then SIGKILL.

    ``pgids`` pairs each group with its leader's pid, whose death ends the
    wait early; the final SIGKILL goes to every group regardless, so
    children that ignored SIGTERM or outlived their leader go too.
    """
    for _, pgid in pgids:
        signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + max(0.0, grace_s)
    while time.monotonic() < deadline and any(pid_alive(pid) for pid, _ in pgids):
        time.sleep(0.05)
    for _, pgid in pgids:
        signal_group(pgid, signal.SIGKILL)


def set_child_subreaper() -> bool:
    """Make orphaned descendants of this process its children (Linux ``PR_SET_CHILD_SUBREAPER``).

    Not inherited by children; False where the platform has no such thing.
    """
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        return int(ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _kill_rounds(find: Callable[[], List[Tuple[int, int]]], reap: bool) -> None:
    """SIGKILL the ``(pid, pgid)`` that ``find`` returns, with their groups, until it returns none."""
    own = os.getpgrp()
    for _ in range(_STRAY_ROUNDS):
        found = find()
        if not found:
            return
        for pid, pgid in found:
            if pgid != own:
                signal_group(pgid, signal.SIGKILL)
            signal_pid(pid, signal.SIGKILL)
        deadline = time.monotonic() + _DIE_S
        for pid, _ in found:
            if reap:
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, 0)
            while not reap and pid_alive(pid) and time.monotonic() < deadline:
                time.sleep(0.01)


def kill_strays(keep: Collection[int] = ()) -> None:
    """SIGKILL and reap every child of this process but ``keep``, and its process group, until none is left.

    A subreaper's children include the orphans of its descendants; killing
    one orphans its own children, which become ours in turn, hence rounds.
    """
    me, kept = os.getpid(), set(keep)
    _kill_rounds(lambda: [(pid, pgid) for pid, pgid in children(me) if pid not in kept], reap=True)


def children(parent: int) -> List[Tuple[int, int]]:
    """``(pid, process group)`` of every child of ``parent`` (zombies too), from ``/proc``; [] without it."""
    found = []
    for pid in _pids():
        fields = _stat(pid)
        if len(fields) > 2 and int(fields[1]) == parent:
            found.append((pid, int(fields[2])))
    return found


def reap_strays(keep: Collection[int]) -> None:
    """Reap, without waiting, children that exited but those in ``keep`` (which their owner reaps).

    Stops at the first exited child in ``keep``: the caller collects it, and
    the next call goes on past it.
    """
    if not hasattr(os, "waitid"):
        return
    while True:
        try:
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return
        if info is None or info.si_pid in keep:
            return
        with contextlib.suppress(ChildProcessError):
            os.waitpid(info.si_pid, os.WNOHANG)


def kill_tagged(app_id: str) -> None:
    """SIGKILL every process whose environment says it belongs to ``app_id`` (but this one), with its group.

    For processes nobody reaps any more (their supervisor and its guard are
    gone) that left their replica's process group.  One that cleared its
    environment escapes this; a subreaper catches it instead.
    """
    tag = f"{ENV_APP_ID}={app_id}".encode()
    me = os.getpid()

    def tagged() -> List[Tuple[int, int]]:
        found = []
        for pid in _pids():
            try:
                with open(f"/proc/{pid}/environ", "rb") as environ:
                    if pid == me or tag not in environ.read().split(b"\0") or not pid_alive(pid):
                        continue
                found.append((pid, os.getpgid(pid)))
            except OSError:
                continue
        return found

    _kill_rounds(tagged, reap=False)


def kill_orphans(pgids: List[Tuple[int, int]], grace_s: float, app_id: str,
                 recorded_at: Optional[float] = None) -> None:
    """Stop what an app whose supervisor is gone left running: its replicas' groups, then its strays.

    ``recorded_at``: when ``pgids`` were last seen running.  A leader alive
    now that started after that is not the replica recorded but a process
    that got its pid since (a record that could not be updated, read again
    and again): its group is left alone.  A dead leader's group is stopped,
    for the kernel gives no new group the id of one that still has members.
    """
    if recorded_at is not None:
        late = recorded_at + _CLOCK_SLACK_S
        pgids = [(pid, pgid) for pid, pgid in pgids if (started_at(pid) or late) <= late]
    kill_groups(pgids, grace_s)
    kill_tagged(app_id)


__all__ = [
    "children",
    "group_alive",
    "kill_groups",
    "kill_orphans",
    "kill_strays",
    "kill_tagged",
    "pid_alive",
    "reap_strays",
    "set_child_subreaper",
    "signal_group",
    "signal_pid",
    "started_at",
]
