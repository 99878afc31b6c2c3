"""DDP training that survives being stopped: a checkpoint every few steps, and a restart resumes from the latest.

A long run is stopped by things that are nobody's fault: a node drained, a pod
evicted, a Slurm job preempted and requeued.  The scheduler starts the app
again (a retry, or the requeue); this script then finds its latest checkpoint
and goes on from the step it holds, so the run ends where an uninterrupted one
would have, with the same weights.  What makes that true:

- everything the next step depends on is in the checkpoint: the step, the
  model, and the optimizer (its momentum), never just the weights;
- rank 0 writes it whole or not at all (a temporary file, then a rename), so
  a kill mid-write leaves the one before;
- the data a step sees depends on the step and the rank alone.

Run it with the spec beside it (gloo on the CPU)::

    torchspec submit examples/resume/resume.yaml -p image=examples/resume --wait
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Tuple

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

LATEST = "latest.pt"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--ckpt-dir", required=True, help="a folder every node shares")
    parser.add_argument("--ckpt-every", type=int, default=20)
    parser.add_argument("--step-time", type=float, default=0.0, help="seconds a step takes at least (a demo's pace)")
    args = parser.parse_args()

    dist.init_process_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    attempt = os.environ.get("TORCHSPEC_ATTEMPT", "?")

    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(1, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    start, final = resume(args.ckpt_dir, model, optimizer)  # final: the checkpoint's mean loss
    if rank == 0:
        print(f"attempt {attempt}: " + (f"resumed from step {start}" if start else "starting from step 0"), flush=True)

    generator = torch.Generator().manual_seed(1234 + rank)  # each rank its own shard, the same on every attempt
    x = torch.rand(256, 1, generator=generator)
    y = 3 * x + 1
    for step in range(start, args.steps):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        time.sleep(args.step_time)
        if (step + 1) % args.ckpt_every == 0:
            final = mean_over_ranks(loss, world)
            if rank == 0:
                save(args.ckpt_dir, step + 1, model, optimizer, final)
                print(f"attempt {attempt}: checkpoint step {step + 1}", flush=True)
            dist.barrier()  # no rank runs ahead of a checkpoint another has not written

    if start < args.steps:  # else it resumed at its end: the last checkpoint's loss is the run's
        final = mean_over_ranks(loss, world)
    if rank == 0:
        weight, bias = model.module.weight.item(), model.module.bias.item()
        print(f"final step {args.steps} loss {final.item():.9f} weight {weight:.9f} bias {bias:.9f}", flush=True)
    dist.destroy_process_group()


def mean_over_ranks(loss: torch.Tensor, world: int) -> torch.Tensor:
    mean = loss.detach().clone()
    dist.all_reduce(mean)
    return mean / world


def save(folder: str, step: int, model: DistributedDataParallel, optimizer: torch.optim.Optimizer,
         loss: torch.Tensor) -> None:
    os.makedirs(folder, exist_ok=True)
    partial = os.path.join(folder, f".{LATEST}.{os.getpid()}")
    torch.save({"step": step, "model": model.module.state_dict(), "optimizer": optimizer.state_dict(),
                "loss": loss.detach()}, partial)
    os.replace(partial, os.path.join(folder, LATEST))  # whole, or not at all


def resume(folder: str, model: DistributedDataParallel, optimizer: torch.optim.Optimizer) -> Tuple[int, torch.Tensor]:
    """The step the latest checkpoint holds (its state loaded) and the mean loss it recorded; step 0 where there
    is none. A job stopped after its last checkpoint (preempted as it ended) resumes at its end, and reports the
    checkpoint's loss as an uninterrupted run would have."""
    path = os.path.join(folder, LATEST)
    if not os.path.exists(path):
        return 0, torch.tensor(float("nan"))
    state = torch.load(path, map_location="cpu", weights_only=True)
    model.module.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    return int(state["step"]), state["loss"]


if __name__ == "__main__":
    main()
