"""The trackers the ``tracker`` commands read: the configured ones (see :mod:`torchspec.runner.torchx_names`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Tuple

from torchspec.errors import UsageError, did_you_mean
from torchspec.runner.torchx_names import configured_trackers

if TYPE_CHECKING:
    from torchspec.config import Config
    from torchspec.tracker import TrackerBase


def open_tracker(config: Optional["Config"], name: Optional[str] = None) -> Tuple[str, "TrackerBase"]:
    """The tracker ``name`` (default: the first configured one), built with its config.

    Raises:
        UsageError: no tracker is configured, or ``name`` is not one of them (with a did-you-mean), or it
            cannot be built (an unknown entry point, a bad config).
    """
    from torchspec.tracker import build_trackers

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
        (tracker,) = build_trackers({chosen: found[chosen]})
    except ValueError as e:
        raise UsageError(f"tracker {chosen}: {e}", "check its name and its config") from None
    return chosen, tracker
