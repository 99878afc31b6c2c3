"""The order the suite runs in, how it is split across processes, and its time budget (a pytest plugin that
tests/conftest.py loads).

Why processes: most of the suite's time is waiting (on Docker, Slurm, Ray, the Kubernetes cluster, a
subprocess), so ``scripts/test`` runs it on a few pytest-xdist workers (``-n``, ``--dist loadgroup``).
Each engine's tests form one xdist group (:func:`group_of`) and so run one after another on one worker, as
they did before: they share one engine, and their fixtures clean up after whatever appeared during a test.
Different engines, and the tests that need none, run side by side; each of the other files is a group of its
own, so a module's fixtures are made once, on one worker.

Why an order: on a fresh machine ``scripts/test`` starts the Kubernetes test cluster in the background, and
its Go build takes about 25 minutes on 2 cores. While it runs, the tests that need that cluster go last, so
the build uses the CPU the other tests leave idle; once the cluster is up when the run starts (a warm
machine), they go first, since as one group they are the run's longest single thread. Order is only about
time: a cluster test that runs early still waits for the cluster (tests/k8s_support.py), so nothing depends
on it being right.

Why a budget: CI must end within 60 minutes on a new machine (its hard limit is 90). ``scripts/test``
exports when it started (``TORCHSPEC_SUITE_STARTED``, seconds since the epoch) and how long each setup step
took; when the run ends, the process that prints the summary (xdist's controller, or the only one) adds one
failed test, ``suite budget``, when the whole run, setup included, passed ``TORCHSPEC_SUITE_BUDGET_S``
(4800 by default, 10 minutes before CI's hard limit), so a change that makes CI slow fails where it is made,
not in the next session's CI.
"""

from __future__ import annotations

import os
import resource
import time
from collections import Counter
from typing import Any, Dict, Generator, List, Optional

import pytest

import run_policy

#: The marker of a module or test that uses the real Kubernetes cluster without naming the ``k8s_cluster``
#: fixture in its signature (``request.getfixturevalue("k8s_cluster")``).
K8S_MARKER = "k8s_cluster"
STARTED_ENV = "TORCHSPEC_SUITE_STARTED"
BUDGET_ENV = "TORCHSPEC_SUITE_BUDGET_S"
SETUP_ENV = "TORCHSPEC_SETUP_TIMINGS"
#: "1" when the cluster's tests go first: set once by the process that starts the workers, so that every
#: worker collects the same order (xdist refuses a run whose workers collected differently)
K8S_FIRST_ENV = "TORCHSPEC_K8S_FIRST"
#: CI's hard limit is 90 minutes; the budget fails a run 10 minutes before it (the goal, 60 minutes on a cold
#: machine, is measured and written in docs/development.md, "CI time")
DEFAULT_BUDGET_S = 4800.0
#: The node id of the failure a run over its budget gets.
BUDGET_NODEID = "tests/suite_plan.py::suite budget"

_session_started = time.time()
#: When the test being run started, in CPU seconds of this process and the children it waited for.
CPU_START = pytest.StashKey[float]()
#: How many test files the run's CPU summary lists.
CPU_TOP = 12
_cpu_by_file: Counter = Counter()


def is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def cluster_is_up() -> bool:
    """Whether scripts/test's background start of the cluster has already ended well (or there is none)."""
    rc_file = os.environ.get("TORCHSPEC_K8S_UP_RC")
    if not rc_file:
        return True
    try:
        with open(rc_file) as f:
            return f.read().strip() == "0"
    except OSError:
        return False


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{K8S_MARKER}: uses the real Kubernetes cluster (one xdist group)")
    if not is_worker(config):
        os.environ[K8S_FIRST_ENV] = "1" if cluster_is_up() else "0"


def needs_k8s(item: pytest.Item) -> bool:
    return K8S_MARKER in getattr(item, "fixturenames", ()) or item.get_closest_marker(K8S_MARKER) is not None


def engine_of(item: pytest.Item) -> Optional[str]:
    """The engine whose tests this one must not run beside: its path's, its fixtures', its parameter's
    (tests/run_policy.py knows them), or the cluster's for a test marked for it; None for the rest."""
    engine = run_policy.engine_of_item(item)
    if engine != "other":
        return engine
    return "kubernetes" if needs_k8s(item) else None


