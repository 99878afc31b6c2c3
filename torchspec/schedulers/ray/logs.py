"""One replica's lines out of the job's log: the driver tags every line with its replica, stream and time.

Ray writes one log per job: the driver's output, with every actor's lines
forwarded into it (``(trainer/0 pid=42) [torchspec trainer/0 stdout TIME] text``).
``logs`` reads it through the Job Submission API (``get_job_logs``, or
``tail_job_logs`` to follow) and keeps the lines of one replica, of the
streams asked for, between ``since`` (inclusive) and ``until`` (exclusive).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Iterable, Iterator, Optional

from torchspec.schedulers.api import Stream
from torchspec.schedulers.ray.states import parse_line


@dataclass
class LineFilter:
    """Which tagged lines of the job's log ``logs`` keeps."""

    who: str
    stream: Optional[Stream] = None
    regex: Optional[str] = None
    since: Optional[datetime] = None
    until: Optional[datetime] = None

    def __post_init__(self) -> None:
        self.pattern = re.compile(self.regex) if self.regex else None

    def keep(self, line: str) -> Optional[str]:
        """The replica's text of ``line`` if it passes, else None."""
        parsed = parse_line(line)
        if parsed is None or parsed.who != self.who:
            return None
        if self.stream not in (None, Stream.COMBINED) and parsed.stream != Stream(self.stream).value:
            return None
        if self.since is not None and parsed.time < self.since:
            return None
        if self.until is not None and parsed.time >= self.until:
            return None
        if self.pattern is not None and not self.pattern.search(parsed.text):
            return None
        return parsed.text


def lines_of(chunks: Iterable[str]) -> Iterator[str]:
    """Whole lines out of chunks of text that may end mid-line; a last piece without ``\\n`` too."""
    rest = ""
    for chunk in chunks:
        rest += chunk
        *whole, rest = rest.split("\n")
        for line in whole:
            yield line + "\n"
    if rest:
        yield rest


def replica_lines(chunks: Iterable[str], keep: LineFilter) -> Iterator[str]:
    """The lines ``keep`` passes, in the log's order, as the replica wrote them."""
    for line in lines_of(chunks):
        text = keep.keep(line)
        if text is not None:
            yield text
