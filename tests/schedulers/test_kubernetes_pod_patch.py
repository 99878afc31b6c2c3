"""``kubernetes.pod_patch`` (torchspec/schedulers/kubernetes/pod_patch.py): a strategic merge patch of each role's pod
template, in every flavor, that may add and change but never silently take away what torchspec made (issue 35).
The manifests are checked against the official schemas and the bundled CRDs; no cluster is needed."""

from __future__ import annotations

import json
import pathlib
import re
import textwrap
from typing import Any, Dict, List

import pytest
from kubernetes_support import page_example, role_pod

from torchspec import specs
from torchspec.components import find_component
from torchspec.errors import AppRefusedError
from torchspec.lint import LintOptions
from torchspec.loader import load_app
from torchspec.runner.check import lint_paths
from torchspec.schedulers.kubernetes.scheduler import KubernetesScheduler
from torchspec.schedulers.kubernetes.validate import BUNDLED_CRDS, validate_manifests

PATCH = "kubernetes.pod_patch"
AT = ("roles", 0, "metadata", PATCH)
SECRET = {"name": "WANDB_API_KEY", "valueFrom": {"secretKeyRef": {"name": "wandb", "key": "api-key"}}}
#: The flavors that run any app (pytorchjob and trainjob run one torchrun role: dist.ddp below).
PLAIN = ("job", "jobset", "volcano")


def app(patch: Any = None, torchrun: bool = False) -> specs.AppDef:
    """One role named trainer with a GPU and a bind mount (mount-0), patched with ``patch``."""
    if torchrun:
        out = load_app(find_component("dist.ddp"), {"script": "train.py", "image": "ghcr.io/acme/train:1", "j": "2x1"})
    else:
        out = specs.AppDef("demo", [specs.Role(name="trainer", image="ghcr.io/acme/train:1", entrypoint="python",
                                               args=["train.py", "--lr", "0.1"], num_replicas=2)])
    role = out.roles[0]
    role.name = "trainer"
    role.resource = specs.Resource(cpu=2, gpu=1, memMB=1024)
    role.mounts = [specs.BindMount("/data", "/data", read_only=True)]
    if patch is not None:
        role.metadata = {PATCH: patch}
    return out


def objects(patch: Any, flavor: str) -> List[Dict[str, Any]]:
    """The request's objects, which the schemas (Kubernetes 1.25 and 1.37, the CRDs) accept."""
    found = KubernetesScheduler("test").submit_dryrun(app(patch, flavor not in PLAIN), {"flavor": flavor}).request
    assert validate_manifests(found.objects, ["1.29", "1.37"], list(BUNDLED_CRDS)) == []
    return found.objects


def pod(patch: Any, flavor: str = "job") -> Dict[str, Any]:
    """The role's pod as the flavor's object runs it (a TrainJob's trainer as its CRD's check sees it)."""
    return role_pod(objects(patch, flavor), flavor)


def refusal(patch: Any, flavor: str = "job") -> AppRefusedError:
    with pytest.raises(AppRefusedError) as raised:
        KubernetesScheduler("test").submit_dryrun(app(patch, flavor not in PLAIN), {"flavor": flavor})
    return raised.value


def same_app(value: Any) -> str:
    """``value`` as JSON with the app id's random part taken out (two dry runs are two apps)."""
    return re.sub(r"-[a-z0-9]{6}\b", "-X", json.dumps(value))


def env_of(container: Dict[str, Any]) -> Dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


