"""Typed params: declarations, conversion of given values, and precedence.

Values come from ``-p name=value`` (strings), from a values file (typed
YAML/JSON/TOML), and from the declared defaults, in that order of
precedence.  Every problem is collected, not just the first: all missing
params are reported at once, each with its help text.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from torchspec.errors import Diagnostic
from torchspec.loader.document import Document
from torchspec.errors import did_you_mean
from torchspec.loader.schema import _is_type

TYPES = ("string", "integer", "number", "boolean", "list", "map")
# Boolean spellings, the same as run options accept (specs.runopts); not imported from
# there because that would load torchspec.specs on lint's start-up path.
_TRUE_LITERALS = frozenset({"true", "1", "yes", "on"})
_FALSE_LITERALS = frozenset({"false", "0", "no", "off"})
#: param types that JSON Schema names differently
_JSON_TYPES = {"list": "array", "map": "object"}
_NO_DEFAULT = object()


@dataclass
class Param:
    name: str
    type: str
    default: Any = _NO_DEFAULT
    help: str = ""
    choices: list[Any] | None = None
    min: float | None = None
    max: float | None = None

    @property
    def required(self) -> bool:
        return self.default is _NO_DEFAULT

    def usage(self) -> str:
        """``-p nnodes=<integer>  number of nodes``: how to pass the param, for messages."""
        text = f"-p {self.name}=<{self.type}>"
        if self.choices:
            text += f" (one of: {', '.join(str(c) for c in self.choices)})"
        return f"{text}  {self.help}".rstrip()


@dataclass
class ParamValues:
    values: dict[str, Any] = field(default_factory=dict)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    placeholders: set[str] = field(default_factory=set)  # required params lint filled in itself


class ConversionError(ValueError):
    """A value that cannot become the declared type; the message says why."""


def declarations(doc: Document) -> tuple[dict[str, Param], list[Diagnostic]]:
    """The params a (schema-valid) document declares, with their own consistency checked."""
    params: dict[str, Param] = {}
    diags: list[Diagnostic] = []
    for name, decl in (doc.data.get("params") or {}).items():
        p = Param(name, decl["type"], decl.get("default", _NO_DEFAULT), decl.get("help", ""),
                  decl.get("choices"), decl.get("min"), decl.get("max"))
        problems = []
        for bound in ("min", "max"):
            value = getattr(p, bound)
            if value is not None and not math.isfinite(value):
                problems.append(((bound,), f"{bound} must be a finite number, not {value}"))
                setattr(p, bound, None)
        if p.min is not None and p.max is not None and p.min > p.max:
            problems.append((("min",), f"min {p.min} is larger than max {p.max}"))
        for i, choice in enumerate(p.choices or []):
            try:
                p.choices[i] = check(p, choice, check_choices=False)  # type: ignore[index]
            except ConversionError as e:
                problems.append((("choices", i), f"choice {choice!r} is not a valid {p.type}: {e}"))
        if not p.required:
            try:
                p.default = check(p, p.default)
            except ConversionError as e:
                problems.append((("default",), f"default {p.default!r} does not fit the param: {e}"))
        for sub, message in problems:
            diags.append(doc.diagnostic("TS306", f"param {name!r}: {message}", ("params", name) + sub,
                                        "make default, choices, min and max agree with the declared type"))
        params[name] = p
    return params, diags


def convert(param: Param, raw: str) -> Any:
    """Convert a command-line string to the param's type, then check choices and bounds."""
    t = param.type
    text = raw.strip()
    if t == "string":
        value: Any = raw
    elif t == "integer":
        try:
            value = int(text.replace("_", ""), 10)
        except ValueError:
            raise ConversionError(f"{raw!r} is not an integer") from None
    elif t == "number":
        try:
            value = float(text)
        except ValueError:
            raise ConversionError(f"{raw!r} is not a number") from None
        if not math.isfinite(value):
            raise ConversionError(f"{raw!r} is not a finite number")
    elif t == "boolean":
        if text.lower() in _TRUE_LITERALS:  # the same spellings as run options
            value = True
        elif text.lower() in _FALSE_LITERALS:
            value = False
        else:
            raise ConversionError(f"{raw!r} is not a boolean (use true or false)")
    elif t == "list":
        value = _json_or(text, list, lambda s: [item.strip() for item in s.split(",") if item.strip()])
    else:
        value = _json_or(text, dict, _parse_map)
    return check(param, value)


