"""The suite's run policy (tests/run_policy.py) and skip helper (tests/skips.py), run as CI runs them.

Each case writes a small test module to a temp folder and runs pytest on it in a subprocess with the plugin
loaded, CI=true or not, so what is checked is pytest's exit code and its last lines, as CI sees them.
"""

from __future__ import annotations

import importlib.util
import os
import pathlib
import re
import subprocess
import sys
from typing import Optional

import pytest

import run_policy
import skips

TESTS = pathlib.Path(__file__).resolve().parent

SKIPS_IN_EVERY_WAY = '''
import pytest
import skips

def test_runs():
    pass

def test_skips_in_the_test():
    pytest.skip("no engine here")

@pytest.mark.skipif(True, reason="a marker's skip")
def test_skipif_marker():
    pass

def test_skip_or_fail():
    skips.skip_or_fail("DOCKER", "no Docker engine at the test's socket")
'''

MODULE_SKIP = '''
import pytest
pytest.importorskip("torchspec_no_such_module")

def test_never_collected():
    pass
'''

ALLOWED = '''
import pytest

@pytest.mark.allowed_skip("gpu")
def test_needs_a_gpu():
    pytest.skip("no GPU on this machine")

def test_runs():
    pass
'''


def run(tmp_path: pathlib.Path, files: dict, ci: Optional[str]) -> subprocess.CompletedProcess[str]:
    """pytest on ``files`` (name: text) with the policy loaded, CI set to ``ci`` (or unset), no REQUIRE switch."""
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["run_policy"]\n')
    env = {k: v for k, v in os.environ.items()  # the outer run's PYTEST_ADDOPTS (-v...) would change the output
           if k not in ("CI", "PYTEST_ADDOPTS") and not k.startswith("TORCHSPEC_REQUIRE_")}
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), env.get("PYTHONPATH", "")])
    if ci is not None:
        env["CI"] = ci
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rA", str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def summary(out: str) -> list:
    """The policy's lines: from its header to pytest's final count."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if "tests per engine" in line)
    return lines[start:]


def test_in_ci_every_kind_of_skip_fails_the_run(tmp_path) -> None:
    r = run(tmp_path, {"test_skips.py": SKIPS_IN_EVERY_WAY, "test_module_skip.py": MODULE_SKIP}, ci="true")
    assert r.returncode == 1, r.stdout + r.stderr
    out = r.stdout
    assert "FAILED test_skips.py::test_skips_in_the_test - Failed: skipped under CI=true" in out
    assert "ERROR test_skips.py::test_skipif_marker - Failed: skipped under CI=true, where a skip is a failure: " \
           "a marker's skip" in out
    assert "FAILED test_skips.py::test_skip_or_fail - Failed: no Docker engine at the test's socket " \
           "(CI=true, so this fails rather than skips)" in out
    # the module that skipped at import becomes one failing item; the others still ran
    assert "FAILED test_module_skip.py::[skipped at collection] - Failed: skipped under CI=true" in out
    assert "torchspec_no_such_module" in out
    assert "PASSED test_skips.py::test_runs" in out
    lines = summary(out)
    assert lines[0].strip("= ") == "tests per engine (CI=true: a skip is a failure)"
    # a skip in setup (the marker's) is an error in pytest's count; the policy counts it failed
    assert lines[-1].startswith("3 failed, 1 passed, 1 error in")
    other = next(line for line in lines if line.startswith("other"))
    assert other.split() == ["other", "5", "1", "4", "0"]  # ran, passed, failed, skipped


def test_in_ci_an_allowed_reason_passes_and_is_counted(tmp_path) -> None:
    r = run(tmp_path, {"test_gpu.py": ALLOWED}, ci="true")
    assert r.returncode == 0, r.stdout + r.stderr
    lines = summary(r.stdout)
    assert "skips CI allows (@pytest.mark.allowed_skip, 1 reason): gpu (CI machines have no GPU): 1" in lines
    assert "    skipped 1: no GPU on this machine [allowed: gpu]" in lines
    assert lines[-1].startswith("1 passed, 1 skipped in")


def test_an_unknown_allowed_reason_is_refused(tmp_path) -> None:
    text = 'import pytest\n\n@pytest.mark.allowed_skip("slow machine")\ndef test_x():\n    pytest.skip("why")\n'
    r = run(tmp_path, {"test_bad.py": text}, ci="true")
    assert r.returncode != 0
    assert "allowed_skip('slow machine') names no allowed reason; the list: gpu" in r.stdout + r.stderr


def test_outside_ci_skips_skip_and_are_listed_with_their_reasons(tmp_path) -> None:
    r = run(tmp_path, {"test_skips.py": SKIPS_IN_EVERY_WAY, "test_module_skip.py": MODULE_SKIP}, ci=None)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = summary(r.stdout)
    assert lines[0].strip("= ") == "tests per engine"
    assert next(line for line in lines if line.startswith("other")).split() == ["other", "1", "1", "0", "4"]
    for reason in ("no engine here", "a marker's skip", "no Docker engine at the test's socket",
                   "could not import 'torchspec_no_such_module'"):
        assert any(line.startswith("    skipped 1: " + reason) for line in lines), (reason, lines)
    assert lines[-1].startswith("1 passed, 4 skipped in")


@pytest.mark.parametrize("nodeid, engine", [
    ("tests/schedulers/test_docker_cli.py::test_x", "docker"),
    ("tests/test_docker_support.py::test_x", "docker"),
    ("tests/schedulers/slurm/test_slurm_cluster.py::test_x[a]", "slurm"),
    ("tests/schedulers/test_kubernetes_cluster.py::test_x", "other"),  # by fixture or parameter: not the path
    ("tests/kube/test_lease.py::test_x", "other"),
    ("tests/schedulers/ray/test_ray_driver.py::test_x", "ray"),
    ("tests/ui/test_browser.py::test_x", "browser"),
    ("tests/ui/test_app.py::test_x", "other"),
    ("tests/schedulers/test_local_faults.py::test_x", "other"),
])
def test_engines_by_path(nodeid: str, engine: str) -> None:
    assert run_policy.engine_of(nodeid) == engine


def test_engines_by_fixture_then_by_the_load_tests_parameter(tmp_path) -> None:
    """A test outside the engines' paths counts for the engine whose fixture it uses (named, or asked for while
    it ran); test_load's for the engine its parameter names."""
    text = '''
import pytest

@pytest.fixture
def docker_client():
    return None

@pytest.fixture
def k8s_cluster(docker_client):
    return None

@pytest.fixture
def target(request):
    return request.getfixturevalue("k8s_cluster")

def test_docker(docker_client):
    pass

def test_kubernetes(k8s_cluster):
    pass

def test_kubernetes_asked_for(target):
    pass

@pytest.mark.parametrize("engine", ["local", "slurm"])
def test_load(engine):
    pass
'''
    (tmp_path / "tests" / "schedulers").mkdir(parents=True)
    r = run(tmp_path, {"tests/test_mixed.py": text, "tests/schedulers/test_load.py": text}, ci="true")
    # test_mixed: docker, kubernetes twice, two others; test_load: the same, but its [slurm] is slurm's
    assert r.returncode == 0, r.stdout + r.stderr
    counts = {line.split()[0]: line.split()[1:] for line in summary(r.stdout)[2:8]}
    assert counts == {"browser": ["0"] * 4, "docker": ["2", "2", "0", "0"], "slurm": ["1", "1", "0", "0"],
                      "kubernetes": ["4", "4", "0", "0"], "ray": ["0"] * 4, "other": ["3", "3", "0", "0"]}


