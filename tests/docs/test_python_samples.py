"""The Python shown on the concept pages, run as written: each ``python`` block of those pages in a fresh
interpreter, in a folder holding what the code names (``examples/``, ``jobs/``, a ``broken.yaml``), with a
state folder of its own, so the library API the pages teach cannot drift from the code."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
from typing import List

import pytest
from sample_runner import ROOT, Block, blocks

PAGES = [ROOT / "docs" / "concepts" / "python-api.md", ROOT / "docs" / "concepts" / "running-jobs.md"]
BROKEN = "name: broken\nroles:\n  - name: trainer\n    image: img\n    entrypoint: python\n    num_replica: 2\n"


def python_blocks() -> List[Block]:
    return [b for page in PAGES for b in blocks(page) if b.info == "python"]


def test_the_pages_show_python() -> None:
    assert [b.path.name for b in python_blocks()] == ["python-api.md", "running-jobs.md"]


@pytest.mark.parametrize("block", python_blocks(), ids=lambda b: b.where)
def test_the_python_block_runs(block: Block, tmp_path: pathlib.Path) -> None:
    work = tmp_path / "work"
    shutil.copytree(ROOT / "examples", work / "examples")
    shutil.copytree(ROOT / "examples", work / "jobs")
    (work / "broken.yaml").write_text(BROKEN)
    env = {**os.environ, "TORCHSPEC_HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
           "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}
    done = subprocess.run([sys.executable, "-c", block.text], cwd=work, env=env, capture_output=True, text=True,
                          timeout=180)
    assert done.returncode == 0, f"{block.where}:\n{done.stdout}\n{done.stderr}"
    assert "SUCCEEDED" in done.stdout, done.stdout
    if block.path.name == "python-api.md":  # the broken file's error, where it is and the hint
        assert "broken.yaml 6 5 roles[0].num_replica did you mean 'num_replicas'?" in done.stdout, done.stdout
