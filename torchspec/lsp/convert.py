"""Lint diagnostics as LSP diagnostics, and positions in the client's units.

A torchspec :class:`~torchspec.errors.Diagnostic` has a 1-based line and
column where a token starts (a key, a value); the editor wants a range, so
the token is measured on its line.  The message is lint's, with its hint on a
second line; the code and severity are lint's too.
"""

from __future__ import annotations

import re
from typing import Callable, Sequence

from lsprotocol import types

from torchspec.errors import Diagnostic

SOURCE = "torchspec"
#: Counts a string's length in the client's position units (UTF-16 code units unless negotiated otherwise).
Units = Callable[[str], int]

_PLAIN_END = re.compile(r"(?:\s+#|:\s|:$|,|\]|\}|\s*$)")


def position(lines: Sequence[str], line: int, character: int, units: Units) -> types.Position:
    """0-based ``line`` and code point ``character`` as an LSP position."""
    text = lines[line] if 0 <= line < len(lines) else ""
    return types.Position(line=line, character=units(text[:character]))


def span(lines: Sequence[str], line: int, start: int, end: int, units: Units) -> types.Range:
    return types.Range(start=position(lines, line, start, units), end=position(lines, line, end, units))


def character(lines: Sequence[str], line: int, client_character: int, units: Units) -> int:
    """The code point index of a client position on ``line``."""
    text = lines[line] if 0 <= line < len(lines) else ""
    count = 0
    for index, ch in enumerate(text):
        if count >= client_character:
            return index
        count += units(ch)
    return len(text)


def token_end(text: str, start: int) -> int:
    """Where the key or value starting at ``start`` of a line ends: a quoted string, a bracket, a plain word."""
    ch = text[start:start + 1]
    if ch in ("'", '"'):
        close = text.find(ch, start + 1)
        return len(text) if close < 0 else close + 1
    if ch in ("[", "{"):
        depth = 0
        for i in range(start, len(text)):
            depth += text[i] in "[{"
            depth -= text[i] in "]}"
            if depth == 0:
                return i + 1
        return len(text.rstrip())
    m = _PLAIN_END.search(text, start + 1)
    end = m.start() if m else len(text)
    return max(end, min(start + 1, len(text)))


def diagnostic_range(d: Diagnostic, lines: Sequence[str], units: Units) -> types.Range:
    line = min(max((d.line or 1) - 1, 0), max(len(lines) - 1, 0))
    text = lines[line] if lines else ""
    if d.line is None or d.column is None:
        start = len(text) - len(text.lstrip())
        return span(lines, line, start, max(len(text.rstrip()), start), units)
    start = min(d.column - 1, len(text))
    return span(lines, line, start, token_end(text, start), units)


def lsp_diagnostic(d: Diagnostic, lines: Sequence[str], units: Units,
                   uri_of: Callable[[str], str]) -> types.Diagnostic:
    """One lint diagnostic for the editor; ``related`` lines of imported files become related information."""
    related = [types.DiagnosticRelatedInformation(
        location=types.Location(uri=uri_of(r.file), range=types.Range(
            start=types.Position(line=max(r.line - 1, 0), character=0),
            end=types.Position(line=max(r.line - 1, 0), character=0))),
        message=r.message) for r in d.related]
    return types.Diagnostic(
        range=diagnostic_range(d, lines, units),
        message=d.message + (f"\nhint: {d.hint}" if d.hint else ""),
        severity=types.DiagnosticSeverity.Error if d.is_error else types.DiagnosticSeverity.Warning,
        code=d.code,
        source=SOURCE,
        related_information=related or None,
    )
