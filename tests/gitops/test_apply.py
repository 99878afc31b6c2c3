"""``torchspec apply``: the plan (pure), the reports, and the real CLI on the local scheduler.

The other backends run the same scenario in test_apply_backends.py.
"""

from __future__ import annotations

import json
import pathlib
import sys
from types import SimpleNamespace
from typing import Any

import pytest
from apply_support import Workspace, at_once, lifecycle

from torchspec.errors import BackendError, Diagnostic
from torchspec.gitops.apply import ApplyOptions, ApplyResult, Found, Step, apply_paths, execute, plan
from torchspec.gitops.apply_report import render
from torchspec.specs import AppState

PY = sys.executable

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="the local scheduler needs POSIX process groups")


def local_role(name: str, seconds: int) -> dict:
    return {"name": name, "image": ".", "entrypoint": PY, "args": ["-c", f"import time; time.sleep({seconds})"]}


@pytest.fixture
def ws(tmp_path: pathlib.Path) -> Any:
    workspace = Workspace(tmp_path, "local")
    yield workspace
    workspace.cancel_all()


# ---------------------------------------------------------------- the plan, without a scheduler


def found(identity: str, digest: str, state: AppState = AppState.RUNNING, file: str = "") -> Found:
    return Found(f"x://s/{identity}-{digest}", state, identity, digest, file or identity)


def actions(steps: list[Step]) -> dict[str, str]:
    return {s.identity: s.action for s in steps}


def test_plan_per_identity() -> None:
    specs = [Step("create", i, i, i, "h2") for i in ("new", "same", "done", "changed", "old-done", "both")]
    apps = [found("same", "h2"), found("done", "h2", AppState.SUCCEEDED), found("changed", "h1"),
            found("old-done", "h1", AppState.FAILED), found("both", "h1"), found("both", "h2")]
    steps = plan(specs, apps, lambda path: True)
    assert actions(steps) == {"new": "create", "same": "unchanged", "done": "unchanged", "changed": "replace",
                              "old-done": "create", "both": "unchanged"}
    by_id = {s.identity: s for s in steps}
    assert by_id["done"].handle == "x://s/done-h2" and [f.hash for f in by_id["changed"].found] == ["h1"]


def test_prune_only_live_apps_of_gone_specs_under_the_paths_applied() -> None:
    specs = [Step("create", "jobs/a.yaml", "jobs/a.yaml", "a", "h"),
             Step("error", "jobs/broken.yaml", "jobs/broken.yaml", errors=[Diagnostic("TS201", "bad")])]
    apps = [found("jobs/gone.yaml", "h"), found("jobs/gone-done.yaml", "h", AppState.SUCCEEDED),
            found("other/gone.yaml", "h"), found("jobs/broken.yaml", "h"),
            found("jobs/multi.yaml#x", "h", file="jobs/multi.yaml")]
    steps = plan(specs, apps, lambda path: path.startswith("jobs/"))
    assert actions(steps) == {"jobs/a.yaml": "create", "jobs/broken.yaml": "error", "jobs/gone.yaml": "prune",
                              "jobs/multi.yaml#x": "prune"}


def test_exit_codes() -> None:
    planned = ApplyResult("local", "default", "/r", [Step("unchanged", "a", "a")])
    assert planned.exit_code == 0
    planned.steps.append(Step("create", "b", "b"))
    assert planned.exit_code == 1
    planned.steps.append(Step("error", "c", "c"))
    assert planned.exit_code == 7
    applied = ApplyResult("local", "default", "/r", [Step("create", "b", "b", status="done")], applied=True)
    assert applied.exit_code == 0
    applied.steps.append(Step("error", "c", "c", status="untouched"))
    assert applied.exit_code == 1
    applied.steps.append(Step("create", "d", "d", status="failed"))
    assert applied.exit_code == 6


def test_a_lock_lost_half_way_stops_before_the_next_cancel_or_submit() -> None:
    """The guard (the Lease's check) runs before each change; once it raises, that step fails and nothing more
    is done, so a run never submits without the lock."""
    done: list[str] = []
    runner = SimpleNamespace(schedule=lambda request: done.append(f"submit {request}") or f"x://s/{request}",
                             cancel=lambda handle: done.append(f"cancel {handle}"))
    steps = [Step("create", "a", "a", request="a"), Step("unchanged", "u", "u"),
             Step("replace", "b", "b", request="b", found=[found("b", "h1")]), Step("create", "c", "c", request="c")]
    calls = []

    def guard() -> None:
        calls.append(1)
        if len(calls) > 1:
            raise BackendError("lost the Lease ml/x: it expired and other:1:ab took it over")

    execute(runner, steps, ApplyOptions("local", replace=True), guard=guard)  # type: ignore[arg-type]
    assert done == ["submit a"]
    assert [(s.identity, s.status) for s in steps] == [("a", "done"), ("u", "untouched"), ("b", "failed"),
                                                       ("c", "skipped")]
    assert steps[2].message == "not done: lost the Lease ml/x: it expired and other:1:ab took it over"
    assert steps[3].message.startswith("stopped: lost the Lease")
    assert ApplyResult("local", "default", "/r", steps, applied=True).exit_code == 6


