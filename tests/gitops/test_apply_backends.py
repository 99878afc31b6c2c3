"""``torchspec apply`` on the real Docker engine, the real Slurm cluster and the Kubernetes API stand-in.

The same scenario as on local (apply_support.lifecycle): apply twice submits
once, a plan after a change says replace for that file only and prune for the
deleted one, --prune cancels only that one, --replace replaces the changed one.
Each test has its own --scope, so tests sharing an engine or cluster never see
each other's apps; what a test leaves running is cancelled (or deleted) after it.
"""

from __future__ import annotations

import pathlib
import sys
from typing import Any, Iterator

import pytest
from apply_support import Workspace, at_once, lifecycle

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs Linux")


# ---------------------------------------------------------------- docker


@pytest.fixture
def docker_ws(tmp_path: pathlib.Path, docker_client: Any, busybox_image: str) -> Iterator[Workspace]:
    ws = Workspace(tmp_path, "docker")
    ws.image = busybox_image  # type: ignore[attr-defined]
    yield ws
    for app in ws.listed():
        ws.run("delete", app["app_handle"])


def docker_role(image: str) -> Any:
    def role(name: str, seconds: int) -> dict:
        return {"name": name, "image": image, "entrypoint": "sh",
                "args": ["-c", f"trap 'exit 0' TERM; sleep {seconds} & wait"]}
    return role


def test_lifecycle_on_docker(docker_ws: Workspace) -> None:
    lifecycle(docker_ws, docker_role(docker_ws.image))  # type: ignore[attr-defined]


def test_two_applies_at_once_on_docker(docker_ws: Workspace) -> None:
    at_once(docker_ws, docker_role(docker_ws.image), runs=2, jobs=4)  # type: ignore[attr-defined]


def test_docker_keeps_the_labels_on_the_containers(docker_ws: Workspace, docker_client: Any) -> None:
    docker_ws.write("jobs/a.json", "a", [docker_role(docker_ws.image)("main", 60)])  # type: ignore[attr-defined]
    handle = docker_ws.apply()["by_id"]["jobs/a.json"]["handle"]
    containers = docker_client.api.containers(all=True, filters={"label": f"torchspec.app-id={handle.rsplit('/')[-1]}"})
    assert '"torchspec.dev/apply-id":"jobs/a.json"' in containers[0]["Labels"]["torchspec.metadata"]
    described = docker_ws.run("describe", handle, "--json")
    assert '"torchspec.dev/apply-scope": "' + docker_ws.scope in described.stdout


# ---------------------------------------------------------------- slurm


@pytest.fixture
def slurm_ws(tmp_path: pathlib.Path, slurm_jobs: list) -> Iterator[Workspace]:
    ws = Workspace(tmp_path, "slurm", cfg="one_node_per_replica=false")
    yield ws
    ws.cancel_all()
    slurm_jobs.extend(app["app_id"] for app in ws.listed())


def slurm_role(name: str, seconds: int) -> dict:
    return {"name": name, "image": ".", "entrypoint": "sleep", "args": [str(seconds)],
            "resource": {"cpu": 1, "gpu": 0, "memMB": 64}}


def test_lifecycle_on_slurm(slurm_ws: Workspace) -> None:
    lifecycle(slurm_ws, slurm_role)


def test_slurm_keeps_the_labels_in_the_comment(slurm_ws: Workspace) -> None:
    import subprocess

    slurm_ws.write("jobs/a.json", "a", [slurm_role("main", 60)])
    handle = slurm_ws.apply()["by_id"]["jobs/a.json"]["handle"]
    job = handle.rsplit("/", 1)[1]
    comment = subprocess.run(["squeue", "-h", "-j", job, "-o", "%k"], capture_output=True, text=True).stdout
    assert comment.startswith("torchspec:") and " labels:" in comment
    assert slurm_ws.scope in slurm_ws.run("describe", handle, "--json").stdout


# ---------------------------------------------------------------- kubernetes (the API stand-in)


@pytest.fixture
def kube_ws(tmp_path: pathlib.Path) -> Iterator[Workspace]:
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "kube"))
    from apiserver import FakeApiServer

    with FakeApiServer() as server:
        server.add_namespace("ml")
        kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")
        yield Workspace(tmp_path, "kubernetes", cfg="namespace=ml", extra_env={"KUBECONFIG": kubeconfig})


def kube_role(name: str, seconds: int) -> dict:
    return {"name": name, "image": "busybox:1.36", "entrypoint": "sh", "args": ["-c", f"sleep {seconds}"]}


def test_lifecycle_on_kubernetes(kube_ws: Workspace) -> None:
    """In the namespace the run options name, not the kubeconfig's (list_where)."""
    lifecycle(kube_ws, kube_role)
    assert {a["app_id"].split(":")[0] for a in kube_ws.listed()} == {"ml"}
    elsewhere = kube_ws.run("list", "-s", "kubernetes", "--json")  # the kubeconfig's namespace
    assert elsewhere.returncode == 0 and elsewhere.stdout.strip() == "[]"


def test_a_job_slurm_forgot_still_counts_by_its_log_folder(slurm_ws: Workspace) -> None:
    """After MinJobAge Slurm forgets a finished job; its log folder still says it ran, with which labels."""
    import json

    slurm_ws.write("jobs/done.json", "done", [slurm_role("main", 1)])
    planned = slurm_ws.apply("--plan", expect=1)["by_id"]["jobs/done.json"]
    assert planned["action"] == "create"
    job_dir = pathlib.Path(slurm_ws.env["TORCHSPEC_HOME"]) / "slurm" / "987654321"  # no such job in Slurm
    (job_dir / "main" / "0").mkdir(parents=True)
    (job_dir / "main" / "0" / "exitcode").write_text("0\n")
    labels = {"torchspec.dev/apply-scope": slurm_ws.scope, "torchspec.dev/apply-id": "jobs/done.json",
              "torchspec.dev/apply-file": "jobs/done.json", "torchspec.dev/content-hash": planned["hash"]}
    spec = {"name": "done", "roles": [slurm_role("main", 1)], "metadata": labels}
    (job_dir / "spec.json").write_text(json.dumps(spec))
    assert [(a["app_id"], a["state"]) for a in slurm_ws.listed()] == [("987654321", "SUCCEEDED")]
    again = slurm_ws.apply()["by_id"]["jobs/done.json"]
    assert (again["action"], again["handle"]) == ("unchanged", "slurm://torchspec/987654321")
