"""The ``repo`` fixture: a real git repository in tmp_path."""

from __future__ import annotations

import pathlib

import pytest

pytest.register_assert_rewrite("apply_support")

from git_repo import GitRepo  # noqa: E402


@pytest.fixture
def repo(tmp_path: pathlib.Path) -> GitRepo:
    return GitRepo(tmp_path / "repo")
