"""The kubernetes scheduler's ``depends_on`` and hosts variables: JobSet's ``dependsOn`` (validated against the
bundled CRD), the refusal of every flavor that starts roles at once, every role's hosts in every flavor's pods
(each flavor's own DNS names), and one ordered JobSet on the real cluster."""

from __future__ import annotations

import json
import pathlib
import textwrap
from typing import Any, Dict, List

import pytest

from torchspec import specs
from torchspec.errors import AppRefusedError
from torchspec.schedulers.kubernetes.flavors import FLAVOR_TABLE, carry_table
from torchspec.schedulers.kubernetes.scheduler import KubernetesScheduler
from torchspec.schedulers.kubernetes.validate import BUNDLED_CRDS, validate_manifests

from test_kubernetes_cluster import K8S_IMAGE, Target, real, status, submit, torchspec  # noqa: F401 - real: fixture
from test_kubernetes_cluster import env, k8s_image  # noqa: F401 - fixtures

Dep = specs.RoleDependency


def role(name: str, n: int = 1, *deps: Dep) -> specs.Role:
    return specs.Role(name=name, image="ghcr.io/acme/train:1", entrypoint="sh",
                      args=["-c", "echo $${${hosts_env:parameter-server}}"], num_replicas=n, depends_on=list(deps))


def objects(app: specs.AppDef, flavor: str) -> List[Dict[str, Any]]:
    """The request's objects, which Kubernetes' schemas and the bundled CRDs accept, with the app id as ``APP``
    (it has a random suffix) in every value."""
    request = KubernetesScheduler("test").submit_dryrun(app, {"flavor": flavor}).request
    assert validate_manifests(request.objects, ["1.29", "1.37"], list(BUNDLED_CRDS)) == []
    return json.loads(json.dumps(request.objects).replace(request.app_id, "APP"))  # type: ignore[no-any-return]


def containers(objs: List[Dict[str, Any]], flavor: str) -> List[Dict[str, Any]]:
    impl = FLAVOR_TABLE[flavor]
    if not impl.custom:
        return [c for o in objs if o["kind"] == "Job" for c in o["spec"]["template"]["spec"]["containers"]]
    top = next(o for o in objs if o["kind"] == impl.kind)
    return [c for _, t in impl.pod_templates(top) for c in t["spec"]["containers"]]


ORDERED = specs.AppDef("demo", [role("download"), role("parameter-server", 2, Dep("download")),
                                role("trainer", 1, Dep("parameter-server", "ready"))])


def test_jobset_waits_with_depends_on_complete_and_ready() -> None:
    jobset = objects(ORDERED, "jobset")[-1]
    jobs = jobset["spec"]["replicatedJobs"]
    assert [(j["name"], j.get("dependsOn")) for j in jobs] == [
        ("download", None), ("parameter-server", [{"name": "download", "status": "Complete"}]),
        ("trainer", [{"name": "parameter-server", "status": "Ready"}])]


@pytest.mark.parametrize(("flavor", "hosts"), [
    ("job", ("APP-download-0.APP", "APP-parameter-server-0.APP,APP-parameter-server-1.APP")),
    ("jobset", ("APP-download-0-0.APP", "APP-parameter-server-0-0.APP,APP-parameter-server-0-1.APP")),
    ("volcano", ("APP-download-0.APP", "APP-parameter-server-0.APP,APP-parameter-server-1.APP")),
])
def test_every_pod_gets_every_roles_hosts_in_the_flavors_dns_names(flavor: str, hosts: tuple) -> None:
    app = specs.AppDef("demo", [role("download"), role("parameter-server", 2), role("trainer")])
    objs = objects(app, flavor)
    found = containers(objs, flavor)
    assert len(found) == 3
    for c in found:
        env = {e["name"]: e.get("value") for e in c["env"]}
        assert (env["TORCHSPEC_HOSTS_DOWNLOAD"], env["TORCHSPEC_HOSTS_PARAMETER_SERVER"]) == hosts
        assert c["args"] == ["-c", "echo ${TORCHSPEC_HOSTS_PARAMETER_SERVER}"]


