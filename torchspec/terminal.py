"""Whether to colour terminal output: one rule for lint reports, status tables and logs.

A module of its own, importing only the standard library, so that commands
which colour a few words (``status``, ``logs``) do not import the lint
reporters to ask.
"""

from __future__ import annotations

import os
from typing import IO, Any, Dict, Mapping, Tuple

#: Each app/replica state's colour, one source for the CLI and the dashboard's CSS: as a rich style (tables, the
#: live view) and as the same ANSI SGR code (line-by-line output, where a rich render per line would cost too
#: much); states not listed stay unstyled.
STATE_COLORS: Dict[str, Tuple[str, str]] = {
    "SUCCEEDED": ("bold green", "1;32"),
    "FAILED": ("bold red", "1;31"),
    "CANCELLED": ("bold yellow", "1;33"),
    "RUNNING": ("bold cyan", "1;36"),
    "PENDING": ("blue", "34"),
    "SUBMITTED": ("blue", "34"),
    "UNSUBMITTED": ("dim", "2"),
    "UNKNOWN": ("magenta", "35"),
}
#: rich style per state name.
STATE_STYLES: Dict[str, str] = {state: style for state, (style, _) in STATE_COLORS.items()}


def should_color(stream: IO[Any] | None, environ: Mapping[str, str] | None = None) -> bool:
    """Whether output written to ``stream`` should be coloured.

    ``NO_COLOR`` (any non-empty value) always wins, because it is the user
    saying no; then a non-empty ``FORCE_COLOR`` turns colour on even in a pipe
    (CI logs render it); otherwise colour needs a terminal that is not
    ``TERM=dumb``.
    """
    env = os.environ if environ is None else environ
    if env.get("NO_COLOR"):
        return False
    if env.get("FORCE_COLOR"):
        return True
    if env.get("TERM") == "dumb":
        return False
    isatty = getattr(stream, "isatty", None)
    if isatty is None:
        return False
    try:
        return bool(isatty())
    except (ValueError, OSError):
        return False
