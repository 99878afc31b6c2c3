"""``torchspec schema``: print the published JSON Schema (or its strict variant)."""

from __future__ import annotations

import json

import click


@click.command()
@click.option("--strict", is_flag=True,
              help="Print the variant for rendered documents (no template strings allowed).")
def schema(strict: bool) -> int:
    """Print the AppDef JSON Schema (draft 2020-12) for editors and other tools."""
    from torchspec.loader.schema import load_schema, schema_text, strict_schema

    if strict:
        click.echo(json.dumps(strict_schema(load_schema()), indent=2))
    else:
        click.echo(schema_text().rstrip())
    return 0
