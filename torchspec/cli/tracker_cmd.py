"""``torchspec tracker``: what the configured tracker recorded of the jobs (as TorchX's ``torchx tracker``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, TypeVar

import click

from torchspec.cli.apps_cmd import dump_json
from torchspec.cli.options import output_option
from torchspec.exit_codes import ExitCode

if TYPE_CHECKING:
    from torchspec.tracker import TrackerBase

T = TypeVar("T")
_TRACKER = click.option("--tracker", "tracker_name", metavar="NAME",
                        help="Which configured tracker to read (default: the first one).")


def _ask(name: str | None, question: Callable[["TrackerBase"], T]) -> T:
    """``question`` asked of the configured tracker ``name``; its failures are a BackendError (exit 6)."""
    from torchspec.config import load_config
    from torchspec.runner.trackers import limit_reader_requests, open_tracker, tracker_errors

    limit_reader_requests()
    chosen, found = open_tracker(load_config(), name)
    with tracker_errors(chosen):
        return question(found)


@click.group()
def tracker() -> None:
    """Read what jobs recorded through their trackers (app_run_from_env()).

    The trackers are those of the configuration ([tracker.NAME] in
    .torchspec.toml, or .torchxconfig's [torchx:tracker]), which every job
    submitted from here records to.

    Exit codes: 0 ok, 2 no tracker configured or an unknown one, 6 the tracker's
    store could not be read (its server down, say).
    """


@tracker.group("list")
def list_group() -> None:
    """List jobs, or a job's metadata or artifacts."""


@list_group.command("jobs")
@_TRACKER
@click.option("--parent-run-id", metavar="JOB", help="Only the jobs that came from this one.")
@output_option(("text", "json"), "text (one job per line), or json (a list).", json_flag=True)
def list_jobs(tracker_name: str | None, parent_run_id: str | None, fmt: str) -> int:
    """List the jobs the tracker knows (their ids are their app handles)."""
    kwargs = {"parent_run_id": parent_run_id} if parent_run_id else {}
    runs = _ask(tracker_name, lambda t: list(t.run_ids(**kwargs)))
    if fmt == "json":
        dump_json(runs)
        return ExitCode.OK
    for run in runs:
        click.echo(run)
    return ExitCode.OK


@list_group.command("metadata")
@_TRACKER
@click.argument("job")
@output_option(("text", "json"), "text (KEY = VALUE lines), or json (an object).", json_flag=True)
def list_metadata(tracker_name: str | None, job: str, fmt: str) -> int:
    """List the metadata JOB recorded (add_metadata)."""
    found = _ask(tracker_name, lambda t: dict(t.metadata(job)))
    if fmt == "json":
        dump_json(found)
        return ExitCode.OK
    for key, value in sorted(found.items()):
        click.echo(f"{key} = {value}")
    return ExitCode.OK


@list_group.command("artifacts")
@_TRACKER
@click.option("--artifact", metavar="NAME", help="Only this artifact.")
@click.argument("job")
@output_option(("text", "json"), "text (NAME PATH lines), or json (an object by name).", json_flag=True)
def list_artifacts(tracker_name: str | None, artifact: str | None, job: str, fmt: str) -> int:
    """List the artifacts JOB recorded (add_artifact): name, path and metadata."""
    found = {name: a for name, a in _ask(tracker_name, lambda t: dict(t.artifacts(job))).items()
             if artifact in (None, name)}
    if fmt == "json":
        dump_json({name: {"path": a.path, "metadata": a.metadata} for name, a in found.items()})
        return ExitCode.OK
    for name, item in sorted(found.items()):
        click.echo(f"{name}  {item.path}" + (f"  {item.metadata}" if item.metadata else ""))
    return ExitCode.OK


@tracker.command("lineage")
@_TRACKER
@click.option("--sources-only", is_flag=True, help="Only where JOB came from.")
@click.option("--descendants-only", is_flag=True, help="Only the jobs that came from JOB.")
@click.option("--artifact", metavar="NAME", help="Only the sources of this input artifact.")
@click.argument("job")
@output_option(("text", "json"), "text, or json ({run_id, sources, children}).", json_flag=True)
def lineage(tracker_name: str | None, sources_only: bool, descendants_only: bool, artifact: str | None, job: str,
            fmt: str) -> int:
    """Show where JOB came from (its sources: parent runs, input artifacts) and the jobs that came from it.

    Also as TorchX's ``tracker list lineage``. Exit codes: 0 ok, 2
    --sources-only with --descendants-only.
    """
    if sources_only and descendants_only:
        raise click.UsageError("give --sources-only or --descendants-only, not both")
    found = _ask(tracker_name, lambda t: t.lineage(job))
    sources = [] if descendants_only else [s for s in found.sources if artifact in (None, s.artifact_name)]
    children = [] if sources_only else found.children
    if fmt == "json":
        dump_json({"run_id": found.run_id, "children": children,
                   "sources": [{"source_run_id": s.source_run_id, "artifact_name": s.artifact_name}
                               for s in sources]})
        return ExitCode.OK
    click.echo(found.run_id)
    for source in sources:
        click.echo(f"  from {source.source_run_id}" + (f" ({source.artifact_name})" if source.artifact_name else ""))
    for child in children:
        click.echo(f"  to   {child}")
    return ExitCode.OK


list_group.add_command(lineage, "lineage")  # TorchX's place for it: torchx tracker list lineage
