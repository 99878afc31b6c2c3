"""``lint FILE.py:FUNCTION``: TS511 from the component's syntax tree, at its line and column, never running it."""

from __future__ import annotations

import pathlib
import textwrap

import pytest

from torchspec.errors import UsageError
from torchspec.lint import LintOptions, lint_paths

SOURCE = textwrap.dedent('''\
    from typing import Dict, List

    import torchspec.specs as specs

    open(MARKER, "w").close()


    def trainer(lr, tags: Dict[str, List[str]], name: str = "t") -> specs.AppDef:
        return specs.AppDef(name=name, roles=[specs.Role(name="t", image=".", entrypoint="echo", args=[str(lr)])])


    def good(lr: float) -> specs.AppDef:
        """One role that echoes lr."""
        return specs.AppDef(name="good", roles=[specs.Role(name="t", image=".", entrypoint="echo", args=[str(lr)])])
''')


@pytest.fixture
def component(tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / "comp.py"
    path.write_text(SOURCE.replace("MARKER", repr(str(tmp_path / "ran"))))
    return path


def test_each_finding_is_a_ts511_at_the_parameter(component: pathlib.Path) -> None:
    result = lint_paths([f"{component}:trainer"])
    found = [(d.code, d.message, d.line, d.column) for d in result.diagnostics]
    assert found == [("TS511", "Arg lr missing type annotation", 8, 13),
                     ("TS511", "Dict can only have primitive types", 8, 17)]
    assert result.diagnostics[0].file == str(component)
    assert result.diagnostics[0].source_line is not None and "def trainer(lr" in result.diagnostics[0].source_line
    assert result.files == [str(component)]
    assert not (component.parent / "ran").exists()


def test_a_function_the_file_lacks_gets_a_did_you_mean(component: pathlib.Path) -> None:
    (found,) = lint_paths([f"{component}:trainr"]).diagnostics
    assert (found.code, found.message, found.hint) == ("TS511", "Function trainr not found", "did you mean 'trainer'?")
    (other,) = lint_paths([f"{component}:zzz"]).diagnostics
    assert other.hint == "its functions: trainer, good"


def test_a_syntax_error_is_a_finding_at_its_line(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "broken.py"
    path.write_text("def trainer(x: int) -> AppDef:\n    return (\n")
    (found,) = lint_paths([f"{path}:trainer"]).diagnostics
    assert found.code == "TS511" and found.line == 2


def test_a_missing_file_is_a_usage_error(tmp_path: pathlib.Path) -> None:
    with pytest.raises(UsageError, match="no such file"):
        lint_paths([f"{tmp_path}/nothing.py:trainer"])


def test_allowed_components_run_only_once_they_meet_the_standard(component: pathlib.Path) -> None:
    allowed = LintOptions(allow_python_components=True, params={"lr": "0.1"})
    bad = lint_paths([f"{component}:trainer"], allowed)
    assert [d.code for d in bad.diagnostics] == ["TS511", "TS511"]
    assert not (component.parent / "ran").exists()
    good = lint_paths([f"{component}:good"], allowed)
    assert good.diagnostics == [] and (component.parent / "ran").exists()
