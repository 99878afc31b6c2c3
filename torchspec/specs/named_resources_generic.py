"""Generic named resources, not tied to any cloud's instance types.

They exist so components and examples have sensible defaults; they are NOT a
long-term contract.  The cpu/gpu/memory ratios follow current hardware trends
and may change at any time (never assume ``gpu.small`` has 8 cpus), and no
device capabilities (EFA, NVLink...) are described.  Register your own named
resources for the machines you actually have.
"""

from __future__ import annotations

from typing import Callable, Mapping

from torchspec.specs.api import Resource

GiB: int = 1024

NAMED_RESOURCES: Mapping[str, Callable[[], Resource]] = {
    # hosts usually have at least as much RAM as their GPUs have device memory
    # (typically 32GB each), and clouds sell 1, 2, 4 or 8 GPUs per host
    "gpu.small": lambda: Resource(cpu=8, gpu=1, memMB=32 * GiB),
    "gpu.medium": lambda: Resource(cpu=16, gpu=2, memMB=64 * GiB),
    "gpu.large": lambda: Resource(cpu=32, gpu=4, memMB=128 * GiB),
    "gpu.xlarge": lambda: Resource(cpu=64, gpu=8, memMB=256 * GiB),
    # cpu-only sizes follow AWS's general purpose T2 family
    "cpu.nano": lambda: Resource(cpu=1, gpu=0, memMB=512),
    "cpu.micro": lambda: Resource(cpu=1, gpu=0, memMB=1 * GiB),
    "cpu.small": lambda: Resource(cpu=1, gpu=0, memMB=2 * GiB),
    "cpu.medium": lambda: Resource(cpu=2, gpu=0, memMB=4 * GiB),
    "cpu.large": lambda: Resource(cpu=2, gpu=0, memMB=8 * GiB),
    "cpu.xlarge": lambda: Resource(cpu=8, gpu=0, memMB=32 * GiB),
}

__all__ = ["GiB", "NAMED_RESOURCES"]
