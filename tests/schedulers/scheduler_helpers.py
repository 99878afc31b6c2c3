"""Helpers for scheduler tests: waiting on apps (processes: tests/process_support.py)."""

from __future__ import annotations

import time
from typing import Callable, Optional

from torchspec import specs
from torchspec.schedulers.api import DescribeAppResponse
from torchspec.schedulers.local.scheduler import LocalScheduler

#: Generous: the suite must pass on a loaded 2-core machine, and waits end as soon as the condition holds.
TIMEOUT_S = 60.0


def wait_for(condition: Callable[[], bool], timeout: float = TIMEOUT_S, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


def wait_terminal(sched: LocalScheduler, app_id: str, timeout: float = TIMEOUT_S) -> DescribeAppResponse:
    found: list[Optional[DescribeAppResponse]] = [None]

    def terminal() -> bool:
        found[0] = sched.describe(app_id)
        return found[0] is not None and specs.is_terminal(found[0].state)

    wait_for(terminal, timeout, f"{app_id} to finish")
    assert found[0] is not None
    return found[0]
