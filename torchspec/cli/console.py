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
    from torchspec.report.text import should_color

    stream = stream or sys.stderr
    found = list(found)
    result = LintResult(files=sorted({d.file for d in found}), diagnostics=found)
    text = get_reporter("text")().render(result, color=should_color(stream), summary=False)
    stream.write(text if text.endswith("\n") else text + "\n")
