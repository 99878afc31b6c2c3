"""A scheduler that keeps apps in memory: a plug-in written against the public Scheduler API.

The runner tests register it through a factory dict, exactly as a
third-party backend registers through an entry point.  Apps "run" as soon as
they are scheduled; a test sets ``states`` to move them along.  The request
it builds is the app with the macros filled in per replica, so tests see
what a real backend would launch.
"""

from __future__ import annotations

import itertools
from datetime import datetime
from typing import Any, Dict, Iterable, List, Mapping, Optional

from torchspec.schedulers.api import DescribeAppResponse, ListAppResponse, Scheduler, Stream, filter_regex
from torchspec.specs import AppDef, AppDryRunInfo, AppState, CfgVal, Role, macros, runopts


class MemoryRequest:
    """What ``schedule`` receives: the app, its resolved cfg and every replica's filled-in role."""

    def __init__(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> None:
        self.app = app
        self.cfg = dict(cfg)

    def replicas(self, app_id: str) -> Dict[str, List[Role]]:
        return {
            role.name: [
                macros.Values(img_root=role.image, app_id=app_id, replica_id=str(i), rank0_env="RANK0_HOST").apply(role)
                for i in range(role.num_replicas)
            ]
            for role in self.app.roles
        }

    def __str__(self) -> str:
        return f"MemoryRequest(app={self.app.name}, cfg={self.cfg})"


class MemoryScheduler(Scheduler[Dict[str, CfgVal]]):
    def __init__(self, session_name: str, **params: Any) -> None:
        super().__init__("memory", session_name)
        self.params = params
        self.apps: Dict[str, Dict[str, List[Role]]] = {}
        self.cfgs: Dict[str, Dict[str, CfgVal]] = {}
        self.states: Dict[str, AppState] = {}
        self.cancelled: List[str] = []
        self.closed = 0
        self._ids = itertools.count(1)

    def _run_opts(self) -> runopts:
        opts = runopts()
        opts.add("queue", str, "queue to run in", default="default")
        opts.add("priority", int, "higher runs first", default=0)
        opts.add("tags", List[str], "labels for the app", default=None)
        return opts

    def _submit_dryrun(self, app: AppDef, cfg: Dict[str, CfgVal]) -> AppDryRunInfo[MemoryRequest]:
        return AppDryRunInfo(MemoryRequest(app, cfg), str)

    def schedule(self, dryrun_info: AppDryRunInfo[Any]) -> str:
        request: MemoryRequest = dryrun_info.request
        app_id = f"{request.app.name}-{next(self._ids)}"
        self.apps[app_id] = request.replicas(app_id)
        self.cfgs[app_id] = request.cfg
        self.states[app_id] = AppState.RUNNING
        return app_id

    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        if app_id not in self.apps:
            return None
        roles = [replicas[0] for replicas in self.apps[app_id].values()]
        return DescribeAppResponse(app_id=app_id, state=self.states[app_id], roles=roles,
                                   ui_url=f"memory://ui/{app_id}")

    def list(self) -> List[ListAppResponse]:
        return [ListAppResponse(app_id=app_id, state=self.states[app_id]) for app_id in self.apps]

    def _cancel_existing(self, app_id: str) -> None:
        self.cancelled.append(app_id)
        self.states[app_id] = AppState.CANCELLED

    def log_iter(self, app_id: str, role_name: str, k: int = 0, regex: Optional[str] = None,
                 since: Optional[datetime] = None, until: Optional[datetime] = None, should_tail: bool = False,
                 streams: Optional[Stream] = None) -> Iterable[str]:
        """One line per arg of the replica, as if it echoed them."""
        replica = self.apps[app_id][role_name][k]
        lines = [f"{arg}\n" for arg in replica.args]
        return filter_regex(regex, lines) if regex else iter(lines)

    def close(self) -> None:
        self.closed += 1


class Factory:
    """A scheduler factory that remembers what it built, so tests can look inside."""

    def __init__(self) -> None:
        self.built: List[MemoryScheduler] = []

    def __call__(self, session_name: str, **params: Any) -> MemoryScheduler:
        scheduler = MemoryScheduler(session_name, **params)
        self.built.append(scheduler)
        return scheduler

    @property
    def scheduler(self) -> MemoryScheduler:
        assert len(self.built) == 1, f"built {len(self.built)} schedulers"
        return self.built[0]
