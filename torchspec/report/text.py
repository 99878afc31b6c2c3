"""Lint output for people: compiler-style lines, the offending source line and a caret.

The report is first laid out as lines of (text, style) segments; plain output
joins the texts, coloured output hands the same segments to rich.  So colour
can never change the layout, and rich is imported only when colour is asked
for: ``torchspec lint`` in CI must not pay for it at start-up.

Spec files arrive in pull requests, so everything shown from them (source
lines, keys quoted in messages, file names) has its control characters made
visible: a spec must not be able to move the reviewer's cursor or hide text
with bidirectional overrides.
"""

from __future__ import annotations

import unicodedata
from bisect import bisect_left, bisect_right

from torchspec.errors import Diagnostic
from torchspec.lint.result import LintResult
from torchspec.terminal import should_color  # noqa: F401 - re-exported: lint's reporter API
from torchspec.report.base import Reporter, files_checked

#: Columns a tab advances to in a shown source line (a multiple of this).
TAB_WIDTH = 4
#: Widest source excerpt shown, in terminal cells; longer lines are cut around the caret.
MAX_SOURCE_WIDTH = 96
INDENT = "    "
ELLIPSIS = "..."

Segment = tuple[str, str | None]
Line = list[Segment]

_SEVERITY_STYLE = {"error": "bold red", "warning": "bold yellow"}
_BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


class TextReporter(Reporter):
    """Diagnostics grouped by file, each with its source line, caret, hint and document path."""

    name = "text"

    def render(self, result: LintResult, *, color: bool = False, summary: bool = True) -> str:
        """The report, ending in a newline; empty when there is nothing to say.

        ``summary=False`` leaves out the closing count, for commands such as
        ``render`` that show a few diagnostics on their way to failing.
        """
        lines = layout(result, summary=summary)
        if not lines:
            return ""
        if color:
            return to_ansi(lines)
        return "".join("".join(text for text, _ in line) + "\n" for line in lines)


def layout(result: LintResult, *, summary: bool = True) -> list[Line]:
    """The report as styled lines: the single source of truth for both plain and coloured output."""
    lines: list[Line] = []
    for found in result.by_file().values():
        for diagnostic in found:
            if lines:
                lines.append([])
            lines.extend(_diagnostic_lines(diagnostic))
    if summary:
        if lines:
            lines.append([])
        lines.append([summary_line(result)])
    return lines


def summary_line(result: LintResult) -> Segment:
    """``Found 2 errors and 1 warning in 2 files (checked 5 files)``, or ``All 5 files passed``."""
    checked = files_checked(result)
    errors, warnings = result.error_count, result.warning_count
    if not errors and not warnings:
        if checked == 0:
            return "No files checked", "bold"
        if checked == 1:
            return "1 file passed", "bold green"
        return f"All {checked:,} files passed", "bold green"
    counts = []
    if errors:
        counts.append(_plural(errors, "error"))
    if warnings:
        counts.append(_plural(warnings, "warning"))
    failing = len({d.file for d in result.diagnostics})
    text = f"Found {' and '.join(counts)} in {_plural(failing, 'file')} (checked {_plural(checked, 'file')})"
    return text, "bold red" if errors else "bold yellow"


def _plural(count: int, noun: str) -> str:
    return f"{count:,} {noun}" if count == 1 else f"{count:,} {noun}s"


