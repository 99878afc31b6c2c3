"""``-c server_dry_run=True``: the cluster's API server dry-runs every object (``dryRun=All``) for ``dryrun`` and
``lint --scheduler kubernetes``, and what it refuses is reported where the spec writes it.

The tests that matter run twice, through the CLI in a new process as a user's shell would: against the API
stand-in (tests/kube/apiserver.py) and against the real control plane of ``scripts/k8s-cluster`` (the session's
``k8s_cluster``; skipped where none answers).  What only one of them can do (inject a 422 with chosen causes, a
409; a real RBAC refusal, a CRD that is not installed) is played on the stand-in with ``fail_next``.  Dry runs
never write: every test ends with nothing of the app in the namespace.
"""

from __future__ import annotations

import json
import os
import re
import pathlib
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, List, Optional, Sequence, Tuple

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "kube"))

from apiserver import FakeApiServer  # noqa: E402

from torchspec.schedulers.kubernetes.origin import parse_field, place, spec_path  # noqa: E402

#: some tests here use the real cluster through request.getfixturevalue: run them with the cluster's (last)
pytestmark = pytest.mark.k8s_cluster

ROOT = pathlib.Path(__file__).resolve().parents[2]

VALID = """\
    name: fine
    roles:
      - name: trainer
        image: busybox:1.36
        entrypoint: sh
        args: ["-c", "echo hi"]
        resource: {cpu: 1, memMB: 64}
    """

#: Requests above limits: every schema file takes it, the API server's validation does not.
ABOVE_LIMITS = """\
    name: greedy
    roles:
      - name: trainer
        image: busybox:1.36
        entrypoint: sh
        args: ["-c", "echo hi"]
        metadata:
          kubernetes.pod_patch:
            spec:
              containers:
                - name: trainer
                  image: busybox:1.36
                  resources:
                    requests: {cpu: "2"}
                    limits: {cpu: "1"}
    """


@dataclass
class Target:
    """A cluster to dry-run against: its kubeconfig, a namespace of the test's own, and what is in it."""

    name: str
    kubeconfig: str
    namespace: str
    workdir: pathlib.Path
    #: the stand-in, where the test runs against it (None: the real cluster)
    server: Optional[FakeApiServer]
    #: the Jobs and Services in the namespace
    created: Callable[[], List[str]]
    #: the kubeconfig of a user with no rights
    nobody: Callable[[], str]

    def spec(self, text: str, name: str = "job.yaml") -> str:
        path = self.workdir / name
        path.write_text(textwrap.dedent(text))
        return str(path)

    def torchspec(self, *argv: str, kubeconfig: Optional[str] = None) -> "subprocess.CompletedProcess[str]":
        """The CLI in a new process, finding the cluster through KUBECONFIG as a user's shell does."""
        env = {**os.environ, "KUBECONFIG": kubeconfig or self.kubeconfig, "NO_COLOR": "1"}
        done = subprocess.run([sys.executable, "-m", "torchspec", *argv], capture_output=True, text=True,
                              timeout=180, cwd=self.workdir, env=env)
        assert "Traceback" not in done.stderr + done.stdout, done.stderr
        return done

    def lint(self, path: str, cfg: str = "", kubeconfig: Optional[str] = None,
             options: Sequence[str] = ()) -> "subprocess.CompletedProcess[str]":
        return self.torchspec("lint", "--scheduler", "kubernetes", "-f", "json", *options, "-c",
                              f"server_dry_run=True,namespace={self.namespace}" + (f",{cfg}" if cfg else ""), path,
                              kubeconfig=kubeconfig)

    def dryrun(self, path: str, cfg: str = "", kubeconfig: Optional[str] = None) -> "subprocess.CompletedProcess[str]":
        return self.torchspec("dryrun", "-s", "kubernetes", "-c",
                              f"server_dry_run=True,namespace={self.namespace}" + (f",{cfg}" if cfg else ""), path,
                              kubeconfig=kubeconfig)


