"""A damaged or foreign ``local`` state folder, and app handles that try to leave it, through the real CLI.

Whatever is in the state folder, a command gives a clear error (exit 6 for
an app folder it cannot read, 2 for a handle that names no app) or skips
the app with a warning, never a traceback, and the other apps still list.
No handle reaches a path outside the state folder.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from typing import TYPE_CHECKING, Callable, Dict

import pytest

if TYPE_CHECKING:
    import pathlib

    from conftest import Local

OK, USAGE, BACKEND = 0, 2, 6

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="the local scheduler needs POSIX")


def _replace(name: str, data: bytes) -> Callable[["pathlib.Path"], None]:
    def damage(app: "pathlib.Path") -> None:
        (app / name).write_bytes(data)

    return damage


def _folder(name: str) -> Callable[["pathlib.Path"], None]:
    def damage(app: "pathlib.Path") -> None:
        (app / name).unlink()
        (app / name).mkdir()

    return damage


def _truncate(app: "pathlib.Path") -> None:
    data = (app / "state.json").read_bytes()
    (app / "state.json").write_bytes(data[: len(data) // 2])


def _newer(app: "pathlib.Path") -> None:
    state = json.loads((app / "state.json").read_text())
    (app / "state.json").write_text(json.dumps(dict(state, version=99)))


def _running_without_lock_file(app: "pathlib.Path") -> None:
    state = json.loads((app / "state.json").read_text())
    (app / "state.json").write_text(json.dumps(dict(state, state="RUNNING")))
    _folder("supervisor.lock")(app)


#: A damaged copy of a finished app, by how it is damaged, and what the error must say.
DAMAGE: Dict[str, tuple[Callable[["pathlib.Path"], None], str]] = {
    "garbage": (_replace("state.json", b"\x00\xff{garbage"), "not UTF-8 text"),
    "truncated": (_truncate, "not valid JSON"),
    "empty": (_replace("state.json", b""), "not valid JSON"),
    "not-an-object": (_replace("state.json", b"[1, 2, 3]"), "not a torchspec app state"),
    "wrong-types": (_replace("state.json", b'{"version": 2, "roles": {"r": {"replicas": 7}}}'),
                    "not a torchspec app state"),
    "state-folder": (_folder("state.json"), "Is a directory"),
    "newer-format": (_newer, "written by a newer torchspec (format 99; this one reads formats 1 to 2)"),
    "lock-folder": (_running_without_lock_file, "supervisor.lock: Is a directory"),
}


def test_damaged_app_folders_are_a_clear_error_and_do_not_hide_the_others(local: "Local") -> None:
    good = local.submit(local.spec("good", "echo fine"))
    assert local.wait_ended(good)["state"] == "SUCCEEDED"
    source = local.app_dir(good)
    damaged = {}
    for name, (damage, reason) in DAMAGE.items():
        app = source.parent / f"dmg-{name}"
        shutil.copytree(source, app)
        damage(app)
        damaged[f"local://torchspec/dmg-{name}"] = (app, reason)

    r = local.run("list", "--json")
    assert r.returncode == OK, r.stderr
    assert [row["app_handle"] for row in json.loads(r.stdout)] == [good]
    for handle, (app, reason) in damaged.items():
        assert f"skipping app {app.name}: " in r.stderr and reason in r.stderr, r.stderr

    for handle, (app, reason) in damaged.items():
        for command in ("status", "logs", "cancel", "describe"):
            r = local.run(command, handle)
            assert r.returncode == BACKEND, (command, handle, r.stderr)
            assert r.stderr.startswith("error: ") and reason in r.stderr, (command, handle, r.stderr)
            assert str(app) in r.stderr, r.stderr  # which app folder (and so what to remove)
    assert local.status(good)["state"] == "SUCCEEDED"


def test_damaged_request_and_log_files_are_a_clear_error(local: "Local") -> None:
    handle = local.submit(local.spec("files", "echo fine"))
    local.wait_ended(handle)
    app = local.app_dir(handle)
    _folder("r/0/output.log")(app)
    r = local.run("logs", handle)
    assert r.returncode == BACKEND and "output.log: Is a directory" in r.stderr, r.stderr

    (app / "request.json").write_text("{")
    r = local.run("logs", handle)
    assert r.returncode == BACKEND and "request.json: not valid JSON" in r.stderr, r.stderr
    assert local.status(handle)["state"] == "SUCCEEDED"  # the state itself is fine


def test_foreign_entries_in_the_apps_folder_are_no_apps(local: "Local") -> None:
    good = local.submit(local.spec("good", "echo fine"))
    apps = local.app_dir(good).parent
    (apps / "notes.txt").write_text("not an app")
    (apps / "junk").mkdir()
    (apps / "gone").symlink_to(local.tmp / "nowhere")
    (apps / "loop").symlink_to(apps / "loop")

    r = local.run("list", "--json")
    assert r.returncode == OK and [row["app_handle"] for row in json.loads(r.stdout)] == [good], r.stderr
    for name in ("notes.txt", "junk", "gone", "loop"):
        r = local.run("status", f"local://torchspec/{name}")
        assert r.returncode == USAGE and "unknown app" in r.stderr, (name, r.stdout, r.stderr)


def test_an_apps_file_where_the_folder_belongs(local: "Local") -> None:
    local.home.mkdir()
    (local.home / "apps").write_text("not a folder")
    r = local.run("list")
    assert r.returncode == BACKEND and "apps: Not a directory" in r.stderr, r.stderr
    r = local.run("submit", local.spec("nowhere", "echo hi"))
    assert r.returncode == USAGE and "cannot create the app folder" in r.stderr, r.stderr


HANDLES = [
    "local://torchspec/..",
    "local://torchspec/.",
    "local://torchspec/",
    "local://../../outside",
    "local://torchspec/../../outside",
    "local:///tmp/../outside",
    "local://docker://x/y",
    "local://torchspec/outside\x01",
]


def _snapshot(folder: "pathlib.Path") -> Dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(folder.rglob("*"))}


def test_handles_never_reach_outside_the_state_folder(local: "Local") -> None:
    good = local.submit(local.spec("good", "sleep 1000"))
    local.wait_running(good)
    # a copy of a real app where `..` from the apps folder would lead: reading or removing it would show
    outside = local.tmp / "outside"
    shutil.copytree(local.app_dir(good), outside)
    (local.tmp / "home" / "outside").symlink_to(outside)  # `..` once, from apps/
    before = _snapshot(outside)

    for handle in HANDLES:
        for command in ("status", "logs", "cancel", "delete"):
            r = local.run(command, handle)
            assert r.returncode == USAGE, (command, handle, r.stderr)
            assert r.stderr.startswith("error: "), (command, handle, r.stderr)
            assert repr(handle) in r.stderr or "unknown scheduler 'local://docker'" in r.stderr, r.stderr
    assert _snapshot(outside) == before
    assert local.status(good)["state"] == "RUNNING"


def test_handles_with_nul_or_dots_are_refused_by_the_python_api(local: "Local", monkeypatch) -> None:
    from torchspec.errors import UsageError
    from torchspec.runner import get_runner

    for name, value in local.env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(local.tmp)
    with get_runner() as runner:
        for handle in ("local://torchspec/a\x00b", "local://torch\x00spec/x", "local://torchspec/..",
                       "local://torchspec/.", "local://torchspec/a\nb"):
            for call in (runner.status, runner.cancel, runner.delete, runner.describe,
                         lambda h: list(runner.log_lines(h, "r"))):
                with pytest.raises(UsageError) as caught:
                    call(handle)
                assert caught.value.message.startswith("malformed app handle")
                assert "\x00" not in caught.value.message and "\n" not in caught.value.message
    assert not os.path.exists(local.home / "apps")
