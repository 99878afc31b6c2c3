"""The MLflow tracker: each job is an MLflow run, named for the job's handle, in one experiment.

Its config is the tracking URI, with the experiment after a ``#``::

    [tracker.mlflow]
    config = "http://mlflow.internal:5000#team-a"

``TORCHSPEC_TRACKING_EXPERIMENT_NAME`` (or TorchX's
``TORCHX_TRACKING_EXPERIMENT_NAME``) names another, as in TorchX; with
neither, the experiment is ``torchspec``: one
name that a job in a container and ``torchspec tracker`` on a laptop agree
on (TorchX's default names the user and the host, which differ between
the two, so the CLI would never find what the job recorded).  TorchX's own
form, a folder holding a ``.torchxconfig`` with a ``[tracker:mlflow]``
section (``tracking_uri``, ``experiment_name``, ``artifact_location``), is
read too.

What goes where in MLflow:

- metadata: the run's tags, as ``str()`` writes them (MLflow keeps text:
  ``0.1`` comes back as ``"0.1"``, as in TorchX); the ``mlflow.*``,
  ``torchx.*`` and ``torchspec.*`` tags are not metadata;
- an artifact: a file or folder that exists here is uploaded into the
  run's artifacts under its name, its metadata in tags
  ``torchx.artifact.metadata.NAME.KEY`` (TorchX's layout: each reads what
  the other wrote); any other path (an ``s3://`` URL) is recorded as it is,
  in the tag ``torchspec.artifact.NAME``.  An artifact's path is where the
  file is in the run's artifacts (TorchX gives the experiment's artifact
  folder joined with the name, where no file is);
- sources (the parent run, inputs): the tag ``torchspec.sources``, so the
  lineage that TorchX's MLflow tracker refuses works here.

Every replica of a job records to the same run.  Replicas that start at
once may each create it; each then waits 2 s, keeps the oldest one and
deletes its own if it lost, so one run remains.  That needs the replicas'
clocks to agree and each one's search and create to be less than 2 s
apart; where they are not, two runs remain, and the next look for the run
says so (TorchX's "More than 1 run found"), never silently.  Only
``mlflow-skinny`` (the ``mlflow`` extra) is needed, not the server.
"""

from __future__ import annotations

import configparser
import dataclasses
import json
import os
import re
import threading
import time
from pathlib import Path
from tempfile import gettempdir
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Mapping, Optional, Tuple

from torchspec.tracker.api import (ENV_JOB_ID, Lineage, TrackerArtifact, TrackerBase, TrackerSource, first_set,
                                   reading)

if TYPE_CHECKING:
    from mlflow import MlflowClient
    from mlflow.entities import Experiment, Run

__all__ = ["EXPERIMENT_ENV", "MLflowTracker", "create", "create_tracker", "parse_config"]

#: The experiment when the config names none: ours, then TorchX's variable.
EXPERIMENT_ENV = ("TORCHSPEC_TRACKING_EXPERIMENT_NAME", "TORCHX_TRACKING_EXPERIMENT_NAME")
DEFAULT_EXPERIMENT = "torchspec"
#: How long a replica that made the job's run waits before it looks for the others' (once per job).
SETTLE_S = 2.0
_ARTIFACT_TAG = "torchspec.artifact."
#: An artifact's metadata, one tag per key, as TorchX's MLflowTracker writes it.
_METADATA_TAG = "torchx.artifact.metadata."
#: An artifact uploaded under its name (TorchX writes none: its names are the folders the files are in).
_UPLOADED_TAG = "torchspec.uploaded."
_SOURCES_TAG = "torchspec.sources"
_HIDDEN = ("mlflow.", "torchspec.", "torchx.")
#: What MLflow allows in a tag key (and so in an artifact's name, which is part of one).
_KEY = re.compile(r"^[\w./\- ]+$")


def _mlflow_client(tracking_uri: str) -> "MlflowClient":
    try:
        from mlflow import MlflowClient
    except ImportError as e:
        from torchspec.install import install_command

        raise ValueError(f"the mlflow tracker needs the mlflow package: {install_command('mlflow')}") from e
    return MlflowClient(tracking_uri=tracking_uri)


