"""The ``ray`` scheduler: one app is one Ray job; every replica its own actor, one placement group per role.

The job goes through Ray's Job Submission API (``ray[default]``, the ``ray``
extra, imported only when a command talks to the cluster).  Its entrypoint is
torchspec's driver, uploaded with the job, which gang-schedules each role's
replicas in a placement group (one bundle per replica), runs them, retries
them as their roles say, and tags every line they print with the replica and
the time, so that ``logs`` can give each replica its own.

The package, from the bottom up:

- ``states.py``: job and actor states as AppStates, metadata keys, app ids, actor names, the log-line tag.
- ``options.py``: the run options, their checks, and the runtime_env they make.
- ``placement.py``: whether placement groups can ever fit a cluster's nodes; pure.
- ``translate.py``: the request (the job submission and the driver's plan) and AppDef -> request; pure.
- ``status.py``: a job, its actors and the driver's summary as a DescribeAppResponse; pure.
- ``logs.py``: one replica's lines out of the job's log.
- ``client.py``: the dashboard's Job Submission and State APIs (the one place ``ray`` is imported client-side).
- ``scheduler.py``: :class:`RayScheduler`.
- ``driver.py``: the job's entrypoint, run on the cluster.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from torchspec.schedulers.exports import lazy_exports

if TYPE_CHECKING:
    from torchspec.schedulers.ray.scheduler import RayScheduler


def create_scheduler(session_name: str, **kwargs: Any) -> RayScheduler:
    """The ``ray`` entry point; ``dashboard_address`` (e.g. from ``TORCHSPEC_DASHBOARD_ADDRESS``) is where
    ``list`` looks, ``request_timeout`` (``TORCHSPEC_REQUEST_TIMEOUT``) bounds each request; other keyword
    arguments are ignored."""
    from torchspec.schedulers.ray.scheduler import RayScheduler
    from torchspec.schedulers.request_timeout import seconds

    address = kwargs.get("dashboard_address")
    return RayScheduler(session_name, dashboard_address=str(address) if address else None,
                        request_timeout=seconds(kwargs.get("request_timeout")))


_EXPORTS = {
    "RayJobRequest": "translate",
    "RayScheduler": "scheduler",
    "RolePlan": "translate",
    "app_to_request": "translate",
    "ray_run_opts": "options",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = ["create_scheduler", *_EXPORTS]
