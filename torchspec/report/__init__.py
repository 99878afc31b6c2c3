"""Reporters by name: a :class:`~torchspec.lint.result.LintResult` in, the text of one format out.

The CLI looks a format up with :func:`get_reporter`, renders, and writes the
string where it was told; nothing here prints.  Importing this package loads
no reporter: each one's module is imported when its format is asked for, and
rich only by the text reporter when colour is asked for.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Dict, Tuple, Type

from torchspec.errors import UsageError, did_you_mean

if TYPE_CHECKING:
    from torchspec.report.base import Reporter

__all__ = ["REPORTERS", "Reporter", "get_reporter", "reporter_names"]

#: format name -> (module, class): a reporter's module is imported when its format is asked for.
_WHERE: Dict[str, Tuple[str, str]] = {
    "text": ("torchspec.report.text", "TextReporter"),
    "json": ("torchspec.report.json_report", "JsonReporter"),
    "github": ("torchspec.report.github", "GithubReporter"),
    "sarif": ("torchspec.report.sarif", "SarifReporter"),
}


def _load(name: str) -> "Type[Reporter]":
    module, attr = _WHERE[name]
    return getattr(importlib.import_module(module), attr)  # type: ignore[no-any-return]


def __getattr__(name: str) -> object:
    """``REPORTERS`` (every reporter class by format, all imported) and ``Reporter``, on first use."""
    if name == "REPORTERS":
        return {format_name: _load(format_name) for format_name in _WHERE}
    if name == "Reporter":
        from torchspec.report.base import Reporter

        return Reporter
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def reporter_names() -> list[str]:
    """The format names ``--format`` accepts, in the order help text should list them."""
    return list(_WHERE)


def get_reporter(name: str) -> type[Reporter]:
    """The reporter class registered as ``name``; a :class:`UsageError` naming the valid ones otherwise."""
    if name in _WHERE:
        return _load(name)
    valid = ", ".join(_WHERE)
    guess = did_you_mean(name, list(_WHERE))
    hint = f"did you mean {guess!r}? valid formats: {valid}" if guess else f"valid formats: {valid}"
    raise UsageError(f"unknown report format {name!r}", hint)