def _json_or(text: str, kind: type, fallback: Any) -> Any:
    if text.startswith("[" if kind is list else "{"):
        try:
            value = json.loads(text)
        except json.JSONDecodeError as e:
            raise ConversionError(f"{text!r} is not valid JSON: {e.msg}") from None
        if not isinstance(value, kind):
            raise ConversionError(f"{text!r} is not a {'list' if kind is list else 'map'}")
        return value
    return fallback(text) if text else kind()


def _parse_map(text: str) -> dict[str, str]:
    out = {}
    for item in text.split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConversionError(f"{item.strip()!r} is not key=value (write a=1,b=2 or a JSON object)")
        out[key.strip()] = value.strip()
    return out


def check(param: Param, value: Any, check_choices: bool = True) -> Any:
    """Check a typed value (from a values file or a default) and normalise numbers."""
    t = param.type
    if not _is_type(value, _JSON_TYPES.get(t, t)):
        if isinstance(value, str) and t != "string":
            return convert(param, value)
        raise ConversionError(f"expected {t}, got {type(value).__name__} {value!r}")
    if t == "integer":
        value = int(value)
    if check_choices and param.choices is not None and value not in param.choices:
        raise ConversionError(f"{value!r} is not one of: {', '.join(str(c) for c in param.choices)}")
    if t in ("integer", "number"):
        if param.min is not None and value < param.min:
            raise ConversionError(f"{value} is below the minimum {param.min:g}")
        if param.max is not None and value > param.max:
            raise ConversionError(f"{value} is above the maximum {param.max:g}")
    return value


def placeholder(param: Param) -> Any:
    """A typed stand-in for a required param, so lint can render a spec nobody passed values for."""
    if param.choices:
        return param.choices[0]
    low = param.min if param.min is not None else 1
    return {
        "string": f"<{param.name}>",
        "integer": int(math.ceil(low)),
        "number": float(low),
        "boolean": False,
        "list": [],
        "map": {},
    }[param.type]


def resolve(
    doc: Document,
    params: dict[str, Param],
    given: dict[str, str] | None = None,
    given_file: dict[str, Any] | None = None,
    file_doc: Document | None = None,
    fill_placeholders: bool = False,
) -> ParamValues:
    """Merge CLI values, values-file values and defaults into typed values."""
    out = ParamValues()
    given = given or {}
    given_file = given_file or {}
    for name in given_file:
        if name not in params:
            out.diagnostics.append(_unknown(name, params, doc, file_doc))
    for name in given:
        if name not in params:
            out.diagnostics.append(_unknown(name, params, doc, None))
    missing = []
    for name, p in params.items():
        try:
            if name in given:
                out.values[name] = convert(p, given[name])
            elif name in given_file:
                out.values[name] = check(p, given_file[name])
            elif not p.required:
                out.values[name] = p.default
            elif fill_placeholders:
                out.values[name] = placeholder(p)
                out.placeholders.add(name)
            else:
                missing.append(p)
        except ConversionError as e:
            source = "-p" if name in given else "the params file"
            code = "TS304" if ("not one of" in str(e) or "minimum" in str(e) or "maximum" in str(e)) else "TS303"
            where = doc
            path: tuple[Any, ...] = ("params", name)
            if name not in given and file_doc is not None:
                where, path = file_doc, (name,)
            out.diagnostics.append(where.diagnostic(code, f"param {name!r} from {source}: {e}", path, p.usage()))
    for p in missing:
        out.diagnostics.append(doc.diagnostic(
            "TS302", f"missing required param {p.name!r}" + (f" ({p.help})" if p.help else ""),
            ("params", p.name), f"pass it: {p.usage()}", key=True))
    return out


