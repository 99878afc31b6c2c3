"""The slurm scheduler under faults, on the real test cluster (``scripts/slurm-cluster``): the controller
restarted under a running app, and a node lost under a replica. What the user sees through the CLI, and that
nothing is hidden: no replica of a job that a lost node ended reads SUCCEEDED.

Each test puts the cluster back as it found it (``scripts/slurm-cluster start`` starts what is not running,
with the same topology; a node set DOWN is resumed), even when it fails.
"""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import time
from typing import Dict, List

import pytest

from process_support import command_name, processes_with_env, wait_empty
from test_slurm_cli import APP_CANCELLED, APP_FAILED, OK, cli  # noqa: F401 - skips without the entry point

ROOT = pathlib.Path(__file__).resolve().parents[3]
BACKEND = 6


@pytest.fixture
def cluster_dir(slurm_jobs: list) -> pathlib.Path:
    return pathlib.Path(os.environ["SLURM_CONF"]).parent


def restore(cluster_dir: pathlib.Path) -> None:
    """Start whatever of the cluster is not running, and resume every node that is not up."""
    nodes = subprocess.run(["sinfo", "-h", "-N", "-o", "%N"], capture_output=True, text=True).stdout.split()
    subprocess.run(["bash", str(ROOT / "scripts" / "slurm-cluster"), "start", "--nodes", "3", str(cluster_dir)],
                   capture_output=True, text=True, timeout=120, check=True)
    for node in sorted(set(nodes)):
        subprocess.run(["scontrol", "update", f"nodename={node}", "state=RESUME"], capture_output=True)


def sleeper(tmp: pathlib.Path, name: str, replicas: int = 2) -> str:
    path = tmp / f"{name}.json"
    path.write_text(json.dumps({"name": name, "roles": [{
        "name": "trainer", "image": str(tmp), "entrypoint": "sh", "args": ["-c", "echo up; sleep 600"],
        "num_replicas": replicas}]}))
    return str(path)


def status(tmp: pathlib.Path, handle: str) -> Dict:
    done = cli(tmp, "status", "--json", handle)
    assert done.returncode == OK, done.stderr
    return json.loads(done.stdout)


def wait_for(tmp: pathlib.Path, handle: str, states: tuple, timeout: float = 60) -> Dict:
    deadline = time.monotonic() + timeout
    while (st := status(tmp, handle))["state"] not in states:
        assert time.monotonic() < deadline, f"{handle} never reached {states}: {st}"
        time.sleep(0.5)
    return st


def processes_of(job_id: str) -> List[int]:
    """Live processes of the job (its environment says SLURM_JOB_ID), but Slurm's own daemons."""
    return [pid for pid in processes_with_env("SLURM_JOB_ID", job_id)
            if (name := command_name(pid)) is not None and "slurmstepd" not in name]


def gone(job_id: str, within: float = 30) -> bool:
    return not wait_empty(lambda: processes_of(job_id), within)


def test_the_controller_restarted_under_a_running_app(slurm_jobs: list, cluster_dir: pathlib.Path,
                                                      tmp_path: pathlib.Path) -> None:
    """While slurmctld is down: status and cancel are exit 6 saying the controller does not answer. Once it is
    back (its state saved), the app is still RUNNING, and cancel ends it and every process of it."""
    handle = cli(tmp_path, "submit", "-s", "slurm", sleeper(tmp_path, "ctld")).stdout.strip()
    job_id = handle.rsplit("/", 1)[1]
    slurm_jobs.append(job_id)
    wait_for(tmp_path, handle, ("RUNNING",))
    pid = int((cluster_dir / "run" / "slurmctld.pid").read_text())
    try:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
            time.sleep(0.2)
        for command in ("status", "cancel"):
            down = cli(tmp_path, command, handle)
            assert down.returncode == BACKEND, down
            assert "the Slurm controller does not answer" in down.stderr and "scontrol ping" in down.stderr
    finally:
        restore(cluster_dir)
    assert wait_for(tmp_path, handle, ("RUNNING", "FAILED", "SUCCEEDED"))["state"] == "RUNNING"
    assert cli(tmp_path, "cancel", handle).returncode == OK
    assert cli(tmp_path, "wait", handle, "--timeout", "60").returncode == APP_CANCELLED
    assert gone(job_id)


def test_a_node_lost_under_a_replica_fails_the_app_saying_so(slurm_jobs: list, cluster_dir: pathlib.Path,
                                                             tmp_path: pathlib.Path) -> None:
    """The slurmd of one of the app's nodes dies and the node is set DOWN: with ``-c preemption=fail`` (by default
    Slurm requeues a job whose node is lost, as after a preemption) the app is FAILED with NODE_FAIL naming the
    node, and no replica reads SUCCEEDED (srun exits 0 when the node under its step fails: the exit code each
    step writes on its node is what counts)."""
    handle = cli(tmp_path, "submit", "-s", "slurm", "-c", "preemption=fail", sleeper(tmp_path, "lost")).stdout.strip()
    job_id = handle.rsplit("/", 1)[1]
    slurm_jobs.append(job_id)
    wait_for(tmp_path, handle, ("RUNNING",))
    node = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%N"], capture_output=True,
                          text=True).stdout.split(",")[0].strip()
    node = subprocess.run(["scontrol", "show", "hostnames", node], capture_output=True, text=True).stdout.split()[-1]
    try:
        slurmd = int((cluster_dir / "run" / f"slurmd-{node}.pid").read_text())
        os.kill(slurmd, signal.SIGKILL)
        subprocess.run(["scontrol", "update", f"nodename={node}", "state=DOWN", "reason=fault-test"], check=True)
        st = wait_for(tmp_path, handle, ("FAILED", "SUCCEEDED", "CANCELLED"))
        assert st["state"] == "FAILED", st
        assert "NODE_FAIL" in st["msg"] and f"{node} is down (fault-test)" in st["msg"], st["msg"]
        replicas = [r["state"] for role in st["roles"] for r in role["replicas"]]
        assert "SUCCEEDED" not in replicas, st
        assert cli(tmp_path, "wait", handle, "--timeout", "30").returncode == APP_FAILED
    finally:
        restore(cluster_dir)
    assert gone(job_id, within=60)
