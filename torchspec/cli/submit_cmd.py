"""``torchspec submit`` (alias ``run``) and ``torchspec dryrun``: a spec file or built-in component to a scheduler.

stdout carries only the app handle, so ``H=$(torchspec submit job.yaml)``
works; everything for people (progress, logs with ``--log``) goes to stderr.
"""

from __future__ import annotations

import contextlib
import sys
from typing import TYPE_CHECKING, Any, Callable, Iterator

import click

from torchspec.cli.apps_cmd import following, open_runner
from torchspec.cli.options import app_option, parse_params, template_path_option
from torchspec.exit_codes import ExitCode, for_app_state

if TYPE_CHECKING:
    from torchspec.runner import Runner
    from torchspec.specs import AppDryRunInfo, CfgVal


def submission_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """The options ``submit`` and ``dryrun`` share, so both read a job the same way."""
    f = click.option("--workspace", metavar="DIR", type=click.Path(exists=True, file_okay=False),
                     help="Build the first role's image with DIR's files copied on top, and run that "
                          "(schedulers that build images, e.g. docker; an unchanged DIR reuses the image).")(f)
    f = template_path_option(f)
    f = click.option("--params-file", type=click.Path(exists=True, dir_okay=False),
                     help="YAML, JSON or TOML file of param values (-p wins over it).")(f)
    f = click.option("-p", "--param", "params", multiple=True, metavar="NAME=VALUE",
                     help="Set a param of the spec or component (repeatable).")(f)
    f = click.option("-c", "--cfg", "cfg", metavar="KEY=VALUE,...",
                     help="Scheduler run options, e.g. -c use_cwd=true,kill_grace_s=10 "
                          "(see: torchspec runopts SCHEDULER).")(f)
    f = click.option("-s", "--scheduler", metavar="SCHEDULER",
                     help="Where to run (default: the configured default_scheduler, else local).")(f)
    f = app_option(f)
    f = click.argument("component_args", nargs=-1, type=click.UNPROCESSED, metavar="[COMPONENT ARGS]...")(f)
    f = click.argument("component", metavar="FILE|COMPONENT|FILE.py:FUNCTION", required=False)(f)
    f = click.pass_context(f)
    return f


class ComponentCommand(click.Command):
    """A command whose COMPONENT takes arguments of its own after it, as ``torchx run`` does: options click
    does not know go to the component, ``--`` and what follows reach it unchanged (click would drop the
    ``--``), and ``--help`` after a Python component asks for the component's help, not the command's."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, context_settings={"ignore_unknown_options": True}, **kwargs)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        args = list(args)
        tail = None
        if "--" in args:
            cut = args.index("--")
            args, tail = args[:cut], args[cut + 1:]
        ctx.meta["torchspec.tail"] = tail
        at = self._after_component(args)
        if at is not None and {"--help", "-h"} & set(args[at:]):
            ctx.meta["torchspec.component_help"] = True
            args = args[:at] + [a for a in args[at:] if a not in ("--help", "-h")]
        return super().parse_args(ctx, args)

    def _after_component(self, args: list[str]) -> int | None:
        """Where the words after COMPONENT start (None: no component yet): the first word that is neither
        an option nor the value of one of this command's options that take a value."""
        takes_value = {name for p in self.params if isinstance(p, click.Option) and not p.is_flag
                       for name in p.opts}
        i = 0
        while i < len(args):
            word = args[i]
            if word in takes_value:
                i += 2
                continue
            if not word.startswith("-"):
                return i + 1
            i += 1
        return None

    @staticmethod
    def component_argv(ctx: click.Context, given: tuple[str, ...]) -> list[str]:
        """The words after COMPONENT as the component gets them: ``--`` and what followed it put back."""
        tail = ctx.meta.get("torchspec.tail")
        return list(given) + (["--", *tail] if tail is not None else [])


