"""The slurm scheduler through the real ``torchspec`` CLI: every call a fresh process.

Needs the ``slurm`` entry point (``[project.entry-points."torchspec.schedulers"]``
in pyproject.toml, then ``pip install -e .``); skips until it is registered,
and without a cluster (fails under TORCHSPEC_REQUIRE_SLURM=1).
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys
from importlib import metadata

import pytest

EXE = pathlib.Path(sys.executable).with_name("torchspec")
OK, APP_FAILED, APP_CANCELLED = 0, 4, 5

if "slurm" not in {ep.name for ep in metadata.entry_points(group="torchspec.schedulers")}:
    pytest.skip("the slurm entry point is not registered (pyproject.toml, then pip install -e .)",
                allow_module_level=True)

REPLICA_SH = "#!/bin/bash\necho \"replica=$1 app=$2 rank0=${!3}\"\nsleep \"$4\"\necho \"done $1\"\nexit \"$5\"\n"


def cli(tmp: pathlib.Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    command = ([str(EXE)] if EXE.exists() else [sys.executable, "-m", "torchspec"]) + list(args)
    env = dict(os.environ, NO_COLOR="1", TORCHSPEC_HOME=str(tmp / "home"), XDG_CONFIG_HOME=str(tmp / "xdg"))
    r = subprocess.run(command, capture_output=True, text=True, cwd=tmp, env=env, timeout=timeout)
    assert "Traceback" not in r.stderr, r.stderr
    return r


def spec(tmp: pathlib.Path, name: str, roles: list) -> str:
    img = tmp / "img"
    img.mkdir(exist_ok=True)
    (img / "replica.sh").write_text(REPLICA_SH)
    (img / "replica.sh").chmod(0o755)
    path = tmp / f"{name}.json"
    path.write_text(json.dumps({"name": name, "roles": roles}))
    return str(path)


def role(name: str, replicas: int = 1, sleep: int = 1, code: int = 0, **extra: object) -> dict:
    return {"name": name, "image": "img", "entrypoint": "replica.sh", "num_replicas": replicas,
            "args": ["${replica_id}", "${app_id}", "${rank0_env}", str(sleep), str(code)],
            "resource": {"cpu": 1, "gpu": 0, "memMB": 64}, **extra}


CFG = "one_node_per_replica=false"


def test_cli_lifecycle(slurm_jobs, tmp_path) -> None:
    path = spec(tmp_path, "tpr", [role("trainer", 2), role("ps"), role("reader")])
    r = cli(tmp_path, "submit", "-s", "slurm", "-c", CFG, path)
    assert r.returncode == OK, r.stderr
    handle = r.stdout.strip()
    assert re.match(r"^slurm://[^/\s]*/\d+$", handle), handle
    slurm_jobs.append(handle.rsplit("/", 1)[1])
    logs = cli(tmp_path, "logs", "-f", handle)
    assert logs.returncode == OK, logs.stderr
    for prefix in ("trainer/0", "trainer/1", "ps/0", "reader/0"):
        assert re.search(rf"^{prefix} +done {prefix[-1]}$", logs.stdout, re.M), logs.stdout
    status = json.loads(cli(tmp_path, "status", handle, "--json").stdout)
    assert status["state"] == "SUCCEEDED"
    assert handle in cli(tmp_path, "list", "-s", "slurm").stdout
    assert cli(tmp_path, "describe", handle).returncode == OK


def test_cli_cancel_and_failure(slurm_jobs, tmp_path) -> None:
    path = spec(tmp_path, "sleeper", [role("a", sleep=300)])
    handle = cli(tmp_path, "submit", "-s", "slurm", "-c", CFG, path).stdout.strip()
    slurm_jobs.append(handle.rsplit("/", 1)[1])
    assert cli(tmp_path, "cancel", handle).returncode == OK
    assert cli(tmp_path, "wait", handle).returncode == APP_CANCELLED
    failing = spec(tmp_path, "failer", [role("w", sleep=0, code=3)])
    r = cli(tmp_path, "submit", "-s", "slurm", "-c", CFG, "--wait", failing)
    slurm_jobs.append(r.stdout.strip().splitlines()[0].rsplit("/", 1)[1])
    assert r.returncode == APP_FAILED, r.stderr


def test_cli_dryrun_is_a_script_sbatch_accepts(slurm_jobs, tmp_path) -> None:
    path = spec(tmp_path, "tpr", [role("trainer", 2), role("ps")])
    r = cli(tmp_path, "dryrun", "-s", "slurm", "-c", f"{CFG},log_dir={tmp_path}/logs", path)
    assert r.returncode == OK and r.stdout.startswith("#!/bin/bash"), r.stderr
    (tmp_path / "logs").mkdir()
    (tmp_path / "job.sbatch").write_text(r.stdout)
    test = subprocess.run(["sbatch", "--test-only", str(tmp_path / "job.sbatch")], capture_output=True, text=True)
    assert test.returncode == 0, test.stderr
