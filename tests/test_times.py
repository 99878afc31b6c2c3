"""torchspec.times: the one reading of times and durations (logs --since, list --since, cancel --older-than)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from torchspec.errors import UsageError
from torchspec.times import age, parse_duration, parse_when, parse_when_utc, utc_from_epoch, utc_from_iso

NOW = datetime(2024, 5, 1, 12, 0, 0)


@pytest.mark.parametrize("text, seconds", [("90s", 90), ("5m", 300), ("5min", 300), ("1h30m", 5400), ("2d", 172800),
                                           ("1w", 604800), ("1.5h", 5400), (" 10 m ", 600), ("3sec", 3)])
def test_durations(text: str, seconds: int) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)
    assert parse_when(text, NOW) == NOW - timedelta(seconds=seconds)


def test_times() -> None:
    assert parse_when("now", NOW) == NOW
    assert parse_when("2024-04-30T08:15:00", NOW) == datetime(2024, 4, 30, 8, 15)
    utc = parse_when("2024-04-30T08:15:00Z", NOW)
    assert utc.tzinfo is None  # converted to local time, as the schedulers' log readers expect naive datetimes
    assert utc == datetime(2024, 4, 30, 8, 15, tzinfo=timezone.utc).astimezone().replace(tzinfo=None)
    assert parse_when_utc("2024-04-30T08:15:00+02:00") == datetime(2024, 4, 30, 6, 15, tzinfo=timezone.utc)


@pytest.mark.parametrize("bad, said", [("yesterday", "cannot read"), ("5 parsecs", "cannot read"), ("", "cannot read"),
                                       ("m5", "cannot read"), ("90", "has no unit"), ("1.5", "has no unit"),
                                       ("9" * 400 + "d", "out of range")])
def test_what_is_not_a_time_is_a_usage_error_saying_what_is(bad: str, said: str) -> None:
    with pytest.raises(UsageError) as error:
        parse_when(bad, NOW)
    assert said in error.value.message and error.value.hint


@pytest.mark.parametrize("bad", ["", "soon", "5", "1h and a bit"])
def test_a_duration_needs_a_number_and_a_unit(bad: str) -> None:
    with pytest.raises(UsageError) as error:
        parse_duration(bad)
    assert "5m" in (error.value.hint or "") or "has no unit" in error.value.message


def test_engine_times_become_aware_utc() -> None:
    assert utc_from_epoch(0) is None and utc_from_epoch(None) is None
    assert utc_from_epoch(1714564800) == datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc)
    assert utc_from_iso("2024-05-01T12:00:00Z") == datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc)
    assert utc_from_iso("2024-05-01T14:00:00+02:00") == datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc)
    assert utc_from_iso("not a time") is None and utc_from_iso("") is None


def test_age_is_short() -> None:
    now = datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc)
    assert [age(now - timedelta(seconds=s), now) for s in (5, 125, 7300, 200000)] == ["5s", "2m", "2h", "2d"]
    assert age(None, now) == "" and age(now + timedelta(seconds=3), now) == "0s"
