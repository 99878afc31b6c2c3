"""The code catalogue is complete and stable: every code explains itself, and lookups find it."""

from __future__ import annotations

import re

import pytest

from torchspec.errors import ERROR, WARNING
from torchspec import codes

ALL = list(codes.CODES.values())


def test_codes_are_unique_and_well_formed() -> None:
    written = [c.code for c in codes._ALL]
    assert len(written) == len(set(written)) == len(codes.CODES)
    names = [c.name for c in codes._ALL]
    assert len(names) == len(set(names)) == len(codes.NAMES)
    for c in ALL:
        assert re.fullmatch(r"TS\d{3}", c.code), c.code
        assert re.fullmatch(r"[a-z]+(-[a-z]+)*", c.name), c.name
        assert c.severity in (ERROR, WARNING)


def test_codes_cover_every_family_in_order() -> None:
    written = [c.code for c in codes._ALL]
    assert written == sorted(written)
    assert {c[:3] for c in written} == {"TS0", "TS1", "TS2", "TS3", "TS4", "TS5", "TS6"}
    assert [c for c in written if c.startswith("TS5")] == [f"TS5{i:02d}" for i in range(1, 12)]


@pytest.mark.parametrize("entry", ALL, ids=lambda c: c.code)
def test_every_code_is_explained(entry: codes.Code) -> None:
    assert entry.summary and "\n" not in entry.summary
    assert len(entry.why) > 40, entry.code
    assert len(entry.fix) > 20, entry.code
    assert entry.example.strip(), entry.code
    assert "\n" in entry.example  # a bad snippet and its fix, at least two lines


@pytest.mark.parametrize("entry", ALL, ids=lambda c: c.code)
def test_example_shows_the_problem_and_the_fix(entry: codes.Code) -> None:
    lines = entry.example.splitlines()
    assert any("fix" in line for line in lines if line.lstrip().startswith("#")), entry.code
    assert any(not line.lstrip().startswith("#") for line in lines), entry.code


@pytest.mark.parametrize("entry", ALL, ids=lambda c: c.code)
def test_explain_prints_every_part(entry: codes.Code) -> None:
    text = entry.explain()
    assert text.startswith(f"{entry.code} ({entry.name}, {entry.severity}): {entry.summary}")
    assert "Why it matters:" in text and "How to fix it:" in text and "Example:" in text
    for line in entry.example.splitlines():
        assert "  " + line in text


def test_get_by_code_and_by_name() -> None:
    assert codes.get("TS202") is codes.CODES["TS202"]
    assert codes.get("ts202") is codes.CODES["TS202"]
    assert codes.get(" TS501 ") is codes.CODES["TS501"]
    assert codes.get("unknown-key") is codes.CODES["TS202"]
    assert codes.get("Unknown-Macro") is codes.CODES["TS501"]
    assert codes.get("TS999") is None
    assert codes.get("no-such-rule") is None


@pytest.mark.parametrize("entry", ALL, ids=lambda c: c.code)
def test_get_round_trips(entry: codes.Code) -> None:
    assert codes.get(entry.code) is entry
    assert codes.get(entry.name) is entry


def test_severity_lookup() -> None:
    assert codes.severity("TS305") == WARNING
    assert codes.severity("TS501") == ERROR
    assert codes.severity("TS999") == ERROR  # unknown codes fail safe


def test_semantic_examples_trip_their_rule() -> None:
    """Each TS5xx example's 'bad' snippet really is what the rule reports, so the docs cannot drift."""
    from torchspec.loader import rules

    assert rules.find_macros('"--run-id=${app_idd}"')
    assert rules.parse_mount_string("type=bind,src=/data,readonly=false")
    assert not rules.parse_mount_string("type=bind,src=/data,dst=/data")
    assert rules.fix_env_name("MY-VAR") == "MY_VAR" and rules.fix_env_name("2ND_HOST") == "_2ND_HOST"
    assert "MY_VAR" in codes.CODES["TS505"].example and "_2ND_HOST" in codes.CODES["TS505"].example
