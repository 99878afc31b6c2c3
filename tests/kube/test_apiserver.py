"""The fake API server, driven only through the real ``kubernetes`` client and a written kubeconfig.

These tests pin down what the kubernetes scheduler's tests will rely on: that the real client, unpatched,
gets from this server the objects, errors and streams a cluster would give it.
"""

from __future__ import annotations

import json
import threading
import time
from datetime import datetime, timedelta, timezone
from typing import Any, Callable

import kubernetes
import pytest
import urllib3

from apiserver import FakeApiServer, rfc3339_nano

client = kubernetes.client
ApiException = kubernetes.client.ApiException
# Resolved at import: the client loads its API modules lazily (CoreV1Api alone takes 1-2 s on a 2-core
# machine), which would otherwise land in whichever test touches them first.
CoreV1Api, BatchV1Api, CustomObjectsApi = client.CoreV1Api, client.BatchV1Api, client.CustomObjectsApi

NS = "default"
#: Generous for a loaded 2-core machine; waits end as soon as their condition holds.
WAIT_S = 10.0


# ---------------------------------------------------------------------------------------------------
# helpers


def job_body(name: str, labels: dict[str, str] | None = None, restart_policy: str = "Never") -> Any:
    return client.V1Job(
        api_version="batch/v1", kind="Job",
        metadata=client.V1ObjectMeta(name=name, labels=labels),
        spec=client.V1JobSpec(
            backoff_limit=0,
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels={"app": name}),
                spec=client.V1PodSpec(restart_policy=restart_policy,
                                      containers=[client.V1Container(name="trainer", image="pytorch:2.4")]))))


def jobset_body(name: str) -> dict[str, Any]:
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": name, "labels": {"torchspec/app": name}},
            "spec": {"replicatedJobs": [{"name": "worker", "replicas": 2, "template": {"spec": {
                "parallelism": 1, "completions": 1, "backoffLimit": 0,
                "template": {"spec": {"restartPolicy": "Never",
                                      "containers": [{"name": "trainer", "image": "pytorch:2.4"}]}}}}}]}}


def volcano_body(name: str) -> dict[str, Any]:
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": name},
            "spec": {"schedulerName": "volcano", "minAvailable": 2,
                     "tasks": [{"name": "worker", "replicas": 2, "template": {"spec": {
                         "restartPolicy": "Never", "containers": [{"name": "trainer", "image": "pytorch:2.4"}]}}}]}}


def status_of(error: ApiException) -> dict[str, Any]:
    return json.loads(error.body)


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


@pytest.fixture
def batch(api_client: Any) -> Any:
    return BatchV1Api(api_client)


@pytest.fixture
def core(api_client: Any) -> Any:
    return CoreV1Api(api_client)


@pytest.fixture
def custom(api_client: Any) -> Any:
    return CustomObjectsApi(api_client)


@pytest.fixture
def running_pod(apiserver: FakeApiServer, batch: Any) -> str:
    """A Job with one pod, reported Running."""
    batch.create_namespaced_job(NS, job_body("train"))
    apiserver.create_pod_for(apiserver.get("batch/v1", "jobs", NS, "train"), "train-0")
    apiserver.set_pod_phase(NS, "train-0", "Running")
    return "train-0"


# ---------------------------------------------------------------------------------------------------
# connection, auth, discovery


def test_kubeconfig_reaches_the_server(apiserver: FakeApiServer, api_client: Any) -> None:
    assert client.VersionApi(api_client).get_code().git_version == "v1.31.0-fake"
    assert api_client.configuration.host == apiserver.url
    assert apiserver.requests[-1] == ("GET", "/version", {})


def test_requests_without_the_token_get_401(apiserver: FakeApiServer) -> None:
    for token in (None, "wrong"):
        configuration = client.Configuration(host=apiserver.url)
        if token:
            configuration.api_key = {"BearerToken": token}
            configuration.api_key_prefix = {"BearerToken": "Bearer"}
        with client.ApiClient(configuration) as anonymous:
            with pytest.raises(ApiException) as caught:
                CoreV1Api(anonymous).list_namespaced_pod(NS)
        assert caught.value.status == 401
        assert status_of(caught.value) == {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                           "status": "Failure", "message": "Unauthorized",
                                           "reason": "Unauthorized", "code": 401}


def test_discovery_lists_the_served_groups(api_client: Any) -> None:
    groups = client.ApisApi(api_client).get_api_versions()
    assert {g.name for g in groups.groups} == {"batch", "jobset.x-k8s.io", "batch.volcano.sh",
                                               "scheduling.volcano.sh", "kubeflow.org", "trainer.kubeflow.org",
                                               "kueue.x-k8s.io", "coordination.k8s.io"}
    resources = BatchV1Api(api_client).get_api_resources()
    assert {r.name for r in resources.resources} == {"jobs", "jobs/status"}


