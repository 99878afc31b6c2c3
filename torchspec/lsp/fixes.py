"""Quick fixes: a diagnostic whose hint says ``did you mean 'x'?`` offers to write ``x`` in place.

The misspelt text is the first quoted word of the message (``unknown key
'nmae'``, ``'nnode' is undefined``, ``unknown macro '${appid}'``); it is
looked for on the diagnostic's line from its start, then anywhere on the lines
of the value (a template's failing line can be further down a block).
"""

from __future__ import annotations

import re
from typing import Sequence

from lsprotocol import types

from torchspec.lsp.convert import SOURCE, Units, character, span

_GUESS = re.compile(r"did you mean '([^']+)'")
_QUOTED = re.compile(r"'([^']+)'|\"([^\"]+)\"")
#: lines below the diagnostic's own searched for the misspelt word (a block scalar's later lines)
_LOOK_AHEAD = 20


def replacement(message: str) -> tuple[str, str] | None:
    """``(wrong, right)`` from a diagnostic message carrying a did-you-mean hint."""
    guess = _GUESS.search(message)
    head = message.split("\nhint:")[0]
    wrong = _QUOTED.search(head)
    if not guess or not wrong:
        return None
    return wrong.group(1) or wrong.group(2), guess.group(1)


def code_actions(uri: str, lines: Sequence[str], diagnostics: Sequence[types.Diagnostic],
                 units: Units) -> list[types.CodeAction]:
    actions = []
    for d in diagnostics:
        if d.source != SOURCE:
            continue
        found = replacement(d.message)
        if found is None:
            continue
        wrong, right = found
        start_line = d.range.start.line
        start = character(lines, start_line, d.range.start.character, units)
        edit = _locate(lines, start_line, start, wrong, right)
        if edit is None:
            continue
        line, begin, end, new_text = edit
        actions.append(types.CodeAction(
            title=f"Replace '{wrong}' with '{right}'", kind=types.CodeActionKind.QuickFix, diagnostics=[d],
            is_preferred=True,
            edit=types.WorkspaceEdit(changes={uri: [types.TextEdit(range=span(lines, line, begin, end, units),
                                                                  new_text=new_text)]})))
    return actions


def _locate(lines: Sequence[str], line: int, start: int, wrong: str,
            right: str) -> tuple[int, int, int, str] | None:
    """Where ``wrong`` is written, and the text to put there: ``(line, start, end, new text)``."""
    candidates = [(wrong, right)]
    if "=" in right and "=" not in wrong:  # mount strings: 'bnd' -> 'type=bind'
        candidates.insert(0, (right.split("=", 1)[0] + "=" + wrong, right))
    for written, new_text in candidates:
        for n in range(line, min(line + _LOOK_AHEAD, len(lines))):
            text = lines[n]
            at = text.find(written, start if n == line else 0)
            if at < 0 and n == line:
                at = text.find(written)
            if at >= 0:
                return n, at, at + len(written), new_text
    return None
