"""The runner tests' scheduler: kept in memory, built by a factory that remembers what it built, so tests can
look inside.  Apps "run" as soon as they are scheduled; a test moves them along by setting ``states``.

The runner tests register it through a factory dict, exactly as a
third-party backend registers through an entry point.  (It was the example
plug-in once; that is now ``tests/plugins/torchspec-example``, which
``torchspec new scheduler`` writes, and runs real processes.)
"""

from __future__ import annotations

import itertools
from datetime import datetime
from typing import Any, Dict, Iterable, List, Mapping, Optional

from torchspec.errors import AppRefusedError
from torchspec.schedulers.api import DescribeAppResponse, ListAppResponse, Scheduler, Stream, filter_regex, labels_of
from torchspec.specs import AppDef, AppDryRunInfo, AppState, CfgVal, Role, macros, runopts

__all__ = ["Factory", "MemoryRequest", "MemoryScheduler"]

BACKEND = "memory"
RANK0_ENV = "RANK0_HOST"


def memory_run_opts() -> runopts:
    opts = runopts()
    opts.add("queue", str, "queue to run in", default="default")
    opts.add("priority", int, "higher runs first", default=0)
    opts.add("tags", List[str], "labels for the app", default=None)
    return opts


def check_cfg(cfg: dict[str, CfgVal]) -> None:
    """Checks the types cannot express; a refusal is an :class:`AppRefusedError`, never a bare ValueError."""
    priority = cfg.get("priority")
    if isinstance(priority, int) and priority < 0:
        raise AppRefusedError(f"run option priority={priority} must be 0 or more")


class MemoryRequest:
    """What ``schedule`` receives: the app, its resolved cfg and every replica's filled-in role."""

    def __init__(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> None:
        self.app = app
        self.cfg = dict(cfg)

    def replicas(self, app_id: str) -> Dict[str, List[Role]]:
        return {role.name: role_replicas(role, app_id) for role in self.app.roles}

    def __str__(self) -> str:
        return f"MemoryRequest(app={self.app.name}, cfg={self.cfg})"


def role_replicas(role: Role, app_id: str) -> List[Role]:
    """One copy of ``role`` per replica, macros filled in as the backend would at launch."""
    return [macros.Values(img_root=role.image, app_id=app_id, replica_id=str(i), rank0_env=RANK0_ENV).apply(role)
            for i in range(role.num_replicas)]


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
        return memory_run_opts()

    def _submit_dryrun(self, app: AppDef, cfg: Dict[str, CfgVal]) -> AppDryRunInfo[MemoryRequest]:
        check_cfg(cfg)
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


class Factory:
    """A scheduler factory that remembers what it built."""

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
