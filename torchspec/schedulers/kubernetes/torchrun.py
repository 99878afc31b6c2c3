"""Reading a role's torchrun launch, and taking out the rendezvous options an operator provides instead.

The Kubeflow flavors run one torchrun role the way ``dist.ddp`` renders it
(``bash -c "torchrun --rdzv_backend c10d --rdzv_endpoint ... train.py"``),
``torchrun ...`` or ``python -m torch.distributed.run ...`` as the
entrypoint.  The operator (Training Operator, Trainer's torch runtime) gives
every node the rendezvous in ``PET_*`` variables, which torchrun reads as the
defaults of its options; so :func:`find_launch` takes the options that name
the rendezvous and the node count out of the command, verbatim everywhere
else (a shell script keeps its quoting, pipes and variables), and reports
what they said so the flavor can put it in the manifest.  Pure text work.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

from torchspec.specs import Role

_RENDEZVOUS = ("rdzv_backend", "rdzv_endpoint", "rdzv_id", "nnodes", "nproc_per_node", "node_rank", "master_addr",
               "master_port", "standalone")
#: The options the operator's rendezvous replaces, in both spellings torchrun accepts.
RENDEZVOUS_OPTIONS = frozenset(f"--{spelling}" for name in _RENDEZVOUS for spelling in (name, name.replace("_", "-")))
#: torchrun options that take no value (every other option takes one, unless written ``--opt=value``).
_FLAGS = {"--standalone", "--no_python", "--no-python", "--run_path", "--run-path", "-m", "--module", "-h", "--help"}
_SHELLS = {"bash", "sh", "dash", "zsh"}
_PYTHON = re.compile(r"python[0-9.]*")
_OPERATORS = set(";&|()\n")


@dataclass
class Launch:
    """A role's torchrun launch: where it is, what its rendezvous options said, and the role's args without them."""

    #: the role's args with the rendezvous options taken out
    args: List[str]
    #: what the options taken out said, by option name without dashes (``nnodes``, ``nproc_per_node``...)
    options: Dict[str, str] = field(default_factory=dict)
    #: the options taken out, as written, for the dry run's notes
    dropped: List[str] = field(default_factory=list)

    def value(self, *names: str) -> Optional[str]:
        """The value of the first of ``names`` (``rdzv_endpoint``...) that the command gave."""
        return next((self.options[n] for n in names if n in self.options), None)

    @property
    def nnodes(self) -> Optional[Tuple[str, str]]:
        """``--nnodes`` as (min, max): ``2`` is (2, 2), ``1:4`` is (1, 4); None where not given."""
        text = self.value("nnodes")
        if text is None:
            return None
        low, _, high = text.partition(":")
        return low, high or low

    @property
    def port(self) -> Optional[int]:
        """The rendezvous port the command named (``--rdzv_endpoint HOST:PORT``, ``--master_port``), if a number."""
        endpoint = self.value("rdzv_endpoint")
        text = endpoint.rpartition(":")[2] if endpoint and ":" in endpoint else self.value("master_port")
        return int(text) if text and text.isdigit() else None


def _option_name(word: str) -> str:
    return word.split("=", 1)[0]


def _canonical(option: str) -> str:
    """``--nproc-per-node`` -> ``nproc_per_node``."""
    return option.lstrip("-").replace("-", "_")


def _options(words: Sequence[str]) -> Iterator[Tuple[int, int, str, Optional[str]]]:
    """(first word, last word, option, value) of each torchrun option in ``words``, up to the script."""
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--" or not word.startswith("-") or word == "-":
            return
        name = _option_name(word)
        if "=" in word:
            yield i, i, name, word.split("=", 1)[1]
        elif name in _FLAGS:
            yield i, i, name, None
            if name in ("-m", "--module"):
                return  # the module name comes next: the options end there
        else:
            yield i, min(i + 1, len(words) - 1), name, words[i + 1] if i + 1 < len(words) else None
            i += 1
        i += 1


def _strip(words: Sequence[str]) -> Tuple[List[int], Dict[str, str], List[str]]:
    """Which of ``words`` to take out (indexes), what the rendezvous options said, and the options as written."""
    drop: List[int] = []
    said: Dict[str, str] = {}
    written: List[str] = []
    for first, last, name, value in _options(words):
        if name in RENDEZVOUS_OPTIONS:
            drop.extend(range(first, last + 1))
            written.append(" ".join(words[first:last + 1]))
            said[_canonical(name)] = value if value is not None else ""
        elif name in ("--max_restarts", "--max-restarts") and value is not None:
            said["max_restarts"] = value
    return drop, said, written


# ----------------------------------------------------------------------------
# A shell script's words, with where each one is in the text
# ----------------------------------------------------------------------------


def _skip_expansion(text: str, i: int) -> int:
    """The index after the ``$(...)`` or ``${...}`` starting at ``i`` (nested ones included)."""
    close = ")" if text[i + 1] == "(" else "}"
    opening = text[i + 1]
    depth, i = 0, i + 1
    while i < len(text):
        if text[i] == opening:
            depth += 1
        elif text[i] == close:
            depth -= 1
            if depth == 0:
                return i + 1
        elif text[i] == "\\":
            i += 1
        i += 1
    return i


def _quoted(text: str, i: int) -> Tuple[int, str]:
    """The index after the quoted string starting at ``i``, and its value."""
    quote, i, value = text[i], i + 1, ""
    while i < len(text) and text[i] != quote:
        if quote == '"' and text[i] == "\\" and i + 1 < len(text) and text[i + 1] in '"\\$`':
            i += 1
        value += text[i]
        i += 1
    return i + 1, value


def shell_words(text: str) -> List[Tuple[int, int, str]]:
    """(start, end, word) of every word of a shell script, an operator (``;``, ``&&``, ``|``, newline...)
    being a word of its own; quotes are taken off the words' values, expansions kept as written."""
    words: List[Tuple[int, int, str]] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c in " \t" or (c == "\\" and text[i + 1:i + 2] == "\n"):
            i += 2 if c == "\\" else 1
        elif c == "#":
            while i < len(text) and text[i] != "\n":
                i += 1
        elif c in _OPERATORS:
            words.append((i, i + 1, c))
            i += 1
        else:
            start, value = i, ""
            while i < len(text) and text[i] not in " \t" and text[i] not in _OPERATORS:
                if text[i] in "'\"":
                    i, part = _quoted(text, i)
                    value += part
                elif text[i] == "$" and text[i + 1:i + 2] in ("(", "{"):
                    end = _skip_expansion(text, i)
                    value += text[i:end]
                    i = end
                elif text[i] == "\\" and i + 1 < len(text):
                    value += text[i + 1]
                    i += 2
                else:
                    value += text[i]
                    i += 1
            words.append((start, i, value))
    return words


