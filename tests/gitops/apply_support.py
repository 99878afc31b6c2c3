"""A git repository of spec files and the real ``torchspec apply`` over it, for the apply tests of every backend.

Each CLI call is a fresh process with a private ``TORCHSPEC_HOME`` (shared
by every call of one test, as on one CI machine) and the test's own
``--scope``, so apps of tests running at the same time on a shared engine
or cluster never meet.  :func:`lifecycle` is the one scenario every backend
runs: apply, apply again, change a file and delete one, plan, prune,
replace.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import time
import uuid
from typing import Any, Callable

from git_repo import GitRepo

EXE = pathlib.Path(sys.executable).with_name("torchspec")
TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED"}

#: role(name, seconds) -> a role of the backend that runs for that long
RoleMaker = Callable[[str, int], dict]


class Workspace:
    def __init__(self, tmp: pathlib.Path, scheduler: str, cfg: str = "", extra_env: dict | None = None) -> None:
        self.repo = GitRepo(tmp / "repo")
        self.root = self.repo.root
        self.scheduler = scheduler
        self.cfg = cfg
        self.scope = f"test-{uuid.uuid4().hex[:10]}"
        self.env = dict(os.environ, NO_COLOR="1", TORCHSPEC_HOME=str(tmp / "home"), XDG_CONFIG_HOME=str(tmp / "xdg"),
                        **(extra_env or {}))
        for key in ("FORCE_COLOR", "TORCHSPEC_DEBUG"):
            self.env.pop(key, None)

    def command(self, *args: str) -> list[str]:
        return ([str(EXE)] if EXE.exists() else [sys.executable, "-m", "torchspec"]) + list(args)

    def run(self, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        r = subprocess.run(self.command(*args), capture_output=True, text=True, cwd=self.root, env=self.env,
                           timeout=timeout)
        assert "Traceback" not in r.stderr, r.stderr
        return r

    def apply_args(self, *extra: str, fmt: str = "json") -> list[str]:
        args = ["apply", "jobs", "-s", self.scheduler, "--scope", self.scope, "--format", fmt, *extra]
        return args + (["-c", self.cfg] if self.cfg else [])

    def apply(self, *extra: str, expect: int = 0) -> dict[str, Any]:
        """``apply jobs`` (json); asserts the exit code and returns the report, with each step by identity."""
        r = self.run(*self.apply_args(*extra))
        assert r.returncode == expect, (r.returncode, r.stdout, r.stderr)
        report = json.loads(r.stdout)
        report["by_id"] = {s["identity"]: s for s in report["steps"]}
        return report  # type: ignore[no-any-return]

    def popen(self, *args: str) -> "subprocess.Popen[str]":
        return subprocess.Popen(self.command(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                cwd=self.root, env=self.env)

    def write(self, rel: str, name: str, roles: list[dict]) -> None:
        self.repo.write({rel: json.dumps({"name": name, "roles": roles}, indent=2)})

    def listed(self) -> list[dict[str, Any]]:
        """The scheduler's apps that this test's applies submitted (``list --json``, by the scope label)."""
        args = ["list", "-s", self.scheduler, "--json", "-l", f"torchspec.dev/apply-scope={self.scope}"]
        args += ["-c", self.cfg] if self.cfg else []
        r = self.run(*args)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)  # type: ignore[no-any-return]

    def live(self) -> dict[str, list[str]]:
        """identity -> handles of its live apps."""
        out: dict[str, list[str]] = {}
        for app in self.listed():
            if app["state"] not in TERMINAL:
                out.setdefault(app["labels"]["torchspec.dev/apply-id"], []).append(app["app_handle"])
        return out

    def cancel_all(self) -> None:
        for app in self.listed():
            if app["state"] not in TERMINAL:
                self.run("cancel", app["app_handle"])


def wait_until(check: Callable[[], bool], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.3)


def lifecycle(ws: Workspace, role: RoleMaker) -> None:
    """Apply twice (the second submits nothing); change b, delete c: the plan says replace b, prune c and
    nothing else; --prune cancels only c, --replace only replaces b; then all is unchanged."""
    for name in ("a", "b", "c"):
        ws.write(f"jobs/{name}.json", name, [role("main", 300)])
    ws.repo.commit("three jobs")

    first = ws.apply()
    assert {s["identity"]: (s["action"], s["status"]) for s in first["steps"]} == {
        f"jobs/{n}.json": ("create", "done") for n in "abc"}
    handles = {i: s["handle"] for i, s in first["by_id"].items()}
    assert sorted(app["app_handle"] for app in ws.listed()) == sorted(handles.values())
    labels = {app["labels"]["torchspec.dev/apply-id"]: app["labels"] for app in ws.listed()}
    assert labels["jobs/a.json"]["torchspec.dev/content-hash"] == first["by_id"]["jobs/a.json"]["hash"]
    assert labels["jobs/a.json"]["torchspec.dev/apply-file"] == "jobs/a.json"

    again = ws.apply()
    assert {s["action"] for s in again["steps"]} == {"unchanged"} and again["summary"]["done"] == 0
    assert {i: s["handle"] for i, s in again["by_id"].items()} == handles
    assert len(ws.listed()) == 3

    ws.write("jobs/b.json", "b", [role("main", 301)])
    (ws.root / "jobs" / "c.json").unlink()
    ws.repo.commit("change b, delete c")
    planned = ws.apply("--plan", expect=1)
    assert {i: s["action"] for i, s in planned["by_id"].items()} == {
        "jobs/a.json": "unchanged", "jobs/b.json": "replace", "jobs/c.json": "prune"}
    assert [f["handle"] for f in planned["by_id"]["jobs/b.json"]["found"]] == [handles["jobs/b.json"]]
    assert len(ws.listed()) == 3  # a plan does nothing

    pruned = ws.apply("--prune")
    assert {i: s["status"] for i, s in pruned["by_id"].items()} == {
        "jobs/a.json": "untouched", "jobs/b.json": "skipped", "jobs/c.json": "done"}
    wait_until(lambda: set(ws.live()) == {"jobs/a.json", "jobs/b.json"})
    assert ws.live()["jobs/b.json"] == [handles["jobs/b.json"]]

    replaced = ws.apply("--replace")
    b = replaced["by_id"]["jobs/b.json"]
    assert (b["action"], b["status"]) == ("replace", "done") and b["handle"] != handles["jobs/b.json"]
    wait_until(lambda: ws.live() == {"jobs/a.json": [handles["jobs/a.json"]], "jobs/b.json": [b["handle"]]})
    assert {s["action"] for s in ws.apply()["steps"]} == {"unchanged"}


def at_once(ws: Workspace, role: RoleMaker, runs: int = 2, jobs: int = 4, extra: tuple[str, ...] = ()
            ) -> list[dict[str, Any]]:
    """``runs`` applies of the same folder (with ``extra`` arguments) started together submit each job once
    between them; their reports.

    Without the lock they would: each lists the scheduler's apps before the
    others have submitted, and every run submits every job.
    """
    names = [f"job{i:02d}" for i in range(jobs)]
    for name in names:
        ws.write(f"jobs/{name}.json", name, [role("main", 300)])
    ws.repo.commit("the jobs")
    procs = [ws.popen(*ws.apply_args(*extra)) for _ in range(runs)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0] * runs, [o[1] for o in outs]
    created = [s["identity"] for out, _ in outs for s in json.loads(out)["steps"] if s["status"] == "done"]
    assert sorted(created) == [f"jobs/{n}.json" for n in names]
    assert sorted(a["labels"]["torchspec.dev/apply-id"] for a in ws.listed()) == sorted(created)
    return [json.loads(out) for out, _ in outs]
