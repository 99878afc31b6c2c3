"""The tracker API a job calls, as ``torchx.tracker``: the run it is, its metadata, artifacts and lineage.

Inside a replica, ``AppRun.run_from_env()`` is the run of this job: its id
is the job's handle (``TORCHSPEC_JOB_ID``, or TorchX's ``TORCHX_JOB_ID``),
and its backends are the trackers the runner set up (``TORCHSPEC_TRACKERS``
or ``TORCHX_TRACKERS``: names, each with its config in
``TORCHSPEC_TRACKER_<NAME>_CONFIG`` / ``TORCHX_TRACKER_<NAME>_CONFIG``).
A parent run id (``TORCHSPEC_PARENT_RUN_ID`` / ``TORCHX_PARENT_RUN_ID``) is
recorded as the run's source.  A tracker name is an entry point of the
``torchspec.tracker`` (or TorchX's ``torchx.tracker``) group, or a
``module:function`` path; either way it is called with the config and
returns a :class:`TrackerBase`.  Outside a job (no variables), the run has
no backends and every call is a no-op, as in TorchX.
"""

from __future__ import annotations

import abc
import contextlib
import contextvars
import importlib
import os
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Dict, Iterable, Iterator, List, Mapping, Optional

__all__ = ["AppRun", "AppRunTrackableSource", "ENV_JOB_ID", "ENV_TRACKERS", "Lineage", "TrackerArtifact",
           "TrackerBase", "TrackerSource", "app_run_from_env", "build_trackers", "first_set", "for_reading",
           "reading",
           "tracker_config_env_var_name", "trackers_from_environ"]

#: The trackers of a job, comma-separated: ours, then TorchX's name.
ENV_TRACKERS = ("TORCHSPEC_TRACKERS", "TORCHX_TRACKERS")
#: The job id (its app handle) in a job: ours, then TorchX's name.
ENV_JOB_ID = ("TORCHSPEC_JOB_ID", "TORCHX_JOB_ID")
_PARENT_RUN_ID = ("TORCHSPEC_PARENT_RUN_ID", "TORCHX_PARENT_RUN_ID")
#: The entry-point group trackers register in (TorchX's ``torchx.tracker`` is read after it).
GROUP = "torchspec.tracker"


@dataclass
class TrackerSource:
    """A run this run came from (a parent, or the run that made an input artifact)."""

    source_run_id: str
    artifact_name: Optional[str]


@dataclass
class TrackerArtifact:
    """A named artifact of a run: where it is, and what is known of it."""

    name: str
    path: str
    metadata: Optional[Mapping[str, object]]


@dataclass
class Lineage:
    """Where a run sits: the runs it came from and the runs that came from it."""

    run_id: str
    sources: List[TrackerSource] = field(default_factory=list)
    children: List[str] = field(default_factory=list)


class TrackerBase(abc.ABC):
    """A tracker backend: keeps each run's metadata, artifacts and sources."""

    @abc.abstractmethod
    def add_artifact(self, run_id: str, name: str, path: str,
                     metadata: Optional[Mapping[str, object]] = None) -> None: ...

    @abc.abstractmethod
    def artifacts(self, run_id: str) -> Mapping[str, TrackerArtifact]: ...

    @abc.abstractmethod
    def add_metadata(self, run_id: str, **kwargs: object) -> None: ...

    @abc.abstractmethod
    def metadata(self, run_id: str) -> Mapping[str, object]: ...

    @abc.abstractmethod
    def add_source(self, run_id: str, source_id: str, artifact_name: Optional[str] = None) -> None: ...

    @abc.abstractmethod
    def sources(self, run_id: str, artifact_name: Optional[str] = None) -> Iterable[TrackerSource]: ...

    @abc.abstractmethod
    def lineage(self, run_id: str) -> Lineage: ...

    @abc.abstractmethod
    def run_ids(self, **kwargs: str) -> Iterable[str]:
        """Every run the tracker knows; ``parent_run_id=ID`` keeps the runs whose sources include ID."""


#: True while a reader (the ``tracker`` commands, the dashboard) builds trackers: a tracker then sets nothing up
#: for a job (TorchX's MLflow tracker makes the job's run MLflow's active run when built inside a job).
_READING: "contextvars.ContextVar[bool]" = contextvars.ContextVar("torchspec_tracker_reading", default=False)


def reading() -> bool:
    """Whether the trackers being built are a reader's (see :func:`for_reading`)."""
    return _READING.get()


