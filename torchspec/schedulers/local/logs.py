"""A replica's log: how the supervisor stores its output, how ``logs`` reads it back, and when it ends.

Each replica's output is stored once, in ``output.log``, as it was printed,
one line per line with a one-byte tag in front: ``o`` stdout, ``e`` stderr,
``m`` a line of torchspec's own (the restart markers, shown in every
stream).  Time is kept coarsely: a ``t<epoch seconds>`` line goes before a
line whenever at least :data:`TIME_MARK_S` has passed since the last one, so a
fast writer pays one byte per line and ``--since``/``--until`` select to that
resolution.  The stdout, stderr and combined views are filters of the one
file; nothing is written twice.

Apps from torchspec versions before this format have ``stdout.log``,
``stderr.log`` and ``combined.log`` of ``ISO-time<TAB>text`` lines; they are
read with :func:`parse_log_line`.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from datetime import datetime, timezone
from typing import IO, TYPE_CHECKING, Any, Callable, Iterator, Mapping, Optional, Tuple

from torchspec.schedulers.local.state import NO_SPACE
from torchspec.schedulers.local.states import TERMINAL

if TYPE_CHECKING:  # the supervisor imports this module for LogWriter alone, and must start fast
    from torchspec.schedulers.api import Stream
    from torchspec.schedulers.local.request import LocalRequest

#: A time line is written before a line when at least this many seconds passed since the last one.
TIME_MARK_S = 0.01

_TAGS = {"stdout": b"o", "stderr": b"e"}
_MARKER = b"m"
_TIME = b"t"
#: The tags each view shows.
_VIEWS = {"stdout": (b"o", b"m"), "stderr": (b"e", b"m"), "combined": (b"o", b"e", b"m")}


class LogTrouble:
    """The first write that failed in any log of one app, shared by its writers, and what each then drops.

    A writer that cannot write stores nothing more (the replica keeps
    running; its output is read and dropped, so it never blocks on a full
    pipe).  A disk with no room stops every writer of the app at once: the
    space the supervisor then frees is for the app's state, not for another
    replica's output.  ``on_trouble`` is called once, at the first failure,
    in the failing writer's thread.
    """

    def __init__(self, on_trouble: Callable[[], None] = lambda: None) -> None:
        #: the first error, its ``filename`` the log's path; the time it happened
        self.error: Optional[OSError] = None
        self.since = 0.0
        #: set once a write found no room: every writer drops what it is given from then on
        self.no_space = False
        self._on_trouble = on_trouble
        self._lock = threading.Lock()

    def failed(self, path: str, e: OSError) -> None:
        with self._lock:
            first = self.error is None
            if first:
                self.error, self.since = OSError(e.errno, e.strerror, path), time.time()
            self.no_space = self.no_space or e.errno in NO_SPACE
        if first:
            self._on_trouble()


class LogWriter:
    """Appends a replica's output to its ``output.log``; lines from several pipes, one lock, one file.

    The time is taken inside the lock, so time lines are in file order and
    ``log_iter`` can stop at the first line past ``until``.  A write that
    fails (the disk full, read-only) is reported to ``trouble`` and leaves
    whole lines only: the piece of a line a short write left is cut off.
    From then on the writer counts the lines it drops (:attr:`lost_lines`).
    """

    def __init__(self, path: str, trouble: Optional[LogTrouble] = None) -> None:
        self.path = path
        self.trouble = trouble or LogTrouble()
        self.lost_lines = 0
        self._lock = threading.Lock()
        self._closed = False
        self._last_mark = float("-inf")
        self._file: Optional[IO[bytes]] = None
        try:
            self._file = open(path, "ab", buffering=0)
        except OSError as e:
            self.trouble.failed(path, e)

    def write(self, stream: str, data: bytes) -> None:
        """One line the replica printed on ``stream`` (``stdout`` or ``stderr``)."""
        self._append(_TAGS[stream], data if data.endswith(b"\n") else data + b"\n")

    def write_lines(self, stream: str, lines: bytes) -> None:
        """Whole lines the replica printed on ``stream``, each ending with a newline: one write for all."""
        tag = _TAGS[stream]
        self._append(tag, lines[:-1].replace(b"\n", b"\n" + tag) + b"\n")

    def marker(self, text: str) -> None:
        """A line of torchspec's own, shown in every view of the log."""
        self._append(_MARKER, text.encode("utf-8") + b"\n")

    def _append(self, tag: bytes, data: bytes) -> None:
        """``data``: lines ending with newlines, every one but the first already tagged."""
        with self._lock:
            if self._closed:
                return
            if self._file is None or self.trouble.no_space:
                self.lost_lines += data.count(b"\n")
                return
            now = time.time()
            if now - self._last_mark >= TIME_MARK_S:
                self._last_mark = now
                self._store(_TIME + b"%.6f\n" % now + tag + data)
            else:
                self._store(tag + data)

    def _store(self, buf: bytes) -> None:
        """Append ``buf``; where that fails, keep the whole lines that made it, count the rest and stop."""
        assert self._file is not None
        written = 0
        try:
            while written < len(buf):
                written += self._file.write(memoryview(buf)[written:])
        except OSError as e:
            kept = buf.rfind(b"\n", 0, written) + 1
            if kept < written:  # a line cut short: take it back, so the log holds whole lines only
                fd = self._file.fileno()
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, os.fstat(fd).st_size - (written - kept))
            self.lost_lines += buf.count(b"\n", kept)
            self._file.close()
            self._file = None
            self.trouble.failed(self.path, e)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._file is not None:
                self._file.close()


