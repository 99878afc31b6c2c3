"""The Kubernetes fields teams need (issue 35), in dry runs of every flavor, checked against the official schemas.

Requests apart from limits and quantities with units (``kubernetes.requests``/``kubernetes.limits``), Linux
capabilities without privileges (``kubernetes.linux_capabilities``), the app's metadata as labels of every object
and pod, a time limit (``-c active_deadline=``) on every flavor that has one, and ``lint --scheduler kubernetes``
checking against the version of the cluster it reaches (the API stand-in, tests/kube) or the one ``-c k8s_version=``
names.  Each refusal is placed where the spec writes it.  The real cluster's part: test_kubernetes_cluster.py.
"""

from __future__ import annotations

import pathlib
import sys
import textwrap
from typing import Any, Dict, Iterator, List

import pytest

from torchspec import specs
from torchspec.components import find_component
from torchspec.errors import AppRefusedError
from torchspec.lint import LintOptions
from torchspec.loader import load_app
from torchspec.runner.check import lint_paths
from torchspec.schedulers.kubernetes.flavors import FLAVORS
from torchspec.schedulers.kubernetes.names import safe_label_value
from torchspec.schedulers.kubernetes.resources import quantity_value
from torchspec.schedulers.kubernetes.scheduler import KubernetesScheduler
from torchspec.schedulers.kubernetes.validate import BUNDLED_CRDS, validate_manifests

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "kube"))

from apiserver import FakeApiServer  # noqa: E402
from kubernetes_support import page_example, role_pod, top  # noqa: E402

REQUESTS, LIMITS, LINUX = "kubernetes.requests", "kubernetes.limits", "kubernetes.linux_capabilities"
CAPS = ("roles", 0, "resource", "capabilities")
#: The flavors that run any app; pytorchjob and trainjob run one torchrun role (dist.ddp below).
PLAIN = ("job", "jobset", "volcano")
FIELDS = {REQUESTS: {"cpu": "500m", "memory": "1Gi", "ephemeral-storage": "1Gi"},
          LIMITS: {"hugepages-2Mi": "2Gi", "ephemeral-storage": "10Gi"}, LINUX: ["IPC_LOCK", "SYS_PTRACE"]}
METADATA = {"team": "ml", "example.com/cost-center": "1234", "owner": "alice@example.com"}


def app(flavor: str, capabilities: Any = None, metadata: Any = None) -> specs.AppDef:
    """One role named trainer (dist.ddp's torchrun for the Kubeflow flavors), 2 cpus, 2 GiB, 1 GPU."""
    if flavor in PLAIN:
        out = specs.AppDef("demo", [specs.Role(name="trainer", image="ghcr.io/acme/train:1", entrypoint="python",
                                               args=["train.py"], num_replicas=2)])
    else:
        out = load_app(find_component("dist.ddp"), {"script": "train.py", "image": "ghcr.io/acme/train:1", "j": "2x1"})
        out.roles[0].name = "trainer"
    out.roles[0].resource = specs.Resource(cpu=2, gpu=1, memMB=2048, capabilities=dict(capabilities or {}))
    out.metadata = dict(metadata or {})
    return out


def objects(flavor: str, capabilities: Any = None, metadata: Any = None, **cfg: Any) -> List[Dict[str, Any]]:
    """The request's objects, which Kubernetes' schemas (the oldest and newest bundled) and the CRDs accept."""
    found = KubernetesScheduler("test").submit_dryrun(app(flavor, capabilities, metadata),
                                                      {"flavor": flavor, **cfg}).request.objects
    assert validate_manifests(found, ["1.29", "1.37"], list(BUNDLED_CRDS)) == []
    return found


def refusal(flavor: str = "job", capabilities: Any = None, metadata: Any = None, **cfg: Any) -> AppRefusedError:
    with pytest.raises(AppRefusedError) as raised:
        KubernetesScheduler("test").submit_dryrun(app(flavor, capabilities, metadata), {"flavor": flavor, **cfg})
    return raised.value


# ---------------------------------------------------------------- requests, limits, quantities, capabilities


@pytest.mark.parametrize("flavor", FLAVORS)
def test_requests_limits_hugepages_and_linux_capabilities_in_every_flavor(flavor: str) -> None:
    container = role_pod(objects(flavor, FIELDS), flavor)["spec"]["containers"][0]
    assert container["resources"] == {
        "requests": {"cpu": "500m", "memory": "1Gi", "nvidia.com/gpu": "1", "ephemeral-storage": "1Gi",
                     "hugepages-2Mi": "2Gi"},
        "limits": {"cpu": "2", "memory": "2048Mi", "nvidia.com/gpu": "1", "hugepages-2Mi": "2Gi",
                   "ephemeral-storage": "10Gi"}}
    assert container["securityContext"] == {"capabilities": {"add": ["IPC_LOCK", "SYS_PTRACE"]}}  # not privileged