def test_an_uninstalled_group_answers_a_bare_404_as_a_cluster_without_its_crd(apiserver: FakeApiServer,
                                                                              api_client: Any) -> None:
    apiserver.uninstall("batch.volcano.sh")
    assert "batch.volcano.sh" not in {g.name for g in client.ApisApi(api_client).get_api_versions().groups}
    with pytest.raises(ApiException) as caught:
        client.CustomObjectsApi(api_client).create_namespaced_custom_object(
            "batch.volcano.sh", "v1alpha1", NS, "jobs", {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                                                         "metadata": {"name": "x"}}, dry_run="All")
    assert (caught.value.status, caught.value.body) == (404, "404 page not found\n")


# ---------------------------------------------------------------------------------------------------
# batch/v1 Jobs


def test_job_create_get_list_delete(apiserver: FakeApiServer, batch: Any) -> None:
    created = batch.create_namespaced_job(NS, job_body("train", {"torchspec/app": "train"}))
    meta = created.metadata
    assert meta.uid and meta.resource_version and meta.generation == 1 and meta.namespace == NS
    assert meta.creation_timestamp.tzinfo is not None
    # the defaults the real API fills in, which a scheduler reads back
    assert created.spec.backoff_limit == 0 and created.spec.completions == 1 and created.spec.parallelism == 1
    assert created.spec.selector.match_labels == {"batch.kubernetes.io/controller-uid": meta.uid}
    assert created.spec.template.metadata.labels["job-name"] == "train"

    read = batch.read_namespaced_job("train", NS)
    assert read.metadata.uid == meta.uid and read.kind == "Job" and read.api_version == "batch/v1"
    listed = batch.list_namespaced_job(NS)
    assert listed.kind == "JobList" and [j.metadata.name for j in listed.items] == ["train"]
    assert int(listed.metadata.resource_version) >= int(meta.resource_version)

    deleted = batch.delete_namespaced_job("train", NS, propagation_policy="Background")  # typed `object`: a dict
    assert deleted["kind"] == "Status" and deleted["status"] == "Success"
    assert deleted["details"] == {"name": "train", "group": "batch", "kind": "jobs", "uid": meta.uid}
    assert batch.list_namespaced_job(NS).items == []


@pytest.mark.parametrize("selector, expected", [
    ("team=ml", ["a", "b"]),
    ("team==ml", ["a", "b"]),
    ("team!=ml", ["c", "d"]),
    ("tier", ["a", "c"]),
    ("!tier", ["b", "d"]),
    ("tier in (gold,silver)", ["a", "c"]),
    ("tier notin (gold)", ["b", "c", "d"]),
    ("team=ml,tier", ["a"]),
    ("team in (ml, infra),!tier", ["b", "d"]),
])
def test_label_selectors(batch: Any, selector: str, expected: list[str]) -> None:
    labels = {"a": {"team": "ml", "tier": "gold"}, "b": {"team": "ml"}, "c": {"team": "infra", "tier": "silver"},
              "d": {"team": "infra"}}
    for name, job_labels in labels.items():
        batch.create_namespaced_job(NS, job_body(name, job_labels))
    found = batch.list_namespaced_job(NS, label_selector=selector)
    assert [j.metadata.name for j in found.items] == expected


@pytest.mark.parametrize("selector", ["a in b", "=x", "a!", "k>x"])
def test_malformed_label_selectors_are_a_400(batch: Any, selector: str) -> None:
    with pytest.raises(ApiException) as caught:
        batch.list_namespaced_job(NS, label_selector=selector)
    assert caught.value.status == 400 and status_of(caught.value)["reason"] == "BadRequest"


def test_field_selector_and_all_namespaces(apiserver: FakeApiServer, batch: Any, core: Any) -> None:
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="team-b")))
    batch.create_namespaced_job(NS, job_body("x"))
    batch.create_namespaced_job("team-b", job_body("x"))
    batch.create_namespaced_job("team-b", job_body("y"))
    only_y = batch.list_namespaced_job("team-b", field_selector="metadata.name=y")
    assert [j.metadata.name for j in only_y.items] == ["y"]
    everywhere = batch.list_job_for_all_namespaces(field_selector="metadata.name=x")
    assert [(j.metadata.namespace, j.metadata.name) for j in everywhere.items] == [(NS, "x"), ("team-b", "x")]
    assert apiserver.requests[-1].path == "/apis/batch/v1/jobs"
    with pytest.raises(ApiException) as caught:
        batch.list_namespaced_job(NS, field_selector="spec.bogus=1")
    assert caught.value.status == 400 and "field label not supported" in status_of(caught.value)["message"]


