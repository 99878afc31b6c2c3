"""SARIF 2.1.0, the format code-scanning services (GitHub, Azure DevOps, IDEs) read.

One run, one rule per code that was actually found (described from the codes
catalogue), one result per diagnostic.  Relative file names are kept relative
to ``%SRCROOT%`` so the upload step can anchor them to the checkout; columns
are declared as Unicode code points, which is what the parsers count.
"""

from __future__ import annotations

import json
import posixpath
from pathlib import PurePath
from typing import Any
from urllib.parse import quote

from torchspec.errors import Diagnostic
from torchspec import codes
from torchspec.lint.result import LintResult
from torchspec.report.base import Reporter, message_with_hint, ordered
from torchspec.version import __version__

SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_VERSION = "2.1.0"
INFORMATION_URI = "https://github.com/torchspec/torchspec"
SRCROOT = "%SRCROOT%"


class SarifReporter(Reporter):
    """A SARIF log with one run of tool ``torchspec``."""

    name = "sarif"

    def render(self, result: LintResult, *, color: bool = False) -> str:
        """The log as indented JSON; ``color`` is ignored."""
        return json.dumps(sarif_log(result), indent=2) + "\n"


def sarif_log(result: LintResult) -> dict[str, Any]:
    """The whole log as plain data."""
    found = ordered(result)
    rule_ids = sorted({d.code for d in found})
    index = {code: i for i, code in enumerate(rule_ids)}
    return {
        "$schema": SCHEMA_URI,
        "version": SARIF_VERSION,
        "runs": [{
            "tool": {"driver": {
                "name": "torchspec",
                "version": __version__,
                "informationUri": INFORMATION_URI,
                "rules": [rule(code, _severity_of(code, found)) for code in rule_ids],
            }},
            "columnKind": "unicodeCodePoints",
            "results": [sarif_result(d, index[d.code]) for d in found],
        }],
    }


def rule(code: str, severity: str) -> dict[str, Any]:
    """A ``reportingDescriptor`` for ``code``; a code missing from the catalogue still gets a minimal one."""
    entry = codes.CODES.get(code)
    if entry is None:
        return {"id": code, "shortDescription": {"text": code},
                "defaultConfiguration": {"level": _level(severity)}}
    help_text = "\n\n".join(part for part in (entry.why, entry.fix) if part) or entry.summary
    return {
        "id": entry.code,
        "name": entry.name,
        "shortDescription": {"text": entry.summary},
        "fullDescription": {"text": entry.why or entry.summary},
        "help": {"text": help_text},
        "defaultConfiguration": {"level": _level(entry.severity)},
    }


def sarif_result(d: Diagnostic, rule_index: int) -> dict[str, Any]:
    """A ``result``: where, what, and the document path as a property for tools that want it."""
    region: dict[str, int] = {}
    if d.line is not None:
        region["startLine"] = d.line
        if d.column is not None:
            region["startColumn"] = max(d.column, 1)
    physical: dict[str, Any] = {"artifactLocation": artifact_location(d.file)}
    if region:
        physical["region"] = region
    out: dict[str, Any] = {
        "ruleId": d.code,
        "ruleIndex": rule_index,
        "level": _level(d.severity),
        "message": {"text": message_with_hint(d)},
        "locations": [{"physicalLocation": physical}],
    }
    properties: dict[str, Any] = {}
    if d.path:
        properties["path"] = d.path
    if d.document:
        properties["document"] = d.document
    if properties:
        out["properties"] = properties
    return out


def artifact_location(file: str) -> dict[str, str]:
    """A relative name as a percent-encoded URI under ``%SRCROOT%``; an absolute one as a ``file:`` URI."""
    path = PurePath(file)
    if path.is_absolute():
        return {"uri": path.as_uri()}
    relative = posixpath.normpath(path.as_posix())
    return {"uri": quote(relative, safe="/"), "uriBaseId": SRCROOT}


def _level(severity: str) -> str:
    return "warning" if severity == "warning" else "error"


def _severity_of(code: str, found: list[Diagnostic]) -> str:
    """The severity a code was reported with, for codes the catalogue does not know."""
    return next(d.severity for d in found if d.code == code)