@pytest.mark.parametrize("switch, ci, outcome", [
    ("", "", pytest.skip.Exception),
    ("1", "", pytest.fail.Exception),
    ("", "true", pytest.fail.Exception),
])
def test_skip_or_fail_follows_the_switch_and_ci(monkeypatch, switch: str, ci: str, outcome: type) -> None:
    monkeypatch.setenv("TORCHSPEC_REQUIRE_MOUNT", switch)
    monkeypatch.setenv("CI", ci)
    with pytest.raises(outcome, match="cannot mount here"):
        skips.skip_or_fail("MOUNT", "cannot mount here")


def test_skip_or_fail_knows_its_switches() -> None:
    with pytest.raises(ValueError, match="unknown requirement 'DOKCER'"):
        skips.skip_or_fail("DOKCER", "typo")


# --- scripts/test: under CI=true a REQUIRE switch wins over a SKIP switch ------------------------------------------

SCRIPT = TESTS.parent / "scripts" / "test"


def shell_functions(*names: str) -> str:
    """The named functions' text from scripts/test, to run one without running the script (which sets up
    every engine)."""
    text = SCRIPT.read_text()
    found = []
    for name in names:
        match = re.search(rf"^{name}\(\) \{{.*?^\}}$|^{name}\(\) \{{[^\n]*\}}$", text, re.M | re.S)
        assert match, f"no function {name} in {SCRIPT}"
        found.append(match.group(0))
    return "\n".join(found)


def run_setup(function: str, env: dict) -> subprocess.CompletedProcess[str]:
    code = (shell_functions("log", "refuse_skip_in_ci", function)
            + f'\nPY={sys.executable}\n{function}\necho "reached: REQUIRE=${{!REQUIRE_VAR:-unset}}"\n')
    base = {k: v for k, v in os.environ.items() if k != "CI" and not k.startswith(("TORCHSPEC_REQUIRE_",
                                                                                   "TORCHSPEC_SKIP_"))}
    # setup_torch imports torch, which took over a minute on a machine busy with CI's cold Go build (ci48)
    return subprocess.run(["bash", "-c", code], env={**base, **env}, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("engine, function", [("DOCKER", "setup_docker"), ("SLURM", "setup_slurm"),
                                              ("K8S", "setup_k8s"), ("BROWSER", "setup_browser")])
def test_a_skip_switch_is_refused_in_ci(engine: str, function: str) -> None:
    env = {f"TORCHSPEC_SKIP_{engine}": "1", "REQUIRE_VAR": f"TORCHSPEC_REQUIRE_{engine}"}
    refused = run_setup(function, {**env, "CI": "true"})
    assert refused.returncode == 2
    assert "reached" not in refused.stdout
    assert (f"FAILED: TORCHSPEC_SKIP_{engine}=1 under CI=true: CI runs every engine's tests, so it may not skip "
            f"them (unset TORCHSPEC_SKIP_{engine})") in refused.stderr
    # elsewhere the switch skips the engine's setup, and its tests skip
    skipped = run_setup(function, env)
    assert skipped.returncode == 0, skipped.stderr
    assert skipped.stdout.strip() == "reached: REQUIRE=unset"
    assert f"TORCHSPEC_SKIP_{engine}=1: not setting up" in skipped.stderr


@pytest.mark.parametrize("ci, expected", [("true", "1"), ("", "1" if importlib.util.find_spec("torch") else "unset")])
def test_skip_install_still_requires_torch_where_it_must_run(ci: str, expected: str) -> None:
    r = run_setup("setup_torch", {"TORCHSPEC_SKIP_INSTALL": "1", "CI": ci, "REQUIRE_VAR": "TORCHSPEC_REQUIRE_TORCH"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"reached: REQUIRE={expected}"
