"""An :class:`~torchspec.gitops.apply.ApplyResult` (a plan, or what was done) as text, markdown or json.

Pure functions, result in, string out; the CLI prints.  Identities and paths
come from the repository, so text has its control characters made visible
and markdown puts them in code spans and escaped HTML, as the diff reports do.

The json shape (``version`` 1; adding keys is compatible, anything else bumps it)::

    {"version": 1, "scheduler": "local", "scope": "default", "applied": false,
     "summary": {"create": 1, "replace": 0, "prune": 0, "unchanged": 2, "error": 0,
                 "done": 0, "skipped": 0, "failed": 0},
     "steps": [{"action": "create" | "unchanged" | "replace" | "prune" | "error",
                "status": "planned" | "done" | "skipped" | "failed" | "untouched",
                "identity": "jobs/train.yaml", "path": "jobs/train.yaml", "app": "train" | null,
                "hash": "v1-..." | null, "handle": "local://torchspec/train-x1" | null,
                "found": [{"handle": ..., "state": "RUNNING", "hash": "v1-...", "identity": ..., "file": ...}],
                "message": "", "errors": [lint's json diagnostics]}]}
"""

from __future__ import annotations

import html
import json
from typing import Any

from torchspec.gitops.apply import ACTIONS, ApplyResult, Step
from torchspec.gitops.report import diagnostic_lines, draw, fence, md_code
from torchspec.report.text import Line, clean

FORMATS = ("text", "markdown", "json")
#: Bumped when a json key is renamed, removed or changes meaning.
FORMAT_VERSION = 1

_DONE = {"create": "created", "replace": "replaced", "prune": "pruned"}
_STYLE = {"create": "green", "created": "green", "replace": "yellow", "replaced": "yellow", "prune": "red",
          "pruned": "red", "unchanged": "dim", "skipped": "yellow", "failed": "bold red", "error": "bold red"}


def render(result: ApplyResult, fmt: str, *, color: bool = False) -> str:
    """The whole report; ``color`` is a request only ``text`` honours."""
    if fmt == "json":
        return json.dumps(report_dict(result), indent=2) + "\n"
    if fmt == "markdown":
        return markdown(result)
    return draw(layout(result), color)


def verb(step: Step) -> str:
    """What a step says it did: the action of a plan; ``created``, ``skipped``, ``failed``... once applied."""
    if step.status == "done":
        return _DONE.get(step.action, step.action)
    return step.action if step.status in ("planned", "untouched") else step.status


def name(step: Step) -> str:
    """The identity, and the file where the identity does not start with it (a declared one)."""
    return step.identity if step.identity.startswith(step.path) else f"{step.identity} ({step.path})"


def detail(step: Step) -> str:
    """The handles (new, found, cancelled), the hashes of a replace, or why a step did not happen."""
    old = ", ".join(f.handle for f in step.found)
    if _why(step):
        return step.message
    if step.action == "unchanged":
        return step.handle or ""
    if step.action == "create":
        return step.handle if step.status == "done" else short(step.hash)
    if step.action == "replace":
        if step.status == "done":
            return f"{step.handle} (cancelled {old})"
        hashes = ", ".join(sorted({short(f.hash) for f in step.found}))
        return f"{old} ({hashes} -> {short(step.hash)})"
    return f"cancelled {old}" if step.status == "done" else old


def short(digest: str | None) -> str:
    """A content hash as people read it: ``v1-`` and 12 hex digits (json has them whole)."""
    return digest[:15] if digest else "no hash"


