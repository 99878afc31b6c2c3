"""The run's own time against its budget (see tests/suite_plan.py), and the plan that keeps it."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any, List

import pytest

import suite_plan


@pytest.mark.suite_budget
def test_the_whole_run_stays_within_its_budget() -> None:
    """Runs last (suite_plan orders it so): when this run, setup included, took longer than its budget,
    CI would soon pass its hard limit; the message says where the time went."""
    elapsed = time.time() - suite_plan.run_started()
    budget = suite_plan.budget_s()
    setup = suite_plan.setup_timings()
    assert elapsed <= budget, (
        f"this run took {elapsed / 60:.1f} min, over its budget of {budget / 60:.0f} min "
        f"({suite_plan.BUDGET_ENV}); setup steps in s: {setup or 'not run through scripts/test'}; "
        "find the slow tests with --durations=40 (docs/development.md, 'CI time')")


def fake_item(name: str, fixtures: List[str] = (), markers: List[str] = ()) -> Any:
    return SimpleNamespace(name=name, fixturenames=list(fixtures),
                           get_closest_marker=lambda marker: marker if marker in markers else None)


def test_the_plan_runs_cluster_tests_last_and_the_budget_check_after_them() -> None:
    items = [fake_item("budget", markers=["suite_budget"]), fake_item("k8s-a", fixtures=["k8s_cluster"]),
             fake_item("lint"), fake_item("k8s-b", markers=["k8s_cluster"]), fake_item("docker", ["docker_client"])]
    assert [item.name for item in suite_plan.plan(items)] == ["lint", "docker", "k8s-a", "k8s-b", "budget"]


def test_this_session_ran_in_that_order(request: pytest.FixtureRequest) -> None:
    """The hook is installed: in this very session no cluster test comes before a test that needs none."""
    items = request.session.items
    kinds = [suite_plan.needs_k8s(item) for item in items if not item.get_closest_marker("suite_budget")]
    assert kinds == sorted(kinds), "a test that needs the real cluster was ordered before one that does not"
    budget = [i for i, item in enumerate(items) if item.get_closest_marker("suite_budget")]
    assert all(i >= len(items) - len(budget) for i in budget)


def test_setup_timings_are_read_from_scripts_test() -> None:
    assert suite_plan.setup_timings("setup_k8s=3 setup_python=95 junk setup_docker=x") == {"k8s": 3, "python": 95}


def test_the_run_starts_when_scripts_test_did(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(suite_plan.STARTED_ENV, "1000")
    assert suite_plan.run_started() == 1000.0
    monkeypatch.setenv(suite_plan.STARTED_ENV, "not a time")
    assert suite_plan.run_started() <= time.time()
    monkeypatch.setenv(suite_plan.BUDGET_ENV, "60")
    assert suite_plan.budget_s() == 60.0
    monkeypatch.setenv(suite_plan.BUDGET_ENV, "an hour")
    assert suite_plan.budget_s() == suite_plan.DEFAULT_BUDGET_S
