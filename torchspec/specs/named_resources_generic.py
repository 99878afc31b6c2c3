"""Generic named resources (``gpu.small``, ``cpu.large``...) for defaults and examples.

They follow hardware trends rather than any one instance type and may
change: register your own named resources for the machines you really have.
"""

from __future__ import annotations

from typing import Callable, Mapping

from torchspec.specs.api import Resource

GiB: int = 1024

NAMED_RESOURCES: Mapping[str, Callable[[], Resource]] = {
    # host memory at least matches GPU memory; hosts come with 1, 2, 4 or 8 GPUs
    "gpu.small": lambda: Resource(cpu=8, gpu=1, memMB=32 * GiB),
    "gpu.medium": lambda: Resource(cpu=16, gpu=2, memMB=64 * GiB),
    "gpu.large": lambda: Resource(cpu=32, gpu=4, memMB=128 * GiB),
    "gpu.xlarge": lambda: Resource(cpu=64, gpu=8, memMB=256 * GiB),
    # CPU sizes after general-purpose cloud instances
    "cpu.nano": lambda: Resource(cpu=1, gpu=0, memMB=512),
    "cpu.micro": lambda: Resource(cpu=1, gpu=0, memMB=1 * GiB),
    "cpu.small": lambda: Resource(cpu=1, gpu=0, memMB=2 * GiB),
    "cpu.medium": lambda: Resource(cpu=2, gpu=0, memMB=4 * GiB),
    "cpu.large": lambda: Resource(cpu=2, gpu=0, memMB=8 * GiB),
    "cpu.xlarge": lambda: Resource(cpu=8, gpu=0, memMB=32 * GiB),
}
