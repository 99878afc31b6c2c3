"""A :class:`~torchspec.gitops.diff.DiffResult` as text, markdown, json or GitHub annotations.

Pure functions, result in, string out; the CLI prints.  Values come from spec
files in pull requests, so what is shown has its control characters made
visible (text), sits in code fences longer than any run of backticks in it
and in escaped HTML (markdown), or is escaped as ``@actions/core`` does
(github).  Secrets never reach here: the canonical forms hold them redacted.

The json shape (``version`` 1; adding keys is compatible, anything else bumps it)::

    {"version": 1, "base": "main" | null, "scheduler": "kubernetes" | null, "compared": 12,
     "summary": {"changed": 3, "errors": 1},
     "files": [{"path": "jobs/a.yaml", "old_path": "jobs/a.yaml" | null,
                "status": "added" | "removed" | "modified" | "renamed",
                "reasons": ["lib/macros.j2 changed"], "stand_ins": ["nnodes"],
                "apps": [{"name": "a", "status": "added" | "removed" | "modified" | "unchanged",
                          "changes": [{"field": "roles.r.args", "path": ["roles", "r", "args"],
                                       "kind": "added" | "removed" | "changed",
                                       "old": ..., "new": ...}          # or "secret": true, no values
                                      ],
                          "native": "unified diff" | null}],
                "errors": {"old" | "new": [lint's json diagnostics]}}]}
"""

from __future__ import annotations

import html
import json
import re
from typing import Any

from torchspec.errors import Diagnostic
from torchspec.gitops.diff import AppDiff, DiffResult, FieldChange, FileDiff
from torchspec.report.text import Line, clean

FORMATS = ("text", "markdown", "json", "github")
#: Bumped when a json key is renamed, removed or changes meaning.
FORMAT_VERSION = 1
#: markdown: lines shown per file before the rest is cut, and the size of the whole comment
#: (GitHub refuses comments over 65,536 characters).
MARKDOWN_FILE_LINES = 60
MARKDOWN_MAX_CHARS = 60_000

_STYLE = {"-": "red", "+": "green"}


def render(result: DiffResult, fmt: str, *, color: bool = False) -> str:
    """The whole report; ``color`` is a request only ``text`` honours."""
    if fmt == "json":
        return json.dumps(report_dict(result), indent=2) + "\n"
    if fmt == "markdown":
        return markdown(result)
    if fmt == "github":
        return annotations(result)
    return draw(layout(result), color)


def draw(lines: list[Line], color: bool) -> str:
    """Styled lines as text: coloured (ANSI) or plain."""
    if color:
        from torchspec.report.text import to_ansi

        return to_ansi(lines)
    return "".join("".join(text for text, _ in line) + "\n" for line in lines)


def summary(result: DiffResult) -> str:
    """``2 files change what runs, 1 does not load (12 compared)``."""
    shown = result.shown
    changed = sum(1 for f in shown if f.changed and not f.errors)
    failed = sum(1 for f in shown if f.errors)
    parts = []
    if changed:
        parts.append(f"{changed} file{'s' if changed != 1 else ''} change{'s' if changed == 1 else ''} what runs")
    if failed:
        parts.append(f"{failed} file{'s do' if failed != 1 else ' does'} not load")
    text = ", ".join(parts) if parts else "No change in what runs"
    return f"{text} ({result.compared} compared)"


# ---------------------------------------------------------------- text


def layout(result: DiffResult) -> list[Line]:
    """The text report as styled lines (see torchspec.report.text)."""
    lines: list[Line] = []
    for file in result.shown:
        lines.append([(clean(file_title(file)), "bold")])
        for side, found in file.errors.items():
            lines.append([(f"  does not load ({side} side):", "bold red")])
            lines.extend([("    ", None), *line] for line in diagnostic_lines(found))
        for app in file.apps:
            if app.status == "unchanged":
                continue
            lines.append([(f"  app {clean(app.name)}: {app.status}", "bold")])
            for change in app.changes:
                lines.extend([[("    ", None), (text, style)] for text, style in _change_lines(change)])
            if app.native:
                lines.append([(f"    {result.scheduler} request:", "bold")])
                lines.extend([("      " + clean(n), _native_style(n))] for n in app.native)
    if lines:
        lines.append([])
    lines.append([(summary(result), "bold")])
    return lines


