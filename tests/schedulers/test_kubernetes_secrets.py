"""A role's secrets and ConfigMaps on Kubernetes (torchspec/schedulers/kubernetes/secrets.py): valueFrom.secretKeyRef
and configMapKeyRef, envFrom, secret and configMap volumes, in every flavor, against the official schemas and the
bundled CRDs; the values never appear (the dry run holds references only).  No cluster is needed."""

from __future__ import annotations

from typing import Any, Dict, List

import pytest

from torchspec import specs
from torchspec.errors import AppRefusedError
from torchspec.schedulers.kubernetes.flavors import FLAVOR_TABLE
from torchspec.schedulers.kubernetes.scheduler import KubernetesScheduler
from torchspec.schedulers.kubernetes.validate import BUNDLED_CRDS, validate_manifests
from torchspec.specs.secrets import SecretRef

from test_kubernetes_pod_patch import PLAIN, app, role_pod

REFS = [SecretRef(name="hf-token", key="token", env="HF_TOKEN"),
        SecretRef(name="settings", key="level", env="LEVEL", kind="config_map"),
        SecretRef(name="db-creds", env_prefix="DB_"),
        SecretRef(name="db-creds", mount="/etc/creds"),
        SecretRef(name="tls", key="tls.crt", mount="/etc/tls"),
        SecretRef(name="settings", mount="/etc/settings", kind="config_map")]
NO_ENV_FROM = [ref for ref in REFS if ref.env_prefix is None]


def secret_app(flavor: str, refs: List[SecretRef], patch: Any = None) -> specs.AppDef:
    out = app(patch, flavor not in PLAIN)
    out.roles[0].secrets = list(refs)
    return out


def pod_of(flavor: str, refs: List[SecretRef], patch: Any = None) -> Dict[str, Any]:
    request = KubernetesScheduler("test").submit_dryrun(secret_app(flavor, refs, patch), {"flavor": flavor}).request
    assert validate_manifests(request.objects, ["1.29", "1.37"], list(BUNDLED_CRDS)) == []
    return role_pod(request.objects, flavor)


@pytest.mark.parametrize("flavor", sorted(FLAVOR_TABLE))
def test_every_flavor_reads_secrets_by_reference(flavor: str) -> None:
    refs = NO_ENV_FROM if flavor == "trainjob" else REFS
    pod = pod_of(flavor, refs)
    container = pod["spec"]["containers"][0]
    env = {e["name"]: e for e in container.get("env") or []}
    if flavor == "trainjob":  # the trainer's env, as the TrainJob's CRD check sees it
        assert "HF_TOKEN" not in env or env["HF_TOKEN"]["valueFrom"]
    else:
        assert env["HF_TOKEN"] == {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token",
                                                                                       "key": "token"}}}
        assert env["LEVEL"]["valueFrom"] == {"configMapKeyRef": {"name": "settings", "key": "level"}}
        assert container["envFrom"] == [{"prefix": "DB_", "secretRef": {"name": "db-creds"}}]
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert volumes[mounts["/etc/creds"]["name"]]["secret"] == {"secretName": "db-creds"}
    assert volumes[mounts["/etc/tls"]["name"]]["secret"] == {"secretName": "tls",
                                                             "items": [{"key": "tls.crt", "path": "tls.crt"}]}
    assert volumes[mounts["/etc/settings"]["name"]]["configMap"] == {"name": "settings"}
    assert all(mounts[path]["readOnly"] for path in ("/etc/creds", "/etc/tls", "/etc/settings"))


def test_trainjob_carries_env_entries_and_refuses_env_from() -> None:
    request = KubernetesScheduler("test").submit_dryrun(secret_app("trainjob", NO_ENV_FROM), {"flavor": "trainjob"})
    trainer = request.request.objects[-1]["spec"]["trainer"]
    assert {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}}} in trainer["env"]
    with pytest.raises(AppRefusedError) as raised:
        KubernetesScheduler("test").submit_dryrun(secret_app("trainjob", REFS), {"flavor": "trainjob"})
    assert "envFrom" in str(raised.value) and any(where == ("roles", 0, "secrets", 2)
                                                  for where, _ in raised.value.problems)


def test_a_variable_torchspec_sets_is_refused_at_its_place() -> None:
    with pytest.raises(AppRefusedError) as raised:
        pod_of("job", [SecretRef(name="x", key="k", env="TORCHSPEC_ROLE_NAME")])
    assert raised.value.path == ("roles", 0, "secrets", 0, "env")


@pytest.mark.parametrize("flavor", PLAIN)
def test_a_pod_patch_may_add_beside_but_not_remove_a_secret_volume(flavor: str) -> None:
    added = {"spec": {"containers": [{"name": "trainer", "env": [{"name": "EXTRA", "value": "1"}]}]}}
    container = pod_of(flavor, REFS, added)["spec"]["containers"][0]
    names = [e["name"] for e in container["env"]]
    assert "EXTRA" in names and "HF_TOKEN" in names
    removing = {"spec": {"volumes": [{"name": "secret-3", "$patch": "delete"}]}}
    with pytest.raises(AppRefusedError) as raised:
        pod_of(flavor, REFS, removing)
    assert "secret-3" in str(raised.value)
