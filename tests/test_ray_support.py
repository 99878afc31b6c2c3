"""The Ray test cluster's start-up retry (tests/ray_support.py), with stand-in node processes: a node whose
``ray start`` gives up is started again, a node that hangs is not, and a failure names the node count."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Dict, List

import pytest

import ray_support


class FakeNodes(ray_support.RayTestCluster):
    """Each 'node' is a shell: the scripts in ``plan`` are used in order (``exit 1`` gives up at once)."""

    plan: List[str]

    def _start(self, name: str, args: List[str]) -> None:
        log = self.root / f"{name}.log"
        log.write_text(f"{name} {' '.join(args)}\n")
        self.procs.append(subprocess.Popen(["sh", "-c", self.plan.pop(0)], start_new_session=True))
        self.logs.append(log)

    def nodes(self) -> List[Dict[str, str]]:
        # a node that is giving up never registered, even while its process is still exiting
        return [{"state": "ALIVE"} for p in self.procs if p.poll() is None and p.args[-1].startswith("sleep")]


def cluster(tmp_path: Path, *plan: str) -> FakeNodes:
    made = FakeNodes(tmp_path)
    made.plan = list(plan)
    return made


def test_a_node_that_gave_up_is_started_again(tmp_path: Path) -> None:
    made = cluster(tmp_path, "sleep 60", "exit 1", "exit 1", "sleep 60").start()
    try:
        assert len(made.procs) == 2 and all(p.poll() is None for p in made.procs)
        assert made.plan == []
        assert [log.name for log in made.logs][-1] == "worker-again2.log"
    finally:
        made.stop()


def test_three_failed_starts_fail_the_cluster(tmp_path: Path) -> None:
    made = cluster(tmp_path, "sleep 60", "exit 1", "exit 1", "exit 1", "sleep 60")
    with pytest.raises(pytest.fail.Exception, match=r"did not come up with 2 node\(s\): a ray start process exited"):
        made.start()
    assert made.plan == ["sleep 60"] and made.procs == []


def test_a_node_that_never_joins_is_not_started_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ray_support, "START_TIMEOUT_S", 2)
    made = cluster(tmp_path, "sleep 60", "sleep 60", "sleep 60")
    made.nodes = lambda: [{"state": "ALIVE"}]  # type: ignore[method-assign]  # the worker never counts
    with pytest.raises(pytest.fail.Exception, match="not within 2 s"):
        made.start()
    assert made.plan == ["sleep 60"]


def test_a_head_started_again_goes_first(tmp_path: Path) -> None:
    made = cluster(tmp_path, "sleep 60", "sleep 60", "exit 1", "sleep 60").start()
    try:
        made.stop_head()
        made.nodes = lambda: [{"state": "ALIVE"} for p in made.procs[:1]  # type: ignore[method-assign]
                              if p.poll() is None and p.args[-1].startswith("sleep")]  # the old worker: another cluster
        made.start_head()
        assert len(made.procs) == 2 and made.procs[0].args[-1] == "sleep 60" and made.plan == []
        assert made.logs[-1].name.endswith("-again1.log")
    finally:
        made.stop()
