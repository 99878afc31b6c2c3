"""The component linter, as ``torchx.specs.file_linter``: checks a Python component without running it.

A component (``FILE.py:FUNCTION``) is code, and a pull request may bring
one: importing its file would run whatever it holds.  So this linter reads
the file's syntax tree only (:func:`ast.parse`) and checks the function
against TorchX's component standard, with TorchX's messages:

1. every parameter (``*args`` and keyword-only ones included) is annotated;
2. an annotation is a plain name (``str``, ``int``...), ``Optional[X]`` of
   one, or ``List``/``Dict`` of plain names (``list``/``dict``, ``X | None``
   and quoted annotations read the same way);
3. the return annotation is ``AppDef`` (``specs.AppDef`` or ``"AppDef"``).

A docstring is not required, as in TorchX since 0.2: :func:`get_fn_docstring`
gives a component without one a help text that says how to add one.
``torchspec lint FILE.py:FUNCTION`` runs this check (TS511).
"""

from __future__ import annotations

import abc
import ast
import inspect
import re
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

__all__ = ["LinterMessage", "TorchFunctionVisitor", "TorchxFunctionArgsValidator", "TorchxFunctionValidator",
           "TorchxReturnValidator", "get_fn_docstring", "parse_docstring", "read_conf_file", "validate"]

#: The only return annotation a component may have.
SUPPORTED_RETURN = "AppDef"

#: The generic types a parameter may use, and what each is called in messages (TorchX's names).
_COMPLEX = {"List": "List", "list": "List", "Dict": "Dict", "dict": "Dict"}

#: What :func:`get_fn_docstring` says of a component with no docstring (after its name), as TorchX does.
_NO_DOCSTRING = ("TIP: improve this help string by adding a docstring\nto your component (see:"
                 " https://pytorch.org/torchx/latest/component_best_practices.html)")

_Arg = ast.arg
_Function = ast.FunctionDef


@dataclass
class LinterMessage:
    """One finding: ``line`` is 1-based (0: the file as a whole), ``char`` the 0-based column."""

    name: str
    description: str
    line: int
    char: int
    severity: str = "error"


class TorchxFunctionValidator(abc.ABC):
    """One rule of the component standard, applied to the function's syntax tree."""

    @abc.abstractmethod
    def validate(self, app_specs_func_def: _Function) -> List[LinterMessage]:
        """The rule's findings in the function (empty: it complies)."""

    def _gen_linter_message(self, description: str, lineno: int, char: int = 0) -> LinterMessage:
        return LinterMessage(name="TorchxFunctionValidator", description=description, line=lineno, char=char,
                             severity="error")


def _name_of(node: ast.expr) -> Optional[str]:
    """``List`` for ``List``, ``typing.List`` and ``t.List``; None for anything that is not a name."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _unquoted(node: ast.expr) -> ast.expr:
    """A quoted annotation (``"List[str]"``, from ``from __future__`` habits) read as the expression it holds."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            return ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return node
    return node


def _optional_of(node: ast.expr) -> Optional[ast.expr]:
    """``X`` for ``Optional[X]``, ``X | None`` and ``None | X``; None where ``node`` is none of these."""
    if isinstance(node, ast.Subscript) and _name_of(node.value) == "Optional":
        return _unquoted(node.slice)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        for this, other in ((node.left, node.right), (node.right, node.left)):
            if isinstance(other, ast.Constant) and other.value is None:
                return _unquoted(this)
    return None


class TorchxFunctionArgsValidator(TorchxFunctionValidator):
    """Rules 1 and 2: each parameter is annotated, with a type a command line can carry."""

    def validate(self, app_specs_func_def: _Function) -> List[LinterMessage]:
        args = app_specs_func_def.args
        found: List[LinterMessage] = []
        for arg_def in [*args.posonlyargs, *args.args, *([args.vararg] if args.vararg else []), *args.kwonlyargs]:
            found += self._validate_arg_def(app_specs_func_def.name, arg_def)
        return found

    def _validate_arg_def(self, function_name: str, arg_def: _Arg) -> List[LinterMessage]:
        if arg_def.annotation is None:
            return [self._gen_linter_message(f"Arg {arg_def.arg} missing type annotation", arg_def.lineno,
                                             arg_def.col_offset)]
        annotation = _unquoted(arg_def.annotation)
        if _name_of(annotation) is not None:
            return []
        inner = _optional_of(annotation)
        if inner is not None:
            if _name_of(inner) is not None:
                return []
            annotation = inner
        type_name = _name_of(annotation.value) if isinstance(annotation, ast.Subscript) else None
        if type_name not in _COMPLEX:
            shown = type_name or ast.unparse(annotation)
            return [self._gen_linter_message(
                f"`{function_name}` allows only Dict, List as complex types.Argument `{arg_def.arg}` has: {shown}",
                arg_def.lineno, arg_def.col_offset)]
        assert isinstance(annotation, ast.Subscript)
        kind = _COMPLEX[type_name]
        items = annotation.slice.elts if kind == "Dict" and isinstance(annotation.slice, ast.Tuple) else [
            annotation.slice]
        if all(_name_of(_unquoted(item)) is not None for item in items):
            return []
        return [self._gen_linter_message(f"{kind} can only have primitive types", arg_def.lineno,
                                         arg_def.col_offset)]


