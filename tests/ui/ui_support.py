"""Shared by the dashboard's tests: runners over local plus test schedulers, and local apps to look at."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
from typing import Any, Callable, List

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOKEN = "t" * 43


class UnreachableScheduler:
    """A scheduler whose backend never answers: the dashboard must say so in its place and go on."""

    def __init__(self, session_name: str, **kwargs: Any) -> None:
        pass

    def list(self) -> List[Any]:
        from torchspec.errors import UnreachableError

        raise UnreachableError("cannot reach the unreachable engine at unix:///nowhere.sock",
                               "start it, or leave -s unreachable out")

    def close(self) -> None:
        pass


def runner_factory(**extra: Callable[..., Any]) -> Callable[[], Any]:
    """A factory of runners over ``local`` and the given test schedulers, reading no config file."""
    from torchspec.runner import Runner
    from torchspec.schedulers import get_scheduler_factories

    def make() -> Any:
        return Runner("torchspec", {"local": get_scheduler_factories()["local"], **extra})

    return make


def cli_env(home: pathlib.Path, **more: str) -> dict[str, str]:
    """The environment of a torchspec subprocess using this checkout, with its state in ``home``."""
    env = {**os.environ, "TORCHSPEC_HOME": str(home), **more}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    return env


def submit(spec: pathlib.Path, home: pathlib.Path, **env: str) -> str:
    """``torchspec submit SPEC -s local`` in a subprocess; the handle."""
    done = subprocess.run([sys.executable, "-m", "torchspec", "submit", str(spec), "-s", "local"],
                          capture_output=True, text=True, env=cli_env(home, **env), cwd=spec.parent, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def cancel(handle: str, home: pathlib.Path) -> None:
    subprocess.run([sys.executable, "-m", "torchspec", "cancel", handle], capture_output=True,
                   env=cli_env(home), check=False)


def write_spec(folder: pathlib.Path, name: str, script: str, metadata: str = "", env: str = "") -> pathlib.Path:
    """A one-replica local spec running ``sh -c SCRIPT``."""
    path = folder / f"{name}.yaml"
    path.write_text(f"name: {name}\n{metadata}roles:\n  - name: main\n    image: {folder}\n    entrypoint: sh\n"
                    f"    args: [\"-c\", {json.dumps(script)}]\n{env}")
    return path



def submit_sweep(folder: pathlib.Path, home: pathlib.Path, values: str, script: str) -> "tuple[str, List[str]]":
    """``torchspec submit SPEC -s local --sweep x=VALUES`` of a spec running ``sh -c SCRIPT`` (``{{ x }}`` in
    it is the point's value): (the sweep's id, its handles)."""
    spec = folder / "swept.yaml"
    spec.write_text("params:\n  x: {type: string}\nname: swept\nroles:\n  - name: main\n"
                    f"    image: {folder}\n    entrypoint: sh\n    args: [\"-c\", {json.dumps(script)}]\n")
    done = subprocess.run([sys.executable, "-m", "torchspec", "submit", str(spec), "-s", "local", "--sweep",
                           f"x={values}"], capture_output=True, text=True, env=cli_env(home), cwd=folder, check=False)
    assert done.returncode == 0, done.stderr
    return done.stderr.split()[1].rstrip(":"), done.stdout.split()
