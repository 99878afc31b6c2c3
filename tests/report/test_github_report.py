"""The GitHub Actions reporter: exact commands and @actions/core's escaping."""

from __future__ import annotations

import pytest
from report_samples import sample_result

from torchspec.errors import Diagnostic
from torchspec.lint.result import LintResult
from torchspec.report.github import GithubReporter, escape_data, escape_property


def render(*found: Diagnostic) -> str:
    return GithubReporter().render(LintResult(files=sorted({d.file for d in found}), diagnostics=list(found)))


def test_exact_output() -> None:
    assert GithubReporter().render(sample_result()) == (
        "::error file=jobs/train.yaml,line=6,col=5,title=TS202 unknown-key::"
        "unknown key 'num_replica' in role 'trainer'%0Ahint: did you mean 'num_replicas'?\n"
        "::warning file=jobs/train.yaml,line=2,col=3,title=TS305 unused-param::"
        "param 'x' is declared but never used\n"
        "::error file=jobs/serve.toml,title=TS001 unreadable-file::"
        "the file is not UTF-8 text%0Ahint: save it as UTF-8%0Aor remove the byte at offset 12\n"
        "::error file=jobs/ünïcode spec.json,line=3,col=5,title=TS204 invalid-choice::"
        "'gpux' is not one of 'gpu', 'cpu'%0Ahint: use one of: gpu, cpu\n"
    )


def test_nothing_found_prints_nothing() -> None:
    assert GithubReporter().render(LintResult(files=["a.yaml"])) == ""


@pytest.mark.parametrize(("raw", "data", "prop"), [
    ("plain", "plain", "plain"),
    ("100%", "100%25", "100%25"),
    ("a\r\nb", "a%0D%0Ab", "a%0D%0Ab"),
    ("C:\\x,y", "C:\\x,y", "C%3A\\x%2Cy"),
    ("%0A", "%250A", "%250A"),
    ("key: a, b", "key: a, b", "key%3A a%2C b"),
])
def test_escaping_matches_actions_toolkit(raw: str, data: str, prop: str) -> None:
    assert escape_data(raw) == data
    assert escape_property(raw) == prop


def test_properties_and_message_are_escaped() -> None:
    out = render(Diagnostic("TS202", "50% of 'a,b:c'\nsecond", file="dir,1/a:b.yaml", line=1, column=2,
                            hint="x\ry"))
    assert out == ("::error file=dir%2C1/a%3Ab.yaml,line=1,col=2,title=TS202 unknown-key::"
                   "50%25 of 'a,b:c'%0Asecond%0Ahint: x%0Dy\n")


def test_a_spec_cannot_inject_workflow_commands() -> None:
    out = render(Diagnostic("TS202", "unknown key '\n::add-mask::x\n::set-env name=A::1'", file="a.yaml"))
    assert out.splitlines() == [
        "::error file=a.yaml,title=TS202 unknown-key::unknown key '%0A::add-mask::x%0A::set-env name=A::1'"]


def test_positions_left_out_when_unknown() -> None:
    assert render(Diagnostic("TS105", "m", file="a.yaml", line=4)) == \
        "::error file=a.yaml,line=4,title=TS105 duplicate-key::m\n"
    assert render(Diagnostic("TS105", "m", file="a.yaml", column=4)) == \
        "::error file=a.yaml,title=TS105 duplicate-key::m\n"


def test_warnings_and_unknown_codes() -> None:
    assert render(Diagnostic("TS999", "m", file="a.yaml", severity="warning")) == \
        "::warning file=a.yaml,title=TS999::m\n"
