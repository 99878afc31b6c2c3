"""``torchspec submit`` (alias ``run``) and ``torchspec dryrun``: a spec file or built-in component to a scheduler.

stdout carries only the app handle, so ``H=$(torchspec submit job.yaml)``
works; everything for people (progress, logs with ``--log``) goes to stderr.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from typing import TYPE_CHECKING, Any, Callable, Iterator

import click

from torchspec.cli.apps_cmd import (
    EXIT_OK,
    app_exit_code,
    check_scheduler,
    open_runner,
)
from torchspec.cli.options import parse_params
from torchspec.errors import UsageError

if TYPE_CHECKING:
    from torchspec.runner import Runner
    from torchspec.specs import CfgVal, runopts


class BadRunConfig(UsageError):
    """A ``-c`` value the scheduler refuses; carries the scheduler's usage text to print under the message."""

    def __init__(self, message: str, scheduler: str, opts: "runopts") -> None:
        super().__init__(message, f"the run options of {scheduler}:\n{opts!r}")


def submission_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """The options ``submit`` and ``dryrun`` share, so both read a job the same way."""
    f = click.option("--workspace", metavar="DIR", type=click.Path(exists=True, file_okay=False),
                     help="Build the first role's image with DIR's files copied on top, and run that "
                          "(schedulers that build images, e.g. docker; an unchanged DIR reuses the image).")(f)
    f = click.option("--params-file", type=click.Path(exists=True, dir_okay=False),
                     help="YAML, JSON or TOML file of param values (-p wins over it).")(f)
    f = click.option("-p", "--param", "params", multiple=True, metavar="NAME=VALUE",
                     help="Set a param of the spec or component (repeatable).")(f)
    f = click.option("-c", "--cfg", "cfg", metavar="KEY=VALUE,...",
                     help="Scheduler run options, e.g. -c use_cwd=true,kill_grace_s=10 "
                          "(see: torchspec runopts SCHEDULER).")(f)
    f = click.option("-s", "--scheduler", metavar="SCHEDULER",
                     help="Where to run (default: the configured default_scheduler, else local).")(f)
    f = click.argument("component", metavar="FILE|COMPONENT")(f)
    return f


def run_config(runner: "Runner", scheduler: str, cfg_str: str | None) -> dict[str, "CfgVal"]:
    """The cfg for ``scheduler``: ``[scheduler.NAME]`` config defaults, then ``-c`` on top, checked and resolved.

    ``runopts.cfg_from_str`` silently drops keys it does not know; a typo on
    the command line should fail instead, so keys are checked first (with a
    did-you-mean), and any failure prints the scheduler's usage.
    """
    from torchspec.config import load_config, scheduler_cfg
    from torchspec.specs import InvalidRunConfigException
    from torchspec.specs.runopts import to_dict

    opts = runner.scheduler_run_opts(scheduler)
    # the runner merges these too; resolving here as well lets a bad or missing option print the usage
    cfg: dict[str, CfgVal] = dict(scheduler_cfg(load_config(), scheduler, opts))
    if cfg_str:
        try:
            raw = to_dict(cfg_str)
        except ValueError as e:
            raise BadRunConfig(f"cannot read -c {cfg_str!r}: {e}", scheduler, opts) from None
        known = [key for key, _ in opts]
        for key in raw:
            if opts.get(key) is None:
                import difflib

                guess = difflib.get_close_matches(key, known, n=1)
                mean = f" (did you mean {guess[0]!r}?)" if guess else ""
                raise BadRunConfig(f"{scheduler} has no run option {key!r}{mean}", scheduler, opts)
        for key, text in raw.items():  # cast one by one first, so an error can name its option
            opt = opts.get(key)
            try:
                opt.cast_to_type(text)  # type: ignore[union-attr]
            except (TypeError, ValueError) as e:
                raise BadRunConfig(f"bad -c value {key}={text!r}: {e}", scheduler, opts) from None
        cfg.update(opts.cfg_from_str(cfg_str))
    try:
        return opts.resolve(cfg)
    except InvalidRunConfigException as e:
        raise BadRunConfig(str(e), scheduler, opts) from None


def _prepare(runner: "Runner", scheduler: str | None, cfg_str: str | None) -> tuple[str, dict[str, "CfgVal"]]:
    """The scheduler to use (checked, with a did-you-mean) and its resolved cfg."""
    name = check_scheduler(runner, scheduler or runner.default_scheduler())
    return name, run_config(runner, name, cfg_str)


