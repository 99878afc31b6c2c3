"""examples/resume: a DDP run (gloo on the CPU) stopped midway resumes from its latest checkpoint and ends with the
weights of an uninterrupted run: a replica killed on the local scheduler (an APPLICATION retry), and a Slurm job
requeued as a preemption requeues it (no retry spent)."""

from __future__ import annotations

import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import time
from typing import List

from torch_support import free_port, torch_or_skip

ROOT = pathlib.Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "resume"
EXE = pathlib.Path(sys.executable).with_name("torchspec")
FINAL = re.compile(r"final step 200 loss \S+ weight \S+ bias \S+")

torch_or_skip()


def cli(home: pathlib.Path, *args: str, timeout: float = 300) -> "subprocess.CompletedProcess[str]":
    command = [str(EXE)] if EXE.exists() else [sys.executable, "-m", "torchspec"]
    env = dict(os.environ, TORCHSPEC_HOME=str(home), NO_COLOR="1")
    return subprocess.run(command + list(args), capture_output=True, text=True, env=env, cwd=ROOT, timeout=timeout)


def submit(home: pathlib.Path, ckpt: pathlib.Path, *more: str) -> str:
    done = cli(home, "submit", str(EXAMPLE / "resume.yaml"), "-p", f"image={EXAMPLE}", "-p", f"ckpt_dir={ckpt}",
               "-p", f"rdzv_port={free_port()}", *more)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def course(log: str) -> tuple:
    """(the last checkpoint attempt 0 wrote, the step attempt 1 resumed from, the final line)."""
    written = [int(n) for n in re.findall(r"attempt 0: checkpoint step (\d+)", log)]
    resumed = [int(n) for n in re.findall(r"attempt 1: resumed from step (\d+)", log)]
    finals = FINAL.findall(log)
    assert len(resumed) == 1 and len(finals) == 1, log
    return max(written, default=0), resumed[0], finals[0]


def check_resumed(log: str, uninterrupted: str) -> None:
    written, resumed, final = course(log)
    # the latest checkpoint: the last one attempt 0 said it wrote, or the next, written as the kill came
    assert written > 0 and resumed in (written, written + 20), (written, resumed, log)
    assert final == uninterrupted, (final, uninterrupted)


def uninterrupted_final(home: pathlib.Path, tmp: pathlib.Path) -> str:
    handle = submit(home, tmp / "straight", "--wait")
    log = cli(home, "logs", handle).stdout
    (final,) = FINAL.findall(log)
    assert "attempt 0: starting from step 0" in log and "resumed" not in log, log
    return final


def wait_for(what: str, check, timeout: float = 180) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.3)


def test_a_killed_replica_resumes_from_the_latest_checkpoint_on_local(tmp_path: pathlib.Path) -> None:
    home = tmp_path / "home"
    expected = uninterrupted_final(home, tmp_path)
    handle = submit(home, tmp_path / "killed", "-p", "step_time=0.05")
    wait_for("a checkpoint at step 60", lambda: "checkpoint step 60" in cli(home, "logs", handle).stdout)
    app_id = handle.rsplit("/", 1)[1]
    state = json.loads((home / "apps" / app_id / "state.json").read_text())
    os.killpg(state["roles"]["trainer"]["replicas"][1]["pgid"], signal.SIGKILL)  # a node lost
    waited = cli(home, "wait", handle)
    log = cli(home, "logs", handle).stdout
    assert waited.returncode == 0, waited.stderr + log
    check_resumed(log, expected)
    status = json.loads(cli(home, "status", handle, "-o", "json").stdout)
    assert status["num_restarts"] == 1, status


def test_a_run_stopped_after_its_last_checkpoint_resumes_at_its_end(tmp_path: pathlib.Path) -> None:
    """Preempted as it ended (seen in CI: the requeue came after step 200): started again, it trains no step
    and reports the uninterrupted run's final line, rather than failing."""
    home = tmp_path / "home"
    expected = uninterrupted_final(home, tmp_path)
    handle = submit(home, tmp_path / "straight", "--wait")  # the same checkpoint folder: the run's last step
    log = cli(home, "logs", handle).stdout
    assert "resumed from step 200" in log and FINAL.findall(log) == [expected], log


def test_a_requeued_slurm_job_resumes_without_spending_a_retry(slurm_jobs: List[str], tmp_path: pathlib.Path) -> None:
    home = tmp_path / "home"
    expected = uninterrupted_final(tmp_path / "local-home", tmp_path)  # the same run, uninterrupted, on local
    handle = submit(home, tmp_path / "requeued", "-s", "slurm", "-c", f"log_dir={tmp_path / 'logs'}", "-p",
                    "step_time=0.1", "-p", "max_retries=0")  # 20 s of steps: a loaded machine's logs calls are slow
    job_id = handle.rsplit("/", 1)[1]
    slurm_jobs.append(job_id)
    wait_for("a checkpoint at step 60", lambda: "checkpoint step 60" in cli(home, "logs", handle).stdout, 300)
    subprocess.run(["scontrol", "requeue", job_id], check=True, capture_output=True, timeout=60)  # preempted
    waited = cli(home, "wait", handle, timeout=600)
    log = cli(home, "logs", handle).stdout
    assert waited.returncode == 0, waited.stderr + log
    check_resumed(log, expected)
