"""Selection: which apps ``list --state/--user/--since/-l`` shows and bulk ``cancel``/``delete`` act on."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any, Dict, Optional

import pytest

from torchspec.errors import UsageError
from torchspec.runner.selection import Selection, act_on_each
from torchspec.schedulers.api import ListAppResponse
from torchspec.specs import AppState

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=timezone.utc)


def app(state: AppState = AppState.RUNNING, age_s: Optional[float] = 60, labels: Optional[Dict[str, str]] = None,
        user: Optional[str] = "ada") -> ListAppResponse:
    provenance: Optional[Dict[str, Any]] = {"user": user} if user else None
    return ListAppResponse("a", state, labels=dict(labels or {}), provenance=provenance,
                           created=None if age_s is None else NOW - timedelta(seconds=age_s))


def test_an_empty_selection_matches_every_app() -> None:
    empty = Selection.parse(now=NOW)
    assert empty.is_empty() and empty.matches(app(age_s=None, user=None)) and empty.describe() == ""


def test_states_case_and_commas() -> None:
    running = Selection.parse(states=["running,Pending"], now=NOW)
    assert running.states == {AppState.RUNNING, AppState.PENDING}
    assert running.matches(app(AppState.PENDING)) and not running.matches(app(AppState.FAILED))
    assert running.describe() == "state PENDING,RUNNING"


def test_labels_with_and_without_a_value() -> None:
    selection = Selection.parse(labels=["team=ml", "nightly"], now=NOW)
    assert selection.matches(app(labels={"team": "ml", "nightly": ""}))
    assert not selection.matches(app(labels={"team": "ml"}))  # no nightly label
    assert not selection.matches(app(labels={"team": "ops", "nightly": "1"}))
    assert Selection.parse(labels=["team="], now=NOW).matches(app(labels={"team": ""}))


def test_user_comes_from_the_provenance_and_no_provenance_matches_no_user() -> None:
    selection = Selection.parse(user="ada", now=NOW)
    assert selection.matches(app(user="ada")) and not selection.matches(app(user="bob"))
    assert not selection.matches(app(user=None))


def test_ages_are_the_engines_creation_times_and_an_unknown_one_matches_no_time_condition() -> None:
    old = Selection.parse(older_than="2h", now=NOW)
    recent = Selection.parse(since="2h", now=NOW)
    assert old.before == recent.since == NOW - timedelta(hours=2)
    assert old.matches(app(age_s=3 * 3600)) and not old.matches(app(age_s=3600))
    assert recent.matches(app(age_s=3600)) and not recent.matches(app(age_s=3 * 3600))
    assert not old.matches(app(age_s=None)) and not recent.matches(app(age_s=None))
    exact = Selection.parse(older_than="2026-11-28T11:00:00Z", now=NOW)
    assert exact.before == datetime(2026, 11, 28, 11, 0, tzinfo=timezone.utc)
    assert old.describe() == "older than 2h"


@pytest.mark.parametrize("words, said", [
    ({"states": ["RUNING"]}, "did you mean 'RUNNING'?"),
    ({"states": ["nope"]}, "states: UNSUBMITTED"),
    ({"since": "5"}, "has no unit"),
    ({"older_than": "last week"}, "cannot read"),
    ({"labels": ["=x"]}, "KEY=VALUE"),
])
def test_a_bad_selection_is_a_usage_error_naming_the_option(words: Dict[str, Any], said: str) -> None:
    with pytest.raises(UsageError) as error:
        Selection.parse(now=NOW, **words)
    assert said in f"{error.value.message} {error.value.hint}"
    option = {"states": "--state", "since": "--since", "older_than": "--older-than", "labels": "-l"}[next(iter(words))]
    assert option in error.value.message


def test_act_on_each_goes_on_past_a_failure() -> None:
    def act(handle: str) -> str:
        if handle == "b":
            raise UsageError("unknown app 'b'")
        return "cancelled"

    outcomes = list(act_on_each(["a", "b", "c"], act))
    assert [(o.handle, o.note, o.error is not None) for o in outcomes] == [
        ("a", "cancelled", False), ("b", "unknown app 'b'", True), ("c", "cancelled", False)]
