"""Whether to colour terminal output: one rule for lint reports, status tables and logs.

A module of its own, importing only the standard library, so that commands
which colour a few words (``status``, ``logs``) do not import the lint
reporters to ask.
"""

from __future__ import annotations

import os
from typing import IO, Any, Mapping


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
