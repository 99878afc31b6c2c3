"""Starting torchspec's own background processes (the local supervisor, the docker watcher).

They must outlive the command that started them and its terminal's Ctrl-C,
so each runs in a session of its own, reads nothing, and writes to a log file.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Dict, List, Optional

#: The folder torchspec is imported from (the one holding the ``torchspec`` package).
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _command(module: str, args: List[str], bare: bool) -> List[str]:
    """``python -m module args``; ``bare``: without ``site`` (no site-packages, no ``.pth`` files: those can
    cost tens of milliseconds), torchspec's own folder first on ``sys.path`` instead."""
    if not bare or not os.path.isfile(os.path.join(_ROOT, "torchspec", "__init__.py")):
        return [sys.executable, "-m", module, *args]
    code = f"import sys, runpy; sys.path[0] = {_ROOT!r}; runpy.run_module({module!r}, run_name='__main__')"
    return [sys.executable, "-S", "-c", code, *args]


def start_detached(module: str, args: List[str], log_path: str, cwd: Optional[str] = None, bare: bool = False,
                   env: Optional[Dict[str, str]] = None) -> "subprocess.Popen[bytes]":
    """``python -m module args...`` detached, its stdout and stderr appended to ``log_path``.

    ``bare`` is for modules that import only the standard library and
    torchspec: they start without ``site``.  ``env``: variables it gets on top
    of this process's environment (the local supervisor's secret carriers).
    """
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            _command(module, args, bare),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            start_new_session=True,
            close_fds=True,
            env={**os.environ, **env} if env else None,
        )
