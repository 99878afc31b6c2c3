"""A parsed document: plain data plus where every value came from.

The data is plain Python (dicts, lists, str, int, float, bool, None) so it can
go straight into a compiled JSON Schema validator; positions live beside it,
keyed by the path to each value.  Rendering templates keeps the structure, so
the same positions serve the rendered document and every error keeps its
true line and column.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from torchspec.errors import ERROR, Diagnostic, PathPart, format_path

Path = tuple[PathPart, ...]
Position = tuple[int, int]  # 1-based line and column


#: The last text split into lines, and its lines: the documents of one file share one text, and
#: splitting it once per document made a file of many small documents cost quadratic memory.
_LAST_SPLIT: list[Any] = [None, []]


def _split(text: str) -> list[str]:
    if _LAST_SPLIT[0] is not text:
        _LAST_SPLIT[:] = [text, text.splitlines()]
    return _LAST_SPLIT[1]  # type: ignore[no-any-return]


@dataclass
class Document:
    file: str
    text: str
    data: Any
    index: int = 0
    positions: dict[Path, Position] = field(default_factory=dict)
    key_positions: dict[Path, Position] = field(default_factory=dict)
    format: str = "yaml"
    _lines: list[str] | None = field(default=None, repr=False)

    def locate(self, path: Path, key: bool = False) -> tuple[int | None, int | None]:
        """Line and column of the value at ``path`` (or of its key).

        Falls back to the nearest ancestor that has a position: a template can
        turn one string into a list, and its items then point at the string.
        """
        path = tuple(path)
        if key and path in self.key_positions:
            return self.key_positions[path]
        while True:
            if path in self.positions:
                return self.positions[path]
            if path in self.key_positions:
                return self.key_positions[path]
            if not path:
                return (None, None)
            path = path[:-1]

    def source_line(self, line: int | None) -> str | None:
        if line is None:
            return None
        if self._lines is None:
            self._lines = _split(self.text)
        if 1 <= line <= len(self._lines):
            return self._lines[line - 1]
        return None


    def diagnostic(
        self,
        code: str,
        message: str,
        path: Path = (),
        hint: str | None = None,
        severity: str = ERROR,
        key: bool = False,
    ) -> Diagnostic:
        """A diagnostic positioned at ``path`` (at its key when ``key`` is true)."""
        line, column = self.locate(path, key=key)
        return Diagnostic(
            code=code,
            message=message,
            file=self.file,
            line=line,
            column=column,
            path=format_path(path),
            hint=hint,
            severity=severity,
            document=self.index,
            source_line=self.source_line(line),
        )
