"""One replica's log for the browser: the last lines first, older ones on request, new ones as they come.

A log can be gigabytes and a tab must stay responsive, so a stream never
sends everything: it reads the log once through (keeping only the last
:data:`TAIL_LINES` in a bounded deque, counting the rest) and sends that
tail with the number of its first line; "load more" asks :func:`older` for
the lines before a number.  Following reads the log again from the start
with ``should_tail=True`` in a worker thread, skips the lines already sent
and hands each new one to the event loop, which wakes at once (a line
reaches the browser within milliseconds of being written).  Memory stays
flat whatever the log's size: the thread keeps at most :data:`TAIL_LINES`
lines waiting, dropping the oldest when the browser is slower than the job
(the browser is told, and can load them).

The lines are the job's own output, as ``torchspec logs`` prints them; what
a job prints is beyond torchspec (docs/security.md).
"""

from __future__ import annotations

import asyncio
import collections
import json
import re
import threading
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, AsyncIterator, Deque, Iterable, List, Mapping, Optional, Tuple

from torchspec.errors import UsageError

if TYPE_CHECKING:
    from torchspec.runner import Runner

#: Lines sent first, and per "load more".
TAIL_LINES = 1000
#: A longer line is cut (a 100 MB line without a newline would hang the tab).
MAX_LINE_CHARS = 20_000
#: A comment line this often keeps proxies and the browser from timing the stream out.
KEEPALIVE_S = 15.0


class NotFound(UsageError):
    """A role or replica the app does not have (404)."""


@dataclass(frozen=True)
class LogRequest:
    """What the browser asked for, checked: a replica that exists, a regex that compiles, a time that parses."""

    handle: str
    role: str
    k: int
    regex: Optional[str] = None
    since: Optional[datetime] = None
    follow: bool = False

    def lines(self, runner: "Runner", follow: bool = False) -> Iterable[str]:
        return runner.log_lines(self.handle, self.role, self.k, regex=self.regex, since=self.since,
                                should_tail=follow)


def parse_request(runner: "Runner", handle: str, role: str, k: int, query: Mapping[str, str]) -> LogRequest:
    """The request the query means, or a UsageError saying what is wrong (bad regex or since: 400; unknown
    app, role or replica: 404; a capability the scheduler lacks: 400, from ``Runner.check_log_request``)."""
    regex = query.get("regex") or None
    if regex is not None:
        try:
            re.compile(regex)
        except re.error as e:
            raise UsageError(f"the search {regex!r} is not a regular expression: {e}",
                             "use Python's syntax, e.g. ERROR|WARN; escape special characters with \\") from None
    since = parse_since(query.get("since") or None)
    follow = query.get("follow", "1") not in ("0", "false", "off")
    status = runner.require_status(handle)
    roles = {r.role: len(r.replicas) for r in status.roles}
    if roles and role not in roles:
        raise NotFound(f"{handle} has no role {role!r}", f"its roles: {', '.join(sorted(roles))}")
    if roles and not 0 <= k < max(1, roles[role]):
        raise NotFound(f"role {role!r} of {handle} has no replica {k}",
                       f"its replicas: 0 to {max(0, roles[role] - 1)}")
    runner.check_log_request(handle, should_tail=follow and not status.is_terminal(), since=since)
    return LogRequest(handle, role, k, regex, since, follow and not status.is_terminal())


def parse_since(text: Optional[str]) -> Optional[datetime]:
    """``since`` as ``torchspec logs --since`` reads it (``5m``, ``1h30m``, ISO 8601); a UsageError if not."""
    if text is None:
        return None
    from torchspec.times import parse_when

    try:
        return parse_when(text)
    except UsageError as e:
        raise UsageError(f"since: {e.message}", e.hint) from None


def shown(line: str) -> str:
    """A line as sent: without its newline, cut at :data:`MAX_LINE_CHARS`."""
    line = line.rstrip("\r\n")
    if len(line) > MAX_LINE_CHARS:
        return line[:MAX_LINE_CHARS] + f" ... ({len(line) - MAX_LINE_CHARS} more characters)"
    return line