def test_without_the_capabilities_requests_equal_limits_and_nothing_is_added() -> None:
    container = role_pod(objects("job"), "job")["spec"]["containers"][0]
    assert container["resources"]["requests"] == container["resources"]["limits"]
    assert "securityContext" not in container


def test_a_null_limit_leaves_it_out_and_numbers_are_quantities() -> None:
    resources = role_pod(objects("job", {LIMITS: {"cpu": None}, REQUESTS: {"cpu": 0.5, "memory": 1024}}), "job")[
        "spec"]["containers"][0]["resources"]
    assert resources["requests"]["cpu"] == "0.5" and resources["requests"]["memory"] == "1024"
    assert "cpu" not in resources["limits"]


def test_privileged_and_capabilities_together() -> None:
    container = role_pod(objects("job", {LINUX: "cap_ipc_lock, SYS_PTRACE"}, privileged=True), "job")["spec"][
        "containers"][0]
    assert container["securityContext"] == {"privileged": True, "capabilities": {"add": ["IPC_LOCK", "SYS_PTRACE"]}}


@pytest.mark.parametrize("capabilities, path, words", [
    ({REQUESTS: {"memory": "2 GB"}}, CAPS + (REQUESTS, "memory"), "memory='2 GB' is not a Kubernetes quantity"),
    ({LIMITS: {"hugepages-2Mi": "lots"}}, CAPS + (LIMITS, "hugepages-2Mi"), "is not a Kubernetes quantity"),
    ({REQUESTS: {"memroy": "1Gi"}}, CAPS + (REQUESTS, "memroy"), "did you mean 'memory'?"),
    ({REQUESTS: {"cpu": "4"}, LIMITS: {"cpu": "1"}}, CAPS + (REQUESTS, "cpu"), "requests 4 cpu, more than its limit 1"),
    ({REQUESTS: {"nvidia.com/gpu": "0"}}, CAPS + (REQUESTS, "nvidia.com/gpu"),
     "nvidia.com/gpu cannot be overcommitted: its request (0) must equal its limit (1)"),
    ({REQUESTS: "cpu=1"}, CAPS + (REQUESTS,), "must map resource names to quantities"),
    ({LINUX: ["IPC_LOCK", "SYS_PTRAC"]}, CAPS + (LINUX, 1), "'SYS_PTRAC' is no Linux capability: did you mean"),
    ({LINUX: {"add": "IPC_LOCK"}}, CAPS + (LINUX,), "is a list of Linux capabilities"),
])
def test_a_bad_value_is_refused_at_its_place(capabilities: Dict[str, Any], path: tuple, words: str) -> None:
    e = refusal("job", capabilities)
    assert [p for p, _ in e.problems] == [path] and words in e.message, e.message


def test_every_problem_at_once_and_hugepages_need_cpu_or_memory() -> None:
    out = specs.AppDef("demo", [specs.Role(name="trainer", image="img:1", entrypoint="python", resource=specs.Resource(
        cpu=0, gpu=0, memMB=0, capabilities={LIMITS: {"hugepages-1Gi": "2Gi"}, LINUX: ["NOPE"]}))])
    with pytest.raises(AppRefusedError) as raised:
        KubernetesScheduler("test").submit_dryrun(out, {})
    assert [p for p, _ in raised.value.problems] == [CAPS + (LIMITS,), CAPS + (LINUX, 0)]
    assert "a container with hugepages must also ask for cpu or memory" in raised.value.message


def test_a_typo_in_a_capability_key_names_the_new_ones() -> None:
    e = refusal("job", {"kubernetes.limit": {"cpu": "1"}})
    assert "did you mean 'kubernetes.limits'?" in e.message


def test_quantities_compare_by_value() -> None:
    assert quantity_value("1Gi") == quantity_value("1024Mi") > quantity_value("1G") == quantity_value("1e9")
    assert quantity_value("500m") == quantity_value("0.5")


