"""The memory backend's Scheduler: the part that would talk to a real engine."""

from __future__ import annotations

import itertools
from datetime import datetime
from typing import Any, Dict, Iterable, List, Optional

from torchspec.schedulers.api import DescribeAppResponse, ListAppResponse, Scheduler, Stream, filter_regex, labels_of
from torchspec.specs import AppDef, AppDryRunInfo, AppState, CfgVal, Role, runopts
from torchspec_memory import options
from torchspec_memory.states import BACKEND
from torchspec_memory.translate import MemoryRequest


class MemoryScheduler(Scheduler[Dict[str, CfgVal]]):
    keeps_labels = True  # the app's metadata, kept with it and given back by list and describe

    def __init__(self, session_name: str, **params: Any) -> None:
        super().__init__(BACKEND, session_name)
        self.params = params
        self.apps: Dict[str, Dict[str, List[Role]]] = {}
        self.cfgs: Dict[str, Dict[str, CfgVal]] = {}
        self.states: Dict[str, AppState] = {}
        self.labels: Dict[str, Dict[str, str]] = {}
        self.cancelled: List[str] = []
        self.closed = 0
        self._ids = itertools.count(1)

    def _run_opts(self) -> runopts:
        return options.run_opts()

    def _submit_dryrun(self, app: AppDef, cfg: Dict[str, CfgVal]) -> AppDryRunInfo[MemoryRequest]:
        options.check(cfg)
        return AppDryRunInfo(MemoryRequest(app, cfg), str)

    def schedule(self, dryrun_info: AppDryRunInfo[Any]) -> str:
        request: MemoryRequest = dryrun_info.request
        app_id = f"{request.app.name}-{next(self._ids)}"
        self.apps[app_id] = request.replicas(app_id)
        self.cfgs[app_id] = request.cfg
        self.states[app_id] = AppState.RUNNING
        self.labels[app_id] = labels_of(request.app)
        return app_id

    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        if app_id not in self.apps:
            return None
        roles = [replicas[0] for replicas in self.apps[app_id].values()]
        return DescribeAppResponse(app_id=app_id, state=self.states[app_id], roles=roles,
                                   ui_url=f"memory://ui/{app_id}", labels=self.labels[app_id])

    def list(self) -> List[ListAppResponse]:
        return [ListAppResponse(app_id=app_id, state=self.states[app_id], labels=self.labels[app_id])
                for app_id in self.apps]

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
