"""An elastic role (``min_replicas`` < ``num_replicas``) runs where the engine can run it on fewer replicas (the
pytorchjob flavor's elasticPolicy) and is refused, at its ``min_replicas``, everywhere that would silently start
every replica and wait for all of them (the job, jobset, volcano and trainjob flavors, Slurm)."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

from torchspec import specs
from torchspec.errors import AppRefusedError
from torchspec.schedulers.kubernetes.scheduler import KubernetesScheduler
from torchspec.schedulers.ray.scheduler import RayScheduler
from torchspec.schedulers.slurm.scheduler import SlurmScheduler


def app(min_replicas: int | None, image: str = "ghcr.io/acme/train:1") -> specs.AppDef:
    return specs.AppDef("elastic", [specs.Role(
        name="trainer", image=image, entrypoint="torchrun",
        args=["--nnodes", f"{min_replicas}:2" if min_replicas == 1 else "2", "--nproc_per_node", "1", "train.py"],
        num_replicas=2, min_replicas=min_replicas)])


@pytest.mark.parametrize("flavor", ["job", "jobset", "volcano", "trainjob"])
def test_flavors_that_start_every_replica_refuse_an_elastic_role_at_its_min_replicas(flavor: str) -> None:
    with pytest.raises(AppRefusedError) as e:
        KubernetesScheduler("test").submit_dryrun(app(1), {"flavor": flavor})
    assert ("roles", 0, "min_replicas") in [path for path, _ in e.value.problems]
    assert "min_replicas=1" in e.value.message and "pytorchjob" in f"{e.value.message} {e.value.hint}"


@pytest.mark.parametrize("flavor", ["job", "jobset", "volcano", "pytorchjob"])
def test_min_replicas_equal_to_num_replicas_is_no_elastic_role(flavor: str) -> None:
    KubernetesScheduler("test").submit_dryrun(app(2), {"flavor": flavor})


def test_the_pytorchjob_flavor_runs_it_elastic() -> None:
    request = KubernetesScheduler("test").submit_dryrun(app(1), {"flavor": "pytorchjob"}).request
    (job,) = [o for o in request.objects if o["kind"] == "PyTorchJob"]
    policy = job["spec"]["elasticPolicy"]
    assert (policy["minReplicas"], policy["maxReplicas"]) == (1, 2)


@pytest.mark.parametrize("scheduler", [SlurmScheduler, RayScheduler])
def test_slurm_and_ray_refuse_an_elastic_role(scheduler: type, tmp_path: pathlib.Path) -> None:
    # a folder for the image: on a Slurm cluster without pyxis a container image would be refused first
    with pytest.raises(AppRefusedError) as e:
        scheduler("test").submit_dryrun(app(1, str(tmp_path)), {})
    assert [path for path, _ in e.value.problems] == [("roles", 0, "min_replicas")]
    assert "starts every replica" in e.value.message and "pytorchjob" in (e.value.hint or "")
    scheduler("test").submit_dryrun(app(2, str(tmp_path)), {})


def test_lint_names_the_line_of_min_replicas(tmp_path: pathlib.Path) -> None:
    spec = tmp_path / "elastic.yaml"
    spec.write_text("name: elastic\nroles:\n  - name: trainer\n    image: ghcr.io/acme/train:1\n"
                    "    entrypoint: torchrun\n    num_replicas: 2\n    min_replicas: 1\n")
    r = subprocess.run([sys.executable, "-m", "torchspec", "lint", "--scheduler", "kubernetes", "-o", "json",
                        str(spec)], capture_output=True, text=True, timeout=120)
    found = [(d["line"], d["column"], d["code"], d["path"]) for d in json.loads(r.stdout)["diagnostics"]]
    assert r.returncode == 1 and found == [(7, 5, "TS601", "roles[0].min_replicas")], r.stdout


def test_dist_ddp_elastic_with_max_restarts_on_the_pytorchjob_flavor() -> None:
    """TorchX's ``dist.ddp -j 1:2x1 --max_restarts 3``: the operator's elasticPolicy from 1 to 2 nodes, restarting
    the workers 3 times."""
    from torchspec.runner import get_runner

    with get_runner() as runner:
        app = runner.load_component("dist.ddp", {"j": "1:2x1", "script": "train.py", "max_restarts": "3",
                                                 "image": "ghcr.io/acme/train:1"})
    request = KubernetesScheduler("test").submit_dryrun(app, {"flavor": "pytorchjob"}).request
    (job,) = [o for o in request.objects if o["kind"] == "PyTorchJob"]
    policy = job["spec"]["elasticPolicy"]
    assert (policy["minReplicas"], policy["maxReplicas"], policy["maxRestarts"]) == (1, 2, 3)
