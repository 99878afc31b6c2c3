"""Completion in a spec: field names and enum values in place, params and imported macros inside ``{{ }}``,
runtime macros after ``${``.  Works on half-typed text (:mod:`torchspec.lsp.context`)."""

from __future__ import annotations

import json
from typing import Any, Iterable

from lsprotocol import types

from torchspec.loader.rules import HOSTS_MACRO
from torchspec.lsp import knowledge
from torchspec.lsp.context import Context, context_at, sibling_keys
from torchspec.lsp.convert import Units, span
from torchspec.lsp.model import imports_of, params_of, resolve_import
from torchspec.lsp.workspace import OpenDoc, Workspace

#: what the client is asked to complete on without the user asking
TRIGGERS = ["{", "$", ".", ":", " ", '"', "[", "-"]

_KIND = types.CompletionItemKind


def complete(ws: Workspace, doc: OpenDoc, line: int, char: int, units: Units) -> types.CompletionList:
    ctx = context_at(doc.text, doc.fmt, line, char)
    edit_range = span(doc.lines, line, ctx.start, char, units)
    if ctx.macro is not None:
        items = _macros(doc.lines[line][char:char + 1] != "}")
    elif ctx.template is not None:
        items = _template_names(ws, doc, ctx, line)
    elif ctx.key:
        items = _keys(ws, doc, ctx, line)
    else:
        items = _values(doc, ctx, _quoted(doc.lines[line], ctx.start))
    for item in items:
        item.text_edit = types.TextEdit(range=edit_range, new_text=item.insert_text or item.label)
        item.insert_text = None
    return types.CompletionList(is_incomplete=False, items=items)


def markdown(text: str | None) -> types.MarkupContent | None:
    return types.MarkupContent(kind=types.MarkupKind.Markdown, value=text) if text else None


def _macros(close: bool) -> list[types.CompletionItem]:
    """Every runtime macro; ``hosts_env`` takes a role's name after ``:``, left for the user to type."""
    def written(name: str) -> str:
        return f"{name}:ROLE" if name == HOSTS_MACRO[:-1] else name

    return [types.CompletionItem(label=name, kind=_KIND.Constant, detail=f"${{{written(name)}}} runtime macro",
                                 documentation=markdown(doc),
                                 insert_text=HOSTS_MACRO if name == HOSTS_MACRO[:-1] else name + ("}" if close else ""))
            for name, doc in knowledge.runtime_macros().items()]


def _template_names(ws: Workspace, doc: OpenDoc, ctx: Context, line: int) -> list[types.CompletionItem]:
    model = ws.model(doc.uri)
    document = model.document_at(line) if model else None
    params, imports = params_of(document), imports_of(document)
    alias, dot, _ = (ctx.template or "").rpartition(".")
    if dot:
        if alias not in imports:
            return []
        source = ws.read(resolve_import(doc.path, imports[alias], ws.settings(doc.path).template_paths)) or ""
        return [types.CompletionItem(label=n.name, kind=_KIND.Function if "(" in n.signature else _KIND.Variable,
                                     detail=n.signature, documentation=markdown(n.doc))
                for n in knowledge.template_names(source).values()]
    items = [types.CompletionItem(label=name, kind=_KIND.Variable, detail=f"param · {decl.get('type', '?')}",
                                  documentation=markdown(knowledge.param_doc(name, decl)))
             for name, decl in params.items()]
    items += [types.CompletionItem(label=alias, kind=_KIND.Module, detail=f"import · {path}")
              for alias, path in imports.items()]
    if "env" not in params:
        items.append(types.CompletionItem(label="env", kind=_KIND.Function, detail='env("NAME", "default")'))
    return items


def _keys(ws: Workspace, doc: OpenDoc, ctx: Context, line: int) -> list[types.CompletionItem]:
    present = _present_keys(ws, doc, ctx, line)
    quoted = _quoted(doc.lines[line], ctx.start)
    suffix = {"toml": " = ", "json": '": '}.get(doc.fmt, ": ")
    items = []
    for name, schema in knowledge.properties(ctx.path).items():
        if name in present or name == "$schema":
            continue
        text = name + suffix if doc.fmt != "json" else ("" if quoted else '"') + name + suffix
        items.append(types.CompletionItem(label=name, kind=_KIND.Property, detail=schema.get("title"),
                                          documentation=markdown(knowledge.field_doc(ctx.path + (name,))),
                                          insert_text=text, sort_text=f"0{name}"))
    return items + _values(doc, ctx, quoted=False)


def _present_keys(ws: Workspace, doc: OpenDoc, ctx: Context, line: int) -> set[str]:
    """Keys already written in the mapping being completed: from the text itself, or (JSON) its parse."""
    if doc.fmt != "json":
        return sibling_keys(doc.lines, line, doc.fmt)
    model = ws.model(doc.uri)
    document = model.document(ctx.document) if model is not None and model.text == doc.text else None
    value: Any = document.data if document is not None else None
    for part in ctx.path:
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and isinstance(part, int) and part < len(value):
            value = value[part]
        else:
            return set()
    return {k for k in value if k != ctx.word} if isinstance(value, dict) else set()


def _values(doc: OpenDoc, ctx: Context, quoted: bool) -> list[types.CompletionItem]:
    values: list[Any] = list(knowledge.enum_values(ctx.path))
    if ctx.path[-1:] == ("resource",) and not ctx.key:
        values += _named_resources()
    items = []
    for value in values:
        label = value if isinstance(value, str) else json.dumps(value)
        text = label
        if isinstance(value, str) and doc.fmt in ("toml", "json") and not quoted:
            text = json.dumps(value)
        items.append(types.CompletionItem(label=label, kind=_KIND.EnumMember, insert_text=text,
                                          sort_text=f"1{label}"))
    return items


def _quoted(text: str, start: int) -> bool:
    return start > 0 and text[start - 1] in "\"'"


def _named_resources() -> Iterable[str]:
    from torchspec.specs.named_resources import named_resources

    try:
        return sorted(str(n) for n in named_resources if n not in ("NULL", "MISSING"))
    except Exception:  # noqa: BLE001 - a broken resource plug-in must not break completion
        return []
