"""An engine that takes every connection and never answers: a loopback TCP server that reads for ever.

What a hung Ray dashboard, Docker engine, Kubernetes API server or slurmctld
looks like from the client: the connection is accepted (so no "connection
refused" comes), the request is read, and no byte ever comes back (a TLS
client waits for the server's hello for ever too).  Tests point a backend at
``black_hole.address`` and check that every command still ends, in time,
with an error naming it.  It listens on 127.0.0.1 only, on a port the kernel
picks, and closes every connection when the ``with`` block ends.
"""

from __future__ import annotations

import socket
import threading
from types import TracebackType
from typing import List, Optional, Type


class BlackHole:
    """``with BlackHole() as hole:`` a server at ``hole.address`` (``127.0.0.1:PORT``) that never answers."""

    def __init__(self) -> None:
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(128)
        self.port: int = self._listener.getsockname()[1]
        self.address = f"127.0.0.1:{self.port}"
        #: every connection accepted, so a test can tell the client did reach it
        self.accepted: List[socket.socket] = []
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="black-hole", daemon=True)

    def __enter__(self) -> "BlackHole":
        self._thread.start()
        return self

    def __exit__(self, kind: Optional[Type[BaseException]], value: Optional[BaseException],
                 traceback: Optional[TracebackType]) -> None:
        self.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:  # closed
                return
            with self._lock:
                self.accepted.append(conn)
            threading.Thread(target=self._swallow, args=(conn,), daemon=True).start()

    @staticmethod
    def _swallow(conn: socket.socket) -> None:
        """Read what the client sends, answer nothing, until it hangs up (or the hole is closed)."""
        try:
            while conn.recv(65536):
                pass
        except OSError:
            pass

    def close(self) -> None:
        self._closed.set()
        try:
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() (Linux)
        except OSError:
            pass
        self._listener.close()
        with self._lock:
            for conn in self.accepted:
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                conn.close()
        self._thread.join(timeout=5)
