"""The supervisor's guard: a parent that outlives a killed supervisor and stops what it left running.

Right after the supervisor takes ``supervisor.lock`` it calls
:func:`start_guard`, which forks once: the child goes on as the supervisor,
the parent becomes its guard and does nothing but wait for it.  Both are
Linux child subreapers, so a replica's descendant orphaned by its parent,
even one in a session of its own (``setsid``), becomes the supervisor's
child (which kills it when the app ends); and when the supervisor dies, every
process it had (replicas and such orphans) becomes the guard's.

When the supervisor dies without ending the app (``kill -9``, the OOM
killer), the guard SIGKILLs every process it inherited, and each one's
process group, until none is left, then marks the app FAILED saying how the
supervisor died, and exits.  Having forked after the lock was taken, the
guard holds the lock too: to ``status``, the app is supervised until the
guard has cleaned up, and never seen half stopped.  A guard killed with its
supervisor (``kill -9`` of their process group) leaves the clean-up to the
next ``status`` or ``cancel`` (:func:`~torchspec.schedulers.processes.kill_orphans`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from types import FrameType
from typing import Any, Dict, Optional

from torchspec.schedulers.processes import kill_orphans, kill_strays, set_child_subreaper
from torchspec.schedulers.local.state import (
    now_iso,
    read_state,
    running_groups,
    saved_at,
    supervisor_died,
    update_state,
)
from torchspec.schedulers.local.states import TERMINAL


def start_guard(app_dir: str) -> None:
    """Fork; return in the child, which goes on as the supervisor, while the parent guards it and exits.

    Call it before any thread starts.  Where there is no ``fork`` it returns
    at once: the app runs unguarded, as it would anyway there.
    """
    if not hasattr(os, "fork"):
        return
    set_child_subreaper()
    pid = os.fork()
    if pid == 0:
        set_child_subreaper()
        return
    code = 1
    try:
        code = _guard(pid, app_dir)
    except BaseException:
        import traceback  # only now: the supervisor, forked from here, starts without it

        with contextlib.suppress(BaseException):  # never back into the supervisor's code from here
            traceback.print_exc()
    finally:
        with contextlib.suppress(BaseException):  # the log's disk may be full: exit all the same
            sys.stdout.flush()
        os._exit(code)


def _say(message: str) -> None:
    """One line in ``supervisor.log``, where it can be written (the disk may be full or read-only)."""
    with contextlib.suppress(OSError, ValueError):
        print(f"{now_iso()} guard: {message}", flush=True)


def _how(status: int) -> str:
    """`` (killed by SIGKILL)`` or `` (exit code 1)``: how a wait status says a process ended."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        with contextlib.suppress(ValueError):
            return f" (killed by {signal.Signals(number).name})"
        return f" (killed by signal {number})"
    return f" (exit code {os.waitstatus_to_exitcode(status)})"


def _guard(supervisor: int, app_dir: str) -> int:
    """Wait for the supervisor; if it left the app unfinished, stop every process of the app. Its exit code."""

    def forward(signum: int, frame: Optional[FrameType]) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(supervisor, signum)  # `kill GUARD` means the app, as for the supervisor

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    _, status = os.waitpid(supervisor, 0)
    from torchspec.errors import StateError  # only now: the supervisor, forked from here, starts without it

    try:
        state: Optional[Dict[str, Any]] = read_state(app_dir)
    except StateError as e:
        _say(f"{e}")
        state = None
    # no state: damaged (stop everything), or the folder is gone (`delete` after the app ended: nothing to do)
    unfinished = state.get("state") not in TERMINAL if state is not None else os.path.isdir(app_dir)
    if unfinished:
        _say(f"the supervisor (pid {supervisor}) died{_how(status)}; stopping every process of the app")
    kill_strays()  # the app's processes, reparented to us; none when the supervisor ended the app
    if not unfinished:
        return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1
    app_id = str((state or {}).get("app_id") or os.path.basename(app_dir))
    kill_orphans(running_groups(state or {}), 0, app_id, saved_at(state or {}))  # where no subreaper caught them
    try:
        update_state(app_dir, lambda current: supervisor_died(current, app_dir, _how(status)))
    except StateError as e:
        _say(f"cannot record that the app failed: {e}")
    return 1
