"""``torchspec lint FILE.py:FUNCTION``: a Python component checked against TorchX's standard, never run.

The findings of :func:`torchspec.specs.file_linter.validate` become TS511
diagnostics at their line and column, so every reporter (text, json,
github, sarif) and the exit code treat them as any spec's.
"""

from __future__ import annotations

import os

from torchspec.errors import Diagnostic, UsageError, did_you_mean

__all__ = ["lint_component"]

CODE = "TS511"


def lint_component(ref: str) -> tuple[str, list[Diagnostic]]:
    """The file ``ref`` names and the TS511 diagnostics of its function (empty: it meets the standard)."""
    from torchspec.components import PYTHON_COMPONENT
    from torchspec.specs.file_linter import defined_functions, validate

    match = PYTHON_COMPONENT.match(ref)
    if match is None:
        raise UsageError(f"{ref!r} is not a Python component", "write path/to/file.py:function")
    path, function = match.group("path"), match.group("function")
    if not os.path.isfile(path):
        raise UsageError(f"component {ref}: no such file: {path}",
                         "a Python component is FILE.py:FUNCTION, the path relative to this folder or absolute")
    try:
        lines = open(path, encoding="utf-8").read().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        return path, [Diagnostic("TS001", f"cannot read the file: {e}", file=path)]
    found = []
    for message in validate(path, function):
        line = message.line or None
        hint = None
        if message.description.endswith(" not found"):
            functions = defined_functions(path)
            guess = did_you_mean(function, functions)
            hint = (f"did you mean {guess!r}?" if guess else
                    f"its functions: {', '.join(functions)}" if functions else "the file defines no function")
        found.append(Diagnostic(CODE, message.description, file=path, line=line,
                                column=message.char + 1 if line else None, hint=hint,
                                source_line=lines[line - 1] if line and line <= len(lines) else None))
    return path, found