def test_generate_name_and_dry_run(apiserver: FakeApiServer, batch: Any) -> None:
    body = job_body("ignored")
    body.metadata = client.V1ObjectMeta(generate_name="train-")
    made = batch.create_namespaced_job(NS, body)
    assert made.metadata.name.startswith("train-") and len(made.metadata.name) == len("train-") + 5
    dry = batch.create_namespaced_job(NS, job_body("only-dry"), dry_run="All")
    assert dry.metadata.uid and apiserver.get("batch/v1", "jobs", NS, "only-dry") is None
    assert apiserver.requests[-1].query == {"dryRun": "All"}


def test_not_found_and_already_exists_are_api_exceptions(batch: Any) -> None:
    with pytest.raises(ApiException) as caught:
        batch.read_namespaced_job("missing", NS)
    assert caught.value.status == 404 and caught.value.reason == "Not Found"
    assert status_of(caught.value)["message"] == 'jobs.batch "missing" not found'
    assert status_of(caught.value)["details"] == {"name": "missing", "group": "batch", "kind": "jobs"}

    batch.create_namespaced_job(NS, job_body("twice"))
    with pytest.raises(ApiException) as caught:
        batch.create_namespaced_job(NS, job_body("twice"))
    assert caught.value.status == 409 and status_of(caught.value)["reason"] == "AlreadyExists"
    assert status_of(caught.value)["message"] == 'jobs.batch "twice" already exists'

    with pytest.raises(ApiException) as caught:
        batch.create_namespaced_job("nowhere", job_body("lost"))
    assert caught.value.status == 404 and status_of(caught.value)["message"] == 'namespaces "nowhere" not found'


def test_invalid_manifests_get_422_with_causes(batch: Any) -> None:
    with pytest.raises(ApiException) as caught:
        batch.create_namespaced_job(NS, job_body("Bad_Name", restart_policy="Always"))
    status = status_of(caught.value)
    assert caught.value.status == 422 and status["reason"] == "Invalid"
    assert status["message"].startswith('Job.batch "Bad_Name" is invalid: [metadata.name: Invalid value: "Bad_Name"')
    assert [(c["field"], c["reason"]) for c in status["details"]["causes"]] == [
        ("metadata.name", "FieldValueInvalid"), ("spec.template.spec.restartPolicy", "FieldValueNotSupported")]


def test_requests_above_limits_are_refused_even_in_a_dry_run(apiserver: FakeApiServer, batch: Any) -> None:
    body = job_body("greedy")
    body.spec.template.spec.containers[0].resources = client.V1ResourceRequirements(
        requests={"cpu": "1500m", "memory": "1Gi"}, limits={"cpu": "1", "memory": "1024Mi"})
    with pytest.raises(ApiException) as caught:
        batch.create_namespaced_job(NS, body, dry_run="All")
    assert caught.value.status == 422
    assert [(c["field"], c["message"]) for c in status_of(caught.value)["details"]["causes"]] == [
        ("spec.template.spec.containers[0].resources.requests",
         'Invalid value: "1500m": must be less than or equal to cpu limit of 1')]
    assert apiserver.get("batch/v1", "jobs", NS, "greedy") is None


def test_foreground_delete_removes_owned_pods(apiserver: FakeApiServer, batch: Any, core: Any) -> None:
    batch.create_namespaced_job(NS, job_body("train"))
    batch.create_namespaced_job(NS, job_body("other"))
    owner = batch.read_namespaced_job("train", NS)
    for i in range(2):
        apiserver.create_pod_for(owner, f"train-{i}")
    apiserver.create_pod_for(apiserver.get("batch/v1", "jobs", NS, "other"), "other-0")
    pods = core.list_namespaced_pod(NS, label_selector="job-name=train").items
    assert [p.metadata.owner_references[0].uid for p in pods] == [owner.metadata.uid] * 2

    response = batch.delete_namespaced_job("train", NS, propagation_policy="Foreground", _preload_content=False)
    body = json.loads(response.data)
    assert response.status == 200 and body["kind"] == "Job"  # the real API answers with the object here
    assert body["metadata"]["finalizers"] == ["foregroundDeletion"] and body["metadata"]["deletionTimestamp"]
    assert [p["metadata"]["name"] for p in apiserver.pods(NS)] == ["other-0"]


def test_orphan_is_the_default_for_jobs_and_keeps_pods(apiserver: FakeApiServer, batch: Any) -> None:
    batch.create_namespaced_job(NS, job_body("train"))
    apiserver.create_pod_for(apiserver.get("batch/v1", "jobs", NS, "train"), "train-0")
    response = batch.delete_namespaced_job("train", NS, _preload_content=False)  # no propagation policy given
    assert json.loads(response.data)["metadata"]["finalizers"] == ["orphan"]
    (pod,) = apiserver.pods(NS)
    assert "ownerReferences" not in pod["metadata"]


def test_delete_options_in_the_body(apiserver: FakeApiServer, batch: Any) -> None:
    batch.create_namespaced_job(NS, job_body("train"))
    apiserver.create_pod_for(apiserver.get("batch/v1", "jobs", NS, "train"), "train-0")
    batch.delete_namespaced_job("train", NS, body=client.V1DeleteOptions(propagation_policy="Background"))
    assert apiserver.pods(NS) == [] and apiserver.requests[-1].query == {}


