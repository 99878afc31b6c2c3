"""The slurm scheduler against a real cluster (``scripts/slurm-cluster start --nodes 3``), through its API.

Skips without a controller that answers (fails under TORCHSPEC_REQUIRE_SLURM=1).
Each job is cancelled at the end of its test (``slurm_jobs``).  Apps are
small shell scripts in an image folder under ``tmp_path``: on this one-host
cluster /tmp is the "shared" file system.
"""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys
import time
import uuid
from datetime import datetime, timedelta

import pytest

from torchspec import specs
from torchspec.schedulers.slurm.scheduler import SlurmScheduler

AS = specs.AppState

REPLICA_SH = r"""#!/bin/bash
# args: replica_id app_id rank0_env sleep exit_code
host=${!3}
echo "replica=$1 env_replica=$TORCHSPEC_REPLICA_ID role=$TORCHSPEC_ROLE_NAME app=$2 env_app=$TORCHSPEC_APP_ID"
echo "rank0_host=$host resolves=$(getent hosts "$host" | awk '{print $1; exit}')"
echo "hosts trainer=${TORCHSPEC_HOSTS_TRAINER:-} ps=${TORCHSPEC_HOSTS_PS:-}"
echo "to stderr $1" >&2
# "done" only after the whole sleep: a cancel's SIGTERM may reach sleep before bash, which would then print it
sleep "$4" || exit "$?"
echo "done $1"
exit "${5:-0}"
"""


@pytest.fixture
def image(tmp_path) -> str:
    folder = tmp_path / "img"
    folder.mkdir()
    (folder / "replica.sh").write_text(REPLICA_SH)
    (folder / "replica.sh").chmod(0o755)
    return str(folder)


@pytest.fixture
def sched(slurm_jobs, tmp_path):
    scheduler = SlurmScheduler("test")
    cfg = {"log_dir": str(tmp_path / "logs"), "one_node_per_replica": False}

    def submit(app: specs.AppDef, **extra: object) -> str:
        job_id = scheduler.submit(app, {**cfg, **extra})
        slurm_jobs.append(job_id)
        return job_id

    scheduler.submit_app = submit  # type: ignore[attr-defined]
    return scheduler


def role(image: str, name: str, replicas: int = 1, sleep: float = 1, code: int = 0, **kw: object) -> specs.Role:
    return specs.Role(name=name, image=image, entrypoint="replica.sh",
                      args=["${replica_id}", "${app_id}", "${rank0_env}", str(sleep), str(code)],
                      num_replicas=replicas, resource=specs.Resource(cpu=1, gpu=0, memMB=64), **kw)  # type: ignore[arg-type]


def wait_state(sched: SlurmScheduler, job_id: str, states: set, timeout: float = 90):
    deadline = time.monotonic() + timeout
    while True:
        desc = sched.describe(job_id)
        assert desc is not None
        if desc.state in states or time.monotonic() > deadline:
            return desc
        time.sleep(0.3)


def test_het_job_each_replica_sees_its_id_and_resolves_rank0(sched, image) -> None:
    app = specs.AppDef("tpr", roles=[role(image, "trainer", 2), role(image, "ps"), role(image, "reader")])
    job_id = sched.submit_app(app)
    assert job_id.isdigit()

    # logs -f from submission (still pending) to the end of the replica
    followed = list(sched.log_iter(job_id, "trainer", 1, should_tail=True))
    assert followed[-1] == "done 1\n", followed
    desc = wait_state(sched, job_id, {AS.SUCCEEDED, AS.FAILED, AS.CANCELLED})
    assert desc.state == AS.SUCCEEDED, desc.msg
    assert [r.name for r in desc.roles] == ["trainer", "ps", "reader"]  # rebuilt from the stored spec
    assert [(r.role, [x.state for x in r.replicas]) for r in desc.roles_statuses] == [
        ("trainer", [AS.SUCCEEDED] * 2), ("ps", [AS.SUCCEEDED]), ("reader", [AS.SUCCEEDED])]

    for name, k in (("trainer", 0), ("trainer", 1), ("ps", 0), ("reader", 0)):
        out = "".join(sched.log_iter(job_id, name, k, streams="stdout"))
        assert f"replica={k} env_replica={k} role={name} app={job_id} env_app={job_id}" in out, out
        match = re.search(r"rank0_host=(\S+) resolves=(\S+)", out)
        assert match and match.group(2), out  # ${rank0_env} names a variable holding a host that resolves
        hosts = re.search(r"^hosts trainer=(\S+) ps=(\S+)$", out, re.MULTILINE)  # every role's, in every replica
        assert hosts, out
        own = {"trainer": hosts.group(1), "ps": hosts.group(2)}.get(name)
        assert own is None or own.split(",")[0] == match.group(1), out  # its own role's first host is its rank 0
        assert all(subprocess.run(["getent", "hosts", h], capture_output=True).returncode == 0
                   for h in hosts.group(1).split(",") + [hosts.group(2)]), out
        assert "to stderr" not in out
    assert "".join(sched.log_iter(job_id, "ps", 0, streams="stderr")).startswith("to stderr 0")
    assert list(sched.log_iter(job_id, "trainer", 0, regex="^done")) == ["done 0\n"]
    hour = timedelta(hours=1)
    assert len(list(sched.log_iter(job_id, "reader", 0, since=datetime.now() - hour))) >= 4
    assert list(sched.log_iter(job_id, "reader", 0, until=datetime.now() - hour)) == []

    # a fresh process, that never saw the submission, finds the app
    fresh = subprocess.run([sys.executable, "-c", "import sys;"
                            " from torchspec.schedulers.slurm.scheduler import SlurmScheduler;"
                            " d = SlurmScheduler('other').describe(sys.argv[1]); print(d.state.name, len(d.roles))",
                            job_id], capture_output=True, text=True, timeout=60)
    assert fresh.stdout.split() == ["SUCCEEDED", "3"], fresh.stderr
    assert job_id in [a.app_id for a in sched.list()]
    with pytest.raises(ValueError, match="no role"):
        sched.log_iter(job_id, "nope", 0)


