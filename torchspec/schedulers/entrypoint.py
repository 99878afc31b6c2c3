"""Where a replica's program is found, for the schedulers that run processes on hosts they can see.

``local`` and ``slurm`` both start a role's entrypoint in a folder (the
role's "image"), so both resolve it the same way: one rule, one message.
``local`` also looks inside a ``bash -c COMMAND`` role (``dist.ddp`` is one)
for the program the command starts: a replica that fails with ``torchrun:
command not found`` after the submit is a preflight that did not happen.
"""

from __future__ import annotations

import os
import shutil
from typing import Optional, Sequence

from torchspec.errors import AppRefusedError

#: Programs a package installs, and how to get them: the fix goes with the refusal.
_INSTALLS = {
    "torchrun": "install PyTorch, which provides torchrun: pip install torch (or pip install 'torchspec-cli[torch]')",
    "python": "name an interpreter that is installed (python3, or its full path), or install Python",
}
#: Shells whose ``-c COMMAND`` is read for its first program (a login shell, ``-lc``, may change PATH: not read).
_SHELLS = frozenset({"bash", "sh", "dash", "zsh", "ksh"})
#: Words a shell runs itself, never from PATH (bash's keywords and builtins).
_SHELL_OWN = frozenset(
    "! [[ ]] { } case coproc do done elif else esac fi for function if in select then time until while"
    " . : [ alias bg bind break builtin caller cd command compgen complete compopt continue declare dirs disown"
    " echo enable eval exit export false fc fg getopts hash help history jobs kill let local logout mapfile"
    " popd printf pushd pwd read readarray readonly return set shift shopt source suspend test times trap true"
    " type typeset ulimit umask unalias unset wait".split())
#: A word with one of these is expanded or redirected by the shell: what it runs cannot be known here.
_SHELL_SYNTAX = frozenset("$`(){};|&<>*?[]~#=\\'\"")


def resolve_entrypoint(role_name: str, entrypoint: str, img_root: str, search_path: Optional[str]) -> str:
    """The program to run: a file under the image folder if there is one, else a command on PATH.

    A relative entrypoint that exists under ``img_root`` becomes its absolute
    path there; any other is left as written for the replica's ``PATH`` to
    resolve, after checking here that it does resolve, so a typo fails the
    submit instead of every replica.
    """
    if os.path.isabs(entrypoint):
        if not os.path.exists(entrypoint):
            raise AppRefusedError(f"role {role_name!r}: entrypoint {entrypoint} does not exist")
        return entrypoint
    under_image = os.path.join(img_root, entrypoint)
    if os.path.isfile(under_image):
        return os.path.normpath(under_image)
    if shutil.which(entrypoint, path=search_path) is not None:
        return entrypoint
    raise AppRefusedError(
        f"role {role_name!r}: entrypoint {entrypoint!r} is neither a file under the image folder {img_root}"
        f" nor a command on PATH", _INSTALLS.get(entrypoint)
    )


def check_shell_command(role_name: str, entrypoint: str, args: Sequence[str], img_root: str,
                        search_path: Optional[str]) -> None:
    """Refuse a ``bash -c COMMAND`` role whose command starts a program the replica will not find.

    Only the command's first program is looked at, and only when it is
    written plainly (no variable, quote or glob in it), so what is refused
    is certain to fail: the same PATH the replica gets (``search_path``,
    which holds the image folder), or the file relative to the image folder.
    """
    program = shell_command_program(entrypoint, args)
    if program is None:
        return
    if "/" in program:
        if os.path.exists(os.path.join(img_root, program)):
            return
        raise AppRefusedError(f"role {role_name!r}: {program}, which its {os.path.basename(entrypoint)} -c command"
                              f" starts, does not exist (relative to the image folder {img_root})")
    if shutil.which(program, path=search_path) is None:
        raise AppRefusedError(
            f"role {role_name!r}: {program!r}, which its {os.path.basename(entrypoint)} -c command starts, is not"
            f" a command on the replicas' PATH, so every replica would fail with `{program}: command not found`",
            _INSTALLS.get(program, f"install {program}, or set PATH in the role's env to where it is"))


def shell_command_program(entrypoint: str, args: Sequence[str]) -> Optional[str]:
    """The program ``entrypoint -c COMMAND`` starts first, where a shell is the entrypoint and the program is
    written plainly; None where there is none or it cannot be known without running the shell."""
    if os.path.basename(entrypoint) not in _SHELLS or len(args) < 2 or args[0] != "-c":
        return None
    words = args[1].split()
    while words and _assigns(words[0]):  # A=1 B=2 torchrun ...: variables set for the command
        words = words[1:]
    if words[:1] == ["exec"]:
        words = words[1:]
    if not words or words[0] in _SHELL_OWN or _SHELL_SYNTAX & set(words[0]):
        return None
    return words[0]


def _assigns(word: str) -> bool:
    """``NAME=value``: a variable set for the command, not the command."""
    name, sep, _ = word.partition("=")
    return bool(sep) and name.isidentifier()
