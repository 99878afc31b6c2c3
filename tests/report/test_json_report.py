"""The JSON reporter: exact text, stable key order, and a lossless round trip."""

from __future__ import annotations

import dataclasses
import json

from report_samples import UNICODE, sample_result

from torchspec.errors import Diagnostic
from torchspec.lint.result import LintResult
from torchspec.report.json_report import JsonReporter

DIAGNOSTIC_KEYS = ["code", "name", "severity", "message", "file", "line", "column", "path", "hint", "document"]


def test_exact_output_for_one_diagnostic() -> None:
    result = LintResult(files=["a.yaml", "b.yaml"], diagnostics=[
        Diagnostic("TS305", "param 'x' is unused", file="a.yaml", line=2, column=3, path="params.x",
                   severity="warning", document=1, source_line="  x: 1"),
    ])
    assert JsonReporter().render(result) == """\
{
  "version": 1,
  "files_checked": 2,
  "summary": {
    "errors": 0,
    "warnings": 1
  },
  "diagnostics": [
    {
      "code": "TS305",
      "name": "unused-param",
      "severity": "warning",
      "message": "param 'x' is unused",
      "file": "a.yaml",
      "line": 2,
      "column": 3,
      "path": "params.x",
      "hint": null,
      "document": 1
    }
  ]
}
"""


def test_empty_result() -> None:
    data = json.loads(JsonReporter().render(LintResult()))
    assert data == {"version": 1, "files_checked": 0, "summary": {"errors": 0, "warnings": 0}, "diagnostics": []}


def test_key_order_and_counts() -> None:
    data = json.loads(JsonReporter().render(sample_result()))
    assert list(data) == ["version", "files_checked", "summary", "diagnostics"]
    assert data["files_checked"] == 4
    assert data["summary"] == {"errors": 3, "warnings": 1}
    assert all(list(d) == DIAGNOSTIC_KEYS for d in data["diagnostics"])
    assert [d["code"] for d in data["diagnostics"]] == ["TS202", "TS305", "TS001", "TS204"]
    assert [d["name"] for d in data["diagnostics"]] == ["unknown-key", "unused-param", "unreadable-file",
                                                        "invalid-choice"]


def test_round_trip_restores_every_diagnostic() -> None:
    result = sample_result()
    text = JsonReporter().render(result, color=True)
    assert text.isascii()
    data = json.loads(text)
    rebuilt = [Diagnostic(**{k: v for k, v in d.items() if k != "name"}) for d in data["diagnostics"]]
    assert rebuilt == [dataclasses.replace(d, source_line=None) for d in result.diagnostics]
    assert data["diagnostics"][3]["file"] == UNICODE
    assert data["diagnostics"][2]["hint"] == "save it as UTF-8\nor remove the byte at offset 12"
    assert (data["diagnostics"][2]["line"], data["diagnostics"][2]["column"]) == (None, None)


def test_unknown_code_has_null_name_and_files_only_diagnostics_name_are_counted() -> None:
    result = LintResult(files=[], diagnostics=[Diagnostic("TS999", "m", file="x.yaml")])
    data = json.loads(JsonReporter().render(result))
    assert data["diagnostics"][0]["name"] is None
    assert data["files_checked"] == 1
