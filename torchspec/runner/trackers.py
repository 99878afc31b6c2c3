"""The trackers the ``tracker`` commands and the dashboard read: the configured ones (see
:mod:`torchspec.runner.torchx_names`), their failures as :class:`~torchspec.errors.BackendError`."""

from __future__ import annotations

import contextlib
import os
import re
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Tuple

from torchspec.errors import BackendError, TorchSpecError, UsageError, did_you_mean
from torchspec.runner.torchx_names import configured_trackers

if TYPE_CHECKING:
    from torchspec.config import Config
    from torchspec.tracker import TrackerBase

#: A reader gives up on a tracking server sooner than a job does (MLflow's defaults retry for minutes, right
#: for a job that must not lose a record, not for a command someone waits on); the caller's own values win.
READER_LIMITS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_TIMEOUT": "10"}
#: The ``user:password@`` of a URL in an error's text.
_CREDENTIALS = re.compile(r"(\w+://)[^/@\s]+@")


def open_tracker(config: Optional["Config"], name: Optional[str] = None) -> Tuple[str, "TrackerBase"]:
    """The tracker ``name`` (default: the first configured one), built with its config, to read from.

    Raises:
        UsageError: no tracker is configured, or ``name`` is not one of them (with a did-you-mean), or it
            cannot be built (an unknown entry point, a bad config).
    """
    from torchspec.tracker import build_trackers
    from torchspec.tracker.api import for_reading

    found = configured_trackers(config)
    if not found:
        raise UsageError("no tracker is configured",
                         'add one to .torchspec.toml: [tracker.file] config = "/shared/runs" (or set'
                         " TORCHSPEC_TRACKERS, or .torchxconfig's [torchx:tracker])")
    chosen = name or next(iter(found))
    if chosen not in found:
        guess = did_you_mean(chosen, list(found))
        raise UsageError(f"tracker {chosen!r} is not configured",
                         f"did you mean {guess!r}?" if guess else f"configured: {', '.join(found)}")
    try:
        with for_reading():
            (tracker,) = build_trackers({chosen: found[chosen]})
    except ValueError as e:
        raise UsageError(f"tracker {chosen}: {e}", "check its name and its config") from None
    except TorchSpecError:
        raise
    except Exception as e:  # a store that refuses at once (MLflow resolves its URI when built)
        raise backend_error(chosen, e) from None
    return chosen, tracker


def limit_reader_requests() -> None:
    """:data:`READER_LIMITS` for this process, where the caller set none: for a command that reads and ends
    (``torchspec tracker``), never a long-lived process whose jobs would inherit them (the dashboard)."""
    for variable, value in READER_LIMITS.items():
        os.environ.setdefault(variable, value)


@contextlib.contextmanager
def tracker_errors(name: str) -> Iterator[None]:
    """A tracker's own failure (a server down, a folder unreadable) as a BackendError naming it."""
    try:
        yield
    except TorchSpecError:
        raise
    except Exception as e:  # each backend has its own errors (MlflowException, OSError...): all are the tracker's
        raise backend_error(name, e) from None


def backend_error(name: str, e: BaseException) -> BackendError:
    """Tracker ``name``'s failure ``e`` as a BackendError naming it; a URL's ``user:password@`` never shown."""
    text = _CREDENTIALS.sub(r"\1***@", f"{type(e).__name__}: {e}")
    return BackendError(f"tracker {name}: {text}",
                        f"is the tracker's store up and its config right? ([tracker.{name}] config)")


def recorded(config: Optional["Config"], run_id: str) -> List[Dict[str, Any]]:
    """What job ``run_id`` recorded in each configured tracker: ``{"tracker", "metadata", "artifacts",
    "sources", "error"}`` each (``error``: why that tracker could not be read, the others still are)."""
    out = []
    for name in configured_trackers(config):
        entry: Dict[str, Any] = {"tracker": name, "metadata": {}, "artifacts": [], "sources": [], "error": None}
        try:
            with tracker_errors(name):
                _, tracker = open_tracker(config, name)
                entry["metadata"] = {key: str(value) for key, value in sorted(tracker.metadata(run_id).items())}
                entry["artifacts"] = [{"name": a.name, "path": a.path, "metadata": dict(a.metadata or {})}
                                      for _, a in sorted(tracker.artifacts(run_id).items())]
                entry["sources"] = [{"run_id": s.source_run_id, "artifact_name": s.artifact_name}
                                    for s in tracker.sources(run_id)]
        except TorchSpecError as e:
            entry["error"] = f"{e}" + (f" ({e.hint})" if getattr(e, "hint", None) else "")
        out.append(entry)
    return out