def _launcher_at(words: Sequence[str], i: int) -> Optional[int]:
    """Where torchrun's options start when the simple command at ``words[i]`` runs torchrun, else None."""
    while i < len(words) and (words[i] in ("exec", "env", "time") or re.fullmatch(r"[A-Za-z_]\w*=.*", words[i])):
        i += 1
    if i >= len(words):
        return None
    program = os.path.basename(words[i])
    if program == "torchrun":
        return i + 1
    if _PYTHON.fullmatch(program):
        if words[i + 1:i + 3] == ["-m", "torch.distributed.run"]:
            return i + 3
        if i + 1 < len(words) and words[i + 1] == "-mtorch.distributed.run":
            return i + 2
    return None


def _in_script(script: str) -> Optional[Tuple[str, Dict[str, str], List[str]]]:
    """The script with the first torchrun's rendezvous options taken out, what they said, and as written."""
    spans = shell_words(script)
    words = [w for _, _, w in spans]
    for i, word in enumerate(words):
        if i and words[i - 1] not in _OPERATORS:
            continue  # not the start of a simple command
        start = _launcher_at(words, i)
        if start is None:
            continue
        end = next((j for j in range(start, len(words)) if words[j] in _OPERATORS), len(words))
        drop, said, _ = _strip(words[start:end])
        out, last = "", 0
        for k in sorted(d + start for d in drop):
            out += script[last:spans[k][0]]
            last = spans[k + 1][0] if k + 1 < len(spans) else len(script)
        written = [script[spans[k][0]:spans[k][1]] for k in sorted(d + start for d in drop)]
        return out + script[last:], said, _join_options(written)
    return None


def _join_options(written: List[str]) -> List[str]:
    """Words as written -> one entry per option (``--nnodes 2`` rather than ``--nnodes``, ``2``)."""
    out: List[str] = []
    for word in written:
        if out and not word.startswith("-") and "=" not in out[-1] and out[-1] not in _FLAGS:
            out[-1] += " " + word
        else:
            out.append(word)
    return out


def find_launch(role: Role) -> Optional[Launch]:
    """The role's torchrun launch with the rendezvous options taken out; None when the role does not run torchrun.

    Found as the entrypoint (``torchrun``, ``python -m torch.distributed.run``) or as the first command of a
    ``bash -c``/``sh -c`` script that runs it (after ``exec``, ``env`` or variable assignments).
    """
    program = os.path.basename(role.entrypoint)
    args = list(role.args)
    start: Optional[int] = None
    if program == "torchrun":
        start = 0
    elif _PYTHON.fullmatch(program) and args[:2] == ["-m", "torch.distributed.run"]:
        start = 2
    if start is not None:
        drop, said, written = _strip(args[start:])
        kept = [a for i, a in enumerate(args) if i - start not in drop]
        return Launch(args=kept, options=said, dropped=_join_options(written))
    if program not in _SHELLS:
        return None
    flag = next((i for i, a in enumerate(args) if re.fullmatch(r"-[A-Za-z]*c[A-Za-z]*", a)), None)
    if flag is None or flag + 1 >= len(args):
        return None
    found = _in_script(args[flag + 1])
    if found is None:
        return None
    script, said, written = found
    return Launch(args=args[:flag + 1] + [script] + args[flag + 2:], options=said, dropped=written)
