"""Reporters by name: a :class:`~torchspec.lint.result.LintResult` in, the text of one format out.

The CLI looks a format up with :func:`get_reporter`, renders, and writes the
string where it was told; nothing here prints.  Importing this package loads
only the standard library and torchspec's own small modules: rich is imported
by the text reporter, and only when colour is asked for.
"""

from __future__ import annotations


from torchspec.errors import UsageError, did_you_mean
from torchspec.report.base import Reporter
from torchspec.report.github import GithubReporter
from torchspec.report.json_report import JsonReporter
from torchspec.report.sarif import SarifReporter
from torchspec.report.text import TextReporter

__all__ = ["REPORTERS", "Reporter", "get_reporter", "reporter_names"]

REPORTERS: dict[str, type[Reporter]] = {
    cls.name: cls for cls in (TextReporter, JsonReporter, GithubReporter, SarifReporter)
}


def reporter_names() -> list[str]:
    """The format names ``--format`` accepts, in the order help text should list them."""
    return list(REPORTERS)


def get_reporter(name: str) -> type[Reporter]:
    """The reporter class registered as ``name``; a :class:`UsageError` naming the valid ones otherwise."""
    try:
        return REPORTERS[name]
    except KeyError:
        pass
    valid = ", ".join(REPORTERS)
    guess = did_you_mean(name, REPORTERS)
    hint = f"did you mean {guess!r}? valid formats: {valid}" if guess else f"valid formats: {valid}"
    raise UsageError(f"unknown report format {name!r}", hint)
