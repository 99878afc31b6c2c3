"""All of the CLI's terminal output goes through here: messages, tables, state colours, the live status view.

Plain text is the contract (scripts and tests read it); colour is decoration
added only on a terminal (and never with NO_COLOR), and rich is imported only
when colour is on, so commands that print a few lines stay fast.
"""

from __future__ import annotations

import sys
import contextlib
import json
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, TextIO

from torchspec.errors import Diagnostic
from torchspec.terminal import STATE_COLORS as _STATE_COLORS
from torchspec.terminal import STATE_STYLES

if TYPE_CHECKING:
    from torchspec.specs import AppStatus, ReplicaStatus


def error(message: str, hint: str | None = None, stream: TextIO | None = None) -> None:
    """``error: MESSAGE`` and its hint on stderr; a value env() read shows as ``<value from env(NAME)>``
    (a scheduler's refusal may quote one: an image, a path)."""
    from torchspec.redaction import redact_text

    stream = stream or sys.stderr
    text = f"error: {message}"
    if hint:
        text += f"\n  hint: {hint}"
    print(redact_text(text), file=stream)


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
    if not color or state not in _STATE_COLORS:
        return state
    return f"\x1b[{_STATE_COLORS[state][1]}m{state}{_ANSI_RESET}"


def table(headers: list[str], rows: list[list[str]], stream: TextIO | None = None, color: bool | None = None,
          state_column: str | None = "STATE", title: str | None = None) -> None:
    """Print rows under headers: aligned plain columns, or a rich table on a terminal.

    Cells are shown as text, never as rich markup: they hold app names and
    scheduler messages, which must not be able to restyle the table.  The
    column named ``state_column`` is coloured by state.
    """
    stream = stream or sys.stdout
    color = use_color(stream) if color is None else color
    cells = [[printable(c) for c in row] for row in rows]
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


def printable(value: object) -> str:
    """One-line text of a table cell: control characters (escape sequences, newlines) made visible."""
    text = "" if value is None else str(value)
    return "".join(c if c.isprintable() else ("\u23ce" if c == "\n" else f"\\x{ord(c):02x}") for c in text)


# --- app status: the table of replicas, and the view that follows an app while it runs ---------------------------

STATUS_HEADERS = ["ROLE", "REPLICA", "STATE", "EXIT", "RESTARTS", "HOST", "MESSAGE"]


def print_status(handle: str, app_status: "AppStatus", roles: list[str] | None = None) -> None:
    """A header with the app's state, then the replica table."""
    color = use_color()
    print(f"app:      {handle}")
    print(f"state:    {styled_state(str(app_status.state), color)}")
    print(f"restarts: {app_status.num_restarts}")
    if app_status.msg:
        print(f"message:  {printable(app_status.msg)}")
    if app_status.ui_url:
        print(f"ui:       {app_status.ui_url}")
    rows = replica_rows(app_status, roles)
    if rows:
        print()
        table(STATUS_HEADERS, rows, color=color)


def replica_rows(app_status: "AppStatus", roles: list[str] | None = None) -> list[list[str]]:
    """One row per replica (of ``roles``, or all), in role order then replica id."""
    return [replica_row(r) for role in app_status.roles if not roles or role.role in roles
            for r in sorted(role.replicas, key=lambda r: r.id)]


def replica_row(replica: "ReplicaStatus") -> list[str]:
    """One table row; fields a scheduler does not report show as ``-``."""
    exit_code, message = _reply(replica)
    restarts = getattr(replica, "num_restarts", None)
    causes = getattr(replica, "restart_causes", None) or {}
    said = "-" if restarts is None else str(restarts)
    if restarts and causes:  # 2 (1 failure, 1 disruption)
        said += " (" + ", ".join(f"{n} {cause}" for cause, n in causes.items()) + ")"
    return [replica.role, str(replica.id), str(replica.state),
            "-" if exit_code is None else str(exit_code), said,
            replica.hostname or "-", message or ""]