def summary(result: ApplyResult) -> str:
    """``Plan: 1 to create, 2 unchanged (local, scope default)`` or ``Applied: 1 created, 2 unchanged``."""
    if not result.applied:
        parts = [f"{result.count(a)} {'to ' + a if a in _DONE else a}" for a in ACTIONS if result.count(a)]
        text = "Plan: " + (", ".join(parts) if parts else "nothing to apply")
    else:
        parts = [f"{result.count(a, 'done')} {done}" for a, done in _DONE.items() if result.count(a, "done")]
        parts += [f"{n} {word}" for word, n in (
            ("unchanged", result.count("unchanged")),
            ("skipped", sum(1 for s in result.steps if s.status == "skipped")),
            ("failed", sum(1 for s in result.steps if s.status == "failed")),
            ("error" if result.count("error") == 1 else "errors", result.count("error"))) if n]
        text = "Applied: " + (", ".join(parts) if parts else "nothing to apply")
    return f"{text} ({result.scheduler}, scope {result.scope})"


# ---------------------------------------------------------------- text


def layout(result: ApplyResult) -> list[Line]:
    """The text report as styled lines (see torchspec.report.text): one line per step, errors under theirs."""
    width = max((len(verb(s)) for s in result.steps), default=0)
    names = max((len(name(s)) for s in result.steps), default=0)
    lines: list[Line] = []
    for step in result.steps:
        word = verb(step)
        lines.append([(word.ljust(width), _STYLE.get(word)), ("  " + clean(name(step)).ljust(names), "bold"),
                      ("  " + clean(detail(step)), None)])
        lines.extend([("    ", None), *line] for line in diagnostic_lines(step.errors))
    if lines:
        lines.append([])
    lines.append([(summary(result), "bold")])
    return lines


# ---------------------------------------------------------------- markdown


def markdown(result: ApplyResult) -> str:
    """A pull-request comment: the summary, a table of the steps that do something, the errors collapsed."""
    title = "torchspec apply" + (" --plan" if not result.applied else "")
    out = [f"### {title} on {md_code(result.scheduler)}\n\n{html.escape(summary(result))}\n"]
    shown = [s for s in result.steps if s.action != "unchanged"]
    if shown:
        out.append("\n| action | spec | apps, or why not |\n| --- | --- | --- |\n")
        out.extend(f"| {verb(s)} | {_cell(name(s))} | {_cell(detail(s), code=not _why(s))} |\n" for s in shown)
    for step in (s for s in result.steps if s.errors):
        text = "\n".join(f"{d.location()}: {d.code} {d.message}" for d in step.errors)
        ticks = fence(text)
        out.append(f"\n<details><summary><code>{html.escape(step.path)}</code> does not load</summary>\n\n"
                   f"{ticks}\n{text}\n{ticks}\n\n</details>\n")
    return "".join(out)


def _why(step: Step) -> bool:
    """Whether a step's detail is a message (why it did not happen) rather than handles and hashes."""
    return step.status in ("skipped", "failed") or step.action == "error"


def _cell(text: str, code: bool = True) -> str:
    """``text`` in a table cell: a code span (or escaped text) without pipes or line breaks."""
    text = " ".join(text.split()).replace("|", "/")
    return (f"`{md_code(text)}`" if code else html.escape(text)) if text else ""


# ---------------------------------------------------------------- json


def report_dict(result: ApplyResult) -> dict[str, Any]:
    """The json report as plain data, in the key order it is written."""
    counts: dict[str, int] = {a: result.count(a) for a in ACTIONS}
    counts.update({s: sum(1 for step in result.steps if step.status == s) for s in ("done", "skipped", "failed")})
    return {"version": FORMAT_VERSION, "scheduler": result.scheduler, "scope": result.scope,
            "applied": result.applied, "summary": counts, "steps": [_step_dict(s) for s in result.steps]}


def _step_dict(step: Step) -> dict[str, Any]:
    from torchspec.report.json_report import diagnostic_dict

    return {"action": step.action, "status": step.status, "identity": step.identity, "path": step.path,
            "app": step.app_name, "hash": step.hash, "handle": step.handle,
            "found": [{"handle": f.handle, "state": str(f.state), "hash": f.hash, "identity": f.identity,
                       "file": f.file} for f in step.found],
            "message": step.message, "errors": [diagnostic_dict(d) for d in step.errors]}
