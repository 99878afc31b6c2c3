"""``torchspec convert``: a TorchX component (``FILE.py:FUNCTION``) or ``.torchxconfig`` as torchspec files."""

from __future__ import annotations

import os

import click

from torchspec.cli.submit_cmd import ComponentCommand
from torchspec.exit_codes import ExitCode


@click.command(cls=ComponentCommand)
@click.argument("source", metavar="FILE.py:FUNCTION|.torchxconfig")
@click.argument("component_args", nargs=-1, type=click.UNPROCESSED, metavar="[COMPONENT ARGS]...")
@click.option("-o", "--output", metavar="FILE", help="Write to FILE instead of stdout (never over a file that is"
                                                     " there, unless --force).")
@click.option("--force", is_flag=True, help="With -o: replace FILE if it is there.")
@click.pass_context
def convert(ctx: click.Context, source: str, component_args: tuple[str, ...], output: str | None,
            force: bool) -> int:
    """Write the spec file a TorchX Python component makes, or the config a .torchxconfig means.

    `torchspec convert comp.py:trainer --msg hi -o trainer.yaml` writes the
    AppDef the function returns for those arguments, with a typed param (its
    default the value given, its help the docstring's) for each str, int and
    float argument that shows in it as itself; the spec renders to the same
    AppDef (checked: where it would not, the params are left out).
    `torchspec convert .torchxconfig -o .torchspec.toml` writes its settings.
    The component runs (its file is imported), as with dryrun.

    Exit codes: 0 ok, 1 the component's code failed, 2 usage error (a
    missing file, function or argument; -o names a file that is there).
    """
    from torchspec.components import is_python_component
    from torchspec.components.convert import convert_component, convert_torchx_config
    from torchspec.components.python import component_help

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
        text = convert_torchx_config(source)
    else:
        raise click.UsageError(f"{source!r} is neither FILE.py:FUNCTION nor a .torchxconfig", ctx)
    if output is None:
        click.echo(text, nl=not text.endswith("\n"))
        return ExitCode.OK
    if os.path.exists(output) and not force:
        raise click.UsageError(f"{output} is there already: nothing was written (--force replaces it)", ctx)
    with open(output, "w", encoding="utf-8") as f:
        f.write(text)
    click.echo(f"wrote {output}", err=True)
    return ExitCode.OK
