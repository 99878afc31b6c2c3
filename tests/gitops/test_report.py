"""The diff reports: markdown short enough for a comment, nothing from a spec can break out of its place."""

from __future__ import annotations

import json

from torchspec.gitops.diff import AppDiff, DiffResult, FieldChange, FileDiff
from torchspec.gitops.report import MARKDOWN_MAX_CHARS, markdown, render


def result_with(files: list[FileDiff]) -> DiffResult:
    return DiffResult(files=files, base="main", compared=len(files))


def changed_file(path: str, changes: int, value: str = "v") -> FileDiff:
    fields = [FieldChange(("roles", "r", "env", f"K{i}"), "changed", f"{value}{i}", f"{value}{i}!")
              for i in range(changes)]
    return FileDiff(path, path, "modified", apps=[AppDiff("app", "modified", fields)])


def test_a_long_file_diff_is_cut_with_a_count_of_what_was_left_out() -> None:
    md = markdown(result_with([changed_file("a.yaml", 100)]), file_lines=60)
    assert "... 241 more lines not shown" in md  # 1 header + 100 x 3 lines, 60 shown
    assert md.count("\n- ") <= 20 and "<details>" in md


def test_many_files_stop_before_the_comment_limit_and_say_how_many_are_left() -> None:
    files = [changed_file(f"jobs/{i}.yaml", 20, "x" * 200) for i in range(200)]
    md = markdown(result_with(files))
    assert len(md) <= MARKDOWN_MAX_CHARS
    shown = md.count("<details>")
    assert 0 < shown < 200 and f"*{200 - shown} more files not shown" in md


def test_spec_values_cannot_close_the_fence_or_inject_html_or_workflow_commands() -> None:
    evil = FieldChange(("roles", "r", "args"), "changed", ["```"], ["````\n</details><script>"])
    file = FileDiff("jobs/<b>.yaml", "jobs/<b>.yaml", "modified", apps=[AppDiff("a\n::set-output", "modified", [evil])])
    md = markdown(result_with([file]))
    assert "`````diff" in md and "<script>" not in md.split("`````diff")[0]
    assert "<code>jobs/&lt;b&gt;.yaml: modified</code>" in md
    gh = render(result_with([file]), "github")
    assert all(line.startswith("::") for line in gh.splitlines()) and "%0A::set-output" in gh
    text = render(result_with([file]), "text")
    assert "\x1b" not in text


def test_json_keeps_its_documented_shape() -> None:
    secret = FieldChange(("roles", "r", "env", "TOKEN"), "changed", secret=True)
    added = FieldChange(("roles", "r", "env", "NEW"), "added", None, "1")
    file = FileDiff("a.yaml", None, "added", reasons=["x changed"], apps=[AppDiff("a", "added", [secret, added])])
    report = json.loads(render(result_with([file]), "json"))
    assert list(report) == ["version", "base", "scheduler", "compared", "summary", "files"]
    entry, = report["files"]
    assert list(entry) == ["path", "old_path", "status", "reasons", "stand_ins", "apps", "errors"]
    assert entry["apps"][0]["changes"] == [
        {"field": "roles.r.env.TOKEN", "path": ["roles", "r", "env", "TOKEN"], "kind": "changed", "secret": True},
        {"field": "roles.r.env.NEW", "path": ["roles", "r", "env", "NEW"], "kind": "added", "new": "1"}]
    assert entry["apps"][0]["native"] is None


def test_text_is_coloured_only_when_asked() -> None:
    result = result_with([changed_file("a.yaml", 1)])
    plain = render(result, "text")
    assert "\x1b[" not in plain and "  - \"v0\"" in plain
    coloured = render(result, "text", color=True)
    assert "\x1b[" in coloured and "v0" in coloured
