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
from torchspec.specs.api import HOSTS_CLASH_HINT, hosts_env_clashes
from torchspec.specs.dependencies import dependency_problems


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
    _check_roles_together(app)


def _check_roles_together(app: AppDef) -> None:
    """What lint's TS503 and TS510 say of spec files, for every app (a Python component's too): two roles
    whose hosts variable would be one, and ``depends_on`` naming no role, the role itself, or a cycle."""
    for index, message in hosts_env_clashes([r.name for r in app.roles])[:1]:
        raise AppRefusedError(message, HOSTS_CLASH_HINT, code="TS503", path=("roles", index, "name"))
    found = list(dependency_problems([(r.name, r.depends_on) for r in app.roles]))
    if found:
        problems = [(("roles", index) + at, message) for index, (at, message, _) in found]
        raise AppRefusedError("; ".join(m for _, m in problems), found[0][1][2], code="TS510",
                              path=problems[0][0], problems=problems)


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
