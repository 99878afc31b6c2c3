"""Config files: where settings come from, how they merge, and what each section means.

Every test works in a tmp folder with ``XDG_CONFIG_HOME`` pointing into it, so
the machine's own user config never leaks in.
"""

from __future__ import annotations

import logging
import pathlib
from typing import List

import pytest

from torchspec.config import (
    Config,
    apply_settings,
    component_defaults,
    config_key,
    default_scheduler,
    explain,
    load_config,
    scheduler_cfg,
    user_config_path,
)
from torchspec.errors import UsageError
from torchspec.specs import runopts


@pytest.fixture
def user_dir(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    """An empty $XDG_CONFIG_HOME/torchspec folder; write config.toml into it to have a user file."""
    xdg = tmp_path / "xdg"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(xdg))
    (xdg / "torchspec").mkdir(parents=True)
    return xdg / "torchspec"


@pytest.fixture
def project(tmp_path: pathlib.Path) -> pathlib.Path:
    folder = tmp_path / "project"
    (folder / "sub" / "deeper").mkdir(parents=True)
    return folder


def opts() -> runopts:
    o = runopts()
    o.add("queue", str, "queue to submit to", default="default")
    o.add("priority", int, "priority", default=0)
    o.add("ratio", float, "a float", default=0.5)
    o.add("debug", bool, "debug mode", default=False)
    o.add("tags", List[str], "tags", default=None)
    return o


def test_user_config_path_follows_xdg(user_dir: pathlib.Path) -> None:
    assert user_config_path() == str(user_dir / "config.toml")


def test_no_files_no_settings(user_dir: pathlib.Path, project: pathlib.Path) -> None:
    config = load_config(str(project))
    assert config.data == {} and config.files == []
    assert default_scheduler(config) is None
    assert scheduler_cfg(config, "local") == {}
    assert component_defaults(config) == {}
    assert explain(config) == []


def test_project_file_found_upwards_and_beats_user_file(user_dir: pathlib.Path, project: pathlib.Path) -> None:
    (user_dir / "config.toml").write_text(
        'default_scheduler = "kubernetes"\n'
        "[scheduler.local]\nlog_dir = \"/user/logs\"\nprefix = \"u\"\n"
        "[lint]\nstrict = true\n"
    )
    (project / ".torchspec.toml").write_text(
        'default_scheduler = "local"\n'
        "[scheduler.local]\nlog_dir = \"/project/logs\"\n"
    )
    config = load_config(str(project / "sub" / "deeper"))
    assert config.files == [str(user_dir / "config.toml"), str(project / ".torchspec.toml")]
    assert default_scheduler(config) == "local"
    # tables merge key by key: the project changes one option and keeps the user's other one
    assert scheduler_cfg(config, "local") == {"log_dir": "/project/logs", "prefix": "u"}
    assert config.section("lint") == {"strict": True}
    assert config.sources["scheduler.local.log_dir"] == str(project / ".torchspec.toml")
    assert config.sources["scheduler.local.prefix"] == str(user_dir / "config.toml")


def test_pyproject_tool_table_is_a_project_file(user_dir: pathlib.Path, project: pathlib.Path) -> None:
    (project / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.torchspec]\ndefault_scheduler = "local"\n'
        '[tool.torchspec.component."dist.ddp"]\nj = "2x4"\n'
    )
    config = load_config(str(project / "sub"))
    assert default_scheduler(config) == "local"
    assert component_defaults(config) == {"dist.ddp": {"j": "2x4"}}
    assert config.sources[config_key("component", "dist.ddp", "j")] == str(project / "pyproject.toml")


def test_default_scheduler_under_cli_table(user_dir: pathlib.Path, project: pathlib.Path) -> None:
    (user_dir / "config.toml").write_text('[cli]\ndefault_scheduler = "from-user"\n')
    assert default_scheduler(load_config(str(project))) == "from-user"
    # the project file wins whichever spelling each file uses
    (project / ".torchspec.toml").write_text('default_scheduler = "from-project"\n')
    assert default_scheduler(load_config(str(project))) == "from-project"
    # one file with both: [cli] wins
    (project / ".torchspec.toml").write_text('default_scheduler = "top"\n[cli]\ndefault_scheduler = "cli"\n')
    assert default_scheduler(load_config(str(project))) == "cli"


def test_default_scheduler_must_be_text(user_dir: pathlib.Path, project: pathlib.Path) -> None:
    (project / ".torchspec.toml").write_text("default_scheduler = 3\n")
    with pytest.raises(UsageError, match="default_scheduler must be a scheduler name"):
        default_scheduler(load_config(str(project)))


def test_scheduler_cfg_is_typed_by_runopts(user_dir: pathlib.Path, project: pathlib.Path) -> None:
    (project / ".torchspec.toml").write_text(
        "[scheduler.k8s]\n"
        'queue = "gpu"\n'
        'priority = "7"\n'  # text is cast as -c text is
        "ratio = 2\n"  # an int where a float is declared
        'debug = "yes"\n'
        'tags = ["a", 1]\n'
    )
    cfg = scheduler_cfg(load_config(str(project)), "k8s", opts())
    assert cfg == {"queue": "gpu", "priority": 7, "ratio": 2.0, "debug": True, "tags": ["a", "1"]}
    assert isinstance(cfg["ratio"], float)
    # list options also take the -c text form
    (project / ".torchspec.toml").write_text('[scheduler.k8s]\ntags = "x;y"\n')
    assert scheduler_cfg(load_config(str(project)), "k8s", opts()) == {"tags": ["x", "y"]}


