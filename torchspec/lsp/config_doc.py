"""Completion and hover in torchspec config files: scheduler names and their run options
(``[scheduler.NAME]``), components and their params (``[component."NAME"]``), and the ``[lint]`` and
``[apply]`` keys.

``pyproject.toml`` holds the same tables under ``[tool.torchspec]``.
"""

from __future__ import annotations

import json
from typing import Any

from lsprotocol import types

from torchspec.lsp import knowledge
from torchspec.lsp.completion import markdown
from torchspec.lsp.context import Context, context_at, toml_parts, word_at
from torchspec.lsp.convert import Units, span
from torchspec.lsp.workspace import OpenDoc

_KIND = types.CompletionItemKind

SECTIONS = {
    "lint": "`torchspec lint` defaults: select, ignore, exclude, strict, template_paths, max_file_size, jobs.",
    "scheduler": "Run option defaults of one scheduler, `[scheduler.NAME]`; `-c` wins.",
    "component": 'Param defaults of a component or spec path, `[component."NAME"]`; `-p` wins.',
    "cli": "`default_scheduler` (TorchX's spelling).",
    "apply": "`torchspec apply` defaults: lock, lock_timeout, lock_duration.",
}
LINT_KEYS = {
    "select": "Only these codes or prefixes (e.g. `[\"TS2\", \"TS501\"]`).",
    "ignore": "Skip these codes or prefixes (e.g. `[\"TS305\"]`).",
    "exclude": "Skip files and folders matching these globs.",
    "strict": "Warnings fail the run too (`true`/`false`).",
    "template_paths": "Further folders imports and includes may read templates from.",
    "max_file_size": "Refuse spec files larger than this many bytes.",
    "jobs": "Processes that lint files at once (0: one per CPU, from 64 files on; 1: one).",
}
APPLY_KEYS = {
    "lock": "What runs take turns on: `\"file\"` (a lock file, this machine) or `\"kubernetes\"` (a Lease on the "
            "cluster, runs on any machine).",
    "lock_timeout": "Seconds to wait for another apply holding the lock (600).",
    "lock_duration": "`lock = \"kubernetes\"`: seconds the Lease lasts unless renewed (60).",
}
#: The keys of the sections that hold plain settings.
SECTION_KEYS = {"lint": LINT_KEYS, "apply": APPLY_KEYS}
DEFAULT_SCHEDULER = "The scheduler `submit`, `run` and the others use without `-s`; the language server also " \
                    "dry-runs every spec on it (lint's TS601)."


def _context(doc: OpenDoc, line: int, char: int) -> Context:
    ctx = context_at(doc.text, "toml", line, char)
    if ctx.path[:2] == ("tool", "torchspec"):
        ctx.path = ctx.path[2:]
    return ctx


def complete(doc: OpenDoc, line: int, char: int, units: Units) -> types.CompletionList:
    ctx = _context(doc, line, char)
    text = doc.lines[line]
    quoted = ctx.start > 0 and text[ctx.start - 1] == '"'
    items = _header_items(ctx, quoted) if ctx.header else _key_items(ctx) if ctx.key else _value_items(ctx, quoted)
    edit_range = span(doc.lines, line, ctx.start, char, units)
    for item in items:
        item.text_edit = types.TextEdit(range=edit_range, new_text=item.insert_text or item.label)
        item.insert_text = None
    return types.CompletionList(is_incomplete=False, items=items)


def _header_items(ctx: Context, quoted: bool) -> list[types.CompletionItem]:
    if ctx.path == ("scheduler",):
        return [types.CompletionItem(label=n, kind=_KIND.Module) for n in knowledge.schedulers()]
    if ctx.path == ("component",):
        return [types.CompletionItem(label=n, kind=_KIND.Module, detail=d,
                                     insert_text=n if quoted else json.dumps(n))
                for n, d in knowledge.components().items()]
    if ctx.path in ((), ("tool",)):
        return [types.CompletionItem(label=n, kind=_KIND.Module, documentation=markdown(d))
                for n, d in SECTIONS.items()]
    return []


def _key_items(ctx: Context) -> list[types.CompletionItem]:
    path = ctx.path
    found: dict[str, str] = {}
    if path in ((), ("cli",)):
        found = {"default_scheduler": DEFAULT_SCHEDULER}
    elif len(path) == 1 and path[0] in SECTION_KEYS:
        found = SECTION_KEYS[str(path[0])]
    elif len(path) == 2 and path[0] == "scheduler":
        found = knowledge.run_options(str(path[1]))
    elif len(path) == 2 and path[0] == "component":
        component = knowledge.component(str(path[1]))
        found = {n: knowledge.param_doc(n, d) for n, d in (component.params if component else {}).items()}
    return [types.CompletionItem(label=n, kind=_KIND.Property, documentation=markdown(d), insert_text=f"{n} = ")
            for n, d in found.items()]


def _value_items(ctx: Context, quoted: bool) -> list[types.CompletionItem]:
    if ctx.path[-1:] == ("default_scheduler",):
        return [types.CompletionItem(label=n, kind=_KIND.Module, insert_text=n if quoted else json.dumps(n))
                for n in knowledge.schedulers()]
    return []


def hover(doc: OpenDoc, line: int, char: int, units: Units) -> types.Hover | None:
    text = doc.lines[line]
    word, start, end = word_at(text, char, r"[A-Za-z0-9_.\-/]")
    if not word:
        return None
    value = _describe(_context(doc, line, end), word.strip("."), text)
    if not value:
        return None
    return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=value),
                       range=span(doc.lines, line, start, end, units))


def _describe(ctx: Context, word: str, text: str) -> str | None:
    path: tuple[Any, ...] = ctx.path + ((word,) if ctx.key or ctx.header else ())
    if ctx.header and text.lstrip().startswith("["):
        path = _header_path(text)
    if path[:1] == ("scheduler",) and len(path) == 2 or path[-1:] == ("default_scheduler",) and not ctx.key:
        name = str(path[1]) if path[0] == "scheduler" else word
        options = knowledge.run_options(name)
        listed = "\n".join(f"- `{n}`" for n in options) or "(none)"
        return f"**scheduler `{name}`**\n\nRun options:\n{listed}" if name in knowledge.schedulers() else None
    if path[:1] == ("component",) and len(path) == 2:
        return _component(str(path[1]))
    if len(path) == 3 and path[0] == "scheduler":
        return knowledge.run_options(str(path[1])).get(str(path[2]))
    if len(path) == 3 and path[0] == "component":
        component = knowledge.component(str(path[1]))
        decl = component.params.get(str(path[2])) if component else None
        return knowledge.param_doc(str(path[2]), decl) if decl is not None else None
    if path in (("default_scheduler",), ("cli", "default_scheduler")):
        return DEFAULT_SCHEDULER
    if len(path) == 2 and path[0] in SECTION_KEYS:
        return SECTION_KEYS[str(path[0])].get(str(path[1]))
    return SECTIONS.get(str(path[0])) if len(path) == 1 else None


def _header_path(text: str) -> tuple[Any, ...]:
    inner = text.strip().strip("[]")
    parts = tuple(toml_parts(inner))
    return parts[2:] if parts[:2] == ("tool", "torchspec") else parts


def _component(name: str) -> str | None:
    component = knowledge.component(name)
    if component is None:
        return None
    call = knowledge.signature(name, component.params)
    return f"```python\n{call}\n```\n\n{component.header or component.description}"
