"""Points in time and durations as people type them: ``5m``, ``1h30m``, ``2d``, or an ISO 8601 time.

One reading for every command and page that takes a time (``logs --since``, ``list --since``, ``cancel
--older-than``, the dashboard's log view), so ``5m`` means the same everywhere.  A bare number is refused:
``--since 5`` read as seconds showed nothing, and whoever typed it meant minutes as often.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import Optional

from torchspec.errors import UsageError

_UNITS = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION_RE = re.compile(r"(\d+(?:\.\d+)?)(w|d|h|min|m|sec|s)")
EXAMPLES = "30s, 5m, 1h, 2d, 1w, 1h30m"


def parse_duration(text: str) -> timedelta:
    """A duration (``90s``, ``5m``, ``1h30m``, ``2d``, ``1w``); a UsageError naming what is accepted if not."""
    value = text.strip()
    if re.fullmatch(r"\d+(?:\.\d+)?", value):
        raise UsageError(f"{text!r} has no unit", f"give one: {value}s, {value}m, {value}h or {value}d (seconds,"
                         " minutes, hours or days)")
    compact = value.replace(" ", "").lower()
    if not compact or _DURATION_RE.sub("", compact) != "":
        raise UsageError(f"cannot read {text!r} as a duration", f"give a number and a unit: {EXAMPLES}")
    try:
        return timedelta(seconds=sum(float(n) * _UNITS[u] for n, u in _DURATION_RE.findall(compact)))
    except OverflowError:
        raise UsageError(f"{text!r} is out of range", f"give a shorter duration: {EXAMPLES}") from None


def parse_when(text: str, now: Optional[datetime] = None) -> datetime:
    """A point in time: ISO 8601, ``now``, or a duration back from ``now`` (default: this moment).

    Naive local time, as the schedulers' log readers compare: an ISO time without a zone is local time, one
    with a zone is converted to it.  A UsageError naming what is accepted when ``text`` is neither.
    """
    value = text.strip()
    now = now or datetime.now()
    if value.lower() == "now":
        return now
    compact = value.replace(" ", "").lower()
    if re.fullmatch(r"\d+(?:\.\d+)?", value) or (compact and _DURATION_RE.sub("", compact) == ""):
        try:
            return now - parse_duration(value)
        except OverflowError:
            raise UsageError(f"{text!r} is out of range", f"give a shorter duration: {EXAMPLES}") from None
    iso = value[:-1] + "+00:00" if value.endswith(("Z", "z")) else value
    try:
        when = datetime.fromisoformat(iso)
    except ValueError:
        raise UsageError(f"cannot read {text!r} as a time",
                         "use an ISO 8601 timestamp (2024-05-01T12:00:00) or a duration back from now "
                         f"({EXAMPLES})") from None
    if when.tzinfo is not None:
        when = when.astimezone().replace(tzinfo=None)
    return when


def parse_when_utc(text: str, now: Optional[datetime] = None) -> datetime:
    """:func:`parse_when` as an aware UTC time (what the schedulers report an app's creation in)."""
    return parse_when(text, now).astimezone(timezone.utc)


def utc_from_epoch(seconds: Optional[float]) -> Optional[datetime]:
    """An aware UTC time from seconds since the epoch; None for None or 0 (an engine that did not say)."""
    if not seconds:
        return None
    try:
        return datetime.fromtimestamp(seconds, timezone.utc)
    except (OverflowError, OSError, ValueError):
        return None


def utc_from_iso(text: Optional[str]) -> Optional[datetime]:
    """An aware UTC time from ISO 8601 (``Z`` or an offset; no zone: local time); None where it is not one."""
    if not text:
        return None
    value = text.strip()
    try:
        when = datetime.fromisoformat(value[:-1] + "+00:00" if value.endswith(("Z", "z")) else value)
    except ValueError:
        return None
    return when.astimezone(timezone.utc)


def age(when: Optional[datetime], now: Optional[datetime] = None) -> str:
    """How long ago ``when`` was, short (``45s``, ``12m``, ``3h``, ``5d``): what ``list`` shows; "" if unknown."""
    if when is None:
        return ""
    seconds = max(0, int(((now or datetime.now(timezone.utc)) - when).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
