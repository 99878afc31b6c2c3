"""The text reporter: exact layout, carets, trimming, colour, and a rich-free start-up."""

from __future__ import annotations

import dataclasses
import io
import os
import re
import subprocess
import sys
import textwrap

import pytest
from report_samples import sample_result

from torchspec.errors import Diagnostic
from torchspec.lint.result import LintResult
from torchspec.report.text import MAX_SOURCE_WIDTH, TextReporter, excerpt, should_color

ANSI = re.compile(r"\x1b\[[0-9;]*m")

EXPECTED = """\
jobs/train.yaml:6:5: error TS202 unknown key 'num_replica' in role 'trainer'
        num_replica: 2
        ^
    hint: did you mean 'num_replicas'?
    at roles[0].num_replica

jobs/train.yaml:2:3: warning TS305 param 'x' is declared but never used
      x: {type: string}
      ^
    at params.x in document 2

jobs/serve.toml: error TS001 the file is not UTF-8 text
    hint: save it as UTF-8
          or remove the byte at offset 12

jobs/ünïcode spec.json:3:5: error TS204 'gpux' is not one of 'gpu', 'cpu'
    名前:   "gpux"
            ^
    hint: use one of: gpu, cpu
    at roles[1].resource.gpu

Found 3 errors and 1 warning in 3 files (checked 4 files)
"""


def render(result: LintResult, **kwargs: bool) -> str:
    return TextReporter().render(result, **kwargs)


def one(**fields: object) -> LintResult:
    """A result holding one TS202 in ``a.yaml``, with ``fields`` changed."""
    diagnostic = dataclasses.replace(Diagnostic("TS202", "m", file="a.yaml"), **fields)
    return LintResult(files=["a.yaml"], diagnostics=[diagnostic])


def test_exact_layout() -> None:
    assert render(sample_result()) == EXPECTED


def test_caret_sits_under_the_column_in_ascii_lines() -> None:
    lines = render(sample_result()).splitlines()
    caret = lines.index("        ^")
    assert lines[caret].index("^") == lines[caret - 1].index("num_replica")


def test_without_summary_and_when_empty() -> None:
    assert render(sample_result(), summary=False) == EXPECTED.rsplit("\n\n", 1)[0] + "\n"
    assert render(LintResult(), summary=False) == ""


@pytest.mark.parametrize(("files", "errors", "warnings", "line"), [
    (0, 0, 0, "No files checked"),
    (1, 0, 0, "1 file passed"),
    (3, 0, 0, "All 3 files passed"),
    (1, 1, 0, "Found 1 error in 1 file (checked 1 file)"),
    (2, 0, 1, "Found 1 warning in 1 file (checked 2 files)"),
    (2, 2, 2, "Found 2 errors and 2 warnings in 2 files (checked 2 files)"),
    (1500, 1200, 0, "Found 1,200 errors in 2 files (checked 1,500 files)"),
])
def test_summary_pluralises(files: int, errors: int, warnings: int, line: str) -> None:
    names = [f"f{i}.yaml" for i in range(files)]
    found = [Diagnostic("TS202", "m", file=names[i % 2]) for i in range(errors)]
    found += [Diagnostic("TS305", "m", file=names[(i + 1) % 2], severity="warning") for i in range(warnings)]
    assert render(LintResult(files=names, diagnostics=found)).splitlines()[-1] == line


def test_line_without_column_shows_source_but_no_caret() -> None:
    assert render(one(line=3, source_line="name: x"), summary=False) == "a.yaml:3: error TS202 m\n    name: x\n"


def test_position_without_source_line_shows_no_excerpt() -> None:
    assert render(one(line=3, column=2), summary=False) == "a.yaml:3:2: error TS202 m\n"


def test_blank_source_line_is_not_drawn() -> None:
    assert render(one(line=1, column=1, source_line="   "), summary=False) == "a.yaml:1:1: error TS202 m\n"


def test_multi_line_message_and_document_without_path() -> None:
    out = render(one(message="first\r\nsecond", document=2), summary=False)
    assert out == "a.yaml: error TS202 first\n    second\n    in document 3\n"


@pytest.mark.parametrize(("source", "column", "shown", "caret"), [
    ("abc", 1, "abc", 0),
    ("abc", 3, "abc", 2),
    ("abc", 4, "abc", 3),
    ("abc", 99, "abc", 3),
    ("abc", 0, "abc", 0),
    ("abc", None, "abc", None),
    ("abc\r\n", 2, "abc", 1),
    ("\tkey: 1", 2, "    key: 1", 4),
    ("a\tb", 3, "a   b", 4),
    ("ab\t\tc", 5, "ab      c", 8),
    ("日本: x", 4, "日本: x", 5),
    ("e\u0301x", 3, "e\u0301x", 1),
])
def test_excerpt_positions(source: str, column: int | None, shown: str, caret: int | None) -> None:
    assert excerpt(source, column) == (shown, caret)


