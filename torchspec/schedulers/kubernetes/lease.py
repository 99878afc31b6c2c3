"""A ``coordination.k8s.io/v1`` Lease that one process at a time holds: taken, renewed, released.

The protocol is client-go's leader election, spoken as plain JSON:

- **take**: create the Lease with this process as ``holderIdentity``.  When
  the name exists (409), read it and take it over only when it is free (no
  holder: released) or expired, by a replace that carries the
  ``resourceVersion`` read, so that of two takers one gets 409 and waits on.
  Expired: ``renewTime + leaseDurationSeconds`` is past by this machine's
  clock, or the Lease has not changed for ``leaseDurationSeconds`` of this
  process's watching (client-go's rule, which no clock skew fools: it covers
  a holder whose clock runs ahead of ours).
- **renew**: a thread writes ``renewTime`` every sixth of the duration, each
  request bounded by as much, so that one request the server never answers
  (seen in CI: 16 s and more) costs one try, not the Lease.  The
  holder counts the Lease its own only until the start of its last good
  write plus the duration, by its own monotonic clock; :meth:`LeaseLock.check`
  says so before each thing the caller must not do without it, and refuses
  once a third of the duration is all that is left (time for the thing to
  finish).  A 409 on renewal means another process took the Lease over: it is
  lost, and stays lost.
- **release**: ``holderIdentity`` cleared, so the next taker need not wait.

A holder that dies (SIGKILL, a lost machine) leaves the Lease to expire.
What it assumes: the holders' clocks agree to well within a third of the
duration (NTP), as the renewTime rule compares one machine's time with
another's.
"""

from __future__ import annotations

import os
import secrets
import socket
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Callable, Dict, Optional

from torchspec.errors import BackendError

if TYPE_CHECKING:
    from torchspec.schedulers.kubernetes.client import Cluster

API_VERSION = "coordination.k8s.io/v1"
#: The shortest wait between two reads of a Lease someone else holds.
POLL_S = 0.5
#: The least time a renewal may wait for its answer (a sixth of the duration where that is longer).
RENEW_TIMEOUT_MIN_S = 2.0


def now_micro() -> str:
    """The time as metav1.MicroTime writes it (RFC3339 with exactly six fractional digits), which the
    server insists on: a datetime's isoformat() drops the fraction at .000000 and is then refused."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(text: Optional[str]) -> Optional[float]:
    """An RFC3339 time (any fraction) as Unix seconds; None for none or one that does not parse."""
    if not text:
        return None
    stamp = text.strip().replace("Z", "+00:00").replace("z", "+00:00")
    main, dot, rest = stamp.partition(".")
    if dot:  # fromisoformat takes at most six fractional digits before 3.11
        digits = len(rest) - len(rest.lstrip("0123456789"))
        stamp = f"{main}.{rest[:digits][:6].ljust(6, '0')}{rest[digits:]}"
    try:
        return datetime.fromisoformat(stamp).timestamp()
    except ValueError:
        return None


def new_identity() -> str:
    """``host:pid:random``: who holds a Lease, as ``kubectl get lease`` shows it."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


@dataclass
class LeaseRecord:
    """A Lease as read: who holds it, until when, and the version a replace must carry."""

    holder: str
    duration: int
    renewed: Optional[float]  # Unix seconds of renewTime (else acquireTime)
    transitions: int
    version: str
    body: Dict[str, Any] = field(repr=False, default_factory=dict)

    @classmethod
    def from_json(cls, obj: Dict[str, Any]) -> "LeaseRecord":
        spec = obj.get("spec") or {}
        return cls(holder=str(spec.get("holderIdentity") or ""), duration=int(spec.get("leaseDurationSeconds") or 0),
                   renewed=parse_time(spec.get("renewTime") or spec.get("acquireTime")),
                   transitions=int(spec.get("leaseTransitions") or 0),
                   version=str((obj.get("metadata") or {}).get("resourceVersion") or ""), body=obj)

    def expires_in(self, now: Optional[float] = None) -> Optional[float]:
        """Seconds until renewTime + duration by this machine's clock (negative: past); None without one."""
        if self.renewed is None or self.duration <= 0:
            return None
        return self.renewed + self.duration - (time.time() if now is None else now)

    def describe(self) -> str:
        """``held by X, renewed 2s ago, expiring in 13s``."""
        if not self.holder:
            return "free"
        expires = self.expires_in()
        if expires is None:
            return f"held by {self.holder}"
        ago = time.time() - (self.renewed or 0)
        return (f"held by {self.holder}, renewed {max(ago, 0):.0f}s ago, "
                + (f"expiring in {expires:.0f}s" if expires >= 0 else f"expired {-expires:.0f}s ago"))


