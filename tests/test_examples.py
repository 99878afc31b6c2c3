"""Every example is linted clean and rendered, so the docs never rot (the site's lint code page is generated
from the catalogue: tests/docs/test_site.py)."""

from __future__ import annotations

import pathlib

import pytest
from example_files import example_specs

from torchspec.lint import lint_paths
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


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: str(p.relative_to(ROOT)))
@pytest.mark.parametrize("scheduler", ["local", "docker", "kubernetes"])
def test_example_dry_runs(path: pathlib.Path, scheduler: str) -> None:
    """Every example dry-runs on local (use_cwd: the TSM example's /home folders need not exist), and on
    docker and kubernetes unless its images are folders (the local examples' `.`): those two refuse a
    folder with TS603 and a hint, rather than write `image: .` into a container or a manifest."""
    from torchspec.errors import AppRefusedError
    from torchspec.runner import get_runner
    from torchspec.schedulers.images import is_folder_image

    cfg = {"use_cwd": True} if scheduler == "local" else {}
    with get_runner() as runner:
        for app in load_apps(str(path)):
            folders = [r.name for r in app.roles if is_folder_image(r.image)]
            assert folders in ([], [r.name for r in app.roles]), "an example runs on folders or on containers"
            if folders and scheduler != "local":
                with pytest.raises(AppRefusedError) as refused:
                    runner.dryrun(app, scheduler, cfg)
                assert refused.value.code == "TS603" and "-p image=" in str(refused.value.hint)
            else:
                assert app.name in str(runner.dryrun(app, scheduler, cfg))


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

