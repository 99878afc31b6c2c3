"""``torchspec list``, ``describe``, ``cancel`` and ``delete``, and the runner every app command opens.

Each command is a thin layer over :class:`torchspec.runner.Runner`: the
runner raises the usage errors (a malformed or unknown handle, an unknown
scheduler with a did-you-mean), and ``cli.main`` turns every error into its
message and exit code.
"""

from __future__ import annotations

import contextlib
import json
import sys
from typing import TYPE_CHECKING, Any, Iterator

import click

from torchspec.cli.options import output_option
from torchspec.errors import UsageError
from torchspec.exit_codes import ExitCode

if TYPE_CHECKING:
    from torchspec.runner import Runner


@contextlib.contextmanager
def open_runner() -> Iterator["Runner"]:
    """A runner for one command, closed on the way out."""
    from torchspec.runner import get_runner

    with get_runner() as runner:
        yield runner


class StoppedFollowing(click.exceptions.Abort):
    """Ctrl-C while a command followed an app: the following stopped, not the app (exit 130, as any Ctrl-C)."""

    def __init__(self, handle: str) -> None:
        super().__init__(f"{handle} keeps running")
        self.hint = f"stop it with: torchspec cancel {handle}"


@contextlib.contextmanager
def following(handle: str) -> Iterator[None]:
    """Around a command that follows an app (``wait``, ``logs -f``, ``submit --wait/--log``): a bare "aborted"
    on Ctrl-C left the user to guess whether the app was stopped too; it was not, and the error says so."""
    try:
        yield
    except KeyboardInterrupt:
        print(file=sys.stderr)  # past the ^C the terminal echoed
        raise StoppedFollowing(handle) from None


def dump_json(data: Any) -> None:
    """JSON on stdout, stable key order as given, for scripts (``jq``) rather than people."""
    click.echo(json.dumps(data, indent=2, default=str))


# --- commands ----------------------------------------------------------------------------------------------------


@click.command("list")
@click.option("-s", "--scheduler", metavar="SCHEDULER",
              help="Scheduler to ask (default: the configured one, else local).")
@click.option("-c", "--cfg", "cfg", metavar="KEY=VALUE,...",
              help="Run options, as submit takes them: list where those submit to (kubernetes: namespace, context).")
@click.option("-l", "--label", "selectors", multiple=True, metavar="KEY[=VALUE]",
              help="Only apps carrying this label (with this value); repeatable, all must match.")
@click.option("--show-labels", is_flag=True, help="Add a LABELS column: the app's labels (its metadata).")
@output_option(("text", "json"), "text (a table) or json (a list of {app_handle, app_id, state, labels}).",
               json_flag=True)
def list_apps(scheduler: str | None, cfg: str | None, selectors: tuple[str, ...], show_labels: bool,
              fmt: str) -> int:
    """List the apps a scheduler knows about, newest last.

    An app's labels are the metadata it was submitted with (torchspec apply
    puts the spec's identity and content hash there): `-l
    torchspec.dev/apply-id=jobs/train.yaml` finds what apply submitted for that file.

    Exit codes: 0 ok, 2 unknown scheduler, or -l/--show-labels on a scheduler
    that keeps no labels, 6 the scheduler's backend cannot be reached.
    """
    from torchspec.cli import console
    from torchspec.schedulers.api import Capability

    wanted = [s.partition("=") for s in selectors]
    with open_runner() as runner:
        name = runner.check_scheduler(scheduler)
        if selectors or show_labels:
            runner.require(name, Capability.LABELS)
        apps = [a for a in runner.list(name, runner.run_options(name, cfg) if cfg else None)
                if all(k in a.labels and (not eq or a.labels[k] == v) for k, eq, v in wanted)]
    # ``name`` only where the scheduler reports one (TorchX's ListAppResponse has none; some backends add it)
    rows: list[dict[str, Any]] = []
    for a in apps:
        rows.append({"app_handle": a.app_handle, "app_id": a.app_id, "state": str(a.state)})
        app_name = getattr(a, "name", "")
        if app_name:
            rows[-1]["name"] = str(app_name)
        rows[-1]["labels"] = dict(a.labels)
    if fmt == "json":
        dump_json(rows)
        return ExitCode.OK
    if not rows:
        print(f"no apps on {name}" + (" with those labels" if wanted else ""), file=sys.stderr)
        return ExitCode.OK
    headers = ["APP_HANDLE", "STATE"] + (["NAME"] if any("name" in r for r in rows) else [])
    cells = [[str(r.get(h.lower(), "")) for h in headers] for r in rows]
    if show_labels:
        headers.append("LABELS")
        for row, r in zip(cells, rows):
            row.append(",".join(f"{k}={v}" for k, v in sorted(r["labels"].items())))
    console.table(headers, cells)
    return ExitCode.OK


