"""The one way a test says "this machine lacks what I need": it skips, or fails where that is required.

Every skip for a missing engine, binary, mount right or module goes through ``skip_or_fail``, naming what is
missing by its ``TORCHSPEC_REQUIRE_*`` switch: scripts/test sets the switch where it found or started the thing
(and always in CI), so there a missing one is a failure, never a quiet skip. Under ``CI=true`` every switch
counts as set. A skip that does not come through here still fails in CI: tests/run_policy.py turns any skip
there into a failure unless the test carries an allowed reason.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import NoReturn

import pytest

#: What a test may find missing, by the suffix of its switch (TORCHSPEC_REQUIRE_<NAME>=1 makes it required).
SWITCHES = {
    "DOCKER": "a Docker engine",
    "SLURM": "a Slurm cluster",
    "K8S": "the real Kubernetes cluster",
    "RAY": "ray[default]",
    "BROWSER": "chromium with chromedriver",
    "TORCH": "torch",
    "TORCHX": "the TorchX venv",
    "DOCS": "the docs extra",
    "MLFLOW": "an MLflow tracking server (the mlflow package's CLI)",
    "MOUNT": "the right to mount (root with CAP_SYS_ADMIN)",
}


def switch(name: str) -> str:
    """The environment variable that makes ``name`` required; an unknown name is the test's mistake."""
    if name not in SWITCHES:
        raise ValueError(f"unknown requirement {name!r}: one of {', '.join(SWITCHES)}")
    return f"TORCHSPEC_REQUIRE_{name}"


def in_ci() -> bool:
    return os.environ.get("CI") == "true"


def required(name: str) -> bool:
    """True when a missing ``name`` must fail the test: its switch is 1, or this is CI."""
    return os.environ.get(switch(name)) == "1" or in_ci()


def skip_or_fail(name: str, reason: str, *, allow_module_level: bool = False) -> NoReturn:
    """Skip with ``reason``, or fail with it where ``name`` is required (its switch, or CI)."""
    if required(name):
        why = f"{switch(name)}=1" if os.environ.get(switch(name)) == "1" else "CI=true"
        pytest.fail(f"{reason} ({why}, so this fails rather than skips)", pytrace=False)
    pytest.skip(reason, allow_module_level=allow_module_level)


def import_or_skip(module: str, name: str, hint: str) -> ModuleType:
    """``module`` imported; without it the test skips (fails where ``name`` is required). ``hint`` says how to
    install it. At a module's top level the whole module skips."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        skip_or_fail(name, f"{module} is not installed ({exc}): {hint}", allow_module_level=True)