def _unknown(name: str, params: dict[str, Param], doc: Document, file_doc: Document | None) -> Diagnostic:
    """An unknown param: positioned in the values file when it came from one, else at the spec's params."""
    guess = did_you_mean(name, params)
    hint = f"did you mean {guess!r}?" if guess else (
        f"declared params: {', '.join(params)}" if params else "this spec declares no params")
    if file_doc is not None:
        return file_doc.diagnostic("TS301", f"unknown param {name!r} in the params file", (name,), hint, key=True)
    d = doc.diagnostic("TS301", f"unknown param {name!r} given with -p", ("params",), hint, key=True)
    if "params" not in doc.data:
        d.line = d.column = None
        d.source_line = None
    return d


#: The key of a params file's sweep block: each param with the values to sweep it over (``submit`` runs the grid).
SWEEP_KEY = "sweep"
_SCALARS = (str, int, float, bool)


def read_sweep(raw: Any, doc: Document) -> tuple[dict[str, list[Any]] | None, list[Diagnostic]]:
    """A params file's ``sweep:`` block (a mapping of param -> a non-empty list of plain values), or TS307 at
    what is wrong with it.  ``sweep`` is reserved at a params file's top level: a param of that name is given
    with ``-p``."""
    hint = "write one list per param: sweep: {lr: [1e-4, 3e-4], batch: [32, 64]}"
    if not isinstance(raw, dict) or not raw:
        return None, [doc.diagnostic("TS307", "the params file's sweep must map params to lists of values",
                                     (SWEEP_KEY,), hint)]
    problems = []
    for name, values in raw.items():
        if not isinstance(values, list) or not values:
            problems.append(doc.diagnostic("TS307", f"sweep {name!r} must be a list of one or more values",
                                           (SWEEP_KEY, name), hint))
        elif len(set(map(repr, values))) != len(values):
            problems.append(doc.diagnostic("TS307", f"sweep {name!r} gives a value twice", (SWEEP_KEY, name),
                                           "each point once"))
        for i, value in enumerate(values if isinstance(values, list) else []):
            if not isinstance(value, _SCALARS):
                problems.append(doc.diagnostic("TS307", f"sweep {name!r}: a value must be a string, number or"
                                                        f" boolean, not {type(value).__name__}",
                                               (SWEEP_KEY, name, i), hint))
    return (None if problems else {str(k): list(v) for k, v in raw.items()}), problems


def check_sweep(sweep: dict[str, list[Any]], params: dict[str, Param], file_doc: Document,
                given: Mapping[str, str], grid_only: bool) -> list[Diagnostic]:
    """The grid's problems: a swept param the spec does not declare, a value it refuses (each at its place in
    the params file); and, unless ``grid_only`` (lint), a swept param with no point chosen by ``-p``: only
    ``submit`` runs a whole sweep."""
    out: list[Diagnostic] = []
    for name, values in sweep.items():
        if name not in params:
            guess = did_you_mean(name, params)
            out.append(file_doc.diagnostic("TS301", f"unknown param {name!r} in the params file's sweep",
                                           (SWEEP_KEY, name), f"did you mean {guess!r}?" if guess else
                                           f"declared params: {', '.join(params) or 'none'}", key=True))
            continue
        for i, value in enumerate(values):
            try:
                check(params[name], value)
            except ConversionError as e:
                code = "TS304" if ("not one of" in str(e) or "minimum" in str(e) or "maximum" in str(e)) else "TS303"
                out.append(file_doc.diagnostic(code, f"param {name!r} swept by the params file: {e}",
                                               (SWEEP_KEY, name, i), params[name].usage()))
    unchosen = [name for name in sweep if name in params and name not in given]
    if unchosen and not grid_only:
        points = " ".join(f"-p {name}={sweep_value(sweep[name][0])}" for name in unchosen)
        out.append(file_doc.diagnostic(
            "TS307", f"the params file sweeps {', '.join(map(repr, unchosen))}: `torchspec submit` submits its"
                     " grid, one app per point; this command runs one point", (SWEEP_KEY,),
            f"choose one: {points}", key=True))
    return out


def sweep_value(value: Any) -> str:
    """A swept value as ``-p`` would give it (``true``, ``0.0003``)."""
    return ("true" if value else "false") if isinstance(value, bool) else str(value)
