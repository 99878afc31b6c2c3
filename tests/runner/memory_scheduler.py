"""The runner tests' scheduler: the example backend in ``tests/plugins/torchspec_memory``, built by a factory
that remembers what it built, so tests can look inside.

The runner tests register it through a factory dict, exactly as a
third-party backend registers through an entry point.
"""

from __future__ import annotations

import pathlib
import sys
from typing import Any, List

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "plugins"))

from torchspec_memory.scheduler import MemoryScheduler  # noqa: E402
from torchspec_memory.translate import MemoryRequest  # noqa: E402

__all__ = ["Factory", "MemoryRequest", "MemoryScheduler"]


class Factory:
    """A scheduler factory that remembers what it built."""

    def __init__(self) -> None:
        self.built: List[MemoryScheduler] = []

    def __call__(self, session_name: str, **params: Any) -> MemoryScheduler:
        scheduler = MemoryScheduler(session_name, **params)
        self.built.append(scheduler)
        return scheduler

    @property
    def scheduler(self) -> MemoryScheduler:
        assert len(self.built) == 1, f"built {len(self.built)} schedulers"
        return self.built[0]
