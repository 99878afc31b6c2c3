"""Timestamped log lines, as ``log_iter`` of every scheduler reads them.

``local`` and ``slurm`` write their own line formats to files, so they pass
their own parser to :func:`follow_lines`; the
reading, the time window, the regex and the following (``tail -f`` until the
replica can write no more) are the same.  Docker and the kubelet stream
``RFC3339NANO text`` lines: :func:`stamped_lines` reads those.
"""

from __future__ import annotations

import re
import time
from datetime import datetime, timedelta, timezone
from typing import BinaryIO, Callable, Iterable, Iterator, Optional, Pattern, Tuple

#: ``parse(raw_line, with_time)`` -> (the line's time or None, its text, or None for a line that is not shown,
#: such as a time mark); ``with_time`` False may skip the time.
LineParser = Callable[[bytes, bool], Tuple[Optional[datetime], Optional[str]]]


def follow_lines(
    log: BinaryIO,
    parse: LineParser,
    pattern: Optional[Pattern[str]],
    since: Optional[datetime],
    until: Optional[datetime],
    should_tail: bool,
    done: Callable[[], bool],
    poll_s: float = 0.1,
    wait: Optional[Callable[[float], object]] = None,
) -> Iterator[str]:
    """The lines of ``log`` within [``since``, ``until``) that ``pattern`` matches, without their stamps.

    With ``should_tail`` the file is followed until ``done()`` (asked at most
    every ``poll_s`` seconds) says the writer has stopped, or ``until`` has
    passed; a last line without a newline is returned at the end.  At the end
    of the file it pauses with ``wait(seconds)``: ``time.sleep`` unless the
    caller can be woken by the write itself (a :class:`~.filewatch.FileWatch`).
    """
    select = _Selection(parse, pattern, since, until)
    if not should_tail:  # the whole file as it is: the file's own line iterator is the fastest reader
        for raw in log:
            text = select(raw if raw.endswith(b"\n") else raw + b"\n")
            if select.past_until:
                return
            if text is not None:
                yield text
        return
    pending = b""
    finished = False
    last_poll = time.monotonic()
    while True:
        chunk = log.readline()
        if chunk:
            pending += chunk
            if not pending.endswith(b"\n"):
                continue
            text, pending = select(pending), b""
            if select.past_until:
                return
            if text is not None:
                yield text
            continue
        if finished:
            text = select(pending + b"\n") if pending else None
            if text is not None and not select.past_until:
                yield text
            return
        if until is not None and datetime.now(timezone.utc) >= until:
            finished = True
            continue
        (wait or time.sleep)(min(0.1, poll_s))
        if time.monotonic() - last_poll >= poll_s:
            last_poll = time.monotonic()
            finished = done()  # one more pass then reads what came meanwhile


class _Selection:
    """Which stored lines ``follow_lines`` returns: parsed, in the time window, matching the pattern."""

    def __init__(self, parse: LineParser, pattern: Optional[Pattern[str]], since: Optional[datetime],
                 until: Optional[datetime]) -> None:
        self.parse, self.pattern, self.since, self.until = parse, pattern, since, until
        self.with_time = since is not None or until is not None
        #: set once a line at or after ``until`` was read: nothing later can be in the window
        self.past_until = False

    def __call__(self, raw: bytes) -> Optional[str]:
        """The text of one complete stored line if it is to be shown, else None."""
        when, text = self.parse(raw, self.with_time)
        if text is None:
            return None
        if when is not None:
            if self.since is not None and when < self.since:
                return None
            if self.until is not None and when >= self.until:
                self.past_until = True
                return None
        if self.pattern is not None and not self.pattern.search(text):
            return None
        return text


_RFC3339 = re.compile(rb"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d) ")


def parse_stamp(raw: bytes) -> Tuple[Optional[datetime], bytes]:
    """Split an RFC 3339 timestamp (nanoseconds allowed, truncated to microseconds) and its space off a line."""
    match = _RFC3339.match(raw)
    if match is None:
        return None, raw
    fraction = (match.group(2) or b"0")[:6].ljust(6, b"0")
    when = datetime.strptime(match.group(1).decode() + "." + fraction.decode(), "%Y-%m-%dT%H:%M:%S.%f")
    zone = match.group(3).decode()
    offset = timedelta(0) if zone == "Z" else (1 if zone[0] == "+" else -1) * timedelta(
        hours=int(zone[1:3]), minutes=int(zone[4:6]))
    return when.replace(tzinfo=timezone(offset)), raw[match.end():]


def stamped_lines(chunks: Iterable[bytes]) -> Iterator[Tuple[Optional[datetime], str]]:
    """``(time, text)`` of every line of a log streamed with timestamps (Docker's, the kubelet's).

    Chunks may end anywhere in a line; each text ends with ``\\n``.
    """
    pending = b""
    for chunk in chunks:
        pending += chunk
        *complete, pending = pending.split(b"\n")
        for raw in complete:
            when, text = parse_stamp(raw)
            yield when, text.decode("utf-8", errors="replace") + "\n"
    if pending:
        when, text = parse_stamp(pending)
        yield when, text.decode("utf-8", errors="replace") + "\n"