class OutputParser:
    """Reads ``output.log`` lines for :func:`~torchspec.schedulers.logfile.follow_lines`: one view of it.

    Stateful: a time line sets the time of the lines after it.  Lines of
    other views, and time lines, come back with no text, which
    ``follow_lines`` skips.
    """

    def __init__(self, stream: "Stream") -> None:
        self.tags = _VIEWS[getattr(stream, "value", stream)]
        self.now: Optional[datetime] = None

    def __call__(self, raw: bytes, with_time: bool = True) -> Tuple[Optional[datetime], Optional[str]]:
        tag = raw[:1]
        if tag == _TIME:
            if with_time:
                try:
                    self.now = datetime.fromtimestamp(float(raw[1:]), timezone.utc)
                except ValueError:
                    pass
            return None, None
        if tag not in self.tags:
            return None, None
        return self.now, raw[1:].decode("utf-8", errors="replace")


def view_blocks(path: str, stream: "Stream", prefix: bytes, size: int = 1 << 20) -> Iterator[bytes]:
    """The lines of one view of ``output.log``, each with ``prefix`` for its tag, a block of whole lines at a time.

    What :class:`OutputParser` and the CLI's printing make of the file, line
    by line, done over megabyte blocks instead: for the combined view (the
    default) with ``bytes.replace`` on the tags that follow each newline, so
    ``logs`` of a big log runs at about the speed of reading it.  Carriage
    returns before a newline are dropped, and bytes that are not UTF-8
    replaced, as the text path does.
    """
    import re

    view = getattr(stream, "value", stream)
    keep = _VIEWS[view]
    # the tag the prefix starts with goes first: replaced later, it would find the prefixes already put in
    order = sorted(keep, key=lambda tag: tag != prefix[:1])
    with open(path, "rb") as log:
        rest = b""
        while True:
            data = log.read(size)
            block = rest + data
            end = block.rfind(b"\n") + 1 if data else len(block)
            if not block:
                return
            if end == 0:
                rest = block
                continue
            block, rest = block[:end], block[end:]
            if not block.endswith(b"\n"):
                block += b"\n"  # the file's last line, unfinished
            if view == "combined":
                text = b"\n" + block
                if b"\n" + _TIME in text:
                    text = re.sub(rb"\nt[^\n]*(?=\n)", b"", text)
                for tag in order:  # every line starts with its tag: a tag after a newline starts a line
                    text = text.replace(b"\n" + tag, b"\n" + prefix)
                text = text[1:]
            else:
                text = b"".join([prefix + line[1:] + b"\n" for line in block.split(b"\n")[:-1] if line[:1] in keep])
            if b"\r\n" in text:
                text = re.sub(rb"\r+\n", b"\n", text)  # as rstrip("\r\n") + "\n" does, line by line
            try:
                text.decode("utf-8")
            except UnicodeDecodeError:
                text = text.decode("utf-8", errors="replace").encode("utf-8")
            yield text
            if not data:
                return


def parse_log_line(raw: bytes, with_time: bool = True) -> tuple[Optional[datetime], str]:
    """Split a stored line into its timestamp and the replica's text; lines without one keep it all.

    Parsing the timestamp is most of the cost of reading logs, so it is skipped
    unless ``since``/``until`` need it.
    """
    stamp, sep, rest = raw.partition(b"\t")
    if sep and _looks_like_stamp(stamp):
        if not with_time:
            return None, rest.decode("utf-8", errors="replace")
        try:
            return datetime.fromisoformat(stamp.decode("ascii")), rest.decode("utf-8", errors="replace")
        except ValueError:
            pass
    return None, raw.decode("utf-8", errors="replace")


def _looks_like_stamp(stamp: bytes) -> bool:
    """``2026-11-22T21:14:12.366000+00:00``: cheap shape test before trusting the split."""
    return 19 <= len(stamp) <= 40 and stamp[4:5] == b"-" and stamp[10:11] == b"T"


def replica_finished(request: "LocalRequest", state: Mapping[str, Any], role_name: str, k: int) -> bool:
    """True once replica ``k`` can write no more: the app ended, or nothing can restart the replica.

    ``state`` must already account for a dead supervisor (the scheduler's
    ``_check_supervisor``), or a crashed app would be followed forever.
    """
    from torchspec.specs import RetryPolicy

    if state.get("state") in TERMINAL:
        return True
    role_state = state.get("roles", {}).get(role_name, {})
    replicas = role_state.get("replicas", [])
    if k >= len(replicas) or replicas[k].get("state") not in TERMINAL:
        return False
    for role in request.roles:
        if role.retry_policy == RetryPolicy.APPLICATION.value and state.get("app_restarts", 0) < role.max_retries:
            return False
    role = request.role(role_name)
    if role is None:
        return True
    if role.retry_policy == RetryPolicy.ROLE.value and role_state.get("restarts", 0) < role.max_retries:
        return False
    replica = replicas[k]
    if (
        role.retry_policy == RetryPolicy.REPLICA.value
        and replica.get("state") == "FAILED"
        and replica.get("restarts", 0) < role.max_retries
    ):
        return False
    return True


__all__ = ["LogTrouble", "LogWriter", "OutputParser", "TIME_MARK_S", "parse_log_line", "replica_finished", "view_blocks"]
