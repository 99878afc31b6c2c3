"""The docker scheduler's ordered start (``depends_on``) and hosts variables: the request (pure), the watcher's
decisions on views of the engine (a stand-in client), and one app on the real engine."""

from __future__ import annotations

import json
import sys
from typing import Any, Dict, List

import pytest

from torchspec import specs
from torchspec.schedulers.docker.labels import LABEL_ROLE
from torchspec.schedulers.docker.options import docker_run_opts
from torchspec.schedulers.docker.translate import app_to_job
from torchspec.schedulers.docker.views import AppView, view_of
from torchspec.schedulers.docker.watcher import Watch

from test_docker_cli import OK, Env, app_id, containers, env, replicas  # noqa: F401 - env: the fixture


def role(name: str, n: int = 1, *deps: specs.RoleDependency) -> specs.Role:
    return specs.Role(name=name, image="busybox:latest", entrypoint="sh", args=["-c", "echo $${${hosts_env:ps}}"],
                      num_replicas=n, depends_on=list(deps))


APP = specs.AppDef("ordered", [role("download"), role("ps", 2, specs.RoleDependency("download")),
                               role("trainer", 1, specs.RoleDependency("ps", "ready"))])


def test_every_container_gets_every_roles_hosts_and_waiting_roles_say_so() -> None:
    job = app_to_job(APP, docker_run_opts().resolve({}), "app-abc123", "sess", "/work", {})
    for c in job.containers:
        assert {k: v for k, v in c.env.items() if k.startswith("TORCHSPEC_HOSTS_")} == {
            "TORCHSPEC_HOSTS_DOWNLOAD": "app-abc123-download-0",
            "TORCHSPEC_HOSTS_PS": "app-abc123-ps-0,app-abc123-ps-1",
            "TORCHSPEC_HOSTS_TRAINER": "app-abc123-trainer-0"}
        assert c.command == ["-c", "echo ${TORCHSPEC_HOSTS_PS}"]
    assert [(c.name, c.depends_on) for c in job.containers] == [
        ("app-abc123-download-0", []), ("app-abc123-ps-0", [["download", "finished"]]),
        ("app-abc123-ps-1", [["download", "finished"]]), ("app-abc123-trainer-0", [["ps", "ready"]])]
    assert "    starts after: ps is ready (created now, started by the watcher)" in str(job).splitlines()
    assert json.loads(job.containers[3].labels[LABEL_ROLE])["depends_on"] == [{"role": "ps", "when": "ready"}]
    on_host = app_to_job(APP, docker_run_opts().resolve({"network": "host"}), "app-abc123", "sess", "/work", {})
    assert on_host.containers[0].env["TORCHSPEC_HOSTS_PS"] == "localhost,localhost"


def attrs(role_name: str, k: int, status: str, exit_code: int = 0, deps: List[Dict[str, str]] = ()) -> dict:  # type: ignore[assignment]
    name = f"app-{role_name}-{k}"
    return {"Id": name, "Name": "/" + name, "RestartCount": 0, "Created": f"2026-01-01T00:00:0{len(role_name)}Z",
            "State": {"Status": status, "ExitCode": exit_code, "OOMKilled": False, "Error": "",
                      "FinishedAt": "2026-01-01T00:00:09Z"},
            "Config": {"Hostname": name, "Labels": {
                "torchspec.role-name": role_name, "torchspec.replica-id": str(k), "torchspec.attempt": "0",
                LABEL_ROLE: json.dumps({"retry_policy": "APPLICATION", "max_retries": 0, "depends_on": list(deps)})}}}


class Api:
    """What the watcher asks of the engine's API here: the containers it starts."""

    def __init__(self) -> None:
        self.started: List[str] = []

    def start(self, container_id: str) -> None:
        self.started.append(container_id)


class Client:
    def __init__(self) -> None:
        self.api = Api()


FINISHED = [{"role": "download", "when": "finished"}]
READY = [{"role": "ps", "when": "ready"}]


@pytest.mark.parametrize(("download", "ps", "started"), [
    ("running", "created", []),  # download not finished: nothing starts
    ("exited", "created", ["app-ps-0"]),  # finished: ps starts, trainer waits for ps to run
    ("exited", "running", ["app-trainer-0"]),  # ps runs: trainer starts
])
def test_the_watcher_starts_a_waiting_role_once_its_dependencies_are_met(download: str, ps: str,
                                                                          started: List[str]) -> None:
    view = AppView("app", [view_of(attrs("download", 0, download)), view_of(attrs("ps", 0, ps, deps=FINISHED)),
                           view_of(attrs("trainer", 0, "created", deps=READY))])
    client = Client()
    Watch(client, "app").start_waiting(view.current)  # type: ignore[arg-type]
    assert client.api.started == started


def test_a_failed_dependency_fails_the_app_and_says_who_never_started() -> None:
    view = AppView("app", [view_of(attrs("download", 0, "exited", 3)), view_of(attrs("ps", 0, "created", deps=FINISHED)),
                           view_of(attrs("trainer", 0, "created", deps=READY))])
    client = Client()
    Watch(client, "app").start_waiting(view.current)  # type: ignore[arg-type]
    assert client.api.started == []
    assert view.state == specs.AppState.FAILED
    assert view.msg == ("download/0 exited with code 3; role 'ps' never started (it waits for 'download' to be"
                        " finished); role 'trainer' never started (it waits for 'ps' to be ready)")


@pytest.mark.skipif(sys.platform == "win32", reason="needs a Linux Docker engine")
def test_roles_start_in_order_on_the_engine_and_find_each_other(env: Env, docker_cleanup: Any) -> None:  # noqa: F811
    spec = env.spec("ordered", [
        env.role("download", "sleep 1; echo fetched"),
        env.role("ps", "trap 'exit 0' TERM; echo up; sleep 3 & wait", depends_on=["download"]),
        env.role("trainer", 'nslookup "${TORCHSPEC_HOSTS_PS%%,*}" >/dev/null && echo "found $TORCHSPEC_HOSTS_PS"',
                 depends_on=[{"role": "ps", "when": "ready"}]),
    ])
    handle = env.submit(spec)
    assert env.wait(handle, timeout=60) == OK
    app = app_id(handle)
    logs = env.logs(handle)
    assert f"trainer/0  found {app}-ps-0\n" in logs and "download/0 fetched\n" in logs, logs
    status = env.status(handle)
    assert {name: r["state"] for name, r in replicas(status).items()} == {
        "download/0": "SUCCEEDED", "ps/0": "SUCCEEDED", "trainer/0": "SUCCEEDED"}
    state = {name: c["State"] for name, c in containers(docker_cleanup, app).items()}
    # ps started once download had ended; trainer once ps was up
    assert state[f"{app}-ps-0"]["StartedAt"] >= state[f"{app}-download-0"]["FinishedAt"], state
    assert state[f"{app}-trainer-0"]["StartedAt"] >= state[f"{app}-ps-0"]["StartedAt"], state
