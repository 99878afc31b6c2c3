"""README's `torchspec lint` section, run as written: each spec file it shows (a ``yaml`` block opening with
``# PATH``) is written to a folder of its own, each ``$ torchspec lint`` of its ``console`` blocks runs there,
and what it prints must be what the block shows, byte for byte."""

from __future__ import annotations

import os
import pathlib
import re
import shlex
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def lint_section() -> str:
    readme = (ROOT / "README.md").read_text()
    return readme.split("\n## `torchspec lint`\n", 1)[1].split("\n## ", 1)[0]


def test_the_readme_lint_sample_is_what_lint_prints(tmp_path: pathlib.Path) -> None:
    section = lint_section()
    for block in re.findall(r"```yaml\n(.*?)```", section, re.S):
        first = block.splitlines()[0]
        if first.startswith("# "):
            path = tmp_path / first[2:].strip()
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(block)
    samples = [block for block in re.findall(r"```console\n(.*?)```", section, re.S)
               if block.startswith("$ torchspec lint ")]
    assert samples, "the README's lint section shows no `$ torchspec lint` with its output"
    env = {**os.environ, "NO_COLOR": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    for block in samples:
        command, _, shown = block.partition("\n")
        done = subprocess.run([sys.executable, "-m", "torchspec", *shlex.split(command)[2:]], capture_output=True,
                              text=True, cwd=tmp_path, env=env, timeout=120)
        assert "Traceback" not in done.stderr, done.stderr
        assert done.stdout == shown, f"{command}\n{done.stdout}"
