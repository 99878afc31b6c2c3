"""Reading one replica's log, from every pod it ran in, and following it through replacement pods.

A replica may run in several pods over its life: the Job controller replaces
a failed pod, JobSet and Volcano delete every pod when they restart the whole
app; the Training Operator (``restartPolicy: OnFailure``) has the kubelet
restart the container in the same pod, which keeps the previous container's
log.  :class:`ReplicaLog` reads them in order, with a ``--- torchspec:
restart N of replica ROLE/K ---`` line before each replacement, and with
``should_tail`` waits for the next pod until the replica can write no more.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Callable, Dict, Iterator, List, Optional, Pattern, Set, Tuple

from torchspec.errors import OUTAGE_S, UnreachableError
from torchspec.schedulers.kubernetes.client import Cluster
from torchspec.schedulers.kubernetes.status import AppView, PodView
from torchspec.specs import AppState

logger: logging.Logger = logging.getLogger(__name__)

#: How long ``logs -f`` waits for a failed replica's replacement pod before it stops following.
RETRY_WAIT_S = 120
#: How often it looks again meanwhile.
_POLL_S = 0.2


@dataclass
class ReplicaLog:
    """The log of replica ``key/k`` of one app: :meth:`lines` reads it once (or follows it)."""

    cluster: Cluster
    #: reads the app afresh (the scheduler's ``read_app``): pods come and go while the log is followed
    read_app: Callable[[str], AppView]
    app_id: str
    role_name: str
    key: str
    k: int
    pattern: Optional[Pattern[str]] = None
    since: Optional[datetime] = None
    until: Optional[datetime] = None
    should_tail: bool = False
    #: pod uids read to their end
    _done: Set[str] = field(default_factory=set)
    #: pod uids in the order first read: controllers may delete old pods, so attempts alone cannot count them
    _seen: List[str] = field(default_factory=list)
    #: set once a line at or after ``until`` was read: nothing more is wanted
    _past_until: bool = False
    #: pod uid -> its container restarts when its log was last read (restarts in place, see _in_place)
    _instances: Dict[str, int] = field(default_factory=dict)
    #: pod uid -> (the kubelet's timestamp of the last line read, how many lines read had that timestamp):
    #: where to go on from when a pod's log is read again (see _read_pod)
    _read_to: Dict[str, Tuple[datetime, int]] = field(default_factory=dict)

    def lines(self) -> Iterator[str]:
        """Every line wanted, pod after pod, a restart line before each replacement.

        Following (``should_tail``), an API server that stops answering (restarted, say) is waited for up
        to :data:`~torchspec.errors.OUTAGE_S` seconds; the log goes on from the line after the last one
        printed."""
        outage: Optional[float] = None  # since when the server has not answered; None while it does
        while True:
            try:
                for line in self._round():
                    outage = None  # the server answered: a later outage gets the whole grace again
                    yield line
                return
            except UnreachableError:
                if not self.should_tail:
                    raise
                now = time.monotonic()
                if outage is None:
                    outage = now
                    logger.warning("the API server does not answer; following %s/%d again when it does",
                                   self.role_name, self.k)
                elif now - outage > OUTAGE_S:
                    raise
                time.sleep(1.0)

    def _round(self) -> Iterator[str]:
        while True:
            view = self.read_app(self.app_id)
            attempts = view.attempts(self.key, self.k)
            for number, pod in enumerate(attempts):
                if pod.uid in self._done:
                    continue
                yield from self._restart_marker(number, pod)
                yield from self._in_place(view, pod)
                yield from self._read_pod(view, pod, latest=pod is attempts[-1])
                if self._past_until:
                    return
            if not self.should_tail or not self._may_write_more():
                return

    def _restart_marker(self, number: int, pod: PodView) -> Iterator[str]:
        """The restart line for a pod read for the first time, unless it is the replica's first pod."""
        if pod.uid in self._seen:
            return
        self._seen.append(pod.uid)
        yield from self._marker(max(number, len(self._seen) - 1))

    def _marker(self, restart: int) -> Iterator[str]:
        marker = f"--- torchspec: restart {restart} of replica {self.role_name}/{self.k} ---\n"
        if restart > 0 and (self.pattern is None or self.pattern.search(marker)):
            yield marker

    def _in_place(self, view: AppView, pod: PodView) -> Iterator[str]:
        """For a pod whose container restarted in place: the first time, the previous container's lines
        (the kubelet keeps that one), then a restart line per restart since the pod was last read."""
        seen = self._instances.get(pod.uid)
        self._instances[pod.uid] = pod.restarts
        if not pod.restarts or seen == pod.restarts:
            return
        if seen is None:
            yield from self._wanted(self.cluster.pod_lines(view.namespace, pod.name, self.since, False,
                                                           view.context, previous=True))
        yield from self._marker(len(self._seen) - 1 + pod.restarts)

    def _wanted(self, lines: Iterator[Tuple[Optional[datetime], str]]) -> Iterator[str]:
        """The lines the filters let through, until ``until``."""
        for when, text in lines:
            if self.until is not None and when is not None and when >= self.until:
                self._past_until = True
                return
            if self.pattern is None or self.pattern.search(text):
                yield text

    def _read_pod(self, view: AppView, pod: PodView, latest: bool) -> Iterator[str]:
        """The pod's lines wanted; following it to its end when it is the latest pod and ``should_tail``.

        A followed log ends when the container exits, and the kubelet reports the pod's phase a moment
        later: a pod still Running then is read again, from the line after the last one read (the
        kubelet's timestamps say which), so no line is printed twice."""
        follow = self.should_tail and latest
        if follow and not self._wait_started(pod):
            self._done.add(pod.uid)
            return
        read_to = self._read_to.get(pod.uid)
        since = self.since if read_to is None or (self.since and self.since > read_to[0]) else read_to[0]
        new = 0
        for text in self._wanted(self._after(pod.uid, self.cluster.pod_lines(view.namespace, pod.name, since,
                                                                              follow, view.context))):
            new += 1
            yield text
        if self._past_until:
            return
        if not latest or not self.should_tail or self.cluster.pod_finished(view.namespace, pod.name, view.context):
            self._done.add(pod.uid)
        elif not new:
            time.sleep(_POLL_S)  # the container has ended, its pod's phase is not written yet

    def _after(self, uid: str, lines: Iterator[Tuple[Optional[datetime], str]]
               ) -> Iterator[Tuple[Optional[datetime], str]]:
        """The lines after those of the pod already read, remembering how far this read gets."""
        last, count = self._read_to.get(uid, (None, 0))
        skip = count
        for when, text in lines:
            if when is not None and last is not None:
                if when < last:
                    continue
                if when == last and skip:
                    skip -= 1
                    continue
            if when is not None:
                count = count + 1 if when == last else 1
                last = when
                self._read_to[uid] = (last, count)
            yield when, text

    def _wait_started(self, pod: PodView) -> bool:
        """Wait until ``pod``'s container runs or ran (its log exists); False if it never will."""
        deadline = time.monotonic() + RETRY_WAIT_S
        while time.monotonic() < deadline:
            view = self.read_app(self.app_id)
            current = next((p for p in view.attempts(self.key, self.k) if p.uid == pod.uid), None)
            if current is None:
                return False
            if current.started:
                return True
            if view.state in (AppState.FAILED, AppState.SUCCEEDED):
                return False
            time.sleep(_POLL_S)
        return False

    def _may_write_more(self) -> bool:
        """Wait until the replica has a pod not read to its end (True) or can never have one (False)."""
        deadline = time.monotonic() + RETRY_WAIT_S
        while time.monotonic() < deadline:
            view = self.read_app(self.app_id)
            attempts = view.attempts(self.key, self.k)
            if not view.exists or view.state in (AppState.FAILED, AppState.SUCCEEDED, AppState.CANCELLED):
                return False
            if not attempts:  # a controller restarting the whole app deleted the pods: wait for new ones
                time.sleep(_POLL_S)
                continue
            if attempts[-1].uid not in self._done:
                return True
            if attempts[-1].phase == "Succeeded" or view.state in (AppState.FAILED, AppState.SUCCEEDED):
                return False
            time.sleep(_POLL_S)
        logger.warning("%s/%d of %s: no replacement pod came within %ds; stopped following", self.key, self.k,
                       self.app_id, RETRY_WAIT_S)
        return False
