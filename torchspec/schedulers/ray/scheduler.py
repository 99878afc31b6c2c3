"""The ray Scheduler: submits each app as one Ray job through the Job Submission API, and asks the dashboard.

What the job holds comes from :mod:`.translate`, what Ray's answers mean
from :mod:`.status`, the dashboard calls from :mod:`.client`, and a
replica's lines out of the job's log from :mod:`.logs`.  App ids are
``host:port-submission_id`` (as TorchX's), so that any shell on any machine
that reaches the dashboard can follow the app by its handle.
"""

from __future__ import annotations

import os
import time
from datetime import datetime
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

from torchspec.errors import AppRefusedError, BackendError, NotFoundError
from torchspec.times import utc_from_epoch
from torchspec.schedulers.api import (
    AppEvent,
    Capability,
    DescribeAppResponse,
    ListAppResponse,
    Scheduler,
    Stream,
    aware,
    check_replica,
)
from torchspec.schedulers.ray import options
from torchspec.schedulers.ray.cleanup import cleanup_submission, leaked
from torchspec.schedulers.ray.client import RayCluster
from torchspec.schedulers.ray.logs import LineFilter, replica_lines
from torchspec.schedulers.ray.placement import never_fits
from torchspec.schedulers.ray.states import BACKEND, META_APP, job_state, make_app_id, split_app_id
from torchspec.schedulers.ray.status import describe_job, rebuild_roles
from torchspec.schedulers.grace import grace_period
from torchspec.schedulers.ray.translate import RayJobRequest, app_to_request
from torchspec.schedulers.request_timeout import DEFAULT_S, for_cfg
from torchspec.specs import AppDef, AppDryRunInfo, CfgVal, is_terminal, runopts

#: How long ``delete`` waits for a stopped job to end before removing it.
DELETE_WAIT_S = 30


