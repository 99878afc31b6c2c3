"""The slurm scheduler's pure part: AppDef + run options -> sbatch script; Slurm's answers -> states. No cluster."""

from __future__ import annotations

import os
import shutil
import subprocess
from datetime import datetime, timezone

import pytest
import skips

from torchspec import specs
from torchspec.errors import AppRefusedError, BackendError
from torchspec.schedulers.slurm.logs import parse_log_line
from torchspec.schedulers.slurm.options import slurm_run_opts
from torchspec.schedulers.slurm.query import JobView, job_message, parse_scontrol, view_from_json, view_from_scontrol
from torchspec.schedulers.slurm.scheduler import SlurmScheduler
from torchspec.schedulers.slurm.states import SLURM_STATES, slurm_state
from torchspec.schedulers.slurm.translate import app_to_request

AS = specs.AppState


@pytest.fixture
def img(tmp_path):
    folder = tmp_path / "img"
    folder.mkdir()
    script = folder / "run.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o755)
    return str(folder)


def role(img: str, **kw: object) -> specs.Role:
    base: dict = dict(name="trainer", image=img, entrypoint="run.sh", args=["${replica_id}", "${app_id}"],
                      resource=specs.Resource(cpu=2, gpu=0, memMB=1024))
    base.update(kw)
    return specs.Role(**base)  # type: ignore[arg-type]


def script(app: specs.AppDef, **cfg: object) -> str:
    resolved = slurm_run_opts().resolve(cfg)  # type: ignore[arg-type]
    return str(app_to_request(app, resolved, "/work"))


def test_one_het_component_per_role_and_one_step_per_replica(img, tmp_path) -> None:
    app = specs.AppDef("tpr", roles=[role(img, num_replicas=2), role(img, name="ps"), role(img, name="reader")])
    text = script(app, log_dir=str(tmp_path / "logs"), partition="gpu", time="1:00:00", account="acc", qos="hi")
    assert text.startswith("#!/bin/bash\n")
    assert text.count("#SBATCH hetjob") == 2
    assert "#SBATCH --job-name=tpr" in text
    assert f"#SBATCH --comment=torchspec:{tmp_path}/logs" in text
    # --output is sbatch's argument, not an #SBATCH line: Slurm fails a job whose output folder is missing
    assert "--output" not in text.split("set -uo pipefail")[0].replace("`sbatch --parsable --output", "")
    for opt in ("--partition=gpu", "--time=1:00:00", "--account=acc", "--qos=hi", "--nodes=2", "--nodes=1",
                "--ntasks-per-node=1", "--cpus-per-task=2", "--mem=1024M"):
        assert f"#SBATCH {opt}\n" in text, opt
    assert text.count("#SBATCH --partition=gpu") == 3  # per component
    # every replica: its own step, its own env, its own node
    assert text.count("    run_replica ") == 4
    assert "run_replica trainer 1 0 \"${TS_NODES_0[1]}\" 0" in text
    assert "run_replica reader 0 2 \"${TS_NODES_2[0]}\"" in text
    assert f"{img}/run.sh 1 \"$SLURM_JOB_ID\"" in text  # ${replica_id}, ${app_id} = the job id
    assert 'TORCHSPEC_RANK0_HOST="$TS_RANK0_HOST_1"' in text
    assert "--exact" in text and "wait -n" in text
    # all #SBATCH lines come before the first command
    first_command = text.index("set -uo pipefail")
    assert text.rfind("#SBATCH") < first_command
    assert "TS_MAX_RETRIES=0" in text and "#SBATCH --requeue" in text  # a preemption requeues it (preemption=requeue)


def test_single_role_is_a_plain_job_and_bash_accepts_the_script(img, tmp_path) -> None:
    text = script(specs.AppDef("one", roles=[role(img)]), log_dir=str(tmp_path))
    assert "hetjob" not in text and "TS_HETJOB=\n" in text
    path = tmp_path / "job.sbatch"
    path.write_text(text)
    assert subprocess.run(["bash", "-n", str(path)]).returncode == 0


def test_packed_replicas_gpus_gres_and_named_resources(img) -> None:
    packed = script(specs.AppDef("a", roles=[role(img, num_replicas=3)]), one_node_per_replica=False)
    assert "#SBATCH --ntasks=3\n" in packed and "--mem-per-cpu=512M" in packed and "#SBATCH --nodes=" not in packed
    gpu = script(specs.AppDef("a", roles=[role(img, resource=specs.Resource(cpu=4, gpu=2, memMB=0))]))
    assert "#SBATCH --gpus-per-node=2" in gpu and "--mem=" not in gpu
    gres = script(specs.AppDef("a", roles=[role(img, resource=specs.Resource(
        cpu=1, gpu=8, memMB=0, capabilities={"slurm.gres": "gpu:a100:8", "slurm.constraint": "a100"}))]))
    assert "#SBATCH --gres=gpu:a100:8" in gres and "--gpus-per-node" not in gres
    assert "#SBATCH --constraint=a100" in gres
    named = script(specs.AppDef("a", roles=[role(img, resource=specs.resource(h="aws_m5.2xlarge"))]))
    assert "#SBATCH --cpus-per-task=8" in named and "#SBATCH --mem=" in named


