"""``torchspec ui``: a local web dashboard over the same library the CLI calls (the ``ui`` extra).

Starlette and uvicorn are imported only when the dashboard is made, so
``import torchspec.ui`` costs nothing and the rest of torchspec never needs
them.  From Python::

    from torchspec.runner import get_runner
    from torchspec.ui import create_app, new_token

    app = create_app(get_runner, ["local"], new_token(), allow_actions=False)  # any ASGI server runs it
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, List

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from torchspec.runner import Runner


def create_app(runner_factory: Callable[[], "Runner"], schedulers: List[str], token: str,
               allow_actions: bool = False, host: str = "127.0.0.1") -> "Starlette":
    """The dashboard for ``schedulers``' apps, open to whoever has ``token``; cancel and rerun only with
    ``allow_actions``; ``host``: the name it is bound to (a POST's Host may be it, or a loopback name)."""
    from torchspec.ui.app import create_app as create

    return create(runner_factory, schedulers, token, allow_actions, host)


def new_token() -> str:
    """A fresh token (``secrets.token_urlsafe(32)``)."""
    from torchspec.ui.security import new_token as make

    return make()


__all__ = ["create_app", "new_token"]
