"""``events`` on the ray scheduler, read purely from a job and its log (the real cluster's are checked in
test_ray_cluster.py, on a retried app)."""

from __future__ import annotations

from types import SimpleNamespace

from torchspec.schedulers.ray.events import job_events
from torchspec.schedulers.ray.states import tag

LOG = "\n".join([
    "2026-01-02 03:04:05,000\tINFO job_manager.py:581 -- Runtime env is setting up.",
    tag("driver", None, "waiting for the placement groups of w (the cluster has {'CPU': 0.0} free)",
        "2026-01-02T03:04:40.000000Z"),
    tag("driver", None, "placed 1 placement group(s) in 36.0s", "2026-01-02T03:04:41.000000Z"),
    tag("driver", None, "started 2 replica(s)", "2026-01-02T03:04:41.500000Z"),
    "(w/1 pid=9) " + tag("w/1", "stdout", "hello", "2026-01-02T03:04:42.000000Z"),
    tag("driver", None, "w/1 exited with code 5; restarting 1 replica(s) (REPLICA retry)",
        "2026-01-02T03:04:43.000000Z"),
    tag("driver", None, "w/0: its actor died (its node went away)", "2026-01-02T03:04:44.000000Z"),
    tag("driver", None, 'summary {"state":"FAILED","failed":"w/0","exit_code":1}', "2026-01-02T03:04:45.000000Z"),
])


def test_the_job_and_its_drivers_lines_are_the_apps_events() -> None:
    job = SimpleNamespace(submission_id="w-k3x9q2", start_time=1767323045000, end_time=1767323086000,
                          status="FAILED", message="w/0 failed\nmore")
    events = job_events(job, LOG)
    said = [(e.reason, e.role, e.replica, e.warning) for e in events]
    assert said == [("Submitted", None, None, False), ("Waiting", None, None, False), ("Placed", None, None, False),
                    ("Started", None, None, False), ("Restarting", "w", 1, True), ("Replica", "w", 0, False),
                    ("Failed", None, None, True), ("Failed", None, None, True)]
    assert events[-2].message == "the driver ended the app FAILED: w/0 failed (exit code 1)"
    assert events[-1].message == "w/0 failed" and events[-1].source == "Ray job w-k3x9q2"
    assert "{'CPU': 0.0} free" in events[1].message  # why it waits


def test_a_running_job_has_no_end_yet() -> None:
    job = SimpleNamespace(submission_id="r", start_time=1767323045000, end_time=None, status="RUNNING", message="")
    assert [e.reason for e in job_events(job, "")] == ["Submitted"]
