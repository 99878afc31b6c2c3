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
    from torchspec.runner.selection import Selection


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


def selection_options(func: Any) -> Any:
    """``-l``, ``--state``, ``--user`` and a time option: what ``list``, ``cancel`` and ``delete`` select apps by."""
    for option in reversed([
            click.option("-l", "--label", "labels", multiple=True, metavar="KEY[=VALUE]",
                         help="Only apps carrying this label (with this value); repeatable, all must match."),
            click.option("--state", "states", multiple=True, metavar="STATE[,STATE...]",
                         help="Only apps in one of these states (RUNNING, PENDING, FAILED...); repeatable."),
            click.option("--user", metavar="USER", help="Only apps this user submitted (from their provenance)."),
            click.option("--sweep", metavar="ID", help="Only the apps of this sweep (submit --sweep prints its id).")]):
        func = option(func)
    return func


@click.command("list")
@click.option("-s", "--scheduler", metavar="SCHEDULER",
              help="Scheduler to ask (default: the configured one, else local).")
@click.option("-c", "--cfg", "cfg", metavar="KEY=VALUE,...",
              help="Run options, as submit takes them: list where those submit to (kubernetes: namespace, context).")
@selection_options
@click.option("--since", metavar="TIME", help="Only apps created since then: a duration ago (30m, 2d) or ISO 8601.")
@click.option("--show-labels", is_flag=True, help="Add a LABELS column: the app's labels (its metadata).")
@output_option(("text", "json"), "text (a table) or json (a list of {app_handle, app_id, state, created, labels}).",
               json_flag=True)
def list_apps(scheduler: str | None, cfg: str | None, labels: tuple[str, ...], states: tuple[str, ...],
              user: str | None, sweep: str | None, since: str | None, show_labels: bool, fmt: str) -> int:
    """List the apps a scheduler knows about, oldest first.

    An app's labels are the metadata it was submitted with (torchspec apply
    puts the spec's identity and content hash there): `-l
    torchspec.dev/apply-id=jobs/train.yaml` finds what apply submitted for that file.
    `--state`, `--user` and `--since` narrow the list the same way `cancel`
    and `delete` select apps (the time is the engine's own record of when it
    took the app; the user, who submitted it, from its provenance).

    Exit codes: 0 ok (also when no app matches), 2 unknown scheduler, a bad
    selection, or -l/--user/--show-labels on a scheduler that keeps no
    labels, 6 the scheduler's backend cannot be reached.
    """
    from torchspec.cli import console
    from torchspec.runner.selection import Selection, select
    from torchspec.schedulers.api import Capability

    selection = Selection.parse(labels, states, user, since=since, sweep=sweep)
    with open_runner() as runner:
        name = runner.check_scheduler(scheduler)
        if labels or user or sweep or show_labels:
            runner.require(name, Capability.LABELS)
        apps = select(runner, name, selection, cfg)
    # ``name`` only where the scheduler reports one (TorchX's ListAppResponse has none; some backends add it)
    rows: list[dict[str, Any]] = []
    for a in apps:
        rows.append({"app_handle": a.app_handle, "app_id": a.app_id, "state": str(a.state)})
        app_name = getattr(a, "name", "")
        if app_name:
            rows[-1]["name"] = str(app_name)
        rows[-1]["created"] = a.created.isoformat() if a.created else None
        rows[-1]["labels"] = dict(a.labels)
    if fmt == "json":
        dump_json(rows)
        return ExitCode.OK
    if not rows:
        print(f"no apps on {name}" + (f" with {selection.describe()}" if not selection.is_empty() else ""),
              file=sys.stderr)
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


