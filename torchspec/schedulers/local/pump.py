"""The supervisor's one I/O thread: every replica's output pipes and process exits, in one selector loop.

A thread per pipe costs a thread switch per line and, at a thousand
replicas, two thousand threads fighting for the GIL when they all end at
once (a cancel).  One thread waiting on every pipe in a selector reads
whatever is ready, splits it into lines as ``readline(MAX_LINE)`` would, and
hands the complete lines of one read to the replica's
:class:`~torchspec.schedulers.local.logs.LogWriter` in one write.  Where the
platform has pidfds (Linux 5.3+), the same loop learns that a replica's main
process exited the moment it does, without reaping it, so the supervisor
neither polls nor scans its replicas.
"""

from __future__ import annotations

import os
import selectors
import threading
from typing import Any, Callable, List, Optional, Tuple

from torchspec.schedulers.local.logs import LogWriter

#: Longer lines are split (each piece ended with a newline) so a program printing without newlines cannot grow
#: the supervisor's memory.
MAX_LINE = 1 << 16

# Selectors that see fds registered while another thread waits in them; the others are woken to look again.
_LIVE_SELECTORS = tuple(getattr(selectors, name) for name in ("EpollSelector", "KqueueSelector")
                        if hasattr(selectors, name))


def split_lines(buf: bytes) -> Tuple[List[bytes], bytes]:
    """The lines ``readline(MAX_LINE)`` would return from ``buf``, and the incomplete rest."""
    lines: List[bytes] = []
    start, size = 0, len(buf)
    while True:
        nl = buf.find(b"\n", start, start + MAX_LINE)
        if nl >= 0:
            lines.append(buf[start:nl + 1])
            start = nl + 1
        elif size - start >= MAX_LINE:
            lines.append(buf[start:start + MAX_LINE] + b"\n")
            start += MAX_LINE
        else:
            return lines, buf[start:]


class Drain:
    """Tells when every pipe of one process has been read to its end."""

    def __init__(self, pipes: int) -> None:
        self.left = pipes
        self.done = threading.Event()
        if pipes <= 0:
            self.done.set()

    def closed_one(self) -> None:
        self.left -= 1
        if self.left <= 0:
            self.done.set()


class _Pipe:
    """One pipe being copied into a log: its fd, its stream and the line it has not finished yet."""

    __slots__ = ("fd", "logs", "stream", "drain", "rest")

    def __init__(self, fd: int, logs: LogWriter, stream: str, drain: Drain) -> None:
        self.fd, self.logs, self.stream, self.drain = fd, logs, stream, drain
        self.rest = b""

    def feed(self, data: bytes) -> None:
        buf = self.rest + data
        end = buf.rfind(b"\n") + 1
        if end <= MAX_LINE and len(buf) - end < MAX_LINE:  # no line to split: one write of whole lines
            self.rest = buf[end:]
            if end:
                self.logs.write_lines(self.stream, buf[:end])
            return
        lines, self.rest = split_lines(buf)
        if lines:
            self.logs.write_lines(self.stream, b"".join(lines))

    def end(self) -> None:
        if self.rest:
            self.logs.write_lines(self.stream, self.rest + b"\n")
            self.rest = b""


def _report() -> None:
    """The traceback of the exception being handled, in ``supervisor.log`` where it can still be written."""
    import traceback

    try:
        traceback.print_exc()
    except (OSError, ValueError):  # the disk full, read-only: the pump must go on reading every pipe
        pass


class Pump:
    """One daemon thread that copies pipes into logs and reports process exits; started on first use."""

    def __init__(self) -> None:
        self._selector = selectors.DefaultSelector()
        self._live = isinstance(self._selector, _LIVE_SELECTORS)
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._thread: Optional[threading.Thread] = None
        self._lock = threading.Lock()

    def _register(self, fd: int, data: Any) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="torchspec-pump", daemon=True)
                self._thread.start()
            self._selector.register(fd, selectors.EVENT_READ, data)
        if not self._live:
            try:
                os.write(self._wake_w, b"\0")
            except BlockingIOError:
                pass  # already due to wake

    def follow(self, pipes: List[Tuple[Any, str]], logs: LogWriter) -> Drain:
        """Copy each ``(pipe, stream)`` into ``logs`` until its end; the pipes are closed then."""
        drain = Drain(len(pipes))
        for pipe, stream in pipes:
            fd = os.dup(pipe.fileno())  # the Popen's file object is closed here; the pump owns the copy
            pipe.close()
            self._register(fd, _Pipe(fd, logs, stream, drain))
        return drain

    def watch_exit(self, pid: int, on_exit: Callable[[], None]) -> bool:
        """Call ``on_exit`` (in the pump's thread) once process ``pid`` exits; False where that cannot be
        watched (no pidfds), and the caller must look for itself."""
        pidfd_open = getattr(os, "pidfd_open", None)
        if pidfd_open is None:
            return False
        try:
            fd = pidfd_open(pid)
        except OSError:
            return False
        self._register(fd, on_exit)
        return True

    def _loop(self) -> None:
        while True:
            for key, _ in self._selector.select():
                try:
                    self._dispatch(key)
                except Exception:  # one bad callback must not stop every replica's logs
                    _report()

    def _dispatch(self, key: "selectors.SelectorKey") -> None:
        if key.data is None:
            try:
                os.read(self._wake_r, 4096)
            except BlockingIOError:
                pass
        elif isinstance(key.data, _Pipe):
            self._read(key.data)
        else:
            self._unregister(key.fd)
            key.data()

    def _unregister(self, fd: int) -> None:
        with self._lock:
            self._selector.unregister(fd)
        os.close(fd)

    def _read(self, pipe: _Pipe) -> None:
        try:
            data = os.read(pipe.fd, MAX_LINE)
        except OSError:
            data = b""
        if data:
            pipe.feed(data)
            return
        pipe.end()
        self._unregister(pipe.fd)
        pipe.drain.closed_one()


__all__ = ["Drain", "MAX_LINE", "Pump", "split_lines"]
