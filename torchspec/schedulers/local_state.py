"""The on-disk state of ``local`` apps, shared by the scheduler and its supervisor processes.

Several processes touch one app folder at once: the supervisor, any number
of ``torchspec status``/``log``/``cancel`` commands, a second submit.  So:

- ``state.json`` is only ever replaced whole (write a temporary file in the
  same folder, then ``os.replace``), so a reader never sees half a file and
  needs no lock;
- every read-modify-write holds an exclusive ``fcntl.flock`` on
  ``state.lock``, so two writers never lose each other's changes;
- a terminal app state, once written, is never overwritten;
- the supervisor holds ``supervisor.lock`` for as long as it lives, which
  is how everyone else knows it is alive.

Nothing here imports the scheduler: this module is the file format.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import signal
import tempfile
import time
from datetime import datetime, timezone
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from torchspec.schedulers.state_dir import default_state_dir

#: Bump when ``state.json`` or ``request.json`` change incompatibly.
FORMAT_VERSION = 1

APPS = "apps"
SPEC_FILE = "spec.json"
REQUEST_FILE = "request.json"
STATE_FILE = "state.json"
LOCK_FILE = "state.lock"
SUPERVISOR_LOCK = "supervisor.lock"
SUPERVISOR_LOG = "supervisor.log"

STDOUT_LOG = "stdout.log"
STDERR_LOG = "stderr.log"
COMBINED_LOG = "combined.log"
ERROR_FILE = "error.json"

#: Names of the app states as stored; terminal ones are never overwritten.
TERMINAL = frozenset({"SUCCEEDED", "FAILED", "CANCELLED"})

#: How often a live supervisor refreshes its heartbeat in ``state.json``.
HEARTBEAT_INTERVAL_S = 1.0
#: A heartbeat older than this is reported as a stalled supervisor; it does not
#: end the app, since a suspended laptop stalls every process for hours.
HEARTBEAT_TIMEOUT_S = 30.0
#: How long a supervisor may take from ``schedule`` to holding its lock before
#: a start-up that never finished counts as dead.
STARTUP_TIMEOUT_S = 120.0

# App ids become folder names: no separators, no leading dot, nothing a shell
# would need quoted.
_APP_ID_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


def is_valid_app_id(app_id: str) -> bool:
    """True for ids that are safe as one folder name (so ``../x`` can never escape the state dir)."""
    return bool(_APP_ID_RE.match(app_id))


def now_iso() -> str:
    """The current UTC time in ISO 8601 with microseconds: sortable and unambiguous across time zones."""
    return datetime.now(timezone.utc).isoformat()


@contextlib.contextmanager
def locked(app_dir: str) -> Iterator[None]:
    """Hold the app's exclusive lock for a read-modify-write of ``state.json``."""
    fd = os.open(os.path.join(app_dir, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def write_json(path: str, data: Any) -> None:
    """Replace ``path`` atomically with ``data`` as JSON."""
    folder = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            # compact: the C encoder, since the supervisor rewrites this after every launch
            json.dump(data, out, separators=(",", ":"))
            out.write("\n")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read_json(path: str) -> Any:
    with open(path, encoding="utf-8") as src:
        return json.load(src)


def read_state(app_dir: str) -> Optional[Dict[str, Any]]:
    """The app's state, or None while ``schedule`` has not written it yet."""
    try:
        return read_json(os.path.join(app_dir, STATE_FILE))
    except FileNotFoundError:
        return None


def update_state(app_dir: str, change: Callable[[Dict[str, Any]], Optional[Dict[str, Any]]]) -> Dict[str, Any]:
    """Apply ``change`` to the state under the lock and write the result; returns what is on disk after.

    ``change`` edits the dict in place (or returns a replacement).  When the
    state on disk is already terminal, ``change`` is not called: a finished
    app stays finished whoever else is still writing.
    """
    with locked(app_dir):
        state = read_state(app_dir) or {}
        if state.get("state") in TERMINAL:
            return state
        new = change(state)
        if new is None:
            new = state
        write_json(os.path.join(app_dir, STATE_FILE), new)
        return new


def hold_supervisor_lock(app_dir: str, timeout_s: float = 5.0) -> int:
    """Take the app's supervisor lock for the life of the calling process; returns the fd to keep open.

    The kernel releases the lock when the process dies, however it dies,
    which makes "is the lock held" an exact liveness test that pid reuse,
    zombies and suspended machines cannot fool.  The fd is not inherited by
    replicas (Python opens it close-on-exec).  Raises ``TimeoutError`` when
    another process holds it, i.e. a second supervisor for the same app.
    """
    fd = os.open(os.path.join(app_dir, SUPERVISOR_LOCK), os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() > deadline:
                os.close(fd)
                raise TimeoutError(f"another supervisor holds {os.path.join(app_dir, SUPERVISOR_LOCK)}") from None
            time.sleep(0.05)


def supervisor_lock_held(app_dir: str) -> bool:
    """True while some process (the supervisor) holds the app's supervisor lock."""
    try:
        fd = os.open(os.path.join(app_dir, SUPERVISOR_LOCK), os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def pid_alive(pid: Optional[int]) -> bool:
    """True while ``pid`` runs; zombies count as dead.

    A supervisor that died stays a zombie until its parent reaps it: when
    that parent is us (a long-lived process that submitted the app) we reap
    it here, and on Linux ``/proc`` tells zombies of other parents apart.
    """
    if not pid or pid <= 0:
        return False
    try:
        reaped, _ = os.waitpid(pid, os.WNOHANG)
        if reaped == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _linux_zombie(pid)


def _linux_zombie(pid: int) -> bool:
    """True for a zombie whose threads are all gone; False where ``/proc`` cannot tell.

    A killed multi-threaded process shows its main thread as a zombie while
    its other threads are still exiting and still hold its files (and locks),
    so it only counts as dead once it is down to that one zombie thread.
    """
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as stat:
            # "pid (comm) S ...": comm may hold spaces or parens, the state follows the last ")"
            zombie = stat.read().rsplit(")", 1)[1].split()[0] == "Z"
        return zombie and len(os.listdir(f"/proc/{pid}/task")) <= 1
    except (OSError, IndexError):
        return False


def signal_group(pgid: Optional[int], sig: int) -> bool:
    """Send ``sig`` to a whole process group; False when the group no longer exists."""
    if not pgid or pgid <= 0:
        return False
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def kill_groups(pgids: List[Tuple[int, int]], grace_s: float) -> None:
    """Stop process groups that nobody supervises: SIGTERM, wait up to ``grace_s``, then SIGKILL.

    ``pgids`` pairs each group with its leader's pid, whose death ends the
    wait early; the final SIGKILL goes to every group regardless, so
    children that ignored SIGTERM or outlived their leader go too.
    """
    for _, pgid in pgids:
        signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + max(0.0, grace_s)
    while time.monotonic() < deadline and any(pid_alive(pid) for pid, _ in pgids):
        time.sleep(0.05)
    for _, pgid in pgids:
        signal_group(pgid, signal.SIGKILL)


__all__ = [
    "APPS",
    "COMBINED_LOG",
    "ERROR_FILE",
    "FORMAT_VERSION",
    "HEARTBEAT_INTERVAL_S",
    "HEARTBEAT_TIMEOUT_S",
    "LOCK_FILE",
    "REQUEST_FILE",
    "SPEC_FILE",
    "STARTUP_TIMEOUT_S",
    "STATE_FILE",
    "STDERR_LOG",
    "STDOUT_LOG",
    "SUPERVISOR_LOCK",
    "SUPERVISOR_LOG",
    "TERMINAL",
    "default_state_dir",
    "hold_supervisor_lock",
    "is_valid_app_id",
    "kill_groups",
    "locked",
    "now_iso",
    "pid_alive",
    "read_json",
    "read_state",
    "signal_group",
    "supervisor_lock_held",
    "update_state",
]
