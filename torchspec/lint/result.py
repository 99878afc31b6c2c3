"""The outcome of linting: plain values that reporters turn into text."""

from __future__ import annotations

from dataclasses import dataclass, field

from torchspec.errors import Diagnostic
from torchspec.exit_codes import ExitCode

#: The exit codes lint uses, by the names the Python API has always exported.
EXIT_OK = ExitCode.OK
EXIT_ERRORS = ExitCode.SPEC_ERROR
EXIT_USAGE = ExitCode.USAGE


@dataclass
class LintResult:
    """Every file looked at, and every diagnostic found, in file order."""

    files: list[str] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    #: file -> names of the environment variables its templates read (never their values)
    env_read: dict[str, list[str]] = field(default_factory=dict)
    #: what was not checked and why (e.g. the --scheduler check skipped a file needing params), for stderr
    notes: list[str] = field(default_factory=list)

    @property
    def error_count(self) -> int:
        return sum(1 for d in self.diagnostics if d.is_error)

    @property
    def warning_count(self) -> int:
        return sum(1 for d in self.diagnostics if not d.is_error)

    def exit_code(self, strict: bool = False) -> ExitCode:
        """1 when an error was found (or, with ``strict``, any warning), else 0."""
        if self.error_count or (strict and self.warning_count):
            return EXIT_ERRORS
        return EXIT_OK

    def by_file(self) -> dict[str, list[Diagnostic]]:
        grouped: dict[str, list[Diagnostic]] = {f: [] for f in self.files}
        for d in self.diagnostics:
            grouped.setdefault(d.file, []).append(d)
        return grouped
