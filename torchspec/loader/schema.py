"""The AppDef JSON Schema, and a fast validator for it that explains itself.

``schemas/appdef.schema.json`` is the published contract; editors use it as
written, where a non-string value may still be a Jinja template
(``num_replicas: "{{ nnodes }}"``).  Each such field says so as
``anyOf: [<real schema>, {"$ref": "#/$defs/template"}]``; :func:`strict_schema`
deletes those alternatives to get the schema that rendered documents must
meet.  One file, two uses, no drift.

Validation here is compiled from the schema into closures rather than done by
``jsonschema``: importing jsonschema alone costs more than twice the start-up
budget of ``torchspec lint``, and our own validator can phrase errors for
people (did-you-mean, YAML quoting hints).  It implements exactly the keywords
the schema uses and refuses any other, so the schema can never silently stop
being checked; ``tests/test_properties.py`` compares its verdicts with jsonschema's
on generated documents.
"""

from __future__ import annotations

import copy
import functools
import json
import math
import os
import re
from dataclasses import dataclass
from typing import Any, Callable

from torchspec.errors import PathPart, did_you_mean

SCHEMA_ID = "https://torchspec.dev/schemas/appdef.schema.json"
TEMPLATE_REF = {"$ref": "#/$defs/template"}

Path = tuple[PathPart, ...]


@dataclass
class SchemaIssue:
    """One way a value breaks the schema, before it is given a file position."""

    code: str
    path: Path
    message: str
    hint: str | None = None
    key: bool = False  # the issue is about the key at ``path``, not its value


Check = Callable[[Any, Path, list[SchemaIssue]], None]


@functools.lru_cache(maxsize=None)
def schema_text() -> str:
    """The schema as published (what ``torchspec schema`` prints)."""
    # a plain open, not importlib.resources: that import alone costs lint's start-up 10 ms
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "schemas", "appdef.schema.json")
    with open(path, encoding="utf-8") as f:
        return f.read()


@functools.lru_cache(maxsize=None)
def load_schema() -> dict[str, Any]:
    return json.loads(schema_text())  # type: ignore[no-any-return]


def strict_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with every template alternative removed, for rendered documents."""

    def strip(node: Any) -> Any:
        if isinstance(node, list):
            return [strip(n) for n in node]
        if not isinstance(node, dict):
            return node
        out = {k: strip(v) for k, v in node.items()}
        branches = out.get("anyOf")
        if isinstance(branches, list) and TEMPLATE_REF in branches:
            rest = [b for b in branches if b != TEMPLATE_REF]
            del out["anyOf"]
            if len(rest) == 1:
                inner = dict(rest[0])
                inner.update({k: v for k, v in out.items() if k not in inner})
                return inner
            out["anyOf"] = rest
        return out

    return strip(copy.deepcopy(schema))  # type: ignore[no-any-return]


@functools.lru_cache(maxsize=None)
def validator(strict: bool = True) -> "Validator":
    """The validator for rendered documents (``strict``) or for files as written."""
    schema = load_schema()
    return Validator(strict_schema(schema) if strict else schema)


def types_at(path: Path, strict: bool = True) -> frozenset[str]:
    """The JSON types the schema allows at ``path`` (empty when it does not say).

    Lets the renderer turn ``"{{ epochs }}"`` into the string "90" in an args
    item, where only strings are allowed, while ``num_replicas: "{{ n }}"``
    keeps its integer.
    """
    key = tuple(0 if isinstance(p, int) else p for p in path)
    return _types_at(key, strict)


@functools.lru_cache(maxsize=4096)
def _types_at(path: Path, strict: bool) -> frozenset[str]:
    found: set[str] = set()
    for node in schemas_at(path, strict):
        t = node.get("type")
        if t is not None:
            found.update(t if isinstance(t, list) else [t])
    return frozenset(found)


def schemas_at(path: Path, strict: bool = False) -> list[dict[str, Any]]:
    """Every schema node that applies to the value at ``path``: ``$ref``s followed, ``anyOf`` branches and
    ``if``/``then`` expanded.  Editors read titles, descriptions, properties and enums from them."""
    root = _root(strict)
    nodes = [root]
    for part in path:
        nodes = [child for node in _expand(root, nodes) for child in _children(node, part)]
    return _expand(root, nodes)


@functools.lru_cache(maxsize=None)
def _root(strict: bool) -> dict[str, Any]:
    return strict_schema(load_schema()) if strict else load_schema()


def _expand(root: dict[str, Any], nodes: list[Any]) -> list[dict[str, Any]]:
    """Follow $ref and the branches of anyOf/oneOf/allOf/if-then-else."""
    out: list[dict[str, Any]] = []
    todo = [n for n in nodes if isinstance(n, dict)]
    while todo:
        node = todo.pop()
        out.append(node)
        if "$ref" in node and node["$ref"].startswith("#/"):
            target: Any = root
            for part in node["$ref"][2:].split("/"):
                target = target[part]
            todo.append(target)
        for key in ("anyOf", "oneOf", "allOf"):
            todo.extend(n for n in node.get(key, []) if isinstance(n, dict))
        for key in ("then", "else"):
            if isinstance(node.get(key), dict):
                todo.append(node[key])
    return out


def _children(node: dict[str, Any], part: PathPart) -> list[Any]:
    if isinstance(part, int):
        return [node["items"]] if "items" in node else []
    if part in node.get("properties", {}):
        return [node["properties"][part]]
    extra = node.get("additionalProperties")
    return [extra] if isinstance(extra, dict) else []


# ---------------------------------------------------------------- describing values

_TYPE_NAMES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "object": "a mapping",
    "array": "a list",
    "null": "null",
}


def describe(value: Any) -> str:
    """How a value reads in an error message: ``the string 'abc'``, ``a list``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, int):
        return f"the integer {value}"
    if isinstance(value, float):
        return f"the number {value}"
    if isinstance(value, str):
        shown = value if len(value) <= 60 else value[:57] + "..."
        return f"the string {shown!r}"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__