def test_control_and_bidi_characters_are_made_visible() -> None:
    shown, caret = excerpt("a\x1b[2Jb\u202ec\x9bd\x7f", 9)
    assert shown == "a\u241b[2Jb\ufffdc\ufffdd\u2421"
    assert caret == 8
    out = render(one(message="key '\x1b]0;x\x07'", file="a\x1b.yaml", path="p\x1b"), summary=False)
    assert "\x1b" not in out and "\x07" not in out
    assert out == "a\u241b.yaml: error TS202 key '\u241b]0;x\u2407'\n    at p\u241b\n"


def test_long_line_is_cut_around_the_column() -> None:
    source = "x" * 300 + "TARGET" + "y" * 300
    shown, caret = excerpt(source, 301)
    assert caret is not None
    assert shown.startswith("...") and shown.endswith("...")
    assert len(shown) <= MAX_SOURCE_WIDTH
    assert shown[caret:caret + 6] == "TARGET"


def test_long_line_cut_at_one_end_only() -> None:
    source = "k" + "a" * 200 + "Z"
    shown, caret = excerpt(source, 1)
    assert caret == 0 and shown.startswith("ka") and shown.endswith("...") and len(shown) <= MAX_SOURCE_WIDTH
    shown, caret = excerpt(source, len(source))
    assert caret is not None and shown.startswith("...") and shown.endswith("aZ")
    assert shown[caret] == "Z" and len(shown) <= MAX_SOURCE_WIDTH
    shown, caret = excerpt(source, len(source) + 50)
    assert caret == len(shown)


def test_long_line_with_wide_characters_keeps_the_caret_aligned() -> None:
    source = "語" * 100 + "X" + "語" * 100
    shown, caret = excerpt(source, 101)
    prefix = shown[:shown.index("X")]
    assert prefix.startswith("...") and shown.endswith("...")
    assert caret == sum(2 if ch == "語" else 1 for ch in prefix)
    assert sum(2 if ch == "語" else 1 for ch in shown) <= MAX_SOURCE_WIDTH


def test_long_line_without_column_shows_its_start() -> None:
    shown, caret = excerpt("b" * 500, None)
    assert caret is None and shown.startswith("bbb") and shown.endswith("...")


def test_color_false_has_no_escape_codes() -> None:
    assert "\x1b" not in render(sample_result(), color=False)


def test_color_true_has_the_same_layout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("TERM", "dumb")
    coloured = render(sample_result(), color=True)
    assert "\x1b[1;31merror\x1b[0m" in coloured
    assert "\x1b[1;33mwarning\x1b[0m" in coloured
    assert "\x1b[1mTS202\x1b[0m" in coloured
    assert ANSI.sub("", coloured) == EXPECTED


def test_color_does_not_interpret_markup() -> None:
    out = render(one(message="[bold]not markup[/bold] :smile:"), color=True, summary=False)
    assert "[bold]not markup[/bold] :smile:" in ANSI.sub("", out)


def test_should_color_needs_a_terminal() -> None:
    master, replica = os.openpty()
    with open(replica, "w", closefd=True) as tty:
        assert should_color(tty, {}) is True
        assert should_color(tty, {"NO_COLOR": ""}) is True
        assert should_color(tty, {"NO_COLOR": "1"}) is False
        assert should_color(tty, {"TERM": "dumb"}) is False
        assert should_color(tty, {"TERM": "xterm-256color"}) is True
    os.close(master)
    assert should_color(io.StringIO(), {}) is False
    assert should_color(None, {}) is False


def test_should_color_force_and_no_color() -> None:
    assert should_color(io.StringIO(), {"FORCE_COLOR": "1"}) is True
    assert should_color(io.StringIO(), {"FORCE_COLOR": "1", "TERM": "dumb"}) is True
    assert should_color(io.StringIO(), {"FORCE_COLOR": ""}) is False
    assert should_color(io.StringIO(), {"FORCE_COLOR": "1", "NO_COLOR": "1"}) is False
    closed = io.StringIO()
    closed.close()
    assert should_color(closed, {}) is False


def test_plain_rendering_never_imports_rich() -> None:
    code = textwrap.dedent(
        """
        import sys
        sys.path.insert(0, sys.argv[1])
        import torchspec.report.text
        from torchspec.report import get_reporter
        from report_samples import sample_result
        assert get_reporter("text")().render(sample_result(), color=False)
        torchspec.report.text.TextReporter().render(sample_result())
        print(sorted(m for m in sys.modules if m == "rich" or m.startswith("rich.")))
        """
    )
    here = os.path.dirname(__file__)
    r = subprocess.run([sys.executable, "-X", "importtime", "-c", code, here], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"
    imported = [line.rsplit("|", 1)[-1].strip() for line in r.stderr.splitlines() if line.startswith("import time:")]
    assert "torchspec.report.text" in imported
    assert not [m for m in imported if m == "rich" or m.startswith("rich.")]
