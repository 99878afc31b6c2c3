"""``torchspec render``: show exactly what a spec becomes once params and templates are applied."""

from __future__ import annotations

import json
import sys

import click

from torchspec.cli.options import app_option, output_option, param_options, parse_params


@click.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@output_option(("yaml", "json"), "Output format.", legacy_format=("--format",))
@click.option("--show-env", is_flag=True, help="List (on stderr) the environment variables the templates read.")
@click.option("--reveal-env", is_flag=True,
              help="Print the values env() read as they are (they are hidden by default: they may be secrets).")
@param_options
@app_option
def render(file: str, fmt: str, show_env: bool, reveal_env: bool, params: tuple[str, ...], params_file: str | None,
           template_paths: tuple[str, ...], app_name: str | None) -> int:
    """Print the materialised AppDef(s) of FILE after params and templates.

    Runtime macros such as ${app_id} stay as they are: schedulers fill them in.
    Values read with env() show as <value from env(NAME)> unless --reveal-env.
    """
    from torchspec.cli import console
    from torchspec.config import load_config
    from torchspec.config import template_paths as config_template_paths
    from torchspec.loader import LoadOptions, load_file, select_documents
    from torchspec.specs.convert import dump_app

    loaded = load_file(file, LoadOptions(params=parse_params(params), params_file=params_file,
                                         template_paths=config_template_paths(load_config(), template_paths)))
    documents = select_documents(loaded, app_name)
    found = loaded.diagnostics + [d for doc in documents for d in doc.diagnostics]
    if found:
        console.diagnostics(found)
    if any(d.is_error for d in found):
        return 1
    apps = [dump_app(d.app) for d in documents if d.app is not None]
    if not reveal_env:  # before encoding: quoted or escaped, a value no longer reads as written
        from torchspec.redaction import redact_data

        apps = redact_data(apps)
    if fmt == "json":
        text = json.dumps(apps[0] if len(apps) == 1 else apps, indent=2)
    else:
        import yaml

        text = yaml.safe_dump_all(apps, sort_keys=False, default_flow_style=False, width=1000).rstrip()
    click.echo(text)
    if show_env:
        names = sorted({n for d in documents for n in d.env_read})
        print("environment variables read: " + (", ".join(names) if names else "none"), file=sys.stderr)
    return 0
