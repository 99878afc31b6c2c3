"""Starting torchspec's own background processes (the local supervisor, the docker watcher).

They must outlive the command that started them and its terminal's Ctrl-C,
so each runs in a session of its own, reads nothing, and writes to a log file.
"""

from __future__ import annotations

import subprocess
import sys
from typing import List, Optional


def start_detached(module: str, args: List[str], log_path: str, cwd: Optional[str] = None,
                   ) -> "subprocess.Popen[bytes]":
    """``python -m module args...`` detached, its stdout and stderr appended to ``log_path``."""
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", module, *args],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            start_new_session=True,
            close_fds=True,
        )