class RayScheduler(Scheduler[Dict[str, CfgVal]]):
    """One app is one Ray job whose driver runs every replica as its own actor, gang-scheduled per role."""

    # no LABELS: a job's metadata holds torchspec's keys and the metadata run option, not the app's labels
    capabilities = frozenset({Capability.LOGS, Capability.FOLLOW_LOGS, Capability.LOG_WINDOW, Capability.LOG_STREAMS,
                              Capability.DELETE, Capability.ROLE_ORDER, Capability.EVENTS})
    unknown_app_hint = ("a Ray head that restarted forgets every job (unless the cluster has GCS fault"
                        " tolerance), and its apps stopped with it")

    def __init__(self, session_name: str, dashboard_address: Optional[str] = None,
                 request_timeout: Optional[float] = None) -> None:
        super().__init__(BACKEND, session_name)
        self.dashboard_address = dashboard_address
        #: seconds each request to a dashboard may go unanswered (see torchspec.schedulers.request_timeout)
        self.request_timeout = request_timeout or float(DEFAULT_S)
        self._clusters: Dict[Tuple[str, float], RayCluster] = {}

    def cluster(self, address: str, timeout: Optional[float] = None) -> RayCluster:
        """The dashboard at ``address``, asked with ``timeout`` (default: the scheduler's request timeout)."""
        key = (address, timeout or self.request_timeout)
        if key not in self._clusters:
            self._clusters[key] = RayCluster(*key)
        return self._clusters[key]

    def _located(self, app_id: str) -> Optional[Tuple[RayCluster, str]]:
        parts = split_app_id(app_id)
        return (self.cluster(parts[0]), parts[1]) if parts else None

    # -- submitting ----------------------------------------------------------------

    def _run_opts(self) -> runopts:
        return options.ray_run_opts()

    def _submit_dryrun(self, app: AppDef, cfg: Dict[str, CfgVal]) -> AppDryRunInfo[RayJobRequest]:
        from torchspec.redaction import for_describe
        from torchspec.specs.convert import dump_app

        given = {**cfg, "dashboard_address": cfg.get("dashboard_address") or self.dashboard_address}
        address = options.dashboard_address(given)
        strategy = options.placement_strategy(cfg)
        env = options.runtime_env(cfg, os.getcwd())
        timeout = cfg.get("placement_timeout")
        request = app_to_request(app, address, strategy, env, dict(cfg.get("metadata") or {}),  # type: ignore
                                 self.session_name, int(timeout) if timeout else None,  # type: ignore[arg-type]
                                 grace_period(cfg))
        request.spec = for_describe(dump_app(app))
        return AppDryRunInfo(request, str)

    def schedule(self, dryrun_info: AppDryRunInfo[RayJobRequest]) -> str:
        """Refuse an app the cluster can never hold, then ``submit_job``; the app id names the dashboard too."""
        from torchspec.schedulers.replicas import make_app_id as submission_id_for

        from torchspec.schedulers.secrets import read_carried

        request = dryrun_info.request
        values, files = read_carried(dryrun_info.app) if dryrun_info.app else ({}, {})  # before anything is sent
        cluster = self.cluster(request.address, for_cfg(dryrun_info._cfg, self.request_timeout))
        nodes = [n["resources_total"] for n in cluster.nodes() if n["state"].endswith("ALIVE")]
        problem = never_fits(request.plan()["roles"], nodes, f"the cluster at {cluster.url} has {len(nodes)} node(s)")
        if problem:
            raise AppRefusedError(f"Ray cannot place app {request.app_name!r}: {problem}",
                                  "ask for less (the role's resource, num_replicas), or use a bigger cluster")
        submission_id = submission_id_for(request.app_name)
        cluster.call("submit_job", **request.submit_kwargs(submission_id, {**values, **files}))
        return make_app_id(request.address, submission_id)

    # -- asking ----------------------------------------------------------------------

    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        located = self._located(app_id)
        if located is None:
            return None
        cluster, submission_id = located
        job = cluster.job(submission_id)
        if job is None or META_APP not in (job.metadata or {}):
            return None
        actors = [] if str(job.status).endswith("PENDING") else cluster.actors(f"torchspec-{submission_id}")
        node_ips = cluster.node_ips(a["node_id"] for a in actors)
        # a STOPPED job is CANCELLED only where its driver confirmed it: its log says (status.stopped_state)
        stopped_log = cluster.call("get_job_logs", submission_id) if str(job.status).endswith("STOPPED") else None
        if is_terminal(job_state(job.status)):
            self._free_groups(cluster, submission_id, job)
        return describe_job(app_id, job, actors, node_ips, stopped_log)

    def events(self, app_id: str) -> List[AppEvent]:
        """The Ray job's record and its driver's lines (:mod:`.events`)."""
        from torchspec.schedulers.ray.events import job_events

        located = self._located(app_id)
        job = located[0].job(located[1]) if located else None
        if job is None or META_APP not in (job.metadata or {}):
            return []
        return job_events(job, located[0].call("get_job_logs", located[1]))

    def _free_groups(self, cluster: RayCluster, submission_id: str, job: Any) -> None:
        """The backstop (:mod:`.cleanup`): a terminal app's placement groups that are still live (its driver
        was killed before it removed them) are removed by a cleanup job.  Here, where status, wait, cancel and
        delete ask about the app, because a user who sees an app ended expects its resources to be free; the
        cost is one State API call per look at a terminal app, and a job only where a group was left."""
        left = leaked(cluster.placement_groups(), submission_id, str(getattr(job, "job_id", "") or ""))
        if not left:
            return
        try:
            cluster.call("submit_job", **cleanup_submission(submission_id, left))
        except RuntimeError as e:  # the same leftovers were handed to a cleanup job already
            if "already exists" not in str(e):
                raise BackendError(f"cannot submit the job that removes the placement groups app {submission_id}"
                                   f" left on {cluster.url}: {e}") from None

    def list(self) -> List[ListAppResponse]:
        """The jobs torchspec submitted to the cluster at ``dashboard_address`` (else RAY_ADDRESS, else the
        default), oldest first."""
        return self._list(options.dashboard_address({"dashboard_address": self.dashboard_address}))

    def list_where(self, cfg: Mapping[str, Any]) -> List[ListAppResponse]:
        """The jobs of the cluster the run option ``dashboard_address`` names (``list -s ray -c ...``), as
        ``submit`` with the same ``-c`` would reach."""
        address = cfg.get("dashboard_address") or self.dashboard_address
        return self._list(options.dashboard_address({"dashboard_address": address}),
                          for_cfg(cfg, self.request_timeout))

    def _list(self, address: str, timeout: Optional[float] = None) -> List[ListAppResponse]:
        jobs = self.cluster(address, timeout).call("list_jobs")
        ours = sorted((j for j in jobs if META_APP in (j.metadata or {}) and j.submission_id),
                      key=lambda j: j.start_time or 0)
        return [ListAppResponse(app_id=make_app_id(address, j.submission_id), state=job_state(j.status),
                                created=utc_from_epoch((j.start_time or 0) / 1000)) for j in ours]

    # -- cancelling ------------------------------------------------------------------

    def _cancel_existing(self, app_id: str) -> None:
        """``stop_job``: Ray SIGTERMs the driver, which stops every replica and removes the app's placement
        groups (:mod:`.cleanup`)."""
        located = self._located(app_id)
        if located:
            located[0].call("stop_job", located[1])

    def delete(self, app_id: str) -> None:
        """Stop the job if it runs, then remove it (and its log) from the cluster."""
        located = self._located(app_id)
        if located is None:
            return
        cluster, submission_id = located
        job = cluster.job(submission_id)
        if job is None or META_APP not in (job.metadata or {}):
            return
        if not is_terminal(job_state(job.status)):
            cluster.call("stop_job", submission_id)
            deadline = time.monotonic() + DELETE_WAIT_S
            while not is_terminal(job_state(cluster.call("get_job_status", submission_id))):
                if time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            job = cluster.job(submission_id) or job
        if is_terminal(job_state(job.status)):
            self._free_groups(cluster, submission_id, job)
        cluster.call("delete_job", submission_id)

    # -- logs ------------------------------------------------------------------------

    def log_iter(
        self,
        app_id: str,
        role_name: str,
        k: int = 0,
        regex: Optional[str] = None,
        since: Optional[datetime] = None,
        until: Optional[datetime] = None,
        should_tail: bool = False,
        streams: Optional[Stream] = None,
    ) -> Iterable[str]:
        """The lines of replica ``k`` of ``role_name``, as it wrote them, out of the job's log.

        ``since`` (inclusive) and ``until`` (exclusive) select on the time each
        line reached the replica's actor.  ``should_tail`` follows the log
        until the job ends (a pending job's log starts when the job does).
        """
        located = self._located(app_id)
        job = located[0].job(located[1]) if located else None
        if located is None or job is None or META_APP not in (job.metadata or {}):
            raise NotFoundError(f"unknown app {app_id!r}: no such torchspec job on the Ray cluster")
        cluster, submission_id = located
        check_replica(app_id, role_name, k, {r.name: r.num_replicas for r in rebuild_roles(job.metadata)})
        keep = LineFilter(f"{role_name}/{k}", streams, regex, aware(since), aware(until))
        if should_tail:
            return replica_lines(cluster.tail(submission_id), keep)
        return replica_lines([cluster.call("get_job_logs", submission_id)], keep)


__all__ = ["RayScheduler"]