def test_lint_reports_a_bad_quantity_at_its_line(tmp_path: pathlib.Path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text(textwrap.dedent("""\
        name: fields
        roles:
          - name: trainer
            image: ghcr.io/acme/train:1
            entrypoint: python
            resource:
              cpu: 2
              memMB: 1024
              capabilities:
                kubernetes.requests: {cpu: 500m}
                kubernetes.limits:
                  hugepages-2Mi: 2 Gi
        """))
    result = lint_paths([str(spec)], LintOptions(scheduler="kubernetes", k8s_versions=("1.37",)))
    d, = result.diagnostics
    assert (d.code, d.line) == ("TS601", 12) and "hugepages-2Mi='2 Gi' is not a Kubernetes quantity" in d.message


# ---------------------------------------------------------------- labels


@pytest.mark.parametrize("flavor", FLAVORS)
def test_metadata_labels_every_object_and_pod(flavor: str) -> None:
    objs = objects(flavor, metadata=METADATA)
    safe = {"team": "ml", "example.com/cost-center": "1234", "owner": "alice_example.com"}
    for obj in objs:  # the Service and the Jobs (job), the JobSet, Volcano Job, PyTorchJob, TrainJob
        assert safe.items() <= obj["metadata"]["labels"].items(), obj["kind"]
        assert obj["metadata"]["labels"]["torchspec.dev/app-id"] == top(objs, flavor)["metadata"]["labels"][
            "torchspec.dev/app-id"]
    assert safe.items() <= role_pod(objs, flavor)["metadata"]["labels"].items()


def test_a_value_made_a_label_is_said_and_the_annotation_keeps_it() -> None:
    request = KubernetesScheduler("test").submit_dryrun(app("job", metadata=METADATA), {}).request
    assert "# label owner=alice_example.com: the metadata's value 'alice@example.com' is no label value" \
        in str(request)
    assert '"owner":"alice@example.com"' in request.objects[1]["metadata"]["annotations"]["torchspec.dev/metadata"]


def test_the_provenance_summary_stays_an_annotation() -> None:
    objs = objects("job", metadata={"torchspec.dev/provenance": '{"file":"a.yaml"}', "team": "ml"})
    assert "torchspec.dev/provenance" not in objs[1]["metadata"]["labels"]
    assert "provenance" in objs[1]["metadata"]["annotations"]["torchspec.dev/metadata"]


@pytest.mark.parametrize("key, words", [
    ("team name", "cannot be a Kubernetes label key"), ("-team", "cannot be a Kubernetes label key"),
    ("x" * 64, "cannot be a Kubernetes label key"), ("torchspec.dev/app-id", "a label torchspec sets itself"),
    ("kueue.x-k8s.io/queue-name", "a label torchspec sets itself"),
])
def test_a_key_that_cannot_be_a_label_is_refused_at_its_place(key: str, words: str) -> None:
    e = refusal("job", metadata={key: "x", "team": "ml"})
    assert [p for p, _ in e.problems] == [("metadata", key)] and words in e.message


@pytest.mark.parametrize("value, label", [
    ("ml", "ml"), ("", ""), ("jobs/train.yaml", "jobs_train.yaml"), ("@@", None),
    ("a" * 70, None), ("-x-", "x"),
])
def test_label_values_are_made_safe(value: str, label: Any) -> None:
    from torchspec.schedulers.kubernetes.names import is_label_value

    made = safe_label_value(value)
    assert is_label_value(made) and (label is None or made == label)
    if len(value) > 63:
        assert len(made) == 63 and made != safe_label_value(value + "b")


# ---------------------------------------------------------------- the time limit


@pytest.mark.parametrize("flavor, where", [
    ("job", ("spec", "activeDeadlineSeconds")),
    ("pytorchjob", ("spec", "runPolicy", "activeDeadlineSeconds")),
    ("trainjob", ("spec", "activeDeadlineSeconds")),
])
def test_active_deadline_on_the_object_that_has_it(flavor: str, where: tuple) -> None:
    found: Any = top(objects(flavor, active_deadline=3600), flavor)
    for key in where:
        found = found[key]
    assert found == 3600


def test_a_jobset_attempt_has_the_deadline_and_exceeding_it_is_not_restarted() -> None:
    out = app("jobset")
    out.roles[0].max_retries = 2
    request = KubernetesScheduler("test").submit_dryrun(out, {"flavor": "jobset", "active_deadline": 600}).request
    assert validate_manifests(request.objects, ["1.37"], list(BUNDLED_CRDS)) == []
    spec = request.objects[0]["spec"]
    assert spec["replicatedJobs"][0]["template"]["spec"]["activeDeadlineSeconds"] == 600
    assert spec["failurePolicy"]["rules"][0] == {"name": "deadlineExceeded", "action": "FailJobSet",
                                                "onJobFailureReasons": ["DeadlineExceeded"]}
    assert "a restart starts the clock again" in str(request)


def test_volcano_refuses_a_deadline_saying_why() -> None:
    e = refusal("volcano", active_deadline=60)
    assert "run option active_deadline does not apply to flavor volcano: a Volcano Job has no time limit" in e.message
    assert "it is for flavor job, jobset, pytorchjob and trainjob" in e.message


# ---------------------------------------------------------------- lint: which Kubernetes


SIDECAR = """\
    name: sidecar
    roles:
      - name: trainer
        image: ghcr.io/acme/train:1
        entrypoint: python
        metadata:
          kubernetes.pod_patch:
            spec:
              initContainers:
                - name: proxy
                  image: ghcr.io/acme/proxy:1
                  restartPolicy: Always
    """


@pytest.fixture
def stand_in(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> Iterator[FakeApiServer]:
    """The API stand-in (its /version: 1.31), KUBECONFIG naming it."""
    with FakeApiServer() as srv:
        monkeypatch.setenv("KUBECONFIG", srv.write_kubeconfig(tmp_path / "kubeconfig"))
        yield srv


def lint_sidecar(tmp_path: pathlib.Path, **options: Any) -> Any:
    spec = tmp_path / "sidecar.yaml"
    spec.write_text(textwrap.dedent(SIDECAR))
    return lint_paths([str(spec)], LintOptions(scheduler="kubernetes", **options))


def test_lint_checks_against_the_clusters_version(stand_in: FakeApiServer, tmp_path: pathlib.Path) -> None:
    result = lint_sidecar(tmp_path)
    assert result.diagnostics == []
    assert any("checked against Kubernetes 1.31, the version of the cluster at http" in n for n in result.notes)
    assert ("GET", "/version", {}) in stand_in.requests


def test_lint_without_a_cluster_checks_the_newest_bundled(monkeypatch: pytest.MonkeyPatch,
                                                          tmp_path: pathlib.Path) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))  # no such file: no cluster answers
    result = lint_sidecar(tmp_path)
    assert result.diagnostics == [] and result.notes == []  # as a CI job without a cluster lints: no note