def test_failing_job_is_requeued_then_fails_with_its_exit_code(sched, image) -> None:
    app = specs.AppDef("failer", roles=[role(image, "w", sleep=0, code=3, max_retries=1)])
    job_id = sched.submit_app(app)
    desc = wait_state(sched, job_id, {AS.SUCCEEDED, AS.FAILED, AS.CANCELLED}, timeout=90)
    assert desc.state == AS.FAILED and desc.num_restarts == 1, desc
    assert "w/0 exited with code 3" in desc.msg and "exit code 3" in desc.msg
    logs = "".join(sched.log_iter(job_id, "w", 0, streams="stdout"))
    assert len(re.findall("^replica=0", logs, re.M)) == 2 and "restart 1 of the job" in logs


def test_replica_policy_restarts_the_step_in_place(sched, image) -> None:
    app = specs.AppDef("replica", roles=[role(image, "w", sleep=0, code=4, max_retries=2,
                                              retry_policy=specs.RetryPolicy.REPLICA)])
    job_id = sched.submit_app(app)
    desc = wait_state(sched, job_id, {AS.SUCCEEDED, AS.FAILED, AS.CANCELLED})
    assert desc.state == AS.FAILED and desc.num_restarts == 0
    replica = desc.roles_statuses[0].replicas[0]
    assert replica.num_restarts == 2 and replica.exit_code == 4  # type: ignore[attr-defined]
    assert len(re.findall("^replica=0", "".join(sched.log_iter(job_id, "w", 0)), re.M)) == 3


def test_cancel_while_running_leaves_no_process(sched, image) -> None:
    marker = f"4{uuid.uuid4().int % 10**6}"  # a unique sleep length to find the processes by
    app = specs.AppDef("sleeper", roles=[role(image, "a", 2, sleep=int(marker)), role(image, "b", sleep=int(marker))])
    job_id = sched.submit_app(app)
    deadline = time.monotonic() + 60
    while "replica=1" not in "".join(sched.log_iter(job_id, "a", 1)) and time.monotonic() < deadline:
        time.sleep(0.3)
    assert subprocess.run(["pgrep", "-f", f"sleep {marker}"], capture_output=True).returncode == 0
    assert sched.describe(job_id).state == AS.RUNNING  # type: ignore[union-attr]
    sched.cancel(job_id)
    desc = wait_state(sched, job_id, {AS.CANCELLED, AS.FAILED, AS.SUCCEEDED}, timeout=30)
    assert desc.state == AS.CANCELLED
    deadline = time.monotonic() + 15
    while subprocess.run(["pgrep", "-f", f"sleep {marker}"], capture_output=True).returncode == 0:
        assert time.monotonic() < deadline, "replica processes survived the cancel"
        time.sleep(0.3)
    # following a cancelled job's logs ends
    assert list(sched.log_iter(job_id, "b", 0, should_tail=True, regex="^done")) == []


