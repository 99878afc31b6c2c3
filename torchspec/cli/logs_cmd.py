"""``torchspec logs``: the log lines of an app's replicas, each prefixed with ``role/replica``.

Also the log streaming that ``submit --log`` uses, so both print lines the same way.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Iterable, TextIO

import click

from torchspec.cli.apps_cmd import following, open_runner
from torchspec.cli.options import choice
from torchspec.exit_codes import ExitCode
from torchspec.errors import UsageError, did_you_mean_hint

if TYPE_CHECKING:
    from torchspec.runner import Runner

STREAMS = ["stdout", "stderr", "combined"]

def parse_when(text: str, now: datetime | None = None) -> datetime:
    """A point in time from ``--since``/``--until`` (:func:`torchspec.times.parse_when`: ISO 8601, or a
    duration back from now, ``5m``, ``1h30m``)."""
    from torchspec.times import parse_when as parse

    return parse(text, now)


class _When(click.ParamType):
    """click type for ``--since``/``--until``, so a bad value is a usage error naming the option."""

    name = "TIME"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> datetime:
        if isinstance(value, datetime):
            return value
        try:
            return parse_when(str(value))
        except UsageError as e:
            self.fail(f"{e.message}; {e.hint}", param, ctx)


@dataclass(frozen=True)
class Target:
    """One replica whose logs to read."""

    role: str
    replica: int

    @property
    def label(self) -> str:
        return f"{self.role}/{self.replica}"


def resolve_targets(runner: "Runner", handle: str, selector: str | None) -> list[Target]:
    """The replicas named by ``ROLE[/REPLICA]`` (all of them when None), checked against the app.

    Replica counts come from the AppDef the app was submitted with; the
    status is the fallback for schedulers that cannot describe an app.
    """
    status = runner.require_status(handle)
    replicas: dict[str, list[int]] = {}
    app = runner.describe(handle)
    if app is not None:
        for spec_role in app.roles:
            replicas[spec_role.name] = list(range(int(spec_role.num_replicas)))
    for role_status in status.roles:
        ids = replicas.setdefault(role_status.role, [])
        ids.extend(r.id for r in role_status.replicas if r.id not in ids)
    if selector is None:
        return [Target(role, i) for role, ids in replicas.items() for i in sorted(ids)]
    role, _, replica = selector.partition("/")
    if role not in replicas:
        raise UsageError(f"app {handle} has no role {role!r}", did_you_mean_hint(role, replicas, "its roles"))
    if not replica:
        return [Target(role, i) for i in sorted(replicas[role])]
    if not replica.isdigit() or int(replica) not in replicas[role]:
        raise UsageError(f"role {role!r} has no replica {replica!r}",
                         f"its replicas are 0..{max(replicas[role])}" if replicas[role] else None)
    return [Target(role, int(replica))]


def _stream_value(streams: str | None) -> Any:
    """The scheduler's ``Stream`` enum member where it has one (TorchX's API), else the plain name."""
    if streams is None:
        return None
    try:
        from torchspec.schedulers.api import Stream  # type: ignore[attr-defined]
    except ImportError:
        return streams
    return Stream(streams)


def print_logs(runner: "Runner", handle: str, targets: list[Target], *, follow: bool = False,
               regex: str | None = None, since: datetime | None = None, until: datetime | None = None,
               streams: str | None = None, out: TextIO | None = None, color: bool | None = None) -> None:
    """Write each target's lines to ``out``, each prefixed with its ``role/replica``.

    Without ``follow`` replicas are printed one after another, so the output
    is stable and greppable.  With it every replica is tailed at once (one
    reader thread each) and lines are interleaved as they arrive, until every
    replica's log ends, which the scheduler signals when the app ends.
    """
    from torchspec.cli import console

    out = out or sys.stdout
    color = console.use_color(out) if color is None else color
    width = max((len(t.label) for t in targets), default=0)
    stream = _stream_value(streams)

    def lines(target: Target) -> Iterable[str]:
        return runner.log_lines(handle, target.role, target.replica, regex=regex, since=since, until=until,
                                should_tail=follow, streams=stream)

    prefixes = {target: console.log_prefix(target.role, target.replica, color, width) for target in targets}

    def write(target: Target, line: str) -> None:
        out.write(prefixes[target] + line.rstrip("\r\n") + "\n")

    if not follow:
        for target in targets:
            if not (regex or since or until) and _print_blocks(runner, handle, target, prefixes[target], stream, out):
                continue
            _print_all(lines(target), prefixes[target], out)
        return
    if len(targets) == 1:
        for line in lines(targets[0]):
            write(targets[0], line)
            out.flush()
        return
    _follow_all(targets, lines, write, out)


def _print_blocks(runner: "Runner", handle: str, target: Target, prefix: str, stream: Any, out: TextIO) -> bool:
    """The fast path: the scheduler's blocks of prefixed UTF-8 lines, written as they are; False where there
    is none (the scheduler has no ``log_blocks``, or ``out`` takes no UTF-8 bytes)."""
    buffer = getattr(out, "buffer", None)
    if buffer is None or (getattr(out, "encoding", "") or "").lower().replace("-", "") != "utf8":
        return False
    blocks = runner.log_blocks(handle, target.role, target.replica, prefix.encode("utf-8"), streams=stream)
    if blocks is None:
        return False
    out.flush()
    for block in blocks:
        buffer.write(block)
    buffer.flush()
    return True


def _print_all(lines: Iterable[str], prefix: str, out: TextIO, batch: int = 2048) -> None:
    """Every line, prefixed, written a few thousand at a time: one write per line is most of the cost."""
    pending: list[str] = []
    for line in lines:
        pending.append(prefix + line.rstrip("\r\n") + "\n")
        if len(pending) >= batch:
            out.write("".join(pending))
            pending.clear()
    out.write("".join(pending))
    out.flush()


def _follow_all(targets: list[Target], lines: Any, write: Any, out: TextIO) -> None:
    """Tail every target at once; one thread per replica feeds a queue the calling thread prints from.

    Only the calling thread writes, so lines never interleave mid-line; a
    reader's exception is re-raised here once the others are done.
    """
    import queue

    done = object()
    q: "queue.Queue[tuple[Target, Any]]" = queue.Queue()
    errors: list[BaseException] = []

    def read(target: Target) -> None:
        try:
            for line in lines(target):
                q.put((target, line))
        except BaseException as e:  # noqa: BLE001 - handed to the printing thread
            errors.append(e)
        finally:
            q.put((target, done))

    for target in targets:
        threading.Thread(target=read, args=(target,), name=f"logs-{target.label}", daemon=True).start()
    remaining = len(targets)
    while remaining:
        target, line = q.get()
        if line is done:
            remaining -= 1
            continue
        write(target, line)
        out.flush()
    if errors:
        raise errors[0]


@click.command()
@click.argument("handle")
@click.argument("selector", required=False, metavar="[ROLE[/REPLICA]]")
@click.option("-f", "--follow", is_flag=True, help="Keep printing new lines until the app ends.")
@click.option("--regex", metavar="REGEX", help="Only lines matching this Python regular expression.")
@click.option("--since", type=_When(), help="Only lines from this time on: ISO 8601, or a duration ago (5m, 1h).")
@click.option("--until", type=_When(), help="Only lines up to this time: ISO 8601, or a duration ago (5m, 1h).")
@click.option("--streams", type=choice(STREAMS), default=None,
              help="Which output to show (default: what the scheduler shows, usually combined).")
def logs(handle: str, selector: str | None, follow: bool, regex: str | None, since: datetime | None,
         until: datetime | None, streams: str | None) -> int:
    """Print the logs of an app's replicas, each line prefixed with role/replica.

    Without ROLE every replica of every role is shown; ROLE alone shows all of
    its replicas; ROLE/REPLICA one. Prefixes are coloured per replica on a
    terminal (never with NO_COLOR); plain text otherwise.

    Exit codes: 0 ok, 2 malformed or unknown handle, unknown scheduler, role or
    replica, a bad --regex/--since/--until, or an option the scheduler cannot
    honour (-f, --since/--until, --streams: `torchspec schedulers` lists what
    each can do), 6 the scheduler's backend cannot be reached.
    """
    if regex is not None:
        try:
            re.compile(regex)
        except re.error as e:
            raise UsageError(f"bad --regex {regex!r}: {e}") from None
    with open_runner() as runner:
        handle = runner.resolve_handle(handle)
        runner.check_log_request(handle, should_tail=follow, since=since, until=until,
                                 streams=_stream_value(streams))
        targets = resolve_targets(runner, handle, selector)
        try:
            with following(handle) if follow else contextlib.nullcontext():
                print_logs(runner, handle, targets, follow=follow, regex=regex, since=since, until=until,
                           streams=streams)
        except BrokenPipeError:
            # `torchspec logs H | head`: the reader has seen enough, which is no error (click would exit 1);
            # stdout goes to /dev/null so the interpreter's final flush cannot fail again
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except NotImplementedError:
            scheduler = handle.split("://", 1)[0]
            raise UsageError(f"the {scheduler} scheduler cannot show logs") from None
        except ValueError as e:  # the scheduler's word for a request it cannot serve (e.g. a stream it lacks)
            raise UsageError(f"cannot read the logs of {handle}: {e}") from None
    return ExitCode.OK
