"""What env() read is never printed by render or dryrun unless asked: specs come from pull requests, CI has secrets."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

EXE = pathlib.Path(sys.executable).with_name("torchspec")
SPEC = """name: sec
params: {image: {type: string, default: .}}
roles:
  - name: r
    image: "{{ image }}"
    entrypoint: echo
    args: ["{{ env('TS_TEST_SECRET') }}"]
    env:
      TOKEN: "{{ env('TS_TEST_SECRET') }}"
"""


def run(tmp_path: pathlib.Path, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "sec.yaml").write_text(SPEC)
    env = dict(os.environ, TS_TEST_SECRET="hunter2-very-secret", TORCHSPEC_HOME=str(tmp_path / "home"), NO_COLOR="1")
    command = [str(EXE)] if EXE.exists() else [sys.executable, "-m", "torchspec"]
    return subprocess.run(command + list(args), capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60)


@pytest.mark.parametrize("args", [
    ("render", "sec.yaml"),
    ("render", "-o", "json", "sec.yaml"),
    ("dryrun", "sec.yaml"),
    ("dryrun", "-s", "docker", "-p", "image=busybox", "sec.yaml"),
    ("dryrun", "-s", "kubernetes", "-p", "image=busybox", "sec.yaml"),
    ("dryrun", "-s", "slurm", "sec.yaml"),
])
def test_values_from_env_are_hidden(tmp_path: pathlib.Path, args: tuple[str, ...]) -> None:
    r = run(tmp_path, *args)
    assert r.returncode == 0, r.stderr
    assert "hunter2" not in r.stdout + r.stderr
    assert "<value from env(TS_TEST_SECRET)>" in r.stdout


def test_reveal_env_shows_them(tmp_path: pathlib.Path) -> None:
    r = run(tmp_path, "render", "--reveal-env", "sec.yaml")
    assert r.returncode == 0 and "TOKEN: hunter2-very-secret" in r.stdout, r.stdout + r.stderr
    r = run(tmp_path, "dryrun", "--reveal-env", "sec.yaml")
    assert r.returncode == 0 and "TOKEN=hunter2-very-secret" in r.stdout, r.stdout + r.stderr