def test_reports_name_each_step_and_escape_what_the_repository_wrote() -> None:
    steps = [Step("create", "jobs/a.yaml", "jobs/a.yaml", "a", "v1-" + "a" * 40),
             Step("replace", "team|`x`", "jobs/b.yaml", "b", "v1-" + "b" * 40,
                  found=[found("team", "v1-" + "c" * 40)]),
             Step("error", "jobs/c.yaml", "jobs/c.yaml", errors=[Diagnostic("TS201", "<b>bad</b>", "jobs/c.yaml", 3)],
                  message="1 error")]
    result = ApplyResult("local", "default", "/r", steps)
    text = render(result, "text")
    assert "create   jobs/a.yaml" in text and "v1-aaaaaaaaaaaa\n" in text
    assert "v1-cccccccccccc -> v1-bbbbbbbbbbbb" in text and "jobs/c.yaml:3" in text
    assert text.rstrip().endswith("Plan: 1 to create, 1 to replace, 1 error (local, scope default)")
    md = render(result, "markdown")
    assert "| replace | `team/'x' (jobs/b.yaml)` |" in md and "<b>" not in md.split("```")[0]
    report = json.loads(render(result, "json"))
    assert report["summary"]["create"] == 1 and report["steps"][1]["found"][0]["state"] == "RUNNING"
    assert report["steps"][2]["errors"][0]["code"] == "TS201"


# ---------------------------------------------------------------- the real CLI, on local


def test_lifecycle_on_local(ws: Workspace) -> None:
    lifecycle(ws, local_role)


def test_two_applies_at_once_submit_each_job_once(ws: Workspace) -> None:
    at_once(ws, local_role, runs=3, jobs=12)


def test_identity_is_the_path_or_name_or_what_the_spec_declares(ws: Workspace) -> None:
    ws.repo.write({"jobs/multi.yaml": "\n---\n".join(
        json.dumps({"name": n, "roles": [local_role("main", 1)]}, indent=2) for n in ("one", "two"))})
    ws.write("jobs/declared.json", "d", [local_role("main", 1)])
    data = json.loads((ws.root / "jobs/declared.json").read_text())
    data["metadata"] = {"torchspec.dev/apply-id": "team/nightly"}
    (ws.root / "jobs/declared.json").write_text(json.dumps(data, indent=2))
    report = ws.apply()
    assert sorted(report["by_id"]) == ["jobs/multi.yaml#one", "jobs/multi.yaml#two", "team/nightly"]
    # a move keeps a declared identity, and the content did not change: nothing to do
    (ws.root / "jobs/declared.json").rename(ws.root / "jobs/nightly.json")
    moved = ws.apply("--plan")
    assert moved["by_id"]["team/nightly"]["action"] == "unchanged"
    assert "team/nightly (jobs/nightly.json)" in ws.run(*ws.apply_args("--plan", fmt="text")).stdout
    shown = ws.run("list", "-s", "local", "--show-labels", "-l", "torchspec.dev/apply-id=team/nightly")
    assert shown.stdout.count("\n") == 2 and "torchspec.dev/apply-file=jobs/declared.json" in shown.stdout
    assert "no apps on local with label nope" in ws.run("list", "-s", "local", "-l", "nope").stderr


def test_a_broken_file_is_not_submitted_and_the_others_are_unless_all_or_nothing(ws: Workspace) -> None:
    ws.write("jobs/good.json", "good", [local_role("main", 1)])
    bad = {"name": "bad", "roles": [{**local_role("main", 1), "num_replicas": "many"}]}
    ws.repo.write({"jobs/bad.json": json.dumps(bad, indent=2)})
    strict = ws.apply("--all-or-nothing", expect=1)
    assert strict["by_id"]["jobs/good.json"]["status"] == "skipped" and ws.listed() == []
    assert strict["by_id"]["jobs/bad.json"]["errors"]
    report = ws.apply(expect=1)
    assert report["by_id"]["jobs/good.json"]["status"] == "done"
    assert [a["labels"]["torchspec.dev/apply-id"] for a in ws.listed()] == ["jobs/good.json"]
    text = ws.run(*ws.apply_args("--plan", fmt="text"))
    assert text.returncode == 7 and "jobs/bad.json" in text.stdout and "TS" in text.stdout