def test_patches_replace_and_status_subresource(apiserver: FakeApiServer, batch: Any) -> None:
    made = batch.create_namespaced_job(NS, job_body("train"))
    patched = batch.patch_namespaced_job("train", NS, {"metadata": {"labels": {"a": "1"}}})  # strategic
    assert patched.metadata.labels == {"a": "1"} and patched.metadata.generation == 1
    patched = batch.patch_namespaced_job("train", NS, [{"op": "add", "path": "/metadata/labels/b", "value": "2"}])
    assert patched.metadata.labels == {"a": "1", "b": "2"}
    patched = batch.patch_namespaced_job("train", NS, {"metadata": {"labels": {"a": None}}, "spec": {"suspend": True}},
                                         _content_type="application/merge-patch+json")
    assert patched.metadata.labels == {"b": "2"} and patched.spec.suspend and patched.metadata.generation == 2
    assert int(patched.metadata.resource_version) > int(made.metadata.resource_version)

    stale = batch.read_namespaced_job("train", NS)
    stale.metadata.resource_version = made.metadata.resource_version
    with pytest.raises(ApiException) as caught:
        batch.replace_namespaced_job("train", NS, stale)
    assert caught.value.status == 409 and status_of(caught.value)["reason"] == "Conflict"
    stale.metadata.resource_version = None  # a Job's strategy allows an unconditional update (a Lease's does not)
    assert batch.replace_namespaced_job("train", NS, stale).metadata.labels == {"b": "2"}

    batch.patch_namespaced_job_status("train", NS, {"status": {"active": 1}})
    assert batch.read_namespaced_job_status("train", NS).status.active == 1
    ignored = batch.patch_namespaced_job("train", NS, {"status": {"active": 5}})
    assert ignored.status.active == 1  # only /status may change status
    apiserver.set_status("batch/v1", "jobs", NS, "train", {"succeeded": 1, "conditions": [
        {"type": "Complete", "status": "True"}]})
    assert batch.read_namespaced_job("train", NS).status.conditions[0].type == "Complete"


# ---------------------------------------------------------------------------------------------------
# core v1


def test_headless_service(core: Any) -> None:
    service = client.V1Service(
        metadata=client.V1ObjectMeta(name="train", labels={"torchspec/app": "train"}),
        spec=client.V1ServiceSpec(cluster_ip="None", selector={"job-name": "train"},
                                  ports=[client.V1ServicePort(name="c10d", port=29500)]))
    made = core.create_namespaced_service(NS, service)
    assert made.spec.cluster_ip == "None" and made.spec.cluster_ips == ["None"]
    assert made.spec.ports[0].target_port == 29500 and made.spec.type == "ClusterIP"
    labelled = core.list_namespaced_service(NS, label_selector="torchspec/app")
    assert [s.metadata.name for s in labelled.items] == ["train"]
    gone = core.delete_namespaced_service("train", NS)
    assert gone.metadata.name == "train"
    with pytest.raises(ApiException) as caught:
        core.read_namespaced_service("train", NS)
    assert status_of(caught.value)["message"] == 'services "train" not found'


def test_configmaps_secrets_and_events(apiserver: FakeApiServer, core: Any) -> None:
    core.create_namespaced_config_map(NS, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="cfg"),
                                                             data={"a": "1"}))
    core.create_namespaced_secret(NS, client.V1Secret(metadata=client.V1ObjectMeta(name="tok"),
                                                      string_data={"t": "x"}))
    assert core.read_namespaced_config_map("cfg", NS).data == {"a": "1"}
    assert core.read_namespaced_secret("tok", NS).metadata.name == "tok"
    apiserver.create("v1", "events", NS, {"metadata": {"name": "e1"}, "reason": "BackOff", "type": "Warning",
                                          "involvedObject": {"kind": "Pod", "name": "train-0", "namespace": NS}})
    events = core.list_namespaced_event(NS, field_selector="involvedObject.name=train-0,type=Warning")
    assert [e.reason for e in events.items] == ["BackOff"]


def test_list_pagination(core: Any) -> None:
    for i in range(5):
        core.create_namespaced_config_map(NS, client.V1ConfigMap(metadata=client.V1ObjectMeta(name=f"c{i}")))
    first = core.list_namespaced_config_map(NS, limit=2)
    assert [c.metadata.name for c in first.items] == ["c0", "c1"] and first.metadata.remaining_item_count == 3
    rest = core.list_namespaced_config_map(NS, limit=10, _continue=first.metadata._continue)
    assert [c.metadata.name for c in rest.items] == ["c2", "c3", "c4"]


