"""The memory backend's run options: what ``-c`` accepts, with types, defaults and help."""

from __future__ import annotations

from typing import List

from torchspec.errors import AppRefusedError
from torchspec.specs import CfgVal, runopts


def run_opts() -> runopts:
    opts = runopts()
    opts.add("queue", str, "queue to run in", default="default")
    opts.add("priority", int, "higher runs first", default=0)
    opts.add("tags", List[str], "labels for the app", default=None)
    return opts


def check(cfg: dict[str, CfgVal]) -> None:
    """Checks the types cannot express; a refusal is an :class:`AppRefusedError`, never a bare ValueError."""
    priority = cfg.get("priority")
    if isinstance(priority, int) and priority < 0:
        raise AppRefusedError(f"run option priority={priority} must be 0 or more")
