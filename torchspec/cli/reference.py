"""The ``torchspec`` command tree with every command loaded, for the documentation site's CLI reference.

``mkdocs-click`` (``docs/reference/cli.md``) imports :data:`cli`.  The real
command (:func:`torchspec.cli.main.build_cli`) loads a command only when it
is run, to keep start-up fast; this module is imported by nothing else, so
building the whole tree here costs the CLI nothing.
"""

from __future__ import annotations

import copy
import importlib

import click

from torchspec.cli.main import COMMANDS, build_cli


def reference_cli() -> click.Group:
    """A click group with every command of :data:`~torchspec.cli.main.COMMANDS` under its own name.

    An alias (``run`` is ``submit``) is a copy of its command under the alias's name, whose help says so.
    """
    top = build_cli()
    group = click.Group(name="torchspec", help=top.help, params=top.params,
                        context_settings=top.context_settings)
    for name in sorted(COMMANDS):
        module, attr, summary = COMMANDS[name]
        command = getattr(importlib.import_module(module), attr)
        if command.name != name:
            command = copy.copy(command)
            command.name = name
            command.help = f"{summary} It takes the same arguments and options."
            command.short_help = summary
        group.add_command(command, name)
    return group


#: what ``::: mkdocs-click`` documents (``:module: torchspec.cli.reference``, ``:command: cli``)
cli = reference_cli()

__all__ = ["cli", "reference_cli"]
