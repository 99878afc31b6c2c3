"""The app folder's files as every process reads and writes them: ``state.json``, its lock, ``request.json``.

Several processes touch one app folder at once: the supervisor, any number
of ``torchspec status``/``log``/``cancel`` commands, a second submit.  So:

- ``state.json`` is only ever replaced whole (write a temporary file in the
  same folder, then ``os.replace``), so a reader never sees half a file and
  needs no lock;
- every read-modify-write holds an exclusive ``fcntl.flock`` on
  ``state.lock``, so two writers never lose each other's changes;
- a terminal app state, once written, is never overwritten;
- the supervisor holds ``supervisor.lock`` for as long as it lives, which
  is how everyone else knows it is alive;
- a file that cannot be read as what it should be (not JSON, a folder, a
  newer format) raises :class:`~torchspec.errors.StateError` naming the
  file and the reason, never a bare ``OSError`` or ``ValueError``; so does
  a file that cannot be written (the disk full, a read-only file system),
  saying so, unless the caller asked to go on without the write
  (``update_state(..., unrecorded=[])``): readers then still answer, from the
  state they could not record;
- a reserve of disk space (``.APP_ID.reserve`` beside the app folder) is
  set aside at submit, so that when a replica's output fills the disk the
  supervisor can free it and still record the app (and its end); the
  reserve goes when the app's end is recorded.

The edits of a state dict that both the scheduler and the supervisor make
(the first state, ending the app, ending its replicas) live here too, so
``state.json`` has one author of its shape.  Nothing here imports the
scheduler or the supervisor.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import stat
import threading
import time
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple

from torchspec.schedulers.local.states import (
    FORMAT_VERSION,
    LOCK_FILE,
    REQUEST_FILE,
    STATE_FILE,
    SUPERVISOR_LOCK,
    SUPERVISOR_LOG,
    TERMINAL,
)
from torchspec.schedulers.local.request import LocalRequest

if TYPE_CHECKING:
    from torchspec.errors import StateError

# App ids become folder names: no separators, no leading dot, nothing a shell
# would need quoted.
_APP_ID_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


def is_valid_app_id(app_id: str) -> bool:
    """True for ids that are safe as one folder name (so ``../x`` can never escape the state dir)."""
    return bool(_APP_ID_RE.match(app_id))


def now_iso() -> str:
    """The current UTC time in ISO 8601 with microseconds: sortable and unambiguous across time zones."""
    return datetime.now(timezone.utc).isoformat()


def _state_error(message: str, hint: str) -> "StateError":
    """A :class:`~torchspec.errors.StateError`, imported only now: the supervisor starts without
    ``torchspec.errors`` and the ``dataclasses`` it brings (~9 ms of every local app's start)."""
    from torchspec.errors import StateError

    return StateError(message, hint)


#: The errors of a disk with no room left for us: the supervisor frees the app's reserve and writes again.
NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})

#: What :func:`make_reserve` sets aside besides twice the first state: a few state saves and supervisor lines.
RESERVE_BYTES = 1 << 16


def write_problem(path: str, e: OSError, action: str = "write") -> str:
    """``cannot write PATH: No space left on device (ENOSPC)``: the file, the reason, and its errno to search for."""
    name = errno.errorcode.get(e.errno or 0)
    return f"cannot {action} {path}: {e.strerror or e}" + (f" ({name})" if name else "")


def write_hint(folder: str, e: OSError) -> str:
    """What to do about a write in ``folder`` that failed with ``e``."""
    elsewhere = "or point the state_dir run option (or TORCHSPEC_HOME) at another disk"
    if e.errno in NO_SPACE:
        return f"free space on the disk of {folder} (see `df {folder}`), {elsewhere}"
    if e.errno == errno.EROFS:
        return f"{folder} is on a read-only file system: remount it read-write, {elsewhere}"
    return f"make {folder} writable, {elsewhere}"


def unwritable(path: str, e: OSError, action: str = "write") -> "StateError":
    """The error for an app file that cannot be written: which file, why (full, read-only), what to do."""
    return _state_error(write_problem(path, e, action), write_hint(os.path.dirname(path), e))


def folder_problem(folder: str) -> str:
    """Why the disk lets nothing new be written in ``folder`` now (read-only, full), or ''.

    What the disk does to everyone, not permissions: a reader may look at
    an app it could not write, which its supervisor writes all the same.
    """
    try:
        disk = os.statvfs(folder)
    except OSError:
        return ""
    code = 0
    if disk.f_flag & os.ST_RDONLY:
        code = errno.EROFS
    elif disk.f_blocks and (disk.f_bfree if os.geteuid() == 0 else disk.f_bavail) == 0:
        code = errno.ENOSPC
    return write_problem(folder, OSError(code, os.strerror(code))) if code else ""


def damaged(path: str, reason: object) -> "StateError":
    """The error for an app file that cannot be used: which file, why, and what to do about it."""
    if isinstance(reason, OSError):
        reason = reason.strerror or reason
    elif isinstance(reason, UnicodeDecodeError):
        reason = "not UTF-8 text"
    elif isinstance(reason, ValueError):
        reason = f"not valid JSON ({reason})"
    return _state_error(f"the app folder is damaged: {path}: {reason}",
                        f"once nothing of the app runs, remove {os.path.dirname(path)}")


