"""``torchspec lint``: options in, LintResult to a reporter, exit code out."""

from __future__ import annotations

import sys

import click

from torchspec.cli.options import param_options, parse_params, split_commas

FORMATS = ["text", "json", "github", "sarif"]


@click.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("-f", "--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True,
              help="Report format.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), help="Write the report to a file.")
@click.option("--select", multiple=True, metavar="CODES", help="Only these codes or prefixes (e.g. TS2,TS501).")
@click.option("--ignore", multiple=True, metavar="CODES", help="Skip these codes or prefixes.")
@click.option("--exclude", multiple=True, metavar="GLOB", help="Skip files and folders matching GLOB.")
@click.option("--strict", is_flag=True, default=None, help="Warnings fail the run too.")
@click.option("--max-file-size", type=click.IntRange(min=1), metavar="BYTES", help="Refuse larger files.")
@click.option("--explain", metavar="CODE", help="Explain a code (or 'all') and exit.")
@click.option("--color/--no-color", default=None, help="Force colour on or off (default: on a terminal).")
@click.option("--only-specs", is_flag=True,
              help="Skip named files that do not look like specs too (for pre-commit, which passes every YAML file).")
@click.option("--show-env", is_flag=True, help="List (on stderr) the environment variables each file's templates read.")
@click.option("--scheduler", metavar="SCHEDULER",
              help="Also dry-run each spec on SCHEDULER, contacting no backend (TS601); for kubernetes also "
                   "validate the manifests against the official schemas (TS602, needs kubernetes-validate).")
@click.option("-c", "--cfg", "cfg", metavar="KEY=VALUE,...",
              help="Run options for --scheduler, as for submit (see: torchspec runopts SCHEDULER).")
@click.option("--k8s-version", "k8s_versions", multiple=True, metavar="VERSION",
              help="With --scheduler kubernetes: a Kubernetes version to validate for (repeatable; default: the "
                   "oldest and newest kubernetes-validate bundles). Unless -c sets k8s_version, manifests are "
                   "rendered for the oldest one.")
@click.option("--crd", "crd_paths", multiple=True, type=click.Path(exists=True, dir_okay=False), metavar="PATH",
              help="With --scheduler kubernetes: a CustomResourceDefinition file (repeatable) to validate custom "
                   "objects against, instead of the JobSet and Volcano Job CRDs that ship with torchspec.")
@param_options
def lint(paths: tuple[str, ...], fmt: str, output: str | None, select: tuple[str, ...], ignore: tuple[str, ...],
         exclude: tuple[str, ...], strict: bool | None, max_file_size: int | None, explain: str | None,
         color: bool | None, only_specs: bool, show_env: bool, scheduler: str | None, cfg: str | None,
         k8s_versions: tuple[str, ...], crd_paths: tuple[str, ...], params: tuple[str, ...],
         params_file: str | None, template_paths: tuple[str, ...]) -> int:
    """Lint spec files and folders (default: the current folder).

    Folders are searched for *.yaml, *.yml, *.toml and *.json files that look
    like specs. Settings under [lint] in .torchspec.toml or [tool.torchspec.lint]
    in pyproject.toml apply; flags win over them.

    With --scheduler NAME each spec that lints clean is also dry-run on NAME
    (e.g. torchspec lint --scheduler kubernetes -c flavor=jobset --crd
    jobset-crd.yaml jobs/); [scheduler.NAME] config defaults apply below -c.

    Exit codes: 0 clean, 1 errors found (or warnings with --strict), 2 usage error.
    """
    from torchspec.config import load_config
    from torchspec.lint import LintOptions, lint_paths
    from torchspec.report import get_reporter

    if explain is not None:
        return _explain(explain)
    if not scheduler and (cfg or k8s_versions or crd_paths):
        from torchspec.errors import UsageError

        raise UsageError("-c, --k8s-version and --crd need --scheduler", "e.g. --scheduler kubernetes")
    full_config = load_config()
    config = full_config.section("lint")
    options = LintOptions(
        select=split_commas(select) or list(config.get("select", [])),
        ignore=split_commas(ignore) or list(config.get("ignore", [])),
        exclude=list(exclude) or list(config.get("exclude", [])),
        params=parse_params(params),
        params_file=params_file,
        template_paths=tuple(template_paths) or tuple(config.get("template_paths", [])),
        only_specs=only_specs,
        scheduler=scheduler,
        scheduler_cfg=cfg or {},
        k8s_versions=tuple(k8s_versions),
        crd_paths=tuple(crd_paths),
        config=full_config if scheduler else None,
    )
    if max_file_size or config.get("max_file_size"):
        options.max_file_bytes = int(max_file_size or config["max_file_size"])
    if scheduler:
        from torchspec.runner.check import lint_paths as lint_with_scheduler

        result = lint_with_scheduler(paths or (".",), options)
    else:
        result = lint_paths(paths or (".",), options)
    try:
        stream = open(output, "w", encoding="utf-8") if output else sys.stdout
    except OSError as e:
        from torchspec.errors import UsageError

        raise UsageError(f"cannot write the report to {output}: {e.strerror or e}") from None
    try:
        if color is None:
            from torchspec.terminal import should_color

            color = fmt == "text" and should_color(stream)
        text = get_reporter(fmt)().render(result, color=color)
        stream.write(text if text.endswith("\n") or not text else text + "\n")
    finally:
        if output:
            stream.close()
    for note in result.notes:
        click.echo(f"note: {note}", err=True)
    if show_env:
        for path, names in result.env_read.items():
            click.echo(f"{path}: environment variables read: {', '.join(names)}", err=True)
    return result.exit_code(strict=bool(strict if strict is not None else config.get("strict", False)))


def _explain(code: str) -> int:
    from torchspec.errors import UsageError
    from torchspec import codes

    if code.lower() == "all":
        for entry in codes.CODES.values():
            click.echo(f"{entry.code}  {entry.name:<24} {entry.severity:<8} {entry.summary}")
        return 0
    entry = codes.get(code)
    if entry is None:
        from torchspec.errors import did_you_mean

        guess = did_you_mean(code, list(codes.CODES) + list(codes.NAMES))
        raise UsageError(f"unknown lint code {code!r}", f"did you mean {guess!r}?" if guess else
                         "list every code with: torchspec lint --explain all")
    click.echo(entry.explain())
    return 0
