"""``torchspec diff``: what a change to spec files changes in what would run."""

from __future__ import annotations

import contextlib

import click

from torchspec.cli.options import output_option, param_options, parse_params

_FORMATS = ("text", "markdown", "json", "github")  # torchspec.gitops.report.FORMATS, without importing it


@click.command()
@click.argument("files", nargs=-1, metavar="OLD NEW | --base REF [PATHS]...")
@click.option("--base", metavar="REF",
              help="Compare every spec changed since the git ref REF (and every spec using a changed import or "
                   "params file) with the working tree; PATHS limit which specs.")
@param_options
@click.option("-s", "--scheduler", metavar="SCHEDULER",
              help="Also compare the scheduler's native request (what dryrun prints) as a unified diff.")
@click.option("-c", "--cfg", "cfg", metavar="KEY=VALUE,...", help="The scheduler's run options, as dryrun takes them.")
@output_option(_FORMATS, "text (coloured on a terminal), markdown (a pull-request comment), json, or github "
                         "(workflow annotations).", legacy_format=("--format",))
@click.option("--allow-python-components", "allow_python", is_flag=True, default=None,
              help="OLD and NEW may be FILE.py:FUNCTION components, compared as the specs `torchspec convert` makes"
                   " of them by running them (their code runs: only for code you trust, never a pull request's);"
                   " -p values are their arguments. Config: [diff] allow_python_components.")
def diff(files: tuple[str, ...], base: str | None, params: tuple[str, ...], params_file: str | None,
         template_paths: tuple[str, ...], scheduler: str | None, cfg: str | None, fmt: str,
         allow_python: bool | None) -> int:
    """Show what changes in what would run: field by field, role by role, not line by line.

    \b
      torchspec diff old.yaml new.yaml
      torchspec diff --base origin/main                  # every changed spec of the repository
      torchspec diff --base main jobs/ -s kubernetes     # and the manifests, as a unified diff

    Both sides are rendered with their params (missing required params get
    the same stand-in values on both sides), so reformatting or reordering
    keys shows nothing. With --base the old side is read from git (imports
    and params files too); nothing is checked out. Values env() read are
    secrets: shown as changed or not, never printed.

    Exit codes, as `git diff --exit-code`: 0 no change, 1 changes, 7 a side
    of a spec does not load (reported; the other files are still compared),
    2 usage error (not a git repository, an unknown ref or scheduler).
    """
    from torchspec.cli.apps_cmd import open_runner
    from torchspec.gitops.diff import DiffOptions, diff_base, diff_files
    from torchspec.gitops.report import render
    from torchspec.terminal import should_color

    if base is None and len(files) != 2:
        raise click.UsageError("give two files, OLD NEW, or --base REF [PATHS]...")
    if cfg and not scheduler:
        raise click.UsageError("-c sets a scheduler's run options: name the scheduler with -s")
    from torchspec.config import load_config
    from torchspec.config import template_paths as config_template_paths

    config = load_config()
    options = DiffOptions(params=parse_params(params), params_file=params_file,
                          template_paths=config_template_paths(config, template_paths))
    if allow_python is None:
        allow_python = bool(config.section("diff").get("allow_python_components", False))
    options.allow_python_components = allow_python
    with contextlib.ExitStack() as stack:
        runner = None
        if scheduler:
            runner = stack.enter_context(open_runner())
            options.scheduler = runner.check_scheduler(scheduler)
            options.run_options = runner.run_options(options.scheduler, cfg)
        if base is not None:
            from torchspec.gitops.git import Repo

            result = diff_base(Repo(), base, files, options, runner)
        else:
            from torchspec.components import is_python_component, refuse_python

            for path in files:
                if allow_python and is_python_component(path):
                    continue
                refuse_python(path, "diff (without --allow-python-components)")
                click.Path(exists=True, dir_okay=False).convert(path, None, None)
            result = diff_files(files[0], files[1], options, runner)
    import sys

    color = fmt == "text" and should_color(sys.stdout)
    click.echo(render(result, fmt, color=color), nl=False, color=color)
    return result.exit_code
