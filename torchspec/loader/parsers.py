"""YAML, TOML and JSON parsers that keep the position of every value.

Each parser returns plain data (so a schema validator can take it as it is)
plus a map from the path of each value to its line and column.  All three
are safe: YAML goes through PyYAML's safe composer with our own constructor,
which refuses unknown tags, duplicate keys and alias bombs; nothing can make
them run code.
"""

from __future__ import annotations

import json
import re
import sys
from bisect import bisect_right
from typing import Any, Callable

import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from torchspec.errors import Diagnostic
from torchspec.loader.document import Document, Path, Position
from torchspec.loader.scan import MAX_DEPTH, toml_may_nest, toml_too_deep, yaml_may_nest, yaml_too_deep

#: Values one document may expand to through aliases; real specs hold a few hundred.
MAX_VALUES = 100_000
#: YAML documents one file may hold (``---`` separated); each costs memory however small it is.
MAX_DOCUMENTS = 1000
#: Characters of text aliases may repeat in one document (a 1 MiB string aliased 1,000 times is a bomb
#: that stays under MAX_VALUES); the same as the largest file, so aliases at most double a document.
MAX_ALIAS_CHARS = 2 * 1024 * 1024

_YAMLLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
#: Builds plain scalars (ints, floats, bools, nulls) by calling PyYAML's constructor for the tag directly:
#: its ``construct_object`` remembers every node it built, which kept every scalar of every file linted.
_SCALARS = SafeConstructor()
_TAG = "tag:yaml.org,2002:"
_SCALAR_TAGS = {f"{_TAG}{t}" for t in ("str", "int", "float", "bool", "null")}
_TEXT_TAGS = {f"{_TAG}timestamp"}  # YAML 1.2 has no timestamps: keep what was written
_MERGE = f"{_TAG}merge"

Parsed = tuple[list[Document], list[Diagnostic]]