def group_of(item: pytest.Item) -> str:
    """The xdist group: the engine's, else the test's file, so a module's fixtures (a site built with mkdocs, a
    venv, a wheel) are made once, on one worker, as they would be in one process."""
    return engine_of(item) or item.nodeid.split("::")[0]


def plan(items: List[pytest.Item], k8s_first: bool = False) -> List[pytest.Item]:
    """The engines' tests first (xdist hands each group to a worker as one unit, where its first test
    stands), then the rest; the cluster's tests first or last, as ``k8s_first`` says. A stable partition, so
    modules still run top to bottom."""
    engines = [engine_of(item) for item in items]
    k8s = [item for item, engine in zip(items, engines) if engine == "kubernetes"]
    others = [item for item, engine in zip(items, engines) if engine not in (None, "kubernetes")]
    rest = [item for item, engine in zip(items, engines) if engine is None]
    return k8s + others + rest if k8s_first else others + rest + k8s


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: List[pytest.Item]) -> None:
    """Order first, then group: tryfirst, since xdist's own hook reads the groups to rename the tests."""
    items[:] = plan(items, os.environ.get(K8S_FIRST_ENV) == "1")
    for item in items:
        item.add_marker(pytest.mark.xdist_group(group_of(item)))


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


def over_budget(elapsed: float, budget: float, setup: Dict[str, int]) -> Optional[str]:
    """Why a run that took ``elapsed`` seconds fails its budget, or None when it kept to it."""
    if elapsed <= budget:
        return None
    return (f"this run took {elapsed / 60:.1f} min, over its budget of {budget / 60:.0f} min ({BUDGET_ENV}); "
            f"setup steps in s: {setup or 'not run through scripts/test'}; find the slow tests with "
            "--durations=40 (docs/development.md, 'CI time')")


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Where the summary is printed, a run over its budget gets one failed test (in the counts, the short
    summary and the exit code). Not on a worker: a worker's own end says nothing about the whole run."""
    if is_worker(session.config) or session.config.option.collectonly:
        return
    why = over_budget(time.time() - run_started(), budget_s(), setup_timings())
    if why is None:
        return
    report = pytest.TestReport(BUDGET_NODEID, ("tests/suite_plan.py", None, "suite budget"), {}, "failed",
                               run_policy.failure(why), "call")
    report.torchspec_engine = "other"  # tests/run_policy.py counts it
    session.config.hook.pytest_runtest_logreport(report=report)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


def cpu_now() -> float:
    """CPU seconds (user and system) of this process and of the children it has waited for: on two cores, the
    suite's CPU, not its wall time, is what a cold run (which also builds the cluster) cannot exceed."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, None, None]:
    item.stash[CPU_START] = cpu_now()
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Generator[None, Any, None]:
    """The teardown report carries the test's CPU seconds (the engines' own processes are not counted)."""
    outcome = yield
    if call.when == "teardown" and CPU_START in item.stash:
        outcome.get_result().torchspec_cpu_s = cpu_now() - item.stash[CPU_START]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    cpu = getattr(report, "torchspec_cpu_s", None)
    if cpu is not None:
        _cpu_by_file[report.nodeid.split("::")[0]] += cpu


def cpu_lines(by_file: Dict[str, float], top: int = CPU_TOP) -> List[str]:
    total = sum(by_file.values())
    ranked = sorted(by_file.items(), key=lambda kv: -kv[1])[:top]
    return [f"CPU of the tests and their subprocesses: {total / 60:.1f} min; the most, by file:"] + [
        f"  {seconds:7.0f} s  {path}" for path, seconds in ranked]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if is_worker(terminalreporter.config):
        return
    if _cpu_by_file:
        for line in cpu_lines(_cpu_by_file):
            terminalreporter.write_line(line)
    setup = setup_timings()
    elapsed = time.time() - run_started()
    parts = [f"{name} {seconds} s" for name, seconds in setup.items()]
    line = f"run time: {elapsed / 60:.1f} min of a {budget_s() / 60:.0f} min budget"
    if parts:
        line += f" (setup: {', '.join(parts)}; tests {(time.time() - _session_started) / 60:.1f} min)"
    terminalreporter.write_line(line)
