"""``torchspec new scheduler NAME [DIR]``: start a scheduler plug-in from the package torchspec's tests use."""

from __future__ import annotations

import os

import click

from torchspec.exit_codes import ExitCode


@click.group()
def new() -> None:
    """Start something new from a template: `torchspec new scheduler NAME [DIR]`."""


@new.command("scheduler")
@click.argument("name")
@click.argument("dest", required=False, metavar="[DIR]")
def scheduler(name: str, dest: str | None) -> int:
    """Write a scheduler plug-in package NAME into DIR (default ./torchspec-NAME).

    The package is installable (pyproject.toml registers NAME under the
    torchspec.schedulers entry points), has the module shape of the built-in
    backends, runs each replica as a process on this machine until you replace
    its engine, and comes with tests.  DIR must be new or empty: nothing is
    overwritten.

    Exit codes: 0 written, 2 a bad or built-in NAME, or DIR holds files.
    """
    from torchspec.scaffold import create_scheduler_package, render_scheduler_package

    folder = create_scheduler_package(name, dest)
    click.echo(f"wrote the {name} scheduler's package in {folder}:")
    for relative in render_scheduler_package(name):
        click.echo(f"  {os.path.join(str(folder), relative)}")
    click.echo("next:")
    for step in (f"pip install -e {folder}", f"pytest {os.path.join(str(folder), 'tests')}",
                 f"torchspec submit -s {name} --wait {os.path.join(str(folder), 'examples', 'hello.yaml')}"):
        click.echo(f"  {step}")
    return ExitCode.OK
