"""The Lease ``apply --lock kubernetes`` holds (torchspec/schedulers/kubernetes/lease.py), on the API stand-in.

Taking, waiting, renewal, release, expiry of a holder that died, two takers
of one expired Lease, a Lease taken away, and the errors: no server, RBAC.
The real server runs the race here too, and the rest through ``apply`` in tests/gitops/test_apply_lease.py.
"""

from __future__ import annotations

import json
import threading
import time
from datetime import datetime, timedelta, timezone
from typing import Any, Iterator

import pytest

from apiserver import FakeApiServer

from torchspec.errors import BackendError  # noqa: E402
from torchspec.schedulers.kubernetes.client import Cluster  # noqa: E402
from torchspec.schedulers.kubernetes.lease import LeaseLock, LeaseLost, LeaseRecord, now_micro, parse_time  # noqa: E402

NS = "default"
LEASES = ("coordination.k8s.io/v1", "leases")


@pytest.fixture
def locks(kubeconfig: str) -> Iterator[Any]:
    """make(duration=1, name="lock") -> a LeaseLock on the stand-in; each is released after the test."""
    made: list[LeaseLock] = []

    def make(duration: int = 1, name: str = "lock") -> LeaseLock:
        lock = LeaseLock(Cluster(kubeconfig=kubeconfig), NS, name, duration=duration)
        made.append(lock)
        return lock

    yield make
    for lock in made:
        lock.release()
        lock.cluster.close()


def stored(apiserver: FakeApiServer, name: str = "lock") -> dict:
    found = apiserver.get(*LEASES, NS, name)
    assert found is not None
    return found


def put(apiserver: FakeApiServer, holder: str, renewed: datetime, duration: int = 1, name: str = "lock") -> None:
    """A Lease someone else wrote (created, or replaced whatever is there)."""
    spec = {"holderIdentity": holder, "leaseDurationSeconds": duration,
            "renewTime": renewed.strftime("%Y-%m-%dT%H:%M:%S.%fZ")}
    old = apiserver.get(*LEASES, NS, name)
    if old is None:
        apiserver.create(*LEASES, NS, {"metadata": {"name": name}, "spec": spec})
    else:
        rt = apiserver.registry.get(*LEASES)
        apiserver.store.replace(rt, NS, name, {**old, "spec": spec})


def eventually(what: str, check: Any, timeout: float = 30.0) -> Any:
    """``check()``'s first true value, polled; a test waits on the event itself, never a fixed sleep."""
    deadline = time.monotonic() + timeout
    while not (value := check()):
        assert time.monotonic() < deadline, f"no {what} within {timeout}s"
        time.sleep(0.05)
    return value


# Durations here are seconds long, so that a holder's renewals (every sixth of its duration) keep it held on a
# loaded machine; where a duration is what a test checks, it is measured from a time taken in the test.


def test_micro_times_keep_six_digits_and_parse_back() -> None:
    stamp = now_micro()
    assert len(stamp) == 27 and stamp.endswith("Z") and abs(parse_time(stamp) - time.time()) < 5  # type: ignore
    assert parse_time("2026-01-02T03:04:05.123456789+01:00") == pytest.approx(
        datetime(2026, 1, 2, 2, 4, 5, 123456, tzinfo=timezone.utc).timestamp())
    assert parse_time("2026-01-02T03:04:05Z") == datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc).timestamp()
    assert parse_time("yesterday") is None and parse_time(None) is None


def test_take_wait_renew_release(apiserver: FakeApiServer, locks: Any) -> None:
    first, second = locks(duration=9), locks(duration=9)
    assert first.acquire(5)
    spec = stored(apiserver)["spec"]
    assert spec["holderIdentity"] == first.identity and spec["leaseDurationSeconds"] == 9
    assert spec["acquireTime"] == spec["renewTime"] and spec["leaseTransitions"] == 0
    assert first.identity.count(":") == 2 and first.identity != second.identity

    heard: list[LeaseRecord] = []
    started = time.monotonic()
    assert not second.acquire(0.5, heard.append)  # held and renewed: the wait runs out, all of it
    assert time.monotonic() - started >= 0.5
    assert [r.holder for r in heard] == [first.identity] and "held by" in heard[0].describe()

    renewed = eventually("renewal (one every sixth of the duration)",
                         lambda: (now := stored(apiserver)["spec"])["renewTime"] > spec["renewTime"] and now)
    assert renewed["acquireTime"] == spec["acquireTime"] and renewed["holderIdentity"] == first.identity
    first.check()

    first.release()
    assert "holderIdentity" not in stored(apiserver)["spec"]
    started = time.monotonic()
    assert second.acquire(30)
    assert time.monotonic() - started < 9  # free at once, not after the duration
    assert stored(apiserver)["spec"]["leaseTransitions"] == 1


def test_a_holder_that_died_leaves_a_lease_that_expires(apiserver: FakeApiServer, locks: Any) -> None:
    dead = locks(duration=3)
    before = time.monotonic()  # its renewTime is written after this
    assert dead.acquire(5)
    dead._stop.set()  # no more renewals, and no release: as after SIGKILL
    next_one = locks(duration=3)
    assert next_one.acquire(30)
    assert time.monotonic() - before >= 3 - 0.01  # not before the duration ran out (0.01: the clocks' steps)
    assert stored(apiserver)["spec"]["holderIdentity"] == next_one.identity
    with pytest.raises(LeaseLost, match="not renewed"):
        dead.check()