def test_watch_pods(apiserver: FakeApiServer, core: Any, running_pod: str) -> None:
    seen: list[tuple[str, str]] = []
    stream = kubernetes.watch.Watch().stream(core.list_namespaced_pod, NS, timeout_seconds=1)
    for event in stream:
        seen.append((event["type"], event["object"].status.phase))
        if len(seen) == 1:
            apiserver.set_pod_phase(NS, running_pod, "Succeeded")
        if len(seen) == 2:
            break
    assert seen == [("ADDED", "Running"), ("MODIFIED", "Succeeded")]


# ---------------------------------------------------------------------------------------------------
# custom objects


def test_jobset_as_custom_object(apiserver: FakeApiServer, custom: Any) -> None:
    group, version, plural = "jobset.x-k8s.io", "v1alpha2", "jobsets"
    made = custom.create_namespaced_custom_object(group, version, NS, plural, jobset_body("train"))
    assert made["metadata"]["uid"] and made["kind"] == "JobSet" and "status" not in made
    read = custom.get_namespaced_custom_object(group, version, NS, plural, "train")
    assert read["spec"]["replicatedJobs"][0]["replicas"] == 2
    listed = custom.list_namespaced_custom_object(group, version, NS, plural, label_selector="torchspec/app=train")
    assert listed["kind"] == "JobSetList" and [o["metadata"]["name"] for o in listed["items"]] == ["train"]
    assert len(custom.list_cluster_custom_object(group, version, plural)["items"]) == 1

    status = {"conditions": [{"type": "Completed", "status": "True", "reason": "AllJobsCompleted"}]}
    custom.patch_namespaced_custom_object_status(group, version, NS, plural, "train", {"status": status})
    assert custom.get_namespaced_custom_object_status(group, version, NS, plural, "train")["status"] == status
    patched = custom.patch_namespaced_custom_object(group, version, NS, plural, "train",
                                                    {"metadata": {"labels": {"x": "y"}}})
    assert patched["metadata"]["labels"]["x"] == "y" and patched["status"] == status
    del patched["metadata"]["resourceVersion"]
    with pytest.raises(ApiException) as caught:  # a custom resource is never updated unconditionally
        custom.replace_namespaced_custom_object(group, version, NS, plural, "train", patched)
    assert caught.value.status == 422 and status_of(caught.value)["message"].startswith(
        'jobsets.jobset.x-k8s.io "train" is invalid: metadata.resourceVersion: Invalid value: 0: must be specified')

    apiserver.create("batch/v1", "jobs", NS, {"metadata": {"name": "train-worker-0", "ownerReferences": [
        {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "train", "uid": made["metadata"]["uid"]}]},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}}}})
    apiserver.create_pod_for(apiserver.get("batch/v1", "jobs", NS, "train-worker-0"), "train-worker-0-0")
    gone = custom.delete_namespaced_custom_object(group, version, NS, plural, "train")
    assert gone["status"] == "Success" and gone["details"]["kind"] == "jobsets"
    assert apiserver.objects("batch/v1", "jobs", NS) == [] and apiserver.pods(NS) == []  # cascaded twice


def test_volcano_job_and_podgroup(apiserver: FakeApiServer, custom: Any) -> None:
    made = custom.create_namespaced_custom_object("batch.volcano.sh", "v1alpha1", NS, "jobs", volcano_body("train"))
    assert made["apiVersion"] == "batch.volcano.sh/v1alpha1"
    apiserver.set_status("batch.volcano.sh/v1alpha1", "jobs", NS, "train", {"state": {"phase": "Running"}})
    got = custom.get_namespaced_custom_object_status("batch.volcano.sh", "v1alpha1", NS, "jobs", "train")
    assert got["status"]["state"]["phase"] == "Running"
    custom.create_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", NS, "podgroups", {
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": "train-pg"},
        "spec": {"minMember": 2}})
    assert custom.list_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", NS, "podgroups")["items"]
    with pytest.raises(ApiException) as caught:  # a batch/v1 Job of that name does not exist
        BatchV1Api(custom.api_client).read_namespaced_job("train", NS)
    assert caught.value.status == 404


def test_custom_objects_need_kind_and_reject_strategic_patch(custom: Any) -> None:
    body = jobset_body("train")
    del body["kind"]
    with pytest.raises(ApiException) as caught:
        custom.create_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", NS, "jobsets", body)
    assert caught.value.status == 400 and "Object 'Kind' is missing" in status_of(caught.value)["message"]
    custom.create_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", NS, "jobsets", jobset_body("train"))
    with pytest.raises(ApiException) as caught:
        custom.patch_namespaced_custom_object("jobset.x-k8s.io", "v1alpha2", NS, "jobsets", "train", {"spec": {}},
                                              _content_type="application/strategic-merge-patch+json")
    assert caught.value.status == 415


# ---------------------------------------------------------------------------------------------------
# injected failures and an unreachable cluster


