"""The registry: every format by name, and a helpful error for a name it does not know."""

from __future__ import annotations

import pytest
from report_samples import sample_result

from torchspec.errors import UsageError
from torchspec.lint.result import LintResult
from torchspec.report import REPORTERS, Reporter, get_reporter, reporter_names


def test_names_in_help_order() -> None:
    assert reporter_names() == ["text", "json", "github", "sarif"]
    assert list(REPORTERS) == reporter_names()


@pytest.mark.parametrize("name", ["text", "json", "github", "sarif"])
def test_every_reporter_renders_strings(name: str) -> None:
    cls = get_reporter(name)
    assert issubclass(cls, Reporter) and cls.name == name
    for color in (False, True):
        out = cls().render(sample_result(), color=color)
        assert isinstance(out, str) and out.endswith("\n")
    assert isinstance(cls().render(LintResult()), str)


def test_unknown_name_suggests_the_closest() -> None:
    with pytest.raises(UsageError) as caught:
        get_reporter("jsn")
    assert caught.value.message == "unknown report format 'jsn'"
    assert caught.value.hint == "did you mean 'json'? valid formats: text, json, github, sarif"


def test_unknown_name_without_a_close_match_lists_the_valid_ones() -> None:
    with pytest.raises(UsageError) as caught:
        get_reporter("xml")
    assert caught.value.hint == "valid formats: text, json, github, sarif"


def test_names_are_case_sensitive_but_suggested() -> None:
    with pytest.raises(UsageError) as caught:
        get_reporter("SARIF")
    assert caught.value.hint is not None and caught.value.hint.startswith("did you mean 'sarif'?")
