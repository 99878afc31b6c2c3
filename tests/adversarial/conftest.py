"""Fixtures for the adversarial suite: the real ``torchspec`` CLI on a private state folder, and /proc scans
(``tests/process_support.py``).

``local`` gives each test its own ``TORCHSPEC_HOME`` and runs every command
as a fresh process (``python -m torchspec``), asserting that no command ever
prints a traceback.  Processes are found by the ``TORCHSPEC_APP_ID`` every
replica (and everything it starts) inherits, so a survivor cannot hide by
changing its session, process group or parent.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import time
from typing import Any, Callable, Dict, Iterator, List

import pytest

from process_support import alive, app_processes, stat_fields

PY = sys.executable
HANDLE_PREFIX = "local://"

# exit codes documented in `torchspec --help` and docs/reference/exit-codes.md
OK, USAGE, APP_CANCELLED, BACKEND = 0, 2, 5, 6

#: Generous: the suite must pass on a loaded 2-core machine; waits end as soon as their condition holds.
TIMEOUT_S = 60.0


def wait_for(condition: Callable[[], Any], timeout: float = TIMEOUT_S, what: str = "condition") -> Any:
    """Poll ``condition`` until it returns something true, and return that."""
    deadline = time.monotonic() + timeout
    while True:
        found = condition()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


class Local:
    """A private TORCHSPEC_HOME and working folder; ``run`` calls the CLI there.

    The helpers above are its static methods too, so tests need only the
    fixture, whatever the import mode.
    """

    wait_for = staticmethod(wait_for)
    alive = staticmethod(alive)
    stat_fields = staticmethod(stat_fields)
    timeout = TIMEOUT_S

    def __init__(self, tmp: pathlib.Path) -> None:
        self.tmp = tmp
        self.home = tmp / "home"
        self.env = dict(os.environ, NO_COLOR="1", TORCHSPEC_HOME=str(self.home), XDG_CONFIG_HOME=str(tmp / "xdg"))
        for name in ("FORCE_COLOR", "TORCHSPEC_DEBUG"):
            self.env.pop(name, None)
        self.started: List[str] = []

    def popen(self, *args: str) -> "subprocess.Popen[str]":
        return subprocess.Popen([PY, "-m", "torchspec", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, cwd=self.tmp, env=self.env)

    def run(self, *args: str, timeout: float = TIMEOUT_S) -> "subprocess.CompletedProcess[str]":
        r = subprocess.run([PY, "-m", "torchspec", *args], capture_output=True, text=True, cwd=self.tmp,
                           env=self.env, timeout=timeout)
        assert "Traceback" not in r.stderr + r.stdout, r.stderr
        return r

    def spec(self, name: str, script: str, replicas: int = 1) -> str:
        """A one-role app whose replicas run ``sh -c script``."""
        path = self.tmp / f"{name}.json"
        role = {"name": "r", "image": ".", "entrypoint": "sh", "args": ["-c", script], "num_replicas": replicas}
        path.write_text(json.dumps({"name": name, "roles": [role]}))
        return str(path)

    def submit(self, spec: str, *extra: str) -> str:
        r = self.run("submit", spec, *extra)
        assert r.returncode == OK, r.stderr
        handle = r.stdout.strip()
        assert handle.startswith(HANDLE_PREFIX), r.stdout
        self.started.append(handle)
        return handle

    def status(self, handle: str) -> Dict[str, Any]:
        r = self.run("status", handle, "--json")
        assert r.returncode == OK, r.stderr
        return json.loads(r.stdout)  # type: ignore[no-any-return]

    def processes(self, handle: str) -> List[int]:
        """Live processes of the app, wherever they are (see :func:`process_support.app_processes`)."""
        return app_processes(app_id(handle))

    def app_dir(self, handle: str) -> pathlib.Path:
        return self.home / "apps" / app_id(handle)

    def state(self, handle: str) -> Dict[str, Any]:
        return json.loads((self.app_dir(handle) / "state.json").read_text())  # type: ignore[no-any-return]

    def wait_running(self, handle: str, processes: int = 1) -> List[int]:
        """Block until the app RUNs with at least ``processes`` processes of its own; returns their pids."""
        wait_for(lambda: self.state(handle)["state"] == "RUNNING", what=f"{handle} to run")
        return wait_for(lambda: len(self.processes(handle)) >= processes and self.processes(handle),
                        what=f"{processes} processes of {handle}")

    def wait_ended(self, handle: str) -> Dict[str, Any]:
        return wait_for(lambda: (s := self.status(handle))["state"] in ("SUCCEEDED", "FAILED", "CANCELLED") and s,
                        what=f"{handle} to end")


def app_id(handle: str) -> str:
    return handle.rsplit("/", 1)[1]


@pytest.fixture
def local(tmp_path: pathlib.Path) -> Iterator[Local]:
    """The CLI on a private home; afterwards every process of every app the test submitted is killed."""
    cli = Local(tmp_path)
    yield cli
    for handle in cli.started:
        try:
            supervisor = int(cli.state(handle)["supervisor"]["pid"] or 0)
            fields = stat_fields(supervisor)
            if fields and fields[0] != "Z" and int(fields[2]) != os.getpgrp():
                os.killpg(int(fields[2]), 9)  # the supervisor and its guard
        except (OSError, ValueError, KeyError, TypeError):
            pass
        for pid in app_processes(app_id(handle)):
            try:
                os.kill(pid, 9)
            except OSError:
                pass