@pytest.mark.parametrize("flavor", [*PLAIN, "pytorchjob", "trainjob"])
def test_env_added_to_the_role_container_keeps_what_torchspec_made(flavor: str) -> None:
    plain = pod(None, flavor)["spec"]["containers"][0]
    patched, = pod({"spec": {"containers": [{"name": "trainer", "env": [SECRET]}]}}, flavor)["spec"]["containers"]
    assert env_of(patched)["WANDB_API_KEY"] == SECRET["valueFrom"]
    for field in ("image", "command", "args", "resources", "volumeMounts"):
        assert same_app(patched[field]) == same_app(plain[field]), field
    assert patched["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert same_app({k: v for k, v in env_of(patched).items() if k != "WANDB_API_KEY"}) == same_app(env_of(plain))
    assert any(name.startswith("TORCHSPEC_") for name in env_of(patched))


def test_a_trainjob_carries_the_patched_volumes() -> None:
    spec = pod({"spec": {"volumes": [{"name": "cache", "emptyDir": {}}]}}, "trainjob")["spec"]
    assert [v["name"] for v in spec["volumes"]] == ["dshm", "mount-0", "cache"]


def trainjob_parts(patch: Any) -> Dict[str, Any]:
    """The TrainJob's trainer and the pod its runtime patch sets, with ``patch`` (the CRD accepts them)."""
    spec = next(o for o in objects(patch, "trainjob") if o["kind"] == "TrainJob")["spec"]
    pod = spec["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]["template"][
        "spec"]["template"]["spec"]
    return {"trainer": spec["trainer"], "pod": pod}


def test_a_trainjob_carries_a_patch_of_the_role_container() -> None:
    """What the TrainJob has a place for: image, command, args, env and resources in spec.trainer (resources as
    resourcesPerNode), volumeMounts and securityContext in the runtime patch's trainer container ``node``; what
    torchspec made stays."""
    plain = trainjob_parts(None)
    patched = trainjob_parts({"spec": {"volumes": [{"name": "cache", "emptyDir": {}}], "containers": [
        {"name": "trainer", "image": "ghcr.io/acme/train:2", "env": [SECRET],
         "resources": {"limits": {"cpu": "4"}}, "securityContext": {"runAsUser": 1000},
         "volumeMounts": [{"name": "cache", "mountPath": "/cache"}]}]}})
    trainer = patched["trainer"]
    assert trainer["image"] == "ghcr.io/acme/train:2" and env_of(trainer)["WANDB_API_KEY"] == SECRET["valueFrom"]
    assert same_app({k: v for k, v in env_of(trainer).items() if k != "WANDB_API_KEY"}) == \
        same_app(env_of(plain["trainer"]))
    assert trainer["resourcesPerNode"]["limits"] == {"cpu": "4", "memory": "1024Mi", "nvidia.com/gpu": "1"}
    assert (trainer["command"], trainer["args"]) == (plain["trainer"]["command"], plain["trainer"]["args"])
    node, = patched["pod"]["containers"]
    assert node["name"] == "node" and node["securityContext"] == {"runAsUser": 1000}
    assert [m["name"] for m in node["volumeMounts"]] == ["dshm", "mount-0", "cache"]
    assert [v["name"] for v in patched["pod"]["volumes"]] == ["dshm", "mount-0", "cache"]


@pytest.mark.parametrize("patch, at, words", [
    ({"spec": {"containers": [{"name": "proxy", "image": "ghcr.io/acme/proxy:1"}]}}, ("spec", "containers", 0),
     ["adds container 'proxy'", "runtime's containers", "put a sidecar in the ClusterTrainingRuntime",
      "-c flavor=jobset or job", "the role's own container is 'trainer'"]),
    ({"spec": {"containers": [{"name": "trainer", "env": [SECRET], "ports": [{"containerPort": 80}]}]}},
     ("spec", "containers", 0, "ports"),
     ["sets containers[0].ports, which a TrainJob has no place for", "takes image, command, args, env, resources"]),
    ({"spec": {"initContainers": [{"name": "agent", "image": "a", "restartPolicy": "Always"}]}},
     ("spec", "initContainers", 0, "image"),
     ["sets initContainers[0].image", "takes env, securityContext, volumeMounts", "never adds one",
      "a sidecar belongs in the ClusterTrainingRuntime"]),
])
def test_what_a_trainjob_has_no_place_for_in_a_container_patch_is_refused_saying_why(
        patch: Any, at: tuple, words: List[str]) -> None:
    e = refusal(patch, "trainjob")
    assert [p for p, _ in e.problems][0] == AT + at, e.problems
    assert all(word in e.message for word in words), e.message


@pytest.mark.parametrize("flavor", PLAIN)
def test_a_volume_and_a_sidecar_are_added_beside_what_torchspec_made(flavor: str) -> None:
    sidecar = {"name": "proxy", "image": "ghcr.io/acme/proxy:1", "volumeMounts": [{"name": "cache", "mountPath": "/c"}]}
    spec = pod({"spec": {"volumes": [{"name": "cache", "emptyDir": {}}], "containers": [sidecar]}}, flavor)["spec"]
    assert [v["name"] for v in spec["volumes"]] == ["dshm", "mount-0", "cache"]
    trainer, proxy = spec["containers"]
    assert trainer["name"] == "trainer" and trainer["args"] == ["train.py", "--lr", "0.1"] and proxy == sidecar
    assert [m["name"] for m in trainer["volumeMounts"]] == ["dshm", "mount-0"]


@pytest.mark.parametrize("flavor", [*PLAIN, "pytorchjob", "trainjob"])
def test_deleting_a_generated_volume_is_refused_where_the_patch_deletes_it(flavor: str) -> None:
    e = refusal({"spec": {"volumes": [{"name": "cache", "emptyDir": {}}, {"name": "dshm", "$patch": "delete"}]}},
                flavor)
    assert "role 'trainer': kubernetes.pod_patch removed the volume 'dshm' torchspec made (mounted at /dev/shm)" \
        in e.message
    assert [p for p, _ in e.problems] == [AT + ("spec", "volumes", 1)] and "strategic merge" in (e.hint or "")


@pytest.mark.parametrize("patch, at, words", [
    ({"spec": {"containers": [{"$patch": "replace"}, {"name": "other", "image": "x"}]}},
     ("spec", "containers", 0), ["the role's container 'trainer'"]),
    ({"spec": {"containers": [{"name": "trainer", "command": None, "args": []}]}},
     ("spec", "containers", 0, "command"), ["the command of", "the args of"]),
    ({"spec": {"containers": [{"name": "trainer", "resources": {"limits": {"nvidia.com/gpu": None}}}]}},
     ("spec", "containers", 0, "resources", "limits", "nvidia.com/gpu"), ["limits nvidia.com/gpu=1"]),
    ({"spec": {"containers": [{"name": "trainer", "env": [{"$patch": "replace"}, SECRET]}]}},
     ("spec", "containers", 0, "env", 0), ["torchspec's variable TORCHSPEC_APP_ID", "JOB_COMPLETION_INDEX"]),
    ({"spec": {"containers": [{"name": "trainer", "volumeMounts": [{"mountPath": "/data", "$patch": "delete"}]}]}},
     ("spec", "containers", 0, "volumeMounts", 0), ["the mount of volume 'mount-0' at /data"]),
    ({"spec": {"containers": [{"name": "s", "image": "s", "volumeMounts": [{"name": "nope", "mountPath": "/n"}]}]}},
     ("spec", "containers", 0, "volumeMounts", 0), ["the volume 'nope' that container 's' mounts at /n"]),
    ({"spec": {"containers": [{"$patch": "replace"}, {"name": "side", "image": "s"}, {"name": "trainer", "image": "i",
                                                                                     "command": ["x"]}]}},
     ("spec", "containers", 2), ["from the first place"]),
])
def test_what_a_patch_removes_is_named_where_the_patch_removes_it(patch: Any, at: tuple, words: List[str]) -> None:
    e = refusal(patch)
    assert all(w in e.message for w in words), e.message
    assert e.problems[0][0] == AT + at


def test_replace_is_kept_for_what_torchspec_did_not_make() -> None:
    patched = pod({"metadata": {"labels": {"$patch": "replace", "team": "a"}},
                   "spec": {"tolerations": [{"key": "gpu", "operator": "Exists"}],
                            "containers": [{"name": "trainer", "securityContext": {"$patch": "replace",
                                                                                    "runAsUser": 1000}}]}})
    assert patched["metadata"]["labels"] == {"team": "a"}
    assert patched["spec"]["containers"][0]["securityContext"] == {"runAsUser": 1000}


def test_an_rfc_7386_patch_restating_the_container_now_merges_into_it() -> None:
    """What a merge patch of a whole containers list did (replace it) is now a merge into the named container."""
    container, = pod({"spec": {"containers": [{"name": "trainer", "image": "ghcr.io/acme/other:2",
                                               "resources": {"limits": {"cpu": "4"}}}]}})["spec"]["containers"]
    assert container["image"] == "ghcr.io/acme/other:2" and container["args"] == ["train.py", "--lr", "0.1"]
    assert container["resources"]["limits"] == {"cpu": "4", "memory": "1024Mi", "nvidia.com/gpu": "1"}


@pytest.mark.parametrize("patch, at, words", [
    ({"spec": {"volumes": [{"name": "dshm", "$patch": "drop"}]}}, AT + ("spec", "volumes", 0, "$patch"),
     "spec.volumes[0].$patch: unknown directive $patch: 'drop' (the patch cannot apply)"),
    ({"spec": {"containers": {"name": "trainer"}}}, AT + ("spec", "containers"),
     "spec.containers: is a mapping where Kubernetes expects a list (of Container, merged by name)"),
    ({"spec": {"volumes": [{"emptyDir": {}}]}}, AT + ("spec", "volumes", 0), "has no 'name'"),
    ('{"spec": {"volumes": [{"emptyDir": {}}]}}', AT, "has no 'name'"),  # JSON text: no place inside it
])
def test_a_patch_that_cannot_apply_is_refused_at_its_place(patch: Any, at: tuple, words: str) -> None:
    e = refusal(patch)
    assert words in e.message and e.path == at, (e.message, e.path)


def test_lint_reports_what_the_patch_removed_at_its_line(tmp_path: pathlib.Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(textwrap.dedent("""\
        name: patched
        roles:
          - name: trainer
            image: ghcr.io/acme/train:1
            entrypoint: python
            metadata:
              kubernetes.pod_patch:
                spec:
                  volumes:
                    - name: dshm
                      $patch: delete
        """))
    d, = lint_paths([str(spec)], LintOptions(scheduler="kubernetes")).diagnostics
    assert (d.code, d.line, d.path) == ("TS601", 10, "roles[0].metadata.kubernetes.pod_patch.spec.volumes[0]")
    assert "removed the volume 'dshm'" in d.message


@pytest.mark.parametrize("flavor", PLAIN)
def test_the_kubernetes_pages_pod_patch_example(tmp_path: pathlib.Path, flavor: str) -> None:
    """docs/schedulers/kubernetes.md's example under 'Pod patches' does what the page says."""
    template = role_pod(page_example(tmp_path, "Pod patches", "patched", flavor), flavor)
    trainer, proxy = template["spec"]["containers"]
    assert trainer["args"] == ["train.py"] and trainer["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert "TORCHSPEC_APP_ID" in env_of(trainer) and "secretKeyRef" in env_of(trainer)["WANDB_API_KEY"]
    assert proxy["name"] == "proxy" and [v["name"] for v in template["spec"]["volumes"]] == ["dshm", "cache"]