def lease_body(holder: str, duration: Any = 15, when: Any = "2026-01-02T03:04:05.000000Z",
               version: str = "") -> dict[str, Any]:
    meta = {"name": "lock", **({"resourceVersion": version} if version else {})}
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta,
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": duration, "renewTime": when}}


def test_leases_take_turns_by_resource_version(custom: Any, api_client: Any) -> None:
    """What `apply --lock kubernetes` relies on: one create wins, and a replace carrying a resourceVersion
    someone else replaced meanwhile is a 409 Conflict (two takers of an expired Lease: one wins)."""
    leases = ("coordination.k8s.io", "v1", NS, "leases")
    created = custom.create_namespaced_custom_object(*leases, lease_body("a"))
    with pytest.raises(ApiException) as caught:
        custom.create_namespaced_custom_object(*leases, lease_body("b"))
    assert caught.value.status == 409 and status_of(caught.value)["reason"] == "AlreadyExists"
    assert status_of(caught.value)["message"] == 'leases.coordination.k8s.io "lock" already exists'

    version = created["metadata"]["resourceVersion"]
    taken = custom.replace_namespaced_custom_object(*leases, "lock", lease_body("b", version=version))
    with pytest.raises(ApiException) as caught:
        custom.replace_namespaced_custom_object(*leases, "lock", lease_body("c", version=version))
    assert caught.value.status == 409 and status_of(caught.value)["reason"] == "Conflict"
    assert status_of(caught.value)["message"] == (
        'Operation cannot be fulfilled on leases.coordination.k8s.io "lock": the object has been modified; please '
        'apply your changes to the latest version and try again')
    with pytest.raises(ApiException) as caught:  # no unconditional update
        custom.replace_namespaced_custom_object(*leases, "lock", lease_body("c"))
    assert caught.value.status == 422 and status_of(caught.value)["message"] == (
        'leases.coordination.k8s.io "lock" is invalid: metadata.resourceVersion: Invalid value: 0: must be '
        'specified for an update')
    assert status_of(caught.value)["details"]["kind"] == "leases"
    lease = client.CoordinationV1Api(api_client).read_namespaced_lease("lock", NS)
    assert lease.spec.holder_identity == "b" and lease.metadata.resource_version == taken["metadata"]["resourceVersion"]
    assert lease.spec.renew_time == datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


def test_lease_validation_and_micro_times(custom: Any) -> None:
    leases = ("coordination.k8s.io", "v1", NS, "leases")
    with pytest.raises(ApiException) as caught:
        custom.create_namespaced_custom_object(*leases, lease_body("a", duration=0))
    assert caught.value.status == 422 and [c["field"] for c in status_of(caught.value)["details"]["causes"]] == [
        "spec.leaseDurationSeconds"]
    for when, rest, element in (("2026-01-02T03:04:05Z", "Z", ".000000"), ("2026-01-02T03:04:05.123Z", ".123Z", ".000000"),
                                ("2026-01-02T03:04:05+00:00", "+00:00", ".000000"), ("x", "x", "2006")):
        with pytest.raises(ApiException) as caught:  # RFC3339Micro: six fractional digits, always
            custom.create_namespaced_custom_object(*leases, lease_body("a", when=when))
        assert caught.value.status == 400 and status_of(caught.value)["message"] == (
            f'Lease in version "v1" cannot be handled as a Lease: parsing time "{when}" as '
            f'"2006-01-02T15:04:05.000000Z07:00": cannot parse "{rest}" as "{element}"')
    created = custom.create_namespaced_custom_object(*leases, lease_body("a", when="2026-01-02T03:04:05.000000+01:00"))
    assert created["spec"]["renewTime"] == "2026-01-02T02:04:05.000000Z"  # written back in UTC


def test_injected_403_with_the_real_message(apiserver: FakeApiServer, batch: Any) -> None:
    apiserver.fail_next("POST", r"/jobs$", 403)
    with pytest.raises(ApiException) as caught:
        batch.create_namespaced_job(NS, job_body("train"))
    assert caught.value.status == 403 and caught.value.reason == "Forbidden"
    assert status_of(caught.value)["message"] == ('jobs.batch is forbidden: User "fake-user" cannot create resource '
                                                  '"jobs" in API group "batch" in the namespace "default"')
    assert batch.create_namespaced_job(NS, job_body("train")).metadata.name == "train"  # only the next one


