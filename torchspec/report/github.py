"""GitHub Actions workflow commands: each diagnostic becomes an annotation on the pull request.

Escaping follows ``@actions/core`` (``escapeData`` and ``escapeProperty`` in
its ``command.ts``) character for character.  It is also what keeps a spec
from injecting its own workflow commands: a key named ``"\\n::set-env ..."``
stays inside one escaped message.
"""

from __future__ import annotations

from torchspec.errors import Diagnostic
from torchspec import codes
from torchspec.lint.result import LintResult
from torchspec.report.base import Reporter, message_with_hint, ordered


def escape_data(text: str) -> str:
    """Escape a command's message, as ``escapeData`` does."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """Escape a property value, as ``escapeProperty`` does: also ``:`` and ``,``, which delimit properties."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


class GithubReporter(Reporter):
    """One ``::error`` or ``::warning`` line per diagnostic, nothing else."""

    name = "github"

    def render(self, result: LintResult, *, color: bool = False) -> str:
        """The commands, one a line; empty when nothing was found.  ``color`` is ignored."""
        return "".join(annotation(d) + "\n" for d in ordered(result))


def annotation(d: Diagnostic) -> str:
    """``::error file=F,line=L,col=C,title=TS202 unknown-key::message%0Ahint: ...``.

    ``line`` and ``col`` are left out when unknown (``col`` too when only the
    column is known), so GitHub attaches the annotation to the file instead.
    """
    props = [("file", d.file)]
    if d.line is not None:
        props.append(("line", str(d.line)))
        if d.column is not None:
            props.append(("col", str(d.column)))
    entry = codes.CODES.get(d.code)
    props.append(("title", f"{d.code} {entry.name}" if entry else d.code))
    command = "warning" if d.severity == "warning" else "error"
    rendered = ",".join(f"{key}={escape_property(value)}" for key, value in props)
    return f"::{command} {rendered}::{escape_data(message_with_hint(d))}"
