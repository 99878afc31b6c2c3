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
``resource_group:``), as ``examples/gitops`` does, or use the Lease.

``--lock kubernetes`` (:func:`lease_held`): a ``coordination.k8s.io`` Lease
named ``torchspec-apply-SCHEDULER-SCOPE`` in the namespace the kubernetes run
options give, on which runs anywhere that reaches the cluster take turns
(:mod:`torchspec.schedulers.kubernetes.lease`: holder identity, expiry,
renewal).  It is renewed while ``apply`` runs; ``apply`` checks it is still
its own before each submit or cancel and stops when it is not.  A run that
dies leaves it to expire after its duration.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import time
from typing import TYPE_CHECKING, Callable, Iterator, Optional

from torchspec.errors import BackendError, TorchSpecError

if TYPE_CHECKING:
    from torchspec.schedulers.kubernetes.lease import LeaseLock

#: What ``apply`` can lock: a file (the default), or a Kubernetes Lease.
LOCKS = ("file", "kubernetes")
#: How long a Lease lasts unless renewed, by default (seconds): renewed every sixth of it, so a run starved of CPU
#: for 40 s keeps it (with 15 s, CI's loaded two cores lost Leases mid-run); a run that dies delays the next by
#: at most this.
DEFAULT_LEASE_DURATION = 60
#: Told what ``apply`` waits for, once per holder: "waiting for ...: held by ..."
OnWait = Callable[[str], None]


class LockTimeout(TorchSpecError):
    """Another ``apply`` held the lock for longer than the caller would wait."""

    def __init__(self, path: str, waited: float, holder: str = "") -> None:
        super().__init__(f"another torchspec apply holds {path} (waited {waited:.0f}s){': ' if holder else ''}{holder}")
        self.path = path


class FileHeld:
    """A lock file held: the kernel keeps it this process's until it closes it or dies."""

    def check(self) -> None:
        """Nothing to check: a POSIX lock cannot be taken from its holder."""


def default_lock_path(scheduler: str, scope: str) -> str:
    """``$TORCHSPEC_HOME/locks/apply-SCHEDULER-SCOPE.lock`` (names made safe as one file name)."""
    from torchspec.schedulers.state_dir import default_state_dir

    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", f"apply-{scheduler}-{scope}")
    return os.path.join(default_state_dir(), "locks", f"{safe}.lock")


@contextlib.contextmanager
def held(path: str, timeout: float, poll: float = 0.1, on_wait: Optional[OnWait] = None) -> Iterator[FileHeld]:
    """Hold the lock on ``path`` (created if missing) for the ``with`` block; :class:`LockTimeout` after
    ``timeout`` seconds of waiting for it (``on_wait`` hears once that it waits)."""
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
                if on_wait is not None:  # once
                    on_wait(f"waiting for {path}: another torchspec apply holds it")
                    on_wait = None
                if waited >= timeout:
                    raise LockTimeout(path, waited) from None
                time.sleep(min(poll, max(0.0, timeout - waited)))
        yield FileHeld()
    finally:
        os.close(fd)  # closing drops the lock


def lease_name(scheduler: str, scope: str) -> str:
    """``torchspec-apply-SCHEDULER-SCOPE`` as a Kubernetes name (lowercase, ``a-z0-9.-``); a name that had to
    change gets a hash of the original, so that scopes differing only in case or punctuation stay apart."""
    raw = f"torchspec-apply-{scheduler}-{scope}"
    safe = re.sub(r"[^a-z0-9.-]+", "-", raw.lower()).strip(".-")
    if safe != raw or len(safe) > 253:
        safe = f"{safe[:200].rstrip('.-')}-{hashlib.sha256(raw.encode()).hexdigest()[:8]}"
    return safe


@contextlib.contextmanager
def lease_held(name: str, timeout: float, *, namespace: Optional[str] = None, context: Optional[str] = None,
               duration: int = DEFAULT_LEASE_DURATION, on_wait: Optional[OnWait] = None) -> Iterator["LeaseLock"]:
    """Hold the Lease ``name`` in ``namespace`` (default: the kubeconfig context's) of the cluster the
    kubeconfig (``context``) points at for the ``with`` block, renewed meanwhile and released after;
    :class:`LockTimeout` after ``timeout`` seconds of waiting for it, a :class:`BackendError` (exit 6) when
    the cluster cannot be reached or refuses."""
    from torchspec.schedulers.kubernetes.client import Cluster
    from torchspec.schedulers.kubernetes.lease import LeaseLock

    cluster = Cluster(context=context, namespace=namespace)
    try:
        ns = cluster.default_namespace(context)
        lease = LeaseLock(cluster, ns, name, duration=duration, context=context,
                          labels={"app.kubernetes.io/managed-by": "torchspec"},
                          on_api_error=lambda status, what, message: _lease_refused(status, message, ns))
        started = time.monotonic()
        waiting = (lambda record: on_wait(f"waiting for the {lease.where}: {record.describe()}")) if on_wait else None
        if not lease.acquire(timeout, waiting):
            raise LockTimeout(f"the {lease.where}", time.monotonic() - started,
                              lease.seen.describe() if lease.seen else "")
        try:
            yield lease
        finally:
            lease.release()
    finally:
        cluster.close()


def _lease_refused(status: int, message: str, namespace: str) -> Optional[BackendError]:
    """A refusal about the Lease, with what to do about it."""
    if status == 403:
        return BackendError(message, f"--lock kubernetes needs get, create and update on leases"
                                     f" (coordination.k8s.io) in the namespace {namespace}: ask a cluster admin for"
                                     f" a Role (`kubectl create role torchspec-apply -n {namespace}"
                                     " --verb=get,create,update --resource=leases.coordination.k8s.io` and a"
                                     " RoleBinding), name another namespace (the kubernetes run option"
                                     " namespace: -c or [scheduler.kubernetes] in the config), or use --lock file")
    if status == 404:
        return BackendError(message, f"create the namespace {namespace}, or name another (the kubernetes run"
                                     " option namespace: -c or [scheduler.kubernetes] in the config)")
    return None