def test_injected_422_409_and_500(apiserver: FakeApiServer, batch: Any) -> None:
    causes = [{"reason": "FieldValueInvalid", "field": "spec.template.spec.containers[0].resources",
               "message": "Invalid value: \"x\": must be a quantity"}]
    apiserver.fail_next("POST", "jobs", 422, details={"causes": causes})
    with pytest.raises(ApiException) as caught:
        batch.create_namespaced_job(NS, job_body("train"))
    status = status_of(caught.value)
    assert status["reason"] == "Invalid" and status["details"]["causes"] == causes
    assert status["details"]["kind"] == "Job"

    batch.create_namespaced_job(NS, job_body("train"))
    apiserver.fail_next("PATCH", "jobs/train", 409)
    with pytest.raises(ApiException) as caught:
        batch.patch_namespaced_job("train", NS, {"metadata": {"labels": {"a": "b"}}})
    assert status_of(caught.value)["message"].startswith('Operation cannot be fulfilled on jobs.batch "train"')

    apiserver.fail_next("GET", "jobs/train", 500, count=2)
    for _ in range(2):
        with pytest.raises(ApiException) as caught:
            batch.read_namespaced_job("train", NS)
        assert caught.value.status == 500 and status_of(caught.value)["reason"] == "InternalError"
    assert batch.read_namespaced_job("train", NS).metadata.name == "train"


def test_a_hung_server_times_the_client_out(apiserver: FakeApiServer, core: Any) -> None:
    apiserver.stall_next("GET", "/pods$", seconds=5, count=10)  # urllib3 retries reads: hang them all
    started = time.monotonic()
    with pytest.raises(urllib3.exceptions.MaxRetryError) as caught:
        core.list_namespaced_pod(NS, _request_timeout=(0.5, 0.2))
    assert isinstance(caught.value.reason, urllib3.exceptions.ReadTimeoutError)
    assert time.monotonic() - started < 2


def test_stopped_server_is_unreachable_then_comes_back(apiserver: FakeApiServer, core: Any) -> None:
    core.list_namespaced_pod(NS)  # leaves a pooled keep-alive connection behind
    apiserver.stop()
    started = time.monotonic()
    with pytest.raises(urllib3.exceptions.MaxRetryError) as caught:
        core.list_namespaced_pod(NS, _request_timeout=(0.5, 0.5))
    assert isinstance(caught.value.reason, urllib3.exceptions.NewConnectionError)
    assert time.monotonic() - started < 2
    apiserver.start()
    assert [n.metadata.name for n in core.list_namespace().items] == [NS]
    assert core.read_namespace_status(NS).status.phase == "Active"


# ---------------------------------------------------------------------------------------------------
# pod logs


def test_pod_logs_plain_tail_and_timestamps(apiserver: FakeApiServer, core: Any, running_pod: str) -> None:
    apiserver.append_log(NS, running_pod, "step 1\nstep 2\n")
    apiserver.append_log(NS, running_pod, "step 3")
    assert core.read_namespaced_pod_log(running_pod, NS) == "step 1\nstep 2\nstep 3\n"
    assert core.read_namespaced_pod_log(running_pod, NS, tail_lines=1, container="trainer") == "step 3\n"
    stamped = core.read_namespaced_pod_log(running_pod, NS, timestamps=True).splitlines()
    assert [line.split(" ", 1)[1] for line in stamped] == ["step 1", "step 2", "step 3"]
    stamp = stamped[0].split(" ", 1)[0]
    assert len(stamp) == len("2024-01-01T00:00:00.000000000Z") and stamp.endswith("Z")
    assert datetime.strptime(stamp[:19], "%Y-%m-%dT%H:%M:%S").year >= 2024


def test_pod_logs_since_seconds(apiserver: FakeApiServer, core: Any, running_pod: str) -> None:
    apiserver.append_log(NS, running_pod, "old", timestamp=datetime.now(timezone.utc) - timedelta(minutes=10))
    apiserver.append_log(NS, running_pod, "new")
    assert core.read_namespaced_pod_log(running_pod, NS, since_seconds=60) == "new\n"
    assert rfc3339_nano(1_700_000_000_000_000_001) == "2023-11-14T22:13:20.000000001Z"


def test_pod_logs_of_a_pending_pod_are_a_400(apiserver: FakeApiServer, core: Any, batch: Any) -> None:
    batch.create_namespaced_job(NS, job_body("train"))
    apiserver.create_pod_for(apiserver.get("batch/v1", "jobs", NS, "train"), "train-0")
    with pytest.raises(ApiException) as caught:
        core.read_namespaced_pod_log("train-0", NS)
    assert caught.value.status == 400 and status_of(caught.value)["reason"] == "BadRequest"
    assert status_of(caught.value)["message"] == ('container "trainer" in pod "train-0" is waiting to start: '
                                                  'ContainerCreating')
    pod = core.read_namespaced_pod("train-0", NS)
    assert pod.status.phase == "Pending"
    assert pod.status.container_statuses[0].state.waiting.reason == "ContainerCreating"