def bulk_options(func: Any) -> Any:
    """What ``cancel`` and ``delete`` take: handles, or a selection on one or more schedulers."""
    for option in reversed([
            click.argument("handles", nargs=-1, metavar="[HANDLE]..."),
            click.option("-s", "--scheduler", "scheduler", multiple=True, metavar="SCHEDULER",
                         help="With a selection: the scheduler to select on (default: the configured one); "
                              "repeatable."),
            click.option("-c", "--cfg", "cfg", metavar="KEY=VALUE,...",
                         help="With a selection: run options naming where to look, as submit takes them."),
            selection_options,
            click.option("--older-than", metavar="DURATION",
                         help="Only apps created before then: a duration ago (2d, 12h) or ISO 8601."),
            click.option("-y", "--yes", is_flag=True, help="Do not ask first (needed where stdin is not a terminal)."),
            click.option("--dry-run", is_flag=True, help="Only show the apps it would act on (on stdout).")]):
        func = option(func)
    return func


def run_bulk(verb: str, handles: tuple[str, ...], schedulers: tuple[str, ...], cfg: str | None,
             selection: "Selection", yes: bool, dry_run: bool) -> int:
    """``cancel``/``delete``: one handle is acted on at once (its error raised, as any command's); several, or a
    selection, are shown and confirmed first (:func:`_confirmed`), then acted on one by one, going on past those
    that fail.  Exit 6 when a backend failed, else 2 when an app could not be acted on, else 0."""
    from torchspec.errors import BackendError
    from torchspec.runner.selection import act_on_each, cancel_one, delete_one

    if handles and (not selection.is_empty() or schedulers or cfg):
        raise UsageError(f"{verb}: name apps by handle or select them (-s, -c, -l, --state, --user, --sweep, "
                         "--older-than), not both")
    if not handles and selection.is_empty():
        raise UsageError(f"{verb}: name the apps, by handle or by a selection",
                         f"e.g. torchspec {verb} HANDLE, or torchspec {verb} --state FAILED --older-than 7d")
    one = cancel_one if verb == "cancel" else delete_one
    failed: list[Exception] = []
    with open_runner() as runner:
        if len(handles) == 1 and not dry_run:
            handle = runner.resolve_handle(handles[0])
            _say(handle, one(runner, handle))
            return ExitCode.OK
        picked = _pick(runner, verb, handles, schedulers, cfg, selection, failed)
        if picked and _confirmed(verb, picked, yes, dry_run):
            for outcome in act_on_each([handle for handle, _ in picked], lambda h: one(runner, h)):
                _say(outcome.handle, outcome.note, outcome.error)
                if outcome.error is not None:
                    failed.append(outcome.error)
    if any(isinstance(e, BackendError) for e in failed):
        return ExitCode.BACKEND
    return ExitCode.USAGE if failed else ExitCode.OK


def _pick(runner: "Runner", verb: str, handles: tuple[str, ...], schedulers: tuple[str, ...], cfg: str | None,
          selection: "Selection", failed: list[Exception]) -> list[tuple[str, str]]:
    """(handle, state where known) of each app to act on; what could not be read is said and added to
    ``failed`` (a malformed handle, a scheduler that cannot be reached), and the rest still picked."""
    from torchspec.errors import BackendError
    from torchspec.runner.selection import act_on_each, select
    from torchspec.schedulers.api import Capability

    if handles:
        picked = []
        for outcome in act_on_each(handles, runner.resolve_handle):
            if outcome.error is None:
                picked.append((outcome.note, ""))
            else:
                _say(outcome.handle, outcome.note, outcome.error)
                failed.append(outcome.error)
        return picked
    picked = []
    for name in schedulers or (None,):
        try:
            scheduler = runner.check_scheduler(name)
            if selection.labels or selection.user:
                runner.require(scheduler, Capability.LABELS)
            picked += [(app.app_handle, str(app.state)) for app in select(runner, scheduler, selection, cfg)]
        except BackendError as e:
            _say(name or "the default scheduler", e.message, e)
            failed.append(e)
    if not picked and not failed:
        where = ", ".join(schedulers) or runner.check_scheduler(None)
        print(f"no apps on {where} with {selection.describe()}: nothing to {verb}", file=sys.stderr)
    return picked


