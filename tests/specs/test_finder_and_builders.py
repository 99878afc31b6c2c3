"""TorchX's ``specs.finder`` and ``specs.builders``, and ``Runner.build_standalone_workspace``."""

from __future__ import annotations

import pathlib
import textwrap
from dataclasses import dataclass

import pytest

from torchspec.runner import Runner
from torchspec.specs import AppDef
from torchspec.specs.builders import materialize_appdef
from torchspec.specs.finder import (ComponentNotFoundException, ComponentValidationException, get_builtin_source,
                                    get_component, get_components)
from torchspec.workspace import PkgInfo, WorkspaceBuilder

COMPONENT = textwrap.dedent('''\
    from typing import List

    import torchspec.specs as specs


    def echo(msg: str, *extra: str, replicas: int = 1) -> specs.AppDef:
        """Echo a message.

        Args:
            msg: what to say
            replicas: how many say it
        """
        return specs.AppDef(name="echo", roles=[specs.Role(name="echo", image=".", entrypoint="echo",
                                                           args=[msg, *extra], num_replicas=replicas)])


    def broken(lr, layers: List[List[int]]) -> specs.AppDef:
        return specs.AppDef(name="x")
''')


@pytest.fixture
def comp(tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / "comp.py"
    path.write_text(COMPONENT)
    return path


def test_materialize_appdef_parses_the_command_line_from_the_signature(comp: pathlib.Path) -> None:
    fn = get_component(f"{comp}:echo").fn
    app = materialize_appdef(fn, ["--msg", "hi", "--replicas", "2", "--", "a", "b"])
    assert isinstance(app, AppDef) and app.roles[0].args == ["hi", "a", "b"] and app.roles[0].num_replicas == 2
    assert materialize_appdef(fn, ["--replicas", "3"], {"msg": "from defaults"}).roles[0].args == ["from defaults"]


def test_a_python_component_has_its_description_and_function(comp: pathlib.Path) -> None:
    found = get_component(f"{comp}:echo")
    assert (found.description, found.fn_name, found.validation_errors) == ("Echo a message.", "echo", [])
    assert found.fn("x").roles[0].args == ["x"]


def test_a_component_the_linter_finds_fault_with_is_refused_before_it_runs(comp: pathlib.Path) -> None:
    with pytest.raises(ComponentValidationException) as caught:
        get_component(f"{comp}:broken")
    assert "Arg lr missing type annotation" in str(caught.value)
    assert "List can only have primitive types" in str(caught.value)


def test_a_built_in_renders_with_its_params_as_keyword_arguments() -> None:
    found = get_component("utils.echo")
    assert found.description and found.fn_name == "echo"
    app = found.fn(msg="hello there")
    assert isinstance(app, AppDef) and "hello there" in " ".join(app.roles[0].args)
    assert "dist.ddp" in get_components() and "utils.echo" in get_components()
    assert "roles:" in get_builtin_source("utils.echo")


def test_an_unknown_component_is_not_found_with_a_did_you_mean() -> None:
    with pytest.raises(ComponentNotFoundException) as caught:
        get_component("utils.ecoh")
    assert "utils.echo" in str(caught.value)


def test_build_standalone_workspace_returns_what_the_builder_built() -> None:
    @dataclass
    class Folder(WorkspaceBuilder[str, str]):
        def build_workspace(self, sync: bool = True) -> PkgInfo[str]:
            return PkgInfo(img=f"built-from-{self.cfg}", lazy_overrides={"sync": sync}, metadata="meta")

    with Runner("s", {}) as runner:
        built = runner.build_standalone_workspace(Folder(cfg="ws"), sync=False)
    assert (built.img, built.lazy_overrides, built.metadata) == ("built-from-ws", {"sync": False}, "meta")
    with pytest.raises(TypeError):
        WorkspaceBuilder(cfg="x")  # type: ignore[abstract]
