"""What the language server knows of one open spec: its parsed documents, params, imports and roles.

Built from the loader's parser (``torchspec.loader.parsers``), so every
position is the one lint reports.  A document being typed often does not
parse; the server then keeps using the last model that did
(:attr:`SpecModel.ok`), and completion falls back to the text itself
(:mod:`torchspec.lsp.context`).
"""

from __future__ import annotations

import bisect
import os
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from torchspec.loader.document import Document, Path
from torchspec.loader.parsers import parse


@dataclass
class Node:
    """A value or key of a parsed document found at a cursor (0-based ``line``/``column`` of its start)."""

    document: Document
    path: Path
    key: bool
    line: int
    column: int


@dataclass
class SpecModel:
    path: str
    text: str
    fmt: str
    documents: list[Document] = field(default_factory=list)
    ok: bool = True
    _index: dict[int, list[tuple[int, int, bool, int, Path, bool]]] | None = field(default=None, repr=False)

    @classmethod
    def build(cls, text: str, path: str, fmt: str) -> "SpecModel":
        docs, problems = parse(text, path, fmt)
        return cls(path, text, fmt, docs, ok=not any(d.is_error for d in problems))

    @classmethod
    def recovered(cls, text: str, path: str, fmt: str, attempts: int = 3) -> "SpecModel | None":
        """The model of ``text`` with the lines the parser stopped at blanked out (a line being typed),
        so that what the rest declares is known; None when that does not parse either.  Its ``text``
        is the blanked one, so it is never taken for the document's own positions."""
        lines = text.split("\n")
        for _ in range(attempts):
            docs, problems = parse("\n".join(lines), path, fmt)
            errors = [d for d in problems if d.is_error]
            if not errors:
                return cls(path, "\n".join(lines), fmt, docs)
            line = (errors[0].line or 0) - 1
            if not 0 <= line < len(lines) or not lines[line].strip():
                line = max((n for n in range(min(line, len(lines) - 1), -1, -1) if lines[n].strip()), default=-1)
                if line < 0:
                    return None
            lines[line] = ""
        return None

    # ------------------------------------------------------------ lookups

    def document(self, index: int) -> Document | None:
        return self.documents[index] if 0 <= index < len(self.documents) else None

    def document_at(self, line: int) -> Document | None:
        """The document holding 0-based ``line``: the last one starting at or before it."""
        found = self.documents[0] if self.documents else None
        for doc in self.documents:
            if doc.positions.get((), (1, 1))[0] - 1 <= line:
                found = doc
        return found

    def node_at(self, line: int, column: int) -> Node | None:
        """The key or value that starts last at or before ``column`` on ``line`` (the deepest on a tie)."""
        if self._index is None:
            self._index = _index(self.documents)
        entries = self._index.get(line + 1, [])
        at = bisect.bisect_right([e[0] for e in entries], column + 1) - 1
        if at < 0:
            return None
        col, _, _, doc_index, path, is_key = entries[at]
        return Node(self.documents[doc_index], path, is_key, line, col - 1)


def _index(documents: list[Document]) -> dict[int, list[tuple[int, int, bool, int, Path, bool]]]:
    """Line -> (column, depth, is key, document, path, is key) of every position, sorted."""
    index: dict[int, list[tuple[int, int, bool, int, Path, bool]]] = {}
    for n, doc in enumerate(documents):
        for positions, is_key in ((doc.positions, False), (doc.key_positions, True)):
            for path, (line, col) in positions.items():
                index.setdefault(line, []).append((col, len(path), is_key, n, path, is_key))
    for entries in index.values():
        entries.sort(key=lambda e: (e[0], e[1], e[2]))
    return index


# ---------------------------------------------------------------- what a document declares


def params_of(doc: Document | None) -> dict[str, dict[str, Any]]:
    """The declared params of a document as written: name -> declaration (empty when they cannot be read)."""
    data = doc.data if doc is not None else None
    params = data.get("params") if isinstance(data, dict) else None
    if not isinstance(params, dict):
        return {}
    return {str(k): (v if isinstance(v, dict) else {}) for k, v in params.items()}


def imports_of(doc: Document | None) -> dict[str, str]:
    """Alias -> path of a document's ``imports``."""
    data = doc.data if doc is not None else None
    imports = data.get("imports") if isinstance(data, dict) else None
    if not isinstance(imports, dict):
        return {}
    return {str(k): v for k, v in imports.items() if isinstance(v, str)}


def roles_of(doc: Document | None) -> list[tuple[int, str]]:
    data = doc.data if doc is not None else None
    roles = data.get("roles") if isinstance(data, dict) else None
    if not isinstance(roles, list):
        return []
    return [(i, str(r.get("name", f"roles[{i}]")) if isinstance(r, dict) else f"roles[{i}]")
            for i, r in enumerate(roles)]


def resolve_import(spec_path: str, relative: str, template_paths: Iterable[str] = ()) -> str:
    """The real path an import names, searched as the renderer searches: the spec's folder, then the
    template folders; the first candidate when none exists."""
    roots = [os.path.dirname(os.path.abspath(spec_path))] + [os.path.abspath(p) for p in template_paths]
    candidates = [os.path.realpath(os.path.join(root, relative)) for root in roots]
    return next((c for c in candidates if os.path.isfile(c)), candidates[0])


def param_uses(text: str, name: str) -> list[int]:
    """0-based lines where ``name`` is used inside ``{{ }}`` or ``{% %}`` in ``text``."""
    word = re.compile(r"(?<![\w.])" + re.escape(name) + r"\b")
    found = []
    for n, line in enumerate(text.split("\n")):
        if "{{" in line or "{%" in line:
            spans = re.findall(r"\{\{(.*?)(?:\}\}|$)|\{%(.*?)(?:%\}|$)", line)
            if any(word.search(a or b) for a, b in spans):
                found.append(n)
    return found