class MLflowTracker(TrackerBase):
    """A tracker recording each job as an MLflow run (named for its handle) of ``experiment_name``."""

    def __init__(self, experiment_name: Optional[str] = None,
                 tracking_uri: str = f"file://{Path(gettempdir()) / 'torchspec' / 'mlruns'}",
                 artifact_location: Optional[str] = None) -> None:
        self.tracking_uri = tracking_uri
        self.client = _mlflow_client(tracking_uri)
        self.experiment_name = experiment_name or self.default_experiment_name()
        self._artifact_location = artifact_location
        self._found_experiment: Optional["Experiment"] = None
        self._runs: Dict[str, str] = {}  # job id -> MLflow run id, once found or made
        self._created: List[str] = []
        self._started: Optional[str] = None  # the MLflow run this tracker made the active one
        self._lock = threading.Lock()
        # in a job, its run is made (or found) now and becomes MLflow's active run, as TorchX's tracker does:
        # the job's own mlflow.log_metric(...) calls then record to it
        job = first_set(ENV_JOB_ID)
        if job and not reading():
            import mlflow

            active = mlflow.active_run()  # another tracker of this job made its own run the active one: leave it
            if active is None or active.info.run_id == self.mlflow_run_id(job):
                self.get_run(job)

    @staticmethod
    def default_experiment_name() -> str:
        return first_set(EXPERIMENT_ENV) or DEFAULT_EXPERIMENT

    # ----------------------------------------------------------------- the experiment and its runs

    def _experiment(self, create: bool) -> Optional["Experiment"]:
        """The experiment, made on first use when ``create`` (a reader never makes one)."""
        if self._found_experiment is None:
            found = self.client.get_experiment_by_name(self.experiment_name)
            if found is None and create:
                from mlflow.exceptions import MlflowException

                try:
                    self.client.create_experiment(self.experiment_name, artifact_location=self._artifact_location)
                except MlflowException as e:  # another replica made it first, or the store refused
                    found = self.client.get_experiment_by_name(self.experiment_name)
                    if found is None:
                        raise e
                found = found or self.client.get_experiment_by_name(self.experiment_name)
            self._found_experiment = found
        return self._found_experiment

    @property
    def experiment(self) -> "Experiment":
        """The MLflow experiment (made on first use), as TorchX's ``MLflowTracker.experiment``."""
        found = self._experiment(create=True)
        assert found is not None
        return found

    @property
    def experiment_id(self) -> str:
        return str(self.experiment.experiment_id)

    @property
    def artifact_location(self) -> str:
        return str(self.experiment.artifact_location)

    def _all_runs(self, filter_string: str = "") -> List["Run"]:
        found = self._experiment(create=False)
        if found is None:
            return []
        experiment = found.experiment_id
        runs: List["Run"] = []
        token = None
        while True:
            page = self.client.search_runs([experiment], filter_string, max_results=1000, page_token=token)
            runs.extend(page)
            token = page.token
            if not token:
                return runs

    def _named(self, run_id: str) -> List["Run"]:
        if "'" not in run_id and "\\" not in run_id:
            return self._all_runs(f"attributes.run_name = '{run_id}'")
        return [run for run in self._all_runs() if run.info.run_name == run_id]

    @staticmethod
    def _oldest(runs: List["Run"]) -> "Run":
        return min(runs, key=_age)

    def find_run(self, run_id: str) -> Optional["Run"]:
        """The MLflow run of job ``run_id``, or None where the job recorded nothing.

        Raises:
            RuntimeError: the experiment holds several runs of that name, and still does a moment later (so
                not replicas that each just made one, which settle on one by then), as TorchX says.
        """
        runs = self._named(run_id)
        if len(runs) > 1:
            time.sleep(2 * SETTLE_S)
            runs = self._named(run_id)
            if len(runs) > 1:
                raise RuntimeError(f"More than 1 run found for run_name `{run_id}` in experiment"
                                   f" `{self.experiment_name}`. Did you manually create runs with the same name under"
                                   " this experiment? Remove duplicate run names and try again")
        return runs[0] if runs else None

    def mlflow_run_id(self, run_id: str) -> str:
        """The id of job ``run_id``'s MLflow run, made on first use; replicas that made one each at once agree
        on the oldest, and the others delete theirs."""
        with self._lock:
            if run_id in self._runs:
                return self._runs[run_id]
            found = self.find_run(run_id)
            if found is None:
                made = self.client.create_run(self.experiment_id, run_name=run_id)
                time.sleep(SETTLE_S)  # every replica that made one at once now sees them all, and all agree
                found = self._oldest(self._named(run_id) or [made])
                if found.info.run_id != made.info.run_id:
                    self.client.delete_run(made.info.run_id)
                else:
                    self._created.append(made.info.run_id)
            self._runs[run_id] = found.info.run_id
            return found.info.run_id

    def _tags(self, run_id: str) -> Dict[str, str]:
        run = self.find_run(run_id)
        return dict(run.data.tags) if run is not None else {}

    def get_run(self, run_name: str) -> "Run":
        """Job ``run_name``'s MLflow run (made on first use), which also becomes MLflow's active run in this
        process, as in TorchX: ``mlflow.log_metric(...)`` after it records to the job's run."""
        import mlflow

        run_id = self.mlflow_run_id(run_name)
        active = mlflow.active_run()
        if active is None:
            mlflow.set_tracking_uri(self.tracking_uri)
            mlflow.start_run(run_id=run_id)
            self._started = run_id
        elif active.info.run_id != run_id:
            raise RuntimeError(f"MLflow's active run in this process is {active.info.run_id}, not job {run_name}'s"
                               f" ({run_id}): call get_run with one job's id only, as in TorchX")
        return self.client.get_run(run_id)

    def get_run_id(self, run_name: str) -> str:
        """The MLflow id of job ``run_name``'s run, made MLflow's active run (:meth:`get_run`)."""
        return str(self.get_run(run_name).info.run_id)

    def close(self) -> None:
        """Ends the MLflow active run this tracker started (not one the job started itself) and marks the runs it
        made FINISHED (MLflow shows them RUNNING until then)."""
        import mlflow

        active = mlflow.active_run()
        if active is not None and active.info.run_id == self._started:
            mlflow.end_run()
        self._started = None
        for made in self._created:
            self.client.set_terminated(made)
        self._created.clear()

    # ----------------------------------------------------------------- metadata

    def add_metadata(self, run_id: str, **kwargs: object) -> None:
        from mlflow.entities import RunTag

        tags = [RunTag(_checked_key(key, "metadata key"), str(value)) for key, value in kwargs.items()]
        if tags:
            self.client.log_batch(self.mlflow_run_id(run_id), tags=tags)

    def metadata(self, run_id: str) -> Mapping[str, object]:
        return {key: value for key, value in self._tags(run_id).items() if not key.startswith(_HIDDEN)}

    # ----------------------------------------------------------------- artifacts

    def add_artifact(self, run_id: str, name: str, path: str,
                     metadata: Optional[Mapping[str, object]] = None) -> None:
        """Uploads the file or folder at ``path`` into the run's artifacts under ``name``, its metadata as tags
        ``torchx.artifact.metadata.NAME.KEY`` (TorchX's layout, so each reads what the other wrote); a path that
        is not here (an ``s3://`` URL) is recorded as it is, in the tag ``torchspec.artifact.NAME``."""
        from mlflow.entities import RunTag

        _checked_key(name, "artifact name")
        mlflow_run = self.mlflow_run_id(run_id)
        if os.path.isdir(path):
            self.client.log_artifacts(mlflow_run, path, artifact_path=name)
        elif os.path.exists(path):
            self.client.log_artifact(mlflow_run, path, artifact_path=name)
        tags = [RunTag(_checked_key(f"{_METADATA_TAG}{name}.{key}", "artifact metadata key"), str(value))
                for key, value in (metadata or {}).items()]
        if os.path.exists(path):
            tags.append(RunTag(_UPLOADED_TAG + name, "1"))  # which folder of the run's artifacts is one artifact
        if not os.path.exists(path):
            tags.append(RunTag(_ARTIFACT_TAG + name, path))
        if tags:
            self.client.log_batch(mlflow_run, tags=tags)

    def artifacts(self, run_id: str) -> Mapping[str, TrackerArtifact]:
        """Every artifact of the run: each uploaded one at its place in the run's artifacts (a name with one
        file is that file, with several their folder), with its metadata (text, as MLflow keeps it) and
        ``mlflow.file_size``; each recorded one at its own path."""
        run = self.find_run(run_id)
        if run is None:
            return {}
        tags = run.data.tags
        files: Dict[str, List[Any]] = {}

        def walk(path: Optional[str] = None) -> None:
            for info in self.client.list_artifacts(run.info.run_id, path):
                if info.is_dir:
                    walk(info.path)
                elif path:  # uploaded under a name: the folder it is in
                    files.setdefault(path, []).append(info)

        walk()
        uploaded = sorted((key[len(_UPLOADED_TAG):] for key in tags if key.startswith(_UPLOADED_TAG)), key=len)
        if uploaded:  # each file under the longest name uploaded that holds it (a folder's subfolders included)
            grouped: Dict[str, List[Any]] = {}
            for folder, infos in files.items():
                name = next((u for u in reversed(uploaded) if folder == u or folder.startswith(u + "/")), folder)
                grouped.setdefault(name, []).extend(infos)
            files = grouped
        found = {}
        for name, infos in sorted(files.items()):
            where = infos[0].path if len(infos) == 1 else name
            meta: Dict[str, object] = dict(_artifact_metadata(tags, name))
            meta["mlflow.file_size"] = sum(info.file_size or 0 for info in infos)
            found[name] = TrackerArtifact(name, f"{run.info.artifact_uri}/{where}", meta)
        for key, value in sorted(tags.items()):
            if key.startswith(_ARTIFACT_TAG):
                name = key[len(_ARTIFACT_TAG):]
                found[name] = TrackerArtifact(name, value, dict(_artifact_metadata(tags, name)) or None)
        return found

    # ----------------------------------------------------------------- lineage

    def add_source(self, run_id: str, source_id: str, artifact_name: Optional[str] = None) -> None:
        mlflow_run = self.mlflow_run_id(run_id)
        found = _sources(self.client.get_run(mlflow_run).data.tags)
        entry = {"source_run_id": source_id, "artifact_name": artifact_name}
        if entry not in found:
            self.client.set_tag(mlflow_run, _SOURCES_TAG, json.dumps([*found, entry]))

    def sources(self, run_id: str, artifact_name: Optional[str] = None) -> Iterable[TrackerSource]:
        return [TrackerSource(s["source_run_id"], s.get("artifact_name")) for s in _sources(self._tags(run_id))
                if artifact_name is None or s.get("artifact_name") == artifact_name]

    def run_ids(self, **kwargs: str) -> Iterable[str]:
        parent = kwargs.get("parent_run_id")
        names = []
        for run in sorted(self._all_runs(), key=_age):
            if parent is not None and all(s["source_run_id"] != parent for s in _sources(run.data.tags)):
                continue
            if run.info.run_name not in names:
                names.append(run.info.run_name)
        return names

    def lineage(self, run_id: str) -> Lineage:
        return Lineage(run_id, list(self.sources(run_id)), list(self.run_ids(parent_run_id=run_id)))

    # ----------------------------------------------------------------- TorchX's extra

    def log_params_flat(self, run_name: str, cfg: Any, key: str = "") -> None:
        """Logs ``cfg`` (a dataclass, mapping or sequence, nested) as the run's MLflow params, flattened as
        TorchX's MLflowTracker does: ``a.b`` for nesting, ``a._0.b`` for the items of a sequence of
        containers, a sequence of plain values as one param."""
        mlflow_run = self.mlflow_run_id(run_name)
        for param, value in _flatten(cfg, key):
            self.client.log_param(mlflow_run, param, value)


