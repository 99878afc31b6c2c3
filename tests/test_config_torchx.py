"""TorchX's ``.torchxconfig``, read where a project has no torchspec config, with the same meaning."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

from torchspec.config import component_defaults, default_component, default_scheduler, explain, load_config, \
    scheduler_cfg
from torchspec.errors import UsageError

TORCHXCONFIG = textwrap.dedent("""\
    [cli:run]
    scheduler = local_cwd
    component = comp.py:trainer
    workspace = .

    [cli:status]
    verbose = true

    [local_cwd]
    prepend_cwd = true

    [kubernetes]
    namespace = ml
    queue = team

    [component:comp.py:trainer]
    msg = from the config
    replicas = 1

    [component:dist.ddp]
    j = 2x4
    """)

COMPONENT = textwrap.dedent('''\
    import torchspec.specs as specs

    def trainer(msg: str, replicas: int = 2) -> specs.AppDef:
        return specs.AppDef("echo", [specs.Role("echo", image=".", entrypoint="echo", args=[msg],
                                                num_replicas=replicas)])
    ''')


@pytest.fixture
def folder(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("TORCHSPEC_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("TORCHXCONFIG", raising=False)
    work = tmp_path / "work"
    work.mkdir()
    (work / ".torchxconfig").write_text(TORCHXCONFIG)
    (work / "comp.py").write_text(COMPONENT)
    monkeypatch.chdir(work)
    return work


def test_every_section_keeps_its_meaning(folder: pathlib.Path) -> None:
    config = load_config()
    assert config.files == [str(folder / ".torchxconfig")]
    assert default_scheduler(config) == "local"  # local_cwd
    assert default_component(config) == f"{folder / 'comp.py'}:trainer"  # TorchX's: relative to the working folder
    # TorchX's kubernetes scheduler makes Volcano jobs; local_cwd runs in the working folder
    assert scheduler_cfg(config, "kubernetes") == {"namespace": "ml", "queue": "team", "flavor": "volcano"}
    assert scheduler_cfg(config, "local") == {"prepend_cwd": "true", "use_cwd": "true"}
    defaults = component_defaults(config)
    # a FILE.py key is anchored to the config file's folder, as a spec path is
    assert defaults[f"{folder / 'comp.py'}:trainer"] == {"msg": "from the config", "replicas": "1"}
    assert defaults["dist.ddp"] == {"j": "2x4"}
    assert ("cli.default_scheduler", "local", str(folder / ".torchxconfig")) in explain(config)


def test_torchx_option_names_become_ours(folder: pathlib.Path) -> None:
    """Options TorchX spells otherwise are renamed, typed by our runopts; what the file says beats what a
    TorchX scheduler name implies; an option with no counterpart is dropped with a warning naming it."""
    from torchspec.schedulers.local import create_scheduler

    (folder / ".torchxconfig").write_text(textwrap.dedent("""\
        [local_cwd]
        log_dir = /tmp/tx-logs
        use_cwd = false

        [slurm]
        mail-user = a@b.c
        mail-type = END
        job_dir = /shared/jobs

        [kubernetes]
        flavor = jobset

        [ray]
        cluster_name = nope
        """))
    config = load_config()
    assert scheduler_cfg(config, "local", create_scheduler("t").run_opts()) == {"state_dir": "/tmp/tx-logs",
                                                                               "use_cwd": False}
    assert scheduler_cfg(config, "slurm") == {"mail_user": "a@b.c", "mail_type": "END", "log_dir": "/shared/jobs"}
    assert scheduler_cfg(config, "kubernetes") == {"flavor": "jobset"}
    done = subprocess.run([sys.executable, "-m", "torchspec", "dryrun", "-s", "ray", "utils.echo"], cwd=folder,
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert done.returncode == 0 and "cluster_name" in done.stderr, done.stderr


def test_a_torchspec_config_wins_over_it(folder: pathlib.Path) -> None:
    (folder / ".torchspec.toml").write_text('default_scheduler = "docker"\n')
    config = load_config()
    assert config.files == [str(folder / ".torchspec.toml")] and default_scheduler(config) == "docker"


def test_torchxconfig_names_the_file(folder: pathlib.Path, tmp_path: pathlib.Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    other = tmp_path / "other.ini"
    other.write_text("[cli:run]\nscheduler = slurm\n")
    monkeypatch.setenv("TORCHXCONFIG", str(other))
    assert default_scheduler(load_config()) == "slurm"
    monkeypatch.setenv("TORCHXCONFIG", str(tmp_path / "missing"))
    with pytest.raises(UsageError, match="TORCHXCONFIG names .*missing, which is not a file"):
        load_config()


def test_a_broken_file_is_one_clear_error(folder: pathlib.Path) -> None:
    (folder / ".torchxconfig").write_text("scheduler = local\n")  # no section header
    with pytest.raises(UsageError, match=r"cannot read the TorchX config file .*\.torchxconfig"):
        load_config()


def test_submit_runs_the_default_component_with_its_defaults(folder: pathlib.Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-m", "torchspec", "dryrun"], capture_output=True, text=True,
                          cwd=folder, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "local app echo-" in done.stdout and "echo 'from the config'" in done.stdout
    assert "1 replica(s)" in done.stdout
    done = subprocess.run([sys.executable, "-m", "torchspec", "dryrun", "--msg", "given"], capture_output=True,
                          text=True, cwd=folder, env=env, timeout=120)
    assert done.returncode == 0 and "echo given" in done.stdout, done.stderr
    shown = subprocess.run([sys.executable, "-m", "torchspec", "config"], capture_output=True, text=True,
                           cwd=folder, env=env, timeout=120)
    assert ".torchxconfig" in shown.stdout and "cli.default_component" in shown.stdout, shown
