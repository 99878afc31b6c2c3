"""Where the cursor is in a spec's text: the path of the node, key or value, inside a template or a macro.

Completion runs on half-typed documents that no parser accepts, so the path
comes from the text itself: block YAML by indentation, TOML by its table
headers and dotted keys, flow collections (JSON, ``{a: 1, b`` in YAML,
inline TOML tables) by their brackets.  Hover and go-to-definition use the
loader's positions first (:mod:`torchspec.lsp.model`) and fall back to this.

Lines and characters here are 0-based code points; the server converts to the
client's units.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Union

PathPart = Union[str, int]

_WORD = re.compile(r"[A-Za-z0-9_.$/-]*$")
_IDENT_TAIL = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*\.?$|\.?$")
_YAML_KEY = re.compile(r"""((?:"(?:[^"\\]|\\.)*"|'[^']*'|[^\s#'"{}\[\],][^:#]*?))\s*:(?:\s|$)""")
_TOML_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]*?)\s*(\]\]?)?\s*(?:#.*)?$")
_TOML_KEY = re.compile(r"^\s*((?:[A-Za-z0-9_-]+|\"(?:[^\"\\]|\\.)*\"|'[^']*')"
                       r"(?:\s*\.\s*(?:[A-Za-z0-9_-]+|\"(?:[^\"\\]|\\.)*\"|'[^']*'))*)\s*=")


@dataclass
class Context:
    """What is at the cursor.

    ``path`` leads to the node being written: with ``key`` true, the mapping
    whose key is being typed; otherwise the value itself.  ``word`` is what was
    typed of the current token (from ``start`` to the cursor).  ``template`` is
    the expression typed so far inside an unclosed ``{{``, ``macro`` the name
    typed so far after an unclosed ``${``; ``header`` is true inside a TOML
    table header.  ``document`` counts ``---`` separators above the cursor.
    """

    path: tuple[PathPart, ...] = ()
    key: bool = False
    word: str = ""
    start: int = 0
    template: str | None = None
    macro: str | None = None
    header: bool = False
    document: int = 0


def context_at(text: str, fmt: str, line: int, character: int) -> Context:
    """The context of the cursor at ``line``/``character`` in ``text`` written in ``fmt``."""
    lines = text.split("\n")
    line = max(0, min(line, len(lines) - 1))
    current = lines[line].rstrip("\r")
    before = current[:max(0, min(character, len(current)))]
    if fmt == "toml":
        ctx = _toml_context(lines, line, before)
    elif fmt == "json":
        ctx = _json_context(lines, line, before)
    else:
        ctx = _yaml_context(lines, line, before)
    word = _WORD.search(before)
    ctx.word = word.group(0) if word else ""
    if ctx.header:
        inner = before[before.index("[") + 1:]
        ctx.word = inner[inner.rfind('"') + 1:] if inner.count('"') % 2 else re.split(r"[.\[\"' ]", inner)[-1]
    ctx.start = len(before) - len(ctx.word)
    _inline_context(ctx, before)
    return ctx


def word_at(line: str, character: int, pattern: str = r"[A-Za-z0-9_.]") -> tuple[str, int, int]:
    """The run of ``pattern`` characters around ``character`` in ``line``: (word, start, end)."""
    start = character
    while start > 0 and re.match(pattern, line[start - 1]):
        start -= 1
    end = character
    while end < len(line) and re.match(pattern, line[end]):
        end += 1
    return line[start:end], start, end


def template_span(line: str, character: int) -> tuple[int, int] | None:
    """The ``{{ ... }}`` or ``{% ... %}`` span of ``line`` holding ``character`` (inner start and end)."""
    for m in re.finditer(r"\{\{(.*?)(\}\}|$)|\{%(.*?)(%\}|$)", line):
        inner_start = m.start() + 2
        inner_end = m.end() - (2 if m.group(2) or m.group(4) else 0)
        if inner_start <= character <= inner_end:
            return inner_start, inner_end
    return None


def macro_span(line: str, character: int) -> tuple[str, int, int] | None:
    """The runtime macro ``${name}`` of ``line`` around ``character``: (name, start, end) of the whole macro."""
    for m in re.finditer(r"(?<!\$)\$\{([^}\s]*)\}?", line):
        if m.start() <= character <= m.end():
            return m.group(1), m.start(), m.end()
    return None


def _inline_context(ctx: Context, before: str) -> None:
    opened = before.rfind("{{")
    if opened >= 0 and before.rfind("}}") < opened:
        tail = _IDENT_TAIL.search(before[opened + 2:])
        ctx.template = tail.group(0) if tail else ""
        ctx.start = len(before) - len(ctx.template.rpartition(".")[2])
        ctx.word = before[ctx.start:]
        return
    dollar = before.rfind("${")
    if dollar >= 0 and "}" not in before[dollar:] and not before[:dollar].endswith("$"):
        ctx.macro = before[dollar + 2:]
        ctx.start = dollar + 2
        ctx.word = ctx.macro


# ---------------------------------------------------------------- flow collections


def flow_path(text: str, separator: str = ":") -> tuple[tuple[PathPart, ...], bool] | None:
    """The path inside the flow collections still open at the end of ``text`` (``{a: [1, {b: `` gives
    ``("a", 1, "b")``), and whether a key is being typed; None when no collection is open."""
    stack: list[list] = []  # [kind, key or index, key being typed?, where the current entry starts]
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch in "\"'":
            i = _string_end(text, i)
            continue
        if ch == "#" and (separator == "=" or i == 0 or text[i - 1] in " \t"):
            nl = text.find("\n", i)
            i = n if nl < 0 else nl
            continue
        if ch in "{[":
            stack.append(["map", None, True, i + 1] if ch == "{" else ["seq", 0, False, i + 1])
        elif ch in "}]" and stack:
            stack.pop()
        elif ch == "," and stack:
            top = stack[-1]
            top[1:] = [top[1] + 1, False, i + 1] if top[0] == "seq" else [None, True, i + 1]
        elif ch == separator and stack and stack[-1][0] == "map" and stack[-1][2]:
            stack[-1][1:3] = [_unquote(text[stack[-1][3]:i]), False]
        i += 1
    if not stack:
        return None
    path = tuple(part for kind, part, typing_key, _ in stack if kind == "seq" or not typing_key)
    return path, bool(stack[-1][0] == "map" and stack[-1][2])


def _string_end(text: str, i: int) -> int:
    quote = text[i]
    j = i + 1
    while j < len(text):
        if text[j] == "\\" and quote == '"':
            j += 2
            continue
        if text[j] == quote:
            return j + 1
        if text[j] == "\n":
            return j
        j += 1
    return len(text)


def _unquote(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return text[1:-1]
    return text.lstrip("\"'")


def _json_context(lines: list[str], line: int, before: str) -> Context:
    text = "\n".join(lines[:line] + [before])
    found = flow_path(text)
    if found is None:
        return Context()
    path, key = found
    return Context(tuple(path), key)


# ---------------------------------------------------------------- YAML


def _yaml_context(lines: list[str], line: int, before: str) -> Context:
    document = 0
    stack: list[tuple[int, str, PathPart]] = []  # (column, "key" or "seq", part)
    skip_deeper_than: int | None = None
    for text in lines[:line]:
        text = text.rstrip("\r")
        if text.startswith("---") or text.startswith("..."):
            document, stack, skip_deeper_than = document + 1, [], None
            continue
        stripped = text.lstrip()
        indent = len(text) - len(stripped)
        if skip_deeper_than is not None:
            if not stripped or indent > skip_deeper_than:
                continue
            skip_deeper_than = None
        if not stripped or stripped.startswith("#"):
            continue
        block = _yaml_line(text, stack)
        if block is not None:
            skip_deeper_than = block
    ctx = _yaml_cursor(before, stack)
    ctx.document = document
    return ctx


def _yaml_line(text: str, stack: list[tuple[int, str, PathPart]]) -> int | None:
    """Push the nodes ``text`` opens; the column below which a block scalar or flow value continues, if any."""
    col = len(text) - len(text.lstrip())
    while text[col:col + 2] in ("- ", "-") and text[col:col + 1] == "-":
        _push_item(stack, col)
        col += 1
        while col < len(text) and text[col] == " ":
            col += 1
    m = _YAML_KEY.match(text, col)
    if not m:
        return stack[-1][0] if _opens_flow(text[col:]) and stack else None
    while stack and stack[-1][0] >= col:
        stack.pop()
    stack.append((col, "key", _unquote(m.group(1))))
    value = text[m.end():].split(" #")[0].strip()
    if value[:1] in ("|", ">") or _opens_flow(value):
        return col
    return None


def _push_item(stack: list[tuple[int, str, PathPart]], col: int) -> None:
    index = 0
    while stack and (stack[-1][0] > col or (stack[-1][0] == col and stack[-1][1] == "seq")):
        popped = stack.pop()
        if popped[0] == col and popped[1] == "seq":
            index = int(popped[2]) + 1
    stack.append((col, "seq", index))


def _opens_flow(value: str) -> bool:
    found = flow_path(value) if value[:1] in "[{" else None
    return found is not None


def _yaml_cursor(before: str, stack: list[tuple[int, str, PathPart]]) -> Context:
    stack = list(stack)
    col = len(before) - len(before.lstrip())
    while before[col:col + 2] == "- ":
        _push_item(stack, col)
        col += 2
        while col < len(before) and before[col] == " ":
            col += 1
    m = _YAML_KEY.match(before, col)
    if m is None:
        while stack and stack[-1][0] >= col and stack[-1][1] == "key":
            stack.pop()
        while stack and stack[-1][0] > col:
            stack.pop()
        return Context(tuple(part for _, _, part in stack), key=True)
    while stack and stack[-1][0] >= col:
        stack.pop()
    path = tuple(part for _, _, part in stack) + (_unquote(m.group(1)),)
    value = before[m.end():]
    inner = flow_path(value.lstrip()) if value.lstrip()[:1] in "[{" else None
    if inner is not None:
        return Context(path + inner[0], key=inner[1])
    return Context(path, key=False)


# ---------------------------------------------------------------- TOML


def toml_parts(dotted: str) -> list[str]:
    parts = re.findall(r"\"((?:[^\"\\]|\\.)*)\"|'([^']*)'|([A-Za-z0-9_-]+)", dotted)
    return [a or b or c for a, b, c in parts]


def _toml_context(lines: list[str], line: int, before: str) -> Context:
    base: tuple[PathPart, ...] = ()
    counts: dict[tuple[PathPart, ...], int] = {}
    in_string = False
    for text in lines[:line]:
        if in_string:
            in_string = text.count('"""') % 2 == 0 and text.count("'''") % 2 == 0
            continue
        if (text.count('"""') + text.count("'''")) % 2 == 1:
            in_string = True
            continue
        header = _TOML_HEADER.match(text)
        if header and header.group(3) and not _TOML_KEY.match(text):
            base = _toml_table(toml_parts(header.group(2)), header.group(1) == "[[", counts)
    header = _TOML_HEADER.match(before)
    if header and not header.group(3) and not _TOML_KEY.match(before):
        inner = header.group(2)
        if inner.count('"') % 2:  # a quoted part being typed: [component."dist.
            return Context(tuple(toml_parts(inner[:inner.rfind('"')])), key=True, header=True)
        parts = toml_parts(inner)
        typed_part = not inner.endswith(".") and parts
        return Context(tuple(parts[:-1] if typed_part else parts), key=True, header=True)
    m = _TOML_KEY.match(before)
    if m is None:
        return Context(base, key=True)
    path = base + tuple(toml_parts(m.group(1)))
    value = before[m.end():].lstrip()
    inner = flow_path(value, "=") if value[:1] in "[{" else None
    if inner is not None:
        return Context(path + inner[0], key=inner[1])
    return Context(path, key=False)


def _toml_table(parts: list[str], array: bool, counts: dict[tuple[PathPart, ...], int]) -> tuple[PathPart, ...]:
    resolved: tuple[PathPart, ...] = ()
    for n, part in enumerate(parts, 1):
        resolved += (part,)
        if resolved in counts and not (n == len(parts) and array):
            resolved += (counts[resolved] - 1,)
    if array:
        counts[resolved] = counts.get(resolved, 0) + 1
        resolved += (counts[resolved] - 1,)
    return resolved


# ---------------------------------------------------------------- keys already written


def sibling_keys(lines: list[str], line: int, fmt: str) -> set[str]:
    """The keys written in the same mapping as the cursor's line (YAML by indentation, TOML by table)."""
    current = lines[line] if line < len(lines) else ""
    if fmt == "toml":
        return _toml_siblings(lines, line)
    col = len(current) - len(current.lstrip(" -"))
    found: set[str] = set()
    for step in (-1, 1):
        n = line + step
        while 0 <= n < len(lines):
            text = lines[n].rstrip("\r")
            stripped = text.lstrip()
            if stripped and not stripped.startswith("#"):
                content = len(text) - len(text.lstrip(" -"))
                if content < col or (content == col and text.lstrip(" ")[:1] == "-" and step == 1):
                    break
                m = _YAML_KEY.match(text, content) if content == col else None
                if m:
                    found.add(_unquote(m.group(1)))
                if content == col and text.lstrip(" ")[:1] == "-":
                    break  # the first key of this list item's mapping
            n += step
    return found


def _toml_siblings(lines: list[str], line: int) -> set[str]:
    found: set[str] = set()
    for step in (-1, 1):
        n = line + step
        while 0 <= n < len(lines):
            header = _TOML_HEADER.match(lines[n])
            if header and header.group(3) and not _TOML_KEY.match(lines[n]):
                break
            m = _TOML_KEY.match(lines[n])
            if m:
                found.add(toml_parts(m.group(1))[0])
            n += step
    return found
