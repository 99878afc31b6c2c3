"""Secrets on the local scheduler: read at submit from TORCHSPEC_SECRET_<NAME>_<KEY> or the secrets folder, carried
in the supervisor's environment only; the dry run, request.json, spec.json and state hold no value."""

from __future__ import annotations

import hashlib
import os
import pathlib

import pytest

from torchspec import specs
from torchspec.errors import AppRefusedError
from torchspec.runner import Runner
from torchspec.schedulers import secrets
from torchspec.schedulers.local import states
from torchspec.schedulers.local.scheduler import LocalScheduler
from torchspec.specs.secrets import SecretRef

MARKER = "zz-local-secret-4f1c9e"


def app() -> specs.AppDef:
    script = "import hashlib, os; print('sha', hashlib.sha256(os.environ['HF_TOKEN'].encode()).hexdigest()); " \
             "print('carriers', sum(k.startswith('TORCHSPEC_CARRIED') for k in os.environ))"
    return specs.AppDef("sec", [specs.Role("trainer", image="/tmp", entrypoint="python3", args=["-c", script],
                                           secrets=[SecretRef(name="hf-token", key="token", env="HF_TOKEN")])])


def test_the_carrier_prefix_is_one() -> None:
    assert states.CARRIER_PREFIX == secrets.CARRIER_PREFIX


def test_dryrun_shows_a_placeholder(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> None:
    monkeypatch.setenv("TORCHSPEC_SECRET_HF_TOKEN_TOKEN", MARKER)
    info = LocalScheduler("t", state_dir=str(tmp_path)).submit_dryrun(app(), {})
    assert "HF_TOKEN=<secret hf-token/token>" in str(info) and MARKER not in str(info)
    assert MARKER not in repr(info.request.as_dict())


def test_missing_secret_is_a_usage_error_naming_it(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> None:
    monkeypatch.delenv("TORCHSPEC_SECRET_HF_TOKEN_TOKEN", raising=False)
    monkeypatch.setenv("TORCHSPEC_SECRETS_DIR", str(tmp_path / "none"))
    scheduler = LocalScheduler("t", state_dir=str(tmp_path / "state"))
    with pytest.raises(secrets.SecretMissingError) as raised:
        scheduler.schedule(scheduler.submit_dryrun(app(), {}))
    assert "hf-token/token" in str(raised.value) and "TORCHSPEC_SECRET_HF_TOKEN_TOKEN" in (raised.value.hint or "")
    assert not (tmp_path / "state" / "apps").exists() or not os.listdir(tmp_path / "state" / "apps")


def test_mount_and_env_prefix_are_refused_at_their_place(tmp_path: pathlib.Path) -> None:
    bad = app()
    bad.roles[0].secrets = [SecretRef(name="db", mount="/etc/db"), SecretRef(name="db", env_prefix="DB_")]
    with pytest.raises(AppRefusedError) as raised:
        LocalScheduler("t", state_dir=str(tmp_path)).submit_dryrun(bad, {})
    assert [where for where, _ in raised.value.problems] == [("roles", 0, "secrets", 0, "mount"),
                                                             ("roles", 0, "secrets", 1, "env_prefix")]


@pytest.mark.parametrize("source", ["variable", "file"])
def test_the_replica_gets_the_value_and_nothing_torchspec_keeps_holds_it(
        source: str, monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> None:
    state = tmp_path / "state"
    monkeypatch.setenv("TORCHSPEC_HOME", str(state))
    monkeypatch.delenv("TORCHSPEC_SECRET_HF_TOKEN_TOKEN", raising=False)
    if source == "variable":
        monkeypatch.setenv("TORCHSPEC_SECRET_HF_TOKEN_TOKEN", MARKER)
    else:
        (tmp_path / "s" / "hf-token").mkdir(parents=True)
        (tmp_path / "s" / "hf-token" / "token").write_text(MARKER + "\n")
        monkeypatch.setenv("TORCHSPEC_SECRETS_DIR", str(tmp_path / "s"))
    runner = Runner("t", {"local": lambda name, **kw: LocalScheduler(name, state_dir=str(state))})
    handle = runner.run(app(), "local", {})
    status = runner.wait(handle, timeout=60)
    assert status is not None and status.state == specs.AppState.SUCCEEDED
    text = "\n".join(runner.log_lines(handle, "trainer", 0))
    assert f"sha {hashlib.sha256(MARKER.encode()).hexdigest()}" in text and "carriers 0" in text
    for path in state.rglob("*"):
        if path.is_file():
            assert MARKER.encode() not in path.read_bytes(), path


def test_through_the_cli_the_replica_gets_it_and_nothing_torchspec_writes_holds_it(tmp_path: pathlib.Path) -> None:
    """The engine-wide grep (tests/secrets_support.py) on local: every command's output, the state folder."""
    from secrets_support import Cli, assert_not_in_files, new_marker, spec_text

    marker = new_marker()
    (tmp_path / "job.yaml").write_text(spec_text(str(tmp_path)))
    cli = Cli(tmp_path, marker)
    cli.lifecycle("local", "job.yaml")
    assert assert_not_in_files(marker, cli.home, tmp_path / "job.yaml") >= 3
