"""Options shared by several commands, declared once.

click is imported by the functions that declare options, not by the module:
``lint``'s fast path parses its arguments with the helpers here and no click.
"""

from __future__ import annotations

from typing import Any, Callable


def parse_params(values: tuple[str, ...]) -> dict[str, str]:
    """``-p name=value`` pairs; later ones win, as on most CLIs."""
    out: dict[str, str] = {}
    for item in values:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            import click

            raise click.BadParameter(f"{item!r} is not name=value", param_hint="'-p' / '--param'")
        out[name.strip()] = value
    return out


def param_options(f: Callable[..., Any]) -> Callable[..., Any]:
    import click

    f = click.option("--template-path", "template_paths", multiple=True, type=click.Path(exists=True, file_okay=False),
                     help="Another folder templates may import from (repeatable).")(f)
    f = click.option("--params-file", type=click.Path(exists=True, dir_okay=False),
                     help="YAML, JSON or TOML file of param values (-p wins over it).")(f)
    f = click.option("-p", "--param", "params", multiple=True, metavar="NAME=VALUE",
                     help="Set a param (repeatable).")(f)
    return f


def app_option(f: Callable[..., Any]) -> Callable[..., Any]:
    """``--app NAME``: one app of a spec file that holds several (``---`` separated)."""
    import click

    return click.option("--app", "app_name", metavar="NAME",
                        help="The app to use from a file holding several (by its name); "
                             "without it such a file is an error listing the names.")(f)


def split_commas(values: tuple[str, ...]) -> list[str]:
    return [v.strip() for item in values for v in item.split(",") if v.strip()]
