"""TorchX's own tests of its MLflowTracker (torchx/tracker/test/mlflow_test.py), rewritten for torchspec: the same
calls on a file store in a temporary folder, the same results, but for the differences the mlflow tracker
means to have (each said where it is): an artifact's path is where its file is, and sources and lineage work."""

from __future__ import annotations

import pathlib
import uuid
from dataclasses import dataclass, field
from typing import Dict, Iterator, List

import pytest

from skips import import_or_skip

mlflow = import_or_skip("mlflow", "MLFLOW", "pip install 'torchspec-cli[mlflow]'")

from torchspec.tracker.api import for_reading  # noqa: E402
from torchspec.tracker.mlflow import MLflowTracker, create_tracker  # noqa: E402


@dataclass
class ModelConfig:
    vocab_size: int = 256035
    hidden_size: int = 1024
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1


@dataclass
class DatasetConfig:
    url: str
    split: str = "70/30"


@dataclass
class Config:
    epochs: int = 100
    lr: float = 0.01
    checkpoint_url: str = "s3://foo/bar"
    use_amp: bool = False
    locales: List[str] = field(default_factory=lambda: ["us", "eu", "fr"])
    empty_list: List[str] = field(default_factory=list)
    empty_map: Dict[str, str] = field(default_factory=dict)
    model_config: ModelConfig = field(default_factory=ModelConfig)
    datasets: List[DatasetConfig] = field(
        default_factory=lambda: [DatasetConfig(url="s3://dataset1"), DatasetConfig(url="s3://dataset2")])


@pytest.fixture(autouse=True)
def file_store_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    """MLflow 3.x refuses its file store (TorchX's tests' store, and TorchX's default) unless told to take it."""
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")


@pytest.fixture
def tracker(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MLflowTracker]:
    for name in ("TORCHSPEC_TRACKING_EXPERIMENT_NAME", "TORCHX_TRACKING_EXPERIMENT_NAME", "TORCHX_JOB_ID"):
        monkeypatch.delenv(name, raising=False)
    found = MLflowTracker(experiment_name=f"exp-{uuid.uuid4().hex[:8]}",
                          tracking_uri=str(tmp_path / "experiments"), artifact_location=str(tmp_path / "artifacts"))
    yield found
    found.close()


def test_default_experiment_name(tracker: MLflowTracker) -> None:
    assert MLflowTracker(tracking_uri=tracker.tracking_uri).experiment_name == MLflowTracker.default_experiment_name()


def test_ctor_existing_experiment(tracker: MLflowTracker) -> None:
    again = MLflowTracker(experiment_name=tracker.experiment_name, tracking_uri=tracker.tracking_uri,
                          artifact_location=tracker.artifact_location)
    assert (again.experiment_id, again.experiment_name) == (tracker.experiment_id, tracker.experiment_name)


def test_get_run(tracker: MLflowTracker) -> None:
    run1 = tracker.get_run("run1")
    assert run1.info.run_name == "run1"
    assert tracker.get_run("run1").info.run_id == run1.info.run_id
    tracker.close()
    assert tracker.get_run("run2").info.run_name == "run2"


def test_get_run_duplicate_run_name_should_throw(tracker: MLflowTracker) -> None:
    client = mlflow.MlflowClient(tracking_uri=tracker.tracking_uri)
    client.create_run(tracker.experiment_id, run_name="run1")
    client.create_run(tracker.experiment_id, run_name="run1")
    with pytest.raises(RuntimeError, match="More than 1 run found for run_name `run1`"):
        tracker.get_run("run1")


def test_get_run_return_existing_run(tracker: MLflowTracker) -> None:
    existing = mlflow.MlflowClient(tracking_uri=tracker.tracking_uri).create_run(tracker.experiment_id,
                                                                                 run_name="run1")
    assert tracker.get_run("run1").info.run_id == existing.info.run_id


