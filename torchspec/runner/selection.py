"""Apps chosen by what they are rather than by handle: ``list --state/--user/--since/-l`` and the bulk forms of
``cancel`` and ``delete`` (``--state``, ``--older-than``, ``-l``, several handles).

Why one module: "the apps ``list --state RUNNING --older-than 2d`` shows" must be exactly the apps ``cancel``
with the same options acts on, so the front ends (the CLI, the dashboard) parse and match through
:class:`Selection` and act through :func:`act_on_each`, which goes on past an app or a backend that fails and
says which.

Times are the engine's own (``ListAppResponse.created``: a Job's creationTimestamp, a container's creation,
Slurm's submit time, Ray's start time, local's record), never this machine's guess; an app whose engine does
not say when it was created matches no time condition.  The user is the one in the app's provenance (who ran
``submit``); an app submitted without it (another tool, an old torchspec) matches no ``--user``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Callable, FrozenSet, Iterable, Iterator, List, Optional, Sequence, Tuple

from torchspec.errors import TorchSpecError, UsageError, did_you_mean_hint
from torchspec.specs import AppState
from torchspec.times import parse_when_utc

if TYPE_CHECKING:
    from torchspec.runner.api import Runner
    from torchspec.schedulers.api import ListAppResponse

#: The states ``--state`` takes, by name.
STATE_NAMES = [state.name for state in AppState]


@dataclass(frozen=True)
class Selection:
    """Conditions an app must all meet; an empty selection (no condition) matches every app."""

    #: (key, value) pairs; a value of None: the label is there, whatever its value
    labels: Tuple[Tuple[str, Optional[str]], ...] = ()
    states: FrozenSet[AppState] = frozenset()
    user: Optional[str] = None
    #: created at or after this time (aware, UTC)
    since: Optional[datetime] = None
    #: created before this time (aware, UTC)
    before: Optional[datetime] = None
    #: the conditions as the user gave them, for messages ("state RUNNING, older than 2d")
    said: Tuple[str, ...] = field(default=(), compare=False)

    @classmethod
    def parse(cls, labels: Iterable[str] = (), states: Iterable[str] = (), user: Optional[str] = None,
              since: Optional[str] = None, older_than: Optional[str] = None, sweep: Optional[str] = None,
              now: Optional[datetime] = None) -> "Selection":
        """From the command line's words; a UsageError naming the option and what it takes for a bad one.

        ``states`` may hold commas (``--state RUNNING,PENDING``); ``since`` is a time or a duration back from
        now; ``older_than`` a duration (``2d``) or a time."""
        from torchspec.runner.sweep import SWEEP_LABEL

        now = now or datetime.now(timezone.utc)
        said: List[str] = [f"sweep {sweep}"] if sweep else []
        pairs: List[Tuple[str, Optional[str]]] = [(SWEEP_LABEL, sweep)] if sweep else []
        for text in labels:
            key, eq, value = text.partition("=")
            if not key:
                raise UsageError(f"-l {text!r}: give a label as KEY or KEY=VALUE")
            pairs.append((key, value if eq else None))
            said.append(f"label {text}")
        wanted = set()
        for word in (w.strip() for text in states for w in text.split(",")):
            if word.upper() not in STATE_NAMES:
                raise UsageError(f"--state {word!r} is not an app state", did_you_mean_hint(word.upper(), STATE_NAMES,
                                                                                             "states"))
            wanted.add(AppState[word.upper()])
        if wanted:
            said.append("state " + ",".join(sorted(s.name for s in wanted)))
        if user:
            said.append(f"user {user}")
        start = _option_time("--since", since, now)
        if start is not None:
            said.append(f"created since {since}")
        end = _option_time("--older-than", older_than, now)
        if end is not None:
            said.append(f"older than {older_than}")
        return cls(tuple(pairs), frozenset(wanted), user or None, start, end, tuple(said))

    def is_empty(self) -> bool:
        return not (self.labels or self.states or self.user or self.since or self.before)

    def matches(self, app: "ListAppResponse") -> bool:
        if self.states and app.state not in self.states:
            return False
        if any(key not in app.labels or (value is not None and app.labels[key] != value)
               for key, value in self.labels):
            return False
        if self.user is not None and (app.provenance or {}).get("user") != self.user:
            return False
        if self.since is not None and (app.created is None or app.created < self.since):
            return False
        if self.before is not None and (app.created is None or app.created >= self.before):
            return False
        return True

    def describe(self) -> str:
        """The conditions in a few words, for "no apps on local with ..." messages."""
        return ", ".join(self.said)


def _option_time(option: str, text: Optional[str], now: datetime) -> Optional[datetime]:
    """A time option's value (a duration back from ``now``, or a time) in UTC; a UsageError naming ``option``."""
    if text is None:
        return None
    try:
        return parse_when_utc(text, now.astimezone().replace(tzinfo=None))
    except UsageError as e:
        raise UsageError(f"{option}: {e.message}", e.hint) from None


def select(runner: "Runner", scheduler: str, selection: Selection, cfg: Optional[str] = None
           ) -> List["ListAppResponse"]:
    """The apps of ``scheduler`` (where ``-c`` ``cfg`` submits, when given) that ``selection`` matches, oldest
    first; BackendError where the scheduler cannot be asked."""
    options = runner.run_options(scheduler, cfg) if cfg else None
    return [app for app in runner.list(scheduler, options) if selection.matches(app)]


def sweep_handles(runner: "Runner", sweep: str, schedulers: Sequence[str] = ()) -> List[str]:
    """The handles of every app of sweep ``sweep`` on ``schedulers`` (default: the configured one), oldest first;
    a UsageError where there is none."""
    picked = Selection.parse(sweep=sweep)
    handles = [app.app_handle for name in (list(schedulers) or [None])
               for app in select(runner, runner.check_scheduler(name), picked)]
    if not handles:
        where = ", ".join(schedulers) or runner.check_scheduler(None)
        raise UsageError(f"no apps of sweep {sweep} on {where}",
                         f"list them with: torchspec list --sweep {sweep} -s SCHEDULER")
    return handles


@dataclass
class Outcome:
    """What happened to one app of a bulk command."""

    handle: str
    #: what the command did or found ("cancelled", "already ended: SUCCEEDED"); the error's message if it failed
    note: str
    error: Optional[TorchSpecError] = None


def act_on_each(handles: Sequence[str], act: Callable[[str], str]) -> Iterator[Outcome]:
    """``act`` on each handle in turn, an error in one (an unknown app, a backend that is down) noted and the
    rest still acted on; ``act`` returns what it did."""
    for handle in handles:
        try:
            yield Outcome(handle, act(handle))
        except TorchSpecError as e:
            yield Outcome(handle, getattr(e, "message", None) or str(e), e)


def cancel_one(runner: "Runner", handle: str) -> str:
    """Cancel ``handle`` unless it already ended; what was done."""
    status = runner.require_status(handle)
    if status.is_terminal():
        return f"already ended: {status.state}"
    runner.cancel(handle)
    return "cancelled"


def delete_one(runner: "Runner", handle: str) -> str:
    """Cancel ``handle`` if it runs, then delete what its scheduler keeps of it; what was done."""
    from torchspec.schedulers.api import Capability

    runner.require(handle, Capability.DELETE, f"stop it with: torchspec cancel {handle}")
    runner.require_status(handle)
    try:
        runner.delete(handle)
    except NotImplementedError:
        raise UsageError(f"the {handle.split('://', 1)[0]} scheduler cannot delete apps",
                         f"stop it with: torchspec cancel {handle}") from None
    return "deleted"
