"""The local scheduler's ordered start (``depends_on``) and the hosts variables, with real processes: a role
waits for the roles it depends on, never starts after one failed, and every replica gets every role's hosts."""

from __future__ import annotations

from torchspec import specs
from torchspec.schedulers.order import met, never_started, startable
from torchspec.schedulers.local.scheduler import LocalScheduler
from torchspec.schedulers.local.translate import app_to_request

from scheduler_helpers import wait_terminal

AppState = specs.AppState


def sh(name: str, script: str, image: str, **kwargs: object) -> specs.Role:
    return specs.Role(name=name, image=image, entrypoint="sh", args=["-c", script], **kwargs)  # type: ignore[arg-type]


def app_of(tmp_path: object, first: str) -> specs.AppDef:
    """``download`` (``first``), a ``ps`` that waits for it to finish, a ``trainer`` that waits for ps to run."""
    image = str(tmp_path)
    return specs.AppDef("ordered", [
        sh("download", first, image),
        sh("ps", "sleep 1; echo ps", image, depends_on=[specs.RoleDependency("download")]),
        sh("trainer", 'cat data; echo "$TORCHSPEC_HOSTS_PS $${${hosts_env:download}}"', image, num_replicas=2,
           depends_on=[specs.RoleDependency("ps", "ready")]),
    ])


def test_the_request_carries_the_order_and_every_replica_every_roles_hosts(tmp_path) -> None:
    request = app_to_request(app_of(tmp_path, "true"), {}, "ordered-1", str(tmp_path / "app"), "s", str(tmp_path))
    assert [r.depends_on for r in request.roles] == [[], [["download", "finished"]], [["ps", "ready"]]]
    for role in request.roles:
        for replica in role.replicas:
            assert {k: v for k, v in replica.env.items() if k.startswith("TORCHSPEC_HOSTS_")} == {
                "TORCHSPEC_HOSTS_DOWNLOAD": "localhost", "TORCHSPEC_HOSTS_PS": "localhost",
                "TORCHSPEC_HOSTS_TRAINER": "localhost,localhost"}
    assert request.roles[2].replicas[1].args[-1] == 'cat data; echo "$TORCHSPEC_HOSTS_PS ${TORCHSPEC_HOSTS_DOWNLOAD}"'
    assert "    starts after: ps is ready" in str(request).splitlines()


def test_when_a_dependency_is_met() -> None:
    assert met("finished", ["SUCCEEDED", "SUCCEEDED"]) and not met("finished", ["SUCCEEDED", "RUNNING"])
    assert met("ready", ["RUNNING", "SUCCEEDED"]) and not met("ready", ["RUNNING", "PENDING"])
    assert not met("ready", ["FAILED"]) and not met("finished", [])
    deps = {"ps": [["download", "finished"]], "trainer": [["ps", "ready"], ["download", "finished"]]}
    assert startable(["ps", "trainer"], deps, {"download": ["SUCCEEDED"], "ps": ["PENDING"]}) == ["ps"]
    assert never_started(["trainer"], deps) == ("; role 'trainer' never started (it waits for 'ps' to be ready,"
                                                " 'download' to be finished)")


def test_roles_start_in_order_and_find_each_other(sched: LocalScheduler, tmp_path) -> None:
    app_id = sched.submit(app_of(tmp_path, "sleep 1; echo ok > data"), {})
    desc = wait_terminal(sched, app_id)
    assert desc.state == AppState.SUCCEEDED, desc.msg
    for k in range(2):  # the data was there: trainer started after download finished
        assert [line.rstrip("\n") for line in sched.log_iter(app_id, "trainer", k)] == [
            "ok", "localhost localhost"]
    assert [line.rstrip("\n") for line in sched.log_iter(app_id, "ps", 0)] == ["ps"]


def test_a_failed_dependency_never_starts_the_role_and_says_why(sched: LocalScheduler, tmp_path) -> None:
    app_id = sched.submit(app_of(tmp_path, "exit 3"), {})
    desc = wait_terminal(sched, app_id)
    assert desc.state == AppState.FAILED
    assert desc.msg.endswith("role 'ps' never started (it waits for 'download' to be finished); role 'trainer'"
                             " never started (it waits for 'ps' to be ready)"), desc.msg
    states = {r.role: [x.state for x in r.replicas] for r in desc.roles_statuses}
    assert states == {"download": [AppState.FAILED], "ps": [AppState.CANCELLED],
                      "trainer": [AppState.CANCELLED, AppState.CANCELLED]}
    assert not (tmp_path / "data").exists()