def file_title(file: FileDiff) -> str:
    """``jobs/a.yaml: modified (lib/macros.j2 changed)``; a rename names both paths."""
    name = file.path if file.old_path in (None, file.path) else f"{file.old_path} -> {file.path}"
    notes = list(file.reasons)
    if file.stand_ins:
        notes.append("stand-in values for " + ", ".join(file.stand_ins))
    return f"{name}: {file.status}" + (f" ({'; '.join(notes)})" if notes else "")


def _change_lines(change: FieldChange) -> list[tuple[str, str | None]]:
    """``field: kind`` then ``- old`` / ``+ new``; a secret says only that it changed."""
    if change.secret:
        return [(f"{clean(change.name)}: secret {change.kind} (not shown)", "yellow")]
    lines: list[tuple[str, str | None]] = [(f"{clean(change.name)}: {change.kind}", "cyan")]
    if change.kind != "added":
        lines.append((f"  - {clean(_value(change.old))}", "red"))
    if change.kind != "removed":
        lines.append((f"  + {clean(_value(change.new))}", "green"))
    return lines


def _native_style(line: str) -> str | None:
    if line.startswith(("---", "+++")):
        return "bold"
    if line.startswith("@@"):
        return "cyan"
    return _STYLE.get(line[:1])


def diagnostic_lines(found: list[Diagnostic]) -> list[Line]:
    from torchspec.lint.result import LintResult
    from torchspec.report.text import layout as lint_layout

    return lint_layout(LintResult(files=sorted({d.file for d in found}), diagnostics=found), summary=False)


