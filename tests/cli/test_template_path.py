"""A spec importing templates from a folder beside it: every command that reads specs finds that folder the
same way (``--template-path``, else the config's ``[lint] template_paths``), so a file that lints clean also
renders, dry-runs and submits."""

from __future__ import annotations

import pathlib
import textwrap

import pytest

from tests.cli.test_cli import run
from torchspec.errors import SpecError, UsageError
from torchspec.runner import get_runner

SPEC = textwrap.dedent(
    """\
    imports:
      images: images.j2
    name: shared
    roles:
      - name: main
        image: "{{ images.trainer() }}"
        entrypoint: echo
        args: [hi]
    """
)


@pytest.fixture
def project(tmp_path: pathlib.Path) -> pathlib.Path:
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "job.yaml").write_text(SPEC)
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "images.j2").write_text("{%- macro trainer() -%}ghcr.io/acme/trainer:1.5{%- endmacro -%}")
    return tmp_path


@pytest.mark.parametrize("command", [["lint"], ["render"], ["dryrun", "-s", "kubernetes"]])
def test_every_command_takes_the_same_template_folders(project: pathlib.Path, command: list[str]) -> None:
    spec = "jobs/job.yaml"
    without = run(*command, spec, cwd=project)
    assert without.returncode == 1 and "images.j2" in without.stdout + without.stderr, without
    given = run(*command, "--template-path", "lib", spec, cwd=project)
    assert given.returncode == 0, given.stdout + given.stderr
    (project / ".torchspec.toml").write_text('[lint]\ntemplate_paths = ["lib"]\n')
    configured = run(*command, spec, cwd=project)
    assert configured.returncode == 0, configured.stdout + configured.stderr
    if command[0] != "lint":
        assert "ghcr.io/acme/trainer:1.5" in configured.stdout


def test_the_runner_takes_template_paths(project: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(project)
    with get_runner() as runner:
        with pytest.raises(SpecError, match="images.j2"):
            runner.dryrun_component("jobs/job.yaml", {}, "kubernetes")
        info = runner.dryrun_component("jobs/job.yaml", {}, "kubernetes", template_paths=[str(project / "lib")])
        assert info._app is not None and info._app.roles[0].image == "ghcr.io/acme/trainer:1.5"
    comp = project / "comp.py"
    comp.write_text("from torchspec import specs\n\ndef hello() -> specs.AppDef:\n"
                    "    return specs.AppDef('h', [specs.Role('r', 'img', entrypoint='echo')])\n")
    with get_runner() as runner:
        with pytest.raises(UsageError, match="--template-path"):
            runner.dryrun_component(f"{comp}:hello", [], "local", template_paths=[str(project / "lib")])
