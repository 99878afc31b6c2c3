"""Secrets on Ray: values in the job's runtime_env only (base64 of JSON, under one carrier), handed by the driver
to each replica's actor, which sets its variables and writes its mounts' files on its node.

The pure parts and the actor's runner need no cluster; the last test runs one short job on the test cluster
(``ray_cluster``) through the CLI and greps the marker in every output and file torchspec writes
(tests/secrets_support.py).
"""

from __future__ import annotations

import base64
import json
import os
import pathlib

import pytest

from secrets_support import Cli, assert_not_in_files, new_marker, spec_text
from torchspec import specs
from torchspec.errors import AppRefusedError
from torchspec.schedulers.ray import driver
from torchspec.schedulers.ray.scheduler import RayScheduler
from torchspec.schedulers.ray.states import ENV_PLAN, ENV_SECRETS
from torchspec.schedulers.ray.translate import SECRETS_SHOWN, app_to_request
from torchspec.schedulers.secrets import SecretMissingError
from torchspec.specs.secrets import SecretRef

TOKEN = SecretRef(name="hf-token", key="token", env="HF_TOKEN")
FILES = SecretRef(name="db", mount="/run/db")


def app(*refs: SecretRef) -> specs.AppDef:
    return specs.AppDef("sec", [specs.Role("trainer", image="img", entrypoint="sh", args=["-c", "true"],
                                           resource=specs.Resource(cpu=1, gpu=0, memMB=64), secrets=list(refs))])


def request(*refs: SecretRef):  # type: ignore[no-untyped-def]
    return app_to_request(app(*refs), "127.0.0.1:1", "PACK", {}, {}, "t")


def test_the_plan_names_carriers_the_values_go_apart_in_the_runtime_env() -> None:
    req = request(TOKEN, FILES)
    assert req.plan()["roles"][0]["replicas"][0]["secrets"] == [
        {"env": "HF_TOKEN", "carrier": "TORCHSPEC_CARRIED_SECRET_0_0", "value": "<secret hf-token/token>"},
        {"mount": "/run/db", "carrier": "TORCHSPEC_CARRIED_SECRET_0_1", "value": "<secret db>"}]
    assert req.shown()["runtime_env"]["env_vars"][ENV_SECRETS] == SECRETS_SHOWN
    carried = {"TORCHSPEC_CARRIED_SECRET_0_0": "v$HOME'x", "TORCHSPEC_CARRIED_SECRET_0_1": {"a": "1"}}
    env_vars = req.submit_kwargs("sec-1", carried)["runtime_env"]["env_vars"]
    assert "$" not in env_vars[ENV_SECRETS]  # Ray expands $NAME in env_vars
    assert json.loads(base64.b64decode(env_vars[ENV_SECRETS])) == carried
    assert "v$HOME" not in env_vars[ENV_PLAN]
    assert ENV_SECRETS not in request().submit_kwargs("x-1")["runtime_env"]["env_vars"]


def test_env_prefix_and_a_taken_variable_are_refused_at_their_place() -> None:
    with pytest.raises(AppRefusedError) as raised:
        request(TOKEN, SecretRef(name="db", env_prefix="DB_"))
    assert [where for where, _ in raised.value.problems] == [("roles", 0, "secrets", 1, "env_prefix")]
    with pytest.raises(AppRefusedError) as taken:
        request(SecretRef(name="a", key="b", env="TORCHSPEC_ROLE_NAME"))
    assert taken.value.path == ("roles", 0, "secrets", 0, "env")