def test_scheduler_cfg_bad_value_names_the_file(user_dir: pathlib.Path, project: pathlib.Path) -> None:
    (project / ".torchspec.toml").write_text('[scheduler.k8s]\npriority = "high"\n')
    with pytest.raises(UsageError) as raised:
        scheduler_cfg(load_config(str(project)), "k8s", opts())
    assert ".torchspec.toml" in raised.value.message and "scheduler.k8s.priority" in raised.value.message


def test_scheduler_cfg_drops_unknown_options_with_a_warning(
    user_dir: pathlib.Path, project: pathlib.Path, caplog: pytest.LogCaptureFixture
) -> None:
    (project / ".torchspec.toml").write_text('[scheduler.k8s]\nqueeu = "gpu"\n')
    with caplog.at_level(logging.WARNING, logger="torchspec.config"):
        assert scheduler_cfg(load_config(str(project)), "k8s", opts()) == {}
    assert "queeu" in caplog.text


def test_apply_settings_are_checked(user_dir: pathlib.Path, project: pathlib.Path) -> None:
    (user_dir / "config.toml").write_text('[apply]\nlock = "kubernetes"\nlock_timeout = 30\n')
    (project / ".torchspec.toml").write_text('[apply]\nlock_duration = 20\nlock_file = "x"\n')
    assert apply_settings(load_config(str(project))) == {"lock": "kubernetes", "lock_timeout": 30, "lock_duration": 20}
    for bad in ('lock = "etcd"', "lock_timeout = -1", "lock_duration = 0.5", "lock_duration = true"):
        (project / ".torchspec.toml").write_text(f"[apply]\n{bad}\n")
        with pytest.raises(UsageError) as raised:
            apply_settings(load_config(str(project)))
        assert raised.value.message.startswith(f"{project / '.torchspec.toml'}: apply.{bad.split()[0]} must be")


def test_component_defaults_become_param_text(user_dir: pathlib.Path, project: pathlib.Path) -> None:
    (project / ".torchspec.toml").write_text(
        '[component."dist.ddp"]\n'
        'j = "2x4"\ngpu = 1\ndebug = true\nargs = ["--lr", "0.1"]\nenv = {A = "1"}\n'
    )
    assert component_defaults(load_config(str(project))) == {
        "dist.ddp": {"j": "2x4", "gpu": "1", "debug": "true", "args": '["--lr", "0.1"]', "env": '{"A": "1"}'}
    }


def test_component_path_keys_are_relative_to_their_config_file(user_dir: pathlib.Path, project: pathlib.Path) -> None:
    (user_dir / "config.toml").write_text('[component."jobs/train.yaml"]\nlr = "0.1"\n')
    (project / ".torchspec.toml").write_text('[component."jobs/train.yaml"]\nlr = "0.2"\n')
    defaults = component_defaults(load_config(str(project / "sub")))
    # two different files: neither overrides the other
    assert defaults == {
        str(user_dir / "jobs" / "train.yaml"): {"lr": "0.1"},
        str(project / "jobs" / "train.yaml"): {"lr": "0.2"},
    }


def test_section_must_be_a_table(user_dir: pathlib.Path, project: pathlib.Path) -> None:
    (project / ".torchspec.toml").write_text('[scheduler]\nlocal = "x"\n')
    with pytest.raises(UsageError, match="scheduler.local must be a table"):
        scheduler_cfg(load_config(str(project)), "local")


def test_explain_lists_every_value_with_its_file(user_dir: pathlib.Path, project: pathlib.Path) -> None:
    user, proj = user_dir / "config.toml", project / ".torchspec.toml"
    user.write_text('[lint]\nignore = ["TS305"]\n[scheduler.local]\nlog_dir = "/u"\n')
    proj.write_text('default_scheduler = "local"\n[component."utils.echo"]\nmsg = "hi"\n')
    assert explain(load_config(str(project))) == [
        ('component."utils.echo".msg', "hi", str(proj)),
        ("default_scheduler", "local", str(proj)),
        ("lint.ignore", ["TS305"], str(user)),
        ("scheduler.local.log_dir", "/u", str(user)),
    ]


def test_a_value_replacing_a_table_forgets_the_table_sources(user_dir: pathlib.Path, project: pathlib.Path) -> None:
    (user_dir / "config.toml").write_text("[cli]\ndefault_scheduler = \"a\"\n")
    (project / ".torchspec.toml").write_text('cli = "oops"\n')
    config = load_config(str(project))
    assert config.data["cli"] == "oops"
    assert [row[0] for row in explain(config)] == ["cli"]


def test_unreadable_file_is_a_usage_error(user_dir: pathlib.Path, project: pathlib.Path) -> None:
    (project / ".torchspec.toml").write_text("[scheduler.local\n")
    with pytest.raises(UsageError, match="cannot read the config file"):
        load_config(str(project))


def test_config_built_by_hand() -> None:
    """Callers (and tests) may build a Config without files; the functions only read ``data``."""
    config = Config(data={"scheduler": {"local": {"priority": 3}}})
    assert scheduler_cfg(config, "local", opts()) == {"priority": 3}
