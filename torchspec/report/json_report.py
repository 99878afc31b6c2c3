"""A versioned JSON report for scripts and dashboards.

The key order is fixed and ``version`` is bumped on any incompatible change,
so consumers can pin to it.  Output is ASCII (non-ASCII escaped), which any
pipe or file encoding carries unchanged and ``json.loads`` restores exactly.
"""

from __future__ import annotations

import json
from typing import Any

from torchspec.errors import Diagnostic
from torchspec import codes
from torchspec.lint.result import LintResult
from torchspec.report.base import Reporter, files_checked, ordered

#: Bumped when a key is renamed, removed or changes meaning; adding keys is compatible.
FORMAT_VERSION = 1


class JsonReporter(Reporter):
    """``{"version", "files_checked", "summary", "diagnostics"}`` with two-space indentation."""

    name = "json"

    def render(self, result: LintResult, *, color: bool = False) -> str:
        """The report as a JSON document; ``color`` is ignored because JSON is for machines."""
        return json.dumps(report_dict(result), indent=2) + "\n"


def report_dict(result: LintResult) -> dict[str, Any]:
    """The report as plain data, in the key order it is written."""
    return {
        "version": FORMAT_VERSION,
        "files_checked": files_checked(result),
        "summary": {"errors": result.error_count, "warnings": result.warning_count},
        "diagnostics": [diagnostic_dict(d) for d in ordered(result)],
    }


def diagnostic_dict(d: Diagnostic) -> dict[str, Any]:
    """One diagnostic; ``name`` is the code's catalogue name, ``None`` for a code not in it.

    ``line`` and ``column`` are 1-based and ``None`` where unknown;
    ``document`` is the 0-based index of the YAML document in its file.
    """
    entry = codes.CODES.get(d.code)
    return {
        "code": d.code,
        "name": entry.name if entry else None,
        "severity": d.severity,
        "message": d.message,
        "file": d.file,
        "line": d.line,
        "column": d.column,
        "path": d.path,
        "hint": d.hint,
        "document": d.document,
    }