def test_a_missing_secret_stops_the_submit_before_ray_is_asked(tmp_path: pathlib.Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TORCHSPEC_SECRET_HF_TOKEN_TOKEN", raising=False)
    monkeypatch.setenv("TORCHSPEC_SECRETS_DIR", str(tmp_path / "none"))
    scheduler = RayScheduler("t", dashboard_address="127.0.0.1:1")  # nothing answers there
    with pytest.raises(SecretMissingError) as raised:
        scheduler.schedule(scheduler.submit_dryrun(app(TOKEN, FILES), {}))
    assert "'hf-token/token'" in str(raised.value) and "'db'" in str(raised.value)


def test_the_actor_sets_its_secrets_writes_shares_and_removes_the_files(
        tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """What each replica's actor does on its node: its variables set, every carrier dropped, the files written
    0600 in a 0700 folder and removed when the last replica using the folder ends; a folder others may write is
    refused, and the replica does not start."""
    monkeypatch.setenv(ENV_SECRETS, "e30=")
    monkeypatch.setenv("TORCHSPEC_CARRIED_SECRET_0_0", "stray")
    folder = tmp_path / "m"
    mounts = {str(folder): {"token": "file-value"}}
    other: list = []
    driver.write_mounts(mounts, "other-replica", other)  # a second replica of the node, still running
    script = f'printf "%s\\n" "$V"; cat {folder}/token; echo; env | grep -c TORCHSPEC_CARRIED || true'
    code = driver.ReplicaRunner("trainer/0", 0).run(["sh", "-c", script], {"V": "v$1'x"}, mounts)
    out = [line.split("] ", 1)[1] for line in capsys.readouterr().out.splitlines() if " stdout " in line]
    assert code == 0 and out == ["v$1'x", "file-value", "0"], out
    assert (folder / "token").read_text() == "file-value"
    assert oct(folder.stat().st_mode & 0o777) == "0o700" and oct((folder / "token").stat().st_mode & 0o777) == "0o600"
    driver.remove_mounts(mounts, other, "other-replica")
    assert os.listdir(folder) == []
    open_folder = tmp_path / "open"
    open_folder.mkdir()
    open_folder.chmod(0o777)
    code = driver.ReplicaRunner("trainer/0", 1).run(["sh", "-c", "echo started"], {},
                                                    {str(open_folder): {"token": "x"}})
    said = capsys.readouterr().out
    assert code == 1 and "no one else may write" in said and "started" not in said
    assert not (open_folder / "token").exists()


def test_secrets_of_reads_a_replicas_own() -> None:
    replica = {"secrets": [{"env": "V", "carrier": "C_0_0", "value": "<secret a/b>"},
                           {"mount": "/m", "carrier": "C_0_1", "value": "<secret a>"}]}
    assert driver.secrets_of(replica, {"C_0_0": "x", "C_0_1": {"k": "y"}, "C_1_0": "no"}) == (
        {"V": "x"}, {"/m": {"k": "y"}})
    with pytest.raises(KeyError, match="<secret a/b> did not reach the job"):
        driver.secrets_of(replica, {})


def test_on_the_cluster_the_replica_gets_it_and_nothing_torchspec_writes_holds_it(
        tmp_path: pathlib.Path, ray_cluster) -> None:  # type: ignore[no-untyped-def]
    marker = new_marker()
    mount = tmp_path / "mnt" / "hf"
    (tmp_path / "job.yaml").write_text(spec_text("img", mount=str(mount)))
    cli = Cli(tmp_path, marker, RAY_ADDRESS=ray_cluster.address)
    handle = cli.lifecycle("ray", "job.yaml", f"dashboard_address={ray_cluster.address}", mount=True)
    assert handle.startswith("ray://")
    assert assert_not_in_files(marker, cli.home, tmp_path / "job.yaml") >= 1
    assert not mount.exists() or os.listdir(mount) == []  # the files went with the replica
    # where Ray itself keeps it: the job's runtime_env, which its dashboard shows (docs/guides/secrets.md)
    from ray.job_submission import JobSubmissionClient

    submission_id = handle.partition(f"{ray_cluster.address}-")[2]
    job = JobSubmissionClient(f"http://{ray_cluster.address}").get_job_info(submission_id)
    carried = json.loads(base64.b64decode(job.runtime_env["env_vars"][ENV_SECRETS]))
    assert carried["TORCHSPEC_CARRIED_SECRET_0_0"] == marker
