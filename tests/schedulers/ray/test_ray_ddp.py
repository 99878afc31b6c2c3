"""The real ``dist.ddp`` component (2 nodes x 1 process, gloo on CPU) through Ray: both ranks meet at rank 0's
node address and all-reduce to the same value."""

from __future__ import annotations

import importlib.util
import pathlib
import re
import socket

import skips
from ray_support import wait_state
from torchspec.loader import load_app
from torchspec.schedulers.ray.scheduler import RayScheduler
from torchspec.specs import AppState

ROOT = pathlib.Path(__file__).resolve().parents[3]

if importlib.util.find_spec("torch") is None:
    skips.skip_or_fail("TORCH", "torch is not installed (bash scripts/test installs torch==2.13.0)",
                       allow_module_level=True)

ALLREDUCE = '''
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
value = torch.tensor([float(rank + 1) * 10])
dist.all_reduce(value)
print(f"rank {rank} of {world} all_reduce {value.item()}", flush=True)
dist.destroy_process_group()
'''


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_two_replica_ddp_all_reduces_through_ray(ray_cluster, tmp_path) -> None:
    (tmp_path / "allreduce.py").write_text(ALLREDUCE)
    app = load_app(str(ROOT / "torchspec/components/dist/ddp.yaml"), {
        "j": "2x1", "script": "allreduce.py", "rdzv_port": str(free_port()), "cpu": "1", "memMB": "256"})
    sched = RayScheduler("test", dashboard_address=ray_cluster.address)
    app_id = sched.submit(app, {"working_dir": str(tmp_path), "placement_strategy": "STRICT_SPREAD"})
    desc = wait_state(sched, app_id, (AppState.SUCCEEDED, AppState.FAILED, AppState.CANCELLED), timeout=240)
    role = app.roles[0].name
    logs = ["".join(sched.log_iter(app_id, role, k)) for k in range(2)]
    assert desc.state == AppState.SUCCEEDED, f"{desc.msg}\n{logs}"
    seen = sorted(re.findall(r"rank (\d) of 2 all_reduce ([0-9.]+)", "".join(logs)))
    assert [rank for rank, _ in seen] == ["0", "1"], logs
    assert {value for _, value in seen} == {"30.0"}, logs  # 10 + 20 on both ranks
