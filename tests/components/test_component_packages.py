"""Components offered by installed packages (the ``torchspec.components`` entry-point group), as TorchX's
``torchx.components``: functions and spec files of a module, one function by name, before the built-ins,
and clashes named."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap
from typing import Dict

import pytest

from torchspec.components.python import ComponentError
from torchspec.errors import UsageError
from torchspec.runner import get_runner

MODULE = textwrap.dedent('''\
    import torchspec.specs as specs


    def trainer(msg: str, replicas: int = 1) -> specs.AppDef:
        """Say something.

        Args:
            msg: what to say
        """
        return specs.AppDef("acme", [specs.Role("acme", image=".", entrypoint="echo", args=[msg],
                                                num_replicas=replicas)])


    def echo(msg: str = "clash") -> specs.AppDef:
        return specs.AppDef("clash", [specs.Role("clash", image=".", entrypoint="echo", args=[msg])])
    ''')

SPEC = textwrap.dedent('''\
    name: packaged
    params:
      who: {type: string, default: world}
    roles:
      - name: hello
        image: .
        entrypoint: echo
        args: ["hello {{ who }}"]
    ''')


def install(site: pathlib.Path, dist: str, entry_points: str) -> None:
    info = site / f"{dist.replace('-', '_')}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[torchspec.components]\n{entry_points}")


@pytest.fixture
def site(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    """A folder on sys.path holding the package acme_ml (a module of functions and a spec file beside it),
    installed with the entry points ``acme`` (the module) and ``train`` (one function)."""
    folder = tmp_path / "site"
    package = folder / "acme_ml" / "components"
    (package / "sub").mkdir(parents=True)
    (folder / "acme_ml" / "__init__.py").write_text("")
    (package / "__init__.py").write_text(MODULE)
    (package / "sub" / "hello.yaml").write_text(SPEC)
    install(folder, "acme-ml", "acme = acme_ml.components\ntrain = acme_ml.components:trainer\n")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("TORCHSPEC_HOME", str(tmp_path / "home"))
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.chdir(tmp_path)
    return folder


def test_a_packages_function_and_spec_file_run_by_name(site: pathlib.Path) -> None:
    runner = get_runner()
    app = runner.load_component("acme.trainer", ["--msg", "hi", "--replicas", "2"])
    assert (app.name, app.roles[0].args, app.roles[0].num_replicas) == ("acme", ["hi"], 2)
    assert runner.load_component("train", {"msg": "one"}).roles[0].args == ["one"]
    assert runner.load_component("acme.sub.hello", {"who": "acme"}).roles[0].args == ["hello acme"]
    assert "what to say" in (runner.component_help("acme.trainer") or "")


def test_a_name_a_builtin_has_too_is_an_error_naming_both(site: pathlib.Path) -> None:
    install(site, "clashing", "utils = acme_ml.components\n")  # utils.echo: the built-in's name
    with pytest.raises(UsageError) as e:
        get_runner().load_component("utils.echo", {})
    assert "both a built-in and utils = acme_ml.components (package clashing)" in str(e.value)


def test_two_packages_offering_one_name_is_an_error_naming_both(site: pathlib.Path) -> None:
    install(site, "other", "train = acme_ml.components:echo\n")
    with pytest.raises(UsageError, match=r"offered twice: by train = acme_ml.components:\w+ \(package [\w-]+\) and"
                                         r" by train = acme_ml.components:\w+"):
        get_runner().load_component("train", {})


def test_a_package_that_does_not_import_is_one_clear_error(site: pathlib.Path) -> None:
    install(site, "broken", "bad = acme_ml.missing_module\n")
    with pytest.raises(ComponentError, match=r"entry point bad = acme_ml.missing_module does not load"):
        get_runner().load_component("bad.anything", {})


def test_the_cli_runs_a_packages_component(site: pathlib.Path, tmp_path: pathlib.Path) -> None:
    env: Dict[str, str] = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), *sys.path])}
    done = subprocess.run([sys.executable, "-m", "torchspec", "dryrun", "-s", "local", "acme.trainer", "--msg",
                           "from a package"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "echo 'from a package'" in done.stdout or "echo from a package" in done.stdout, done.stdout
    helped = subprocess.run([sys.executable, "-m", "torchspec", "submit", "acme.trainer", "--help"],
                            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert helped.returncode == 0 and "what to say" in helped.stdout, helped