def _age(run: "Run") -> Tuple[int, str]:
    """Oldest first (the run replicas agree on), the id breaking a tie."""
    return (run.info.start_time or 0, str(run.info.run_id))


def _checked_key(key: str, what: str) -> str:
    parts = key.split("/")
    if not _KEY.match(key) or len(key) > 200 or any(part in ("", ".", "..") for part in parts):
        raise ValueError(f"the mlflow tracker's {what} {key!r} must be letters, digits, '_', '.', '-', '/' and"
                         " spaces, 200 at most, with no empty, '.' or '..' part between slashes (MLflow keeps it in a"
                         " tag's name)")
    return key


def _artifact_metadata(tags: Mapping[str, str], name: str) -> Dict[str, str]:
    prefix = f"{_METADATA_TAG}{name}."
    return {key[len(prefix):]: value for key, value in tags.items() if key.startswith(prefix)}


def _sources(tags: Mapping[str, str]) -> List[Dict[str, Optional[str]]]:
    try:
        found = json.loads(tags.get(_SOURCES_TAG, "[]"))
    except ValueError:
        return []
    return found if isinstance(found, list) else []


def _plain(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool))


def _flatten(cfg: Any, key: str) -> List[Tuple[str, Any]]:
    if dataclasses.is_dataclass(cfg) and not isinstance(cfg, type):
        cfg = dataclasses.asdict(cfg)
    prefix = f"{key}." if key else ""
    if not cfg:
        return [(key, cfg)]
    if isinstance(cfg, Mapping):
        out: List[Tuple[str, Any]] = []
        for k, v in cfg.items():
            out.extend([(f"{prefix}{k}", v)] if _plain(v) else _flatten(v, f"{prefix}{k}"))
        return out
    if isinstance(cfg, (list, tuple, set)):
        if _plain(next(iter(cfg))):
            return [(key, list(cfg) if isinstance(cfg, set) else cfg)]
        return [pair for i, item in enumerate(cfg) for pair in _flatten(item, f"{prefix}_{i}")]
    return [(key, cfg)]


