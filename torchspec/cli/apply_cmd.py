"""``torchspec apply``: make a scheduler run what spec files describe, each job once."""

from __future__ import annotations

import sys
from typing import Any

import click

from torchspec.cli.options import choice, output_option, param_options, parse_params
from torchspec.exit_codes import ExitCode

_FORMATS = ("text", "markdown", "json")  # torchspec.gitops.apply_report.FORMATS, without importing it
_LOCKS = ("file", "kubernetes")  # torchspec.gitops.lock.LOCKS


@click.command()
@click.argument("paths", nargs=-1, required=True, metavar="PATHS...")
@click.option("-s", "--scheduler", metavar="SCHEDULER", help="Scheduler to run on (default: the configured one).")
@click.option("-c", "--cfg", "cfg", metavar="KEY=VALUE,...", help="The scheduler's run options, as submit takes them.")
@param_options
@click.option("--plan", "plan_only", is_flag=True,
              help="Print what would be done (create, unchanged, replace, prune, error) and do nothing.")
@click.option("--replace", is_flag=True, help="Cancel a live app whose spec changed, and submit the new one.")
@click.option("--prune", is_flag=True, help="Cancel live apps whose spec is gone from PATHS.")
@click.option("--all-or-nothing", is_flag=True,
              help="Submit nothing unless every spec loads and passes its dry run.")
@click.option("--scope", default="default", show_default=True, metavar="NAME",
              help="Which applies see each other's apps: give each repository sharing a scheduler its own.")
@click.option("--lock", type=choice(_LOCKS),
              help="What runs take turns on: a lock file (runs on this machine, or sharing --lock-file) or a "
                   "Kubernetes Lease (runs anywhere that reaches the cluster; in the namespace of the kubernetes "
                   "run options). Default: [apply] lock in the config, else file.")
@click.option("--lock-file", type=click.Path(dir_okay=False), metavar="PATH",
              help="Lock this file while applying (default: one under TORCHSPEC_HOME per scheduler and scope); "
                   "on a shared file system, runs on several machines take turns.")
@click.option("--lock-timeout", type=click.FloatRange(min=0), metavar="SECONDS",
              help="How long to wait for another apply holding the lock (default: [apply] lock_timeout, else 600).")
@click.option("--lock-duration", type=click.IntRange(min=1), metavar="SECONDS",
              help="--lock kubernetes: how long the Lease lasts unless renewed (every third of it, while apply "
                   "runs); a run that dies holds it that long (default: [apply] lock_duration, else 60).")
@click.option("--sweep", "sweep", multiple=True, metavar="PARAM=V1,V2,...",
              help="Apply every spec once per point of this grid (repeatable; a params file's sweep: block adds to "
                   "it): each point is an app of its own, kept, created, replaced and pruned by itself.")
@output_option(_FORMATS, "text (coloured on a terminal), markdown (a pull-request comment) or json.",
               legacy_format=("--format",))
def apply(paths: tuple[str, ...], scheduler: str | None, cfg: str | None, params: tuple[str, ...],
          params_file: str | None, template_paths: tuple[str, ...], plan_only: bool, replace: bool, prune: bool,
          all_or_nothing: bool, scope: str, lock: str | None, lock_file: str | None, lock_timeout: float | None,
          lock_duration: int | None, sweep: tuple[str, ...], fmt: str) -> int:
    """Submit the spec files under PATHS that do not run yet; twice submits nothing the second time.

    \b
      torchspec apply jobs/ -s kubernetes --plan        # what would be done
      torchspec apply jobs/ -s kubernetes               # create what is new; print the handles
      torchspec apply jobs/ -s kubernetes --replace --prune

    Each app is known by its path from the repository root (PATH#NAME in a
    file holding several apps, or the metadata torchspec.dev/apply-id it
    declares) and a hash of what would run; both are stored on the job and
    read back with `list`. An app with the same hash (running or finished) is
    unchanged; a live one with another hash is replaced only with --replace;
    a live one whose spec is gone is cancelled only with --prune. A file
    that does not load is not submitted; the others are, unless
    --all-or-nothing. Runs on one machine take turns (a lock file); with
    --lock kubernetes, runs on any machine do (a Lease on the cluster).

    With --sweep lr=1e-4,3e-4 (or a params file's sweep: block) each point
    of the grid is an app of its own, known as PATH@lr=1e-4: adding a value
    creates its point, removing one prunes it (--prune), and every point of
    a spec carries one sweep id (`list --sweep ID`).

    Exit codes: 0 done (--plan: nothing to do), 1 a spec has errors and was
    not submitted (--plan: something to do), 7 --plan: a spec has errors,
    6 a submission or cancel failed, or the Lease was lost (what was done
    stays; run again to go on), 2 usage error, 124 the lock was not free
    within --lock-timeout.
    """
    from torchspec.cli import console
    from torchspec.cli.apps_cmd import open_runner
    from torchspec.config import apply_settings, load_config
    from torchspec.config import template_paths as config_template_paths
    from torchspec.gitops.apply import ApplyOptions, apply_paths
    from torchspec.gitops.apply_report import render
    from torchspec.gitops.lock import LockTimeout
    from torchspec.terminal import should_color

    full_config = load_config()
    config = apply_settings(full_config)
    options = ApplyOptions(scheduler=scheduler or "", cfg=cfg, params=parse_params(params), params_file=params_file, sweep=sweep,
                           template_paths=config_template_paths(full_config, template_paths), scope=scope, replace=replace, prune=prune,
                           all_or_nothing=all_or_nothing, lock_file=lock_file,
                           lock=lock or ("file" if lock_file else config.get("lock", "file")),
                           lock_timeout=_first(lock_timeout, config.get("lock_timeout"), ApplyOptions.lock_timeout),
                           lock_duration=_first(lock_duration, config.get("lock_duration"), ApplyOptions.lock_duration))
    with open_runner() as runner:
        options.scheduler = runner.check_scheduler(scheduler)
        try:
            result = apply_paths(runner, paths, options, plan_only=plan_only,
                                 on_wait=lambda what: print(what, file=sys.stderr, flush=True))
        except LockTimeout as e:
            console.error(str(e), "wait for it to finish, or raise --lock-timeout")
            return ExitCode.TIMEOUT
    color = fmt == "text" and should_color(sys.stdout)
    click.echo(render(result, fmt, color=color), nl=False, color=color)
    return result.exit_code


def _first(*values: Any) -> Any:
    """The first value that is not None: the flag, then the config, then the default."""
    return next(v for v in values if v is not None)
