"""Every example is linted clean and rendered, so the docs never rot; README lists every lint code."""

from __future__ import annotations

import pathlib

import pytest
from example_files import example_specs

from torchspec.lint import lint_paths
from torchspec.codes import CODES
from torchspec.loader import load_apps

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXAMPLES = example_specs()


def test_there_are_examples_in_every_format() -> None:
    assert {p.suffix for p in EXAMPLES} >= {".yaml", ".toml", ".json"}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: str(p.relative_to(ROOT)))
def test_example_lints_clean_and_renders(path: pathlib.Path) -> None:
    result = lint_paths([str(path)])
    assert result.diagnostics == []
    apps = load_apps(str(path))
    assert apps and all(app.roles for app in apps)


def test_the_gitops_example_has_specs_and_both_ci_files() -> None:
    gitops = ROOT / "examples" / "gitops"
    assert {p.name for p in EXAMPLES if gitops in p.parents} == {"train.yaml", "eval.yaml"}
    assert (gitops / ".gitlab-ci.yml").is_file() and (gitops / ".github" / "workflows" / "torchspec.yml").is_file()


def test_hello_is_the_same_in_every_format() -> None:
    yaml_app, = load_apps(str(ROOT / "examples" / "hello.yaml"))
    assert load_apps(str(ROOT / "examples" / "hello.toml")) == [yaml_app]
    assert load_apps(str(ROOT / "examples" / "hello.json")) == [yaml_app]


def test_ddp_example_takes_nnodes() -> None:
    app, = load_apps(str(ROOT / "examples" / "ddp.yaml"), {"nnodes": "4"})
    assert app.roles[0].num_replicas == 4
    assert "${rank0_env}" in app.roles[0].args[1]


def test_readme_lists_every_code() -> None:
    readme = (ROOT / "README.md").read_text()
    for code in CODES.values():
        assert f"| {code.code} | {code.name} |" in readme, code.code