def test_dryrun_script_is_accepted_by_sbatch_test_only(sched, image, tmp_path) -> None:
    app = specs.AppDef("tpr", roles=[role(image, "trainer", 2), role(image, "ps")])
    info = sched.submit_dryrun(app, {"log_dir": str(tmp_path / "logs"), "time": "10:00"})
    path = tmp_path / "job.sbatch"
    path.write_text(str(info))
    os.makedirs(tmp_path / "logs", exist_ok=True)
    result = subprocess.run(["sbatch", "--test-only", str(path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "to start at" in result.stderr


def test_exclusive_signal_and_pass_through_flags_are_taken_by_sbatch(sched, image) -> None:
    """Issue 35: the flags checked against this cluster's own --help reach sbatch and srun, which take them; a
    typo is refused before anything is submitted; a container image is refused naming pyxis (Debian has none)."""
    app = specs.AppDef("extras", roles=[role(image, "w", sleep=3)])
    job_id = sched.submit_app(app, exclusive=True, signal="USR1@30",
                              sbatch_args=["--nice=7", "--begin=now"], srun_args=["--kill-on-bad-exit=1"])
    record = subprocess.run(["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True, timeout=60)
    assert "Nice=7" in record.stdout and "OverSubscribe=NO" in record.stdout, record.stdout + record.stderr
    desc = wait_state(sched, job_id, {AS.SUCCEEDED, AS.FAILED, AS.CANCELLED})
    assert desc.state == AS.SUCCEEDED, desc.msg
    assert "done 0" in "".join(sched.log_iter(job_id, "w", 0))
    with pytest.raises(ValueError, match="did you mean --nice"):
        sched.submit_app(app, sbatch_args=["--nicee=7"])
    with pytest.raises(ValueError, match="no pyxis"):
        sched.submit_app(specs.AppDef("oci", roles=[role("docker://ubuntu:22.04", "w")]))


#: download: sleep, then write the data file and exit with the code; trainer: read it (exit 9 without it)
ORDER_SH = r"""#!/bin/bash
# args: sleep exit_code data_file [gate: download waits for this file, which the test makes]
if [[ $TORCHSPEC_ROLE_NAME == trainer ]]; then
    cat "$3" || exit 9
    exit 0
fi
sleep "$1"
if [[ -n ${4:-} ]]; then
    while [[ ! -e $4 ]]; do sleep 0.2; done
fi
echo "downloaded" >"$3"
exit "$2"
"""


def test_a_role_starts_after_the_role_it_waits_for_finished_and_never_when_that_failed(sched, image,
                                                                                      tmp_path) -> None:
    """Issue 35 item 5 on the real cluster: depends_on in one job. While download runs, the trainer's replicas
    are PENDING saying what they wait for; the trainer then reads what download wrote. A download that fails
    fails the app with its exit code, and the trainer never starts."""
    (tmp_path / "img" / "order.sh").write_text(ORDER_SH)
    (tmp_path / "img" / "order.sh").chmod(0o755)

    gate = tmp_path / "downloaded-may-end"

    def app(code: int, *until: str) -> specs.AppDef:
        data = str(tmp_path / f"data-{code}")
        return specs.AppDef(f"ordered{code}", roles=[
            specs.Role(name=name, image=image, entrypoint="order.sh", args=["4", str(code), data, *until],
                       num_replicas=n, resource=specs.Resource(cpu=1, gpu=0, memMB=64), depends_on=deps)
            for name, n, deps in (("download", 1, []), ("trainer", 2, [specs.RoleDependency("download")]))])

    # download runs until the test makes the gate: a 4 s download left a 3 s window, which a busy CI missed (ci54)
    job_id = sched.submit_app(app(0, str(gate)))
    desc = wait_state(sched, job_id, {AS.RUNNING, AS.SUCCEEDED, AS.FAILED}, timeout=60)
    assert desc.state == AS.RUNNING, desc
    waiting = [(AS.PENDING, "waits for download to be finished")] * 2
    deadline = time.monotonic() + 60  # the batch script writes what they wait for as it starts
    while [(r.state, r.msg) for r in desc.roles_statuses[1].replicas] != waiting and time.monotonic() < deadline:
        time.sleep(0.2)
        desc = sched.describe(job_id)
    assert [(r.state, r.msg) for r in desc.roles_statuses[1].replicas] == waiting, desc
    gate.touch()
    desc = wait_state(sched, job_id, {AS.SUCCEEDED, AS.FAILED, AS.CANCELLED})
    assert desc.state == AS.SUCCEEDED, desc.msg
    for k in (0, 1):
        assert "downloaded" in "".join(sched.log_iter(job_id, "trainer", k))

    job_id = sched.submit_app(app(3))
    desc = wait_state(sched, job_id, {AS.SUCCEEDED, AS.FAILED, AS.CANCELLED})
    assert desc.state == AS.FAILED and "exit code 3" in desc.msg, desc
    trainer = desc.roles_statuses[1].replicas
    assert [(r.state, r.msg) for r in trainer] == [
        (AS.UNKNOWN, "never started: it waits for download to be finished")] * 2, trainer
    assert "".join(sched.log_iter(job_id, "trainer", 0)) == ""


ENV_SH = '#!/bin/bash\necho "LOG_DIR=$LOG_DIR PATH=$PATH HETJOB=$HETJOB umask=$(umask)"\n'


def test_role_env_reaches_only_the_replica_and_the_files_are_private(sched, image, tmp_path) -> None:
    """LOG_DIR, PATH, HETJOB... in a role's env must not steer the batch script, and others cannot read the logs."""
    (tmp_path / "img" / "env.sh").write_text(ENV_SH)
    (tmp_path / "img" / "env.sh").chmod(0o755)
    elsewhere = tmp_path / "elsewhere"
    env = {"LOG_DIR": str(elsewhere), "PATH": "/nonexistent", "HETJOB": "1", "TS_LOG_DIR": str(elsewhere),
           "SLURM_CPUS_PER_TASK": "64"}
    app = specs.AppDef("env", roles=[specs.Role(name="e", image=image, entrypoint="env.sh", env=env,
                                                resource=specs.Resource(cpu=1, gpu=0, memMB=64))])
    mask = os.umask(0o022)
    os.umask(mask)
    job_id = sched.submit_app(app)
    desc = wait_state(sched, job_id, {AS.SUCCEEDED, AS.FAILED, AS.CANCELLED})
    assert desc.state == AS.SUCCEEDED, desc.msg
    out = "".join(sched.log_iter(job_id, "e", 0))
    # the replica gets its env, and the submitter's umask (not the script's 077)
    assert f"LOG_DIR={elsewhere} PATH=/nonexistent HETJOB=1 umask={mask:04o}" in out, out
    assert not elsewhere.exists()
    logs = tmp_path / "logs"
    for path, mode in ((logs / job_id, 0o700), (logs / job_id / "e" / "0", 0o700), (logs / job_id / "spec.json", 0o600),
                       (logs / job_id / "job.sbatch", 0o600), (logs / job_id / "e" / "0" / "stdout.log", 0o600),
                       (logs / f"{job_id}.batch.log", 0o600)):
        assert oct(os.stat(path).st_mode & 0o777) == oct(mode), path


PREEMPTED_SH = """#!/bin/bash
echo "attempt=$TORCHSPEC_ATTEMPT"
if [ "$TORCHSPEC_ATTEMPT" = 0 ]; then sleep 600; fi
echo "done"
"""


def test_a_requeue_is_not_a_failure_and_the_replica_sees_its_attempt(sched, image) -> None:
    """``scontrol requeue`` of a running app with ``max_retries: 0`` (what a preemption with requeue does): the
    job runs again and ends SUCCEEDED, its replica seeing TORCHSPEC_ATTEMPT 0, then 1; no retry is spent."""
    script = pathlib.Path(image) / "preempted.sh"
    script.write_text(PREEMPTED_SH)
    script.chmod(0o755)
    app = specs.AppDef("preempted", roles=[specs.Role(name="w", image=image, entrypoint="preempted.sh",
                                                      resource=specs.Resource(cpu=1, gpu=0, memMB=64))])
    job_id = sched.submit_app(app)
    deadline = time.monotonic() + 120
    while "attempt=0" not in "".join(sched.log_iter(job_id, "w", 0, streams="stdout")):
        assert time.monotonic() < deadline, "the replica never started"
        time.sleep(0.3)
    subprocess.run(["scontrol", "requeue", job_id], check=True, capture_output=True, timeout=60)
    desc = wait_state(sched, job_id, {AS.SUCCEEDED, AS.FAILED, AS.CANCELLED}, timeout=400)
    assert desc.state == AS.SUCCEEDED, desc.msg
    out = "".join(sched.log_iter(job_id, "w", 0, streams="stdout"))
    assert re.findall(r"^attempt=(\d+)$", out, re.M) == ["0", "1"] and "done" in out, out
    # events say the requeue, and that the job then completed
    said = [(e.reason, e.warning) for e in sched.events(job_id) if e.role is None]
    assert ("Requeued", True) in said and said[-1] == ("Completed", False), said
