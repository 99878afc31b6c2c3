"""What the memory backend calls its states, and what they mean as :class:`~torchspec.specs.AppState`."""

from __future__ import annotations

from torchspec.specs import AppState

#: The backend's name, as in handles (``memory://session/app-1``).
BACKEND = "memory"
#: The variable that ``${rank0_env}`` names in every replica.
RANK0_ENV = "RANK0_HOST"

#: Native state -> AppState (a real backend maps its engine's words here).
STATE_MAP = {
    "queued": AppState.PENDING,
    "running": AppState.RUNNING,
    "done": AppState.SUCCEEDED,
    "failed": AppState.FAILED,
    "stopped": AppState.CANCELLED,
}
