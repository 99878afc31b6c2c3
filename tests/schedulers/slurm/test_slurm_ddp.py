"""The real ``dist.ddp`` component (2 nodes x 1 process, gloo on CPU) trains through Slurm to a low loss."""

from __future__ import annotations

import os
import pathlib
import re

from torch_support import free_port, torch_or_skip
import slurm_support

from torchspec import specs
from torchspec.loader import load_app
from torchspec.schedulers.slurm.scheduler import SlurmScheduler

ROOT = pathlib.Path(__file__).resolve().parents[3]

torch_or_skip()


def test_two_node_ddp_trains_through_slurm(slurm_jobs, tmp_path) -> None:
    app = load_app(str(ROOT / "torchspec/components/dist/ddp.yaml"), {
        "j": "2x1", "script": "train.py", "image": str(ROOT / "examples/ddp_train"),
        "rdzv_port": str(free_port()), "cpu": "1", "memMB": "512"})
    sched = SlurmScheduler("test")
    info = sched.submit_dryrun(app, {"log_dir": str(tmp_path / "logs")})  # one node per replica: 2 nodes
    assert "#SBATCH --nodes=2" in str(info)
    job_id = sched.schedule(info)
    slurm_jobs.append(job_id)
    role = app.roles[0].name
    desc = slurm_support.wait_terminal(sched, job_id)
    # torchrun's c10d rendezvous may make either node global rank 0, the one that prints
    logs = "".join(sched.log_iter(job_id, role, 0)) + "".join(sched.log_iter(job_id, role, 1))
    assert desc.state == specs.AppState.SUCCEEDED, f"{desc.msg}\n{logs}"
    assert "world_size 2 backend gloo" in logs
    loss = float(re.search(r"final loss ([0-9.]+)", logs).group(1))  # type: ignore[union-attr]
    assert loss < 0.05, logs