def _is_type(value: Any, name: str) -> bool:
    if name == "string":
        return isinstance(value, str)
    if name == "integer":
        if isinstance(value, bool):
            return False
        return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value) and value.is_integer())
    if name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if name == "boolean":
        return isinstance(value, bool)
    if name == "object":
        return isinstance(value, dict)
    if name == "array":
        return isinstance(value, list)
    if name == "null":
        return value is None
    raise ValueError(f"unknown JSON type {name!r}")


def _type_hint(expected: list[str], value: Any) -> str | None:
    if "string" in expected and (value is None or isinstance(value, (bool, int, float))):
        shown = "" if value is None else str(value).lower() if isinstance(value, bool) else value
        extra = " (YAML reads yes/no/on/off as booleans)" if isinstance(value, bool) else ""
        return f'quote it to make it a string: "{shown}"{extra}'
    if "array" in expected and isinstance(value, str):
        return 'write a list: [a, b] or one "- item" per line'
    if "object" in expected and isinstance(value, list):
        return "write key: value pairs, not a list of items"
    if ("integer" in expected or "number" in expected) and isinstance(value, str):
        if "{{" in value or "{%" in value:
            return "the template rendered to text; make the value exactly one {{ expression }} to keep its type"
        return "write the number without quotes"
    return None


# ---------------------------------------------------------------- the compiled validator

_ANNOTATIONS = {"$schema", "$id", "$comment", "title", "description", "default", "examples",
                "deprecated", "readOnly", "writeOnly", "$defs", "markdownDescription"}


