"""Reading the repository's bash scripts as code: where a ``die`` or ``exit`` would end only a subshell.

``set -e`` and ``exit`` do not reach out of a command substitution (``$(...)``, backquotes) or a process
substitution (``<(...)``, ``>(...)``), and a heredoc's substitutions are command substitutions: a ``die``
there ends the subshell alone, and the script goes on with an empty string (how ``scripts/k8s-cluster up``
once wrote ``bin_dir = ""`` into containerd's configuration and reported a cluster up that could run no
pod). This module finds, in a script's text, every substitution from which a ``die`` or an ``exit`` is
reachable: written there, or in a function called there, or in one that function calls, and so on.

It is a small lexer, not a bash parser: enough for the scripts of this repository (quotes, comments,
``$((...))``, nested substitutions, quoted and unquoted heredocs, ``name() {`` functions closed by a
balanced ``}``). Text in quotes and comments never counts as a call; a substitution inside double quotes
or an unquoted heredoc does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, List, Set, Tuple

#: what ends the script (``die`` is the scripts' own: it logs, then exits)
ENDERS = frozenset({"die", "exit"})

_WORD = re.compile(r"(?<![\w$./{-])([A-Za-z_]\w*)(?![\w./=-])")
_FUNCTION = re.compile(r"^[ \t]*(?:function[ \t]+)?([A-Za-z_]\w*)[ \t]*\(\)[ \t]*\{", re.MULTILINE)
_HEREDOC = re.compile(r"<<(-?)[ \t]*(['\"]?)([A-Za-z_]\w*)\2")


@dataclass
class Scan:
    """A script's text with what is not code blanked (``code``), and its substitutions' spans in it."""

    text: str
    code: List[str] = field(default_factory=list)
    substitutions: List[Tuple[int, int]] = field(default_factory=list)

    def line_of(self, index: int) -> int:
        return self.text.count("\n", 0, index) + 1


class _Lexer:
    """One pass over the text; ``code`` keeps code characters and blanks literal text (newlines stay)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.scan = Scan(text=text, code=list(text))
        self.pending: List[Tuple[str, bool, bool]] = []  # heredocs whose bodies start on the next line

    def blank(self, start: int, end: int) -> None:
        for i in range(start, end):
            if self.text[i] != "\n":
                self.scan.code[i] = " "

    def run(self) -> Scan:
        self.code(0, closer="")
        return self.scan

    def code(self, i: int, closer: str) -> int:
        """Code from ``i`` until ``closer`` (``)`` or a backquote) outside quotes; returns its index."""
        text, depth = self.text, 0
        while i < len(text):
            c = text[i]
            if c == "\\":
                i += 2
            elif c == closer and depth == 0:
                return i
            elif c == "(" and closer == ")":
                depth, i = depth + 1, i + 1
            elif c == ")" and closer == ")":
                depth, i = depth - 1, i + 1
            elif c == "'" or text.startswith("$'", i):
                i = self.single_quoted(i + (1 if c == "'" else 2), escapes=c == "$")
            elif c == '"':
                i = self.double_quoted(i + 1)
            elif c == "#" and (i == 0 or text[i - 1] in " \t\n;"):
                end = text.find("\n", i)
                end = len(text) if end < 0 else end
                self.blank(i, end)
                i = end
            elif c == "\n":
                i = self.heredoc_bodies(i + 1)
            elif text.startswith("<<", i) and not text.startswith("<<<", i):
                i = self.heredoc_start(i)
            else:
                i = self.substitution(i) if self.opens_substitution(i) else i + 1
        return i

    def opens_substitution(self, i: int) -> bool:
        text = self.text
        if text[i] == "`":
            return True
        return text[i] in "$<>" and text.startswith("(", i + 1) and not text.startswith("((", i + 1)

    def substitution(self, i: int) -> int:
        """A substitution opening at ``i``: records its inside, lexes it as code; returns the index after it."""
        backquote = self.text[i] == "`"
        start = i + (1 if backquote else 2)
        end = self.code(start, closer="`" if backquote else ")")
        self.scan.substitutions.append((start, end))
        return end + 1

    def single_quoted(self, i: int, escapes: bool) -> int:
        """Literal text up to the closing quote (in ``$'...'`` a backslash escapes the next character)."""
        start = i
        while i < len(self.text) and self.text[i] != "'":
            i += 2 if escapes and self.text[i] == "\\" else 1
        self.blank(start, i)
        return i + 1

    def double_quoted(self, i: int) -> int:
        text = self.text
        while i < len(text) and text[i] != '"':
            if text[i] == "\\":
                self.blank(i, i + 2)
                i += 2
            elif self.opens_substitution(i) and text[i] != "<" and text[i] != ">":
                i = self.substitution(i)
            else:
                self.blank(i, i + 1)
                i += 1
        return i + 1

    def heredoc_start(self, i: int) -> int:
        match = _HEREDOC.match(self.text, i)
        if not match:
            return i + 2
        self.pending.append((match.group(3), bool(match.group(2)), bool(match.group(1))))
        return match.end()

    def heredoc_bodies(self, i: int) -> int:
        """The bodies of the heredocs opened on the line that just ended, from ``i``; returns where code resumes."""
        while self.pending:
            word, quoted, strip_tabs = self.pending.pop(0)
            while i < len(self.text):
                end = self.text.find("\n", i)
                end = len(self.text) if end < 0 else end
                line = self.text[i:end]
                if (line.lstrip("\t") if strip_tabs else line) == word:
                    self.blank(i, end)
                    i = end + 1
                    break
                if quoted:
                    self.blank(i, end)
                else:
                    self.unquoted_body_line(i, end)
                i = end + 1
        return i

    def unquoted_body_line(self, i: int, end: int) -> None:
        """A line of an unquoted heredoc: literal text but for its substitutions."""
        while i < end:
            if self.text[i] == "\\":
                self.blank(i, i + 2)
                i += 2
            elif self.opens_substitution(i) and self.text[i] in "$`":
                i = self.substitution(i)
            else:
                self.blank(i, i + 1)
                i += 1


def scan(text: str) -> Scan:
    return _Lexer(text).run()


def words(code: str) -> Set[str]:
    return set(_WORD.findall(code))


def functions(found: Scan) -> Dict[str, str]:
    """Each function's name and the code of its body (a balanced ``{ ... }`` of the blanked text)."""
    code = "".join(found.code)
    bodies: Dict[str, str] = {}
    for match in _FUNCTION.finditer(code):
        depth, i = 1, match.end()
        while i < len(code) and depth:
            depth += {"{": 1, "}": -1}.get(code[i], 0)
            i += 1
        bodies[match.group(1)] = code[match.end():i - 1]
    return bodies


def enders(bodies: Dict[str, str]) -> Set[str]:
    """The functions that can end the script: those that die or exit, or call one that can, to a fixed point."""
    ending = set(ENDERS)
    calls = {name: words(body) for name, body in bodies.items()}
    changed = True
    while changed:
        changed = False
        for name, called in calls.items():
            if name not in ending and called & ending:
                ending.add(name)
                changed = True
    return ending


def dying_substitutions(text: str) -> List[str]:
    """Each substitution of ``text`` from which a ``die`` or ``exit`` is reachable: ``line N: $(...): via``."""
    found = scan(text)
    ending = enders(functions(found))
    code = "".join(found.code)
    problems = []
    for start, end in sorted(found.substitutions):
        reached = sorted(words(code[start:end]) & ending)
        if reached:
            snippet = " ".join(text[start:end].split())[:80]
            problems.append(f"line {found.line_of(start)}: $({snippet}) reaches {', '.join(reached)}")
    return problems