def _reply(replica: "ReplicaStatus") -> tuple[Any, str]:
    """(exit code, message) from the replica's own fields, else from the reply file it left."""
    from torchspec.specs import NONE

    exit_code = getattr(replica, "exit_code", None)
    message = getattr(replica, "msg", "") or ""
    raw = replica.structured_error_msg
    if raw and raw != NONE:
        try:
            data = json.loads(raw)
        except ValueError:
            data = None
        inner = data.get("message") if isinstance(data, dict) else None
        if isinstance(inner, dict):
            message = message or str(inner.get("message", ""))
            exit_code = exit_code if exit_code is not None else inner.get("errorCode")
        elif isinstance(inner, str):
            message = message or inner
            exit_code = exit_code if exit_code is not None else data.get("errorCode")  # type: ignore[union-attr]
        elif not message:
            message = raw
    return exit_code, message.strip().splitlines()[0] if message.strip() else ""


@contextlib.contextmanager
def status_view(handle: str, stream: TextIO, live: bool, quiet: bool = False,
                ) -> Iterator[Callable[["AppStatus"], None]]:
    """A function to call with each new status of an app, showing it on ``stream``.

    ``live``: a rich table of every replica, redrawn in place (a terminal).
    Otherwise one line per change of the app's state or restart count, so CI
    logs stay short.  ``quiet``: nothing at all.
    """
    if quiet:
        yield lambda status: None
        return
    if live:
        with _live_view(handle, stream) as show:
            yield show
        return
    last: list[tuple[str, int]] = []

    def show(status: "AppStatus") -> None:
        seen = (str(status.state), status.num_restarts)
        if last and last[-1] == seen:
            return
        last.append(seen)
        restarts = f" (restarts: {status.num_restarts})" if status.num_restarts else ""
        print(f"{time.strftime('%H:%M:%S')} {handle} {seen[0]}{restarts}", file=stream, flush=True)

    yield show


@contextlib.contextmanager
def _live_view(handle: str, stream: TextIO) -> Iterator[Callable[["AppStatus"], None]]:
    from rich.console import Console, Group
    from rich.live import Live
    from rich.table import Table
    from rich.text import Text

    def render(s: "AppStatus") -> Any:
        header = Text.assemble((handle, "bold"), "  ", (str(s.state), STATE_STYLES.get(str(s.state), "")),
                               f"  restarts: {s.num_restarts}")
        tbl = Table(box=None, header_style="bold", pad_edge=False)
        for h in STATUS_HEADERS:
            tbl.add_column(h, overflow="fold")
        for row in replica_rows(s):
            cells = [printable(c) for c in row]
            tbl.add_row(*(Text(c, style=STATE_STYLES.get(c, "") if i == 2 else "") for i, c in enumerate(cells)))
        return Group(header, tbl)

    # started at the first status, so an error before it (an unknown app) is printed on a clean terminal
    live: list[Live] = []

    def show(status: "AppStatus") -> None:
        if not live:
            live.append(Live(render(status), console=Console(file=stream), refresh_per_second=4, transient=False))
            live[0].start()
        else:
            live[0].update(render(status))

    try:
        yield show
    finally:
        if live:
            live[0].stop()


@contextlib.contextmanager
def progress(title: str, label: str, stream: TextIO | None = None) -> Iterator[Callable[[str], None]]:
    """A function to call with each step of a long operation (an image build) on ``stream`` (stderr).

    A spinner showing the current step on a terminal; one ``label: step``
    line per step elsewhere (CI logs).
    """
    stream = stream or sys.stderr
    if not use_color(stream):
        yield lambda line: print(f"{label}: {line}", file=stream, flush=True)
        return
    from rich.console import Console

    status = Console(file=stream).status(title)
    status.start()
    try:
        yield lambda line: status.update(f"{label}: {line}")
    finally:
        status.stop()
