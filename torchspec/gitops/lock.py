"""The lock ``torchspec apply`` holds while it lists, plans and submits, so that two runs submit each job once.

One lock per scheduler and scope: a file under the state dir
(``$TORCHSPEC_HOME/locks/apply-SCHEDULER-SCOPE.lock``), or the file
``--lock-file`` names, locked with ``fcntl.lockf`` (a POSIX record lock).
The kernel drops the lock when the process dies, however it dies, so a
killed ``apply`` never leaves it held.

What it guarantees: runs on one machine take turns, whatever the backend.
POSIX locks also work over NFS (the client forwards them to the server's
lock manager), so a ``--lock-file`` on a file system the machines share (a
Slurm cluster's home) makes runs on those machines take turns too.  Runs on
machines that share no file system (two CI runners against one Kubernetes
cluster or Docker engine) are not serialised by it: let the CI system run
one ``apply`` at a time (GitHub's ``concurrency:``, GitLab's
``resource_group:``), as ``examples/gitops`` does.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from typing import Iterator

from torchspec.errors import TorchSpecError


class LockTimeout(TorchSpecError):
    """Another ``apply`` held the lock for longer than the caller would wait."""

    def __init__(self, path: str, waited: float) -> None:
        super().__init__(f"another torchspec apply holds {path} (waited {waited:.0f}s)")
        self.path = path


def default_lock_path(scheduler: str, scope: str) -> str:
    """``$TORCHSPEC_HOME/locks/apply-SCHEDULER-SCOPE.lock`` (names made safe as one file name)."""
    from torchspec.schedulers.state_dir import default_state_dir

    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"apply-{scheduler}-{scope}")
    return os.path.join(default_state_dir(), "locks", f"{safe}.lock")


@contextlib.contextmanager
def held(path: str, timeout: float, poll: float = 0.1) -> Iterator[None]:
    """Hold the lock on ``path`` (created if missing) for the ``with`` block; :class:`LockTimeout` after
    ``timeout`` seconds of waiting for it."""
    import fcntl

    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        started = time.monotonic()
        while True:
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:  # EAGAIN or EACCES: held by another process
                waited = time.monotonic() - started
                if waited >= timeout:
                    raise LockTimeout(path, waited) from None
                time.sleep(min(poll, max(0.0, timeout - waited)))
        yield
    finally:
        os.close(fd)  # closing drops the lock
