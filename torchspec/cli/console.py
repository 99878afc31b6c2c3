"""All of the CLI's terminal output for messages goes through here.

Colour only on a terminal (and never with NO_COLOR); rich is imported only
when colour is on.
"""

from __future__ import annotations

import sys
from typing import Iterable, TextIO

from torchspec.errors import Diagnostic


def error(message: str, hint: str | None = None, stream: TextIO | None = None) -> None:
    stream = stream or sys.stderr
    text = f"error: {message}"
    if hint:
        text += f"\n  hint: {hint}"
    print(text, file=stream)


def diagnostics(found: Iterable[Diagnostic], stream: TextIO | None = None) -> None:
    """Print diagnostics the way ``lint`` does, without the summary line."""
    from torchspec.lint.result import LintResult
    from torchspec.report import get_reporter
    from torchspec.terminal import should_color

    stream = stream or sys.stderr
    found = list(found)
    result = LintResult(files=sorted({d.file for d in found}), diagnostics=found)
    text = get_reporter("text")().render(result, color=should_color(stream), summary=False)
    stream.write(text if text.endswith("\n") else text + "\n")


# --- helpers for the app lifecycle commands (status, list, logs, wait) -------------------------------------------
#
# Plain text is the contract (scripts and tests read it); colour is decoration
# added on top only when the stream is a terminal and NO_COLOR is unset, so the
# layout never depends on it.  rich is imported only on that coloured path.

#: rich style per app/replica state name; states not listed stay unstyled.
STATE_STYLES: dict[str, str] = {
    "SUCCEEDED": "bold green",
    "FAILED": "bold red",
    "CANCELLED": "bold yellow",
    "RUNNING": "bold cyan",
    "PENDING": "blue",
    "SUBMITTED": "blue",
    "UNSUBMITTED": "dim",
    "UNKNOWN": "magenta",
}

# ANSI colours for log prefixes: log lines are the hot path of ``logs -f``, so
# they are coloured with plain escape codes rather than a rich render per line.
_PREFIX_COLORS: tuple[str, ...] = ("36", "32", "33", "35", "34", "96", "92", "93", "95", "94", "91")
_ANSI_RESET = "\x1b[0m"


def use_color(stream: TextIO | None = None) -> bool:
    """Whether to colour ``stream``: a terminal, and no NO_COLOR (the same rule as lint's reports)."""
    from torchspec.terminal import should_color

    return should_color(stream or sys.stdout)


def replica_color(role: str, replica_id: int | str) -> str:
    """A stable ANSI colour code for one replica.

    Derived from a CRC of ``role/replica`` rather than ``hash()`` (salted per
    process), so a replica keeps its colour across ``logs`` runs and between
    ``submit --log`` and a later ``logs -f``.
    """
    import zlib

    return _PREFIX_COLORS[zlib.crc32(f"{role}/{replica_id}".encode()) % len(_PREFIX_COLORS)]


def log_prefix(role: str, replica_id: int | str, color: bool, width: int = 0) -> str:
    """``role/replica`` padded to ``width`` and followed by a space, coloured when ``color``."""
    label = f"{role}/{replica_id}".ljust(width)
    if not color:
        return label + " "
    return f"\x1b[{replica_color(role, replica_id)}m{label}{_ANSI_RESET} "


def styled_state(state: str, color: bool) -> str:
    """The state name, in its colour when ``color`` (ANSI, for line-by-line output)."""
    if not color or state not in STATE_STYLES:
        return state
    codes = {"bold green": "1;32", "bold red": "1;31", "bold yellow": "1;33", "bold cyan": "1;36", "blue": "34",
             "dim": "2", "magenta": "35"}
    return f"\x1b[{codes[STATE_STYLES[state]]}m{state}{_ANSI_RESET}"


def table(headers: list[str], rows: list[list[str]], stream: TextIO | None = None, color: bool | None = None,
          state_column: str | None = "STATE", title: str | None = None) -> None:
    """Print rows under headers: aligned plain columns, or a rich table on a terminal.

    Cells are shown as text, never as rich markup: they hold app names and
    scheduler messages, which must not be able to restyle the table.  The
    column named ``state_column`` is coloured by state.
    """
    stream = stream or sys.stdout
    color = use_color(stream) if color is None else color
    cells = [[_printable(c) for c in row] for row in rows]
    if color:
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text

        tbl = Table(title=title, title_justify="left", header_style="bold", box=None, pad_edge=False)
        for h in headers:
            tbl.add_column(h, overflow="fold")
        state_at = headers.index(state_column) if state_column in headers else -1
        for row in cells:
            tbl.add_row(*(Text(c, style=STATE_STYLES.get(c, "") if i == state_at else "") for i, c in enumerate(row)))
        Console(file=stream, highlight=False, soft_wrap=False).print(tbl)
        return
    if title:
        print(title, file=stream)
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    for row in [headers] + cells:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip(), file=stream)


def highlighted(text: str, lexer: str, stream: TextIO | None = None) -> None:
    """Print ``text`` as is, syntax-highlighted with rich only when ``stream`` is a coloured terminal."""
    stream = stream or sys.stdout
    if not use_color(stream):
        stream.write(text if text.endswith("\n") else text + "\n")
        return
    from rich.console import Console
    from rich.syntax import Syntax

    Console(file=stream, highlight=False).print(Syntax(text, lexer, word_wrap=True, background_color="default"))


def _printable(value: object) -> str:
    """One-line text of a table cell: control characters (escape sequences, newlines) made visible."""
    text = "" if value is None else str(value)
    return "".join(c if c.isprintable() else ("\u23ce" if c == "\n" else f"\\x{ord(c):02x}") for c in text)
