"""``torchspec apply --sweep`` (and a params file's ``sweep:`` block): each point of the grid is an app of its own,
kept, created and pruned point by point, on the real local scheduler."""

from __future__ import annotations

import json
import pathlib
import sys
from typing import Any

import pytest
from apply_support import Workspace

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="the local scheduler needs POSIX process groups")

SPEC = {"name": "train", "params": {"lr": {"type": "number", "default": 0.1}, "batch": {"type": "integer",
                                                                                      "default": 8}},
        "roles": [{"name": "main", "image": ".", "entrypoint": sys.executable,
                   "args": ["-c", "import time; time.sleep(300)  # lr={{ lr }} batch={{ batch }}"]}]}


@pytest.fixture
def ws(tmp_path: pathlib.Path) -> Any:
    workspace = Workspace(tmp_path, "local")
    workspace.repo.write({"jobs/train.json": json.dumps(SPEC, indent=2)})
    yield workspace
    workspace.cancel_all()


def test_each_point_is_kept_created_and_pruned_by_itself(ws: Workspace) -> None:
    first = ws.apply("--sweep", "lr=0.1,0.2")
    assert {i: s["action"] for i, s in first["by_id"].items()} == {
        "jobs/train.json@lr=0.1": "create", "jobs/train.json@lr=0.2": "create"}
    assert ws.apply("--sweep", "lr=0.1,0.2")["by_id"]["jobs/train.json@lr=0.1"]["action"] == "unchanged"

    ws.repo.write({"grid.yaml": "sweep:\n  lr: [0.1, 0.3]\n"})  # the same sweep, from a params file
    moved = ws.apply("--params-file", "grid.yaml", "--prune")
    assert {i: s["action"] for i, s in moved["by_id"].items()} == {
        "jobs/train.json@lr=0.1": "unchanged", "jobs/train.json@lr=0.3": "create",
        "jobs/train.json@lr=0.2": "prune"}
    live = ws.live()
    assert set(live) == {"jobs/train.json@lr=0.1", "jobs/train.json@lr=0.3"}, live

    # every point of the spec carries one sweep id, whichever apply made it
    listed = ws.listed()
    sweeps = {a["labels"]["torchspec.dev/sweep"] for a in listed}
    assert len(sweeps) == 1, listed
    r = ws.run("list", "-s", "local", "--sweep", sweeps.pop(), "--state", "RUNNING", "-o", "json")
    assert sorted(a["app_handle"].rsplit("/", 1)[1].rsplit("-", 1)[0] for a in json.loads(r.stdout)) == [
        "train-lr-0-1", "train-lr-0-3"]


def test_a_point_a_spec_cannot_take_is_an_error_of_that_point(ws: Workspace) -> None:
    report = ws.apply("--sweep", "batch=4,x", expect=1)
    assert report["by_id"]["jobs/train.json@batch=4"]["action"] == "create"
    bad = report["by_id"]["jobs/train.json@batch=x"]
    assert bad["action"] == "error" and "'x' is not an integer" in json.dumps(bad), bad
