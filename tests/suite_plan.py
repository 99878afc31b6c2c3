"""The order the suite runs in, and its time budget (a pytest plugin that tests/conftest.py loads).

Why an order: on a fresh machine ``scripts/test`` starts the Kubernetes
test cluster in the background, and its Go build takes about 25 minutes on
2 cores. Running the tests that need that cluster last lets the build use
the CPU the other tests leave idle while they wait on Docker, Slurm and
Ray, so a cold run costs about the longer of the two, not their sum. Order
is only about time: a cluster test that runs early still waits for the
cluster (tests/k8s_support.py), so nothing depends on it being right.

Why a budget: CI must end within 60 minutes on a new machine (its hard
limit is 90). ``scripts/test`` exports when it started
(``TORCHSPEC_SUITE_STARTED``, seconds since the epoch) and how long each
setup step took; the budget test runs last and fails when the whole run,
setup included, has passed ``TORCHSPEC_SUITE_BUDGET_S`` (3600 by default),
so a change that makes CI slow fails where it is made, not in the next
session's CI.
"""

from __future__ import annotations

import os
import time
from typing import Dict, List, Optional

import pytest

#: The marker of a module or test that uses the real Kubernetes cluster without naming the ``k8s_cluster``
#: fixture in its signature (``request.getfixturevalue("k8s_cluster")``).
K8S_MARKER = "k8s_cluster"
#: The marker of the test that checks the run's time budget: it runs after every other.
BUDGET_MARKER = "suite_budget"
STARTED_ENV = "TORCHSPEC_SUITE_STARTED"
BUDGET_ENV = "TORCHSPEC_SUITE_BUDGET_S"
SETUP_ENV = "TORCHSPEC_SETUP_TIMINGS"
DEFAULT_BUDGET_S = 3600.0

_session_started = time.time()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{K8S_MARKER}: uses the real Kubernetes cluster (run after the other tests)")
    config.addinivalue_line("markers", f"{BUDGET_MARKER}: checks the run's time budget (runs after every other test)")


def needs_k8s(item: pytest.Item) -> bool:
    return K8S_MARKER in getattr(item, "fixturenames", ()) or item.get_closest_marker(K8S_MARKER) is not None


def plan(items: List[pytest.Item]) -> List[pytest.Item]:
    """Every other test first, then those that need the real cluster, then the budget check; each group
    keeps its collected order (a stable partition), so modules still run top to bottom."""
    budget = [item for item in items if item.get_closest_marker(BUDGET_MARKER)]
    rest = [item for item in items if not item.get_closest_marker(BUDGET_MARKER)]
    return [item for item in rest if not needs_k8s(item)] + [item for item in rest if needs_k8s(item)] + budget


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: List[pytest.Item]) -> None:
    items[:] = plan(items)


def run_started() -> float:
    """When this run began: scripts/test's start (installs and engine starts count), else pytest's."""
    try:
        return float(os.environ[STARTED_ENV])
    except (KeyError, ValueError):
        return _session_started


def budget_s() -> float:
    try:
        return float(os.environ.get(BUDGET_ENV, DEFAULT_BUDGET_S))
    except ValueError:
        return DEFAULT_BUDGET_S


def setup_timings(raw: Optional[str] = None) -> Dict[str, int]:
    """scripts/test's ``setup_docker=41 setup_slurm=12 ...`` as a dict (malformed pairs are left out)."""
    out: Dict[str, int] = {}
    for pair in (os.environ.get(SETUP_ENV, "") if raw is None else raw).split():
        name, _, seconds = pair.partition("=")
        if seconds.isdigit():
            out[name.removeprefix("setup_")] = int(seconds)
    return out


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    setup = setup_timings()
    elapsed = time.time() - run_started()
    parts = [f"{name} {seconds} s" for name, seconds in setup.items()]
    line = f"run time: {elapsed / 60:.1f} min of a {budget_s() / 60:.0f} min budget"
    if parts:
        line += f" (setup: {', '.join(parts)}; tests {(time.time() - _session_started) / 60:.1f} min)"
    terminalreporter.write_line(line)
