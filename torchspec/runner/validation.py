"""The runner's own checks of an app, and how a scheduler's refusal reaches the user.

Every scheduler gets apps that passed :func:`validate_app` (TorchX's checks,
with its messages), and :func:`refusals` turns a backend's plain
``ValueError`` into an :class:`~torchspec.errors.AppRefusedError` naming it.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

from torchspec.errors import AppRefusedError, TorchSpecError
from torchspec.specs import MISSING, AppDef


def validate_app(app: AppDef) -> None:
    """The checks every scheduler needs, with TorchX's messages (its users search for them)."""
    if not app.roles:
        raise AppRefusedError(f"No roles for app: {app.name}. Did you forget to add roles to AppDef?")
    for role in app.roles:
        if not role.entrypoint or role.entrypoint == MISSING:
            raise AppRefusedError(
                f"No entrypoint for role: {role.name}. Did you forget to call role.runs(entrypoint, args, env)?"
            )
        if role.num_replicas <= 0:
            raise AppRefusedError(
                f"Non-positive replicas for role: {role.name}. Did you forget to set role.num_replicas?"
            )


@contextlib.contextmanager
def refusals(scheduler: str) -> Iterator[None]:
    """Around a scheduler's dry run and submission: a refusal names the scheduler that refused.

    A plain ``ValueError`` is how TorchX-style backends (plug-ins included)
    refuse an app; it becomes an :class:`AppRefusedError` (still a
    ``ValueError``), so the CLI reports it as a usage error, not as a bug.
    """
    try:
        yield
    except AppRefusedError as e:
        e.scheduler = e.scheduler or scheduler
        raise
    except TorchSpecError:
        raise
    except ValueError as e:
        refused = AppRefusedError(str(e))
        refused.scheduler = scheduler
        raise refused from e
