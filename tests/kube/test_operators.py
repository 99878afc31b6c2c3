"""The controllers operators.py plays write what the published CRDs allow: the stand-in stays faithful."""

from __future__ import annotations

import pathlib

import jsonschema
import yaml

from apiserver import FakeApiServer
from operators import PYTORCHJOB_API, RUNTIME_API, TORCH_DISTRIBUTED, TRAINJOB_API, Kueue, TrainingOperator, Trainer

from torchspec import specs
from torchspec.schedulers.kubernetes.translate import app_to_request
from torchspec.schedulers.kubernetes.validate import BUNDLED_CRDS, crd_schema

HERE = pathlib.Path(__file__).resolve().parent
NS = "default"


def crd_errors(obj: dict, crd_file: str) -> list[str]:
    crd = yaml.safe_load(pathlib.Path(crd_file).read_text())
    return [f"{'.'.join(map(str, e.path))}: {e.message}"
            for e in jsonschema.Draft7Validator(crd_schema(crd)).iter_errors(obj)]


def bundled(name: str) -> str:
    return next(p for p in BUNDLED_CRDS if p.endswith(name))


def submit(srv: FakeApiServer, flavor: str, **cfg: str) -> str:
    role = specs.Role("train", "img", entrypoint="torchrun", args=["--nnodes", "2", "t.py"], num_replicas=2)
    request = app_to_request(specs.AppDef("a", [role]), {"flavor": flavor, **cfg}, "a-x1", "s")
    obj, = request.objects
    srv.create(*(PYTORCHJOB_API if flavor == "pytorchjob" else TRAINJOB_API), NS, obj)
    return "a-x1"


def test_the_runtime_is_valid_against_its_crd() -> None:
    assert crd_errors(TORCH_DISTRIBUTED, str(HERE / "crds" / "trainer.kubeflow.org_clustertrainingruntimes.yaml")) == []


def test_the_training_operator_writes_what_the_pytorchjob_crd_allows(apiserver: FakeApiServer) -> None:
    name = submit(apiserver, "pytorchjob", queue="q")
    operator = TrainingOperator(apiserver)
    Kueue(apiserver).queue(PYTORCHJOB_API, name)
    for step in (operator.reconcile, lambda n: Kueue(apiserver).admit(PYTORCHJOB_API, n), operator.resume,
                 operator.running, lambda n: operator.restart(n, 1, 1), lambda n: operator.fail(n, 1, 1)):
        step(name)
        assert crd_errors(apiserver.get(*PYTORCHJOB_API, NS, name), bundled("kubeflow.org_pytorchjobs.yaml")) == []
    assert [p["metadata"]["name"] for p in apiserver.pods(NS)] == [f"{name}-master-0", f"{name}-worker-0"]


def test_trainer_writes_what_the_trainjob_crd_allows(apiserver: FakeApiServer) -> None:
    apiserver.create(*RUNTIME_API, None, TORCH_DISTRIBUTED)
    name = submit(apiserver, "trainjob")
    trainer = Trainer(apiserver)
    for step in (trainer.reconcile, trainer.running, trainer.complete):
        step(name)
        assert crd_errors(apiserver.get(*TRAINJOB_API, NS, name), bundled("trainer.kubeflow.org_trainjobs.yaml")) == []
    assert len(apiserver.pods(NS, f"torchspec.dev/app-id={name}")) == 2  # the runtime patch's labels reached them
