"""The ray scheduler and roles that wait for or find each other: the plan (pure) and the driver's ordered start
and hosts variables, against a stand-in for ``ray`` (tests/schedulers/ray/test_ray_driver.py's), no cluster."""

from __future__ import annotations

from typing import Any, Dict, List

import pytest

from torchspec import specs
from torchspec.schedulers.ray import driver as driver_module
from torchspec.schedulers.ray.driver import Driver
from torchspec.schedulers.ray.status import _message
from torchspec.schedulers.ray.translate import app_to_request

from test_ray_driver import Actor, FakeRay, Ref


def test_the_plan_carries_the_order_and_every_roles_hosts_variable() -> None:
    app = specs.AppDef("ordered", [
        specs.Role("download", image="/img", entrypoint="sh", args=["-c", "echo $${${hosts_env:trainer}}"]),
        specs.Role("trainer", image="/img", entrypoint="sh", num_replicas=2,
                   depends_on=[specs.RoleDependency("download")])])
    request = app_to_request(app, "ray:8265", "PACK", {}, {}, "s")
    plans = request.roles
    assert [(p.role, p.depends_on, p.hosts_env) for p in plans] == [
        ("download", [], "TORCHSPEC_HOSTS_DOWNLOAD"), ("trainer", [["download", "finished"]], "TORCHSPEC_HOSTS_TRAINER")]
    env = plans[1].replicas[1].env
    assert env["TORCHSPEC_HOSTS_DOWNLOAD"] == "<node addresses of download's replicas, set by the driver>"
    assert plans[0].replicas[0].args == ["sh", "-c", "echo ${TORCHSPEC_HOSTS_TRAINER}"]
    assert "    depends_on:\n    - [download, finished]\n    hosts_env: TORCHSPEC_HOSTS_TRAINER\n" in str(request)


class Recorder(Driver):
    """A driver whose actors are stand-ins: replica (role, k) gives ``codes[role]`` at once; what started, in order,
    with which environment, and the summary it ends with."""

    def __init__(self, roles: List[Dict[str, Any]], codes: Dict[str, int]) -> None:
        super().__init__(FakeRay(), {"app_id": "a", "roles": roles})
        self.exit_codes = codes
        self.started: List[str] = []
        self.envs: Dict[str, Dict[str, str]] = {}
        self.summary: Dict[str, Any] = {}
        for r, role in enumerate(roles):
            for k in range(len(role["replicas"])):
                self.rank0[(r, k)] = "127.0.0.1"
                self.node_of[(r, k)] = (f"node{r}{k}", f"10.0.{r}.{k}")
        self.set_hosts()

    def _actor(self, key: Any) -> Any:
        role = self.roles[key[0]]["role"]
        self.started.append(f"{role}/{key[1]}")
        actor = Actor(Ref(done=True, value=self.exit_codes.get(role, 0)))
        record = actor.run.remote

        def run(args: Any, env: Dict[str, str], mounts: Any) -> Any:
            self.envs[f"{role}/{key[1]}"] = env
            return record()

        actor.run.remote = run  # type: ignore[method-assign]
        return actor

    def end(self, summary: Dict[str, Any]) -> None:
        self.summary = summary


def role(name: str, n: int = 1, depends_on: Any = None) -> Dict[str, Any]:
    return {"role": name, "strategy": "PACK", "bundles": [{"CPU": 1}] * n, "retry_policy": "APPLICATION",
            "max_retries": 0, "replicas": [{"replica_id": k, "args": ["true"], "env": {}} for k in range(n)],
            "hosts_env": f"TORCHSPEC_HOSTS_{name.upper()}", **({"depends_on": depends_on} if depends_on else {})}


@pytest.fixture(autouse=True)
def short_flush(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(driver_module, "FLUSH_WAIT_S", 0.0)


ROLES = [role("trainer", 2, [["ps", "ready"]]), role("download"), role("ps", 1, [["download", "finished"]])]


def test_roles_start_once_their_dependencies_are_met_and_every_replica_gets_every_roles_hosts() -> None:
    driver = Recorder(ROLES, {})
    assert driver.run() == 0
    assert driver.started == ["download/0", "ps/0", "trainer/0", "trainer/1"]
    hosts = {"TORCHSPEC_HOSTS_TRAINER": "10.0.0.0,10.0.0.1", "TORCHSPEC_HOSTS_DOWNLOAD": "10.0.1.0",
             "TORCHSPEC_HOSTS_PS": "10.0.2.0"}
    for env in driver.envs.values():
        assert {k: v for k, v in env.items() if k.startswith("TORCHSPEC_HOSTS_")} == hosts
    assert driver.summary["state"] == "SUCCEEDED"


def test_a_failed_dependency_never_starts_the_roles_waiting_for_it_and_says_so() -> None:
    driver = Recorder(ROLES, {"download": 3})
    assert driver.run() == 3
    assert driver.started == ["download/0"]
    assert driver.summary["never_started"] == ("role 'trainer' never started (it waits for 'ps' to be ready); role"
                                               " 'ps' never started (it waits for 'download' to be finished)")
    assert _message(specs.AppState.FAILED, False, None, driver.summary) == (
        "download/0 exited with code 3; " + driver.summary["never_started"])
