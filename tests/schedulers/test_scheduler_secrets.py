"""The shared part of secrets for the schedulers without a secret store (torchspec/schedulers/secrets.py): where a
mount's files come from, and what a backend that carries mounts still refuses."""

from __future__ import annotations

import pathlib

import pytest

from torchspec import specs
from torchspec.errors import AppRefusedError
from torchspec.schedulers.secrets import SecretMissingError, read_carried, read_files, refuse_kubernetes_only
from torchspec.specs.secrets import SecretRef


@pytest.fixture
def folder(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    (tmp_path / "db").mkdir()
    for name, text in (("user", "admin\n"), ("pass.txt", "p$w"), ("..hidden", "x"), ("bad name", "x")):
        (tmp_path / "db" / name).write_text(text)
    (tmp_path / "db" / "sub").mkdir()
    monkeypatch.setenv("TORCHSPEC_SECRETS_DIR", str(tmp_path))
    for name in ("TORCHSPEC_SECRET_DB_USER", "TORCHSPEC_SECRET_DB_PASS_TXT"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def test_a_mount_without_key_takes_every_file_that_can_be_a_key(folder: pathlib.Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHSPEC_SECRET_DB_USER", "from-the-variable")
    assert read_files(SecretRef(name="db", mount="/m")) == {
        "..hidden": "x", "pass.txt": "p$w", "user": "from-the-variable"}  # the variable first, as for env
    assert read_files(SecretRef(name="db", key="pass.txt", mount="/m")) == {"pass.txt": "p$w"}


def test_a_mount_with_nothing_to_read_is_named_with_the_folder(folder: pathlib.Path) -> None:
    app = specs.AppDef("a", [specs.Role("r", image="i", secrets=[SecretRef(name="none", mount="/m"),
                                                                   SecretRef(name="db", key="nope", mount="/n")])])
    with pytest.raises(SecretMissingError) as raised:
        read_carried(app)
    assert "'none' (for /m) has no keys" in str(raised.value) and "'db/nope' (for /n)" in str(raised.value)
    assert str(folder / "none") in (raised.value.hint or "")


def test_mounts_are_refused_where_the_backend_carries_none_and_bad_keys_everywhere() -> None:
    app = specs.AppDef("a", [specs.Role("r", image="i", secrets=[SecretRef(name="db", mount="/m"),
                                                                   SecretRef(name="db", key="..", mount="/n"),
                                                                   SecretRef(name="db", mount="rel")])])
    with pytest.raises(AppRefusedError) as local:
        refuse_kubernetes_only(app, "local")
    assert [p for p, _ in local.value.problems] == [("roles", 0, "secrets", 0, "mount"),
                                                    ("roles", 0, "secrets", 1, "mount"),
                                                    ("roles", 0, "secrets", 2, "mount")]
    with pytest.raises(AppRefusedError) as slurm:
        refuse_kubernetes_only(app, "slurm", mounts=True)
    assert [p for p, _ in slurm.value.problems] == [("roles", 0, "secrets", 1, "key"),
                                                    ("roles", 0, "secrets", 2, "mount")]


@pytest.mark.parametrize("scheduler,cfg", [("slurm", "log_dir={tmp}/logs"), ("ray", "dashboard_address=127.0.0.1:1")])
def test_a_missing_secret_is_exit_2_naming_it_before_anything_is_made(
        scheduler: str, cfg: str, tmp_path: pathlib.Path) -> None:
    """Through the CLI, with no engine needed: the secret is read before sbatch runs or Ray is asked."""
    import os
    import subprocess
    import sys

    from secrets_support import ROOT, SOURCE, spec_text

    (tmp_path / "job.yaml").write_text(spec_text("/tmp" if scheduler == "slurm" else "img"))
    env = {k: v for k, v in os.environ.items() if k != SOURCE}
    env.update(TORCHSPEC_SECRETS_DIR=str(tmp_path / "none"), TORCHSPEC_HOME=str(tmp_path / "home"),
               PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "torchspec", "submit", "-s", scheduler, "-c",
                           cfg.format(tmp=tmp_path), "job.yaml"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "secret 'hf-token/token' (for HF_TOKEN) is not set on this machine" in done.stderr
    assert SOURCE in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "logs").exists()