def test_an_expired_lease_is_taken_at_once(apiserver: FakeApiServer, locks: Any) -> None:
    put(apiserver, "gone:1:abc", datetime.now(timezone.utc) - timedelta(minutes=5), duration=60)
    lock = locks(duration=60)
    assert lock.acquire(30)  # at once: waiting out the 60 s duration, it would run out first


def test_a_holder_whose_clock_runs_ahead_is_taken_over_after_the_duration_unchanged(
        apiserver: FakeApiServer, locks: Any) -> None:
    """renewTime an hour ahead never looks expired by this clock: the Lease not changing for its duration does."""
    put(apiserver, "ahead:1:abc", datetime.now(timezone.utc) + timedelta(hours=1), duration=2)
    lock = locks(duration=2)
    started = time.monotonic()  # the Lease is first read after this
    assert lock.acquire(30)
    assert time.monotonic() - started >= 2  # unchanged for its whole duration first


def race(takers: list[LeaseLock]) -> list[LeaseLock]:
    """The takers that got the Lease, all of them trying at once."""
    barrier = threading.Barrier(len(takers))
    won: list[LeaseLock] = []

    def take(lock: LeaseLock) -> None:
        barrier.wait()
        if lock.acquire(2):
            won.append(lock)

    threads = [threading.Thread(target=take, args=(t,)) for t in takers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return won


def test_four_takers_of_one_expired_lease_one_wins(apiserver: FakeApiServer, locks: Any) -> None:
    put(apiserver, "gone:1:abc", datetime.now(timezone.utc) - timedelta(seconds=30), duration=30)
    won = race([locks(duration=30) for _ in range(4)])
    assert len(won) == 1 and stored(apiserver)["spec"]["holderIdentity"] == won[0].identity
    assert stored(apiserver)["spec"]["leaseTransitions"] == 1


def test_real_cluster_four_takers_of_one_expired_lease_one_wins(k8s_cluster: Any) -> None:
    """The replace carrying the resourceVersion read: the real server gives the others 409."""
    namespace = k8s_cluster.new_namespace("lease")
    old = (datetime.now(timezone.utc) - timedelta(seconds=60)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    k8s_cluster.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "race", "namespace": namespace},
        "spec": {"holderIdentity": "gone:1:abc", "leaseDurationSeconds": 30, "renewTime": old}}))
    takers = [LeaseLock(Cluster(kubeconfig=k8s_cluster.kubeconfig), namespace, "race", duration=30) for _ in range(4)]
    try:
        won = race(takers)
        assert len(won) == 1
        got = json.loads(k8s_cluster.kubectl("get", "lease", "-n", namespace, "race", "-o", "json").stdout)["spec"]
        assert got["holderIdentity"] == won[0].identity and got["leaseTransitions"] == 1
    finally:
        for lock in takers:
            lock.release()


def test_a_lease_taken_away_is_lost_and_stays_lost(apiserver: FakeApiServer, locks: Any) -> None:
    lock = locks(duration=12)
    assert lock.acquire(5)
    put(apiserver, "thief:1:abc", datetime.now(timezone.utc), duration=60)

    def lost() -> str:
        try:
            lock.check()
        except LeaseLost as e:
            return e.message
        return ""

    said = eventually("the next renewal (every 2 s) to find the thief", lost)
    assert "thief:1:abc took it over" in said, said
    with pytest.raises(LeaseLost, match="thief:1:abc took it over"):
        lock.check()
    lock.release()  # leaves the thief's Lease alone
    assert stored(apiserver)["spec"]["holderIdentity"] == "thief:1:abc"


def test_renewals_that_fail_make_check_refuse_before_the_lease_runs_out(apiserver: FakeApiServer,
                                                                      locks: Any) -> None:
    lock = locks(duration=9)
    assert lock.acquire(5)
    held = time.monotonic()  # renewed last (taken) before this: it holds until at most held + 9
    apiserver.fail_next("PUT", r"/leases/lock$", 500, count=100)
    eventually("a renewal to fail", lambda: apiserver.faults.pending < 100)
    lock.check()  # one renewal failed (1.5 s in); two thirds are left
    time.sleep(max(0.0, held + 6 - time.monotonic()))  # the duration is the point: two thirds of it gone
    with pytest.raises(LeaseLost, match="not renewed for"):
        lock.check()  # less than a third left: a submit now might outlast it
    apiserver.faults.clear()


def test_a_renewal_the_server_never_answers_costs_a_try_not_the_lease(apiserver: FakeApiServer,
                                                                      locks: Any) -> None:
    """One renewal held by the server for longer than the Lease lasts (seen in CI: a renewal unanswered for
    16 s of a 40 s Lease lost it): the request gives up after a sixth of the duration and the next try renews,
    so check() never refuses."""
    lock = locks(duration=12)
    assert lock.acquire(5)
    apiserver.stall_next("PUT", r"/leases/lock$", 30)
    deadline = time.monotonic() + 14  # past the whole duration
    try:
        while time.monotonic() < deadline:
            lock.check()
            time.sleep(0.2)
        assert apiserver.faults.pending == 0, "the renewal thread never asked"
    finally:
        lock.release()


def test_no_server_and_rbac_are_clear_errors(apiserver: FakeApiServer, locks: Any) -> None:
    apiserver.fail_next("POST", r"/leases$", 403)
    with pytest.raises(BackendError) as caught:
        locks().acquire(1)
    assert "forbidden" in caught.value.message and 'cannot create resource "leases"' in caught.value.message
    address = apiserver.url
    apiserver.stop()
    with pytest.raises(BackendError) as caught:
        locks().acquire(1)
    assert caught.value.message.startswith(f"cannot reach the Kubernetes API server at {address}")