class TorchxReturnValidator(TorchxFunctionValidator):
    """Rule 3: the function says it returns an AppDef (``AppDef``, ``specs.AppDef`` or ``"AppDef"``)."""

    def _get_return_annotation(self, app_specs_func_def: _Function) -> Optional[str]:
        returns = app_specs_func_def.returns
        if returns is None:
            return None
        if isinstance(returns, ast.Constant):
            return str(returns.value) if isinstance(returns.value, str) else None
        return _name_of(returns)

    def validate(self, app_specs_func_def: _Function) -> List[LinterMessage]:
        annotation = self._get_return_annotation(app_specs_func_def)
        name, line = app_specs_func_def.name, app_specs_func_def.lineno
        if not annotation:
            return [self._gen_linter_message(
                f"Function: {name} missing return annotation or has unknown annotations. Supported return"
                f" annotation: {SUPPORTED_RETURN}", line)]
        if annotation.split(".")[-1] != SUPPORTED_RETURN:
            return [self._gen_linter_message(
                f"Function: {name} has incorrect return annotation, supported annotation: {SUPPORTED_RETURN}",
                line)]
        return []


class TorchFunctionVisitor(ast.NodeVisitor):
    """Finds the component function (at module level or in a class, as TorchX) and applies the validators."""

    def __init__(self, component_function_name: str,
                 validators: Optional[List[TorchxFunctionValidator]] = None) -> None:
        self.validators = validators if validators is not None else [TorchxFunctionArgsValidator(),
                                                                     TorchxReturnValidator()]
        self.linter_errors: List[LinterMessage] = []
        self.component_function_name = component_function_name
        self.visited_function = False

    def visit_FunctionDef(self, node: _Function) -> None:
        if node.name != self.component_function_name:
            return  # a function's own inner functions are not components
        self.visited_function = True
        for validator in self.validators:
            self.linter_errors += validator.validate(node)


def read_conf_file(conf_file: str) -> str:
    """The text of ``conf_file`` (a seam tests replace, as TorchX's)."""
    with open(conf_file, encoding="utf-8") as f:
        return f.read()


def validate(path: str, component_function: str,
             validators: Optional[List[TorchxFunctionValidator]] = None) -> List[LinterMessage]:
    """The findings of the component standard for ``component_function`` in the file ``path``.

    Never imports the file: a syntax error is one finding (its message,
    line and column), and a function the file does not define is one too.
    """
    source = read_conf_file(path)
    try:
        module = ast.parse(source, filename=path)
    except SyntaxError as e:
        return [LinterMessage(name="TorchXValidator", description=e.msg, line=e.lineno or 0,
                              char=e.offset or 0, severity="error")]
    visitor = TorchFunctionVisitor(component_function, validators)
    visitor.visit(module)
    found = visitor.linter_errors
    if not visitor.visited_function:
        found.append(LinterMessage(name="TorchxFunctionValidator", description=f"Function {component_function}"
                                   " not found", line=0, char=0, severity="error"))
    return found


def defined_functions(path: str) -> List[str]:
    """The names of the functions ``path`` defines at module level, read from its syntax tree (for a
    did-you-mean); empty where it does not parse."""
    try:
        module = ast.parse(read_conf_file(path), filename=path)
    except SyntaxError:
        return []
    return [node.name for node in module.body if isinstance(node, ast.FunctionDef)]


def parse_docstring(fn: Callable[..., Any]) -> Tuple[str, Dict[str, str]]:
    """The docstring's description (the text before its sections) and each argument's help, from a
    Google-style ``Args:`` section (``name: text`` or ``name (type): text``, continued on deeper lines)."""
    doc = inspect.getdoc(fn) or ""
    description: List[str] = []
    helps: Dict[str, str] = {}
    section, current, indent = "", "", 0
    for line in doc.splitlines():
        stripped = line.strip()
        header = re.match(r"^(Args|Arguments|Parameters|Returns|Raises|Yields|Examples?|Notes?):\s*$", stripped)
        if header and not line.startswith(" "):
            section, current = header.group(1), ""
            continue
        if not section:
            description.append(stripped)
        elif section in ("Args", "Arguments", "Parameters") and stripped:
            item = re.match(r"^\*{0,2}(\w+)\s*(\([^)]*\))?\s*:\s*(.*)$", stripped)
            depth = len(line) - len(line.lstrip())
            if item and (not current or depth <= indent):
                current, indent = item.group(1), depth
                helps[current] = item.group(3)
            elif current:
                helps[current] = f"{helps[current]} {stripped}".strip()
    return " ".join(" ".join(description).split()), helps


def get_fn_docstring(fn: Callable[..., Any]) -> Tuple[str, Dict[str, str]]:
    """The function's short description (its docstring's first line) and each parameter's help.

    A parameter the docstring does not describe gets ``" "``; a function with
    no description gets TorchX's hint to add one, so help output is never empty.
    """
    helps = {name: " " for name in inspect.signature(fn).parameters}
    description, described = parse_docstring(fn)
    helps.update(described)
    if not description:
        return f"{fn.__name__} {_NO_DOCSTRING}", helps
    return (inspect.getdoc(fn) or "").strip().split("\n", 1)[0].strip(), helps
