"""The ``torchspec`` command: a thin click layer over the library.

Commands are imported only when invoked, so ``torchspec --version`` and
``torchspec lint`` never pay for docker, kubernetes or rich.

Exit codes are :class:`torchspec.exit_codes.ExitCode`; ``--help`` and the site's exit code page
are generated from it.
"""

from __future__ import annotations

import atexit
import gc
import importlib
import os
import sys
from typing import Any

#: command name -> (module, attribute, one-line help); help here keeps `--help` from importing every command
COMMANDS: dict[str, tuple[str, str, str]] = {
    "lint": ("torchspec.cli.lint_cmd", "lint", "Check spec files for errors (syntax, schema, params, templates)."),
    "render": ("torchspec.cli.render_cmd", "render", "Print the materialised AppDef of a spec file."),
    "schema": ("torchspec.cli.schema_cmd", "schema", "Print the AppDef JSON Schema."),
    "diff": ("torchspec.cli.diff_cmd", "diff", "Show what a change to spec files changes in what would run."),
    "apply": ("torchspec.cli.apply_cmd", "apply", "Submit the spec files that do not run yet, each job once."),
    "convert": ("torchspec.cli.convert_cmd", "convert",
                "Write the spec a TorchX Python component makes, or the config a .torchxconfig means."),
    "dryrun": ("torchspec.cli.submit_cmd", "dryrun", "Print what submit would send to the scheduler, sending nothing."),
    "submit": ("torchspec.cli.submit_cmd", "submit", "Submit a spec file or built-in component; print its app handle."),
    "run": ("torchspec.cli.submit_cmd", "submit", "Alias of submit."),
    "rerun": ("torchspec.cli.rerun_cmd", "rerun", "Submit again exactly the spec an app was submitted with."),
    "status": ("torchspec.cli.status_cmd", "status", "Show an app's state, per role and replica."),
    "logs": ("torchspec.cli.logs_cmd", "logs", "Print (or follow) an app's logs, prefixed with role/replica."),
    "wait": ("torchspec.cli.wait_cmd", "wait", "Wait for an app to end; the exit code says how it ended."),
    "events": ("torchspec.cli.events_cmd", "events", "Show what the engine recorded about an app, newest last."),
    "cancel": ("torchspec.cli.apps_cmd", "cancel", "Cancel an app and everything it started."),
    "delete": ("torchspec.cli.apps_cmd", "delete", "Remove an app and what the scheduler keeps of it (logs too)."),
    "list": ("torchspec.cli.apps_cmd", "list_apps", "List the apps a scheduler knows about."),
    "describe": ("torchspec.cli.apps_cmd", "describe", "Show the AppDef an app was submitted with."),
    "runopts": ("torchspec.cli.info_cmd", "runopts", "Print the run options (-c) of the schedulers."),
    "schedulers": ("torchspec.cli.info_cmd", "schedulers", "List the registered schedulers (default marked)."),
    "builtins": ("torchspec.cli.info_cmd", "builtins", "List the built-in components."),
    "config": ("torchspec.cli.info_cmd", "config_cmd", "Show the effective configuration and where each value is set."),
    "tracker": ("torchspec.cli.tracker_cmd", "tracker", "Read what jobs recorded through their trackers."),
    "new": ("torchspec.cli.new_cmd", "new", "Start a scheduler plug-in package from a template."),
    "lsp": ("torchspec.cli.lsp_cmd", "lsp", "Run the language server for editors (live lint, hover, completion)."),
    "ui": ("torchspec.cli.ui_cmd", "ui", "Serve a local web dashboard: apps, replicas, specs, live logs."),
}


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args in (["--version"], ["-V"]):  # the fast path: no click import
        from torchspec.install import version_report

        print(version_report())
        sys.exit(0)
    try:
        if args[:1] == ["lint"] and not any(arg.startswith("-") for arg in args[1:]):
            # the fast path: `lint PATH...` with no option needs no click (~20 ms of its start-up)
            from torchspec.cli.lint_run import run_lint

            code = run_lint(tuple(args[1:]))
        else:
            code = build_cli().main(args=args, prog_name="torchspec", standalone_mode=False)
    except KeyboardInterrupt:  # Ctrl-C where click does not make it an Abort: `lint PATH...`
        code = _aborted()
    except Exception as e:  # noqa: BLE001 - the one place that turns every failure into an exit code
        code = _handle(e, args[:1])
    # What is left is freed with the process: the collector's last pass over every object at exit (~10 ms) is
    # skipped; the interpreter still runs atexit handlers and closes what it holds.
    gc.freeze()
    sys.exit(int(code) if isinstance(code, int) else 0)


def program() -> None:
    """The ``torchspec`` executable (its console script, ``python -m torchspec``): :func:`main`, then the
    process ends at once.  :func:`main` is for callers in Python, who get its ``SystemExit``."""
    try:
        main()
    except SystemExit as e:
        if e.code is not None and not isinstance(e.code, int):
            print(e.code, file=sys.stderr)  # as the interpreter does with a message for an exit code
        _end_process(e.code if isinstance(e.code, int) else 0 if e.code is None else 1)