def test_run_options_mail_comment_prefix_nodelist_exclude_constraint(img) -> None:
    app = specs.AppDef("a", roles=[role(img), role(img, name="ps")])
    text = script(app, mail_user="me@x.org", comment="my run", job_name_prefix="ts-", nodelist="n[1-2]:",
                  exclude="bad1", constraint="ib")
    assert "#SBATCH --mail-user=me@x.org\n#SBATCH --mail-type=END,FAIL" in text
    assert "#SBATCH --job-name=ts-a" in text
    assert "--comment='torchspec:" in text and " my run'" in text
    assert text.count("--nodelist=n[1-2]") == 1 and text.count("#SBATCH --exclude=bad1") == 2
    assert text.count("#SBATCH --constraint=ib") == 2
    with pytest.raises(ValueError, match="one per role"):
        script(app, nodelist="n1")


def test_retries_application_requeues_replica_restarts_in_place(img) -> None:
    app = specs.AppDef("a", roles=[role(img, max_retries=3)])
    text = script(app)
    assert "#SBATCH --requeue" in text and "MAX_RETRIES=3" in text and "scontrol requeue" in text
    replica = script(specs.AppDef("a", roles=[role(img, max_retries=2, retry_policy=specs.RetryPolicy.REPLICA)]))
    assert "MAX_RETRIES=0" in replica and "#SBATCH --requeue" in replica
    assert 'run_replica trainer 0 0 "${TS_NODES_0[0]}" 2' in replica


def test_preemption_requeues_unless_told_to_fail_and_spends_no_retries(img) -> None:
    once = specs.AppDef("a", roles=[role(img)])
    assert "#SBATCH --no-requeue" in script(once, preemption="fail")
    assert "#SBATCH --requeue" in script(specs.AppDef("a", roles=[role(img, max_retries=1)]), preemption="fail")
    text = script(once)
    # a failure counts in failed_runs, never $SLURM_RESTART_COUNT (which a preemption's requeue raises too)
    assert 'TS_FAILED=$(cat "$TS_LOG_DIR/failed_runs"' in text and "SLURM_RESTART_COUNT:-0} <" not in text
    assert "env TORCHSPEC_ATTEMPT=$((requeues + attempt))" in text
    with pytest.raises(AppRefusedError, match="preemption='later': give requeue or fail"):
        script(once, preemption="later")


def test_refuses_what_slurm_cannot_do(img, tmp_path) -> None:
    with pytest.raises(ValueError, match="not a folder"):
        script(specs.AppDef("a", roles=[role(str(tmp_path / "nope"))]))
    with pytest.raises(ValueError, match="mounts"):
        script(specs.AppDef("a", roles=[role(img, mounts=[specs.BindMount("/a", "/b")])]))
    with pytest.raises(ValueError, match="whitespace"):
        script(specs.AppDef("a", roles=[role(img)]), log_dir=str(tmp_path / "a b"))
    with pytest.raises(ValueError, match="two roles"):
        script(specs.AppDef("a", roles=[role(img), role(img)]))


def test_every_slurm_state_maps() -> None:
    for name in ("PENDING", "CONFIGURING", "REQUEUED", "SUSPENDED"):
        assert slurm_state(name) == AS.PENDING
    for name in ("RUNNING", "COMPLETING", "SIGNALING", "STAGE_OUT"):
        assert slurm_state(name) == AS.RUNNING
    assert slurm_state("COMPLETED") == AS.SUCCEEDED
    for name in ("FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"):
        assert slurm_state(name) == AS.FAILED
    assert slurm_state("CANCELLED by 0") == AS.CANCELLED and slurm_state("CANCELLED+") == AS.CANCELLED
    assert slurm_state("NEW_STATE") == AS.UNKNOWN and slurm_state("") == AS.UNKNOWN
    assert all(isinstance(v, AS) for v in SLURM_STATES.values()) and len(SLURM_STATES) >= 20


def view(state: str, reason: str = "None", exit_code: str = "0:0", restarts: int = 0) -> JobView:
    return JobView("7", 0, state, reason, exit_code, restarts, "torchspec:/logs x", "n1")


