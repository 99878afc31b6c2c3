"""File-based Python components, as TorchX runs them: ``path/to/file.py:function``.

A TorchX user's component is a function whose signature is its command
line: each parameter becomes ``--name`` (``-n`` too when the name is one
letter), its annotation the type (str, int, float, bool, ``List[...]``,
``Dict[...]``, ``Optional[...]``), its default the default (none: required),
the docstring's ``Args:`` the help, and a ``*args`` parameter takes what
follows ``--``.  Lists are ``a,b,c``, maps ``k1=v1,k2=v2`` (a value may hold
commas: ``A=1,2,B=3`` is ``{"A": "1,2", "B": "3"}``), booleans ``True`` or
``False``.  The function returns an AppDef, of :mod:`torchspec.specs` or, with
TorchX installed, of ``torchx.specs`` (converted field by field).

Such a component is code: importing its file runs it.  So only the
commands that run what the user names load one (``submit``, ``dryrun``,
``run`` and the Runner's ``*_component`` methods); the linter, ``diff``,
``apply`` and the language server refuse them (:func:`refuse_python`).
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import hashlib
import importlib.util
import inspect
import os
import re
import sys
import traceback
import typing
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from torchspec.components import PYTHON_COMPONENT as _REF
from torchspec.components import is_python_component, refuse_python  # noqa: F401 - part of this API
from torchspec.errors import ComponentError, UsageError, did_you_mean
from torchspec.specs.file_linter import parse_docstring

_PRIMITIVES = (int, str, float)


def load_function(ref: str) -> Callable[..., Any]:
    """The function ``ref`` names, its file imported under a name of its own (not on ``sys.modules``' common
    names, so two files called ``components.py`` never clash)."""
    match = _REF.match(ref)
    if match is None:
        raise UsageError(f"{ref!r} is not a Python component", "write path/to/file.py:function")
    path = os.path.abspath(os.path.expanduser(match.group("path")))
    if not os.path.isfile(path):
        raise UsageError(f"component {ref}: no such file: {path}",
                         "a Python component is FILE.py:FUNCTION, the path relative to this folder or absolute")
    module_name = "torchspec_component_" + hashlib.sha1(path.encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses and typing look the module up while it runs
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # noqa: BLE001 - the user's code: any error is theirs, said with its line
        sys.modules.pop(module_name, None)
        raise ComponentError(f"component {ref}: importing {path} failed{_where(e, path)}: {type(e).__name__}: {e}",
                             "fix the file; TORCHSPEC_DEBUG=1 shows the traceback") from e
    name = match.group("function")
    fn = getattr(module, name, None)
    if not callable(fn):
        functions = [n for n, f in vars(module).items()
                     if inspect.isfunction(f) and f.__module__ == module_name and not n.startswith("_")]
        guess = did_you_mean(name, functions)
        raise UsageError(f"component {ref}: {os.path.basename(path)} has no function {name!r}",
                         f"did you mean {guess!r}?" if guess else
                         (f"its functions: {', '.join(functions)}" if functions else "it defines no function"))
    return fn


def _where(e: BaseException, path: str) -> str:
    """`` at line N`` of the deepest frame of ``path`` in ``e``'s traceback (or of a SyntaxError), else ``""``."""
    if isinstance(e, SyntaxError) and e.lineno:
        return f" at line {e.lineno}"
    lines = [frame.lineno for frame in traceback.extract_tb(e.__traceback__) if frame.filename == path]
    return f" at line {lines[-1]}" if lines else ""


# ---------------------------------------------------------------------------
# The signature as a command line
# ---------------------------------------------------------------------------


def unwrap_optional(annotation: Any) -> Any:
    """``Optional[X]`` -> ``X``; anything else as it is."""
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is typing.Union and len(args) == 2 and type(None) in args:
        return args[0] if args[1] is type(None) else args[1]
    return annotation


def _supported(annotation: Any) -> bool:
    annotation = unwrap_optional(annotation)
    if annotation in (*_PRIMITIVES, bool):
        return True
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is list:
        return len(args) == 1 and unwrap_optional(args[0]) in (*_PRIMITIVES, bool)
    if origin is dict:
        return len(args) == 2 and all(unwrap_optional(a) in (*_PRIMITIVES, bool) for a in args)
    return False


