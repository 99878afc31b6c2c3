"""``events`` on the slurm scheduler: the job's record (each scontrol format) and its log folder's, read purely,
then on the real cluster: a job that fails, one that cannot start yet, and (test_slurm_cluster.py) a requeue."""

from __future__ import annotations

import os
import pathlib

from test_slurm_cluster import AS, image, role, sched, wait_state  # noqa: F401 - image, sched: the fixtures
from torchspec import specs
from torchspec.schedulers.slurm.events import component_events, job_events
from torchspec.schedulers.slurm.query import parse_scontrol, view_from_json, view_from_scontrol

SCONTROL = ("JobId=42 JobName=t JobState=FAILED Reason=NonZeroExitCode Dependency=(null) Requeue=1 Restarts=1 "
            "ExitCode=3:0 SubmitTime=2026-01-02T03:04:05 StartTime=2026-01-02T03:04:07 EndTime=2026-01-02T03:05:00 "
            "NodeList=n[1-2] Comment=torchspec:/logs")


def test_the_jobs_record_says_when_and_why() -> None:
    view = view_from_scontrol(parse_scontrol(SCONTROL)[0])
    said = [(e.reason, e.message, e.warning) for e in component_events(view, het=False)]
    assert said[0] == ("Submitted", "submitted", False)
    assert said[1][0] == "Requeued" and said[1][2] and "requeued 1 time(s)" in said[1][1]
    assert said[2] == ("Started", "started on n[1-2]", False)
    assert said[3][0] == "Failed" and said[3][2]
    assert component_events(view, het=True)[0].source == "job 42+0"


def test_the_json_record_reads_the_same() -> None:
    job = {"job_id": 42, "job_state": ["PENDING"], "state_reason": "Resources", "restart_cnt": 0,
           "submit_time": {"set": True, "infinite": False, "number": 1767323045}, "start_time": {"set": False},
           "end_time": 0, "nodes": "", "comment": "torchspec:/logs"}
    view = view_from_json(job)
    assert view.submitted is not None and view.started is None and view.ended is None
    said = [(e.reason, e.message, e.warning) for e in component_events(view, het=False)]
    assert said == [("Submitted", "submitted", False), ("Pending", "pending: Resources", False)]
    never = view_from_json({**job, "state_reason": "BadConstraints"})
    assert component_events(never, het=False)[-1].warning  # it will not start by itself


def test_the_log_folder_says_what_each_replica_did(tmp_path: pathlib.Path) -> None:
    folder = tmp_path / "42" / "w" / "0"
    folder.mkdir(parents=True)
    (folder / "started").write_text("")
    (folder / "restarts").write_text("2\n")
    (folder / "exitcode").write_text("3\n")
    os.utime(folder / "exitcode", (2e9, 2e9))  # written last
    (tmp_path / "42" / "w" / "1").mkdir()
    (tmp_path / "42" / "w" / "1" / "waiting").write_text("waits for 'download' to be finished")
    events = job_events([], str(tmp_path / "42"))
    assert [(e.reason, e.role, e.replica) for e in events] == [
        ("Waiting", "w", 1), ("Started", "w", 0), ("Restarted", "w", 0), ("Exited", "w", 0)]
    assert events[-1].message == "exited with code 3" and events[-1].warning


def test_a_failed_job_on_the_cluster(sched, image) -> None:
    app = specs.AppDef("evs", roles=[role(image, "w", sleep=0.5, code=3)])
    job_id = sched.submit_app(app)
    assert wait_state(sched, job_id, {AS.SUCCEEDED, AS.FAILED, AS.CANCELLED}).state == AS.FAILED
    said = [(e.reason, e.role, e.replica, e.warning) for e in sched.events(job_id)]
    assert said[0] == ("Submitted", None, None, False), said
    assert ("Started", None, None, False) in said and ("Failed", None, None, True) in said, said
    assert ("Exited", "w", 0, True) in said, said
    exited = next(e for e in sched.events(job_id) if e.reason == "Exited")
    assert exited.message == "exited with code 3" and exited.source == "replica folder w/0"


def test_a_job_that_cannot_start_yet_says_why(sched, image) -> None:
    app = specs.AppDef("evp", roles=[role(image, "w", sleep=0.5)])
    job_id = sched.submit_app(app, sbatch_args=["--begin=now+1hour"])
    pending = [e for e in sched.events(job_id) if e.reason == "Pending"]
    assert len(pending) == 1 and pending[0].message == "pending: BeginTime", sched.events(job_id)
    assert not pending[0].warning  # it starts by itself, in an hour
