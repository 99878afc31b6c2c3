"""``example``: a torchspec scheduler backend, in the package shape every torchspec backend has.

Made by ``torchspec new scheduler example``.  As it comes, it runs each
replica as a process on this machine, so every torchspec command works on it
from the first ``pip install -e``; the functions under "THE ENGINE" in
``scheduler.py`` are the part to replace with calls to your engine.  The
files, lowest first (each imports only the ones above it):

- ``states.py``     constants and the engine's states -> AppState
- ``options.py``    the run options (``-c``) and their checks
- ``translate.py``  the request, and the pure AppDef -> request translation (no I/O)
- ``scheduler.py``  the Scheduler class (schedule, describe, list, logs, cancel, delete) and the engine
- ``__init__.py``   ``create_scheduler``, the entry point (see ``pyproject.toml``)::

      [project.entry-points."torchspec.schedulers"]
      example = "torchspec_example:create_scheduler"
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torchspec_example.scheduler import ExampleScheduler


def create_scheduler(session_name: str, **kwargs: Any) -> "ExampleScheduler":
    """The entry point: imports the scheduler only when it is used, so ``torchspec lint`` never pays for it."""
    from torchspec_example.scheduler import ExampleScheduler

    return ExampleScheduler(session_name, **kwargs)
