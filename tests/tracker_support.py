"""Shared by the tracker tests: the dashboard's page of an app, its "tracked" part (what the app recorded)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
from typing import Callable

TOKEN = "t" * 43
ROOT = pathlib.Path(__file__).resolve().parents[1]
#: What the caller's shell may hold that would name other trackers or another experiment than the project's.
CALLERS = ("TORCHSPEC_TRACKERS", "TORCHX_TRACKERS", "TORCHSPEC_TRACKING_EXPERIMENT_NAME",
           "TORCHX_TRACKING_EXPERIMENT_NAME")


def cli_in(project: pathlib.Path, timeout: float = 180) -> Callable[..., subprocess.CompletedProcess]:
    """``torchspec ARGV...`` run as a fresh process in ``project`` (its config file there, its local state in
    ``project/home``), this checkout's code first; it never prints a traceback."""
    env = {**os.environ, "TORCHSPEC_HOME": str(project / "home"), "XDG_CONFIG_HOME": str(project / "xdg"),
           "NO_COLOR": "1", "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    for name in CALLERS:
        env.pop(name, None)

    def cli(*argv: str) -> subprocess.CompletedProcess:
        done = subprocess.run([sys.executable, "-m", "torchspec", *argv], capture_output=True, text=True, env=env,
                              cwd=project, timeout=timeout)
        assert "Traceback" not in done.stderr, done.stderr
        return done

    return cli


CLI = Callable[..., subprocess.CompletedProcess]


def run_local_job(project: pathlib.Path, tracker_toml: str, script: str) -> "tuple[CLI, str]":
    """``script`` run as a local job from ``project`` with ``tracker_toml`` as its config file: (the CLI of
    :func:`cli_in`, the job's handle), the job SUCCEEDED."""
    (project / "record.py").write_text(script)
    (project / ".torchspec.toml").write_text(tracker_toml)
    (project / "job.yaml").write_text(f"name: tracked\nroles:\n  - name: r\n    image: .\n"
                                      f"    entrypoint: {sys.executable}\n    args: [record.py]\n")
    cli = cli_in(project)
    done = cli("submit", "--wait", "job.yaml")
    assert done.returncode == 0, done.stderr
    return cli, done.stdout.strip()


def tracked_section(handle: str, project: pathlib.Path, home: pathlib.Path, *schedulers: str) -> str:
    """The "tracked" part of ``handle``'s dashboard page, the dashboard reading ``project``'s config file and
    the local state in ``home``: what the app recorded in each configured tracker."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient

    from torchspec.config import load_config
    from torchspec.runner import Runner
    from torchspec.schedulers import get_scheduler_factories
    from torchspec.ui import create_app

    names = list(schedulers or ("local",))
    factories = get_scheduler_factories()
    old_home = os.environ.get("TORCHSPEC_HOME")
    os.environ["TORCHSPEC_HOME"] = str(home)
    try:
        app = create_app(lambda: Runner("torchspec", {n: factories[n] for n in names},
                                        config=load_config(str(project))), names, TOKEN)
        with TestClient(app, base_url="http://127.0.0.1:8123") as c:
            page = c.get(f"/app/{handle}?token={TOKEN}")
    finally:
        if old_home is None:
            os.environ.pop("TORCHSPEC_HOME", None)
        else:
            os.environ["TORCHSPEC_HOME"] = old_home
    assert page.status_code == 200, page.text
    assert '<div id="tracked">' in page.text, page.text
    return page.text[page.text.index('<div id="tracked">'):page.text.index("<h2>where it came from</h2>")]