def stand_in_target(server: FakeApiServer, tmp_path: pathlib.Path) -> Target:
    def nobody() -> str:
        server.fail_next("POST", r".", 403, count=100)  # the stand-in has one user: refuse it instead
        return kubeconfig

    kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")
    return Target("stand-in", kubeconfig, "default", tmp_path, server,
                  lambda: [o["metadata"]["name"] for o in server.objects("batch/v1", "jobs", "default")
                           + server.objects("v1", "services", "default")], nobody)


def cluster_target(cluster: Any, tmp_path: pathlib.Path) -> Target:
    namespace = cluster.new_namespace("dryrun")

    def created() -> List[str]:
        return cluster.kubectl("get", "jobs.batch,services", "-n", namespace, "-o", "name").stdout.split()

    return Target("cluster", cluster.kubeconfig, namespace, tmp_path, None, created,
                  lambda: os.path.join(cluster.dir, "nobody.kubeconfig"))


@pytest.fixture(params=["stand-in", "cluster"])
def target(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> Iterator[Target]:
    if request.param == "cluster":
        yield cluster_target(request.getfixturevalue("k8s_cluster"), tmp_path)
        return
    with FakeApiServer() as server:
        yield stand_in_target(server, tmp_path)


@pytest.fixture
def stand_in(tmp_path: pathlib.Path) -> Iterator[Target]:
    with FakeApiServer() as server:
        yield stand_in_target(server, tmp_path)


def diagnostics(done: "subprocess.CompletedProcess[str]") -> List[dict]:
    return json.loads(done.stdout)["diagnostics"]


def line_of(path: str, needle: str) -> int:
    return next(i for i, line in enumerate(pathlib.Path(path).read_text().splitlines(), 1) if needle in line)


# ---------------------------------------------------------------- on both


def test_an_app_the_server_accepts_passes_and_nothing_is_created(target: Target) -> None:
    path = target.spec(VALID)
    done = target.dryrun(path)
    assert done.returncode == 0, done.stderr
    assert "accepts every object in a dry run (dryRun=All" in done.stdout and "nothing was created" in done.stdout
    assert "kind: Job" in done.stdout  # the request is printed as without the option
    done = target.lint(path)
    assert (done.returncode, diagnostics(done)) == (0, []), done.stdout + done.stderr
    assert target.created() == []
    if target.server is not None:  # every write was a dry run
        writes = [r for r in target.server.requests if r.verb != "GET"]
        assert writes and all(r.verb == "POST" and r.query.get("dryRun") == "All"
                              and r.query.get("fieldValidation") == "Strict" for r in writes), writes


def test_requests_above_limits_are_a_finding_where_the_patch_writes_them(target: Target) -> None:
    path = target.spec(ABOVE_LIMITS)
    done = target.lint(path)
    assert done.returncode == 1, done.stdout + done.stderr
    d, = diagnostics(done)
    assert (d["code"], d["line"]) == ("TS604", line_of(path, "requests:")), d
    assert d["path"].startswith("roles[0].metadata.kubernetes.pod_patch.spec.containers[0].resources.requests"), d
    assert "must be less than or equal to cpu limit of 1" in d["message"], d
    assert "Job greedy-" in d["message"] and "for role 'trainer'" in d["message"], d
    assert "spec.template.spec.containers[0].resources.requests" in d["message"], d
    # dryrun: the app as written cannot run there (exit 2), every field named where the spec writes it
    done = target.dryrun(path)
    assert done.returncode == 2, done.stderr
    assert "the cluster refuses the manifests in its dry run" in done.stderr
    assert "must be less than or equal to cpu limit of 1" in done.stderr
    assert "in the spec at roles[0].metadata.kubernetes.pod_patch.spec.containers[0].resources.requests" in \
        done.stderr
    assert target.created() == []


def test_a_user_without_rights_gets_the_servers_reason(target: Target) -> None:
    path = target.spec(VALID)
    nobody = target.nobody()
    done = target.lint(path, kubeconfig=nobody)
    assert done.returncode == 1, done.stdout + done.stderr
    found = diagnostics(done)  # the Service (at the top of the spec), then the Job (at its role)
    assert [(d["code"], d["line"]) for d in found] == [("TS604", 1), ("TS604", line_of(path, "name: trainer"))]
    assert "(forbidden)" in found[0]["message"] and 'cannot create resource "services"' in found[0]["message"]
    assert "RBAC" in found[0]["hint"]
    done = target.dryrun(path, kubeconfig=nobody)
    assert done.returncode == 6 and "(forbidden)" in done.stderr and "RBAC" in done.stderr, done.stderr
    assert target.created() == []


def test_a_quota_that_allows_no_job_is_the_servers_reason(target: Target, request: pytest.FixtureRequest) -> None:
    if target.server is None:  # a real quota: the namespace may hold no Job at all
        cluster = request.getfixturevalue("k8s_cluster")
        cluster.kubectl("create", "quota", "no-jobs", "--hard=count/jobs.batch=0", "-n", target.namespace)
    else:
        target.server.fail_next("POST", r"/jobs$", 403, count=2, message=(
            'jobs.batch "x" is forbidden: exceeded quota: no-jobs, requested: count/jobs.batch=1, used: '
            'count/jobs.batch=0, limited: count/jobs.batch=0'))
    path = target.spec(VALID)
    done = target.lint(path)
    d, = diagnostics(done)
    assert (done.returncode, d["code"], d["line"]) == (1, "TS604", line_of(path, "name: trainer")), d
    assert "(forbidden)" in d["message"] and "quota" in d["message"] and "no-jobs" in d["message"], d
    done = target.dryrun(path)
    assert done.returncode == 6 and "quota" in done.stderr, done.stderr
    assert target.created() == []


def test_an_admission_policy_no_schema_carries_is_a_finding_at_the_role(target: Target,
                                                                       request: pytest.FixtureRequest) -> None:
    """A ValidatingAdmissionPolicy (CEL) of the cluster's: its denial (a 422 whose one cause names no field) is
    a TS604 at the role whose Job it refuses."""
    denied = (f"ValidatingAdmissionPolicy 'ts-{target.namespace}' with binding 'ts-{target.namespace}' denied "
              "request: images must come from ghcr.io/acme")
    cluster = request.getfixturevalue("k8s_cluster") if target.server is None else None
    if cluster is not None:
        cluster.kubectl("apply", "-f", "-", input=textwrap.dedent(f"""\
            apiVersion: admissionregistration.k8s.io/v1
            kind: ValidatingAdmissionPolicy
            metadata: {{name: ts-{target.namespace}}}
            spec:
              failurePolicy: Fail
              matchConstraints:
                resourceRules:
                  - {{apiGroups: [batch], apiVersions: [v1], operations: [CREATE], resources: [jobs]}}
              validations:
                - expression: "object.spec.template.spec.containers.all(c, c.image.startsWith('ghcr.io/acme/'))"
                  message: images must come from ghcr.io/acme
            ---
            apiVersion: admissionregistration.k8s.io/v1
            kind: ValidatingAdmissionPolicyBinding
            metadata: {{name: ts-{target.namespace}}}
            spec:
              policyName: ts-{target.namespace}
              validationActions: [Deny]
              matchResources:
                namespaceSelector:
                  matchLabels: {{kubernetes.io/metadata.name: {target.namespace}}}
            """))
    else:  # the real server's answer, as the policy above gets it
        target.server.fail_next("POST", r"/jobs$", 422, count=2, message=f'jobs.batch "x" is forbidden: {denied}',
                                details={"causes": [{"message": denied}]})
    try:
        path = target.spec(VALID)
        done = target.lint(path)
        for _ in range(20):  # a new policy takes a moment to be enforced
            if cluster is None or done.returncode != 0:
                break
            time.sleep(0.5)
            done = target.lint(path)
        d, = diagnostics(done)
        assert (done.returncode, d["code"], d["line"], d["path"]) == (1, "TS604", line_of(path, "name: trainer"),
                                                                       "roles[0]"), d
        assert d["message"].endswith(f"for role 'trainer': {denied}"), d
        done = target.dryrun(path)
        assert done.returncode == 2 and denied in done.stderr, done.stderr
    finally:
        if cluster is not None:
            for kind in ("validatingadmissionpolicybinding", "validatingadmissionpolicy"):
                cluster.kubectl("delete", kind, f"ts-{target.namespace}", "--ignore-not-found", check=False)
    assert target.created() == []


@pytest.mark.parametrize("target", ["stand-in"], indirect=True)  # the real cluster has every flavor's CRD
def test_a_flavor_whose_crd_is_not_installed_says_so(target: Target) -> None:
    assert target.server is not None
    target.server.uninstall("batch.volcano.sh")
    path = target.spec(VALID)
    done = target.lint(path, "flavor=volcano")
    assert done.returncode == 1, done.stdout + done.stderr
    d, = diagnostics(done)
    assert d["code"] == "TS604" and "(not found)" in d["message"] and "Job fine-" in d["message"], d
    assert "this cluster serves no Job (batch.volcano.sh/v1alpha1), which flavor volcano creates" in d["message"]
    assert "\n" not in d["message"] and "CRD" in d["hint"]
    done = target.dryrun(path, "flavor=volcano")
    assert done.returncode == 6 and "(not found)" in done.stderr and "CRD" in done.stderr, done.stderr


def test_a_cluster_that_is_not_there_is_exit_6_naming_the_server(tmp_path: pathlib.Path) -> None:
    with FakeApiServer() as server:
        target = stand_in_target(server, tmp_path)
    path = target.spec(VALID)
    for done in (target.lint(path), target.dryrun(path)):
        assert done.returncode == 6, done.stdout + done.stderr
        assert f"cannot reach the Kubernetes API server at {server.url}" in done.stderr, done.stderr
        assert "Connection refused" in done.stderr


# ---------------------------------------------------------------- what only the stand-in can play


def test_every_cause_of_a_422_is_a_finding_at_its_field(stand_in: Target) -> None:
    """A JobSet the cluster's CEL rules refuse: each cause at the line that wrote its field."""
    path = stand_in.spec("""\
        name: two
        roles:
          - name: trainer
            image: busybox:1.36
            entrypoint: sh
          - name: reader
            image: docker.io/reader:1
            entrypoint: sh
        """)
    image = "spec.replicatedJobs[1].template.spec.template.spec.containers[0].image"
    stand_in.server.fail_next("POST", r"/jobsets$", 422, count=2, details={"causes": [  # type: ignore[union-attr]
        {"reason": "FieldValueForbidden", "field": image, "message": "Forbidden: images come from ghcr.io/acme"},
        {"reason": "FieldValueInvalid", "field": "spec.replicatedJobs[0].replicas", "message": "Invalid value: 1"},
        {"reason": "FieldValueInvalid", "field": "", "message": "Invalid value: \"object\": no more than 1 job"}]})
    done = stand_in.lint(path, "flavor=jobset")
    assert done.returncode == 1, done.stdout + done.stderr
    found = {(d["line"], d["path"]): d["message"] for d in diagnostics(done)}
    assert set(found) == {(line_of(path, "image: docker.io"), "roles[1].image"),
                          (line_of(path, "name: trainer"), "roles[0]"), (1, "")}, found
    assert f"for role 'reader': {image}: Forbidden: images come from ghcr.io/acme" in \
        found[(line_of(path, "image: docker.io"), "roles[1].image")]
    assert re.fullmatch(r'the API server refuses the JobSet two-\w{6}: Invalid value: "object": no more than 1 job',
                        found[(1, "")]), found[(1, "")]
    done = stand_in.dryrun(path, "flavor=jobset")
    assert done.returncode == 2 and "(in the spec at roles[1].image)" in done.stderr, done.stderr


def test_a_field_the_cluster_does_not_know_is_a_finding_where_the_patch_writes_it(stand_in: Target) -> None:
    """An older cluster than the schemas checked: with fieldValidation=Strict it names the unknown field (a
    400, worded as Kubernetes v1.37 words it) instead of dropping it.  (torchspec refuses a pod patch field that
    no Kubernetes knows before it builds a manifest, so only a cluster older than the schema shows this.)"""
    path = stand_in.spec("""\
        name: gated
        roles:
          - name: trainer
            image: busybox:1.36
            entrypoint: sh
            metadata:
              kubernetes.pod_patch:
                spec:
                  schedulingGates: [{name: quota}]
        """)
    stand_in.server.fail_next("POST", r"/jobs$", 400, count=2, message=(  # type: ignore[union-attr]
        'Job in version "v1" cannot be handled as a Job: strict decoding error: unknown field '
        '"spec.template.spec.schedulingGates"'))
    done = stand_in.lint(path, options=("--k8s-version", "1.37"))
    assert done.returncode == 1, done.stdout + done.stderr
    d, = diagnostics(done)
    assert (d["code"], d["line"]) == ("TS604", line_of(path, "schedulingGates")), d
    assert d["path"] == "roles[0].metadata.kubernetes.pod_patch.spec.schedulingGates", d
    assert "spec.template.spec.schedulingGates: unknown field" in d["message"], d
    done = stand_in.dryrun(path)
    assert done.returncode == 2 and "unknown field" in done.stderr, done.stderr


@pytest.mark.parametrize("status, words", [(409, "(conflict)"), (500, "(error 500)")])
def test_other_refusals_are_findings_with_the_servers_reason(stand_in: Target, status: int, words: str) -> None:
    path = stand_in.spec(VALID)
    stand_in.server.fail_next("POST", r"/jobs$", status, count=2)  # type: ignore[union-attr]
    done = stand_in.lint(path)
    d, = diagnostics(done)
    assert (done.returncode, d["code"], d["line"]) == (1, "TS604", line_of(path, "name: trainer")), d
    assert words in d["message"] and "creating Job fine-" in d["message"] and "(dry run)" in d["message"]
    done = stand_in.dryrun(path)
    assert done.returncode == 6 and words in done.stderr, done.stderr


def test_submit_with_the_option_creates_nothing_the_server_would_refuse(stand_in: Target) -> None:
    """Without it submit creates the Service, fails at the Job and deletes the Service again; with it, the
    server's dry run of every object comes first."""
    done = stand_in.torchspec("submit", "-s", "kubernetes", "-c", "server_dry_run=True",
                              stand_in.spec(ABOVE_LIMITS))
    assert done.returncode == 2 and "must be less than or equal to cpu limit of 1" in done.stderr, done.stderr
    assert [r.verb for r in stand_in.server.requests] == ["POST", "POST"]  # type: ignore[union-attr]
    done = stand_in.torchspec("submit", "-s", "kubernetes", "-c", "server_dry_run=True", stand_in.spec(VALID))
    assert done.returncode == 0 and done.stdout.startswith("kubernetes://"), done.stderr
    assert len(stand_in.created()) == 2  # the Service and the Job, this time for real


def test_without_the_option_nothing_is_sent(stand_in: Target) -> None:
    path = stand_in.spec(ABOVE_LIMITS)
    done = stand_in.torchspec("lint", "--scheduler", "kubernetes", path)
    assert done.returncode == 0 and "server" not in done.stdout, done.stdout
    assert stand_in.torchspec("dryrun", "-s", "kubernetes", path).returncode == 0
    # lint reads the cluster's version to pick the schema (docs/schedulers/kubernetes.md); no object is sent
    assert [(r.verb, r.path) for r in stand_in.server.requests] == [("GET", "/version")]  # type: ignore[union-attr]


# ---------------------------------------------------------------- placing a field in the spec


@pytest.mark.parametrize("obj, field, role, pod", [
    ({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"annotations": {"torchspec.dev/role-index": "1"}}},
     "spec.template.spec.containers[0].image", 1, ["spec", "containers", "0", "image"]),
    ({"apiVersion": "batch/v1", "kind": "Job", "metadata": {}}, "spec.backoffLimit", None, None),
    ({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet"},
     "spec.replicatedJobs[2].template.spec.template.metadata.labels[a/b]", 2, ["metadata", "labels", "a/b"]),
    ({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet"}, "spec.replicatedJobs[1].replicas", 1, None),
    ({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job"}, "spec.tasks.0.template.spec", 0, ["spec"]),
    ({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob"}, "spec.pytorchReplicaSpecs.Worker.replicas", 0, None),
    ({"apiVersion": "v1", "kind": "Service"}, "spec.ports[0].port", None, None),
])
def test_place_finds_the_role_and_the_path_in_its_pod(obj: Any, field: str, role: Optional[int],
                                                      pod: Optional[List[str]]) -> None:
    assert place(obj, parse_field(field)) == (role, pod)


def test_spec_path_prefers_the_patch_then_the_roles_own_key() -> None:
    roles = [{"name": "a", "image": "i", "resource": {"cpu": 1}},
             {"name": "b", "metadata": {"kubernetes.pod_patch": {"spec": {"containers": [{"image": "x"}]}}}}]
    pod = ["spec", "containers", "0", "image"]
    assert spec_path(0, pod, roles) == ("roles", 0, "image")
    assert spec_path(0, ["spec", "containers", "0", "resources", "limits"], roles) == ("roles", 0, "resource")
    assert spec_path(0, ["spec", "containers", "0", "env"], roles) == ("roles", 0)  # no env key: the role
    assert spec_path(1, pod, roles) == ("roles", 1, "metadata", "kubernetes.pod_patch", "spec", "containers", 0,
                                        "image")
    assert spec_path(None, pod, roles) == () and spec_path(5, pod, roles) == ()


# ---------------------------------------------------------------- the kubernetes page


def fenced_blocks(text: str) -> List[Tuple[str, str]]:
    """(info, text) of each fenced block of a Markdown page, the fence's indentation taken off."""
    return [(info, textwrap.dedent(body)) for _, info, body in
            re.findall(r"^( *)```(\w*)\n(.*?)^ *```$", text, re.S | re.M)]


def test_the_page_example_prints_what_the_page_shows(stand_in: Target) -> None:
    """docs/schedulers/kubernetes.md's job.yaml and the lint command after it, run against the stand-in: the
    output the page shows, app id aside."""
    found = fenced_blocks((ROOT / "docs" / "schedulers" / "kubernetes.md").read_text())
    (at,) = [i for i, (info, body) in enumerate(found) if body.startswith("$ torchspec lint --scheduler kubernetes")]
    assert found[at - 1][0] == "yaml", found[at - 1]
    spec, console = found[at - 1][1], found[at][1].splitlines()
    command, shown = console[0], console[1:]
    assert command.startswith("$ torchspec lint ") and "-c server_dry_run=True" in command
    stand_in.spec(spec, "job.yaml")
    done = stand_in.torchspec(*command.split()[2:])
    assert done.returncode == 1, done.stdout + done.stderr
    # the page's note names the test cluster's version and address (tests/docs/test_samples.py runs the
    # sample there); the stand-in's differ, and notes go to stderr
    notes = [line for line in shown if line.startswith("note: ")]
    assert [re.sub(r"\d+\.\d+, the version of the cluster at \S+", "V at URL", n) for n in notes] == \
        ["note: kubernetes: manifests checked against Kubernetes V at URL (-c k8s_version=OLDEST or --k8s-version "
         "checks others)"]
    assert f"Kubernetes 1.31, the version of the cluster at {stand_in.server.url}" in done.stderr, done.stderr
    assert re.sub(r"greedy-\w{6}", "greedy-ID", done.stdout).rstrip().splitlines() == \
        re.sub(r"greedy-\w{6}", "greedy-ID", "\n".join(l for l in shown if l not in notes)).rstrip().splitlines()