def _diagnostic_lines(d: Diagnostic) -> list[Line]:
    severity_style = _SEVERITY_STYLE.get(d.severity, "bold")
    message = _clean_lines(d.message)
    lines: list[Line] = [[
        (clean(d.location()), "bold"), (": ", None), (d.severity, severity_style), (" ", None),
        (d.code, "bold"), (" ", None), (message[0], None),
    ]]
    lines.extend([(INDENT + more, None)] for more in message[1:])
    if d.line is not None and d.source_line is not None and d.source_line.strip():
        shown, caret = excerpt(d.source_line, d.column)
        lines.append([(INDENT + shown, None)])
        if caret is not None:
            lines.append([(INDENT + " " * caret, None), ("^", severity_style)])
    if d.hint:
        hint = _clean_lines(d.hint)
        lines.append([(INDENT, None), ("hint:", "bold cyan"), (" " + hint[0], None)])
        lines.extend([(INDENT + " " * len("hint: ") + more, None)] for more in hint[1:])
    where = []
    if d.path:
        where.append(f"at {clean(d.path)}")
    if d.document:
        where.append(f"in document {d.document + 1}")
    if where:
        lines.append([(INDENT, None), (" ".join(where), "dim")])
    return lines


def excerpt(source: str, column: int | None, width: int = MAX_SOURCE_WIDTH) -> tuple[str, int | None]:
    """The source line as it should be shown, and the cell offset of the caret in it.

    Tabs are expanded, wide characters count two cells, control characters
    are made visible, a column past the end points just after the last
    character, and a line wider than ``width`` is cut around the column with
    ``...`` on the cut sides.  The caret offset is ``None`` when the column is.
    """
    texts = _expand_tabs([_cell(ch) for ch in source.rstrip("\r\n")])
    widths = [0]
    for text in texts:
        widths.append(widths[-1] + _width(text))
    count = len(texts)
    index = None if column is None else min(max(column, 1), count + 1) - 1
    if widths[-1] <= width:
        return "".join(texts), None if index is None else widths[index]
    body = width - 2 * len(ELLIPSIS)
    anchor = widths[index] if index is not None else 0
    start = bisect_left(widths, max(0, anchor - body // 2))
    end = bisect_right(widths, widths[start] + body) - 1
    if end >= count:
        end = count
        start = bisect_left(widths, widths[count] - body)
    shown = (ELLIPSIS if start else "") + "".join(texts[start:end]) + (ELLIPSIS if end < count else "")
    if index is None:
        return shown, None
    return shown, (len(ELLIPSIS) if start else 0) + widths[index] - widths[start]


def _expand_tabs(cells: list[str]) -> list[str]:
    """Replace each tab by the spaces that reach the next tab stop, counted in cells."""
    out: list[str] = []
    position = 0
    for text in cells:
        if text == "\t":
            text = " " * (TAB_WIDTH - position % TAB_WIDTH)
        out.append(text)
        position += _width(text)
    return out


def _cell(ch: str) -> str:
    """A character as it is safe to show: controls become their visible pictures."""
    if ch == "\t":
        return ch
    code = ord(ch)
    if code < 0x20:
        return chr(0x2400 + code)
    if code == 0x7F:
        return "\u2421"
    if 0x80 <= code < 0xA0 or ch in _BIDI_CONTROLS or ch in "\u2028\u2029":
        return "\ufffd"
    return ch


def _width(text: str) -> int:
    """Terminal cells ``text`` takes: East Asian wide characters two, combining marks none."""
    total = 0
    for ch in text:
        if unicodedata.combining(ch):
            continue
        total += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return total


def clean(text: str) -> str:
    """One line of message text with tabs as spaces and controls made visible."""
    return "".join(" " if ch == "\t" else _cell(ch) for ch in text)


def _clean_lines(text: str) -> list[str]:
    return [clean(line) for line in text.replace("\r\n", "\n").split("\n")]


def to_ansi(lines: list[Line]) -> str:
    """Draw the laid-out lines with rich, isolated from the environment: the caller already decided on colour."""
    from io import StringIO

    from rich.console import Console
    from rich.text import Text

    buffer = StringIO()
    console = Console(file=buffer, force_terminal=True, color_system="standard", no_color=False, width=10_000,
                      soft_wrap=True, highlight=False, markup=False, emoji=False, legacy_windows=False, _environ={})
    for line in lines:
        text = Text(no_wrap=True)
        for part, style in line:
            text.append(part, style=style)
        console.print(text, soft_wrap=True)
    return buffer.getvalue()
