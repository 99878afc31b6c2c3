"""The tracker API (``torchspec.tracker``) and the file tracker, on a folder and on an fsspec URL."""

from __future__ import annotations

import pathlib
import uuid

import pytest

from torchspec.tracker import AppRun, TrackerArtifact, TrackerSource, app_run_from_env, build_trackers
from torchspec.tracker.backend.fsspec import FsspecTracker, create


@pytest.fixture(autouse=True)
def no_job_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TORCHSPEC_TRACKERS", "TORCHX_TRACKERS", "TORCHSPEC_JOB_ID", "TORCHX_JOB_ID",
                 "TORCHSPEC_PARENT_RUN_ID", "TORCHX_PARENT_RUN_ID"):
        monkeypatch.delenv(name, raising=False)
    AppRun.run_from_env.cache_clear()


@pytest.mark.parametrize("where", ["folder", "url"])
def test_the_file_tracker_keeps_metadata_artifacts_and_sources(where: str, tmp_path: pathlib.Path) -> None:
    root = str(tmp_path / "runs") if where == "folder" else f"memory://runs-{uuid.uuid4().hex}"
    tracker = create(root)
    run, child = "local://s/train-1", "local://s/eval-2"
    tracker.add_metadata(run, lr=0.1, epochs=3)
    tracker.add_metadata(run, loss=0.5)
    tracker.add_artifact(run, "model", "/shared/model.pt", {"format": "torchscript"})
    tracker.add_source(child, run, "model")
    tracker.add_source(child, run, "model")  # recorded once
    assert tracker.metadata(run) == {"lr": 0.1, "epochs": 3, "loss": 0.5}
    assert tracker.artifacts(run) == {"model": TrackerArtifact("model", "/shared/model.pt", {"format": "torchscript"})}
    assert list(tracker.sources(child)) == [TrackerSource(run, "model")]
    assert list(tracker.sources(child, artifact_name="other")) == []
    assert sorted(tracker.run_ids()) == sorted([run, child])
    assert list(tracker.run_ids(parent_run_id=run)) == [child]
    lineage = tracker.lineage(run)
    assert lineage.children == [child] and lineage.sources == []
    assert tracker.metadata("local://s/nothing") == {} and tracker.artifacts("local://s/nothing") == {}


def test_a_tracker_needs_its_root() -> None:
    with pytest.raises(ValueError, match="root folder or URL"):
        create(None)


def test_outside_a_job_the_run_records_nowhere() -> None:
    run = app_run_from_env()
    assert run.id == "<UNDEFINED>" and list(run.backends) == []
    run.add_metadata(x=1)  # a no-op, as in TorchX
    assert run.sources() == [] and run.children() == []


@pytest.mark.parametrize("prefix", ["TORCHSPEC", "TORCHX"])
def test_in_a_job_the_run_is_the_job_and_its_parent_a_source(prefix: str, tmp_path: pathlib.Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(f"{prefix}_TRACKERS", "file")
    monkeypatch.setenv(f"{prefix}_TRACKER_FILE_CONFIG", str(tmp_path / "runs"))
    monkeypatch.setenv(f"{prefix}_JOB_ID", "local://s/train-1")
    monkeypatch.setenv(f"{prefix}_PARENT_RUN_ID", "local://s/prep-0")
    run = app_run_from_env()
    assert run.job_id() == "local://s/train-1" and app_run_from_env() is run  # built once per process
    run.add_metadata(lr=0.1)
    run.add_artifact("model", "/shared/model.pt")
    tracker = FsspecTracker(str(tmp_path / "runs"))
    assert tracker.metadata("local://s/train-1") == {"lr": 0.1}
    assert [s.parent.id for s in run.sources()] == ["local://s/prep-0"]
    assert [c.id for c in AppRun("local://s/prep-0", run.backends).children()] == ["local://s/train-1"]


def test_a_tracker_by_module_path_and_an_unknown_one(tmp_path: pathlib.Path) -> None:
    (tracker,) = build_trackers({"torchspec.tracker.backend.fsspec:create": str(tmp_path)})
    assert isinstance(tracker, FsspecTracker)
    with pytest.raises(ValueError, match="neither an entry point"):
        build_trackers({"nosuch": None})
