"""The app's log folder: what Slurm does not keep, written privately on the shared file system, and read back.

The app id is the Slurm job id, so any shell that reaches the controller
finds the job with ``scontrol``/``squeue`` (``sacct`` once the controller
forgot it, where accounting is configured).  What Slurm does not keep lives
in the app's log folder, which must be on a file system the login and
compute nodes share, so it is kept private (folders 0700, files 0600)::

    LOG_ROOT/                     run option log_dir; default $TORCHSPEC_HOME/slurm
        JOBID.batch.log           the batch script's own output (``torchspec submit`` gives sbatch
                                  --output; run by hand, Slurm's default slurm-JOBID.out)
        JOBID/spec.json           the AppDef as submitted: what ``describe`` rebuilds
        JOBID/job.sbatch          the script as submitted
        JOBID/ROLE/K/stdout.log, stderr.log, combined.log
                                  each line "ISO-TIME<TAB>text", stamped as it arrived
        JOBID/ROLE/K/exitcode     written when replica K ended for good
        JOBID/ROLE/K/step.rc      written on the node by the step of each attempt as it ends
        JOBID/ROLE/K/restarts     how often its step was restarted in place (REPLICA)

The batch script writes the replicas' files; this module writes the spec and
the script at submission, finds the folder again (only a job id names one:
``delete slurm://s/..`` must not remove TORCHSPEC_HOME), and reads it back.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from datetime import datetime
from typing import Any, Callable, Dict, Iterator, List, Optional, Pattern, Sequence, Tuple

from torchspec.errors import NotFoundError
from torchspec.schedulers.api import Stream, check_replica
from torchspec.schedulers.logfile import follow_lines
from torchspec.schedulers.slurm.options import default_log_root
from torchspec.schedulers.slurm.states import (
    EXITCODE_FILE,
    LOG_FILES,
    POLL_S,
    RESTARTS_FILE,
    ROLE_NAME,
    SCRIPT_FILE,
    SPEC_FILE,
    WAITING_FILE,
    is_job_id,
    is_role_name,
)

# ----------------------------------------------------------------------------
# Writing, privately
# ----------------------------------------------------------------------------


def private_dir(path: str) -> None:
    """Create ``path`` (and its parents) if missing; a folder this creates is 0700.

    The log root is on a file system others share; what torchspec keeps there
    (spec, script, logs) is the user's alone.  A folder that already existed
    keeps its mode, except a job's own folder, which is always made 0700.
    """
    if not os.path.isdir(path):
        os.makedirs(path, mode=0o700, exist_ok=True)
        os.chmod(path, 0o700)
    elif is_job_id(os.path.basename(path)):
        os.chmod(path, 0o700)


def write_private(path: str, text: str) -> None:
    """Write ``text`` to ``path`` atomically, as a 0600 file (it may name paths, arguments, env values)."""
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        os.remove(tmp)
    except FileNotFoundError:
        pass
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def keep_submission(log_root: str, job_id: str, spec: Dict[str, Any], script: str) -> None:
    """Keep the spec and the script of job ``job_id`` next to its logs, for ``describe`` and the curious.

    A job logging outside the default log root gets a link there, so that
    status finds its logs even once Slurm forgot the job (and its comment).
    """
    job_dir = os.path.join(log_root, job_id)
    private_dir(job_dir)  # the script, once it runs, creates it 0700 too (umask 077)
    write_private(os.path.join(job_dir, SPEC_FILE), json.dumps(spec, indent=1))
    write_private(os.path.join(job_dir, SCRIPT_FILE), script)
    default = default_log_root()
    if os.path.abspath(log_root) != os.path.abspath(default):
        private_dir(default)
        link = os.path.join(default, job_id)
        if not os.path.lexists(link):
            os.symlink(job_dir, link)


def remove_job_files(app_id: str, job_dir: str) -> None:
    """Remove the job's log folder, its batch log, and the default log root's link to it."""
    shutil.rmtree(job_dir, ignore_errors=True)
    batch_log = os.path.join(os.path.dirname(job_dir), f"{app_id}.batch.log")
    if os.path.exists(batch_log):
        os.remove(batch_log)
    link = os.path.join(default_log_root(), app_id)
    if os.path.islink(link):
        os.remove(link)


# ----------------------------------------------------------------------------
# Finding and reading
# ----------------------------------------------------------------------------


def find_job_dir(app_id: str, comment_roots: Sequence[str]) -> Optional[str]:
    """The app's log folder, as a real path: under a log root of the job's comment, else the default's (or its link).

    Only a job id names a folder, and the folder must really be the job's
    own, directly under its log root: ``delete`` removes it, and an id
    such as ``..`` or a stray link must never lead it anywhere else.  The
    one link followed is the one :func:`keep_submission` leaves in the
    default log root for a job logging elsewhere; it must lead to a folder
    named as the job.
    """
    if not is_job_id(app_id):
        return None
    default = default_log_root()
    for root in [*comment_roots, default]:
        path = os.path.join(root, app_id)
        real = os.path.realpath(path)
        if not os.path.isdir(real) or os.path.basename(real) != app_id:
            continue
        if os.path.dirname(real) == os.path.realpath(root):
            return real
        if root == default and os.path.islink(path):
            return real
    return None


def kept_job_dirs() -> Iterator[Tuple[str, str]]:
    """(job id, log folder) of every job whose folder (or link) is in the default log root, by id."""
    try:
        names = os.listdir(default_log_root())
    except OSError:
        return
    for name in sorted((n for n in names if is_job_id(n)), key=int):
        job_dir = find_job_dir(name, [])
        if job_dir is not None:
            yield name, job_dir


def read_json(path: str) -> Optional[Dict[str, Any]]:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        return data if isinstance(data, dict) else None
    except (OSError, ValueError):
        return None


def read_int(path: str) -> Optional[int]:
    try:
        with open(path, encoding="utf-8") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def read_spec(job_dir: str) -> Optional[Dict[str, Any]]:
    """The AppDef as submitted (a dict), or None for a job handed to sbatch by hand."""
    return read_json(os.path.join(job_dir, SPEC_FILE))


def read_replica(job_dir: Optional[str], role: str, k: int) -> Tuple[Optional[int], Optional[int]]:
    """Replica ``k`` of ``role``'s (exit code, in-place restarts), each None where it left none."""
    if not job_dir:
        return None, None
    replica_dir = os.path.join(job_dir, role, str(k))
    return read_int(os.path.join(replica_dir, EXITCODE_FILE)), read_int(os.path.join(replica_dir, RESTARTS_FILE))