def _end_process(code: int) -> None:
    """Exit with ``code`` without tearing the interpreter down module by module.

    Freeing every object of every imported module costs the user 3 ms after
    `lint` and 6 ms after `submit --wait`, for memory the kernel takes back
    at once.  What a normal exit does that matters is done here: the atexit
    handlers run (logging's flush among them) and stdout and stderr are
    flushed.  Where a thread that is no daemon still runs, the interpreter
    would wait for it: then this is a normal exit.
    """
    threading = sys.modules.get("threading")
    others = threading is not None and any(
        t is not threading.main_thread() and not t.daemon and t.is_alive() for t in threading.enumerate())
    run_exitfuncs = getattr(atexit, "_run_exitfuncs", None)
    if others or run_exitfuncs is None:
        gc.freeze()
        sys.exit(code)
    run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader that went away (`| head`), or a stream already closed
            pass
    os._exit(code)


def _handle(e: BaseException, command: list[str] | None = None) -> int:
    """The exit code for an exception, after printing what the user needs to know about it (``command``: the
    command's name, for a package missing)."""
    import click

    from torchspec.cli import console
    from torchspec.errors import AppRefusedError, BackendError, ComponentError, SpecError, UsageError
    from torchspec.exit_codes import ExitCode

    if isinstance(e, click.exceptions.Exit):
        return e.exit_code
    if isinstance(e, click.exceptions.Abort):  # Ctrl-C; what was stopped, where a command knows (following an app)
        return _aborted(str(e), getattr(e, "hint", None))
    if isinstance(e, click.ClickException):
        e.show()
        return ExitCode.USAGE if isinstance(e, click.UsageError) else e.exit_code
    if isinstance(e, AppRefusedError) and e.scheduler:
        console.error(f"{e.scheduler} cannot run this app: {e.message}", e.hint)
        return ExitCode.USAGE
    if isinstance(e, UsageError):
        console.error(e.message, e.hint)
        return ExitCode.USAGE
    if isinstance(e, BackendError):
        console.error(e.message, e.hint)
        return ExitCode.BACKEND
    if isinstance(e, SpecError):
        console.diagnostics(e.diagnostics)
        return ExitCode.SPEC_ERROR
    if isinstance(e, ComponentError):  # a Python component's own code failed
        if os.environ.get("TORCHSPEC_DEBUG"):
            raise e
        console.error(e.message, e.hint)
        return ExitCode.SPEC_ERROR
    if isinstance(e, BrokenPipeError):
        return ExitCode.OK
    if os.environ.get("TORCHSPEC_DEBUG"):
        raise e
    if isinstance(e, ModuleNotFoundError):  # a package one of the extras installs, imported past its own check
        from torchspec.errors import MissingExtraError

        missing = MissingExtraError.for_import(e, " ".join(["torchspec", *(command or [])]))
        if missing is not None:
            console.error(missing.message, missing.hint)
            return ExitCode.USAGE
    console.error(f"internal error: {type(e).__name__}: {e}",
                  "this is a bug in torchspec; rerun with TORCHSPEC_DEBUG=1 and report the traceback")
    return ExitCode.INTERNAL


def _aborted(what: str = "", hint: str | None = None) -> int:
    from torchspec.cli import console
    from torchspec.exit_codes import ExitCode

    console.error(f"aborted: {what}" if what else "aborted", hint)
    return ExitCode.INTERRUPTED


def _print_version(ctx: Any, _param: Any, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        from torchspec.install import version_report

        print(version_report())
        ctx.exit()


def build_cli() -> Any:
    import click

    class LazyGroup(click.Group):
        def list_commands(self, ctx: click.Context) -> list[str]:
            return sorted(COMMANDS)

        def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
            if name not in COMMANDS:
                return None
            module, attr, _ = COMMANDS[name]
            return getattr(importlib.import_module(module), attr)  # type: ignore[no-any-return]

        def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
            with formatter.section("Commands"):
                formatter.write_dl([(n, COMMANDS[n][2]) for n in sorted(COMMANDS)])

        def resolve_command(self, ctx: click.Context, args: list[str]) -> Any:
            name = args[0] if args else ""
            if name and not name.startswith("-") and name not in COMMANDS:
                from torchspec.errors import did_you_mean

                guess = did_you_mean(name, COMMANDS)
                hint = f" Did you mean {guess!r}?" if guess else ""
                ctx.fail(f"No such command {name!r}.{hint}")
            return super().resolve_command(ctx, args)

    from torchspec.exit_codes import help_text

    @click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]},
                 help="Declarative job specs for distributed PyTorch: lint, render and run them anywhere.\n\n"
                      "\b\nExit codes:\n" + help_text())
    @click.option("--version", "-V", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
                  help="Show the version, where torchspec is installed, the Python, and exit.")
    def cli() -> None:
        pass

    return cli
