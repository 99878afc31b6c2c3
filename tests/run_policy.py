"""What a run of the suite may skip, and what it says at its end (loaded by tests/conftest.py).

Under ``CI=true`` a skip is a failure: a green CI must mean every test ran and could have failed. That covers
every kind of skip: ``pytest.skip`` in a test or fixture, a ``skipif`` marker, ``pytest.importorskip`` and a
module skipped at import (which becomes one failing item, so the rest of the run still runs). The one way out
is a reason CI cannot provide by its nature, named by ``@pytest.mark.allowed_skip("gpu")`` from the short
``ALLOWED`` list; the list and how many tests used it are printed at the end of every run.

The run's last lines (before pytest's own) count the tests that ran, skipped (with their reasons) and failed,
per engine, so a run that quietly lost the docker tests shows it.
"""

from __future__ import annotations

import os
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Dict, Generator, List, Optional, Tuple

import pytest

#: Reasons CI cannot provide by nature: a test may skip for one of these in CI too.
ALLOWED = {
    "gpu": "CI machines have no GPU",
}

#: Engines by test path, first match wins; then by the engine fixture a test used, named or asked for while it
#: ran (k8s_cluster first, whose image comes through docker: kubernetes means the real cluster, the API
#: stand-in's tests are "other"); then the parameter of the tests that name their engine or target in it;
#: "other" is everything else.
ENGINES: Tuple[Tuple[str, Tuple[str, ...]], ...] = (
    ("browser", ("tests/ui/test_browser.py",)),
    ("docker", ("tests/schedulers/test_docker", "tests/test_docker_support.py")),
    ("slurm", ("tests/schedulers/slurm/",)),
    ("ray", ("tests/schedulers/ray/",)),
)
ENGINE_FIXTURES = (("k8s_cluster", "kubernetes"), ("docker_client", "docker"), ("slurm_jobs", "slurm"),
                   ("ray_cluster", "ray"))
#: path: {the parameter's first part: engine}; the ids of a test that a skip at setup leaves unnamed otherwise
BY_PARAMETER = {
    "tests/schedulers/test_load.py": {"docker": "docker", "kubernetes": "kubernetes", "slurm": "slurm",
                                      "ray": "ray"},
    "tests/schedulers/test_kubernetes_cluster.py": {"real": "kubernetes"},
}
ORDER = ["browser", "docker", "slurm", "kubernetes", "ray", "other"]
RANK = {"passed": 0, "skipped": 1, "failed": 2}


def in_ci() -> bool:
    return os.environ.get("CI") == "true"


def without_group(nodeid: str) -> str:
    """The node id without the ``@group`` suffix xdist's loadgroup adds (an ``@`` inside a parameter stays)."""
    at = nodeid.rfind("@")
    return nodeid[:at] if at > nodeid.rfind("]") else nodeid


def engine_of(nodeid: str) -> str:
    """The engine a test belongs to, by its path (tests/ relative to the root, as pytest names it)."""
    path = nodeid.split("::")[0]
    if not path.startswith("tests/"):
        path = "tests/" + path.split("tests/", 1)[-1]
    for name, prefixes in ENGINES:
        if path.startswith(prefixes):
            return name
    return "other"


def engine_of_item(item: pytest.Item) -> str:
    engine = engine_of(item.nodeid)
    if engine != "other":
        return engine
    # the fixtures it names, and those it asked for while it ran (request.getfixturevalue): pytest keeps those
    # only on the item's request (private, hence the fallback)
    names = set(getattr(item, "fixturenames", ())) | set(getattr(getattr(item, "_request", None),
                                                                 "_fixture_defs", {}))
    for fixture, name in ENGINE_FIXTURES:
        if fixture in names:
            return name
    path, _, rest = without_group(item.nodeid).partition("::")
    if path in BY_PARAMETER and rest.endswith("]"):
        first = re.split(r"[-\]]", rest.rsplit("[", 1)[-1])[0]
        return BY_PARAMETER[path].get(first, "other")
    return "other"


def allowed_reason(item: pytest.Item) -> Optional[str]:
    """The allowed reason the test is marked with; a reason not in ALLOWED is a usage error."""
    marker = item.get_closest_marker("allowed_skip")
    if marker is None:
        return None
    reason = marker.args[0] if marker.args else marker.kwargs.get("reason", "")
    if reason not in ALLOWED:
        raise pytest.UsageError(f"{item.nodeid}: allowed_skip({reason!r}) names no allowed reason; the list: "
                                f"{', '.join(ALLOWED)} (tests/run_policy.py)")
    return reason


