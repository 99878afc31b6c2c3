"""Process groups on this machine: is a pid alive, and stopping groups nobody supervises any more.

Each replica runs in a process group of its own (a new session), so a replica
and everything it spawned are signalled together.  The supervisor stops its
own replicas; the scheduler uses :func:`kill_groups` only for the replicas of
a supervisor that is gone.
"""

from __future__ import annotations

import os
import signal
import time
from typing import List, Optional, Tuple


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
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as stat:
            # "pid (comm) S ...": comm may hold spaces or parens, the state follows the last ")"
            zombie = stat.read().rsplit(")", 1)[1].split()[0] == "Z"
        return zombie and len(os.listdir(f"/proc/{pid}/task")) <= 1
    except (OSError, IndexError):
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


__all__ = ["kill_groups", "pid_alive", "signal_group"]
