"""Fixtures for scheduler tests: a local scheduler on a private state dir that leaves nothing running."""

from __future__ import annotations

from typing import Iterator

import pytest

from scheduler_helpers import wait_terminal
from torchspec import specs
from torchspec.schedulers.local.scheduler import LocalScheduler


@pytest.fixture(autouse=True)
def _private_home(tmp_path, monkeypatch) -> None:
    """Nothing a test does may land in the real ~/.local/state/torchspec."""
    monkeypatch.setenv("TORCHSPEC_HOME", str(tmp_path / "home"))


@pytest.fixture
def state_dir(tmp_path) -> str:
    return str(tmp_path / "state")


@pytest.fixture
def sched(state_dir: str) -> Iterator[LocalScheduler]:
    """A scheduler on a private state dir; apps still running at the end of a test are cancelled."""
    scheduler = LocalScheduler("test", state_dir=state_dir)
    yield scheduler
    for app in scheduler.list():
        if not specs.is_terminal(app.state):
            scheduler.cancel(app.app_id)
    for app in scheduler.list():
        wait_terminal(scheduler, app.app_id)
    scheduler.close()
