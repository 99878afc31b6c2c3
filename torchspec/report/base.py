"""What every reporter is, and the few facts about a result that all formats agree on.

Reporters are pure: a :class:`LintResult` goes in, a string comes out, and the
CLI decides where it is written.  Keeping the shared pieces here means the
four formats cannot drift apart on ordering, counting or wording.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

from torchspec.errors import Diagnostic
from torchspec.lint.result import LintResult


class Reporter(ABC):
    """One output format, registered under :attr:`name` in ``torchspec.report.REPORTERS``."""

    name: ClassVar[str]

    @abstractmethod
    def render(self, result: LintResult, *, color: bool = False) -> str:
        """The whole report as one string; ``color`` is a request that only ``text`` honours."""


def ordered(result: LintResult) -> list[Diagnostic]:
    """Diagnostics grouped by file, files in the order they were checked.

    Every format lists problems in this one order so that a diff between two
    reports of the same run shows only real changes.
    """
    return [d for found in result.by_file().values() for d in found]


def files_checked(result: LintResult) -> int:
    """Files looked at, counting any that only a diagnostic names, so counts never disagree."""
    return len(result.by_file())


def message_with_hint(diagnostic: Diagnostic) -> str:
    """The message, then the hint on a line of its own: what annotation UIs show as one text."""
    if diagnostic.hint:
        return f"{diagnostic.message}\nhint: {diagnostic.hint}"
    return diagnostic.message