@click.command()
@submission_options
@click.option("--wait", "wait_", is_flag=True, help="Wait for the app to end; the exit code says how it ended.")
@click.option("--log", is_flag=True, help="Stream every replica's logs (on stderr) until the app ends; implies --wait.")
def submit(component: str, scheduler: str | None, cfg: str | None, params: tuple[str, ...], params_file: str | None,
           workspace: str | None, wait_: bool, log: bool) -> int:
    """Submit FILE (a spec) or COMPONENT (a built-in such as utils.echo) and print its app handle.

    Only the handle goes to stdout, so `H=$(torchspec submit job.yaml)` works.
    Without -s the app runs on the configured default scheduler, else on
    local. With --wait or --log the command stays until the app ends.

    Exit codes: 0 submitted (with --wait/--log: the app SUCCEEDED), 1 spec
    error, 2 usage error (unknown scheduler or component, bad -c or -p),
    4 the app FAILED, 5 the app was CANCELLED, 6 the scheduler's backend
    cannot be reached or refused the app (no engine, an image that cannot be
    pulled...).
    """
    with open_runner() as runner:
        name, run_cfg = _prepare(runner, scheduler, cfg)
        with _submission(name), _build_progress(workspace):
            handle = runner.run_component(component, parse_params(params), name, run_cfg, workspace=workspace,
                                          params_file=params_file)
        click.echo(handle)
        sys.stdout.flush()
        if not (wait_ or log):
            return EXIT_OK
        from torchspec.cli.wait_cmd import watch

        try:
            if log:
                from torchspec.cli.logs_cmd import print_logs, resolve_targets

                print_logs(runner, handle, resolve_targets(runner, handle, None), follow=True, out=sys.stderr)
            status, _ = watch(runner, handle, out=sys.stderr, live=False if log else None, quiet=log)
        except KeyboardInterrupt:
            # Ctrl-C stops watching, not the app: say so, and how to stop it too
            print(f"\n{handle} keeps running; stop it with: torchspec cancel {handle}", file=sys.stderr)
            raise
    if log:
        print(f"{handle} {status.state}", file=sys.stderr)
    return app_exit_code(status.state)


@click.command()
@submission_options
@click.option("--reveal-env", is_flag=True,
              help="Print the values env() read as they are (they are hidden by default: they may be secrets).")
def dryrun(component: str, scheduler: str | None, cfg: str | None, params: tuple[str, ...],
           params_file: str | None, workspace: str | None, reveal_env: bool) -> int:
    """Print exactly what `torchspec submit` would send to the scheduler, without sending it.

    The output is the scheduler's request (the AppDryRunInfo), highlighted
    only on a terminal. Values read with env() show as <value from env(NAME)>
    unless --reveal-env; variables copied by a scheduler's copy_env are never shown. With --workspace the image is built (as submit
    would), so the request names the image that would run.

    Exit codes: 0 ok, 1 spec error, 2 usage error (unknown scheduler or
    component, bad -c or -p), 6 the scheduler's backend is needed (a
    --workspace build) and cannot be reached.
    """
    from torchspec.cli import console

    with open_runner() as runner:
        name, run_cfg = _prepare(runner, scheduler, cfg)
        with _submission(name), _build_progress(workspace):
            info = runner.dryrun_component(component, parse_params(params), name, run_cfg, workspace=workspace,
                                           params_file=params_file)
    from torchspec.loader.template import redact_env

    text = str(info)
    console.highlighted(text if reveal_env else redact_env(text), "yaml")
    return EXIT_OK


@contextlib.contextmanager
def _build_progress(workspace: str | None) -> Iterator[None]:
    """Show a scheduler's image build on stderr while it runs: a spinner with the current step on a
    terminal, one line per step otherwise (CI logs). Schedulers report steps at INFO on their logger."""
    if not workspace:
        yield
        return
    from torchspec.cli.console import use_color

    logger = logging.getLogger("torchspec.schedulers")
    handler: logging.Handler
    status = None
    if use_color(sys.stderr):
        from rich.console import Console

        status = Console(stderr=True).status(f"building the workspace {workspace}")
        status.start()
        handler = _CallbackHandler(lambda line: status.update(f"workspace: {line}"))  # type: ignore[union-attr]
    else:
        handler = _CallbackHandler(lambda line: print(f"workspace: {line}", file=sys.stderr, flush=True))
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
        if status is not None:
            status.stop()


class _CallbackHandler(logging.Handler):
    """Hands each log message's text to a function."""

    def __init__(self, callback: Callable[[str], None]) -> None:
        super().__init__(level=logging.INFO)
        self.callback = callback

    def emit(self, record: logging.LogRecord) -> None:
        self.callback(record.getMessage())


@contextlib.contextmanager
def _submission(scheduler: str) -> Iterator[None]:
    """Around a submission, ``ValueError`` is the runner's and scheduler's "this app cannot run here"
    (no roles, no entrypoint, a resource the backend needs): the user's to fix, so a usage error."""
    try:
        yield
    except ValueError as e:
        raise UsageError(f"{scheduler} cannot run this app: {e}") from None