def tail(runner: "Runner", request: LogRequest) -> Tuple[int, List[str]]:
    """(how many lines there are, the last :data:`TAIL_LINES` of them): one pass, bounded memory."""
    kept: Deque[str] = collections.deque(maxlen=TAIL_LINES)
    total = 0
    for line in request.lines(runner):
        kept.append(line)
        total += 1
    return total, [shown(line) for line in kept]


def older(runner: "Runner", request: LogRequest, before: int) -> Tuple[int, List[str]]:
    """(first line number, the up to :data:`TAIL_LINES` lines before line ``before``)."""
    start = max(0, before - TAIL_LINES)
    found: List[str] = []
    for index, line in enumerate(request.lines(runner)):
        if index >= before:
            break
        if index >= start:
            found.append(shown(line))
    return start, found


def event(name: str, data: Any) -> str:
    """One server-sent event; JSON escapes newlines, so the data is one ``data:`` line."""
    return f"event: {name}\ndata: {json.dumps(data)}\n\n"


class Follower:
    """A worker thread reading a followed log, and the bounded buffer it hands lines over in."""

    def __init__(self, runner: "Runner", request: LogRequest, skip: int) -> None:
        self.runner, self.request, self.skip = runner, request, skip
        self.buffer: Deque[str] = collections.deque(maxlen=TAIL_LINES)
        self.total = skip  # the number of the line after the last one read
        self.done = False
        self.error: Optional[str] = None
        self.stopped = False
        self._lock = threading.Lock()
        self._signalled = False
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()

    def start(self) -> None:
        threading.Thread(target=self._read, name="torchspec-ui-log", daemon=True).start()

    def _read(self) -> None:
        """Runs in the thread; ends with the log (the app ended) or at the first line after :meth:`stop`."""
        from torchspec.ui.listing import error_text

        try:
            for index, line in enumerate(self.request.lines(self.runner, follow=True)):
                if self.stopped:
                    return
                if index < self.skip:
                    continue
                with self._lock:
                    self.buffer.append(shown(line))
                    self.total = index + 1
                    self._notify()
        except Exception as e:  # noqa: BLE001 - shown to the user, the server goes on
            self.error = error_text(e)
        with self._lock:
            self.done = True
            self._notify()

    def _notify(self) -> None:
        """Wake the event loop once per batch (not per line: a fast job would flood the loop)."""
        if not self._signalled:
            self._signalled = True
            self._loop.call_soon_threadsafe(self._wake.set)

    def stop(self) -> None:
        self.stopped = True

    async def batches(self) -> AsyncIterator[Optional[Tuple[int, List[str]]]]:
        """(first line number, lines) as they come; None every :data:`KEEPALIVE_S` without any."""
        while True:
            try:
                await asyncio.wait_for(self._wake.wait(), KEEPALIVE_S)
            except asyncio.TimeoutError:
                yield None
                continue
            self._wake.clear()
            with self._lock:
                lines = list(self.buffer)
                self.buffer.clear()
                start, done = self.total - len(lines), self.done
                self._signalled = False
            if lines:
                yield start, lines
            if done:
                return


async def stream(runner: "Runner", request: LogRequest) -> AsyncIterator[str]:
    """The SSE events of one log: ``lines`` ({start, lines}), ``failure`` ({error}), then ``end``."""
    from torchspec.ui.listing import error_text

    try:
        total, lines = await asyncio.to_thread(tail, runner, request)
    except Exception as e:  # noqa: BLE001
        yield event("failure", {"error": error_text(e)})
        yield event("end", {})
        return
    yield event("lines", {"start": total - len(lines), "lines": lines, "total": total})
    if request.follow:
        follower = Follower(runner, request, total)
        follower.start()
        try:
            async for batch in follower.batches():
                if batch is None:
                    yield ": keepalive\n\n"
                else:
                    yield event("lines", {"start": batch[0], "lines": batch[1]})
            if follower.error:
                yield event("failure", {"error": follower.error})
        finally:
            follower.stop()
    yield event("end", {})
