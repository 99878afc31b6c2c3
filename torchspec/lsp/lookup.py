"""What the cursor points at in a spec: a runtime macro, a name inside a template, or a key or value.

Hover and go-to-definition ask the same question, so it is answered once
here.  The node comes from the loader's positions when the text parses as it
is, else from the text around the cursor (:func:`torchspec.lsp.context.context_at`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from torchspec.loader.document import Document
from torchspec.lsp.context import context_at, macro_span, template_span, word_at
from torchspec.lsp.model import imports_of, params_of, resolve_import
from torchspec.lsp.workspace import OpenDoc, Workspace

MACRO = "macro"
IMPORTED = "imported"  # alias or alias.name inside a template
PARAM = "param"
ENV = "env"
NODE = "node"


@dataclass
class Target:
    kind: str
    name: str  # the macro, the param, the alias, or the word at a node
    start: int  # code points on the cursor's line
    end: int
    path: tuple[Any, ...] = ()
    key: bool = False
    member: str | None = None  # alias.member
    document: Document | None = None
    params: dict[str, dict[str, Any]] = field(default_factory=dict)
    imports: dict[str, str] = field(default_factory=dict)
    import_path: str | None = None  # the real path of an alias's file


def target_at(ws: Workspace, doc: OpenDoc, line: int, char: int) -> Target | None:
    text = doc.lines[line] if line < len(doc.lines) else ""
    model = ws.model(doc.uri)
    document = model.document_at(line) if model else None
    params, imports = params_of(document), imports_of(document)
    macro = macro_span(text, char)
    if macro is not None:
        return Target(MACRO, macro[0], macro[1], macro[2])
    span = template_span(text, char)
    if span is not None:
        word, start, end = word_at(text, char)
        if not word or not span[0] <= start <= span[1]:
            return None
        head, _, member = word.partition(".")
        found = Target(PARAM, head, start, end, document=document, params=params, imports=imports)
        if head in imports:
            found.kind, found.member = IMPORTED, (member.split(".")[0] or None)
            found.import_path = resolve_import(doc.path, imports[head], ws.settings(doc.path).template_paths)
        elif head == "env" and "env" not in params:
            found.kind = ENV
        return found if found.kind != PARAM or head in params else None
    return _node(ws, doc, line, char, text, document, params, imports)


def _node(ws: Workspace, doc: OpenDoc, line: int, char: int, text: str, document: Document | None,
          params: dict[str, dict[str, Any]], imports: dict[str, str]) -> Target | None:
    word, start, end = word_at(text, char, r"[^\s:=,\[\]{}#\"']")
    if not word:
        return None
    model = ws.model(doc.uri)
    node = model.node_at(line, char) if model is not None and model.text == doc.text else None
    if node is not None:
        path, key = node.path, node.key
    else:
        ctx = context_at(doc.text, doc.fmt, line, end)
        path, key = (ctx.path + (word,), True) if ctx.key else (ctx.path, False)
    found = Target(NODE, word, start, end, tuple(path), key, document=document, params=params, imports=imports)
    if len(path) == 2 and path[0] == "imports" and path[1] in imports:
        found.import_path = resolve_import(doc.path, imports[path[1]], ws.settings(doc.path).template_paths)
    return found


def declaration_line(document: Document | None, param: str) -> tuple[int, int] | None:
    """0-based line and column of a param's name under ``params:``."""
    if document is None or ("params", param) not in document.key_positions:
        return None
    line, col = document.key_positions[("params", param)]
    return line - 1, col - 1


def is_identifier(word: str) -> bool:
    return re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", word) is not None