def test_a_failure_half_way_is_recorded_and_the_next_run_goes_on(ws: Workspace, monkeypatch: Any) -> None:
    """The second submission fails at the backend: the first stays labelled, the next run submits the rest."""
    from torchspec.runner import get_runner

    for name in ("a", "b", "c"):
        ws.write(f"jobs/{name}.json", name, [local_role("main", 300)])
    monkeypatch.chdir(ws.root)
    monkeypatch.setenv("TORCHSPEC_HOME", ws.env["TORCHSPEC_HOME"])
    options = ApplyOptions("local", scope=ws.scope)
    with get_runner() as runner:
        real = runner.schedule

        def flaky(info: Any) -> str:
            if info.app.name == "b":
                raise BackendError("the engine went away")
            return real(info)

        monkeypatch.setattr(runner, "schedule", flaky)
        result = apply_paths(runner, ["jobs"], options)
    assert [(s.identity, s.status) for s in result.steps] == [
        ("jobs/a.json", "done"), ("jobs/b.json", "failed"), ("jobs/c.json", "done")]
    assert result.exit_code == 6 and "went away" in result.steps[1].message
    again = ws.apply()
    assert {i: s["action"] for i, s in again["by_id"].items()} == {
        "jobs/a.json": "unchanged", "jobs/b.json": "create", "jobs/c.json": "unchanged"}
    assert again["by_id"]["jobs/b.json"]["status"] == "done" and len(ws.listed()) == 3


def test_usage_errors(ws: Workspace, tmp_path: pathlib.Path) -> None:
    ws.write("jobs/a.json", "a", [local_role("main", 1)])
    outside = tmp_path / "outside.json"
    outside.write_text((ws.root / "jobs/a.json").read_text())
    r = ws.run("apply", str(outside), "-s", "local")
    assert r.returncode == 2 and "outside" in r.stderr
    assert ws.run("apply", "jobs", "-s", "local", "-c", "nope=1").returncode == 2
    assert ws.run("apply", "missing", "-s", "local").returncode == 2


def test_the_lock_makes_a_second_run_wait_and_time_out(ws: Workspace) -> None:
    from torchspec.gitops.lock import held

    ws.write("jobs/a.json", "a", [local_role("main", 1)])
    lock = ws.root.parent / "apply.lock"
    with held(str(lock), 5):
        r = ws.run(*ws.apply_args("--lock-file", str(lock), "--lock-timeout", "0.5"))
    assert r.returncode == 124 and "another torchspec apply holds" in r.stderr and ws.listed() == []
    assert ws.apply("--lock-file", str(lock))["by_id"]["jobs/a.json"]["status"] == "done"


def test_a_scheduler_that_keeps_no_labels_is_refused(ws: Workspace) -> None:
    from torchspec.errors import UsageError
    from torchspec.runner import Runner
    from torchspec.schedulers.api import Capability
    from torchspec.schedulers.local.scheduler import LocalScheduler

    class Forgetful(LocalScheduler):
        capabilities = LocalScheduler.capabilities - {Capability.LABELS}
        keeps_labels = False

    ws.write("jobs/a.json", "a", [local_role("main", 1)])
    with Runner("t", {"forgetful": lambda session, **kw: Forgetful(session)}) as runner:
        with pytest.raises(UsageError, match="does not keep app labels"):
            apply_paths(runner, [str(ws.root / "jobs")], ApplyOptions("forgetful"), plan_only=True)


def test_a_third_party_backend_gets_the_labels_the_same_way(ws: Workspace, monkeypatch: Any) -> None:
    """The example plug-in (tests/plugins/torchspec-example, what `torchspec new scheduler` writes) declares
    Capability.LABELS and keeps AppDef.metadata in its store; apply needs nothing else from it."""
    from torchspec.runner import Runner

    monkeypatch.syspath_prepend(str(pathlib.Path(__file__).resolve().parents[1] / "plugins" / "torchspec-example"))
    monkeypatch.setenv("TORCHSPEC_HOME", str(ws.root.parent / "example-home"))
    from torchspec_example import create_scheduler

    for name in ("a", "b"):
        ws.write(f"jobs/{name}.json", name, [local_role("main", 0)])  # no resource: the example ignores them
    monkeypatch.chdir(ws.root)
    with Runner("t", {"example": create_scheduler}) as runner:
        first = apply_paths(runner, ["jobs"], ApplyOptions("example", lock_file=str(ws.root.parent / "m.lock")))
        second = apply_paths(runner, ["jobs"], ApplyOptions("example", lock_file=str(ws.root.parent / "m.lock")))
        described = runner.describe(first.steps[0].handle or "")
        for step in first.steps:
            runner.cancel(step.handle or "")
    assert [s.status for s in first.steps] == ["done", "done"]
    assert [(s.action, s.handle) for s in second.steps] == [("unchanged", s.handle) for s in first.steps]
    assert described is not None and described.metadata["torchspec.dev/apply-id"] == "jobs/a.json"
