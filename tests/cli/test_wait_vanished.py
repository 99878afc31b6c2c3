"""`wait` ends when the app it watches is removed (a cancel on docker or kubernetes removes the app)."""

from __future__ import annotations

import io

from torchspec.cli.wait_cmd import watch
from torchspec.specs import AppState, AppStatus


class VanishingRunner:
    """A runner whose app runs for two polls, then no longer exists."""

    def __init__(self) -> None:
        self.polls = 0

    def status(self, handle: str) -> AppStatus | None:
        self.polls += 1
        return AppStatus(AppState.RUNNING, num_restarts=1) if self.polls <= 2 else None

    def scheduler_backends(self) -> list[str]:
        return ["docker"]


def test_an_app_removed_while_watched_counts_as_cancelled() -> None:
    out = io.StringIO()
    status, ended = watch(VanishingRunner(), "docker://s/app-abc123", timeout=30, out=out, live=False)  # type: ignore[arg-type]
    assert ended and status.state == AppState.CANCELLED and status.num_restarts == 1
    assert "no longer exists" in status.msg
    assert out.getvalue().splitlines()[-1].endswith("docker://s/app-abc123 CANCELLED (restarts: 1)")
