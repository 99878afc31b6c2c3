"""``torchspec lint``: options in, LintResult to a reporter, exit code out."""

from __future__ import annotations

import click

from torchspec.cli.lint_run import run_lint
from torchspec.cli.options import output_option, param_options

FORMATS = ["text", "json", "github", "sarif"]


@click.command()
@click.argument("paths", nargs=-1, type=click.Path())
@output_option(FORMATS, "Report format: text (for people), json, github (workflow annotations) or sarif.",
               legacy_format=("-f", "--format"), output_file="Write the report to this file instead of stdout.")
@click.option("--select", multiple=True, metavar="CODES", help="Only these codes or prefixes (e.g. TS2,TS501).")
@click.option("--ignore", multiple=True, metavar="CODES", help="Skip these codes or prefixes.")
@click.option("--exclude", multiple=True, metavar="GLOB", help="Skip files and folders matching GLOB.")
@click.option("--strict", is_flag=True, default=None, help="Warnings fail the run too.")
@click.option("--max-file-size", type=click.IntRange(min=1), metavar="BYTES", help="Refuse larger files.")
@click.option("-j", "--jobs", type=click.IntRange(min=0), metavar="N",
              help="Processes that lint files at once (default 0: one per CPU, from 64 files on; 1: this one).")
@click.option("--explain", metavar="CODE", help="Explain a code (or 'all') and exit.")
@click.option("--color/--no-color", default=None, help="Force colour on or off (default: on a terminal).")
@click.option("--only-specs", is_flag=True,
              help="Skip named files that do not look like specs too (for pre-commit, which passes every YAML file).")
@click.option("--show-env", is_flag=True, help="List (on stderr) the environment variables each file's templates read.")
@click.option("-s", "--scheduler", metavar="SCHEDULER",
              help="Also dry-run each spec on SCHEDULER, contacting no backend (TS601); for kubernetes also "
                   "validate the manifests against the official schemas (TS602, needs kubernetes-validate), and "
                   "with -c server_dry_run=True have the cluster's API server dry-run them (TS604).")
@click.option("-c", "--cfg", "cfg", metavar="KEY=VALUE,...",
              help="Run options for --scheduler, as for submit (see: torchspec runopts SCHEDULER).")
@click.option("--k8s-version", "k8s_versions", multiple=True, metavar="VERSION",
              help="With --scheduler kubernetes: a Kubernetes version to validate for (repeatable; default: the "
                   "oldest and newest kubernetes-validate bundles). Unless -c sets k8s_version, manifests are "
                   "rendered for the oldest one.")
@click.option("--crd", "crd_paths", multiple=True, type=click.Path(exists=True, dir_okay=False), metavar="PATH",
              help="With --scheduler kubernetes: a CustomResourceDefinition file (repeatable) to validate custom "
                   "objects against, instead of the JobSet and Volcano Job CRDs that ship with torchspec.")
@click.option("--allow-python-components", "allow_python", is_flag=True, default=None,
              help="FILE.py:FUNCTION components are always checked from their syntax tree (TS511); with this,"
                   " also run them and lint the spec each makes (their code runs: only for code you trust, never"
                   " a pull request's); -p values are their arguments. Config: [lint] allow_python_components.")
@param_options
def lint(paths: tuple[str, ...], fmt: str, output_file: str | None, select: tuple[str, ...], ignore: tuple[str, ...],
         exclude: tuple[str, ...], strict: bool | None, max_file_size: int | None, jobs: int | None,
         explain: str | None,
         color: bool | None, only_specs: bool, show_env: bool, scheduler: str | None, cfg: str | None,
         k8s_versions: tuple[str, ...], crd_paths: tuple[str, ...], params: tuple[str, ...],
         params_file: str | None, template_paths: tuple[str, ...], allow_python: bool | None) -> int:
    """Lint spec files and folders (default: the current folder).

    Folders are searched for *.yaml, *.yml, *.toml and *.json files that look
    like specs. Settings under [lint] in .torchspec.toml or [tool.torchspec.lint]
    in pyproject.toml apply; flags win over them.

    With --scheduler NAME each spec that lints clean is also dry-run on NAME
    (e.g. torchspec lint --scheduler kubernetes -c flavor=jobset --crd
    jobset-crd.yaml jobs/); [scheduler.NAME] config defaults apply below -c.

    Exit codes: 0 clean, 1 errors found (or warnings with --strict), 2 usage error,
    6 (-c server_dry_run=True) the cluster cannot be reached.
    """
    return run_lint(paths, fmt, output_file, select, ignore, exclude, strict, max_file_size, explain, color, only_specs,
                    show_env, scheduler, cfg, k8s_versions, crd_paths, params, params_file, template_paths, jobs,
                    allow_python)
