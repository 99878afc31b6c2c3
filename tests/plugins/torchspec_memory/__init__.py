"""``memory``: an example scheduler backend, in the package shape every torchspec backend has.

Copy this folder to start a backend of your own.  Apps are kept in memory and
"run" as soon as they are scheduled; a test moves them along by setting
``states``.  The files, lowest first (each imports only the ones above it):

- ``states.py``     constants and the native state -> AppState map
- ``options.py``    the run options (``-c``) and their checks
- ``translate.py``  the request and the pure AppDef -> request translation (no I/O)
- ``scheduler.py``  the Scheduler class: schedule, describe, list, logs, cancel
- ``__init__.py``   ``create_scheduler``, the entry point::

      [project.entry-points."torchspec.schedulers"]
      memory = "torchspec_memory:create_scheduler"
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torchspec_memory.scheduler import MemoryScheduler


def create_scheduler(session_name: str, **kwargs: Any) -> "MemoryScheduler":
    """The entry point: imports the scheduler only when it is used."""
    from torchspec_memory.scheduler import MemoryScheduler

    return MemoryScheduler(session_name, **kwargs)
