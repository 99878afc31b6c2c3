"""The local supervisor starts on the standard library alone: no site, no specs, no scheduler API."""

from __future__ import annotations

import subprocess

from torchspec.schedulers import detached
from torchspec.schedulers.local.scheduler import SUPERVISOR_MODULE


def test_the_supervisor_starts_bare_and_imports_almost_nothing(tmp_path) -> None:
    command = detached._command(SUPERVISOR_MODULE, [], bare=True)
    assert command[1:3] == ["-S", "-c"]
    probe = (f"import sys; sys.path[0] = {detached._ROOT!r}; import {SUPERVISOR_MODULE}; "
             "print(' '.join(sorted(sys.modules)))")
    out = subprocess.run([command[0], "-S", "-c", probe], capture_output=True, text=True, check=True,
                         cwd=tmp_path).stdout.split()
    assert "torchspec.schedulers.local.supervisor" in out
    # torchspec.errors (hence dataclasses) only comes in where a StateError is raised; traceback on a crash
    heavy = {"site", "tempfile", "logging", "torchspec.specs", "torchspec.schedulers.api",
             "torchspec.schedulers.registry", "torchspec.schedulers.local.translate", "torchspec.errors",
             "dataclasses", "inspect", "traceback"}
    assert heavy.isdisjoint(out), sorted(heavy.intersection(out))


def test_a_module_started_bare_gets_its_arguments_and_exit_code(tmp_path) -> None:
    command = detached._command("torchspec.schedulers.local.supervisor", ["a", "b"], bare=True)
    proc = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 2 and "usage:" in proc.stderr  # main() saw two arguments, not one
