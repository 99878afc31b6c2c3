"""Bounding nesting before a recursive parser sees the text.

libyaml's composer and ``tomllib`` recurse once per nesting level: tens of
thousands of levels crash the interpreter (libyaml, in C) or raise a bare
``RecursionError`` (tomllib), and ``tomllib`` takes quadratic time on long
dotted keys.  Both checks here run without recursion, find the exact place
where a value sits deeper than :data:`MAX_DEPTH` (a value's depth is the
length of its path: ``roles[0].env.X`` is 4 deep), and run only when a cheap
upper bound says the text could get there, so ordinary specs skip them.
"""

from __future__ import annotations

import re
from typing import Any, Iterator

from torchspec.loader.document import Position

#: Nesting depth; real specs nest about six levels.
MAX_DEPTH = 64

#: YAML that could nest deeper than this is scanned with the event parser before the composer
#: recurses; below it the builder's own check (at MAX_DEPTH) is enough.  libyaml crashes past
#: about 20,000 levels; the margin is wide.
YAML_SCAN_ABOVE = 1000


def yaml_may_nest(text: str) -> bool:
    """Whether ``text`` could nest past :data:`YAML_SCAN_ABOVE`: an upper bound, cheap to compute.

    A block collection nests only by starting further right than its parent
    (a sequence may sit at its key's column, so at least one column every
    two levels), so a line of n characters allows at most 2n + 2 block
    levels; each flow collection needs its own bracket.
    """
    if 2 * len(text) + 2 <= YAML_SCAN_ABOVE:
        return False
    longest = max(map(len, text.split("\n")))
    return 2 * longest + 2 + text.count("[") + text.count("{") > YAML_SCAN_ABOVE


def yaml_too_deep(text: str, loader: Any) -> Position | None:
    """Where a YAML value first sits deeper than :data:`MAX_DEPTH`, from the event stream (which does not recurse).

    None when nothing does, and when the text is not YAML (the composer
    then reports the syntax error with its position).
    """
    import yaml

    starts = (yaml.SequenceStartEvent, yaml.MappingStartEvent)
    nodes = starts + (yaml.ScalarEvent, yaml.AliasEvent)
    ends = (yaml.SequenceEndEvent, yaml.MappingEndEvent)
    depth = 0
    try:
        for event in yaml.parse(text, Loader=loader):
            if isinstance(event, nodes):
                if depth > MAX_DEPTH:
                    return event.start_mark.line + 1, event.start_mark.column + 1
                if isinstance(event, starts):
                    depth += 1
            elif isinstance(event, ends):
                depth -= 1
            elif isinstance(event, yaml.DocumentEndEvent):
                depth = 0
    except yaml.YAMLError:
        return None
    return None


# ---------------------------------------------------------------- TOML

_TOML_TOKEN = re.compile(r'''
    (?P<str>"""(?:[^\\]|\\.)*?"{3,5}|'{3}.*?'{3,5}|"(?:[^"\\\n]|\\.)*"|'[^'\n]*')
  | (?P<skip>\#[^\n]*|[ \t\r]+)
  | (?P<nl>\n)
  | (?P<punct>[\[\]{}=.,])
  | (?P<word>[^\s\[\]{}=.,"'\#]+)
  | (?P<other>.)
''', re.S | re.X)


def toml_may_nest(text: str) -> bool:
    """Whether ``text`` could nest past :data:`MAX_DEPTH`.

    Every level of a TOML value but the first needs a ``.`` (dotted keys and
    table names), a ``[`` (arrays, tables, arrays of tables) or a ``{``.
    """
    return text.count(".") + text.count("[") + text.count("{") + 1 > MAX_DEPTH


def toml_too_deep(text: str) -> Position | None:
    """Where a TOML value first sits deeper than :data:`MAX_DEPTH`, or None.

    A token scan, not a parser: it follows tables, arrays of tables, dotted
    keys, arrays and inline tables closely enough to measure depth exactly
    on valid TOML; on invalid TOML it measures something, and tomllib then
    reports the syntax error.
    """
    scan = _TomlDepth(text)
    offset = scan.run()
    if offset is None:
        return None
    return text.count("\n", 0, offset) + 1, offset - (text.rfind("\n", 0, offset) + 1) + 1


class _TomlDepth:
    """The state of :func:`toml_too_deep`: where in a statement the scan is, and how deep."""

    def __init__(self, text: str) -> None:
        self.tokens: Iterator[re.Match[str]] = _TOML_TOKEN.finditer(text)
        self.arrays: set[tuple[str, ...]] = set()  # tables declared with [[name]]
        self.base = 0  # depth of the current table
        self.stack: list[tuple[str, int]] = []  # open '[' / '{' in a value, with the depth of that value
        self.state = "line"  # line: a key or header may start; key; value; after: the value is read
        self.depth = 0  # depth of the key being read, or of the value expected next
        self.offset = 0  # where the current token starts

    def run(self) -> int | None:
        for tok in self.tokens:
            kind, text = tok.lastgroup, tok.group()
            self.offset = tok.start()
            if kind == "skip":
                continue
            if kind == "nl":
                if not self.stack:
                    self.state = "line"
                continue
            if self.state == "line" and text == "[" and not self.stack:
                crossed = self._header()
            else:
                crossed = self._step(text, kind)
            if crossed is not None:
                return crossed
        return None

    def _step(self, text: str, kind: str | None) -> int | None:
        """One token of a key or a value; the offset of a token that goes too deep, else None."""
        if self.state in ("line", "key") and kind in ("str", "word"):
            if self.state == "line":
                self.depth = self.stack[-1][1] if self.stack else self.base
            self.depth += 1
            self.state = "key"
            return self.offset if self.depth > MAX_DEPTH else None
        if self.state == "key" and text == "=":
            self.state = "value"
        elif self.state == "value" and kind == "punct" and text in "[{":
            if self.depth > MAX_DEPTH:
                return self.offset
            self.stack.append((text, self.depth))
            self.depth += 1
            self.state = "value" if text == "[" else "line"
        elif kind == "punct" and text in "]}" and self.stack:
            self.stack.pop()
            self.state = "after"
        elif text == "," and self.stack:
            opener, depth = self.stack[-1]
            self.state, self.depth = ("value", depth + 1) if opener == "[" else ("line", depth)
        elif self.state == "value" and kind in ("str", "word"):
            self.state = "after"
            return self.offset if self.depth > MAX_DEPTH else None
        return None

    def _header(self) -> int | None:
        """A ``[table]`` or ``[[array.of.tables]]`` line: sets the depth of the keys under it."""
        parts: list[tuple[str, int]] = []
        is_array = False
        self.state = "after"
        for tok in self.tokens:
            kind, text = tok.lastgroup, tok.group()
            if kind == "nl":
                self.state = "line"
                break
            if text == "[" and not parts:
                is_array = True
            elif kind in ("str", "word"):
                parts.append((text[1:-1] if kind == "str" else text, tok.start()))
            elif text == "]":
                break
        depth = 0
        for i, (_, offset) in enumerate(parts):
            prefix = tuple(name for name, _ in parts[:i + 1])
            own = is_array and i == len(parts) - 1
            depth += 1 + (own or prefix in self.arrays)  # an array of tables adds its element's level
            if depth > MAX_DEPTH:
                return offset
        if is_array:
            self.arrays.add(tuple(name for name, _ in parts))
        self.base = depth
        return None
