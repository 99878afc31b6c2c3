"""The mlflow tracker against a real MLflow tracking server (``mlflow server``, its SQLite store and its
artifacts on 127.0.0.1), started here: the API, replicas racing to make one run, a local job read back by the
CLI and the dashboard, and a server that is down."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from typing import Iterator

import pytest

import tracker_support
from skips import import_or_skip, skip_or_fail

import_or_skip("mlflow", "MLFLOW", "pip install 'torchspec-cli[mlflow]'")

from torchspec.tracker import TrackerArtifact, TrackerSource, build_trackers  # noqa: E402
from torchspec.tracker.mlflow import MLflowTracker, create, parse_config  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def mlflow_cli() -> str:
    """The ``mlflow`` command that serves (scripts/test makes a venv with it: TORCHSPEC_MLFLOW_SERVER)."""
    found = os.environ.get("TORCHSPEC_MLFLOW_SERVER") or shutil.which("mlflow")
    if not found:
        skip_or_fail("MLFLOW", "no mlflow command to start a tracking server (pip install mlflow, or set"
                     " TORCHSPEC_MLFLOW_SERVER)")
    return found


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A tracking server on 127.0.0.1 with its SQLite store and its artifacts in a temporary folder."""
    where = tmp_path_factory.mktemp("mlflow")
    port = free_port()
    log = open(where / "server.log", "w")
    proc = subprocess.Popen([mlflow_cli(), "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
                             "--backend-store-uri", f"sqlite:///{where}/mlflow.db",
                             "--artifacts-destination", f"file://{where}/artifacts"],
                            stdout=log, stderr=subprocess.STDOUT, cwd=where, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    try:
        while True:
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, (where / "server.log").read_text()[-3000:]
            time.sleep(0.5)
        yield url
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=60)
        log.close()


def experiment(url: str) -> str:
    return f"{url}#test-{uuid.uuid4().hex[:8]}"


def test_metadata_artifacts_and_sources_round_trip(server: str, tmp_path: pathlib.Path) -> None:
    tracker = create(experiment(server))
    run, parent = "local://torchspec/train-x1", "local://torchspec/prep-y2"
    (tmp_path / "model.pt").write_bytes(b"weights")
    (tmp_path / "ckpt" / "optim").mkdir(parents=True)
    (tmp_path / "ckpt" / "step-10").write_text("10")
    (tmp_path / "ckpt" / "optim" / "state").write_text("momentum")
    tracker.add_metadata(run, lr=0.1, name="resnet")
    tracker.add_metadata(run, epochs=3)
    tracker.add_artifact(run, "model", str(tmp_path / "model.pt"), {"format": "torchscript"})
    tracker.add_artifact(run, "ckpt", str(tmp_path / "ckpt"))
    tracker.add_artifact(run, "data", "s3://bucket/data", None)
    tracker.add_source(run, parent, "dataset")
    tracker.add_source(run, parent, "dataset")  # once is enough

    assert tracker.metadata(run) == {"lr": "0.1", "name": "resnet", "epochs": "3"}  # MLflow keeps text
    found = tracker.artifacts(run)
    assert found["data"] == TrackerArtifact("data", "s3://bucket/data", None)
    assert found["model"].metadata == {"format": "torchscript", "mlflow.file_size": 7}
    mlflow_run = tracker.find_run(run)
    assert mlflow_run is not None
    assert found["model"].path == f"{mlflow_run.info.artifact_uri}/model/model.pt"  # where the file is
    # a folder is one artifact, its subfolders included
    assert found["ckpt"].path == f"{mlflow_run.info.artifact_uri}/ckpt" and found["ckpt"].metadata == {
        "mlflow.file_size": 10}
    assert sorted(found) == ["ckpt", "data", "model"]
    downloaded = tracker.client.download_artifacts(mlflow_run.info.run_id, "model", str(tmp_path / "dl"))
    assert pathlib.Path(downloaded, "model.pt").read_bytes() == b"weights"
    assert list(tracker.sources(run)) == [TrackerSource(parent, "dataset")]
    assert list(tracker.sources(run, "other")) == []
    assert list(tracker.run_ids()) == [run]
    assert list(tracker.run_ids(parent_run_id=parent)) == [run]
    assert tracker.lineage(parent).children == [run]
    # a reader asking of a job that recorded nothing makes nothing
    assert tracker.metadata("local://torchspec/never") == {} and tracker.artifacts("local://torchspec/never") == {}
    assert list(tracker.run_ids()) == [run]


