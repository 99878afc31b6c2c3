"""``events`` on the kubernetes scheduler: the namespace's Events of the app's objects and pods, matched by uid and
by the names controllers give what they make from them; through the real client against the API stand-in."""

from __future__ import annotations

import json
from typing import Any, Dict

from test_kubernetes_lifecycle import NS, apiserver, job_pods, kubeconfig, make_app, name_of, sched  # noqa: F401
from torchspec.schedulers.kubernetes.events import is_of_app


def event(srv: Any, name: str, kind: str, object_name: str, reason: str, message: str, when: str,
          kind_of_event: str = "Normal", uid: str = "", **more: Any) -> None:
    srv.create("v1", "events", NS, {
        "metadata": {"name": name}, "involvedObject": {"kind": kind, "name": object_name, "namespace": NS, "uid": uid},
        "reason": reason, "message": message, "type": kind_of_event, **({"lastTimestamp": when} if when else {}),
        **more})


def test_names_controllers_give_what_they_make_for_an_app() -> None:
    app = "train-k3x9q2"
    for name in (app, f"{app}-trainer", f"{app}-trainer-0-x7b2z", f"job-{app}-trainer-4f2c1",
                 f"jobset-{app}-0a1b2"):
        assert is_of_app(app, name), name
    for name in ("train-k3x9q", "train-k3x9q2x-trainer", "other-app", f"{app}x"):
        assert not is_of_app(app, name), name


def test_an_apps_events_are_its_objects_and_pods_newest_last(sched: Any, apiserver: Any) -> None:
    app_id = sched.submit(make_app(), {})
    name = name_of(app_id)
    pods = job_pods(apiserver, app_id, "trainer")
    pod = apiserver.get("v1", "pods", NS, pods[1])
    event(apiserver, "e1", "Pod", pods[1], "FailedScheduling", "0/1 nodes are available: 1 Insufficient cpu.",
          "2026-01-02T03:04:10Z", "Warning", uid=pod["metadata"]["uid"], count=3)
    event(apiserver, "e2", "Job", f"{name}-trainer", "SuccessfulCreate", f"Created pod: {pods[1]}",
          "2026-01-02T03:04:05Z")
    event(apiserver, "e3", "Workload", f"job-{name}-trainer-4f2c1", "Pending", "couldn't assign flavors",
          "2026-01-02T03:04:06Z")
    event(apiserver, "e4", "Pod", "someone-else-0-abcde", "Scheduled", "not ours", "2026-01-02T03:04:07Z")
    event(apiserver, "e5", "Pod", pods[0], "Scheduled", "Successfully assigned", "", uid="",
          eventTime="2026-01-02T03:04:08.000000Z")
    found = sched.events(app_id)
    said = [(e.reason, e.role, e.replica, e.warning, e.source) for e in found]
    assert said == [("SuccessfulCreate", None, None, False, f"Job {name}-trainer"),
                    ("Pending", None, None, False, f"Workload job-{name}-trainer-4f2c1"),
                    ("Scheduled", "trainer", 0, False, f"Pod {pods[0]}"),
                    ("FailedScheduling", "trainer", 1, True, f"Pod {pods[1]}")]
    assert found[-1].message == "0/1 nodes are available: 1 Insufficient cpu. (x3)"
    assert sched.events(f"{NS}:nothing-abc123") == []
