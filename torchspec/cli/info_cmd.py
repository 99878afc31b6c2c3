"""``torchspec runopts``, ``schedulers``, ``builtins`` and ``config``: what can be used, and how it is set up."""

from __future__ import annotations

import sys

import click

from torchspec.cli.apps_cmd import dump_json, open_runner
from torchspec.cli.options import output_option
from torchspec.exit_codes import ExitCode


@click.command()
@click.argument("named", required=False, metavar="[SCHEDULER]")
@click.option("-s", "--scheduler", metavar="SCHEDULER", help="The scheduler (the same as naming it as SCHEDULER).")
def runopts(named: str | None, scheduler: str | None) -> int:
    """Print the run options (-c KEY=VALUE) of SCHEDULER, or of every scheduler.

    Exit codes: 0 ok, 2 unknown scheduler.
    """
    if named and scheduler and named != scheduler:
        raise click.UsageError(f"two schedulers, {named} and -s {scheduler}: name one")
    scheduler = scheduler or named
    with open_runner() as runner:
        names = [runner.check_scheduler(scheduler)] if scheduler else list(runner.scheduler_backends())
        for i, name in enumerate(names):
            if i:
                click.echo()
            if scheduler is None:
                try:
                    opts = runner.scheduler_run_opts(name)
                except Exception as e:  # noqa: BLE001 - one broken plug-in must not hide the others
                    click.echo(f"{name}:\n    unavailable: {e}")
                    continue
            else:
                opts = runner.scheduler_run_opts(name)
            text = repr(opts) if len(opts) else "    (no run options)"
            click.echo(f"{name}:\n{text}")
    return ExitCode.OK


@click.command()
@output_option(("text", "json"), "text, or json (a list of {name, default, capabilities}).", json_flag=True)
def schedulers(fmt: str) -> int:
    """List the registered scheduler backends, the default one marked, with what each can do.

    The default is default_scheduler from the configuration, else local.
    Plug-ins register in the torchspec.schedulers entry-point group. The
    capabilities are those a command may need beyond submit, status and
    cancel: logs, follow_logs (logs -f), log_window (logs --since/--until),
    log_streams (logs --streams), delete, workspace (--workspace), labels
    (apply, list -l); a command that needs one the scheduler lacks says so.
    """
    from torchspec.schedulers.api import Capability

    with open_runner() as runner:
        names = list(runner.scheduler_backends())
        default = runner.default_scheduler()
        capabilities = {n: [c.value for c in Capability if runner.scheduler_supports(n, c)] for n in names}
    if fmt == "json":
        dump_json([{"name": n, "default": n == default, "capabilities": capabilities[n]} for n in names])
        return ExitCode.OK
    width = max((len(n) for n in names), default=0)
    for name in names:
        mark = "(default)" if name == default else ""
        click.echo(f"{name.ljust(width)}  {mark:9}  {' '.join(capabilities[name])}".rstrip())
    return ExitCode.OK


@click.command()
@output_option(("text", "json"), "text (a table), or json (a list of {name, description, path}).", json_flag=True)
def builtins(fmt: str) -> int:
    """List the built-in components that `torchspec submit NAME` accepts, with what each does.

    Each is an ordinary spec file shipped with torchspec (-o json shows where),
    so `torchspec render PATH` shows what it becomes.
    """
    from torchspec.components import list_builtins

    found = list_builtins()
    if fmt == "json":
        dump_json([{"name": name, "description": desc, "path": path} for name, (path, desc) in found.items()])
        return ExitCode.OK
    from torchspec.cli import console

    console.table(["NAME", "DESCRIPTION"], [[name, desc] for name, (_, desc) in found.items()], state_column=None)
    return ExitCode.OK


@click.command("config")
@output_option(("text", "json"), "text (a table), or json (the files read and {key, value, source} per setting).",
               json_flag=True)
def config_cmd(fmt: str) -> int:
    """Show the effective configuration and the file each value came from.

    Files are read lowest precedence first: the user file
    ($XDG_CONFIG_HOME/torchspec/config.toml), then the project's
    .torchspec.toml or [tool.torchspec] in pyproject.toml. Flags win over both.
    """
    from torchspec import config as config_mod

    cfg = config_mod.load_config()
    rows = [(key, value, source) for key, value, source in config_mod.explain(cfg)]
    if config_mod.default_scheduler(cfg) is None:
        from torchspec.schedulers import get_default_scheduler_name

        rows.insert(0, ("default_scheduler", get_default_scheduler_name(), "(built-in default)"))
    if fmt == "json":
        dump_json({"files": list(cfg.files),
                   "settings": [{"key": k, "value": v, "source": s} for k, v, s in rows]})
        return ExitCode.OK
    from torchspec.cli import console

    if cfg.files:
        click.echo("files read (later ones win): " + ", ".join(cfg.files))
    else:
        click.echo(f"no config files found (user file: {config_mod.user_config_path()})", err=False)
    click.echo()
    console.table(["KEY", "VALUE", "FROM"], [[k, _toml(v), s] for k, v, s in rows], state_column=None)
    sys.stdout.flush()
    return ExitCode.OK


def _toml(value: object) -> str:
    """A value the way it would be written in the TOML file, so it can be copied back."""
    import json

    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return json.dumps(value, default=str)