class _ParseError(Exception):
    def __init__(self, code: str, message: str, position: Position | None, hint: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.position = position
        self.hint = hint


_UNHOLDABLE = re.compile("[\x00\ud800-\udfff]")
_UNHOLDABLE_HINT = "remove it: no command line, environment variable or file name can hold it"


def unholdable(text: str) -> str | None:
    """What in ``text`` no process can be given (a NUL, a lone surrogate), described; None when nothing.

    Escapes let a spec write them (YAML ``"\\0"``, JSON ``"\\u0000"``,
    ``"\\ud800"``); left in, they fail the job at launch, or torchspec when it
    prints the value.
    """
    m = _UNHOLDABLE.search(text)
    if m is None:
        return None
    return "a NUL character" if m.group() == "\x00" else f"the lone surrogate \\u{ord(m.group()):04x} (not a character)"


def unholdable_in(data: Any) -> tuple[Path, str] | None:
    """The first string or key under ``data`` holding what :func:`unholdable` finds, as (path, message)."""
    stack: list[tuple[Path, Any]] = [((), data)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, str) and unholdable(value):
            return path, f"the string holds {unholdable(value)}"
        if isinstance(value, dict):
            for key, item in value.items():
                if unholdable(key):
                    return path, f"a key holds {unholdable(key)}"
                stack.append((path + (key,), item))
        elif isinstance(value, list):
            stack.extend((path + (i,), item) for i, item in enumerate(value))
    return None


def _long_number(position: Position | None) -> _ParseError:
    """An integer longer than Python converts (``sys.get_int_max_str_digits``), as TS104 at ``position``."""
    limit = getattr(sys, "get_int_max_str_digits", lambda: 4300)()
    return _ParseError("TS104", f"the number has more than {limit} digits", position,
                       'no spec field takes such a number; quote it to keep it as text: "123..."')


#: The last text split at "\n", and its lines: see _line_of.
_SPLIT: list[Any] = [None, []]


def _line_of(text: str, line: int | None) -> str | None:
    """The text of 1-based ``line``.

    The split is kept for the next call on the same text: a file with
    thousands of problems (20,000 duplicate keys) looked each line up from
    the start, which took quadratic time.
    """
    if not line or line < 1:
        return None
    if _SPLIT[0] is not text:
        _SPLIT[:] = [text, text.split("\n")]
    lines: list[str] = _SPLIT[1]
    return lines[line - 1].rstrip("\r") if line <= len(lines) else None


def _diagnostic(file: str, text: str, err: _ParseError, index: int = 0) -> Diagnostic:
    line, col = err.position or (None, None)
    source = _line_of(text, line)
    return Diagnostic(err.code, err.message, file=file, line=line, column=col, hint=err.hint,
                      document=index, source_line=source)


def parse(text: str, file: str, fmt: str) -> Parsed:
    """Parse ``text`` in format ``fmt`` (yaml, toml or json) into positioned documents."""
    return _PARSERS[fmt](text, file)


# ---------------------------------------------------------------- YAML


def _too_deep(position: Position | None) -> _ParseError:
    """The one TS104 for nesting, whatever the format, at the value that crosses the limit."""
    return _ParseError("TS104", f"values are nested more than {MAX_DEPTH} levels deep", position,
                       "flatten the document: real specs nest about six levels")


def parse_yaml(text: str, file: str) -> Parsed:
    docs: list[Document] = []
    if text and yaml_may_nest(text):  # libyaml's composer recurses in C: deep enough, it crashes the interpreter
        deep = yaml_too_deep(text, _YAMLLoader)
        if deep:
            return [], [_diagnostic(file, text, _too_deep(deep))]
    loader = _YAMLLoader(text)
    try:
        index = 0
        while loader.check_node():
            node = loader.get_node()
            if index == MAX_DOCUMENTS:
                mark = node.start_mark
                return docs, [_diagnostic(file, text, _ParseError(
                    "TS104", f"the file holds more than {MAX_DOCUMENTS} documents", (mark.line + 1, mark.column + 1),
                    "split the file; real multi-app files hold a few documents"), index)]
            builder = _YamlBuilder(file, text, index)
            try:
                data = builder.build(node, (), 0)
            except _ParseError as e:
                return docs, [_diagnostic(file, text, e, index)]
            if builder.duplicates:
                return docs, builder.duplicates
            docs.append(Document(file, text, data, index, builder.positions, builder.key_positions, "yaml"))
            index += 1
    except yaml.MarkedYAMLError as e:
        return docs, [_diagnostic(file, text, _yaml_syntax_error(e, text), len(docs))]
    except yaml.reader.ReaderError as e:  # a character YAML does not allow, anywhere in the file
        position = _Lines(text).position(e.position) if isinstance(e.position, int) else None
        what = f"U+{e.character:04X}" if isinstance(e.character, int) else repr(e.character)
        return docs, [_diagnostic(file, text, _ParseError(
            "TS101", f"the character {what} is not allowed in YAML ({e.reason})", position,
            'remove it, or write it as an escape in a double-quoted string: "\\x07"'), len(docs))]
    except yaml.YAMLError as e:  # errors without a mark
        return docs, [Diagnostic("TS101", str(e), file=file, document=len(docs))]
    finally:
        loader.dispose()
    return docs, []


_YAML_HINTS = [
    ("found character '\\t'", "YAML does not allow tabs for indentation: use spaces"),
    ("mapping values are not allowed", "a value that contains ': ' must be quoted, or the indentation is off"),
    ("could not find expected ':'", "a key is missing its ':', or a quoted value is not closed"),
    ("found undefined alias", "define the anchor (&name) before using the alias (*name)"),
    ("expected <block end>", "check the indentation: items of one list or mapping must line up"),
    ("did not find expected key", "check the indentation: items of one list or mapping must line up"),
    ("found unexpected end of stream", "a quoted string or a [ ] / { } is not closed"),
    ("did not find expected ',' or ']'", "a [ ] list is not closed, or an item needs quotes"),
    ("did not find expected ',' or '}'", "a { } mapping is not closed, or a Jinja '{{ }}' value needs quotes"),
]


#: YAML's context for a bracket or quote left open -> what was opened
_OPENED = {"while parsing a flow sequence": "the [ ] list", "while parsing a flow mapping": "the { } mapping",
           "while scanning a quoted scalar": "the quoted string"}


def _yaml_syntax_error(e: yaml.MarkedYAMLError, text: str) -> _ParseError:
    mark = e.problem_mark or e.context_mark
    problem = e.problem or e.context or "invalid YAML"
    message = problem if not e.context or e.context == problem else f"{problem} ({e.context})"
    hint = next((h for needle, h in _YAML_HINTS if needle in message), None)
    if mark is not None and "{{" in (_line_of(text, mark.line + 1) or ""):
        hint = 'quote values that hold Jinja templates: key: "{{ value }}"'
    opened = e.context_mark if e.context in _OPENED else None
    if opened is not None and mark is not None and _left_open(text, opened, mark):
        # YAML notices a bracket left open only where the next line breaks it: point at where it opened
        at_end = mark.index >= len(text.rstrip())
        where = "before the end of the file" if at_end else f"by line {mark.line + 1}, column {mark.column + 1}"
        expected = problem.replace("did not find expected ", "").replace("found unexpected end of stream", "")
        what = f"{_OPENED[e.context]} opened here is not closed"
        message = f"{what}: expected {expected} {where}" if expected else f"{what} {where}"
        mark = opened
    position = (mark.line + 1, mark.column + 1) if mark is not None else None
    return _ParseError("TS101", message, position, hint)


def _left_open(text: str, opened: yaml.Mark, problem: yaml.Mark) -> bool:
    """Whether YAML stopped after the line that opened a bracket or quote because it was never closed: at the
    end of the file, or at a later line indented no deeper than the opening one (the next key), rather than
    at an item inside a list written over several lines (that item is the problem, where YAML says)."""
    if problem.line <= opened.line:
        return False
    if problem.index >= len(text.rstrip()):
        return True
    indent = [len(line) - len(line.lstrip(" ")) for line in (_line_of(text, opened.line + 1) or "",
                                                              _line_of(text, problem.line + 1) or "")]
    return indent[1] <= indent[0]


class _YamlBuilder:
    """Turns composed nodes into plain data, recording where each value sits."""

    def __init__(self, file: str, text: str, index: int) -> None:
        self.file = file
        self.text = text
        self.index = index
        self.positions: dict[Path, Position] = {}
        self.key_positions: dict[Path, Position] = {}
        self.duplicates: list[Diagnostic] = []
        self.count = 0
        self.seen: set[int] = set()  # the scalar nodes built once: building one again is an alias's copy
        self.repeated = 0  # characters of text aliases repeated
        self.aliases = "*" in text  # without an alias no node is built twice
        self.escapes = "\\" in text  # a NUL or a surrogate can only be written as an escape

    def build(self, node: Node, path: Path, depth: int) -> Any:
        self.count += 1
        mark = node.start_mark
        where = (mark.line + 1, mark.column + 1)
        if self.count > MAX_VALUES:
            raise _ParseError("TS104", f"the document expands to more than {MAX_VALUES} values",
                              where, "anchors and aliases (&a, *a) must not multiply the document")
        if self.aliases and isinstance(node, ScalarNode):
            if id(node) in self.seen:
                self.repeated += len(node.value)
                if self.repeated > MAX_ALIAS_CHARS:
                    raise _ParseError("TS104", f"aliases repeat more than {MAX_ALIAS_CHARS} characters of text",
                                      where, "anchors and aliases (&a, *a) must not multiply the document")
            else:
                self.seen.add(id(node))
        if depth > MAX_DEPTH:
            raise _too_deep(where)
        self.positions[path] = where
        if isinstance(node, ScalarNode):
            return self._scalar(node, where)
        if isinstance(node, SequenceNode):
            if node.tag != f"{_TAG}seq":
                raise self._bad_tag(node, where)
            return [self.build(child, path + (i,), depth + 1) for i, child in enumerate(node.value)]
        if isinstance(node, MappingNode):
            if node.tag != f"{_TAG}map":
                raise self._bad_tag(node, where)
            return self._mapping(node, path, depth)
        raise _ParseError("TS106", "unsupported YAML node", where)  # pragma: no cover

    def _scalar(self, node: ScalarNode, where: Position) -> Any:
        tag = node.tag
        if tag == f"{_TAG}str" or tag in _TEXT_TAGS:
            return self._text(node.value, where, "string")
        if tag in _SCALAR_TAGS:
            try:
                return _SCALARS.yaml_constructors[tag](_SCALARS, node)
            except ValueError:  # an integer longer than Python converts
                raise _long_number(where) from None
        raise self._bad_tag(node, where)

    def _text(self, value: str, where: Position, what: str) -> str:
        problem = self.escapes and unholdable(value)
        if problem:
            raise _ParseError("TS106", f"the {what} holds {problem}", where, _UNHOLDABLE_HINT)
        return value

    def _bad_tag(self, node: Node, where: Position) -> _ParseError:
        tag = node.tag.replace(_TAG, "!!")
        return _ParseError("TS106", f"the YAML tag {tag} is not supported in a spec", where,
                           "remove the tag; specs hold only strings, numbers, booleans, lists and mappings")

    def _mapping(self, node: MappingNode, path: Path, depth: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        merged: list[MappingNode] = []
        for key_node, value_node in node.value:
            kmark = key_node.start_mark
            kwhere = (kmark.line + 1, kmark.column + 1)
            if key_node.tag == _MERGE:
                merged.extend(self._merge_sources(value_node, kwhere))
                continue
            if not isinstance(key_node, ScalarNode):
                raise self._bad_key(node, kwhere)
            key = self._text(key_node.value, kwhere, "key")  # taken as written: `on:` stays "on", `8080:` "8080"
            child = path + (key,)
            if key in out:
                first = self.key_positions[child]
                self.duplicates.append(Diagnostic(
                    "TS105", f"duplicate key {key!r} (first defined on line {first[0]})",
                    file=self.file, line=kwhere[0], column=kwhere[1], path=_fmt(child),
                    hint="remove one of them; YAML parsers disagree on which one wins",
                    document=self.index, source_line=self._line(kwhere[0])))
                continue
            self.key_positions[child] = kwhere
            out[key] = self.build(value_node, child, depth + 1)
        for source in merged:  # explicit keys win over merged ones, earlier merges over later
            for key_node, value_node in source.value:
                key = key_node.value if isinstance(key_node, ScalarNode) else None
                if key is None or key in out or key_node.tag == _MERGE:
                    continue
                kmark = key_node.start_mark
                self.key_positions[path + (key,)] = (kmark.line + 1, kmark.column + 1)
                out[key] = self.build(value_node, path + (key,), depth + 1)
        return out

    def _bad_key(self, node: MappingNode, kwhere: Position) -> _ParseError:
        """A list or mapping as a key: nearly always ``key: {{ value }}`` unquoted, which YAML reads as a
        mapping whose one key is a mapping, so the user is told about quoting rather than about keys."""
        start = node.start_mark
        if not (node.flow_style and self.text.startswith("{{", start.index)):
            hint = ('quote values that hold Jinja templates: key: "{{ value }}"'
                    if "{{" in (self._line(kwhere[0]) or "") else "mapping keys must be plain strings")
            return _ParseError("TS106", "a mapping key must be a string, not a list or mapping", kwhere, hint)
        line = self._line(start.line + 1) or ""
        value = line[start.column:]
        value = value[:value.find("}}") + 2] if "}}" in value else value.rstrip()
        quote = "'" if '"' in value else '"'
        quoted = f"{line[:start.column]}{quote}{value}{quote}{line[start.column + len(value):]}".strip()
        hint = f"quote it: {quoted}" if quote not in value else 'quote it: key: "{{ value }}"'
        return _ParseError("TS106", 'a value that starts with "{{" must be quoted in YAML (unquoted, YAML reads'
                           " { } as a mapping)", (start.line + 1, start.column + 1), hint)

    def _merge_sources(self, value: Node, where: Position) -> list[MappingNode]:
        if isinstance(value, MappingNode):
            return [value]
        if isinstance(value, SequenceNode) and all(isinstance(v, MappingNode) for v in value.value):
            return list(value.value)
        raise _ParseError("TS106", "a merge key (<<) needs a mapping or a list of mappings", where)

    def _line(self, line: int) -> str | None:
        return _line_of(self.text, line)


def _fmt(path: Path) -> str:
    from torchspec.errors import format_path

    return format_path(path)


# ---------------------------------------------------------------- JSON


class _Lines:
    """Offset -> (line, column) lookups over one text."""

    def __init__(self, text: str) -> None:
        self.starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def position(self, offset: int) -> Position:
        line = bisect_right(self.starts, offset)
        return line, offset - self.starts[line - 1] + 1


_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")
_LITERALS = {"true": True, "false": False, "null": None}


class _JsonParser:
    """A small recursive-descent JSON parser (RFC 8259) that records positions."""

    def __init__(self, text: str, file: str) -> None:
        self.text = text
        self.file = file
        self.lines = _Lines(text)
        self.positions: dict[Path, Position] = {}
        self.key_positions: dict[Path, Position] = {}
        self.duplicates: list[Diagnostic] = []

    def fail(self, offset: int, message: str, hint: str | None = None) -> _ParseError:
        return _ParseError("TS103", message, self.lines.position(min(offset, len(self.text))), hint)

    def skip(self, i: int) -> int:
        return _WS.match(self.text, i).end()  # type: ignore[union-attr]

    def document(self) -> Any:
        i = self.skip(0)
        if i >= len(self.text):
            raise _ParseError("TS003", "the file is empty", (1, 1), "write a spec: name and roles")
        value, i = self.value(i, (), 0)
        i = self.skip(i)
        if i != len(self.text):
            raise self.fail(i, "extra data after the JSON value")
        return value

    def value(self, i: int, path: Path, depth: int) -> tuple[Any, int]:
        if depth > MAX_DEPTH:
            raise _too_deep(self.lines.position(i))
        self.positions[path] = self.lines.position(i)
        ch = self.text[i : i + 1]
        if ch == "{":
            return self.object(i + 1, path, depth)
        if ch == "[":
            return self.array(i + 1, path, depth)
        if ch == '"':
            return self.string(i)
        m = _NUMBER.match(self.text, i)
        if m and m.end() > i:
            number = m.group(0)
            if m.group(1) or m.group(2):
                return float(number), m.end()
            try:
                return int(number), m.end()
            except ValueError:  # longer than Python converts
                raise _long_number(self.lines.position(i)) from None
        for word, literal in _LITERALS.items():
            if self.text.startswith(word, i):
                return literal, i + len(word)
        if not ch:
            raise self.fail(i, "unexpected end of file, expected a value")
        hint = "JSON strings use double quotes" if ch == "'" else None
        raise self.fail(i, f"expected a value, found {ch!r}", hint)

    def string(self, i: int) -> tuple[str, int]:
        try:
            value, end = json.decoder.scanstring(self.text, i + 1)  # type: ignore[attr-defined]
        except json.JSONDecodeError as e:
            raise self.fail(e.pos, e.msg) from None
        problem = unholdable(value)
        if problem:
            raise _ParseError("TS106", f"the string holds {problem}", self.lines.position(i), _UNHOLDABLE_HINT)
        return value, end

    def object(self, i: int, path: Path, depth: int) -> tuple[dict[str, Any], int]:
        out: dict[str, Any] = {}
        i = self.skip(i)
        if self.text[i : i + 1] == "}":
            return out, i + 1
        while True:
            if self.text[i : i + 1] != '"':
                raise self.fail(i, "expected a key in double quotes",
                                "remove the trailing comma" if self.text[i : i + 1] == "}" else None)
            key_at = i
            key, i = self.string(i)
            i = self.skip(i)
            if self.text[i : i + 1] != ":":
                raise self.fail(i, "expected ':' after the key")
            child = path + (key,)
            value, i = self.value(self.skip(i + 1), child, depth + 1)
            line, col = self.lines.position(key_at)
            if key in out:
                first = self.key_positions[child]
                self.duplicates.append(Diagnostic(
                    "TS105", f"duplicate key {key!r} (first defined on line {first[0]})", file=self.file,
                    line=line, column=col, path=_fmt(child), hint="remove one of them"))
            else:
                self.key_positions[child] = (line, col)
                out[key] = value
            i = self.skip(i)
            ch = self.text[i : i + 1]
            if ch == "}":
                return out, i + 1
            if ch != ",":
                raise self.fail(i, "expected ',' or '}' after a value")
            i = self.skip(i + 1)

    def array(self, i: int, path: Path, depth: int) -> tuple[list[Any], int]:
        out: list[Any] = []
        i = self.skip(i)
        if self.text[i : i + 1] == "]":
            return out, i + 1
        while True:
            if self.text[i : i + 1] == "]":
                raise self.fail(i, "expected a value", "remove the trailing comma")
            value, i = self.value(i, path + (len(out),), depth + 1)
            out.append(value)
            i = self.skip(i)
            ch = self.text[i : i + 1]
            if ch == "]":
                return out, i + 1
            if ch != ",":
                raise self.fail(i, "expected ',' or ']' after a value")
            i = self.skip(i + 1)


def parse_json(text: str, file: str) -> Parsed:
    parser = _JsonParser(text, file)
    try:
        data = parser.document()
    except _ParseError as e:
        return [], [_diagnostic(file, text, e)]
    if parser.duplicates:
        for d in parser.duplicates:
            d.source_line = _line_of(text, d.line)
        return [], parser.duplicates
    return [Document(file, text, data, 0, parser.positions, parser.key_positions, "json")], []


# ---------------------------------------------------------------- TOML

_TOML_AT = re.compile(r"\(at line (\d+), column (\d+)\)")
_TOML_HEADER = re.compile(r"^\s*(\[\[?)\s*(.+?)\s*\]\]?\s*(#.*)?$")
_TOML_KEY = re.compile(r"^\s*((?:[A-Za-z0-9_-]+|\"(?:[^\"\\]|\\.)*\"|'[^']*')"
                       r"(?:\s*\.\s*(?:[A-Za-z0-9_-]+|\"(?:[^\"\\]|\\.)*\"|'[^']*'))*)\s*=\s*")


def parse_toml(text: str, file: str) -> Parsed:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    deep = toml_may_nest(text) and toml_too_deep(text)  # tomllib recurses, and is quadratic on long dotted keys
    if deep:
        return [], [_diagnostic(file, text, _too_deep(deep))]
    try:
        data = tomllib.loads(text)
    except RecursionError:  # pragma: no cover - the scan above finds every deep value first
        return [], [_diagnostic(file, text, _too_deep(None))]
    except tomllib.TOMLDecodeError as e:
        return [], [_toml_syntax_error(text, file, str(e))]
    except ValueError:  # an integer longer than Python converts (sys.get_int_max_str_digits)
        digits = max(getattr(sys, "get_int_max_str_digits", lambda: 4300)(), 1)
        m = re.search(r"[0-9](?:_?[0-9]){%d}" % digits, text)
        return [], [_diagnostic(file, text, _long_number(_Lines(text).position(m.start()) if m else None))]
    positions, key_positions = _toml_positions(text)
    doc = Document(file, text, data, 0, positions, key_positions, "toml")
    if "\\u0000" in text or "\\U00000000" in text:
        problem = unholdable_in(data)
        if problem:
            return [], [doc.diagnostic("TS106", problem[1], problem[0], _UNHOLDABLE_HINT)]
    return [doc], []


_TOML_DUPLICATES = ("Cannot overwrite a value", "twice", "Cannot mutate immutable namespace")
_DATE = re.compile(r"[=\[,]\s*\d{4}-\d{2}-\d{2}")


def _toml_syntax_error(text: str, file: str, message: str) -> Diagnostic:
    """tomllib's error with its position, a duplicate key as TS105 at the second key, and a hint where one helps."""
    m = _TOML_AT.search(message)
    lines = text.split("\n")
    position = (int(m.group(1)), int(m.group(2))) if m else None
    if position is None and "end of document" in message:
        position = (len(lines), len(lines[-1]) + 1)
    message = _TOML_AT.sub("", message).replace("(at end of document)", "at the end of the file").strip()
    if any(needle in message for needle in _TOML_DUPLICATES):
        duplicates: list[tuple[Path, Position, Position]] = []
        _toml_positions(text, duplicates)
        if duplicates:
            path, first, second = duplicates[0]
            return _diagnostic(file, text, _ParseError(
                "TS105", f"duplicate key {_fmt(path)!r} (first defined on line {first[0]})", second,
                "remove one of them; a TOML key or table may be defined once"))
        return _diagnostic(file, text, _ParseError("TS105", f"a key or table is defined twice ({message})", position,
                                                   "define each key and table once"))
    bad_line = lines[position[0] - 1] if position and 0 < position[0] <= len(lines) else ""
    hint = None
    if "{{" in bad_line:
        hint = 'quote values that hold Jinja templates: key = "{{ value }}"'
    elif _DATE.search(bad_line):
        hint = 'a bare date must be a real date (YYYY-MM-DD); quote it to keep it as text: key = "2024-13-45"'
    return _diagnostic(file, text, _ParseError("TS102", message, position, hint))


def _toml_key_parts(dotted: str) -> list[str]:
    parts = re.findall(r"\"((?:[^\"\\]|\\.)*)\"|'([^']*)'|([A-Za-z0-9_-]+)", dotted)
    return [a or b or c for a, b, c in parts]


def _toml_positions(text: str, duplicates: list[tuple[Path, Position, Position]] | None = None,
                    ) -> tuple[dict[Path, Position], dict[Path, Position]]:
    """Line (and column) of every key, found by scanning table headers and ``key =`` lines.

    tomllib keeps no positions; this scan gives the line of each key, which
    is what TOML errors need.  Values inside inline tables and multi-line
    arrays fall back to their key's line through ``Document.locate``.  Keys
    and tables written twice go to ``duplicates`` as (path, first, second).
    """
    positions: dict[Path, Position] = {(): (1, 1)}
    key_positions: dict[Path, Position] = {}
    array_counts: dict[Path, int] = {}
    current: Path = ()
    skip_until: Callable[[str], bool] | None = None
    for lineno, line in enumerate(text.split("\n"), 1):  # TOML breaks lines at \n only (splitlines has more)
        if skip_until is not None:
            if skip_until(line):
                skip_until = None
            continue
        header = _TOML_HEADER.match(line)
        if header and not _TOML_KEY.match(line):
            parts = _toml_key_parts(header.group(2))
            resolved: Path = ()
            for n, part in enumerate(parts, 1):
                resolved += (part,)
                # a table under an array of tables belongs to its latest element
                is_own_header = n == len(parts) and header.group(1) == "[["
                if resolved in array_counts and not is_own_header:
                    resolved += (array_counts[resolved] - 1,)
            if header.group(1) == "[[":
                index = array_counts.get(resolved, 0)
                array_counts[resolved] = index + 1
                key_positions.setdefault(resolved, (lineno, line.index("[") + 1))
                resolved += (index,)
            current = resolved
            if duplicates is not None and current in positions and header.group(1) == "[":
                duplicates.append((current, positions[current], (lineno, line.index("[") + 1)))
            positions[current] = (lineno, line.index("[") + 1)
            continue
        m = _TOML_KEY.match(line)
        if not m:
            continue
        path = current + tuple(_toml_key_parts(m.group(1)))
        key_col = len(line) - len(line.lstrip()) + 1
        if duplicates is not None and path in key_positions:
            duplicates.append((path, key_positions[path], (lineno, key_col)))
        key_positions[path] = (lineno, key_col)
        positions[path] = (lineno, m.end() + 1)
        skip_until = _toml_continuation(line[m.end():])
    return positions, key_positions


def _toml_continuation(value: str) -> Callable[[str], bool] | None:
    """For a value that spans lines, a test that finds its last line."""
    for quote in ('"""', "'''"):
        if value.startswith(quote) and value.count(quote) == 1:
            return lambda line, q=quote: q in line
    depth = _bracket_depth(value)
    if depth > 0:
        state = {"depth": depth}

        def closes(line: str) -> bool:
            state["depth"] += _bracket_depth(line)
            return state["depth"] <= 0

        return closes
    return None


def _bracket_depth(s: str) -> int:
    """Net open brackets in ``s``, ignoring quoted strings and comments."""
    s = re.sub(r"\"(?:[^\"\\]|\\.)*\"|'[^']*'", "", s.split("#", 1)[0] if "#" in s and '"' not in s else s)
    return s.count("[") + s.count("{") - s.count("]") - s.count("}")


_PARSERS = {"yaml": parse_yaml, "json": parse_json, "toml": parse_toml}
