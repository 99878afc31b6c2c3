"""The component linter (``torchspec.specs.file_linter``), with TorchX's cases and messages.

The components checked are functions of this very file, as in TorchX's own
tests: the linter reads their syntax, so they never need to run.
"""

# flake8: noqa
from __future__ import annotations

import pathlib
from typing import Dict, List, Optional
from unittest import mock

import pytest

from torchspec.specs import AppDef
from torchspec.specs.file_linter import (LinterMessage, TorchFunctionVisitor, TorchxFunctionValidator,
                                         get_fn_docstring, validate)

PATH = str(pathlib.Path(__file__).resolve())


def _test_empty_fn() -> AppDef:
    pass


def _test_fn_return_int() -> int:
    """
    Function that returns int
    """
    return 0


def _test_fn_no_return():
    """
    Function with no return statement
    """
    pass


def _test_docstring(arg0: str, arg1: int, arg2: Dict[int, str]) -> AppDef:
    """Short Test description

    Long funct description

    Args:
        arg0: arg0 desc
        arg1: arg1 desc
    """
    pass


def _test_without_docstring(arg0: str) -> AppDef:
    pass


def _test_args_no_type_defs(arg0, arg1, arg2: Dict[int, str]) -> AppDef:
    """
    Test description

    Args:
        arg0: arg0 desc
        arg1: arg1 desc
        arg2: arg2 desc
    """
    pass


def _test_args_dict_list_complex_types(
    arg0,
    arg1,
    arg2: Dict[int, List[str]],
    arg3: List[List[str]],
    arg4: Optional[Optional[str]],
) -> AppDef:
    """
    Test description

    Args:
        arg0: arg0 desc
        arg1: arg1 desc
        arg2: arg2 desc
        arg3: arg2 desc
    """
    pass


def _test_args_complex_types(
    arg0: int,
    arg1: Dict[int, str],
    arg2: List[str],
    arg3: Optional[List[str]],
    arg4: Optional[Dict[str, str]],
    arg5: list[str],
    arg6: "dict[str, int]",
    arg7: str | None,
) -> "AppDef":
    """
    Test description
    """
    pass


def _test_invalid_fn_with_varags_and_kwargs(*args, id: int) -> AppDef:
    """
    Test description

    Args:
        args: args desc
        id: arg1 desc
    """
    pass


def _test_qualified_return() -> "specs.AppDef":  # noqa: F821 - the linter reads names, it does not resolve them
    """Test description"""
    pass


def descriptions(messages: List[LinterMessage]) -> List[str]:
    return [m.description for m in messages]


def test_a_component_that_meets_the_standard_has_no_finding() -> None:
    assert validate(PATH, "_test_docstring") == []
    assert validate(PATH, "_test_args_complex_types") == []
    assert validate(PATH, "_test_qualified_return") == []


def test_a_docstring_is_not_required_as_in_torchx() -> None:
    assert validate(PATH, "_test_empty_fn") == []
    assert validate(PATH, "_test_without_docstring") == []


def test_an_unannotated_vararg_is_one_finding() -> None:
    found = validate(PATH, "_test_invalid_fn_with_varags_and_kwargs")
    assert descriptions(found) == ["Arg args missing type annotation"]


def test_no_return_annotation() -> None:
    found = validate(PATH, "_test_fn_no_return")
    assert descriptions(found) == ["Function: _test_fn_no_return missing return annotation or has unknown"
                                   " annotations. Supported return annotation: AppDef"]


def test_a_return_annotation_other_than_appdef() -> None:
    found = validate(PATH, "_test_fn_return_int")
    assert descriptions(found) == ["Function: _test_fn_return_int has incorrect return annotation, supported"
                                   " annotation: AppDef"]
    assert found[0].severity == "error" and found[0].line > 1


def test_each_unannotated_parameter_is_a_finding_at_its_line() -> None:
    found = validate(PATH, "_test_args_no_type_defs")
    assert descriptions(found) == ["Arg arg0 missing type annotation", "Arg arg1 missing type annotation"]
    source = pathlib.Path(PATH).read_text().splitlines()
    assert "def _test_args_no_type_defs(arg0" in source[found[0].line - 1]
    assert source[found[0].line - 1][found[0].char:].startswith("arg0")


def test_nested_generics_are_refused_with_torchx_messages() -> None:
    found = validate(PATH, "_test_args_dict_list_complex_types")
    assert descriptions(found) == [
        "Arg arg0 missing type annotation",
        "Arg arg1 missing type annotation",
        "Dict can only have primitive types",
        "List can only have primitive types",
        "`_test_args_dict_list_complex_types` allows only Dict, List as complex types.Argument `arg4` has: Optional",
    ]


def test_a_function_the_file_does_not_define() -> None:
    found = validate(PATH, "unknown_function")
    assert descriptions(found) == ["Function unknown_function not found"]
    assert (found[0].line, found[0].char) == (0, 0)


def test_a_syntax_error_is_one_finding_with_its_position() -> None:
    with mock.patch("torchspec.specs.file_linter.read_conf_file", return_value="!!foo====bar"):
        found = validate(PATH, "unknown_function")
    assert descriptions(found) == ["invalid syntax"]
    assert found[0].line == 1


def test_the_file_is_never_imported(tmp_path: pathlib.Path) -> None:
    marker = tmp_path / "ran"
    component = tmp_path / "comp.py"
    component.write_text(f"open({str(marker)!r}, 'w').close()\n\n\ndef trainer(x: int) -> AppDef:\n    ...\n")
    assert validate(str(component), "trainer") == []
    assert not marker.exists()


def test_custom_validators_replace_the_standard_ones() -> None:
    class NameValidator(TorchxFunctionValidator):
        def validate(self, app_specs_func_def):  # type: ignore[no-untyped-def]
            return [self._gen_linter_message(f"saw {app_specs_func_def.name}", app_specs_func_def.lineno)]

    assert descriptions(validate(PATH, "_test_fn_return_int", [NameValidator()])) == ["saw _test_fn_return_int"]
    visitor = TorchFunctionVisitor("_test_fn_return_int")
    assert len(visitor.validators) == 2


def test_get_fn_docstring_reads_the_short_description_and_args() -> None:
    description, args = get_fn_docstring(_test_docstring)
    assert description == "Short Test description"
    assert args == {"arg0": "arg0 desc", "arg1": "arg1 desc", "arg2": " "}


def test_get_fn_docstring_without_docstring_says_how_to_add_one() -> None:
    description, args = get_fn_docstring(_test_without_docstring)
    assert description.startswith("_test_without_docstring TIP: improve this help string by adding a docstring")
    assert args == {"arg0": " "}