@contextlib.contextmanager
def locked(app_dir: str) -> Iterator[None]:
    """Hold the app's exclusive lock for a read-modify-write of ``state.json``."""
    path = os.path.join(app_dir, LOCK_FILE)
    try:
        fd = _open_lock(path)
    except OSError as e:
        raise damaged(path, e) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _open_lock(path: str) -> int:
    """A lock file, opened to ``flock`` it: created if need be, read-only where it cannot be written.

    ``flock`` works on any open file, and a file system turned read-only
    refuses every open for writing: readers still take the lock there.
    """
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        if e.errno not in (errno.EROFS, errno.EACCES, errno.EPERM):
            raise
        return os.open(path, os.O_RDONLY)


def write_json(path: str, data: Any) -> None:
    """Replace ``path`` atomically with ``data`` as JSON.

    The temporary file is named for this process and thread (created
    exclusively, so a stale one from a dead process of the same pid is
    replaced, never shared); not tempfile, which the supervisor would import
    for this alone.
    """
    folder, name = os.path.split(path)
    tmp = os.path.join(folder, f".{name}.{os.getpid()}.{threading.get_ident()}.tmp")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            # json.dumps, not json.dump: only the one-shot encoding is done in C (~6x faster on the state
            # of 1,000 replicas, which the supervisor rewrites while they start and end)
            out.write(json.dumps(data, separators=(",", ":")).encode("utf-8") + b"\n")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read_json(path: str) -> Any:
    with open(path, encoding="utf-8") as src:
        return json.load(src)


