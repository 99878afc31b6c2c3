"""Shell completion as docs/installation.md says to set it up: the script each shell is given, and a completion."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent


def torchspec(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "torchspec"], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **env})


@pytest.mark.parametrize("shell, marker", [("bash", "complete -o nosort -F _torchspec_completion torchspec"),
                                           ("zsh", "#compdef torchspec"),
                                           ("fish", "complete --no-files --command torchspec")])
def test_each_shell_gets_its_script(shell: str, marker: str) -> None:
    r = torchspec({"_TORCHSPEC_COMPLETE": f"{shell}_source"})
    assert r.returncode == 0, r.stderr
    assert marker in r.stdout and f"_TORCHSPEC_COMPLETE={shell}_complete" in r.stdout


def test_commands_and_choices_complete() -> None:
    r = torchspec({"_TORCHSPEC_COMPLETE": "bash_complete", "COMP_WORDS": "torchspec li", "COMP_CWORD": "1"})
    assert r.stdout.split() == ["plain,lint", "plain,list"], r.stderr
    r = torchspec({"_TORCHSPEC_COMPLETE": "bash_complete", "COMP_WORDS": "torchspec lint -o ", "COMP_CWORD": "3"})
    assert "plain,sarif" in r.stdout.split(), r.stdout + r.stderr


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_bash_loads_the_script(tmp_path: pathlib.Path) -> None:
    script = tmp_path / "torchspec-complete.bash"
    script.write_text(torchspec({"_TORCHSPEC_COMPLETE": "bash_source"}).stdout)
    r = subprocess.run(["bash", "--norc", "-c", f". {script} && complete -p torchspec"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and "_torchspec_completion" in r.stdout, r.stderr