def skip_reason(report: Any) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def one_line(text: str, width: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[:width - 3] + "..."


def failure(text: str) -> Any:
    """A report's ``longrepr`` for a failure that is ``text``, as ``pytest.fail(text, pytrace=False)`` gives it:
    the short summary shows its first line, and xdist carries it whole from a worker."""
    try:
        pytest.fail(text, pytrace=False)
    except pytest.fail.Exception:
        return pytest.ExceptionInfo.from_current().getrepr(style="value")


@dataclass
class Tally:
    """What each test came to: one outcome per node id (failed if any phase failed)."""

    outcomes: Dict[str, str] = field(default_factory=dict)
    engines: Dict[str, str] = field(default_factory=dict)
    skips: Dict[str, str] = field(default_factory=dict)
    allowed: Counter = field(default_factory=Counter)

    def record(self, nodeid: str, engine: str, outcome: str, reason: str = "") -> None:
        """Keep the worst outcome of a test's phases (failed over skipped over passed), and the engine a phase
        found (teardown knows every fixture the test asked for)."""
        if engine != "other" or nodeid not in self.engines:
            self.engines[nodeid] = engine
        if RANK[outcome] >= RANK[self.outcomes.get(nodeid, "passed")]:
            self.outcomes[nodeid] = outcome
        if outcome == "skipped":
            self.skips[nodeid] = reason

    def lines(self) -> List[str]:
        counts: Dict[str, Counter] = defaultdict(Counter)
        reasons: Dict[str, Counter] = defaultdict(Counter)
        for nodeid, outcome in self.outcomes.items():
            engine = self.engines[nodeid]
            counts[engine][outcome] += 1
            if outcome == "skipped":
                reasons[engine][self.skips.get(nodeid, "")] += 1
        out = [f"{'engine':<11} {'ran':>5} {'passed':>7} {'failed':>7} {'skipped':>8}"]
        for engine in ORDER:
            c = counts[engine]
            out.append(f"{engine:<11} {c['passed'] + c['failed']:>5} {c['passed']:>7} {c['failed']:>7} "
                       f"{c['skipped']:>8}")
            for reason, n in reasons[engine].most_common():
                out.append(f"    skipped {n}: {one_line(reason)}")
        allowed = ", ".join(f"{key} ({why}): {self.allowed[key]}" for key, why in ALLOWED.items())
        out.append(f"skips CI allows (@pytest.mark.allowed_skip, {len(ALLOWED)} reason): {allowed}")
        return out


TALLY = pytest.StashKey[Tally]()
#: The run's config, for the collect report hook, which is not given it.
_CONFIG: List[pytest.Config] = []


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "allowed_skip(reason): this test may skip under CI=true, for a reason "
                                       f"CI cannot provide by nature, one of: {', '.join(ALLOWED)}")
    config.stash[TALLY] = Tally()
    _CONFIG[:] = [config]


class SkippedAtCollection(pytest.Item):
    """Stands for a module (or class) that skipped as it was collected, so that CI counts it as a failure."""

    def __init__(self, *, reason: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.reason = reason

    def runtest(self) -> None:
        pytest.fail(f"skipped under CI=true, where a skip is a failure: {self.reason} (the whole file skipped as "
                    f"it was collected; CI allows only: {', '.join(ALLOWED)})", pytrace=False)

    def reportinfo(self) -> Tuple[Any, Optional[int], str]:
        return self.path, None, f"{self.name}: {self.reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    if not (in_ci() and report.skipped) or isinstance(collector, pytest.Session):
        return
    reason = skip_reason(report)
    item = SkippedAtCollection.from_parent(collector, name="[skipped at collection]", reason=reason)
    outcome.force_result(pytest.CollectReport(report.nodeid, "passed", None, [item]))


def pytest_collectreport(report: pytest.CollectReport) -> None:
    """A module skipped at collection outside CI: counted as one skipped entry under its path."""
    if report.skipped and _CONFIG:
        _CONFIG[0].stash[TALLY].record(report.nodeid, engine_of(report.nodeid), "skipped", skip_reason(report))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Generator[None, Any, None]:
    """Applies the policy where the test ran (an xdist worker, or this process) and writes on the report what
    the tally needs, since under xdist only the reports reach the process that prints the summary."""
    outcome = yield
    report = outcome.get_result()
    report.torchspec_engine = engine_of_item(item)
    if report.skipped:
        reason = skip_reason(report) if not hasattr(report, "wasxfail") else f"xfail: {report.wasxfail}"
        allowed = allowed_reason(item)
        if in_ci() and allowed is None:
            report.outcome = "failed"
            report.longrepr = failure(f"skipped under CI=true, where a skip is a failure: {reason}\n(mark the test "
                                      f"@pytest.mark.allowed_skip(REASON) only for a reason CI cannot provide by "
                                      f"nature: {', '.join(ALLOWED)})")
            if hasattr(report, "wasxfail"):
                del report.wasxfail
        elif allowed is not None:
            report.torchspec_allowed = allowed
            reason = f"{reason} [allowed: {allowed}]"
        if report.skipped:
            report.torchspec_skip = reason


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Counts each phase's report where the summary is printed (the xdist controller, or this process)."""
    if not _CONFIG or not hasattr(report, "torchspec_engine"):
        return
    tally = _CONFIG[0].stash[TALLY]
    if report.skipped:
        allowed = getattr(report, "torchspec_allowed", None)
        if allowed is not None:
            tally.allowed[allowed] += 1
        tally.record(report.nodeid, report.torchspec_engine, "skipped", getattr(report, "torchspec_skip", ""))
        return
    tally.record(report.nodeid, report.torchspec_engine, "failed" if report.failed else "passed")


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_terminal_summary(terminalreporter: Any) -> Generator[None, None, None]:
    yield  # after pytest's own short summary, so these are the last lines before its final count
    lines = terminalreporter.config.stash[TALLY].lines()
    terminalreporter.write_sep("=", "tests per engine" + (" (CI=true: a skip is a failure)" if in_ci() else ""))
    for line in lines:
        terminalreporter.write_line(line)