@click.command()
@click.argument("handle")
@output_option(("yaml", "json"), "The AppDef as YAML or JSON (either is the shape of a spec file).", json_flag=True)
@click.option("--all", "show_all", is_flag=True,
              help="Also show what torchspec added to each role's env (TORCHSPEC_JOB_ID, TORCHSPEC_PARENT_RUN_ID).")
def describe(handle: str, fmt: str, show_all: bool) -> int:
    """Show the AppDef that an app was submitted with, as a spec (YAML, or JSON with -o json).

    The app's name is the one it was submitted with, where the scheduler
    keeps it (else its id). What torchspec added on the way (TORCHSPEC_JOB_ID
    and TORCHSPEC_PARENT_RUN_ID in each role's env, the provenance label) is
    left out; --all shows it too. The YAML opens with the app's provenance as
    comments (file, commit, who, when, content hash, params, run options);
    `status -o json` has all of it.

    Exit codes: 0 ok, 2 malformed or unknown handle, or unknown scheduler,
    6 the scheduler's backend cannot be reached.
    """
    from torchspec.runner.injected import without_injected
    from torchspec.specs.convert import dump_app

    with open_runner() as runner:
        handle = runner.resolve_handle(handle)
        app = runner.describe(handle)
        recorded = runner.provenance(handle) if app is not None and fmt != "json" else None
    if app is None:
        raise UsageError(f"unknown app {handle!r}: the scheduler cannot describe it",
                         "list the apps with: torchspec list -s " + handle.split("://", 1)[0])
    data = dump_app(app if show_all else without_injected(app))
    if fmt == "json":
        dump_json(data)
        return ExitCode.OK
    import yaml

    from torchspec.cli import console

    from torchspec.runner.provenance import summary

    comments = "".join(f"# {line}\n" for line in summary(recorded).splitlines()) if recorded else ""
    text = yaml.safe_dump(data, sort_keys=False, default_flow_style=False, width=1000).rstrip()
    console.highlighted(comments + text, "yaml")
    return ExitCode.OK


@click.command()
@click.argument("handle")
def cancel(handle: str) -> int:
    """Cancel an app: stop every replica and the processes they started.

    Returns once the scheduler has been told; `torchspec wait HANDLE` waits
    for the app to end (it then exits 5, CANCELLED). Cancelling an app that
    already ended does nothing.

    Exit codes: 0 ok, 2 malformed or unknown handle, or unknown scheduler,
    6 the scheduler's backend cannot be reached.
    """
    with open_runner() as runner:
        handle = runner.resolve_handle(handle)
        status = runner.require_status(handle)
        if status.is_terminal():
            print(f"{handle} already ended: {status.state}", file=sys.stderr)
            return ExitCode.OK
        runner.cancel(handle)
    print(f"cancelled {handle}", file=sys.stderr)
    return ExitCode.OK


@click.command()
@click.argument("handle")
def delete(handle: str) -> int:
    """Remove an app: cancel it if it runs, then delete what the scheduler keeps of it.

    On docker that is the app's containers (with their logs) and its
    network (volumes are never removed); on local, the app's folder.

    Exit codes: 0 ok, 2 malformed or unknown handle, unknown scheduler, or a
    scheduler that cannot delete apps, 6 the scheduler's backend cannot be
    reached or could not stop the app.
    """
    with open_runner() as runner:
        handle = runner.resolve_handle(handle)
        from torchspec.schedulers.api import Capability

        runner.require(handle, Capability.DELETE, f"stop it with: torchspec cancel {handle}")
        runner.require_status(handle)
        try:
            runner.delete(handle)
        except NotImplementedError:
            raise UsageError(f"the {handle.split('://', 1)[0]} scheduler cannot delete apps",
                             f"stop it with: torchspec cancel {handle}") from None
    print(f"deleted {handle}", file=sys.stderr)
    return ExitCode.OK
