"""What the example backend calls its states, and what they mean as :class:`~torchspec.specs.AppState`."""

from __future__ import annotations

from torchspec.specs import AppState

#: The backend's name, as in handles (``example://session/hello-k3x9q2``) and ``-s example``.
BACKEND = "example"
#: What replica 0 of a role is reached at, in ``$TORCHSPEC_RANK0_HOST``: every replica runs on this machine.
RANK0_HOST = "localhost"

#: A replica's state in the engine -> AppState.  This engine knows four: a replica runs, it ended with
#: exit code 0, it ended with another, or it was stopped by ``cancel``.  A real backend maps its words here.
STATE_MAP = {
    "running": AppState.RUNNING,
    "exited": AppState.SUCCEEDED,
    "failed": AppState.FAILED,
    "stopped": AppState.CANCELLED,
}