def waiting_for(job_dir: Optional[str], role: str, k: int) -> Optional[str]:
    """What replica ``k`` of ``role`` waits for before it starts (``waits for 'download' to be finished``), or
    None: the batch script's waiting file, there until the role starts (depends_on)."""
    if not job_dir:
        return None
    try:
        with open(os.path.join(job_dir, role, str(k), WAITING_FILE), encoding="utf-8", errors="replace") as f:
            return f.read(500).strip() or "waits for another role"
    except OSError:
        return None


def replica_folders(job_dir: str) -> List[Tuple[str, int]]:
    """(role, number of replicas) as the batch script laid out ``job_dir``: ROLE/K folders, K from 0."""
    found = []
    for name in sorted(os.listdir(job_dir)):
        path = os.path.join(job_dir, name)
        if not ROLE_NAME.match(name) or not os.path.isdir(path) or os.path.islink(path):
            continue
        ids = {int(k) for k in os.listdir(path) if is_job_id(k) and os.path.isdir(os.path.join(path, k))}
        count = 0
        while count in ids:
            count += 1
        if count:
            found.append((name, count))
    return found


# ----------------------------------------------------------------------------
# Log lines
# ----------------------------------------------------------------------------


def replica_log(app_id: str, job_dir: str, role_name: str, k: int, streams: Optional[Stream]) -> str:
    """The path of replica ``k`` of ``role_name``'s log of ``streams``; ValueError for a replica the app lacks."""
    spec = read_spec(job_dir) or {}
    counts = {r.get("name"): int(r.get("num_replicas", 1) or 1) for r in spec.get("roles", [])}
    if not is_role_name(role_name) or k < 0:
        # a job submitted by hand has no spec to check against: never let the name leave the folder
        raise NotFoundError(f"app {app_id!r} has no replica {role_name!r}/{k}")
    if counts:
        check_replica(app_id, role_name, k, counts)
    stream = Stream(streams) if streams is not None else Stream.COMBINED
    return os.path.join(job_dir, role_name, str(k), LOG_FILES[stream])


def parse_log_line(raw: bytes) -> Tuple[Optional[datetime], str]:
    """``2026-11-23T15:24:11+0000<TAB>text`` -> (aware time, ``text``); other lines keep everything."""
    stamp, sep, rest = raw.partition(b"\t")
    if sep and len(stamp) == 24 and stamp[4:5] == b"-" and stamp[10:11] == b"T":
        try:
            return datetime.strptime(stamp.decode("ascii"), "%Y-%m-%dT%H:%M:%S%z"), rest.decode(
                "utf-8", errors="replace")
        except ValueError:
            pass
    return None, raw.decode("utf-8", errors="replace")


def follow_log(path: str, pattern: Optional[Pattern[str]], since: Optional[datetime], until: Optional[datetime],
               should_tail: bool, job_over: Callable[[], bool]) -> Iterator[str]:
    """The lines of the replica log ``path``, without their stamps; with ``should_tail``, followed.

    Following ends once the replica can write no more: it exited 0, or
    ``job_over()``.  The file appears when the job starts: following a
    pending job waits for it.
    """
    exitcode = os.path.join(os.path.dirname(path), EXITCODE_FILE)

    def over() -> bool:
        return read_int(exitcode) == 0 or job_over()

    while not os.path.exists(path):
        if not should_tail or over():
            return
        time.sleep(POLL_S)
    with open(path, "rb") as log:
        yield from follow_lines(log, lambda raw, _: parse_log_line(raw), pattern, since, until, should_tail,
                                done=over, poll_s=POLL_S)
