"""Reading a replica's log file whose lines start with a timestamp: what ``log_iter`` of
the ``local`` and ``slurm`` schedulers share.

Each scheduler writes ``STAMP<TAB>text`` lines in its own stamp format, so
it passes its own parser; the reading, the time window, the regex and the
following (``tail -f`` until the replica can write no more) are the same.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import BinaryIO, Callable, Iterator, Optional, Pattern, Tuple

#: ``parse(raw_line, with_time)`` -> (the line's time or None, its text); ``with_time`` False may skip the time.
LineParser = Callable[[bytes, bool], Tuple[Optional[datetime], str]]


def follow_lines(
    log: BinaryIO,
    parse: LineParser,
    pattern: Optional[Pattern[str]],
    since: Optional[datetime],
    until: Optional[datetime],
    should_tail: bool,
    done: Callable[[], bool],
    poll_s: float = 0.1,
) -> Iterator[str]:
    """The lines of ``log`` within [``since``, ``until``) that ``pattern`` matches, without their stamps.

    With ``should_tail`` the file is followed until ``done()`` (asked at most
    every ``poll_s`` seconds) says the writer has stopped, or ``until`` has
    passed; a last line without a newline is returned at the end.
    """
    with_time = since is not None or until is not None
    pending = b""
    finished = not should_tail
    last_poll = time.monotonic()
    while True:
        chunk = log.readline()
        if chunk:
            pending += chunk
            if not pending.endswith(b"\n"):
                continue
            when, text = parse(pending, with_time)
            pending = b""
            if when is not None and since is not None and when < since:
                continue
            if when is not None and until is not None and when >= until:
                return
            if pattern is None or pattern.search(text):
                yield text
            continue
        if finished:
            if pending:
                _, text = parse(pending + b"\n", False)
                if pattern is None or pattern.search(text):
                    yield text
            return
        if until is not None and datetime.now(timezone.utc) >= until:
            finished = True
            continue
        time.sleep(min(0.1, poll_s))
        if time.monotonic() - last_poll >= poll_s:
            last_poll = time.monotonic()
            finished = done()  # one more pass then reads what came meanwhile