def parameters(ref: str, fn: Callable[..., Any]) -> List[inspect.Parameter]:
    """The function's parameters with their annotations resolved, each checked as TorchX's component
    linter checks it."""
    try:
        hints = typing.get_type_hints(fn)
    except Exception as e:  # noqa: BLE001 - a name in an annotation that does not resolve
        raise ComponentError(f"component {ref}: its annotations do not resolve: {e}") from e
    out = []
    for p in inspect.signature(fn).parameters.values():
        if p.kind == inspect.Parameter.VAR_KEYWORD:
            raise ComponentError(f"component {ref}: parameter **{p.name}: a component takes no **kwargs",
                                 "name each argument (they become its --options)")
        annotation = hints.get(p.name, inspect.Parameter.empty)
        if annotation is inspect.Parameter.empty:
            raise ComponentError(f"component {ref}: parameter {p.name!r} has no type annotation",
                                 "annotate it: str, int, float, bool, List[...], Dict[..., ...] or Optional[...]")
        if p.kind == inspect.Parameter.VAR_POSITIONAL:
            annotation = List[annotation]  # type: ignore[valid-type]
        if not _supported(annotation):
            raise ComponentError(f"component {ref}: parameter {p.name!r}: type {annotation} is not supported",
                                 "use str, int, float, bool, List[...], Dict[..., ...] or Optional[...]")
        out.append(p.replace(annotation=annotation))
    return out


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so a bad argument is one clear error."""

    def error(self, message: str) -> typing.NoReturn:
        raise UsageError(f"component {self.prog.split()[-1]}: {message}",
                         f"`{self.prog} --help` lists its arguments")


def component_parser(ref: str, fn: Callable[..., Any], defaults: Optional[Mapping[str, str]] = None
                     ) -> argparse.ArgumentParser:
    """The component's command line, built from its signature and docstring the way TorchX builds it
    (config defaults win over the signature's)."""
    description, helps = parse_docstring(fn)
    parser = _Parser(prog=f"torchspec submit {ref}", description=description or None, add_help=False,
                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    for p in parameters(ref, fn):
        base = unwrap_optional(p.annotation)
        options: Dict[str, Any] = {"help": helps.get(p.name, " "), "type": base if base in _PRIMITIVES else str}
        if p.default is not inspect.Parameter.empty:
            options["default"] = str(p.default) if isinstance(p.default, bool) else p.default
        if defaults and p.name in defaults:
            options["default"] = defaults[p.name]
        if p.kind == inspect.Parameter.VAR_POSITIONAL:
            parser.add_argument(p.name, nargs=argparse.REMAINDER, **options)
            continue
        if "default" not in options:
            options["required"] = True
        names = ([f"-{p.name}"] if len(p.name) == 1 else []) + [f"--{p.name}"]
        parser.add_argument(*names, **options)
    return parser


def component_help(ref: str, defaults: Optional[Mapping[str, str]] = None,
                   fn: Optional[Callable[..., Any]] = None) -> str:
    """What ``torchspec submit FILE.py:FUNCTION --help`` prints: the component's own arguments (``fn``: the
    function, where it is not ``ref``'s file's, e.g. a package's)."""
    return component_parser(ref, fn or load_function(ref), defaults).format_help()


def decode(value: Any, annotation: Any) -> Any:
    """A parsed argument as the parameter's type: TorchX's rules (bool: ``True`` case-insensitively; lists
    and maps from their text; primitives as argparse converted them)."""
    annotation = unwrap_optional(annotation)
    if value is None:
        return None
    if annotation is bool:
        return value if isinstance(value, bool) else str(value).lower() == "true"
    if annotation in _PRIMITIVES:
        return annotation(value) if isinstance(value, str) else value
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if isinstance(value, list) and origin is list:  # *args: argparse's list of words
        return [decode(item, args[0]) for item in value]
    if not isinstance(value, str):
        return value
    if origin is list:
        return [decode(item, args[0]) for item in value.split(",") if item != ""] if value else []
    if origin is dict:
        return {decode(k, args[0]): decode(v, args[1]) for k, v in _pairs(value)}
    return value


def _pairs(text: str) -> List[Tuple[str, str]]:
    """``k1=v1,k2=v2`` as pairs, a value keeping its commas up to the next ``key=`` (TorchX's ``to_dict``)."""
    out: List[Tuple[str, str]] = []
    for part in re.split(r",(?=[^,=]+=)", text) if text else []:
        key, sep, value = part.partition("=")
        if not sep:
            raise UsageError(f"{text!r} is not a map", "write key1=value1,key2=value2")
        out.append((key, value))
    return out


# ---------------------------------------------------------------------------
# Calling it
# ---------------------------------------------------------------------------


def as_argv(component_args: Any) -> List[str]:
    """The component's arguments as a command line: a list as it is, a mapping as ``--name value``."""
    if component_args is None:
        return []
    if isinstance(component_args, Mapping):
        argv: List[str] = []
        for name, value in component_args.items():
            if name == "args" and isinstance(value, (list, tuple)):
                argv += ["--", *map(str, value)]
                continue
            if isinstance(value, (list, tuple)):
                value = ",".join(map(str, value))
            elif isinstance(value, Mapping):
                value = ",".join(f"{k}={v}" for k, v in value.items())
            argv += [f"--{name}", str(value)]
        return argv
    if isinstance(component_args, str):
        raise UsageError("component args must be a list of strings or a mapping, not one string",
                         f"pass [{component_args!r}]")
    return [str(a) for a in component_args]


def materialize(ref: str, component_args: Any = None, defaults: Optional[Mapping[str, str]] = None) -> Any:
    """The AppDef ``ref``'s function returns for these arguments (TorchX: ``materialize_appdef``)."""
    path = os.path.abspath(os.path.expanduser(ref.rsplit(":", 1)[0]))
    return call_component(ref, load_function(ref), component_args, defaults, path)


def call_component(name: str, fn: Callable[..., Any], component_args: Any = None,
                   defaults: Optional[Mapping[str, str]] = None, path: Optional[str] = None) -> Any:
    """The AppDef the component function ``fn`` (called ``name`` in messages; defined in the file ``path``)
    returns for these arguments, parsed from its signature as TorchX parses them."""
    return invoke(name, fn, bind(name, fn, component_args, defaults), path)


def bind(name: str, fn: Callable[..., Any], component_args: Any = None,
         defaults: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
    """Each parameter's value (``*args``: a list) as the component's command line gives it."""
    parsed = component_parser(name, fn, defaults).parse_args(as_argv(component_args))
    values: Dict[str, Any] = {}
    for p in parameters(name, fn):
        try:
            value = decode(getattr(parsed, p.name), p.annotation)
        except ValueError as e:
            raise UsageError(f"component {name}: --{p.name}: {e}", f"`torchspec submit {name} --help`") from None
        if p.kind == inspect.Parameter.VAR_POSITIONAL:
            value = value[1:] if value and value[0] == "--" else value
        values[p.name] = value
    return values


def invoke(name: str, fn: Callable[..., Any], values: Mapping[str, Any], path: Optional[str] = None) -> Any:
    """The AppDef ``fn`` returns for these parameter values (as :func:`bind` gives them)."""
    from torchspec.specs import AppDef

    positional: List[Any] = []
    keyword: Dict[str, Any] = {}
    rest: List[Any] = []
    for p in inspect.signature(fn).parameters.values():
        if p.kind == inspect.Parameter.VAR_POSITIONAL:
            rest = list(values.get(p.name) or [])
        elif p.kind == inspect.Parameter.KEYWORD_ONLY:
            keyword[p.name] = values[p.name]
        elif p.kind != inspect.Parameter.VAR_KEYWORD:
            positional.append(values[p.name])
    try:
        app = fn(*positional, *rest, **keyword)
    except Exception as e:  # noqa: BLE001 - the user's code
        where = _where(e, path or inspect.getsourcefile(fn) or "")
        raise ComponentError(f"component {name} raised an error{where}: {type(e).__name__}: {e}",
                             "TORCHSPEC_DEBUG=1 shows the traceback") from e
    if not isinstance(app, AppDef):
        app = from_torchx(app, name)
    return app


# ---------------------------------------------------------------------------
# torchx.specs objects
# ---------------------------------------------------------------------------


def from_torchx(obj: Any, ref: str) -> Any:
    """A ``torchx.specs.AppDef`` as a torchspec one: each dataclass to the torchspec class of the same name,
    field by field (those torchspec has), enums by member name."""
    if type(obj).__module__.split(".")[0] != "torchx" or type(obj).__name__ != "AppDef":
        raise ComponentError(f"component {ref} returned {type(obj).__name__}, not an AppDef",
                             "return torchspec.specs.AppDef(...) (or torchx.specs.AppDef with TorchX installed)")
    return _convert(obj)


def _convert(obj: Any) -> Any:
    import torchspec.specs as ours

    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        cls = getattr(ours, type(obj).__name__, None)
        if cls is None or not dataclasses.is_dataclass(cls):
            return obj
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{f.name: _convert(getattr(obj, f.name)) for f in dataclasses.fields(obj)
                      if f.name in names and f.init})
    if isinstance(obj, enum.Enum):
        ours_enum = getattr(ours, type(obj).__name__, None)
        return ours_enum[obj.name] if ours_enum is not None else obj.value
    if isinstance(obj, (list, tuple)):
        return type(obj)(_convert(item) for item in obj)
    if isinstance(obj, dict):
        return {k: _convert(v) for k, v in obj.items()}
    return obj


__all__: Sequence[str] = ["ComponentError", "as_argv", "bind", "call_component", "component_help", "component_parser",
                          "decode", "from_torchx", "invoke", "is_python_component", "load_function", "materialize",
                          "parameters", "parse_docstring", "refuse_python", "unwrap_optional"]
