"""A tiny DDP training job: fit y = 3x + 1 with one linear layer across every worker.

Run it through torchspec's dist.ddp component (gloo on CPU):

    torchspec submit dist.ddp -p j=2x1 -p script=train.py -p image=examples/ddp_train --log

Each worker trains on its own shard of the data; DDP averages gradients, so
every rank ends with the same weights.  Rank 0 prints the final loss.
"""

from __future__ import annotations

import argparse
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--lr", type=float, default=0.1)
    args = parser.parse_args()

    backend = "nccl" if torch.cuda.is_available() else "gloo"
    dist.init_process_group(backend=backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if backend == "nccl" else torch.device("cpu")

    torch.manual_seed(0)  # same initial weights everywhere (DDP also broadcasts them)
    model = DistributedDataParallel(torch.nn.Linear(1, 1).to(device),
                                    device_ids=[device.index] if backend == "nccl" else None)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)

    generator = torch.Generator().manual_seed(1234 + rank)  # each rank its own shard
    x = torch.rand(256, 1, generator=generator).to(device)
    y = 3 * x + 1

    for step in range(args.steps):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        if step % 50 == 0 and rank == 0:
            print(f"step {step} loss {loss.item():.6f}", flush=True)

    final = loss.detach().clone()
    dist.all_reduce(final)
    final /= world
    print(f"rank {rank} all_reduce mean loss {final.item():.6f}", flush=True)  # the same on every rank
    if rank == 0:
        weight, bias = model.module.weight.item(), model.module.bias.item()
        print(f"world_size {world} backend {backend}", flush=True)
        print(f"final loss {final.item():.6f} weight {weight:.3f} bias {bias:.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