def test_k8s_version_option_is_the_oldest_checked(stand_in: FakeApiServer, tmp_path: pathlib.Path) -> None:
    assert lint_sidecar(tmp_path, scheduler_cfg="k8s_version=1.29").diagnostics == []
    d, = lint_sidecar(tmp_path, scheduler_cfg="k8s_version=1.27").diagnostics
    assert d.code == "TS602" and "Kubernetes 1.27 rejects" in d.message and "restartPolicy" in d.message
    assert ("GET", "/version", {}) not in stand_in.requests  # the option said which: no cluster asked
    d, = lint_sidecar(tmp_path, k8s_versions=("1.25",)).diagnostics
    assert "Kubernetes 1.25 rejects" in d.message


# ---------------------------------------------------------------- the page


@pytest.mark.parametrize("flavor", [*PLAIN, "trainjob"])
def test_the_kubernetes_pages_fields_example(tmp_path: pathlib.Path, flavor: str) -> None:
    """docs/schedulers/kubernetes.md's example under 'Fields teams need' does what the page says."""
    objs = page_example(tmp_path, "Fields teams need", "fields", flavor)
    template = role_pod(objs, flavor)
    container = template["spec"]["containers"][0]
    assert container["resources"]["requests"] == {"cpu": "2", "memory": "16Gi", "nvidia.com/gpu": "1",
                                                  "ephemeral-storage": "10Gi", "hugepages-2Mi": "2Gi"}
    assert container["resources"]["limits"]["cpu"] == "8" and container["resources"]["limits"]["memory"] == "32768Mi"
    assert container["securityContext"] == {"capabilities": {"add": ["IPC_LOCK", "SYS_PTRACE"]}}
    for labels in [template["metadata"]["labels"]] + [o["metadata"]["labels"] for o in objs]:
        assert labels["team"] == "ml" and labels["example.com/cost-center"] == "1234"


def test_the_clusters_version_is_asked_once_a_while(stand_in: FakeApiServer, tmp_path: pathlib.Path) -> None:
    """The language server lints on every change: the version is asked once per server, not per lint."""
    from torchspec.schedulers.kubernetes import check

    check._versions.clear()
    for _ in range(3):
        assert lint_sidecar(tmp_path).diagnostics == []
    assert [r for r in stand_in.requests if r[1] == "/version"] == [("GET", "/version", {})]
