"""The run's time budget and order (tests/suite_plan.py), tried on small suites of their own."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys
import time
from types import SimpleNamespace
from typing import Any, List, Optional, Sequence

import pytest

import suite_plan

TESTS = pathlib.Path(__file__).resolve().parent


def fake_item(name: str, fixtures: Sequence[str] = (), markers: Sequence[str] = ()) -> Any:
    return SimpleNamespace(name=name, nodeid=f"tests/test_x.py::{name}", fixturenames=list(fixtures),
                           get_closest_marker=lambda marker: marker if marker in markers else None)


def test_the_plan_puts_the_engines_first_and_the_cluster_first_or_last() -> None:
    items = [fake_item("k8s-a", fixtures=["k8s_cluster"]), fake_item("lint"),
             fake_item("k8s-b", markers=["k8s_cluster"]), fake_item("docker", ["docker_client"]),
             fake_item("ray", ["ray_cluster"])]
    assert [item.name for item in suite_plan.plan(items)] == ["docker", "ray", "lint", "k8s-a", "k8s-b"]
    assert [item.name for item in suite_plan.plan(items, k8s_first=True)] == ["k8s-a", "k8s-b", "docker", "ray",
                                                                               "lint"]
    assert [suite_plan.group_of(item) for item in items] == ["kubernetes", "tests/test_x.py", "kubernetes", "docker",
                                                             "ray"]


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


SUITE = '''
import os
import pytest

@pytest.fixture
def docker_client():
    return None

def test_plain():
    pass

def test_docker(docker_client):
    pass

@pytest.mark.parametrize("n", range(4))
def test_docker_too(docker_client, tmp_path_factory, n):
    """Where each docker test ran: one worker for all of them (xdist's group)."""
    with open(os.path.join(os.environ["WHERE"], f"docker-{n}"), "w") as f:
        f.write(os.environ.get("PYTEST_XDIST_WORKER", "main"))

@pytest.mark.k8s_cluster
def test_cluster():
    pass

def test_order(request):
    names = [item.name for item in request.session.items]
    assert names.index("test_cluster") == (0 if os.environ["TORCHSPEC_K8S_FIRST"] == "1" else len(names) - 1)
'''


def run_suite(tmp_path: pathlib.Path, started: float, budget: str, workers: Optional[int] = None,
              up_rc: Optional[str] = None) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_small.py").write_text(SUITE)
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["run_policy", "suite_plan"]\n')
    env = {k: v for k, v in os.environ.items()  # PYTEST_ADDOPTS: the outer run's options are not this suite's
           if k not in ("TORCHSPEC_K8S_UP_RC", suite_plan.K8S_FIRST_ENV, "PYTEST_ADDOPTS")}
    env.update({suite_plan.STARTED_ENV: str(started), suite_plan.BUDGET_ENV: budget,
                suite_plan.SETUP_ENV: "setup_python=12 setup_docker=3", "COLUMNS": "250",
                "PYTHONPATH": os.pathsep.join([str(TESTS), env.get("PYTHONPATH", "")]), "WHERE": str(tmp_path)})
    if up_rc is not None:
        env["TORCHSPEC_K8S_UP_RC"] = up_rc
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rf", str(tmp_path)]
    if workers:
        argv += ["-n", str(workers), "--dist", "loadgroup"]
    return subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("workers", [None, 2])
def test_a_run_over_its_budget_fails_with_where_the_time_went(tmp_path: pathlib.Path,
                                                               workers: Optional[int]) -> None:
    started = time.time() - 130
    r = run_suite(tmp_path, started, "120", workers)
    ended = time.time()
    assert r.returncode == 1, r.stdout + r.stderr
    found = re.search(r"^FAILED tests/suite_plan\.py::suite budget - Failed: this run took (\d+\.\d) min, over its "
                      r"budget of 2 min \(TORCHSPEC_SUITE_BUDGET_S\); setup steps in s: \{'python': 12, 'docker': 3\}",
                      r.stdout, re.MULTILINE)
    assert found, r.stdout
    # 130 s before it began, plus its own seconds, however long a loaded machine made them (ci51: over 2 min)
    assert 130 / 60 - 0.05 <= float(found.group(1)) <= (ended - started) / 60 + 0.05, (found.group(1), ended - started)
    assert "1 failed, 8 passed" in r.stdout
    other = next(line for line in r.stdout.splitlines() if line.startswith("other"))
    assert other.split() == ["other", "4", "3", "1", "0"]
    docker = next(line for line in r.stdout.splitlines() if line.startswith("docker"))
    assert docker.split() == ["docker", "5", "5", "0", "0"]


@pytest.mark.parametrize("workers", [2])
def test_a_run_within_its_budget_passes_and_says_its_time(tmp_path: pathlib.Path, workers: Optional[int]) -> None:
    r = run_suite(tmp_path, time.time() - 60, "600", workers)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "8 passed" in r.stdout
    assert re.search(r"^CPU of the tests and their subprocesses: \d+\.\d min; the most, by file:\n +\d+ s  test_small\.py$",
                     r.stdout, re.MULTILINE), r.stdout
    assert re.search(r"^run time: [1-9]\.\d min of a 10 min budget \(setup: python 12 s, docker 3 s; tests 0\.\d min\)$",
                     r.stdout, re.MULTILINE), r.stdout


@pytest.mark.parametrize("rc, first", [("0", True), ("missing", False)])
def test_the_cluster_tests_go_first_only_once_the_cluster_is_up(tmp_path: pathlib.Path, rc: Optional[str],
                                                               first: bool) -> None:
    """Whatever the order, every worker collects the same one (test_order checks it where it runs)."""
    up_rc = None
    if rc is not None:
        up_rc = str(tmp_path / "up.rc")
        if rc != "missing":
            pathlib.Path(up_rc).write_text(rc + "\n")
    r = run_suite(tmp_path, time.time(), "3600", 3, up_rc)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "8 passed" in r.stdout
    workers = {(tmp_path / f"docker-{n}").read_text() for n in range(4)}
    assert len(workers) == 1 and workers != {"main"}, workers  # the engine's tests on one worker, not beside it


def test_the_cpu_summary_ranks_files_by_their_cpu() -> None:
    lines = suite_plan.cpu_lines({"a.py": 30.0, "b.py": 90.0, "c.py": 60.0}, top=2)
    assert lines == ["CPU of the tests and their subprocesses: 3.0 min; the most, by file:", "       90 s  b.py",
                     "       60 s  c.py"]
