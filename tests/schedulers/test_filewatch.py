"""FolderWatch: what wakes a wait on a local app, and what must not (a reader testing a lock file)."""

from __future__ import annotations

import os
import sys
import threading

import pytest

from torchspec.schedulers.filewatch import FolderWatch

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")


def test_a_file_renamed_into_the_folder_wakes_the_watch(tmp_path) -> None:
    with FolderWatch(str(tmp_path)) as watch:
        assert watch.active
        (tmp_path / "state.json.tmp").write_text("{}")
        timer = threading.Timer(0.05, os.replace, (tmp_path / "state.json.tmp", tmp_path / "state.json"))
        timer.start()
        assert watch.wait(30) is True  # long before the timeout
        timer.join()
        assert watch.wait(0.01) is False  # drained: one wake per burst of changes


def test_changes_between_two_waits_are_not_lost(tmp_path) -> None:
    with FolderWatch(str(tmp_path)) as watch:
        (tmp_path / "a").write_text("x")
        os.replace(tmp_path / "a", tmp_path / "b")
        assert watch.wait(0) is True


def test_opening_and_writing_files_in_place_does_not_wake_it(tmp_path) -> None:
    """Readers open state.lock and supervisor.lock read-write to test them; that must not wake a waiter."""
    with FolderWatch(str(tmp_path)) as watch:
        fd = os.open(tmp_path / "state.lock", os.O_RDWR | os.O_CREAT, 0o644)
        os.write(fd, b"x")
        os.close(fd)
        assert watch.wait(0.05) is False


def test_a_folder_that_cannot_be_watched_only_sleeps(tmp_path) -> None:
    watch = FolderWatch(str(tmp_path / "missing"))
    assert not watch.active and watch.wait(0.01) is False
    watch.close()


def test_a_file_watch_wakes_on_an_append(tmp_path) -> None:
    from torchspec.schedulers.filewatch import FileWatch

    log = tmp_path / "output.log"
    log.write_bytes(b"")
    with FileWatch(str(log)) as watch:
        assert watch.wait(0.01) is False
        with open(log, "ab") as out:
            timer = threading.Timer(0.05, lambda: (out.write(b"ohello\n"), out.flush()))
            timer.start()
            assert watch.wait(30) is True
            timer.join()