def _confirmed(verb: str, picked: list[tuple[str, str]], yes: bool, dry_run: bool) -> bool:
    """Show the apps, then whether to go on: not with --dry-run (the list on stdout, for scripts), at once
    with --yes, else the user's answer; where no one can answer (stdin not a terminal), a usage error."""
    lines = [f"{handle}  {state}".rstrip() for handle, state in picked]
    if dry_run:
        print(f"{verb} would act on {len(picked)} app(s):", file=sys.stderr)
        click.echo("\n".join(lines))
        return False
    if yes:
        return True
    if not sys.stdin.isatty():
        raise UsageError(f"{verb}: not asking where stdin is not a terminal ({len(picked)} app(s) selected)",
                         f"add --yes to {verb} them, or --dry-run to list them")
    print("\n".join(lines), file=sys.stderr)
    if click.confirm(f"{verb} these {len(picked)} app(s)?", default=False, err=True):
        return True
    print(f"nothing to {verb}: not confirmed", file=sys.stderr)
    return False


def _say(handle: str, note: str, error: Exception | None = None) -> None:
    """One app's outcome on stderr: ``cancelled HANDLE``, ``HANDLE already ended: ...``, or its error."""
    if error is not None:
        from torchspec.cli import console

        console.error(note if handle in note else f"{handle}: {note}", getattr(error, "hint", None))
    elif note in ("cancelled", "deleted"):
        print(f"{note} {handle}", file=sys.stderr)
    else:
        print(f"{handle} {note}", file=sys.stderr)


@click.command()
@bulk_options
def cancel(handles: tuple[str, ...], scheduler: tuple[str, ...], cfg: str | None, labels: tuple[str, ...],
           states: tuple[str, ...], user: str | None, sweep: str | None, older_than: str | None, yes: bool,
           dry_run: bool) -> int:
    """Cancel apps: stop every replica and the processes they started.

    Name one app by its handle, or several; or select them, on one or more
    schedulers (`-s`), by label, state, user and age:
    `torchspec cancel -s kubernetes --state PENDING --older-than 2h`.
    Several apps are listed and confirmed first (`--yes` skips the question;
    `--dry-run` only lists them); one that fails is reported and the others
    are still cancelled.

    Returns once the scheduler has been told; `torchspec wait HANDLE` waits
    for the app to end (it then exits 5, CANCELLED). Cancelling an app that
    already ended does nothing.

    Exit codes: 0 ok (also when nothing matched), 2 malformed or unknown
    handle, unknown scheduler, a bad selection, or several apps with no
    --yes where stdin is not a terminal, 6 a scheduler's backend cannot be
    reached.
    """
    from torchspec.runner.selection import Selection

    selection = Selection.parse(labels, states, user, older_than=older_than, sweep=sweep)
    return run_bulk("cancel", handles, scheduler, cfg, selection, yes, dry_run)


@click.command()
@bulk_options
def delete(handles: tuple[str, ...], scheduler: tuple[str, ...], cfg: str | None, labels: tuple[str, ...],
           states: tuple[str, ...], user: str | None, sweep: str | None, older_than: str | None, yes: bool,
           dry_run: bool) -> int:
    """Remove apps: cancel each if it runs, then delete what the scheduler keeps of it.

    On docker that is the app's containers (with their logs) and its
    network (volumes are never removed); on local, the app's folder. Apps are
    named and selected as `cancel` takes them:
    `torchspec delete -s local --state SUCCEEDED,FAILED --older-than 7d --yes`.

    Exit codes: 0 ok (also when nothing matched), 2 malformed or unknown
    handle, unknown scheduler, a scheduler that cannot delete apps, a bad
    selection, or several apps with no --yes where stdin is not a terminal,
    6 a scheduler's backend cannot be reached or could not stop the app.
    """
    from torchspec.runner.selection import Selection

    selection = Selection.parse(labels, states, user, older_than=older_than, sweep=sweep)
    return run_bulk("delete", handles, scheduler, cfg, selection, yes, dry_run)