def _value(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


# ---------------------------------------------------------------- markdown


def markdown(result: DiffResult, file_lines: int = MARKDOWN_FILE_LINES, max_chars: int = MARKDOWN_MAX_CHARS) -> str:
    """A pull-request comment: a title, the summary, then one collapsed ``<details>`` block per file.

    A file's block shows at most ``file_lines`` lines, and files stop once
    the comment would pass ``max_chars``; what is cut is counted.
    """
    against = f" against `{md_code(result.base)}`" if result.base else ""
    on = f" on {result.scheduler}" if result.scheduler else ""
    head = f"### torchspec diff{against}{on}\n\n{summary(result)}\n"
    blocks: list[str] = []
    size = len(head)
    shown = result.shown
    for index, file in enumerate(shown):
        block = _markdown_file(file, result.scheduler, file_lines)
        if size + len(block) > max_chars:
            left = len(shown) - index
            blocks.append(f"\n*{left} more file{'s' if left != 1 else ''} not shown: "
                          "run `torchspec diff` to see them all.*\n")
            break
        blocks.append(block)
        size += len(block)
    return head + "".join(blocks)


def _markdown_file(file: FileDiff, scheduler: str | None, max_lines: int) -> str:
    apps = [a for a in file.apps if a.status != "unchanged"]
    what = ", ".join(f"{a.name} {a.status}" for a in apps)
    title = html.escape(file_title(file))
    summary_line = f"<code>{title}</code>" + (f": {html.escape(what)}" if what else "")
    body: list[str] = []
    for side, found in file.errors.items():
        body.append(f"- does not load ({side} side):")
        body.extend(f"{d.location()}: {d.code} {d.message}" for d in found)
    for app in apps:
        if not (app.changes or app.native):  # added or removed: the summary line says so
            continue
        body.append(f"@@ {app.name}: {app.status} @@")
        for change in app.changes:
            body.extend(_diff_line(text) for text, _ in _change_lines(change))
        if app.native:
            body.append(f"@@ {app.name}: the {scheduler} request @@")
            body.extend(app.native)
    cut = len(body) - max_lines
    if cut > 0:
        body = body[:max_lines] + [f"... {cut} more line{'s' if cut != 1 else ''} not shown"]
    text = "\n".join(body)
    ticks = fence(text)
    return (f"\n<details><summary>{summary_line}</summary>\n\n{ticks}diff\n{text}\n{ticks}\n\n</details>\n"
            if body else f"\n- {summary_line}\n")


def _diff_line(text: str) -> str:
    """A change line in a ``diff`` block: values keep their ``-``/``+`` at the start, headers are context."""
    stripped = text.lstrip()
    if stripped.startswith(("- ", "+ ")):
        return stripped[0] + " " + stripped[2:]
    return "  " + text


def fence(text: str) -> str:
    """A backtick fence longer than any run of backticks in ``text``."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def md_code(text: str) -> str:
    return text.replace("`", "'")


# ---------------------------------------------------------------- json


def report_dict(result: DiffResult) -> dict[str, Any]:
    """The json report as plain data, in the key order it is written."""
    shown = result.shown
    return {
        "version": FORMAT_VERSION,
        "base": result.base,
        "scheduler": result.scheduler,
        "compared": result.compared,
        "summary": {"changed": sum(1 for f in shown if f.changed and not f.errors),
                    "errors": sum(1 for f in shown if f.errors)},
        "files": [_file_dict(f) for f in shown],
    }


def _file_dict(file: FileDiff) -> dict[str, Any]:
    from torchspec.report.json_report import diagnostic_dict

    return {
        "path": file.path,
        "old_path": file.old_path,
        "status": file.status,
        "reasons": file.reasons,
        "stand_ins": file.stand_ins,
        "apps": [_app_dict(a) for a in file.apps],
        "errors": {side: [diagnostic_dict(d) for d in found] for side, found in file.errors.items()},
    }


def _app_dict(app: AppDiff) -> dict[str, Any]:
    return {"name": app.name, "status": app.status, "changes": [_change_dict(c) for c in app.changes],
            "native": "\n".join(app.native) + "\n" if app.native else None}


def _change_dict(change: FieldChange) -> dict[str, Any]:
    out: dict[str, Any] = {"field": change.name, "path": list(change.path), "kind": change.kind}
    if change.secret:
        out["secret"] = True
        return out
    if change.kind != "added":
        out["old"] = change.old
    if change.kind != "removed":
        out["new"] = change.new
    return out


# ---------------------------------------------------------------- github


def annotations(result: DiffResult) -> str:
    """One ``::notice`` per changed file (what changed, by field), the errors of a side that does not load
    (``::error`` on the new side, ``::warning`` for the old one), and the summary as a ``::notice``."""
    from torchspec.report.github import annotation, escape_data, escape_property

    out: list[str] = []
    for file in result.shown:
        for d in file.errors.get("new", []):
            out.append(annotation(d))
        old_title = escape_property(f"does not load at {result.base or 'OLD'}")
        for d in file.errors.get("old", []):
            message = f"{d.location()}: {d.code} {d.message}"
            out.append(f"::warning file={escape_property(file.path)},title={old_title}::{escape_data(message)}")
        if file.changed and not file.errors:
            title = escape_property(f"torchspec diff: {file.status}")
            out.append(f"::notice file={escape_property(file.path)},title={title}::{escape_data(_what_changed(file))}")
    out.append(f"::notice title=torchspec diff::{escape_data(summary(result))}")
    return "".join(line + "\n" for line in out)


def _what_changed(file: FileDiff) -> str:
    parts = []
    for app in file.apps:
        if app.status == "unchanged":
            continue
        fields = [f"{'secret ' if c.secret else ''}{c.name} {c.kind}" for c in app.changes]
        if app.native and not fields:
            fields.append("the scheduler request changed")
        parts.append(f"{app.name} {app.status}" + (": " + ", ".join(fields) if fields else ""))
    text = "; ".join(parts) or ("renamed from " + str(file.old_path) if file.status == "renamed" else file.status)
    return text + (f" ({'; '.join(file.reasons)})" if file.reasons else "")