def read_state(app_dir: str) -> Optional[Dict[str, Any]]:
    """The app's state, or None while ``schedule`` has not written it yet; StateError if it is unusable."""
    path = os.path.join(app_dir, STATE_FILE)
    try:
        state = read_json(path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise damaged(path, e) from None
    _check_state(path, state)
    return state  # type: ignore[no-any-return]


def _check_state(path: str, state: Any) -> None:
    """Raise StateError unless ``state`` has the types every reader relies on, in a format we know."""
    version = state.get("version", 1) if isinstance(state, dict) else None
    if isinstance(version, int) and not isinstance(version, bool) and version > FORMAT_VERSION:
        raise _state_error(f"{path} was written by a newer torchspec (format {version};"
                           f" this one reads formats 1 to {FORMAT_VERSION})",
                           "use a torchspec as new as the one that submitted the app")
    roles = state.get("roles", {}) if isinstance(state, dict) else None
    shaped = (
        isinstance(version, int) and version >= 1
        and isinstance(state.get("state", ""), str)
        and isinstance(state.get("supervisor", {}), dict)
        and isinstance(roles, dict)
        and all(isinstance(role, dict) and isinstance(role.get("replicas", []), list)
                and all(isinstance(replica, dict) for replica in role.get("replicas", []))
                for role in roles.values())
    )
    if not shaped:
        raise damaged(path, "not a torchspec app state")


def update_state(app_dir: str, change: Callable[[Dict[str, Any]], Optional[Dict[str, Any]]],
                 unrecorded: Optional[List[OSError]] = None) -> Dict[str, Any]:
    """Apply ``change`` to the state under the lock and write the result; returns what is on disk after.

    ``change`` edits the dict in place (or returns a replacement).  When the
    state on disk is already terminal, ``change`` is not called: a finished
    app stays finished whoever else is still writing.  A write that fails
    (the disk full, read-only) raises a StateError saying so; given an
    ``unrecorded`` list, the error is appended to it instead and the changed
    state returned, though it is not on disk.  Recording the app's end frees
    its reserve of disk space.
    """
    with locked(app_dir):
        state = read_state(app_dir) or {}
        if state.get("state") in TERMINAL:
            return state
        new = change(state)
        if new is None:
            new = state
        path = os.path.join(app_dir, STATE_FILE)
        try:
            write_json(path, new)
        except OSError as e:
            if unrecorded is None:
                raise unwritable(path, e) from None
            unrecorded.append(OSError(e.errno, e.strerror, path))
            return new
        if new.get("state") in TERMINAL:
            release_reserve(app_dir)
        return new


def _reserve_path(app_dir: str) -> str:
    """``.APP_ID.reserve`` beside the app folder: on its disk, yet no file of the app's documented layout."""
    folder, app_id = os.path.split(os.path.normpath(app_dir))
    return os.path.join(folder, f".{app_id}.reserve")


def make_reserve(app_dir: str, size: int) -> None:
    """Set ``size`` bytes of the app folder's disk aside, for :func:`release_reserve` to give back when it is full."""
    fd = os.open(_reserve_path(app_dir), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        try:
            os.posix_fallocate(fd, 0, size)
        except (OSError, AttributeError) as e:  # no fallocate here: blocks written are blocks taken too
            if isinstance(e, OSError) and e.errno in NO_SPACE:
                raise
            data = memoryview(os.urandom(size))  # not zeros, which a compressing file system would not store
            while data:
                data = data[os.write(fd, data):]
    except BaseException:
        release_reserve(app_dir)
        raise
    finally:
        os.close(fd)


def release_reserve(app_dir: str) -> bool:
    """Give the app's reserve of disk space back (the disk is full, or the app ended); True if there was one."""
    try:
        os.unlink(_reserve_path(app_dir))
        return True
    except OSError:
        return False


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
    path = os.path.join(app_dir, SUPERVISOR_LOCK)
    try:
        fd = os.open(path, os.O_RDONLY)  # enough to flock it, and possible on a read-only file system
        if stat.S_ISDIR(os.fstat(fd).st_mode):  # which opens read-only, where read-write would be refused
            os.close(fd)
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
    except FileNotFoundError:
        return False
    except OSError as e:
        raise damaged(path, e) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def load_request(app_dir: str) -> LocalRequest:
    """The app's ``request.json``; StateError when it is missing or unusable."""
    path = os.path.join(app_dir, REQUEST_FILE)
    try:
        return LocalRequest.from_json(read_json(path))
    except (OSError, ValueError) as e:
        raise damaged(path, e) from None
    except (KeyError, TypeError, AttributeError) as e:
        raise damaged(path, f"not a torchspec request ({type(e).__name__}: {e})") from None


def read_request(app_dir: str) -> Optional[LocalRequest]:
    """The app's ``request.json``, or None when it is missing or unreadable."""
    from torchspec.errors import StateError

    try:
        return load_request(app_dir)
    except StateError:
        return None


def initial_state(request: LocalRequest) -> Dict[str, Any]:
    """The state ``schedule`` writes before the supervisor starts: every replica PENDING."""
    return {
        "version": FORMAT_VERSION,
        "app_id": request.app_id,
        "session_name": request.session_name,
        "labels": dict(request.labels),
        "state": "SUBMITTED",
        "num_restarts": 0,
        "app_restarts": 0,
        "msg": "",
        "cancel_requested": False,
        "submitted_at": now_iso(),
        "started_at": None,
        "ended_at": None,
        "supervisor": {"pid": None, "ready": False, "heartbeat": time.time()},
        "roles": {
            role.name: {
                "restarts": 0,
                "replicas": [
                    {
                        "id": replica.replica_id,
                        "state": "PENDING",
                        "pid": None,
                        "pgid": None,
                        "exit_code": None,
                        "restarts": 0,
                        "started_at": None,
                        "ended_at": None,
                    }
                    for replica in role.replicas
                ],
            }
            for role in request.roles
        },
    }


def finish_app(state: Dict[str, Any], final: str, msg: str) -> Dict[str, Any]:
    """Mark the app ``final`` (a terminal state name) with ``msg``, now."""
    state["state"] = final
    state["msg"] = msg
    state["ended_at"] = now_iso()
    return state


def end_replicas(state: Dict[str, Any], final: str) -> None:
    """Mark every replica that has not finished ``final``, now: for apps whose supervisor cannot do it."""
    for role in state.get("roles", {}).values():
        for replica in role.get("replicas", []):
            if replica.get("state") not in TERMINAL:
                replica["state"] = final
                replica["ended_at"] = now_iso()


def supervisor_died(state: Dict[str, Any], app_dir: str, how: str = "") -> None:
    """Mark an app whose supervisor died (``how``, e.g. `` (killed by SIGKILL)``) FAILED, with its replicas."""
    pid = state.get("supervisor", {}).get("pid")
    was = state.get("state", "SUBMITTED")
    end_replicas(state, "FAILED")
    finish_app(state, "FAILED", f"the supervisor (pid {pid}) died{how} while the app was {was};"
                                f" its replicas were stopped. See {os.path.join(app_dir, SUPERVISOR_LOG)}")


def saved_at(state: Mapping[str, Any]) -> Optional[float]:
    """When ``state`` was last saved by its supervisor (its heartbeat), in epoch seconds; None if never."""
    beat = state.get("supervisor", {}).get("heartbeat")
    return float(beat) if isinstance(beat, (int, float)) and not isinstance(beat, bool) else None


def running_groups(state: Mapping[str, Any]) -> List[Tuple[int, int]]:
    """``(pid, pgid)`` of every replica ``state`` records as started and not finished."""
    groups = []
    for role in state.get("roles", {}).values():
        for replica in role.get("replicas", []):
            if replica.get("state") not in TERMINAL and replica.get("pid") and replica.get("pgid"):
                groups.append((int(replica["pid"]), int(replica["pgid"])))
    return groups


__all__ = [
    "NO_SPACE",
    "RESERVE_BYTES",
    "damaged",
    "end_replicas",
    "finish_app",
    "folder_problem",
    "hold_supervisor_lock",
    "initial_state",
    "is_valid_app_id",
    "load_request",
    "locked",
    "make_reserve",
    "now_iso",
    "read_json",
    "read_request",
    "read_state",
    "release_reserve",
    "running_groups",
    "saved_at",
    "supervisor_died",
    "supervisor_lock_held",
    "unwritable",
    "update_state",
    "write_hint",
    "write_json",
    "write_problem",
]
