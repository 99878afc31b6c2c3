"""The local supervisor's stop signals: the handler must take no lock.

A Python signal handler runs in the main thread between any two bytecodes,
also while that thread holds a lock inside ``threading.Event.clear()`` or
``wait()`` (the main loop calls both ten times a second).  A handler that
called ``Event.set()`` there waited for that lock for ever: the supervisor
hung, held its lock (so it looked alive), and its app stayed RUNNING after a
``cancel`` that had returned 0 (CI saw it once in 50 concurrent cancels).
"""

from __future__ import annotations

import signal
import threading

from torchspec.schedulers.local.supervisor import Supervisor


def test_the_stop_signal_handler_returns_while_the_wake_event_is_locked() -> None:
    supervisor = Supervisor.__new__(Supervisor)  # no app folder: only the handler's own state is used
    supervisor.wake = threading.Event()
    supervisor.cancelled = False
    handler = threading.Thread(target=supervisor._on_signal, args=(signal.SIGTERM, None), daemon=True)
    with supervisor.wake._cond:  # type: ignore[attr-defined]  # where the main thread is when the signal lands
        handler.start()
        handler.join(timeout=5)
        assert not handler.is_alive(), "the handler waited for a lock the interrupted thread holds"
    assert supervisor.cancelled

