"""The same component and arguments give the same AppDef through TorchX 0.7 and through torchspec.

TorchX pins urllib3 < 1.27 (torchspec's kubernetes client wants newer), so it lives in a venv of its own
(``scripts/test`` makes it and sets ``TORCHSPEC_TORCHX_PYTHON``); each case runs
``torchx_parity/materialize.py`` there, which materializes the component through
``torchx.specs.finder.get_component`` + ``materialize_appdef`` and through torchspec (the component
builds ``torchx.specs`` objects, converted), and compares names, args, env, resources, replicas, retries
and ports.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
from typing import List

import pytest

import skips

HERE = pathlib.Path(__file__).resolve().parent / "torchx_parity"
ROOT = HERE.parents[2]


@pytest.fixture(scope="module")
def torchx_python() -> str:
    python = os.environ.get("TORCHSPEC_TORCHX_PYTHON", "")
    if not python or not os.path.exists(python):
        skips.skip_or_fail("TORCHX", "no venv with TorchX 0.7: TORCHSPEC_TORCHX_PYTHON names no Python with TorchX "
                                     "(bash scripts/test makes one and sets it)")
    return python


@pytest.mark.parametrize("component, argv", [
    ("every_type", ["--msg", "hi"]),
    ("every_type", ["--msg", "hi there", "--count", "3", "--ratio", "0.25", "--flag", "True", "--words", "a,b",
                    "--numbers", "1,2,3", "--env", "A=1,2,B=3", "--limit", "5", "--image", "other:2", "--",
                    "--x", "y"]),
    ("every_type", ["--msg", "x", "--flag", "true", "--env", "K=v"]),
    ("every_type", ["--msg=eq", "--count=1", "--", "--count", "9"]),
    ("two_roles", []),
    ("two_roles", ["--workers", "5", "--servers", "2"]),
])
def test_torchx_and_torchspec_make_the_same_appdef(torchx_python: str, component: str, argv: List[str]) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([torchx_python, "materialize.py", f"components.py:{component}", *argv],
                          capture_output=True, text=True, cwd=HERE, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["torchspec_type"] == "torchspec.specs.api"  # converted from torchx.specs
    assert result["torchspec"] == result["torchx"]