def test_replicas_that_start_at_once_record_to_one_run(server: str) -> None:
    config, run = experiment(server), "kubernetes://default/ddp-z9"

    def replica(rank: int) -> None:
        create(config).add_metadata(run, **{f"rank{rank}": rank})

    threads = [threading.Thread(target=replica, args=(rank,)) for rank in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    reader = create(config)
    assert reader.metadata(run) == {f"rank{rank}": str(rank) for rank in range(4)}
    assert len(reader._named(run)) == 1  # the losers deleted theirs


def test_get_run_makes_it_mlflows_active_run_as_in_torchx(server: str) -> None:
    import mlflow

    tracker = create(experiment(server))
    try:
        run = tracker.get_run("local://s/m-1")
        mlflow.log_metric("loss", 0.5)  # TorchX's users log through MLflow's own API once the run is active
        assert tracker.get_run_id("local://s/m-1") == run.info.run_id
        assert tracker.client.get_run(run.info.run_id).data.metrics == {"loss": 0.5}
        assert tracker.experiment_id == run.info.experiment_id and tracker.experiment.name == tracker.experiment_name
        assert tracker.artifact_location
        with pytest.raises(RuntimeError, match="one job's id only"):
            tracker.get_run("local://s/another-2")
    finally:
        tracker.close()
    assert mlflow.active_run() is None
    assert tracker.client.get_run(run.info.run_id).info.status == "FINISHED"


def test_log_params_flat_as_torchx(server: str) -> None:
    tracker = create(experiment(server))
    tracker.log_params_flat("local://s/p-1", {"i": 1, "l": ["a", "b"], "nested": {"f": 2.5},
                                               "cfgs": [{"foo": "hello"}, {"foo": "world"}]})
    run = tracker.find_run("local://s/p-1")
    assert run is not None and run.data.params == {"i": "1", "l": "['a', 'b']", "nested.f": "2.5",
                                                  "cfgs._0.foo": "hello", "cfgs._1.foo": "world"}


def test_bad_names_and_configs_are_clear_errors(tmp_path: pathlib.Path) -> None:
    with pytest.raises(ValueError, match="needs a tracking URI"):
        create(None)
    with pytest.raises(ValueError, match="artifact name 'a,b'"):
        create("http://127.0.0.1:1#x").add_artifact("r", "a,b", "/nowhere")
    (tmp_path / ".torchxconfig").write_text("[tracker:mlflow]\nconfig=.\ntracking_uri=http://h:5000\n"
                                            "experiment_name=e\nartefact_location=/x\n")
    with pytest.raises(ValueError, match="unknown key.*artefact_location"):
        parse_config(str(tmp_path))


def test_torchx_names_it_by_its_module_path_and_a_torchxconfig_folder(server: str, tmp_path: pathlib.Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / ".torchxconfig").write_text(f"[tracker:mlflow]\nconfig={tmp_path}\ntracking_uri={server}\n"
                                            "experiment_name=from-torchxconfig\n")
    (tracker,) = build_trackers({"torchx.tracker.mlflow:create_tracker": str(tmp_path)})
    assert isinstance(tracker, MLflowTracker) and tracker.experiment_name == "from-torchxconfig"
    monkeypatch.setenv("TORCHX_TRACKING_EXPERIMENT_NAME", "from-env")
    (tracker,) = build_trackers({"mlflow": f"{server}#from-config"})
    assert tracker.experiment_name == "from-env"  # as in TorchX, the variable wins


JOB = """\
import pathlib
from torchspec.tracker import app_run_from_env
pathlib.Path("model.pt").write_bytes(b"weights")
run = app_run_from_env()
run.add_metadata(lr=0.1, epochs=2)
run.add_artifact("model", "model.pt", {"format": "torchscript"})
"""


def test_a_local_job_records_and_the_cli_and_dashboard_read_it_back(server: str, tmp_path: pathlib.Path) -> None:
    cli, handle = tracker_support.run_local_job(tmp_path, f'[tracker.mlflow]\nconfig = "{experiment(server)}"\n', JOB)
    assert cli("tracker", "list", "jobs").stdout.split() == [handle]
    assert cli("tracker", "list", "metadata", handle).stdout.splitlines() == ["epochs = 2", "lr = 0.1"]
    artifacts = json.loads(cli("tracker", "list", "artifacts", "-o", "json", handle).stdout)
    assert list(artifacts) == ["model"]
    assert artifacts["model"]["metadata"] == {"format": "torchscript", "mlflow.file_size": 7}
    assert artifacts["model"]["path"].startswith("mlflow-artifacts:/")

    tracked = tracker_support.tracked_section(handle, tmp_path, tmp_path / "home")
    for text in ("<h3>mlflow</h3>", "<td>lr</td><td>0.1</td>", "<td>epochs</td><td>2</td>", "<td>model</td>",
                 "format=torchscript"):
        assert text in tracked, tracked


def test_a_store_mlflow_refuses_and_credentials_in_errors(tmp_path: pathlib.Path) -> None:
    from torchspec.runner.trackers import backend_error

    (tmp_path / ".torchspec.toml").write_text('[tracker.mlflow]\nconfig = "bogus-scheme://nowhere#x"\n')
    done = tracker_support.cli_in(tmp_path)("tracker", "list", "jobs")
    assert done.returncode == 6 and "tracker mlflow" in done.stderr, done.stderr
    said = backend_error("mlflow", OSError("API request to https://alice:s3cr3t@mlflow.example/api failed")).message
    assert "s3cr3t" not in said and "https://***@mlflow.example/api" in said


def test_a_tracking_server_that_is_down_is_a_clear_error(tmp_path: pathlib.Path) -> None:
    (tmp_path / ".torchspec.toml").write_text(f'[tracker.mlflow]\nconfig = "http://127.0.0.1:{free_port()}#x"\n')
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "xdg"), "NO_COLOR": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env.pop("MLFLOW_HTTP_REQUEST_MAX_RETRIES", None)
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "torchspec", "tracker", "list", "jobs"], capture_output=True,
                          text=True, env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 6, (done.returncode, done.stderr)
    assert "tracker mlflow" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert "[tracker.mlflow] config" in done.stderr, done.stderr
    assert time.monotonic() - started < 120  # MLflow's own retries would take minutes
