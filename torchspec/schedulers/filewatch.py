"""Waking when a folder changes, for schedulers whose apps live in files on this machine.

``torchspec wait`` on a local app should end when the app does, not at the
next poll.  On Linux the kernel says when a file is renamed into a folder,
as atomic writers replace their files (inotify, reached through libc with
ctypes: no dependency);
elsewhere, or where inotify cannot be had (a limit on watches, an odd
filesystem), :meth:`FolderWatch.wait` just sleeps, and callers keep polling
on their own schedule.
"""

from __future__ import annotations

import os
import select
import sys
import time
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    import ctypes

# from <sys/inotify.h>
_IN_MODIFY = 0x00000002
_IN_MOVED_TO = 0x00000080
_IN_DELETE = 0x00000200
_IN_DELETE_SELF = 0x00000400
_IN_NONBLOCK = 0o4000
_IN_CLOEXEC = 0o2000000
# Only what a writer does on purpose: a file renamed into place (how state files are replaced atomically),
# a file removed, the folder removed.  Not writes or closes: readers that open a lock file to test it
# would wake themselves.
_FOLDER_MASK = _IN_MOVED_TO | _IN_DELETE | _IN_DELETE_SELF
# A file being appended to (a log), or removed.
_IN_MOVE_SELF = 0x00000800
_FILE_MASK = _IN_MODIFY | _IN_DELETE_SELF | _IN_MOVE_SELF

_libc: Optional["ctypes.CDLL"] = None


def _inotify() -> Optional["ctypes.CDLL"]:
    """libc, when it has inotify (Linux); None elsewhere.  ctypes is imported only here, when a wait needs it
    (it costs `status` ~6 ms)."""
    global _libc
    if _libc is None and sys.platform.startswith("linux"):
        import ctypes

        # the process's own symbols first: they hold libc's, and ctypes.util.find_library would run
        # `ldconfig -p` (~25 ms of every wait); it is only asked where they do not
        for find in (lambda: None, _find_libc):
            try:
                libc = ctypes.CDLL(find(), use_errno=True)
                libc.inotify_init1, libc.inotify_add_watch  # noqa: B018 - present, or AttributeError
                _libc = libc
                break
            except (OSError, AttributeError):
                continue
    return _libc


def _find_libc() -> Optional[str]:
    import ctypes.util

    return ctypes.util.find_library("c")


class FolderWatch:
    """Tells when a file is renamed into (or removed from) one folder; events between two :meth:`wait`
    calls are not lost.

    Close it (or use it as a context manager) to free the kernel watch.
    """

    _mask = _FOLDER_MASK

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: Optional[int] = None
        libc = _inotify()
        if libc is None:
            return
        fd = libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        if fd < 0:
            return
        if libc.inotify_add_watch(fd, os.fsencode(path), self._mask) < 0:
            os.close(fd)
            return
        self._fd = fd

    @property
    def active(self) -> bool:
        """Whether changes wake :meth:`wait` (else it only sleeps)."""
        return self._fd is not None

    def wait(self, timeout: float) -> bool:
        """Block until a file was replaced or removed in the folder since the last call, or ``timeout`` passed.

        Returns whether a change was seen (always False without inotify).
        """
        if self._fd is None:
            time.sleep(max(0.0, timeout))
            return False
        ready, _, _ = select.select([self._fd], [], [], max(0.0, timeout))
        if not ready:
            return False
        try:
            while os.read(self._fd, 65536):  # drain: one wake for any number of events
                pass
        except BlockingIOError:
            pass
        return True

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> "FolderWatch":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class FileWatch(FolderWatch):
    """Tells when one file is written to (appended: a log being followed), moved or removed."""

    _mask = _FILE_MASK
