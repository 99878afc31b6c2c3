"""`wait` ends when the app it watches is removed (a cancel on docker or kubernetes removes the app).

The rule is the runner's (:meth:`Runner.wait`); the CLI's ``watch`` only shows what it reports.
"""

from __future__ import annotations

import io
import time

from torchspec.cli.wait_cmd import watch
from torchspec.runner import Runner
from torchspec.specs import AppState, AppStatus


class Sleeper:
    """All the scheduler a wait needs besides the status: a pause between two looks."""

    def wait_for_change(self, app_id: str, timeout: float) -> None:
        time.sleep(timeout)


class VanishingRunner(Runner):
    """A runner whose app runs for two polls, then no longer exists."""

    def __init__(self) -> None:
        super().__init__("s", {"docker": lambda session_name, **kwargs: Sleeper()})
        self.polls = 0

    def status(self, app_handle: str) -> AppStatus | None:
        self.polls += 1
        return AppStatus(AppState.RUNNING, num_restarts=1) if self.polls <= 2 else None


def test_an_app_removed_while_watched_counts_as_cancelled() -> None:
    out = io.StringIO()
    status, ended = watch(VanishingRunner(), "docker://s/app-abc123", timeout=30, out=out, live=False)
    assert ended and status.state == AppState.CANCELLED and status.num_restarts == 1
    assert "no longer exists" in status.msg
    assert out.getvalue().splitlines()[-1].endswith("docker://s/app-abc123 CANCELLED (restarts: 1)")


def test_runner_wait_gives_up_at_the_timeout_with_the_last_status() -> None:
    class Forever(VanishingRunner):
        def status(self, app_handle: str) -> AppStatus | None:
            self.polls += 1
            return AppStatus(AppState.RUNNING)

    runner = Forever()
    seen: list[AppStatus] = []
    status = runner.wait("docker://s/app", wait_interval=0.01, timeout=0.2, on_change=seen.append)
    assert status is not None and status.state == AppState.RUNNING and not status.is_terminal()
    assert runner.polls > 2 and len(seen) == 1  # on_change only hears of changes


def test_runner_wait_of_an_unknown_app_is_none() -> None:
    class Unknown(VanishingRunner):
        def status(self, app_handle: str) -> AppStatus | None:
            return None

    assert Unknown().wait("docker://s/nope", timeout=1) is None
