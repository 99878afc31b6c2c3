"""The apps of every scheduler the dashboard shows, each scheduler asked in a thread with a timeout.

One backend that hangs (a cluster behind a VPN that dropped) must not stall
the page: each scheduler has at most one ``Runner.list`` in flight, in a
worker thread; a request waits for it up to :data:`LIST_TIMEOUT_S` and
otherwise shows "still waiting" in that scheduler's place, with the last
answer it had.  A scheduler that fails shows its error there; the others are
unaffected.

``Runner.list`` gives each app's handle, id, state, the user's labels and the
summary of its provenance label (who, which file and commit); the record kept
on this machine (:func:`torchspec.runner.provenance.load`) adds the app's name
and when it was submitted, read once per app and cached (a record never
changes once written).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import datetime
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Optional

from torchspec.runner.sweep import SWEEP_LABEL

if TYPE_CHECKING:
    from torchspec.runner import Runner
    from torchspec.schedulers.api import ListAppResponse

#: How long a page waits for one scheduler's list before showing the others without it.
LIST_TIMEOUT_S = 5.0


@dataclass
class SchedulerApps:
    """What one scheduler answered: its apps, or the message that stands in their place."""

    name: str
    apps: List[Dict[str, Any]] = field(default_factory=list)
    error: Optional[str] = None


class Listing:
    """The dashboard's view of every scheduler's apps (thread-safe; one list call per scheduler at a time)."""

    def __init__(self, runner: "Runner", schedulers: List[str], timeout: float = LIST_TIMEOUT_S) -> None:
        self.runner = runner
        self.schedulers = schedulers
        self.timeout = timeout
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(2, len(schedulers)),
                                                           thread_name_prefix="torchspec-ui-list")
        self._lock = threading.Lock()
        self._inflight: Dict[str, "concurrent.futures.Future[List[ListAppResponse]]"] = {}
        self._last: Dict[str, List[Dict[str, Any]]] = {}
        self._records: Dict[str, Dict[str, Any]] = {}

    async def all(self) -> List[SchedulerApps]:
        """Every scheduler's answer, asked at once."""
        return list(await asyncio.gather(*(self.one(name) for name in self.schedulers)))

    async def one(self, name: str) -> SchedulerApps:
        """One scheduler's apps, or why there are none to show."""
        future = self._future(name)
        try:
            found = await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(future)), self.timeout)
        except asyncio.TimeoutError:
            return SchedulerApps(name, self._last.get(name, []),
                                 f"{name}: no answer after {self.timeout:g} s (still asking; the list shown, if "
                                 "any, is the last one it gave)")
        except Exception as e:  # noqa: BLE001 - any backend failure is shown in its own place
            return SchedulerApps(name, [], f"{name}: {error_text(e)}")
        rows = await asyncio.to_thread(self._rows, name, found)
        self._last[name] = rows
        return SchedulerApps(name, rows)

    def _future(self, name: str) -> "concurrent.futures.Future[List[ListAppResponse]]":
        """The list call in flight for ``name``, started if there is none."""
        with self._lock:
            future = self._inflight.get(name)
            if future is None or future.done():
                future = self._pool.submit(self.runner.list, name)
                self._inflight[name] = future
            return future

    def _rows(self, name: str, apps: List["ListAppResponse"]) -> List[Dict[str, Any]]:
        now = time.time()
        # the record kept here, else the summary the app's label carries (an app submitted from elsewhere)
        return [app_row(name, app, self._record(app.app_handle) or getattr(app, "provenance", None), now)
                for app in apps]

    def _record(self, handle: str) -> Optional[Dict[str, Any]]:
        """The provenance record of ``handle`` on this machine, cached once found."""
        found = self._records.get(handle)
        if found is None:
            from torchspec.runner import provenance

            try:
                found = provenance.load(handle)
            except Exception:  # noqa: BLE001 - a damaged record loses the columns, not the row
                found = None
            if found is not None:
                found = {k: found.get(k) for k in ("file", "component", "git", "user", "submitted_at", "spec")}
                found["name"] = (found.pop("spec") or {}).get("name")
                self._records[handle] = found
        return found

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def app_row(scheduler: str, app: "ListAppResponse", record: Optional[Dict[str, Any]], now: float) -> Dict[str, Any]:
    """One row of the table: plain JSON, the same for the page and ``/api/apps``."""
    record = record or {}
    submitted = _timestamp(record.get("submitted_at"))
    return {"handle": app.app_handle, "app_id": app.app_id, "name": record.get("name") or app.app_id,
            "scheduler": scheduler, "state": app.state.name,
            "age": age_text(now - submitted) if submitted is not None else "",
            "submitted_at": record.get("submitted_at") or "", "user": record.get("user") or "",
            "provenance": provenance_text(record), "sweep": (getattr(app, "labels", None) or {}).get(SWEEP_LABEL, "")}


def sweeps(rows: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The sweeps among ``rows``, each as ``{"id", "count", "states"}`` (``states``: ``"4 SUCCEEDED, 2
    RUNNING"``), in the order their first app comes: the apps page groups a sweep's apps under one line."""
    found: Dict[str, Dict[str, int]] = {}
    for row in rows:
        if row.get("sweep"):
            counts = found.setdefault(row["sweep"], {})
            counts[row["state"]] = counts.get(row["state"], 0) + 1
    return [{"id": sweep, "count": sum(counts.values()),
             "states": ", ".join(f"{n} {state}" for state, n in sorted(counts.items(), key=lambda kv: -kv[1]))}
            for sweep, counts in found.items()]


def provenance_text(record: Dict[str, Any]) -> str:
    """``path @ commit (dirty)``, the few words a table has room for."""
    git = record.get("git") or {}
    where = git.get("path") or record.get("file") or record.get("component") or ""
    if where and git.get("commit"):
        where += f" @ {git['commit'][:10]}" + (" (dirty)" if git.get("dirty") else "")
    return str(where)


def _timestamp(text: Optional[str]) -> Optional[float]:
    try:
        return datetime.datetime.fromisoformat(text).timestamp() if text else None
    except ValueError:
        return None


def age_text(seconds: float) -> str:
    """``42s``, ``5m``, ``3h``, ``2d``: how long ago, as a table shows it."""
    seconds = max(0.0, seconds)
    for size, unit in ((86400, "d"), (3600, "h"), (60, "m")):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def error_text(e: BaseException) -> str:
    """What a scheduler's failure says to a person: the library's message and hint, never a traceback."""
    from torchspec.errors import TorchSpecError
    from torchspec.redaction import redact_text

    if isinstance(e, TorchSpecError):
        message = getattr(e, "message", None) or str(e)
        hint = getattr(e, "hint", None)
        return redact_text(f"{message} ({hint})" if hint else message)
    return redact_text(f"{type(e).__name__}: {e}")
