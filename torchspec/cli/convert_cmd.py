"""``torchspec convert``: a TorchX component (``FILE.py:FUNCTION``) or ``.torchxconfig`` as torchspec files."""

from __future__ import annotations

import os
from typing import Any

import click

from torchspec.cli.options import alias_option, warn_deprecated
from torchspec.cli.submit_cmd import ComponentCommand
from torchspec.exit_codes import ExitCode


@click.command(cls=ComponentCommand)
@click.argument("source", metavar="FILE.py:FUNCTION|.torchxconfig")
@click.argument("component_args", nargs=-1, type=click.UNPROCESSED, metavar="[COMPONENT ARGS]...")
@click.option("--output-file", "output_file", metavar="PATH", help="Write to PATH instead of stdout (never over a "
                                                                   "file that is there, unless --force).")
@alias_option("-o", "--output", "legacy_output", alias_of="--output-file", metavar="PATH")
@click.option("--force", is_flag=True, help="With --output-file: replace PATH if it is there.")
@click.pass_context
def convert(ctx: click.Context, source: str, component_args: tuple[str, ...], output_file: str | None,
            legacy_output: str | None, force: bool) -> int:
    """Write the spec file a TorchX Python component makes, or the config a .torchxconfig means.

    `torchspec convert comp.py:trainer --msg hi --output-file trainer.yaml` writes the
    AppDef the function returns for those arguments, with a typed param (its
    default the value given, its help the docstring's) for each str, int and
    float argument that shows in it as itself; the spec renders to the same
    AppDef (checked: where it would not, the params are left out).
    `torchspec convert .torchxconfig --output-file .torchspec.toml` writes its settings.
    The component runs (its file is imported), as with dryrun.

    Exit codes: 0 ok, 1 the component's code failed, 2 usage error (a
    missing file, function or argument; --output-file names a file that is there).
    """
    from torchspec.components import is_python_component
    from torchspec.components.convert import convert_component, convert_torchx_config
    from torchspec.components.python import component_help

    if legacy_output is not None:  # -o named the file before -o named a format on every command
        warn_deprecated("-o FILE", f"--output-file {legacy_output}")
    output = output_file or legacy_output
    argv = ComponentCommand.component_argv(ctx, component_args)
    if is_python_component(source):
        if ctx.meta.get("torchspec.component_help"):
            click.echo(component_help(source))
            return ExitCode.OK
        text = convert_component(source, argv)
    elif os.path.basename(source) == ".torchxconfig" or source.endswith((".ini", ".cfg", "torchxconfig")):
        if argv:
            raise click.UsageError(f"a config takes no arguments: {' '.join(argv)}", ctx)
        if not os.path.isfile(source):
            raise click.UsageError(f"no such file: {source}", ctx)
        text = convert_torchx_config(source, output, _typed_run_option)
    else:
        raise click.UsageError(f"{source!r} is neither FILE.py:FUNCTION nor a .torchxconfig", ctx)
    if output is None:
        click.echo(text, nl=not text.endswith("\n"))
        return ExitCode.OK
    if os.path.exists(output) and not force:
        raise click.UsageError(f"{output} is there already: nothing was written (--force replaces it)", ctx)
    try:
        with open(output, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise click.UsageError(f"cannot write {output}: {e.strerror}", ctx) from None
    click.echo(f"wrote {output}", err=True)
    return ExitCode.OK


def _typed_run_option(scheduler: str, option: str, text: str) -> Any:
    """A run option's text as the value of its type where the scheduler declares a bool, int or float
    (``use_cwd = true``), else the text (a str, list or dict option reads its text as -c does)."""
    from torchspec.errors import UsageError
    from torchspec.runner import get_runner

    try:
        opt = get_runner().scheduler_run_opts(scheduler).get(option)
    except UsageError:  # a scheduler that is not installed here
        return text
    if opt is None or opt.opt_type not in (bool, int, float):
        return text
    try:
        return opt.cast_to_type(text)
    except (TypeError, ValueError):
        return text