def parse_config(config: str) -> Dict[str, Optional[str]]:
    """The tracker's arguments from its config: ``URI[#EXPERIMENT]``, or a folder holding TorchX's
    ``.torchxconfig`` (its ``[tracker:mlflow]`` section)."""
    if os.path.isdir(config):
        parser = configparser.ConfigParser()
        parser.read(os.path.join(config, ".torchxconfig"))
        section = dict(parser["tracker:mlflow"]) if parser.has_section("tracker:mlflow") else {}
        section.pop("config", None)  # TorchX keeps that key for itself
        unknown = set(section) - {"tracking_uri", "experiment_name", "artifact_location"}
        if unknown:
            raise ValueError(f"{os.path.join(config, '.torchxconfig')} [tracker:mlflow]: unknown key(s)"
                             f" {', '.join(sorted(unknown))} (tracking_uri, experiment_name, artifact_location)")
        if "tracking_uri" not in section:
            raise ValueError(f"{os.path.join(config, '.torchxconfig')} has no [tracker:mlflow] tracking_uri")
        return {"tracking_uri": section["tracking_uri"], "experiment_name": section.get("experiment_name"),
                "artifact_location": section.get("artifact_location")}
    uri, _, experiment = config.partition("#")
    return {"tracking_uri": uri, "experiment_name": experiment or None, "artifact_location": None}


def create(config: Optional[str]) -> MLflowTracker:
    """The entry point's factory (the tracker named ``mlflow``)."""
    if not config:
        raise ValueError("the mlflow tracker needs a tracking URI as its config, e.g. [tracker.mlflow]"
                         ' config = "http://mlflow.internal:5000#my-experiment"')
    args = parse_config(config)
    from_env = first_set(EXPERIMENT_ENV)
    return MLflowTracker(experiment_name=from_env or args["experiment_name"],
                         tracking_uri=str(args["tracking_uri"]), artifact_location=args["artifact_location"])


#: TorchX's name for the factory.
create_tracker = create