def _component_args(ctx: click.Context, component: str, given: tuple[str, ...], params: tuple[str, ...]) -> Any:
    """What the component gets: for a Python component its command line (``-p name=value`` as ``--name
    value``); for a spec its params, from TorchX's ``--name value`` forms and ``-p`` (which wins)."""
    from torchspec.components import is_python_component
    from torchspec.runner.components import parse_component_args

    argv = ComponentCommand.component_argv(ctx, given)
    if is_python_component(component):
        return [arg for name, value in parse_params(params).items() for arg in (f"--{name}", value)] + argv
    _no_misspelt_options(ctx, component, given)
    return {**parse_component_args(argv), **parse_params(params)} if argv else parse_params(params)


def _component(runner: "Runner", component: str | None, given: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    """The component to run and its arguments: the one named, else the config's default (``.torchxconfig``'s
    ``[cli:run] component``), which then takes every word given as its arguments."""
    if component is not None and not component.startswith("-"):
        return component, given
    default = runner.default_component()
    if default is None:
        raise click.UsageError("Missing argument 'FILE|COMPONENT|FILE.py:FUNCTION' (and no default component is"
                               " configured: [cli] default_component, or [cli:run] component in .torchxconfig)")
    return default, ((component,) if component else ()) + given


def _no_misspelt_options(ctx: click.Context, component: str, given: tuple[str, ...]) -> None:
    """An option after a spec component that is none of its params but a near miss of the command's own
    options (``--wiat``) is a typo, not a component argument: say so as click would have."""
    if not any(arg.startswith("--") for arg in given):
        return  # nothing to check: no need to read the spec for its params
    from torchspec.components import ComponentNotFoundError, find_component
    from torchspec.errors import did_you_mean
    from torchspec.loader import declared_params

    try:
        params = declared_params(find_component(component)) or []
    except ComponentNotFoundError:
        return  # the runner says so, with its did-you-mean
    own = [name for param in ctx.command.params for name in getattr(param, "opts", []) if name.startswith("--")]
    for arg in given:
        word = arg.split("=", 1)[0]
        if word.startswith("--") and word not in own and word[2:] not in params:
            guess = did_you_mean(word, own)
            if guess is not None:
                raise click.UsageError(f"No such option: {word} (did you mean {guess}?); an argument for the"
                                       " component goes after it as --name value, or as -p name=value", ctx)


def _prepare(runner: "Runner", scheduler: str | None, cfg_str: str | None) -> tuple[str, dict[str, "CfgVal"]]:
    """The scheduler to use (checked, with a did-you-mean) and its cfg (every bad -c key reported at once)."""
    name = runner.check_scheduler(scheduler)
    return name, runner.run_options(name, cfg_str)


@click.command(cls=ComponentCommand)
@submission_options
@click.option("--wait", "wait_", is_flag=True, help="Wait for the app to end; the exit code says how it ended.")
@click.option("--log", is_flag=True, help="Stream every replica's logs (on stderr) until the app ends; implies --wait.")
@click.option("--sweep", "sweep", multiple=True, metavar="PARAM=V1,V2,...",
              help="Submit one app per combination of these param values (repeatable: the grid); prints each handle.")
def submit(ctx: click.Context, component: str | None, component_args: tuple[str, ...], scheduler: str | None,
           cfg: str | None, params: tuple[str, ...], params_file: str | None, template_paths: tuple[str, ...],
           workspace: str | None, app_name: str | None, wait_: bool, log: bool, sweep: tuple[str, ...]) -> int:
    """Submit FILE (a spec) or COMPONENT (a built-in such as utils.echo) and print its app handle.

    FILE.py:FUNCTION is a TorchX-style Python component: its arguments follow
    it (`comp.py:trainer --lr 0.1 -- --extra`), and `comp.py:trainer --help`
    lists them.

    Only the handle goes to stdout, so `H=$(torchspec submit job.yaml)` works.
    Without -s the app runs on the configured default scheduler, else on
    local. With --wait or --log the command stays until the app ends.

    `--sweep lr=1e-4,3e-4 --sweep batch=32,64` submits one app per point of
    the grid (here 4), each named for its point and labelled with the
    sweep's id (printed on stderr; `list`, `cancel` and `delete` take
    `--sweep ID`), one handle per line. Every point is checked first: a
    point that cannot run stops the sweep before anything is submitted.

    Exit codes: 0 submitted (with --wait/--log: the app SUCCEEDED), 1 spec
    error, 2 usage error (unknown scheduler or component, bad -c or -p),
    4 the app FAILED, 5 the app was CANCELLED, 6 the scheduler's backend
    cannot be reached or refused the app (no engine, an image that cannot be
    pulled...).
    """
    with open_runner() as runner:
        component, component_args = _component(runner, component, component_args)
        if ctx.meta.get("torchspec.component_help"):
            click.echo(runner.component_help(component) or ctx.get_help())
            return ExitCode.OK
        name, run_cfg = _prepare(runner, scheduler, cfg)
        _require(runner, name, workspace=workspace, follow=log)
        args = _component_args(ctx, component, component_args, params)
        if sweep or params_file_sweeps(params_file):
            return _submit_sweep(runner, component, args, sweep, name, run_cfg, wait_ or log, workspace=workspace,
                                 params_file=params_file, app_name=app_name, template_paths=template_paths)
        with _build_progress(workspace):
            handle = runner.run_component(component, args, name, run_cfg, workspace=workspace,
                                          params_file=params_file, app_name=app_name,
                                          template_paths=template_paths)
        click.echo(handle)
        sys.stdout.flush()
        if not (wait_ or log):
            return ExitCode.OK
        from torchspec.cli.wait_cmd import watch

        with following(handle):
            if log:
                from torchspec.cli.logs_cmd import print_logs, resolve_targets

                print_logs(runner, handle, resolve_targets(runner, handle, None), follow=True, out=sys.stderr)
            status, _ = watch(runner, handle, out=sys.stderr, live=False if log else None, quiet=log)
    if log:
        print(f"{handle} {status.state}", file=sys.stderr)
    return for_app_state(status.state)


def params_file_sweeps(params_file: str | None) -> bool:
    """Whether the params file holds a ``sweep:`` block (``submit`` then submits its grid)."""
    from torchspec.runner.sweep import file_sweep

    return bool(params_file and file_sweep(params_file))


def _submit_sweep(runner: "Runner", component: str, args: Any, words: tuple[str, ...], scheduler: str,
                  cfg: dict[str, "CfgVal"], follow: bool, **load: Any) -> int:
    """Every point dry-run first, then each submitted, its handle printed as it goes; a failure part way says
    how many went (their handles are on stdout already)."""
    from torchspec.errors import TorchSpecError, UsageError
    from torchspec.runner.sweep import SWEEP_LABEL, Sweep, dryrun_sweep

    grid = Sweep.parse(words).with_file(load.get("params_file"))

    if follow:
        raise UsageError("--wait and --log follow one app; a sweep submits several",
                         "follow them with: torchspec list --sweep ID, and torchspec wait HANDLE")
    with _build_progress(load.get("workspace")):
        infos = dryrun_sweep(runner, component, args, grid, scheduler, cfg, **load)
    sweep_id = infos[0]._app.metadata[SWEEP_LABEL] if infos[0]._app else "?"
    print(f"sweep {sweep_id}: {len(infos)} apps", file=sys.stderr)
    for done, info in enumerate(infos):
        try:
            click.echo(runner.schedule(info))
        except TorchSpecError:
            print(f"sweep {sweep_id}: {done} of {len(infos)} apps submitted before this error", file=sys.stderr)
            raise
        sys.stdout.flush()
    return ExitCode.OK


@click.command(cls=ComponentCommand)
@submission_options
@click.option("--reveal-env", is_flag=True,
              help="Print the values env() read as they are (they are hidden by default: they may be secrets).")
def dryrun(ctx: click.Context, component: str | None, component_args: tuple[str, ...], scheduler: str | None,
           cfg: str | None, params: tuple[str, ...], params_file: str | None, template_paths: tuple[str, ...],
           workspace: str | None, app_name: str | None, reveal_env: bool) -> int:
    """Print exactly what `torchspec submit` would send to the scheduler, without sending it.

    The output is the scheduler's request (the AppDryRunInfo), highlighted
    only on a terminal. Values read with env() show as <value from env(NAME)>
    unless --reveal-env; variables copied by a scheduler's copy_env are never shown. With --workspace the image is built (as submit
    would), so the request names the image that would run.

    With -s kubernetes -c server_dry_run=True the cluster's API server
    dry-runs every object too (dryRun=All: nothing is stored).

    Exit codes: 0 ok, 1 spec error, 2 usage error (unknown scheduler or
    component, bad -c or -p; the cluster refuses the manifests in its dry
    run), 6 the scheduler's backend is needed (a --workspace build, a
    server dry run) and cannot be reached or refuses the request.
    """
    from torchspec.cli import console

    with open_runner() as runner:
        component, component_args = _component(runner, component, component_args)
        if ctx.meta.get("torchspec.component_help"):
            click.echo(runner.component_help(component) or ctx.get_help())
            return ExitCode.OK
        name, run_cfg = _prepare(runner, scheduler, cfg)
        _require(runner, name, workspace=workspace, follow=False)
        args = _component_args(ctx, component, component_args, params)
        with _build_progress(workspace):
            info = runner.dryrun_component(component, args, name, run_cfg, workspace=workspace,
                                           params_file=params_file, app_name=app_name,
                                           template_paths=template_paths)
    console.highlighted(str(info) if reveal_env else _redacted_text(info), "yaml")
    return ExitCode.OK


def _require(runner: "Runner", scheduler: str, *, workspace: str | None, follow: bool) -> None:
    """Refuse, before anything is submitted, what the scheduler cannot do: the Runner, as TorchX's, ignores a
    workspace a scheduler cannot build (TorchX passes one by default), which from the command line would
    silently run the image without the user's files."""
    from torchspec.schedulers.api import Capability

    if workspace:
        runner.require(scheduler, Capability.WORKSPACE, "leave out --workspace, or use a scheduler that builds"
                                                        " images (docker)")
    if follow:
        runner.require(scheduler, Capability.FOLLOW_LOGS, "use --wait, then torchspec logs HANDLE")


def _redacted_text(info: "AppDryRunInfo[Any]") -> str:
    """The dry run with what env() read shown as ``<value from env(NAME)>``: replaced in the request before it
    is quoted into a script or encoded as YAML (escaped, a value no longer reads as written), and in the
    text after, for a plug-in's request of a kind :func:`~torchspec.redaction.redact_data` does not walk."""
    import copy

    from torchspec.redaction import redact_data, redact_text

    shown = copy.copy(info)
    shown.request = redact_data(info.request)
    return redact_text(str(shown))


@contextlib.contextmanager
def _build_progress(workspace: str | None) -> Iterator[None]:
    """Show a scheduler's image build on stderr while it runs (schedulers report steps at INFO on their logger)."""
    if not workspace:
        yield
        return
    import logging  # only with a workspace: it costs every submit's start-up

    from torchspec.cli import console

    class CallbackHandler(logging.Handler):
        """Hands each log message's text to a function."""

        def emit(self, record: logging.LogRecord) -> None:
            show(record.getMessage())

    logger = logging.getLogger("torchspec.schedulers")
    with console.progress(f"building the workspace {workspace}", "workspace") as show:
        handler = CallbackHandler(level=logging.INFO)
        old_level = logger.level
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        try:
            yield
        finally:
            logger.removeHandler(handler)
            logger.setLevel(old_level)
