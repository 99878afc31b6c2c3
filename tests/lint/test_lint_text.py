"""``lint_text``: an editor's buffer linted as ``lint_paths`` lints the file, imports from unsaved buffers,
and diagnostics that point into the imported template where a macro failed."""

from __future__ import annotations

import textwrap

from torchspec.lint import LintOptions, lint_paths, lint_text
from torchspec.runner.check import lint_text as lint_text_with_scheduler

SPEC = textwrap.dedent(
    """\
    name: job
    imports: {lib: lib/m.j2}
    params:
      n: {type: integer, default: 1}
    roles:
      - name: trainer
        image: .
        entrypoint: "{{ lib.cmd(n) }}"
        retry_policy: APPLICATON
        nmae: x
    """
)
MACROS = "{#- the command -#}\n{% macro cmd(x) -%}\nrun {{ x + missing }}\n{%- endmacro %}\n"


def test_same_diagnostics_as_the_file_and_related_points_into_the_import(tmp_path) -> None:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "m.j2").write_text(MACROS)
    spec = tmp_path / "job.yaml"
    spec.write_text(SPEC)
    from_file = lint_paths([str(spec)]).diagnostics
    from_text = lint_text(SPEC, str(spec)).diagnostics
    assert [str(d) for d in from_text] == [str(d) for d in from_file]
    assert [d.code for d in from_text] == ["TS202", "TS204"]  # the schema stops the document before rendering

    fixed = SPEC.replace("    nmae: x\n", "").replace("APPLICATON", "APPLICATION")
    [undefined] = lint_text(fixed, str(spec)).diagnostics
    assert (undefined.code, undefined.line) == ("TS402", 8)
    [related] = undefined.related
    assert (related.file, related.line) == (str(tmp_path / "lib" / "m.j2"), 3)


def test_unsaved_import_buffers_win_over_the_disk(tmp_path) -> None:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "m.j2").write_text(MACROS)
    spec = str(tmp_path / "job.yaml")
    text = SPEC.replace("    nmae: x\n", "").replace("APPLICATON", "APPLICATION")
    buffer = "{% macro cmd(x) -%}\nrun {{ x }}\n{%- endmacro %}\n"
    assert lint_text(text, spec, LintOptions(overlays={str(tmp_path / "lib" / "m.j2"): buffer})).diagnostics == []
    broken = "{% macro cmd(x) -%}\n{% if %}\n{%- endmacro %}\n"
    [syntax] = lint_text(text, spec, LintOptions(overlays={str(tmp_path / "lib" / "m.j2"): broken})).diagnostics
    assert syntax.code == "TS401" and syntax.related[0].line == 2


def test_too_large_and_not_a_spec(tmp_path) -> None:
    [big] = lint_text("name: x\n" * 100, str(tmp_path / "a.yaml"), LintOptions(max_file_bytes=100)).diagnostics
    assert big.code == "TS002"
    result = lint_text("services: {web: {image: x}}\n", str(tmp_path / "compose.yaml"), LintOptions(only_specs=True))
    assert result.files == [] and result.diagnostics == []


def test_with_a_scheduler_the_dry_run_runs_too(tmp_path) -> None:
    text = "name: x\nroles:\n  - name: a\n    image: /no/such/folder\n    entrypoint: echo\n"
    result = lint_text_with_scheduler(text, str(tmp_path / "a.yaml"), LintOptions(scheduler="local"))
    assert [d.code for d in result.diagnostics] == ["TS601"]
