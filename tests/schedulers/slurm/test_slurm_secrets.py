"""Secrets on Slurm: values in sbatch's environment only, never in the batch script; the replica's step sets its
variables and writes its mounts' files (torchspec/schedulers/slurm/secrets.py).

The pure part needs no cluster; the last test runs one short job on the test cluster through the CLI and greps
the marker in every output and file torchspec writes (tests/secrets_support.py).
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import time
from typing import List

import pytest

from secrets_support import Cli, assert_not_in_files, new_marker, spec_text
from torchspec import specs
from torchspec.errors import AppRefusedError
from torchspec.schedulers.secrets import SecretMissingError
from torchspec.schedulers.slurm.scheduler import SlurmScheduler
from torchspec.schedulers.slurm.secrets import STEP_SCRIPT, sbatch_env
from torchspec.schedulers.slurm.translate import app_to_request
from torchspec.specs.secrets import SecretRef


def app(image: str, *refs: SecretRef) -> specs.AppDef:
    return specs.AppDef("sec", [specs.Role("trainer", image=image, entrypoint="sh", args=["-c", "true"],
                                           secrets=list(refs))])


TOKEN = SecretRef(name="hf-token", key="token", env="HF_TOKEN")
FILES = SecretRef(name="db", mount="/run/db")


def test_the_script_names_carriers_and_placeholders_never_a_value(tmp_path: pathlib.Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    marker = new_marker()
    monkeypatch.setenv("TORCHSPEC_SECRET_HF_TOKEN_TOKEN", marker)
    cfg = {"log_dir": str(tmp_path / "l")}
    script = app_to_request(app(str(tmp_path), TOKEN, FILES), cfg, str(tmp_path)).script()
    assert marker.split("$")[0] not in script
    assert "# secrets: HF_TOKEN=<secret hf-token/token>, /run/db: <secret db>" in script
    assert "ts_give TORCHSPEC_CARRIED_SECRET_0_0 TORCHSPEC_CARRIED_SECRET_0_1" in script
    assert "e HF_TOKEN TORCHSPEC_CARRIED_SECRET_0_0 \\" in script
    assert "m /run/db TORCHSPEC_CARRIED_SECRET_0_1 \\" in script
    assert "ts_need TORCHSPEC_CARRIED_SECRET_0_1_KEYS '<secret db>'" in script
    # the carriers leave the exported environment before any command of the script runs
    assert script.index('export -n "$TS_V"') < script.index("set -uo pipefail")
    plain = app_to_request(app(str(tmp_path)), {"log_dir": str(tmp_path / "l")}, str(tmp_path)).script()
    assert "TS_SECRET_STEP" not in plain and "CARRIED" not in plain


def test_env_prefix_a_taken_variable_and_a_bad_key_are_refused_at_their_place(tmp_path: pathlib.Path) -> None:
    cfg = {"log_dir": str(tmp_path / "l")}
    with pytest.raises(AppRefusedError) as raised:
        app_to_request(app(str(tmp_path), SecretRef(name="db", env_prefix="DB_"),
                           SecretRef(name="db", key="..", mount="/run/db")), cfg, str(tmp_path))
    assert [where for where, _ in raised.value.problems] == [("roles", 0, "secrets", 0, "env_prefix"),
                                                             ("roles", 0, "secrets", 1, "key")]
    assert "{mount: /folder, name: NAME}" in (raised.value.hint or "")
    with pytest.raises(AppRefusedError) as taken:
        app_to_request(app(str(tmp_path), SecretRef(name="a", key="b", env="TORCHSPEC_REPLICA_ID")), cfg,
                       str(tmp_path))
    assert taken.value.path == ("roles", 0, "secrets", 0, "env")


def test_a_missing_secret_stops_the_submit_before_sbatch(tmp_path: pathlib.Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TORCHSPEC_SECRET_HF_TOKEN_TOKEN", raising=False)
    monkeypatch.setenv("TORCHSPEC_SECRETS_DIR", str(tmp_path / "none"))
    scheduler = SlurmScheduler("t")
    info = scheduler.submit_dryrun(app(str(tmp_path), TOKEN, FILES), {"log_dir": str(tmp_path / "logs")})
    monkeypatch.setenv("PATH", str(tmp_path / "no-slurm"))  # sbatch run would be a BackendError instead
    with pytest.raises(SecretMissingError) as raised:
        scheduler.schedule(info)
    assert "'hf-token/token'" in str(raised.value) and "'db'" in str(raised.value)
    assert not (tmp_path / "logs").exists()


def test_a_script_given_to_sbatch_by_hand_fails_naming_the_secret_that_did_not_arrive(tmp_path: pathlib.Path) -> None:
    from torchspec.schedulers.slurm.secrets import role_secrets, script_lines

    lines = script_lines(role_secrets(app(str(tmp_path), TOKEN, FILES)))
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHSPEC_CARRIED")}
    done = subprocess.run(["bash", "-c", "\n".join(lines + ["echo ran"])], env=env, capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 1 and "ran" not in done.stdout
    assert "torchspec: <secret hf-token/token> did not reach the job" in done.stderr
    env.update(TORCHSPEC_CARRIED_SECRET_0_0="v", TORCHSPEC_CARRIED_SECRET_0_1_KEYS="k",
               TORCHSPEC_CARRIED_SECRET_0_1_0="x")
    done = subprocess.run(["bash", "-c", "\n".join(lines + ["env | grep -c TORCHSPEC_CARRIED; echo ran"])], env=env,
                          capture_output=True, text=True, timeout=30)
    assert done.stdout.split() == ["0", "ran"], done.stderr  # arrived, and taken out of the exported environment


def test_sbatch_env_flattens_a_mount_into_keys_and_values() -> None:
    assert sbatch_env({"C_0_0": "v"}, {"C_0_1": {"a": "1", "b.txt": "2"}}) == {
        "C_0_0": "v", "C_0_1_KEYS": "a b.txt", "C_0_1_0": "1", "C_0_1_1": "2"}


@pytest.mark.skipif(shutil.which("flock") is None, reason="flock (util-linux) is not installed")
def test_the_step_script_sets_writes_shares_and_cleans_up(tmp_path: pathlib.Path) -> None:
    """Two steps on one node share a mount folder: the files stay until the last one ends; no carrier reaches
    the replica; a folder others may write is refused."""
    folder = tmp_path / "m"
    env = {**os.environ, "C_0_0": "v$1'x", "C_0_1_KEYS": "token", "C_0_1_0": "file-value",
           "TORCHSPEC_CARRIED_SECRET_9": "stray", "SLURM_JOB_ID": "7"}
    gate = tmp_path / "gate"
    first = subprocess.Popen(["bash", "-c", STEP_SCRIPT, "s", "m", str(folder), "C_0_1", "--", "sh", "-c",
                              f"while [ ! -e {gate} ]; do sleep 0.05; done"], env=env)
    try:
        deadline = time.monotonic() + 30  # the first step is in (it wrote the file) before the second starts
        while not (folder / "token").exists():
            assert time.monotonic() < deadline and first.poll() is None, "the first step never wrote the file"
            time.sleep(0.05)
        second = subprocess.run(
            ["bash", "-c", STEP_SCRIPT, "s", "e", "V", "C_0_0", "m", str(folder), "C_0_1", "--", "sh", "-c",
             f'printf %s "$V"; echo; cat {folder}/token; echo; env | grep -c TORCHSPEC_CARRIED || true'],
            env=env, capture_output=True, text=True, timeout=30)
        assert second.stdout.splitlines() == ["v$1'x", "file-value", "0"], second.stderr
        assert (folder / "token").read_text() == "file-value"  # the first step still uses it
        assert oct(folder.stat().st_mode & 0o777) == "0o700"
        assert oct((folder / "token").stat().st_mode & 0o777) == "0o600"
    finally:
        gate.touch()
        assert first.wait(timeout=30) == 0
    assert sorted(os.listdir(folder)) == []
    open_folder = tmp_path / "open"
    open_folder.mkdir(mode=0o777)
    open_folder.chmod(0o777)
    refused = subprocess.run(["bash", "-c", STEP_SCRIPT, "s", "m", str(open_folder), "C_0_1", "--", "true"],
                             env=env, capture_output=True, text=True, timeout=30)
    assert refused.returncode == 1 and "no one else may write" in refused.stderr
    assert not (open_folder / "token").exists()


def test_a_secret_named_path_is_the_replicas_and_the_step_still_cleans_up(tmp_path: pathlib.Path) -> None:
    """As a role's env PATH is (test_slurm_cluster): the replica's command is found with the step's PATH, the
    replica sees the secret's, and the mount's files are still removed after it (rm with the step's PATH)."""
    folder = tmp_path / "m"
    env = {**os.environ, "C_0_0": "/secret-bin", "C_0_1_KEYS": "token", "C_0_1_0": "file-value", "SLURM_JOB_ID": "7"}
    done = subprocess.run(["bash", "-c", STEP_SCRIPT, "s", "m", str(folder), "C_0_1", "e", "PATH", "C_0_0", "--",
                           "env", "/bin/sh", "-c", f'echo "$PATH"; read -r line <{folder}/token; echo "$line"'],
                          env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["/secret-bin", "file-value"]
    assert sorted(os.listdir(folder)) == []


def test_on_the_cluster_the_replica_gets_it_and_nothing_torchspec_writes_holds_it(
        tmp_path: pathlib.Path, slurm_jobs: List[str]) -> None:
    marker = new_marker()
    mount = tmp_path / "mnt" / "hf"
    (tmp_path / "job.yaml").write_text(spec_text(str(tmp_path), mount=str(mount)))
    (tmp_path / "secrets" / "hf-token").mkdir(parents=True)
    (tmp_path / "secrets" / "hf-token" / "token").write_text("not this one: the variable comes first")
    cli = Cli(tmp_path, marker, TORCHSPEC_SECRETS_DIR=str(tmp_path / "secrets"))
    logs = tmp_path / "logs"
    handle = cli.lifecycle("slurm", "job.yaml", f"log_dir={logs}", mount=True)
    slurm_jobs.append(handle.rsplit("/", 1)[1])
    script = next(logs.rglob("job.sbatch")).read_text()
    assert "ts_give TORCHSPEC_CARRIED_SECRET_0_0" in script
    assert assert_not_in_files(marker, cli.home, logs) >= 5
    assert not mount.exists() or [p.name for p in mount.iterdir()] == []  # the files went with the replica
    shown = subprocess.run(["scontrol", "show", "job", handle.rsplit("/", 1)[1]], capture_output=True, text=True)
    assert marker.split("$")[0] not in shown.stdout
