"""Go to definition (imports, imported macros, params) and the outline of a spec (name, params, imports, roles)."""

from __future__ import annotations

import os
from typing import Any, Callable

from lsprotocol import types

from torchspec.loader.document import Document
from torchspec.lsp import knowledge
from torchspec.lsp.convert import Units, span
from torchspec.lsp.lookup import IMPORTED, NODE, PARAM, declaration_line, target_at
from torchspec.lsp.model import imports_of, params_of, roles_of
from torchspec.lsp.workspace import OpenDoc, Workspace

_SYMBOL = types.SymbolKind


def definition(ws: Workspace, doc: OpenDoc, line: int, char: int, units: Units,
               uri_of: Callable[[str], str]) -> list[types.Location]:
    target = target_at(ws, doc, line, char)
    if target is None:
        return []
    if target.import_path is not None and (target.kind == IMPORTED or target.path[:1] == ("imports",)):
        where = 0
        source = ws.read(target.import_path)
        if target.member and source is not None:
            found = knowledge.template_names(source).get(target.member)
            where = found.line if found else 0
        point = types.Position(line=where, character=0)
        return [types.Location(uri=uri_of(target.import_path), range=types.Range(start=point, end=point))]
    if target.kind == PARAM or (target.kind == NODE and target.name in target.params and not target.key):
        at = declaration_line(target.document, target.name)
        if at is not None:
            return [types.Location(uri=doc.uri, range=span(doc.lines, at[0], at[1], at[1] + len(target.name),
                                                           units))]
    return []


def symbols(ws: Workspace, doc: OpenDoc, units: Units) -> list[types.DocumentSymbol]:
    """Per document: its name, params, imports and roles (several documents nest under their app names)."""
    model = ws.model(doc.uri)
    if model is None:
        return []
    out = []
    for document in model.documents:
        ends = _last_lines(document)
        children = _document_symbols(document, doc, ends, units)
        if len(model.documents) == 1:
            return children
        data = document.data if isinstance(document.data, dict) else {}
        first = min((s.range.start.line for s in children), default=0)
        last = max((s.range.end.line for s in children), default=first)
        whole = types.Range(start=types.Position(line=first, character=0),
                            end=types.Position(line=last + 1, character=0))
        out.append(types.DocumentSymbol(name=str(data.get("name") or f"document {document.index + 1}"),
                                        kind=_SYMBOL.Module, range=whole, selection_range=whole,
                                        children=children))
    return out


def _document_symbols(document: Document, doc: OpenDoc, ends: dict[tuple[Any, ...], int],
                      units: Units) -> list[types.DocumentSymbol]:
    data = document.data if isinstance(document.data, dict) else {}

    def symbol(path: tuple[Any, ...], name: str, kind: types.SymbolKind, detail: str | None = None,
               children: list[types.DocumentSymbol] | None = None) -> types.DocumentSymbol | None:
        at = document.key_positions.get(path) or document.positions.get(path)
        if at is None:
            return None
        line, col = at[0] - 1, at[1] - 1
        end = max(ends.get(path, line), line)
        whole = types.Range(start=types.Position(line=line, character=0),
                            end=types.Position(line=end, character=units(doc.lines[end]) if end < len(doc.lines)
                                               else 0))
        key = len(str(path[-1])) if path and not isinstance(path[-1], int) else 1
        return types.DocumentSymbol(name=name or "?", kind=kind, detail=detail, range=whole,
                                    selection_range=span(doc.lines, line, col, col + key, units),
                                    children=[c for c in children or [] if c is not None])

    found = [symbol(("name",), str(data.get("name", "")), _SYMBOL.String)]
    params = [symbol(("params", n), n, _SYMBOL.Variable, str(decl.get("type", "")))
              for n, decl in params_of(document).items()]
    found.append(symbol(("params",), "params", _SYMBOL.Namespace, None, params) if params else None)
    imports = [symbol(("imports", alias), alias, _SYMBOL.Module, os.path.basename(path))
               for alias, path in imports_of(document).items()]
    found.append(symbol(("imports",), "imports", _SYMBOL.Namespace, None, imports) if imports else None)
    roles = [symbol(("roles", i), name, _SYMBOL.Class, _image(data, i)) for i, name in roles_of(document)]
    found.append(symbol(("roles",), "roles", _SYMBOL.Namespace, None, roles) if roles else None)
    return [s for s in found if s is not None]


def _image(data: dict[str, Any], index: int) -> str | None:
    role = data["roles"][index]
    return str(role.get("image")) if isinstance(role, dict) and role.get("image") is not None else None


def _last_lines(document: Document) -> dict[tuple[Any, ...], int]:
    """The last 0-based line of every top-level value, param and role (where their outline entries end)."""
    ends: dict[tuple[Any, ...], int] = {}
    for positions in (document.positions, document.key_positions):
        for path, (line, _) in positions.items():
            for depth in (1, 2):
                if len(path) >= depth:
                    prefix = path[:depth]
                    ends[prefix] = max(ends.get(prefix, 0), line - 1)
    return ends