def test_status_messages_say_why() -> None:
    assert job_message(view("PENDING", "Resources")) == "pending: Resources"
    assert "ReqNodeNotAvail" in job_message(view("PENDING", "ReqNodeNotAvail, UnavailableNodes:n1"))
    assert job_message(view("PENDING", "BeginTime", restarts=1)) == "pending: BeginTime (restart 1)"
    assert job_message(view("FAILED", "NonZeroExitCode", "3:0")) == "FAILED: exit code 3 (NonZeroExitCode)"
    assert "time limit" in job_message(view("TIMEOUT", exit_code="0:15"))
    assert "out of memory" in job_message(view("OUT_OF_MEMORY"))
    assert job_message(view("CANCELLED")) == "cancelled"
    assert view("RUNNING").log_root == "/logs"


def test_reads_scontrol_text_and_json() -> None:
    text = ("JobId=45 HetJobId=45 HetJobOffset=0 JobName=tpr JobState=PENDING Reason=ReqNodeNotAvail,"
            " UnavailableNodes:vm-2 Dependency=(null) Restarts=2 ExitCode=3:0 Comment=torchspec:/l hello world"
            " NodeList=vm-[1-2]\nJobId=46 HetJobId=45 HetJobOffset=1 JobState=PENDING Comment=(null)\n")
    first, second = [view_from_scontrol(f) for f in parse_scontrol(text)]
    assert (first.job_id, first.state, first.restarts, first.exit_code) == ("45", "PENDING", 2, "3:0")
    assert first.reason == "ReqNodeNotAvail, UnavailableNodes:vm-2"
    assert first.comment == "torchspec:/l hello world" and first.log_root == "/l" and first.nodes == "vm-[1-2]"
    assert second.offset == 1 and second.comment == "" and second.log_root is None
    new = view_from_json({"job_id": 9, "job_state": ["RUNNING"], "state_reason": "None", "restart_cnt": 1,
                          "exit_code": {"return_code": {"set": True, "number": 5}, "signal": {"id": {"number": 0}}},
                          "het_job_offset": {"set": True, "number": 2}, "comment": "torchspec:/x"})
    assert (new.job_id, new.state, new.exit_code, new.offset, new.restarts) == ("9", "RUNNING", "5:0", 2, 1)
    old = view_from_json({"job_id": 9, "job_state": "FAILED", "exit_code": 768, "het_job_offset": 0})
    assert old.exit_code == "3:0" and old.app_state == AS.FAILED


def test_log_lines_carry_their_time() -> None:
    when, text = parse_log_line(b"2026-11-23T15:24:11+0000\thello\tworld\n")
    assert when is not None and when.hour == 15 and when.utcoffset().total_seconds() == 0  # type: ignore[union-attr]
    assert text == "hello\tworld\n"
    assert parse_log_line(b"plain line\n") == (None, "plain line\n")


def test_missing_commands_are_a_backend_error(img, monkeypatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    sched = SlurmScheduler("t")
    with pytest.raises(BackendError, match="sbatch not found") as info:
        sched.submit(specs.AppDef("a", roles=[role(img, entrypoint=os.path.join(img, "run.sh"))]), {})
    assert "login node" in (info.value.hint or "")


def test_unanswering_controller_is_a_backend_error(img, tmp_path, monkeypatch) -> None:
    if shutil.which("sbatch") is None:
        skips.skip_or_fail("SLURM", "sbatch is not installed (apt-get install slurm-client)")
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=x\nSlurmctldHost=localhost\nSlurmctldPort=1\nMessageTimeout=1\n"
                    "NodeName=n1 CPUs=1\nPartitionName=p Nodes=n1 Default=YES\n")
    monkeypatch.setenv("SLURM_CONF", str(conf))
    with pytest.raises(BackendError, match="controller does not answer|failed"):
        SlurmScheduler("t").list()


def test_labels_go_into_the_comment_after_the_log_root_and_come_back(img) -> None:
    from torchspec.schedulers.slurm.query import comment_labels, parse_squeue_list

    app = specs.AppDef("a", [role(img)], metadata={"torchspec.dev/apply-id": "jobs/a b.yaml"})
    text = script(app, comment="nightly run", log_dir="/logs")
    comment = next(line for line in text.splitlines() if "--comment=" in line).split("--comment=", 1)[1].strip("'")
    assert comment.startswith("torchspec:/logs labels:") and comment.endswith(" nightly run")
    labels = {"torchspec.dev/apply-id": "jobs/a b.yaml"}
    assert comment_labels(comment) == labels and view_from_scontrol({"Comment": comment}).labels == labels
    listed = f"12|RUNNING|2026-11-28T10:00:00|{comment}\n13|RUNNING|Unknown|torchspec:/logs user | words\n"
    local = datetime(2026, 11, 28, 10, 0).astimezone(timezone.utc)  # squeue prints its local time, no zone
    assert parse_squeue_list(listed) == [("12", AS.RUNNING, labels, local), ("13", AS.RUNNING, {}, None)]
    assert comment_labels("labels:xyz") == {} and "labels:" not in script(specs.AppDef("b", [role(img)]))
