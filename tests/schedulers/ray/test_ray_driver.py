"""The driver's bookkeeping of its replicas' last lines, against a stand-in for ``ray`` (no cluster).

The driver ends the app only once every replica attempt's end mark reached
the job's log, at most ``FLUSH_WAIT_S``; an attempt that never printed one
(its actor killed while it was still starting) must not hold the end back,
nor may a replica stopped before it started keep the driver waiting.  And
what the driver imports, since it runs on the cluster.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from typing import Any, List, Optional, Tuple

import pytest

from torchspec.schedulers.ray import driver as driver_module
from torchspec.schedulers.ray.driver import END_MARK, Driver, ReplicaRunner


class Ref:
    """An ObjectRef stand-in: done or not, with the value ``ray.get`` gives."""

    def __init__(self, done: bool, value: Any = 0) -> None:
        self.done = done
        self.value = value


class Method:
    def __init__(self, ref: Ref) -> None:
        self.ref = ref

    def remote(self, *args: Any) -> Ref:
        return self.ref


class Actor:
    def __init__(self, run: Ref) -> None:
        self.run = Method(run)
        self.stop = Method(Ref(done=True))


class FakeRay:
    """What the driver calls on ``ray`` once its actors exist: wait, get, kill."""

    def __init__(self) -> None:
        self.killed: List[Actor] = []

    def remote(self, **options: Any) -> Any:
        return lambda cls: cls

    def wait(self, refs: List[Ref], num_returns: int, timeout: Optional[float]) -> Tuple[List[Ref], List[Ref]]:
        return [r for r in refs if r.done], [r for r in refs if not r.done]

    def get(self, ref: Ref) -> Any:
        return ref.value

    def kill(self, actor: Actor, no_restart: bool) -> None:
        self.killed.append(actor)


def driver_with(*runs: Ref) -> Tuple[Driver, FakeRay, List[Actor]]:
    """A driver of one role whose replica k runs as an actor whose ``run`` gives ``runs[k]``."""
    ray = FakeRay()
    replicas = [{"replica_id": k, "args": ["true"], "env": {}} for k in range(len(runs))]
    role = {"role": "r", "strategy": "PACK", "bundles": [{"CPU": 1}] * len(runs), "retry_policy": "APPLICATION",
            "max_retries": 0, "replicas": replicas}
    driver = Driver(ray, {"app_id": "a", "roles": [role]})
    actors = [Actor(run) for run in runs]
    for k, (actor, run) in enumerate(zip(actors, runs)):
        driver.attempts[(0, k)] = 0
        driver.actors[(0, k)] = actor
        driver.running[run] = (0, k)
    return driver, ray, actors


#: The flush wait these tests run under: long, so that ending before it can only be a wake, on a loaded machine too.
LONG_FLUSH_S = 60.0


@pytest.fixture(autouse=True)
def long_flush(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(driver_module, "FLUSH_WAIT_S", LONG_FLUSH_S)


def test_stopping_waits_for_no_end_mark_of_an_actor_killed_before_its_run_returned() -> None:
    driver, ray, actors = driver_with(Ref(done=True), Ref(done=False))
    driver.stop([(0, 0), (0, 1)])
    assert ray.killed == actors and driver.actors == {} and driver.running == {}
    assert driver.ended == {"r/0#0"}  # r/1 was still starting: it printed no end mark
    start = time.monotonic()
    driver.on_log({"lines": [f"(r/0 pid=1) {END_MARK}r/0#0]"]})
    driver.wait_for_lines()
    assert time.monotonic() - start < LONG_FLUSH_S / 2  # not the whole flush wait, for r/1's mark


def test_the_end_waits_for_the_marks_and_wakes_as_they_arrive() -> None:
    driver, ray, actors = driver_with(Ref(done=True, value=0), Ref(done=True, value=0))
    for ref in list(driver.running):
        driver.collect(ref, driver.running.pop(ref))
    assert driver.ended == {"r/0#0", "r/1#0"} and driver.codes == {(0, 0): 0, (0, 1): 0}

    last_sent = threading.Event()  # set as the last mark is sent: the wait may end before on_log returns

    def lines_arrive() -> None:
        time.sleep(0.2)
        driver.on_log({"lines": [f"(r/0 pid=1) {END_MARK}r/0#0]", "(r/1 pid=2) unrelated"]})
        time.sleep(0.2)
        last_sent.set()
        driver.on_log({"lines": [f"(r/1 pid=2) {END_MARK}r/1#0]"]})

    start = time.monotonic()
    threading.Thread(target=lines_arrive, daemon=True).start()
    driver.wait_for_lines()
    assert last_sent.is_set()  # it waited for both marks
    assert time.monotonic() - start < LONG_FLUSH_S / 2  # and woke as the last came, not at the flush wait's end


def test_a_replica_stopped_before_its_run_started_it_never_starts(capsys) -> None:
    runner = ReplicaRunner("r/1", 0)
    runner.stop(1.0)
    start = time.monotonic()
    assert runner.run(["sleep", "30"], {}) == 143
    assert runner.proc is None and time.monotonic() - start < 30  # no process, so no sleep to its end
    assert capsys.readouterr().out == f"{END_MARK}r/1#0]\n"


def test_the_driver_imports_no_torchspec_module_but_order_replicas_states_placement_and_cleanup() -> None:
    # it runs on the cluster, where every replica's actor imports states.py as well: the specs stay out
    code = ("import sys, torchspec.schedulers.ray.driver; "
            "print(' '.join(sorted(m for m in sys.modules if m.partition('.')[0] == 'torchspec')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["torchspec", "torchspec.schedulers", "torchspec.schedulers.exports", "torchspec.schedulers.order",
                   "torchspec.schedulers.ray", "torchspec.schedulers.ray.cleanup", "torchspec.schedulers.ray.driver",
                   "torchspec.schedulers.ray.placement", "torchspec.schedulers.ray.states",
                   "torchspec.schedulers.replicas", "torchspec.version"]