class LeaseLost(BackendError):
    """The Lease is no longer this process's: taken over, deleted, or not renewed in time."""


class LeaseLock:
    """One Lease, ``namespace/name``, taken by :meth:`acquire`, renewed by a thread, given up by :meth:`release`.

    ``on_api_error(status, message)`` may turn a refusal into a clearer error
    (RBAC on leases, say); it returns a :class:`BackendError` or None.
    """

    def __init__(self, cluster: "Cluster", namespace: str, name: str, *, duration: int = 15,
                 context: Optional[str] = None, identity: Optional[str] = None,
                 labels: Optional[Dict[str, str]] = None, annotations: Optional[Dict[str, str]] = None,
                 on_api_error: Optional[Callable[[int, str, str], Optional[BackendError]]] = None) -> None:
        if duration < 1:
            raise ValueError("a Lease lasts 1 second or more")
        self.cluster, self.namespace, self.name, self.context = cluster, namespace, name, context
        self.duration = int(duration)
        self.identity = identity or new_identity()
        self.labels, self.annotations = dict(labels or {}), dict(annotations or {})
        self._on_api_error = on_api_error
        self._version = ""
        self._transitions = 0
        self._acquired = ""
        self._valid_until = 0.0  # monotonic: the start of the last good write + duration
        self._lost = ""
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        #: the last holder seen while waiting (None: none yet, or the Lease was free)
        self.seen: Optional[LeaseRecord] = None

    @property
    def where(self) -> str:
        return f"Lease {self.namespace}/{self.name}"

    # -- the API, as JSON ---------------------------------------------------------------------------

    def _request(self, what: str, verb: str, body: Optional[Dict[str, Any]] = None, expect: tuple = (),
                 timeout: float = 0.0) -> Any:
        """``verb`` (get, create, replace) on the Lease, as JSON; an API status in ``expect`` is returned as
        that int, any other failure is raised as one clear :class:`BackendError`.

        Through the CustomObjectsApi, whose URLs are the built-in ones too: the typed CoordinationV1Api of
        client 37 turns the body into a V1Lease and writes its times with isoformat(), which drops the
        fraction at .000000, and the server then refuses the MicroTime."""
        api = self.cluster.custom(self.context)
        group, version = API_VERSION.split("/")
        where = (group, version, self.namespace, "leases")
        timeout = timeout or max(5.0, self.duration / 2)
        try:
            if verb == "get":
                return api.get_namespaced_custom_object(*where, self.name, _request_timeout=timeout)
            if verb == "create":
                return api.create_namespaced_custom_object(*where, body, _request_timeout=timeout)
            return api.replace_namespaced_custom_object(*where, self.name, body, _request_timeout=timeout)
        except Exception as e:  # noqa: BLE001 - the client raises ApiException, urllib3's errors, OSError
            status = getattr(e, "status", None)
            if isinstance(status, int) and status in expect:
                return status
            from torchspec.schedulers.kubernetes.client import api_error

            error = api_error(e, f"{what} the {self.where}", self.cluster.where(self.context))
            if isinstance(status, int) and self._on_api_error is not None:
                error = self._on_api_error(status, what, error.message) or error
            raise error from None

    def _body(self, holder: str, renew: str) -> Dict[str, Any]:
        spec: Dict[str, Any] = {"leaseDurationSeconds": self.duration, "leaseTransitions": self._transitions}
        if holder:
            spec.update(holderIdentity=holder, acquireTime=self._acquired or renew, renewTime=renew)
        else:
            spec["renewTime"] = renew
        metadata: Dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if self.labels:
            metadata["labels"] = self.labels
        if self.annotations:
            metadata["annotations"] = self.annotations
        if self._version:
            metadata["resourceVersion"] = self._version
        return {"apiVersion": API_VERSION, "kind": "Lease", "metadata": metadata, "spec": spec}

    def read(self) -> Optional[LeaseRecord]:
        """The Lease as it is now; None when there is none."""
        found = self._request("reading", "get", expect=(404,))
        return None if found == 404 else LeaseRecord.from_json(found)

    # -- taking -------------------------------------------------------------------------------------

    def acquire(self, timeout: float, on_wait: Optional[Callable[[LeaseRecord], None]] = None) -> bool:
        """Take the Lease, waiting up to ``timeout`` seconds while another process holds it (``on_wait``
        hears of each holder); True once held (the renewal thread runs), False when the time ran out."""
        deadline = time.monotonic() + timeout
        observed: Optional[tuple] = None  # (resourceVersion, monotonic time first seen)
        while True:
            if self._try_create():
                break
            record = self.read()
            if record is None:
                continue  # released and deleted meanwhile: create again
            if observed is None or observed[0] != record.version:
                observed = (record.version, time.monotonic())
            lasts = record.duration if record.duration > 0 else self.duration
            unchanged_for = time.monotonic() - observed[1]
            expires = record.expires_in()
            if not record.holder or (expires is not None and expires < 0) or unchanged_for >= lasts:
                if self._try_take_over(record):
                    break
                continue  # another taker won: read again
            if on_wait is not None and (self.seen is None or self.seen.holder != record.holder):
                on_wait(record)
            self.seen = record
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            until_free = min(x for x in (expires, lasts - unchanged_for) if x is not None)
            time.sleep(max(0.01, min(POLL_S, self.duration / 6, left, until_free + 0.05)))
        self._thread = threading.Thread(target=self._renew_loop, name=f"renew {self.where}", daemon=True)
        self._thread.start()
        return True

    def _try_create(self) -> bool:
        started, stamp = time.monotonic(), now_micro()
        self._version, self._transitions, self._acquired = "", 0, stamp
        created = self._request("creating", "create", self._body(self.identity, stamp), expect=(409,))
        if created == 409:
            return False
        self._held(created, started)
        return True

    def _try_take_over(self, record: LeaseRecord) -> bool:
        started, stamp = time.monotonic(), now_micro()
        self._version, self._acquired = record.version, stamp
        self._transitions = record.transitions + (1 if record.holder != self.identity else 0)
        replaced = self._request("taking over", "replace", self._body(self.identity, stamp), expect=(404, 409))
        if replaced in (404, 409):
            self._version = ""
            return False
        self._held(replaced, started)
        return True

    def _held(self, obj: Dict[str, Any], started: float) -> None:
        self._version = str(obj["metadata"]["resourceVersion"])
        self._valid_until = started + self.duration

    # -- holding ------------------------------------------------------------------------------------

    def check(self) -> None:
        """Raise :class:`LeaseLost` unless the Lease is still this process's for another third of its duration."""
        if self._lost:
            raise LeaseLost(f"lost the {self.where}: {self._lost}")
        left = self._valid_until - time.monotonic()
        if left < self.duration / 3:
            raise LeaseLost(f"lost the {self.where}: not renewed for {self.duration - left:.1f}s of its "
                            f"{self.duration}s (the API server did not answer in time)")

    def _renew_loop(self) -> None:
        interval = self.duration / 6  # three tries before check() refuses at two thirds; after a failure, each second
        wait = interval
        while not self._stop.wait(wait):
            try:
                self._renew()
                wait = interval
            except LeaseLost as e:
                self._lost = e.message
                return
            except BackendError as e:  # the server did not answer, or refused: again soon, while it lasts
                if time.monotonic() >= self._valid_until:
                    self._lost = f"could not renew it within its {self.duration}s: {e.message}"
                    return
                wait = min(interval, 1.0)

    def _renew(self) -> None:
        started = time.monotonic()
        renewed = self._request("renewing", "replace", self._body(self.identity, now_micro()), expect=(404, 409),
                                timeout=max(RENEW_TIMEOUT_MIN_S, self.duration / 6))
        if renewed == 404:
            raise LeaseLost("it was deleted")
        if renewed == 409:
            record = self.read()
            if record is None or record.holder != self.identity:
                holder = record.holder if record is not None and record.holder else "nobody"
                raise LeaseLost(f"it expired and {holder} took it over")
            self._version = record.version  # our own write, whose answer was lost: go on from it
            return self._renew()
        self._held(renewed, started)

    def release(self) -> None:
        """Stop renewing and clear the holder; never raises (an unreleased Lease expires anyway)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=max(5.0, self.duration / 2) + 1)
            self._thread = None
        if self._lost or not self._version:
            return
        try:
            self._request("releasing", "replace", self._body("", now_micro()), expect=(404, 409))
        except BackendError:
            pass
        self._version = ""