def test_restart_keeps_the_previous_log(apiserver: FakeApiServer, core: Any, running_pod: str) -> None:
    apiserver.append_log(NS, running_pod, "first run died")
    with pytest.raises(ApiException) as caught:
        core.read_namespaced_pod_log(running_pod, NS, previous=True)
    assert status_of(caught.value)["message"] == 'previous terminated container "trainer" in pod "train-0" not found'
    apiserver.set_pod_phase(NS, running_pod, "Running", restarts=1, exit_code=137, reason="OOMKilled",
                            waiting_reason="CrashLoopBackOff")
    status = core.read_namespaced_pod(running_pod, NS).status.container_statuses[0]
    assert status.restart_count == 1 and status.state.waiting.reason == "CrashLoopBackOff"
    assert (status.last_state.terminated.exit_code, status.last_state.terminated.reason) == (137, "OOMKilled")
    assert core.read_namespaced_pod_log(running_pod, NS) == "first run died\n"  # crash-looping: last run's log
    apiserver.set_pod_phase(NS, running_pod, "Running")
    apiserver.append_log(NS, running_pod, "second run")
    assert core.read_namespaced_pod_log(running_pod, NS) == "second run\n"
    assert core.read_namespaced_pod_log(running_pod, NS, previous=True) == "first run died\n"


def test_a_recreated_pod_starts_with_an_empty_log(apiserver: FakeApiServer, core: Any, running_pod: str) -> None:
    apiserver.append_log(NS, running_pod, "from the first pod")
    owner = apiserver.get("batch/v1", "jobs", NS, "train")
    core.delete_namespaced_pod(running_pod, NS)
    apiserver.create_pod_for(owner, running_pod)
    apiserver.set_pod_phase(NS, running_pod, "Running")
    assert core.read_namespaced_pod_log(running_pod, NS) == ""


def test_terminated_container_status_as_the_kubelet_reports_it(apiserver: FakeApiServer, core: Any,
                                                                running_pod: str) -> None:
    apiserver.set_pod_phase(NS, running_pod, "Failed", exit_code=3)
    pod = core.read_namespaced_pod(running_pod, NS)
    terminated = pod.status.container_statuses[0].state.terminated
    assert pod.status.phase == "Failed" and (terminated.exit_code, terminated.reason) == (3, "Error")
    assert terminated.container_id.startswith("containerd://") and not pod.status.container_statuses[0].ready
    assert core.list_namespaced_pod(NS, field_selector="status.phase=Failed").items[0].metadata.name == running_pod


def append_then_succeed(apiserver: FakeApiServer, pod: str, lines: list[str]) -> threading.Thread:
    """The training process, writing lines while someone follows, then exiting 0."""
    def run() -> None:
        for line in lines:
            time.sleep(0.05)
            apiserver.append_log(NS, pod, line)
        apiserver.set_pod_phase(NS, pod, "Succeeded")

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_follow_streams_appended_lines_until_the_pod_succeeds(apiserver: FakeApiServer, core: Any,
                                                              running_pod: str) -> None:
    apiserver.append_log(NS, running_pod, "before")
    response = core.read_namespaced_pod_log(running_pod, NS, follow=True, _preload_content=False,
                                            _request_timeout=(1, WAIT_S))
    writer = append_then_succeed(apiserver, running_pod, ["epoch 1", "epoch 2", "epoch 3"])
    received = b"".join(response.stream(amt=None, decode_content=False))
    writer.join()
    assert received.decode().splitlines() == ["before", "epoch 1", "epoch 2", "epoch 3"]


def test_follow_through_watch_stream(apiserver: FakeApiServer, core: Any, running_pod: str) -> None:
    writer = append_then_succeed(apiserver, running_pod, ["a", "b"])
    lines = list(kubernetes.watch.Watch().stream(core.read_namespaced_pod_log, running_pod, NS,
                                                 timestamps=True, _request_timeout=(1, WAIT_S)))
    writer.join()
    assert [line.split(" ", 1)[1] for line in lines] == ["a", "b"]
    assert apiserver.requests[-1].query == {"follow": "true", "timestamps": "true"}


def test_follow_ends_when_the_server_stops(apiserver: FakeApiServer, core: Any, running_pod: str) -> None:
    response = core.read_namespaced_pod_log(running_pod, NS, follow=True, _preload_content=False,
                                            _request_timeout=(1, WAIT_S))
    apiserver.append_log(NS, running_pod, "last words")
    chunks = response.stream(amt=None, decode_content=False)
    assert next(chunks) == b"last words\n"
    started = time.monotonic()
    apiserver.stop()
    assert b"".join(chunks) == b"" and time.monotonic() - started < 2


# ---------------------------------------------------------------------------------------------------
# thread safety


def test_concurrent_clients(apiserver: FakeApiServer, kubeconfig: str) -> None:
    errors: list[BaseException] = []

    def create_many(worker: int) -> None:
        try:
            with kubernetes.config.new_client_from_config(config_file=kubeconfig) as api:
                for i in range(5):
                    BatchV1Api(api).create_namespaced_job(NS, job_body(f"w{worker}-{i}"))
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=create_many, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    jobs = apiserver.objects("batch/v1", "jobs", NS)
    assert len(jobs) == 20 and len({j["metadata"]["resourceVersion"] for j in jobs}) == 20
