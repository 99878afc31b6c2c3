"""docs/guides/torchx-migration.md, run as written: every command of its ``bash`` blocks, from the repository's root
(in a copy, so nothing is written into the checkout), and what the page says each one shows."""

from __future__ import annotations

import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
from typing import Dict, List

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "guides" / "torchx-migration.md"


def commands() -> List[str]:
    return [line for block in re.findall(r"```bash\n(.*?)```", PAGE.read_text(), re.S)
            for line in block.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, subprocess.CompletedProcess]:
    work = tmp_path_factory.mktemp("migration")
    shutil.copytree(ROOT / "examples", work / "examples")
    (work / "train.py").write_text("print('training')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path]),
           "TORCHSPEC_HOME": str(work / "home"), "XDG_CONFIG_HOME": str(work / "xdg")}
    env.pop("TORCHXCONFIG", None)
    out = {}
    for line in commands():
        script = line.split("  #", 1)[0]
        # `torchspec` is this checkout's, whatever is on PATH
        script = re.sub(r"(^|&& |=\S+ )torchspec ", rf"\1{shlex.quote(sys.executable)} -m torchspec ", script)
        out[line] = subprocess.run(["bash", "-c", script], cwd=work, env=env, capture_output=True, text=True,
                                   timeout=120)
    return out


def test_every_command_runs(outputs: Dict[str, subprocess.CompletedProcess]) -> None:
    assert len(outputs) >= 8
    for line, done in outputs.items():
        assert done.returncode == 0, (line, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr, (line, done.stderr)


def output(outputs: Dict[str, subprocess.CompletedProcess], start: str) -> str:
    (line,) = [line for line in outputs if line.startswith(start)]
    return outputs[line].stdout


def test_each_shows_what_the_page_says(outputs: Dict[str, subprocess.CompletedProcess]) -> None:
    assert "--nnodes=2" in output(outputs, "torchspec dryrun -s local examples/torchx/components.py:trainer")
    assert "--epochs 3" in output(outputs, "torchspec dryrun -s local examples/torchx/components.py:trainer")
    assert "how many replicas to run" in output(outputs, "torchspec submit examples/torchx/components.py:echo --help")
    assert output(outputs, "torchspec submit --wait").startswith("local://")
    config = output(outputs, "TORCHXCONFIG=examples/torchx/.torchxconfig torchspec config")
    assert re.search(r"scheduler\.local\.use_cwd\s+\"true\"", config), config
    assert re.search(r"scheduler\.kubernetes\.flavor\s+\"volcano\"", config), config
    dryrun = output(outputs, "TORCHXCONFIG=examples/torchx/.torchxconfig torchspec dryrun")
    assert "hello from .torchxconfig" in dryrun, dryrun  # the [component:...] default, the path from the cwd
    assert "--nnodes=4" in output(outputs, "torchspec render trainer.yaml -p nnodes=4")


def test_every_documented_mapping_is_what_the_code_does() -> None:
    """The page's table of renamed options and implied settings is the code's."""
    from torchspec.config import TORCHX_IMPLIED, TORCHX_OPTIONS

    text = PAGE.read_text()
    for scheduler, names in TORCHX_OPTIONS.items():
        for theirs, ours in names.items():
            row = next(line for line in text.splitlines() if line.startswith("|") and theirs in line)
            assert re.search(rf"\b{ours}\b", row.split("|")[2]), (scheduler, theirs, row)
    for torchx_name, implied in TORCHX_IMPLIED.items():
        assert f"scheduler = {torchx_name}`" in text
        for key, value in implied.items():
            assert re.search(rf"`{key} = \"?{value}\"?`", text), (key, value)