class Validator:
    """Validates instances against one schema, compiled once into closures."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self.root = schema
        self._refs: dict[str, Check] = {}
        self.check = self._compile(schema, "")

    def issues(self, instance: Any) -> list[SchemaIssue]:
        out: list[SchemaIssue] = []
        self.check(instance, (), out)
        return out

    def is_valid(self, instance: Any) -> bool:
        return not self.issues(instance)

    # Each _compile_* returns a closure; the closures only append issues.
    def _compile(self, schema: Any, where: str) -> Check:
        if schema is True or schema == {}:
            return lambda v, p, o: None
        if schema is False:
            return lambda v, p, o: o.append(SchemaIssue("TS202", p, "no value is allowed here", key=True))
        if not isinstance(schema, dict):
            raise ValueError(f"{where}: a schema must be an object or a boolean")
        unknown = set(schema) - _ANNOTATIONS - set(_KEYWORDS)
        if unknown:
            raise ValueError(f"{where}: the validator does not implement {sorted(unknown)}")
        checks = [_KEYWORDS[k](self, schema, where) for k in _KEYWORDS if k in schema]
        checks = [c for c in checks if c is not None]
        if len(checks) == 1:
            return checks[0]

        def run_all(v: Any, p: Path, o: list[SchemaIssue]) -> None:
            for c in checks:
                c(v, p, o)

        return run_all

    def resolve(self, ref: str) -> Any:
        if not ref.startswith("#/"):
            raise ValueError(f"only local $refs are supported, not {ref!r}")
        node: Any = self.root
        for part in ref[2:].split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
        return node


def _type_predicate(names: list[str]) -> Callable[[Any], bool]:
    """A fast membership test for a list of JSON types (this runs for nearly every value)."""
    if names == ["string"]:
        return lambda v: isinstance(v, str)
    if names == ["object"]:
        return lambda v: isinstance(v, dict)
    if names == ["array"]:
        return lambda v: isinstance(v, list)
    if names == ["boolean"]:
        return lambda v: v is True or v is False
    return lambda v: any(_is_type(v, t) for t in names)


def _kw_type(v: Validator, schema: dict[str, Any], where: str) -> Check | None:
    expected = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
    fits = _type_predicate(expected)

    def check(value: Any, path: Path, out: list[SchemaIssue]) -> None:
        if not fits(value):
            names = " or ".join(_TYPE_NAMES[t] for t in expected)
            out.append(SchemaIssue("TS201", path, f"expected {names}, got {describe(value)}",
                                   _type_hint(expected, value)))

    return check


def _object_name(schema: dict[str, Any]) -> str:
    title = schema.get("title")
    return f" in {title}" if title else ""


def _kw_properties(v: Validator, schema: dict[str, Any], where: str) -> Check | None:
    props = {k: v._compile(s, f"{where}/properties/{k}") for k, s in schema["properties"].items()}

    def check(value: Any, path: Path, out: list[SchemaIssue]) -> None:
        if isinstance(value, dict):
            for key, sub in value.items():
                c = props.get(key)
                if c is not None:
                    c(sub, path + (key,), out)

    return check


def _kw_additional(v: Validator, schema: dict[str, Any], where: str) -> Check | None:
    known = list(schema.get("properties", {}))
    patterns = [re.compile(p) for p in schema.get("patternProperties", {})]
    extra = schema["additionalProperties"]
    where_name = _object_name(schema)
    if extra is False:
        def check(value: Any, path: Path, out: list[SchemaIssue]) -> None:
            if not isinstance(value, dict):
                return
            for key in value:
                if key in schema.get("properties", {}) or any(p.search(key) for p in patterns):
                    continue
                guess = did_you_mean(key, known)
                hint = f"did you mean {guess!r}?" if guess else f"allowed keys: {', '.join(known)}"
                out.append(SchemaIssue("TS202", path + (key,), f"unknown key {key!r}{where_name}", hint, key=True))
        return check
    sub = v._compile(extra, f"{where}/additionalProperties")

    def check_values(value: Any, path: Path, out: list[SchemaIssue]) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                if key in schema.get("properties", {}) or any(p.search(key) for p in patterns):
                    continue
                sub(item, path + (key,), out)

    return check_values


def _kw_pattern_properties(v: Validator, schema: dict[str, Any], where: str) -> Check | None:
    compiled = [(re.compile(p), v._compile(s, f"{where}/patternProperties/{p}"))
                for p, s in schema["patternProperties"].items()]

    def check(value: Any, path: Path, out: list[SchemaIssue]) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                for pattern, sub in compiled:
                    if pattern.search(key):
                        sub(item, path + (key,), out)

    return check


def _kw_property_names(v: Validator, schema: dict[str, Any], where: str) -> Check | None:
    sub = v._compile(schema["propertyNames"], f"{where}/propertyNames")

    def check(value: Any, path: Path, out: list[SchemaIssue]) -> None:
        if isinstance(value, dict):
            for key in value:
                found: list[SchemaIssue] = []
                sub(key, path + (key,), found)
                for issue in found:
                    out.append(SchemaIssue(issue.code, path + (key,), f"invalid key: {issue.message}",
                                           issue.hint, key=True))

    return check


def _kw_required(v: Validator, schema: dict[str, Any], where: str) -> Check | None:
    required = schema["required"]
    props = schema.get("properties", {})
    where_name = _object_name(schema)

    def check(value: Any, path: Path, out: list[SchemaIssue]) -> None:
        if isinstance(value, dict):
            for key in required:
                if key not in value:
                    desc = props.get(key, {}).get("description") if isinstance(props.get(key), dict) else None
                    out.append(SchemaIssue("TS203", path, f"missing required key {key!r}{where_name}",
                                           f"add {key}: {desc}" if desc else f"add {key}"))

    return check


def _kw_items(v: Validator, schema: dict[str, Any], where: str) -> Check | None:
    sub = v._compile(schema["items"], f"{where}/items")

    def check(value: Any, path: Path, out: list[SchemaIssue]) -> None:
        if isinstance(value, list):
            for i, item in enumerate(value):
                sub(item, path + (i,), out)

    return check


def _kw_enum(v: Validator, schema: dict[str, Any], where: str) -> Check | None:
    allowed = schema["enum"]

    def same(a: Any, b: Any) -> bool:
        return type(a) is type(b) and a == b or (_is_type(a, "number") and _is_type(b, "number") and a == b)

    def check(value: Any, path: Path, out: list[SchemaIssue]) -> None:
        if not any(same(value, a) for a in allowed):
            choices = ", ".join(str(a) for a in allowed)
            guess = did_you_mean(str(value), allowed) if isinstance(value, str) else None
            out.append(SchemaIssue("TS204", path, f"{describe(value)} is not one of: {choices}",
                                   f"did you mean {guess!r}?" if guess else None))

    return check


def _kw_const(v: Validator, schema: dict[str, Any], where: str) -> Check | None:
    return _kw_enum(v, {"enum": [schema["const"]]}, where)


def _bound(keyword: str, test: Callable[[float, float], bool], words: str) -> Callable[..., Check | None]:
    def compile_bound(v: Validator, schema: dict[str, Any], where: str) -> Check | None:
        limit = schema[keyword]

        def check(value: Any, path: Path, out: list[SchemaIssue]) -> None:
            if _is_type(value, "number") and not test(value, limit):
                out.append(SchemaIssue("TS205", path, f"{value} is {words} {limit}"))

        return check

    return compile_bound


def _length(keyword: str, measure: Callable[[Any], int | None], fail: Callable[[int, int], bool],
            words: Callable[[int], str]) -> Callable[..., Check | None]:
    def compile_length(v: Validator, schema: dict[str, Any], where: str) -> Check | None:
        limit = schema[keyword]

        def check(value: Any, path: Path, out: list[SchemaIssue]) -> None:
            size = measure(value)
            if size is not None and fail(size, limit):
                out.append(SchemaIssue("TS205", path, words(limit)))

        return check

    return compile_length


def _str_len(value: Any) -> int | None:
    return len(value) if isinstance(value, str) else None


def _list_len(value: Any) -> int | None:
    return len(value) if isinstance(value, list) else None


def _kw_pattern(v: Validator, schema: dict[str, Any], where: str) -> Check | None:
    pattern = re.compile(schema["pattern"])
    desc = schema.get("description")

    def check(value: Any, path: Path, out: list[SchemaIssue]) -> None:
        if isinstance(value, str) and not pattern.search(value):
            out.append(SchemaIssue("TS206", path, f"{describe(value)} does not match the pattern {pattern.pattern}",
                                   desc))

    return check


def _kw_unique(v: Validator, schema: dict[str, Any], where: str) -> Check | None:
    if not schema["uniqueItems"]:
        return None

    def check(value: Any, path: Path, out: list[SchemaIssue]) -> None:
        if isinstance(value, list):
            seen: list[str] = []
            for i, item in enumerate(value):
                key = json.dumps(item, sort_keys=True)
                if key in seen:
                    out.append(SchemaIssue("TS206", path + (i,), f"{describe(item)} is listed twice"))
                seen.append(key)

    return check


def _kw_ref(v: Validator, schema: dict[str, Any], where: str) -> Check | None:
    ref = schema["$ref"]
    cache = v._refs

    def check(value: Any, path: Path, out: list[SchemaIssue]) -> None:
        compiled = cache.get(ref)
        if compiled is None:  # compiled on first use, so recursive schemas work
            compiled = cache[ref] = v._compile(v.resolve(ref), ref)
        compiled(value, path, out)

    return check


def _kw_all_of(v: Validator, schema: dict[str, Any], where: str) -> Check | None:
    subs = [v._compile(s, f"{where}/allOf/{i}") for i, s in enumerate(schema["allOf"])]

    def check(value: Any, path: Path, out: list[SchemaIssue]) -> None:
        for sub in subs:
            sub(value, path, out)

    return check


def _branch_types(v: Validator, schema: Any) -> list[str]:
    """The JSON types a branch of anyOf/oneOf accepts, for 'expected A or B' messages."""
    if isinstance(schema, dict) and "$ref" in schema:
        return _branch_types(v, v.resolve(schema["$ref"]))
    if isinstance(schema, dict) and "type" in schema:
        t = schema["type"]
        return list(t) if isinstance(t, list) else [t]
    if isinstance(schema, dict) and "anyOf" in schema:
        return [t for b in schema["anyOf"] for t in _branch_types(v, b)]
    return []


def _kw_any_of(v: Validator, schema: dict[str, Any], where: str, exactly_one: bool = False) -> Check | None:
    key = "oneOf" if exactly_one else "anyOf"
    raw = schema[key]
    subs = [v._compile(s, f"{where}/{key}/{i}") for i, s in enumerate(raw)]
    is_template = [b == TEMPLATE_REF for b in raw]
    types = [_branch_types(v, b) for b in raw]

    def check(value: Any, path: Path, out: list[SchemaIssue]) -> None:
        results = []
        for sub in subs:
            found: list[SchemaIssue] = []
            sub(value, path, found)
            if not found and not exactly_one:
                return  # anyOf: the first branch that fits settles it
            results.append(found)
        passed = sum(1 for r in results if not r)
        if passed == 1 or (passed > 1 and not exactly_one):
            return
        if passed > 1:
            out.append(SchemaIssue("TS206", path, f"{describe(value)} matches more than one of the allowed forms"))
            return
        # Report the branch whose type fits (its deeper problems are the real ones);
        # a template alternative only explains itself when the value looks like a template.
        for r, tmpl, tps in zip(results, is_template, types):
            if tmpl and not (isinstance(value, str) and ("{{" in value or "{%" in value)):
                continue
            if tps and any(_is_type(value, t) for t in tps):
                out.extend(r)
                return
        expected = [t for tps, tmpl in zip(types, is_template) if not tmpl for t in tps]
        expected = list(dict.fromkeys(expected))
        if expected:
            names = " or ".join(_TYPE_NAMES[t] for t in expected)
            hint = _type_hint(expected, value)
            if any(is_template):
                hint = (hint + "; " if hint else "") + 'or a Jinja template such as "{{ param }}"'
            out.append(SchemaIssue("TS201", path, f"expected {names}, got {describe(value)}", hint))
        else:
            out.extend(next(r for r, tmpl in zip(results, is_template) if not tmpl))

    return check


def _kw_one_of(v: Validator, schema: dict[str, Any], where: str) -> Check | None:
    return _kw_any_of(v, schema, where, exactly_one=True)


def _kw_not(v: Validator, schema: dict[str, Any], where: str) -> Check | None:
    sub = v._compile(schema["not"], f"{where}/not")

    def check(value: Any, path: Path, out: list[SchemaIssue]) -> None:
        found: list[SchemaIssue] = []
        sub(value, path, found)
        if not found:
            out.append(SchemaIssue("TS206", path, f"{describe(value)} is not allowed here"))

    return check


def _kw_if(v: Validator, schema: dict[str, Any], where: str) -> Check | None:
    cond = v._compile(schema["if"], f"{where}/if")
    then = v._compile(schema["then"], f"{where}/then") if "then" in schema else None
    other = v._compile(schema["else"], f"{where}/else") if "else" in schema else None

    def check(value: Any, path: Path, out: list[SchemaIssue]) -> None:
        found: list[SchemaIssue] = []
        cond(value, path, found)
        branch = other if found else then
        if branch is not None:
            branch(value, path, out)

    return check


def _kw_ignored(v: Validator, schema: dict[str, Any], where: str) -> Check | None:
    return None  # consumed by another keyword (then/else by if)


_KEYWORDS: dict[str, Callable[[Validator, dict[str, Any], str], Check | None]] = {
    "$ref": _kw_ref,
    "type": _kw_type,
    "enum": _kw_enum,
    "const": _kw_const,
    "required": _kw_required,
    "additionalProperties": _kw_additional,
    "properties": _kw_properties,
    "patternProperties": _kw_pattern_properties,
    "propertyNames": _kw_property_names,
    "items": _kw_items,
    "minimum": _bound("minimum", lambda x, m: x >= m, "less than the minimum"),
    "maximum": _bound("maximum", lambda x, m: x <= m, "more than the maximum"),
    "exclusiveMinimum": _bound("exclusiveMinimum", lambda x, m: x > m, "not more than"),
    "exclusiveMaximum": _bound("exclusiveMaximum", lambda x, m: x < m, "not less than"),
    "minLength": _length("minLength", _str_len, lambda n, m: n < m,
                         lambda m: "must not be empty" if m == 1 else f"must be at least {m} characters long"),
    "maxLength": _length("maxLength", _str_len, lambda n, m: n > m, lambda m: f"must be at most {m} characters long"),
    "minItems": _length("minItems", _list_len, lambda n, m: n < m,
                        lambda m: "the list must not be empty" if m == 1 else f"the list needs at least {m} items"),
    "maxItems": _length("maxItems", _list_len, lambda n, m: n > m, lambda m: f"the list allows at most {m} items"),
    "pattern": _kw_pattern,
    "uniqueItems": _kw_unique,
    "allOf": _kw_all_of,
    "anyOf": _kw_any_of,
    "oneOf": _kw_one_of,
    "not": _kw_not,
    "if": _kw_if,
    "then": _kw_ignored,
    "else": _kw_ignored,
}