def test_a_one_role_flavor_names_its_own_hosts() -> None:
    from torchspec.components import find_component
    from torchspec.loader import load_app

    app = load_app(find_component("dist.ddp"), {"script": "train.py", "image": "ghcr.io/acme/train:1", "j": "2x1"})
    for flavor, hosts in (("pytorchjob", "APP-master-0,APP-worker-0"), ("trainjob", "APP-node-0-0.APP,APP-node-0-1.APP")):
        env = {e["name"]: e.get("value") for e in containers(objects(app, flavor), flavor)[0]["env"]}
        assert env[f"TORCHSPEC_HOSTS_{app.roles[0].name.upper()}"] == hosts, (flavor, env)


@pytest.mark.parametrize("flavor", ["job", "volcano"])
def test_flavors_that_start_every_role_at_once_refuse_depends_on_at_its_place(flavor: str) -> None:
    with pytest.raises(AppRefusedError) as raised:
        KubernetesScheduler("test").submit_dryrun(ORDERED, {"flavor": flavor})
    assert [path for path, _ in raised.value.problems] == [("roles", 1, "depends_on"), ("roles", 2, "depends_on")]
    assert "starts every role at once" in str(raised.value) and "-c flavor=jobset" in (raised.value.hint or "")


def test_jobset_refuses_what_its_webhook_would() -> None:
    app = specs.AppDef("demo", [role("trainer", 1, Dep("download"), Dep("ps")), role("download"), role("ps")])
    with pytest.raises(AppRefusedError) as raised:
        KubernetesScheduler("test").submit_dryrun(app, {"flavor": "jobset"})
    assert raised.value.problems == (
        (("roles", 0, "depends_on", 1), "role 'trainer' depends on 2 roles; a JobSet's replicated Job takes one"),
        (("roles", 0, "depends_on", 0, "role"), "role 'trainer' depends on 'download', listed after it; a JobSet"
                                               " starts replicated Jobs in their order"))


def test_the_flavor_table_says_who_keeps_the_order() -> None:
    row = next(line for line in carry_table().splitlines() if line.startswith("| `depends_on` |"))
    assert "dependsOn" in row and row.count("refused") == len(FLAVOR_TABLE) - 1


@pytest.mark.k8s_cluster
def test_a_jobset_starts_a_role_once_the_one_it_depends_on_completed(real: Target,  # noqa: F811
                                                                      tmp_path: pathlib.Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    mounts = json.dumps([f"type=bind,src={shared},dst={shared}"])
    spec = tmp_path / "ordered.yaml"
    spec.write_text(textwrap.dedent(f"""\
        name: ordered
        roles:
          - name: download
            image: {K8S_IMAGE}
            entrypoint: sh
            args: ["-c", "sleep 1; echo fetched > {shared}/data"]
            mounts: {mounts}
          - name: trainer
            image: {K8S_IMAGE}
            entrypoint: sh
            args: ["-c", "cat {shared}/data && echo $TORCHSPEC_HOSTS_DOWNLOAD"]
            mounts: {mounts}
            depends_on: [{{role: download, when: finished}}]
        """))
    handle = submit(spec, real.ns, "jobset")
    done = torchspec("wait", handle, "--timeout", "150", timeout=200)
    assert done.returncode == 0, (done.stdout, done.stderr, status(handle))
    logs = torchspec("logs", handle, "trainer")
    app = handle.rsplit(":", 1)[-1].split("@")[0]  # kubernetes://SESSION/NAMESPACE:APP@FLAVOR
    assert "fetched" in logs.stdout and f"{app}-download-0-0.{app}" in logs.stdout, (logs.stdout, logs.stderr)
    assert torchspec("delete", handle).returncode == 0