@contextlib.contextmanager
def for_reading() -> Iterator[None]:
    """Trackers built inside are a reader's: they look, and never set up or start a job's run."""
    token = _READING.set(True)
    try:
        yield
    finally:
        _READING.reset(token)


def tracker_config_env_var_name(entrypoint_key: str, prefix: str = "TORCHX") -> str:
    """The variable holding tracker ``entrypoint_key``'s config (TorchX's name by default)."""
    return f"{prefix}_TRACKER_{entrypoint_key.upper()}_CONFIG"


def first_set(names: Iterable[str]) -> Optional[str]:
    """The value of the first of ``names`` set (non-empty) in the environment: ours before TorchX's."""
    return next((os.environ[name] for name in names if os.environ.get(name)), None)


def _names_and_configs_from_environ() -> Dict[str, Optional[str]]:
    names = first_set(ENV_TRACKERS)
    if not names:
        return {}
    return {name: first_set([tracker_config_env_var_name(name, "TORCHSPEC"), tracker_config_env_var_name(name)])
            for name in (n.strip() for n in names.split(",")) if name}


def _factory(name: str) -> Optional[object]:
    from torchspec.entry_points import entry_points

    for ep in entry_points(GROUP):
        if ep.name == name:
            return ep.load()
    if ":" in name:
        module, _, attr = name.partition(":")
        # TorchX's own trackers by their module path (torchx.tracker.mlflow:create_tracker) are ours
        candidates = [module] + (["torchspec." + module[len("torchx."):]] if module.startswith("torchx.") else [])
        for candidate in candidates:
            try:
                return getattr(importlib.import_module(candidate), attr)
            except (ImportError, AttributeError):
                continue
    return None


def build_trackers(factory_and_config: Mapping[str, Optional[str]]) -> List[TrackerBase]:
    """A tracker of each factory (an entry point's name, or ``module:function``) built with its config.

    Raises:
        ValueError: a name that is neither (a job's trackers must not be lost silently).
    """
    trackers: List[TrackerBase] = []
    for name, config in factory_and_config.items():
        factory = _factory(name)
        if not callable(factory):
            raise ValueError(f"tracker {name!r} is neither an entry point of {GROUP} (or torchx.tracker) nor a"
                             " module:function that imports")
        trackers.append(factory(config))
    return trackers


def trackers_from_environ() -> List[TrackerBase]:
    """The trackers the runner set up for this job (none outside a job)."""
    return build_trackers(_names_and_configs_from_environ())


@dataclass
class AppRunTrackableSource:
    """A source of a run, as a run the caller can ask further."""

    parent: "AppRun"
    artifact_name: Optional[str]


@dataclass
class AppRun:
    """A run (a job) and the trackers it records to; every call goes to each tracker."""

    id: str
    backends: Iterable[TrackerBase]

    @staticmethod
    @lru_cache(maxsize=1)
    def run_from_env() -> "AppRun":
        """This job's run, its trackers built once per process, its parent run recorded as its source."""
        run_id = first_set(ENV_JOB_ID) or "<UNDEFINED>"
        trackers = trackers_from_environ()
        parent = first_set(_PARENT_RUN_ID)
        if parent:
            for backend in trackers:
                backend.add_source(run_id, parent)
        return AppRun(id=run_id, backends=trackers)

    def add_metadata(self, **kwargs: object) -> None:
        for backend in self.backends:
            backend.add_metadata(self.id, **kwargs)

    def add_artifact(self, name: str, path: str, metadata: Optional[Mapping[str, object]] = None) -> None:
        for backend in self.backends:
            backend.add_artifact(self.id, name, path, metadata)

    def job_id(self) -> str:
        return self.id

    def add_source(self, source_id: str, artifact_name: Optional[str] = None) -> None:
        for backend in self.backends:
            backend.add_source(self.id, source_id, artifact_name)

    def sources(self) -> List[AppRunTrackableSource]:
        """The runs this one came from, as the first tracker knows them."""
        backend = next(iter(self.backends), None)
        if backend is None:
            return []
        return [AppRunTrackableSource(AppRun(source.source_run_id, self.backends), source.artifact_name)
                for source in backend.sources(self.id)]

    def children(self) -> List["AppRun"]:
        """The runs that came from this one, as the first tracker knows them."""
        backend = next(iter(self.backends), None)
        if backend is None:
            return []
        return [AppRun(run_id, self.backends) for run_id in backend.run_ids(parent_run_id=self.id)]


def app_run_from_env() -> AppRun:
    """``AppRun.run_from_env()``: this job's run (TorchX's ``torchx.tracker.app_run_from_env``)."""
    return AppRun.run_from_env()
