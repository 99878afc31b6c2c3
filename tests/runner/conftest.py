"""Fixtures of the Runner tests that run against the in-memory scheduler plug-in (memory_scheduler.py)."""

from __future__ import annotations

import os
import pathlib
from typing import Iterator

import pytest
from memory_scheduler import Factory

from torchspec.runner import Runner

SESSION = "test_session"


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> None:
    """No TORCHSPEC_* or TORCHX_* variables from the machine (scheduler params, parent run ids), and no user
    config file."""
    for key in list(os.environ):
        if key.upper().startswith(("TORCHSPEC_", "TORCHX_")):
            monkeypatch.delenv(key)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))


@pytest.fixture
def factory() -> Factory:
    return Factory()


@pytest.fixture
def runner(factory: Factory) -> Iterator[Runner]:
    with Runner(SESSION, {"memory": factory}) as r:
        yield r