def test_in_a_job_the_jobs_run_is_mlflows_active_run_from_the_start(tmp_path: pathlib.Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHX_JOB_ID", "local://torchspec/train-x1")  # as the runner sets it in every role
    tracker = MLflowTracker(experiment_name="in-a-job", tracking_uri=str(tmp_path / "experiments"))
    try:
        mlflow.log_metric("loss", 0.25)  # TorchX's users log through MLflow's own API, nothing else called
    finally:
        tracker.close()
    run = tracker.find_run("local://torchspec/train-x1")
    assert run is not None and run.data.metrics == {"loss": 0.25} and run.info.status == "FINISHED"


def test_a_reader_in_a_job_sets_nothing_up_and_close_leaves_the_jobs_own_run(tmp_path: pathlib.Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHX_JOB_ID", "local://torchspec/train-x1")
    uri = str(tmp_path / "experiments")
    with for_reading():  # what the tracker commands and the dashboard build: they look, never start
        reader = MLflowTracker(experiment_name="reader", tracking_uri=uri)
    assert list(reader.run_ids()) == [] and mlflow.active_run() is None
    mlflow.set_tracking_uri(uri)
    own = mlflow.start_run(experiment_id=reader.experiment_id)  # the job's own run, started by the job
    try:
        tracker = MLflowTracker(experiment_name="reader", tracking_uri=uri)  # another run is active: left alone
        tracker.add_metadata("local://torchspec/train-x1", step=1)
        tracker.close()
        assert mlflow.active_run() is not None and mlflow.active_run().info.run_id == own.info.run_id
    finally:
        mlflow.end_run()


@pytest.mark.parametrize("name", ["a/../b", "/x", "x/", "a//b", "a,b"])
def test_an_artifact_name_mlflow_would_refuse_is_refused_first(tracker: MLflowTracker, name: str) -> None:
    with pytest.raises(ValueError, match="artifact name"):
        tracker.add_artifact("r", name, "/nowhere")


def test_metadata(tracker: MLflowTracker) -> None:
    tracker.add_metadata("test_run_1", foo="bar", bar="baz", baz=1)
    metadata = tracker.metadata("test_run_1")
    assert (metadata["foo"], metadata["bar"], metadata["baz"]) == ("bar", "baz", "1")


def test_artifact(tracker: MLflowTracker, tmp_path: pathlib.Path) -> None:
    (tmp_path / "model.bin").write_text("model_shard")
    (tmp_path / "manifest.json").write_text("{im: 'a_manifest'}")
    tracker.add_artifact(run_id="test_run_1", name="manifest", path=str(tmp_path / "manifest.json"))
    for epoch in range(2):
        for rank in range(4):
            meta = {"epoch": epoch, "rank": rank, "world_size": 4}
            tracker.add_artifact(run_id="test_run_1", name=f"checkpoint_{epoch}/{rank}",
                                 path=str(tmp_path / "model.bin"), metadata=meta)
    artifacts = tracker.artifacts(run_id="test_run_1")
    assert len(artifacts) == 9
    run = tracker.find_run("test_run_1")
    assert run is not None
    # TorchX says f"{artifact_location}/manifest/manifest.json", where no file is: the file is in the run's folder
    assert artifacts["manifest"].path == f"{run.info.artifact_uri}/manifest/manifest.json"
    assert pathlib.Path(artifacts["manifest"].path.removeprefix("file://")).read_text() == "{im: 'a_manifest'}"
    assert artifacts["manifest"].metadata == {"mlflow.file_size": 18}
    for epoch in range(2):
        for rank in range(4):
            name = f"checkpoint_{epoch}/{rank}"
            assert artifacts[name].name == name
            assert artifacts[name].path == f"{run.info.artifact_uri}/{name}/model.bin"
            assert artifacts[name].metadata == {"epoch": f"{epoch}", "rank": f"{rank}", "world_size": "4",
                                                "mlflow.file_size": 11}


def test_sources_and_lineage_work_where_torchx_refuses_them(tracker: MLflowTracker) -> None:
    # TorchX's test_unsupported_apis: its MLflowTracker raises NotImplementedError for these three
    tracker.add_source(run_id="child", source_id="parent")
    assert [s.source_run_id for s in tracker.sources(run_id="child")] == ["parent"]
    assert tracker.lineage(run_id="parent").children == ["child"]


def test_run_ids(tracker: MLflowTracker) -> None:
    assert list(tracker.run_ids()) == []
    for i in range(10):
        tracker.get_run(f"run_{i}")
        tracker.close()
    assert set(tracker.run_ids()) == {f"run_{i}" for i in range(10)}


def test_create_tracker(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TORCHX_TRACKING_EXPERIMENT_NAME", raising=False)
    monkeypatch.delenv("TORCHSPEC_TRACKING_EXPERIMENT_NAME", raising=False)
    (tmp_path / ".torchxconfig").write_text(f"[tracker:mlflow]\nconfig = {tmp_path}\n\n"
                                            f"tracking_uri = {tmp_path / 'experiments'}\n"
                                            f"artifact_location = {tmp_path / 'artifacts'}\nexperiment_name = foobar\n")
    tracker = create_tracker(config=str(tmp_path))
    assert tracker.tracking_uri == str(tmp_path / "experiments")
    assert tracker.artifact_location == str(tmp_path / "artifacts")
    assert tracker.experiment.name == "foobar"


def test_log_params(tracker: MLflowTracker) -> None:
    tracker.log_params_flat("run1", Config())
    assert tracker.get_run("run1").data.params == {
        "epochs": "100", "lr": "0.01", "checkpoint_url": "s3://foo/bar", "use_amp": "False",
        "locales": "['us', 'eu', 'fr']", "empty_list": "[]", "empty_map": "{}",
        "model_config.vocab_size": "256035", "model_config.hidden_size": "1024", "model_config.hidden_act": "gelu",
        "model_config.hidden_dropout_prob": "0.1", "datasets._0.url": "s3://dataset1", "datasets._0.split": "70/30",
        "datasets._1.url": "s3://dataset2", "datasets._1.split": "70/30",
    }
