"""The slurm scheduler through the real ``torchspec`` CLI: every call a fresh process.

Needs the ``slurm`` entry point (pyproject.toml; a checkout installed with ``pip install -e .`` has it: one
missing fails these tests) and a cluster (skips without one, fails where one is required).
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys

EXE = pathlib.Path(sys.executable).with_name("torchspec")
OK, APP_FAILED, APP_CANCELLED = 0, 4, 5

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
    described = cli(tmp_path, "describe", handle, "-o", "json")
    assert described.returncode == OK and json.loads(described.stdout)["name"] == "tpr", described.stderr


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


def test_cli_values_cannot_add_lines_to_the_script(tmp_path) -> None:
    """The reviewer's repros: a newline in the spec's name or in a run option never reaches bash as a command."""
    path = spec(tmp_path, "x'\nrm -rf ~\n'", [role("t")])
    r = cli(tmp_path, "dryrun", "-s", "slurm", path)
    assert r.returncode == OK, r.stderr
    assert "rm -rf ~" not in r.stdout.splitlines() and "#SBATCH --job-name=x--rm--rf----" in r.stdout
    ok = spec(tmp_path, "ok", [role("t")])
    for cfg in ("partition=x\ntouch /tmp/pwned", "comment=packjob", "time=1:00 #x", "constraint=a\rb"):
        r = cli(tmp_path, "dryrun", "-s", "slurm", "-c", cfg, ok)
        assert r.returncode == 2 and f"run option {cfg.split('=')[0]}" in r.stderr, (cfg, r.stderr)
        assert "pwned" not in r.stdout


def test_cli_app_ids_that_are_not_job_ids_are_unknown(tmp_path) -> None:
    """``delete slurm://s/..`` once removed TORCHSPEC_HOME; now every command refuses such an id (exit 2)."""
    home = tmp_path / "home"
    (home / "slurm" / "7").mkdir(parents=True)
    (home / "keep").write_text("x")
    for app_id in ("..", ".", "7%2F..", "..%2F.."):
        for command in ("status", "describe", "delete", "cancel"):
            r = cli(tmp_path, command, f"slurm://s/{app_id}")
            why = "malformed app handle" if app_id in ("..", ".") else "unknown app"
            assert r.returncode == 2 and why in r.stderr, (command, app_id, r.stdout, r.stderr)
        r = cli(tmp_path, "logs", f"slurm://s/{app_id}", "t/0")
        assert r.returncode == 2, r.stderr
    assert (home / "keep").exists() and (home / "slurm" / "7").is_dir()


def test_cli_sbatch_errors_are_one_clear_line(slurm_jobs, tmp_path) -> None:
    path = spec(tmp_path, "ok", [role("t")])
    for cfg, why in (("time=bogus", "Invalid --time specification"),
                     ("partition=nope", "invalid partition specified: nope")):
        r = cli(tmp_path, "submit", "-s", "slurm", "-c", f"{CFG},{cfg}", path)
        assert r.returncode == 6, r.stderr
        assert r.stderr.startswith(f"error: sbatch refused the job: {why}\n"), r.stderr


def test_cli_dryrun_handed_to_sbatch_runs_on_a_fresh_log_root(slurm_jobs, tmp_path) -> None:
    """`sbatch job.sbatch` works: the script makes its folders; status and logs find it; no spec, so no roles."""
    path = spec(tmp_path, "byhand", [role("t")])
    logs = tmp_path / "fresh" / "logs"
    r = cli(tmp_path, "dryrun", "-s", "slurm", "-c", f"{CFG},log_dir={logs}", path)
    (tmp_path / "job.sbatch").write_text(r.stdout)
    sub = subprocess.run(["sbatch", "--parsable", "--wait", str(tmp_path / "job.sbatch")], capture_output=True,
                         text=True, cwd=tmp_path, timeout=120)
    job_id = sub.stdout.strip()
    slurm_jobs.append(job_id)
    assert sub.returncode == 0, sub.stderr
    handle = f"slurm://torchspec/{job_id}"
    status = json.loads(cli(tmp_path, "status", handle, "--json").stdout)
    assert status["state"] == "SUCCEEDED", status
    described = cli(tmp_path, "describe", handle, "--json")  # no spec.json: the roles cannot be rebuilt
    assert described.returncode == OK and json.loads(described.stdout)["roles"] == [], described.stdout
    out = cli(tmp_path, "logs", handle, "t/0")
    assert out.returncode == OK and f"app={job_id}" in out.stdout, out.stderr
    assert (tmp_path / f"slurm-{job_id}.out").exists()  # the script's own output: Slurm's default place
    assert oct((logs / job_id).stat().st_mode & 0o777) == oct(0o700)
