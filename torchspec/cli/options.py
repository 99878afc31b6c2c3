"""Options shared by several commands, declared once.

click is imported by the functions that declare options, not by the module:
``lint``'s fast path parses its arguments with the helpers here and no click.
"""

from __future__ import annotations

import functools
import os
from typing import Any, Callable, Sequence


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


def template_path_option(f: Callable[..., Any]) -> Callable[..., Any]:
    import click

    return click.option("--template-path", "template_paths", multiple=True,
                        type=click.Path(exists=True, file_okay=False),
                        help="Another folder templates may import from (repeatable; default: [lint] "
                             "template_paths of the config).")(f)


def param_options(f: Callable[..., Any]) -> Callable[..., Any]:
    import click

    f = template_path_option(f)
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


def choice_error(value: str, choices: Sequence[str]) -> str:
    """``'jsn' is not one of text, json; did you mean 'json'?``: the set, and the near miss where there is one."""
    from torchspec.errors import did_you_mean

    guess = did_you_mean(value, choices)
    return f"{value!r} is not one of {', '.join(choices)}" + (f"; did you mean {guess!r}?" if guess else "")


def choice(values: Sequence[str], *, paths: bool = False) -> Any:
    """A ``click.Choice`` that answers a wrong value with a did-you-mean, for every option taking a fixed set.

    ``paths``: a value that is none of ``values`` comes back as an :class:`OutputPath` instead of failing, for
    ``lint -o``, which named a file before it named a format (:func:`output_option` decides what it means).
    """
    return _choice_types()[0](list(values), paths=paths)


class OutputPath(str):
    """What ``-o`` got where it is no format: the file that ``-o`` named before ``--output-file`` did."""


@functools.lru_cache(maxsize=None)
def _choice_types() -> tuple[type, type]:
    """The click classes, made on first use: this module is imported by ``lint``'s fast path, which has no click."""
    import click

    class Choice(click.Choice):  # type: ignore[type-arg]
        def __init__(self, choices: Sequence[str], paths: bool = False) -> None:
            super().__init__(choices)
            self.paths = paths

        def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
            try:
                return super().convert(value, param, ctx)
            except click.BadParameter:
                if self.paths:
                    return OutputPath(value)
                self.fail(choice_error(str(value), [str(c) for c in self.choices]), param, ctx)

    class AliasOption(click.Option):
        """A hidden old spelling of one of the command's options (``alias_of``), kept so scripts keep working."""

        def __init__(self, *args: Any, alias_of: str, **kwargs: Any) -> None:
            super().__init__(*args, hidden=True, **kwargs)
            self.alias_of = alias_of

    return Choice, AliasOption


def alias_option(*decls: str, alias_of: str, **kwargs: Any) -> Callable[..., Any]:
    """``click.option`` for an old spelling: hidden from ``--help``, marked as an alias of ``alias_of``."""
    import click

    return click.option(*decls, cls=_choice_types()[1], alias_of=alias_of, **kwargs)


def warn_deprecated(old: str, new: str) -> None:
    """One line on stderr naming the spelling to use instead; stdout stays what scripts read."""
    import click

    click.echo(f"warning: {old} is deprecated: use {new}", err=True)


def output_option(formats: Sequence[str], help_text: str, *, legacy_format: Sequence[str] = (),
                  json_flag: bool = False, output_file: str | None = None) -> Callable[[Callable[..., Any]], Any]:
    """``-o/--output FORMAT`` (the first of ``formats`` by default): one spelling of "print it as" on every
    command, as on kubectl, so nobody has to remember which command says ``--format`` and which ``--json``.

    The function gets ``fmt`` (and ``output_file`` where ``output_file``, the help of ``--output-file``, is
    given).  Old spellings stay as hidden aliases, so scripts keep working: ``legacy_format`` (``--format``,
    warned about) and ``json_flag`` (``--json``, short for ``-o json``).  With ``legacy_format`` and
    ``output_file`` both (``lint``), ``-o`` still takes the file it took before, but only next to the old
    format option: ``-o FILE`` alone is a usage error saying to use ``--output-file``, where it used to write
    the report to a file named ``json`` without a word.
    """
    import click

    def decorate(f: Callable[..., Any]) -> Any:
        @functools.wraps(f)
        def command(*args: Any, **kwargs: Any) -> Any:
            fmt, path = _resolve_output(formats, kwargs.pop("fmt"), kwargs.pop("legacy_fmt", None), legacy_format,
                                        kwargs.pop("as_json", False), kwargs.get("output_file"))
            if output_file is not None:
                kwargs["output_file"] = path
            return f(*args, fmt=fmt, **kwargs)

        if json_flag:
            command = alias_option("--json", "as_json", alias_of="-o/--output", is_flag=True)(command)
        if legacy_format:
            command = alias_option(*legacy_format, "legacy_fmt", alias_of="-o/--output", type=choice(formats))(command)
        if output_file is not None:
            command = click.option("--output-file", "output_file", type=click.Path(dir_okay=False, writable=True),
                                   metavar="PATH", help=output_file)(command)
        return click.option("-o", "--output", "fmt", type=choice(formats, paths=bool(legacy_format and output_file)),
                            default=formats[0], show_default=True, help=help_text)(command)

    return decorate


def _resolve_output(formats: Sequence[str], fmt: str, legacy_fmt: str | None, legacy_names: Sequence[str],
                    as_json: bool, output_file: str | None) -> tuple[str, str | None]:
    """The format and the file to write, from ``-o`` and its old spellings; a warning for a deprecated one."""
    import click
    from click.core import ParameterSource

    ctx = click.get_current_context()
    given = ctx.get_parameter_source("fmt") not in (ParameterSource.DEFAULT, None)
    old_names = "/".join(legacy_names)
    path = fmt if isinstance(fmt, OutputPath) else None
    if path is not None:
        if legacy_fmt is None:  # `lint -o report.json`: the old meaning of -o, without the old format option
            param = next(p for p in ctx.command.params if p.name == "fmt")
            message = choice_error(path, formats)
            if "did you mean" not in message or any(c in path for c in ("/", ".", os.sep)):
                message += f"; to write the output to a file, use --output-file {path}"
            raise click.BadParameter(message, ctx, param)
        if output_file is not None:
            raise click.UsageError(f"-o {path} and --output-file {output_file} both name the file: give "
                                   "--output-file alone", ctx)
        fmt, given, output_file = formats[0], False, path
    old = legacy_fmt if legacy_fmt is not None else "json" if as_json else None
    if old is not None:
        if given and fmt != old:
            spelling = f"{old_names} {old}" if legacy_fmt is not None else "--json"
            raise click.UsageError(f"-o {fmt} and {spelling} disagree: give the format once, with -o", ctx)
        fmt = old
    if legacy_fmt is not None:
        if path is None:
            warn_deprecated(old_names, f"-o {fmt}")
        else:
            warn_deprecated(f"{old_names} FORMAT -o FILE", f"-o {fmt} --output-file {path}")
    return fmt, output_file
