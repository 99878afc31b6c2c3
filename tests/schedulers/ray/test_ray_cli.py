"""The ray scheduler through the real ``torchspec`` CLI, every call a fresh process, on the test cluster.

Needs the ``ray`` entry point; a checkout not installed with it (a worktree
beside an installed torchspec) gets it from a throw-away ``*.dist-info``
put in front of the child's PYTHONPATH, so these tests never skip for that.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import socket
import subprocess
import sys
from importlib import metadata

import pytest

EXE = pathlib.Path(sys.executable).with_name("torchspec")
OK, USAGE, APP_FAILED, APP_CANCELLED, BACKEND = 0, 2, 4, 5, 6
ROOT = pathlib.Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> str:
    """A folder for PYTHONPATH that registers ``ray`` when the installed torchspec does not (empty otherwise)."""
    folder = tmp_path_factory.mktemp("site")
    if "ray" not in {ep.name for ep in metadata.entry_points(group="torchspec.schedulers")}:
        info = folder / "torchspec_ray_checkout-0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torchspec-ray-checkout\nVersion: 0.1\n")
        (info / "entry_points.txt").write_text(
            "[torchspec.schedulers]\nray = torchspec.schedulers.ray:create_scheduler\n")
    return str(folder)


def cli(site: str, tmp: pathlib.Path, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "torchspec", *args]
    path = os.pathsep.join(p for p in (site, str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = dict(os.environ, NO_COLOR="1", TORCHSPEC_HOME=str(tmp / "home"), XDG_CONFIG_HOME=str(tmp / "xdg"),
               XDG_CACHE_HOME=str(tmp / "cache"), PYTHONPATH=path)
    r = subprocess.run(command, capture_output=True, text=True, cwd=tmp, env=env, timeout=timeout)
    assert "Traceback" not in r.stderr, r.stderr
    return r


def spec(tmp: pathlib.Path, name: str, roles: list) -> str:
    path = tmp / f"{name}.json"
    path.write_text(json.dumps({"name": name, "roles": roles}))
    return str(path)


def role(name: str, script: str, replicas: int = 1, cpu: int = 1) -> dict:
    return {"name": name, "image": ".", "entrypoint": "bash", "num_replicas": replicas,
            "args": ["-c", script, "${replica_id}"], "resource": {"cpu": cpu, "gpu": 0, "memMB": 64}}


def test_no_cluster_at_the_address_is_a_backend_error_naming_it(site, tmp_path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    path = spec(tmp_path, "lonely", [role("r", "true")])
    r = cli(site, tmp_path, "submit", "-s", "ray", "-c", f"dashboard_address=127.0.0.1:{port}", path)
    assert r.returncode == BACKEND, r.stderr
    assert f"no Ray cluster answers at http://127.0.0.1:{port}" in r.stderr
    assert "dashboard_address" in r.stderr  # the hint says how to point at one
    r = cli(site, tmp_path, "status", f"ray://s/127.0.0.1:{port}-lonely-abc123")
    assert r.returncode == BACKEND and f"http://127.0.0.1:{port}" in r.stderr, r.stderr


def test_dryrun_and_option_typos(site, tmp_path) -> None:
    path = spec(tmp_path, "dry", [role("r", "true", replicas=2)])
    r = cli(site, tmp_path, "dryrun", "-s", "ray", "-c", "placement_strategy=spread", path)
    assert r.returncode == OK, r.stderr
    assert "strategy: SPREAD" in r.stdout and "bundles:" in r.stdout and "TORCHSPEC_RAY_PLAN" in r.stdout
    r = cli(site, tmp_path, "dryrun", "-s", "ray", "-c", "placement_strategie=SPREAD", path)
    assert r.returncode == USAGE and "did you mean 'placement_strategy'" in r.stderr, r.stderr
    r = cli(site, tmp_path, "dryrun", "-s", "ray", "-c", "placement_strategy=STRICT_SPRED", path)
    assert r.returncode == USAGE and "did you mean 'STRICT_SPREAD'" in r.stderr, r.stderr


def test_cli_lifecycle_on_the_cluster(site, ray_cluster, tmp_path) -> None:
    cfg = f"dashboard_address={ray_cluster.address}"
    path = spec(tmp_path, "tpr", [role("trainer", 'echo "done $0"', replicas=2), role("ps", 'echo "done $0"')])
    r = cli(site, tmp_path, "submit", "-s", "ray", "-c", cfg, path)
    assert r.returncode == OK, r.stderr
    handle = r.stdout.strip()
    assert re.match(rf"^ray://[^/\s]*/{re.escape(ray_cluster.address)}-tpr-[a-z0-9]{{6}}$", handle), handle
    logs = cli(site, tmp_path, "logs", "-f", handle)
    assert logs.returncode == OK, logs.stderr
    for prefix in ("trainer/0", "trainer/1", "ps/0"):
        assert re.search(rf"^{prefix} +done {prefix[-1]}$", logs.stdout, re.M), logs.stdout
    assert cli(site, tmp_path, "wait", handle).returncode == OK
    status = json.loads(cli(site, tmp_path, "status", handle, "--json").stdout)
    assert status["state"] == "SUCCEEDED"
    env = {"TORCHSPEC_DASHBOARD_ADDRESS": ray_cluster.address}
    listed = subprocess.run([sys.executable, "-m", "torchspec", "list", "-s", "ray"], capture_output=True, text=True,
                            cwd=tmp_path, env={**os.environ, **env, "PYTHONPATH": os.pathsep.join(
                                p for p in (site, str(ROOT), os.environ.get("PYTHONPATH", "")) if p)})
    assert handle.rsplit("/", 1)[1] in listed.stdout, listed.stderr
    described = cli(site, tmp_path, "describe", handle, "-o", "json")
    assert described.returncode == OK and json.loads(described.stdout)["name"] == "tpr", described.stderr

    sleeper = spec(tmp_path, "sleeper", [role("a", "sleep 300")])
    handle = cli(site, tmp_path, "submit", "-s", "ray", "-c", cfg, sleeper).stdout.strip()
    assert cli(site, tmp_path, "cancel", handle).returncode == OK
    assert cli(site, tmp_path, "wait", handle).returncode == APP_CANCELLED
    failing = spec(tmp_path, "failer", [role("w", "exit 3")])
    r = cli(site, tmp_path, "submit", "-s", "ray", "-c", cfg, "--wait", failing)
    assert r.returncode == APP_FAILED, r.stderr
