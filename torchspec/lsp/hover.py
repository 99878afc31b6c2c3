"""Hover: what a field, a param, a runtime macro or an imported macro is, in Markdown."""

from __future__ import annotations

import os
from typing import Any

from lsprotocol import types

from torchspec.lsp import knowledge
from torchspec.lsp.convert import Units, span
from torchspec.lsp.lookup import ENV, IMPORTED, MACRO, NODE, PARAM, Target, declaration_line, target_at
from torchspec.lsp.model import param_uses
from torchspec.lsp.workspace import OpenDoc, Workspace

ENV_DOC = ("**`env(name, default)`** · the value of an environment variable; without a default an unset "
           "variable is an error (TS406). The only way a template reads the environment: `torchspec render "
           "--show-env` lists the names read, and render and dryrun hide the values.")


def hover(ws: Workspace, doc: OpenDoc, line: int, char: int, units: Units) -> types.Hover | None:
    target = target_at(ws, doc, line, char)
    if target is None:
        return None
    text = _markdown(ws, doc, target)
    if not text:
        return None
    return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=text),
                       range=span(doc.lines, line, target.start, target.end, units))


def _markdown(ws: Workspace, doc: OpenDoc, target: Target) -> str | None:
    if target.kind == MACRO:
        found = knowledge.runtime_macros().get(target.name)
        return f"**runtime macro `${{{target.name}}}`**\n\n{found}" if found else None
    if target.kind == ENV:
        return ENV_DOC
    if target.kind == PARAM:
        return _param(doc, target, target.name)
    if target.kind == IMPORTED:
        return _imported(ws, target)
    assert target.kind == NODE
    path = target.path
    if path[:1] == ("params",) and len(path) == 2 and target.key and target.name in target.params:
        return _param(doc, target, target.name)
    if path[:1] == ("imports",) and len(path) == 2 and target.import_path:
        return _imported(ws, target)
    if not target.key and path[-1:] == ("resource",):
        resource = _named_resource(target.name)
        if resource:
            return resource
    return knowledge.field_doc(path)


def _param(doc: OpenDoc, target: Target, name: str) -> str:
    text = knowledge.param_doc(name, target.params.get(name, {}))
    uses = [n + 1 for n in param_uses(doc.text, name)]
    where = declaration_line(target.document, name)
    if where is not None:
        text += f"\n\nDeclared on line {where[0] + 1}"
    if uses:
        shown = ", ".join(str(n) for n in uses[:20]) + (", ..." if len(uses) > 20 else "")
        text += f"; used on line{'s' if len(uses) > 1 else ''} {shown}"
    else:
        text += "; not used in this file (TS305)"
    return text


def _imported(ws: Workspace, target: Target) -> str | None:
    assert target.import_path is not None
    source = ws.read(target.import_path)
    shown = os.path.basename(target.import_path)
    if source is None:
        return f"**import `{target.name}`**: {target.import_path} cannot be read (TS405)"
    names = knowledge.template_names(source)
    member = target.member
    if member and member in names:
        found = names[member]
        body = f"```jinja\n{target.name}.{found.signature}\n```"
        return body + (f"\n\n{found.doc}" if found.doc else "") + f"\n\nDefined in {shown}, line {found.line + 1}"
    listed = ", ".join(f"`{n.signature}`" for n in names.values()) or "no macros"
    return f"**import `{target.name}`** · {target.import_path}\n\nDefines: {listed}"


def _named_resource(name: str) -> str | None:
    from torchspec.specs.named_resources import named_resources

    try:
        if name not in named_resources:
            return None
        resource: Any = named_resources[name]
    except Exception:  # noqa: BLE001 - a broken resource plug-in must not break hover
        return None
    return (f"**named resource `{name}`**\n\ncpu {resource.cpu}, gpu {resource.gpu}, memMB {resource.memMB}"
            + (f", capabilities {resource.capabilities}" if resource.capabilities else "")
            + (f", devices {resource.devices}" if resource.devices else ""))
