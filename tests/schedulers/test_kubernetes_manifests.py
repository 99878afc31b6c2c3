"""The kubernetes scheduler's manifests: what each flavor renders, and that the official schemas accept it.

Every example under examples/ is rendered in every flavor and validated with ``kubernetes-validate``
(strict: unknown fields are errors) for the oldest and newest Kubernetes it bundles, and JobSet, Volcano,
PyTorchJob and TrainJob objects against their CRDs (shipped in torchspec/schedulers/kubernetes/crds); an
example a flavor cannot run is refused, saying why, naming a flavor that renders it. No cluster is needed.
(The Kubeflow flavors' own tests: test_kubernetes_kubeflow.py.)
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys
from typing import Any, Dict, List

import pytest
import yaml
from example_files import example_specs

from torchspec import specs
from torchspec.errors import AppRefusedError, ParamError
from torchspec.loader import load_apps
from torchspec.schedulers.kubernetes import attempt
from torchspec.schedulers.kubernetes.flavors import FLAVOR_TABLE, FLAVORS
from torchspec.schedulers.kubernetes.names import AppRef
from torchspec.schedulers.kubernetes.scheduler import KubernetesScheduler
from torchspec.schedulers.kubernetes.translate import KubernetesRequest, merge_patch
from torchspec.schedulers.images import is_folder_image
from torchspec.schedulers.kubernetes.validate import BUNDLED_CRDS, crd_schema, validate_manifests
from torchspec.specs.handles import make_app_handle, parse_app_handle

ROOT = pathlib.Path(__file__).resolve().parents[2]
CRDS = list(BUNDLED_CRDS)
EXAMPLES = example_specs()
OLDEST, NEWEST = "1.25", "1.37"
#: The oldest Kubernetes a manifest rendered without -c k8s_version is for: every Job carries backoffLimitPerIndex.
PER_INDEX = "1.29"
#: Params for examples whose required params have no default (none today; add them here when one appears).
EXAMPLE_PARAMS: Dict[str, Dict[str, str]] = {}


def renders(app: specs.AppDef, flavor: str) -> bool:
    try:
        return validate_manifests(objs(app, flavor=flavor), [NEWEST], CRDS) == []
    except AppRefusedError:
        return False


def render(app: specs.AppDef, **cfg: Any) -> KubernetesRequest:
    info = KubernetesScheduler("test").submit_dryrun(app, cfg)
    return info.request


def objs(app: specs.AppDef, **cfg: Any) -> List[Dict[str, Any]]:
    return render(app, **cfg).objects


def role(**kwargs: Any) -> specs.Role:
    base: Dict[str, Any] = dict(name="trainer", image="ghcr.io/acme/train:1", entrypoint="python",
                                args=["train.py"], num_replicas=3)
    base.update(kwargs)
    return specs.Role(**base)


def app_of(*roles: specs.Role, name: str = "demo") -> specs.AppDef:
    return specs.AppDef(name=name, roles=list(roles))


def pod_templates(obj: Dict[str, Any]) -> List[Dict[str, Any]]:
    if obj["kind"] == "JobSet":
        return [r["template"]["spec"]["template"] for r in obj["spec"]["replicatedJobs"]]
    if obj["apiVersion"].startswith("batch.volcano.sh"):
        return [t["template"] for t in obj["spec"]["tasks"]]
    if obj["kind"] == "Job":
        return [obj["spec"]["template"]]
    return []


def container(obj: Dict[str, Any], index: int = 0) -> Dict[str, Any]:
    return pod_templates(obj)[index]["spec"]["containers"][0]


def env_of(c: Dict[str, Any]) -> Dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in c["env"]}


def example_apps(path: pathlib.Path) -> List[specs.AppDef]:
    """The example's apps, each folder image (the local examples' ``.``, ``/home/...``) swapped for a container
    image, as a user running them on Kubernetes must do (the folders are refused: see the TS603 test)."""
    try:
        apps = load_apps(str(path), EXAMPLE_PARAMS.get(path.name))
    except ParamError as e:
        pytest.fail(f"{path.name} needs params without defaults ({e}): give them in EXAMPLE_PARAMS")
    for app in apps:
        for r in app.roles:
            if is_folder_image(r.image):
                r.image = f"ghcr.io/acme/{r.name}:1"
    return apps


# ----------------------------------------------------------------------------
# Every example, every flavor, against the official schemas
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("flavor", FLAVORS)
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_example_renders_manifests_the_schemas_accept(path: pathlib.Path, flavor: str) -> None:
    apps = example_apps(path)
    assert apps
    for app in apps:
        try:
            newest = objs(app, flavor=flavor)
        except AppRefusedError as e:  # the Kubeflow flavors run one role their operator's way
            assert flavor in ("pytorchjob", "trainjob") and e.problems and e.hint, e
            assert all(message in e.message for _, message in e.problems)
            named = [f for f in FLAVORS if f != flavor and re.search(rf"\b{f}\b", e.hint or "")]
            assert named and any(renders(app, f) for f in named), (e.message, e.hint)
            continue
        assert validate_manifests(newest, [NEWEST], CRDS) == []
        # For clusters older than 1.29 the k8s_version option drops backoffLimitPerIndex.
        oldest = objs(app, flavor=flavor, k8s_version=OLDEST)
        assert validate_manifests(oldest, [OLDEST, NEWEST], CRDS) == []


def test_replica_retries_need_1_29_unless_k8s_version_says_older() -> None:
    app = app_of(role(retry_policy=specs.RetryPolicy.REPLICA, max_retries=2))
    job = objs(app)[1]
    assert job["spec"]["backoffLimitPerIndex"] == 2 and job["spec"]["maxFailedIndexes"] == 0
    assert "backoffLimit" not in job["spec"]
    problems = validate_manifests([job], [OLDEST])
    assert problems and "backoffLimitPerIndex" in problems[0]
    assert validate_manifests([job], ["1.29"]) == []
    old = objs(app, k8s_version="1.28")[1]
    assert old["spec"]["backoffLimit"] == 2 and "backoffLimitPerIndex" not in old["spec"]
    with pytest.raises(ValueError, match="k8s_version"):
        objs(app, k8s_version="latest")


def test_the_validator_is_strict() -> None:
    job = objs(app_of(role()))[1]
    job["spec"]["template"]["spec"]["containers"][0]["imagePullPolcy"] = "Always"  # a typo
    problems = validate_manifests([job], [NEWEST])
    assert len(problems) == 1 and "imagePullPolcy" in problems[0]
    jobset = objs(app_of(role()), flavor="jobset")[0]
    jobset["spec"]["failurePolicy"]["maxRestart"] = 3  # a typo, inside the CRD
    problems = validate_manifests([jobset], [NEWEST], CRDS)
    assert len(problems) == 1 and "maxRestart" in problems[0] and "(CRD)" in problems[0]
    vcjob = objs(app_of(role()), flavor="volcano")[0]
    vcjob["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["resources"] = {"limits": {"cpu": []}}
    assert validate_manifests([vcjob], [NEWEST], CRDS)  # the pod template is checked as a core Pod too


def test_crd_schema_converts_nullable_and_closes_objects() -> None:
    crd = {"metadata": {"name": "x"}, "spec": {"versions": [{"name": "v1", "served": True, "storage": True, "schema": {
        "openAPIV3Schema": {"type": "object", "properties": {
            "a": {"type": "string", "nullable": True},
            "b": {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "properties": {"c": {}}}}}}}]}}
    schema = crd_schema(crd)
    assert schema["additionalProperties"] is False
    assert schema["properties"]["a"]["type"] == ["string", "null"]
    assert "additionalProperties" not in schema["properties"]["b"]


# ----------------------------------------------------------------------------
# The dry run is a file kubectl applies as it is
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("flavor", FLAVORS)
def test_dryrun_is_multi_document_yaml_of_the_objects(flavor: str) -> None:
    one_role = flavor in ("pytorchjob", "trainjob")
    app, = example_apps(ROOT / "examples" / ("ddp.yaml" if one_role else "trainer_ps_reader.yaml"))
    if flavor == "trainjob":
        app.roles[0].max_retries = 0
    info = KubernetesScheduler("test").submit_dryrun(app, {"flavor": flavor, "namespace": "ml"})
    text = str(info)
    header = text.split("\n---\n", 1)[0]
    assert all(line.startswith("#") for line in header.splitlines())
    assert "retry" in header.lower() or "max_retries" in header
    documents = [d for d in yaml.safe_load_all(text) if d is not None]
    assert documents == info.request.objects
    assert all(d["metadata"]["namespace"] == "ml" for d in documents)
    expected = {"job": ["Service", "Job", "Job", "Job"], "jobset": ["JobSet"], "volcano": ["Job"],
                "pytorchjob": ["PyTorchJob"], "trainjob": ["TrainJob"]}[flavor]
    assert [d["kind"] for d in documents] == expected


def test_without_a_namespace_option_the_manifests_name_none() -> None:
    assert all("namespace" not in o["metadata"] for o in objs(app_of(role())))


def test_module_does_not_import_kubernetes() -> None:
    code = ("import sys, torchspec.schedulers.kubernetes.scheduler as k; from torchspec import specs;"
            "k.KubernetesScheduler('s').submit_dryrun(specs.AppDef('a', [specs.Role('r', 'img', entrypoint='x')]), {});"
            "print('kubernetes' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "False"


# ----------------------------------------------------------------------------
# The job flavor
# ----------------------------------------------------------------------------


def test_job_flavor_is_indexed_jobs_and_a_headless_service() -> None:
    app = app_of(role(), role(name="Param_Server", num_replicas=2))
    request = render(app)
    service, trainer, ps = request.objects
    app_id = request.app_id
    assert service["spec"] == {"clusterIP": "None", "selector": {"torchspec.dev/app-id": app_id},
                               "publishNotReadyAddresses": True}
    assert service["metadata"]["name"] == app_id
    assert [trainer["metadata"]["name"], ps["metadata"]["name"]] == [f"{app_id}-trainer", f"{app_id}-param-server"]
    spec = trainer["spec"]
    assert (spec["completionMode"], spec["completions"], spec["parallelism"]) == ("Indexed", 3, 3)
    assert ps["spec"]["completions"] == ps["spec"]["parallelism"] == 2
    pod = spec["template"]
    assert pod["spec"]["subdomain"] == app_id
    assert pod["spec"]["restartPolicy"] == "Never"
    assert pod["metadata"]["labels"] == {"torchspec.dev/app-id": app_id, "torchspec.dev/role-name": "trainer",
                                         "torchspec.dev/version": pod["metadata"]["labels"]["torchspec.dev/version"]}
    env = env_of(container(trainer))
    assert env["JOB_COMPLETION_INDEX"] == {"fieldRef": {
        "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}
    assert env["TORCHSPEC_REPLICA_ID"] == "$(JOB_COMPLETION_INDEX)"
    assert env["TORCHSPEC_RANK0_HOST"] == f"{app_id}-trainer-0.{app_id}"
    assert env_of(container(ps))["TORCHSPEC_RANK0_HOST"] == f"{app_id}-param-server-0.{app_id}"
    assert env["TORCHSPEC_NAMESPACE"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    assert env["TORCHSPEC_NUM_REPLICAS"] == "3" and env["TORCHSPEC_APP_ID"] == f"$(TORCHSPEC_NAMESPACE):{app_id}"
    roles = json.loads(trainer["metadata"]["annotations"]["torchspec.dev/role"])
    assert roles["name"] == "trainer" and roles["num_replicas"] == 3


def test_macros_become_kubernetes_references() -> None:
    r = role(args=["--rank=${replica_id}", "--id=${app_id}", "--master=$${${rank0_env}}", "$(date)", "$$x",
                   "a$$$$b$$"],
             env={"RANK": "${replica_id}", "JOB": "kubernetes://s/${app_id}", "RAW": "$(HOME)", "TWO": "$$$$"})
    request = render(app_of(r))
    c = container(request.objects[1])
    # ${app_id} is the id the handle carries, NAMESPACE:NAME, the namespace the pod's own
    full_id = f"$(TORCHSPEC_NAMESPACE):{request.app_id}"
    assert c["args"] == ["--rank=$(TORCHSPEC_REPLICA_ID)", f"--id={full_id}", "--master=${TORCHSPEC_RANK0_HOST}",
                         "$$(date)", "$x", "a$$$b$"]  # Kubernetes reads "$$" as "$": a literal one is doubled
    env = env_of(c)
    assert env["RANK"] == "$(TORCHSPEC_REPLICA_ID)"
    assert env["JOB"] == f"kubernetes://s/{full_id}"
    assert env["RAW"] == "$$(HOME)" and env["TWO"] == "$$$"  # the kubelet reads "$$" + a last "$": "$$"
    names = [e["name"] for e in c["env"]]
    assert names.index("TORCHSPEC_REPLICA_ID") < names.index("RANK")  # $(VAR) sees only earlier variables
    assert names.index("TORCHSPEC_NAMESPACE") < min(names.index("JOB"), names.index("TORCHSPEC_APP_ID"))
    assert c["command"] == attempt.wrap(["python"], FLAVOR_TABLE["job"].attempt_parts)  # sets TORCHSPEC_ATTEMPT


def test_the_app_id_macro_carries_the_context_as_the_handle_does() -> None:
    context = "arn:aws:eks:us-west-2:123456789012:cluster/prod"  # colons and a slash, as EKS names them
    r = role(args=["--id=${app_id}"], env={"TORCHSPEC_JOB_ID": "kubernetes://s/${app_id}"},
             metadata={"kubernetes.pod_patch": {"metadata": {"labels": {"run": "${app_id}"}}}})
    request = render(app_of(r), context=context)
    name = request.app_id
    job = request.objects[1]
    c = container(job)
    full_id = f"arn:aws:eks:us-west-2:123456789012:cluster%2Fprod:$(TORCHSPEC_NAMESPACE):{name}"
    assert c["args"] == [f"--id={full_id}"] and env_of(c)["TORCHSPEC_APP_ID"] == full_id
    # what the pod sees once the kubelet filled in its namespace is a handle that names the app
    handle = env_of(c)["TORCHSPEC_JOB_ID"].replace("$(TORCHSPEC_NAMESPACE)", "ml")
    assert AppRef.parse(parse_app_handle(handle).app_id) == AppRef(name=name, namespace="ml", context=context)
    # labels cannot expand $(...): in the pod patch ${app_id} stays the app's name
    assert pod_templates(job)[0]["metadata"]["labels"]["run"] == name
    assert validate_manifests(request.objects, [PER_INDEX, NEWEST]) == []
    odd = container(objs(app_of(role(args=["${app_id}"])), context="a$(b)")[1])["args"][0]
    assert odd.startswith("a$$(b):$(TORCHSPEC_NAMESPACE):")  # a $( in the context stays literal


@pytest.mark.parametrize("app_id, ref", [
    ("demo-1", AppRef("demo-1")),
    ("ml:demo-1", AppRef("demo-1", "ml")),
    ("lab:ml:demo-1", AppRef("demo-1", "ml", "lab")),
    ("lab::demo-1", AppRef("demo-1", None, "lab")),
    ("arn:aws:eks:eu-west-1:1:cluster%2Fprod:ml:demo-1", AppRef("demo-1", "ml", "arn:aws:eks:eu-west-1:1:cluster/prod")),
    ("default:x=y", None),
    ("Bad_NS:demo-1", None),
    (":ml:demo-1", None),
    ("ml:", None),
    ("", None),
])
def test_app_ids_are_split_from_the_right_and_refused_when_no_app_can_have_them(app_id: str, ref: Any) -> None:
    assert AppRef.parse(app_id) == ref
    if ref is not None:
        assert str(ref) == app_id


@pytest.mark.parametrize("context", ["lab", "arn:aws:eks:us-west-2:1:cluster/prod", "50%/x", "gke_proj_zone_c"])
def test_app_ids_with_a_context_survive_the_handle(context: str) -> None:
    app_id = str(AppRef("demo-1", "ml", context))
    parsed = parse_app_handle(make_app_handle("kubernetes", "session", app_id))
    assert parsed.session_name == "session" and AppRef.parse(parsed.app_id) == AppRef("demo-1", "ml", context)


def test_torchspec_variables_win_over_the_role_env() -> None:
    c = container(objs(app_of(role(env={"TORCHSPEC_REPLICA_ID": "9", "PYTHONUNBUFFERED": "0"})))[1])
    env = env_of(c)
    assert env["TORCHSPEC_REPLICA_ID"] == "$(JOB_COMPLETION_INDEX)" and env["PYTHONUNBUFFERED"] == "0"
    assert len(c["env"]) == len(env)


def test_resources_devices_and_node_labels() -> None:
    resource = specs.Resource(cpu=4, gpu=2, memMB=2048, devices={"vpc.amazonaws.com/efa": 1},
                              capabilities={"node.kubernetes.io/instance-type": "p4d.24xlarge"})
    c_obj = objs(app_of(role(resource=resource)))[1]
    c = container(c_obj)
    amounts = {"cpu": "4", "memory": "2048Mi", "nvidia.com/gpu": "2", "vpc.amazonaws.com/efa": "1"}
    assert c["resources"] == {"requests": amounts, "limits": amounts}
    assert pod_templates(c_obj)[0]["spec"]["nodeSelector"] == {"node.kubernetes.io/instance-type": "p4d.24xlarge"}
    amd = specs.Resource(cpu=1, gpu=1, memMB=-1, capabilities={"kubernetes.gpu_resource": "amd.com/gpu"})
    assert container(objs(app_of(role(resource=amd)))[1])["resources"]["limits"] == {"cpu": "1", "amd.com/gpu": "1"}
    assert container(objs(app_of(role()))[1])["resources"] == {}
    named = container(objs(app_of(role(resource=specs.named_resources["aws_p3.8xlarge"])))[1])
    assert named["resources"]["limits"]["nvidia.com/gpu"] == "4"


def test_mounts_shm_and_ports() -> None:
    r = role(mounts=[specs.BindMount("/data", "/data", read_only=True), specs.VolumeMount("ckpt", "/ckpt"),
                     specs.DeviceMount("/dev/fuse", "/dev/fuse", "rw")],
             port_map={"tensorboard": 6006, "c10d_rendezvous_port": 29500})
    job = objs(app_of(r), shm_size="2Gi")[1]
    pod = pod_templates(job)[0]["spec"]
    c = pod["containers"][0]
    assert pod["volumes"] == [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}},
        {"name": "mount-0", "hostPath": {"path": "/data"}},
        {"name": "mount-1", "persistentVolumeClaim": {"claimName": "ckpt", "readOnly": False}},
        {"name": "mount-2", "hostPath": {"path": "/dev/fuse"}},
    ]
    assert [(m["mountPath"], m.get("readOnly")) for m in c["volumeMounts"]] == [
        ("/dev/shm", None), ("/data", True), ("/ckpt", False), ("/dev/fuse", False)]
    assert c["securityContext"] == {"privileged": True}  # what a device needs without a device plugin
    assert c["ports"] == [{"containerPort": 6006, "name": "tensorboard"},
                          {"containerPort": 29500, "name": "c10d-rendezvous"}]
    assert validate_manifests([job], [PER_INDEX, NEWEST]) == []
    with pytest.raises(ValueError, match="absolute"):
        objs(app_of(role(mounts=[specs.BindMount("data", "/data")])))
    with pytest.raises(ValueError, match="PersistentVolumeClaim"):
        objs(app_of(role(mounts=[specs.VolumeMount("My_Volume", "/v")])))


def test_run_options() -> None:
    cfg = dict(namespace="ml", queue="team-a", service_account="trainer-sa", image_pull_secrets=["regcred", "other"],
               priority_class="high", ttl=600, context="prod")
    request = render(app_of(role()), **cfg)
    assert request.context == "prod" and request.namespace == "ml"
    service, job = request.objects
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
    assert job["spec"]["ttlSecondsAfterFinished"] == 600
    pod = job["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "trainer-sa"
    assert pod["imagePullSecrets"] == [{"name": "regcred"}, {"name": "other"}]
    assert pod["priorityClassName"] == "high"
    jobset = objs(app_of(role()), flavor="jobset", **cfg)[0]
    assert jobset["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
    assert jobset["spec"]["ttlSecondsAfterFinished"] == 600
    vcjob = objs(app_of(role()), flavor="volcano", **cfg)[0]
    assert vcjob["spec"]["queue"] == "team-a" and "kueue.x-k8s.io/queue-name" not in vcjob["metadata"]["labels"]
    assert vcjob["spec"]["priorityClassName"] == "high" and vcjob["spec"]["ttlSecondsAfterFinished"] == 600
    for obj in (job, jobset, vcjob):
        assert validate_manifests([obj], [PER_INDEX, NEWEST], CRDS) == []
    with pytest.raises(ValueError, match="flavor"):
        objs(app_of(role()), flavor="mpijob")


@pytest.mark.parametrize("cfg, message", [
    (dict(namespace="Bad_NS"), "run option namespace='Bad_NS' is not a namespace name"),
    (dict(namespace="a" * 64), "run option namespace="),
    (dict(ttl=-1), "run option ttl=-1"),
    (dict(shm_size="lots"), "run option shm_size='lots' is not a Kubernetes quantity"),
    (dict(shm_size="-1Gi"), "run option shm_size"),
    (dict(service_account="Trainer SA"), "run option service_account"),
    (dict(priority_class="high!"), "run option priority_class"),
    (dict(queue="team a"), "run option queue"),
    (dict(queue="x" * 64), "run option queue"),
    (dict(image_pull_secrets=["regcred", '{"auths":{"ghcr.io":{"auth":"c2VjcmV0"}}}']),
     "run option image_pull_secrets: item 2 is no Secret name"),
])
def test_run_options_are_checked(cfg: Dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as raised:
        objs(app_of(role()), **cfg)
    assert message in str(raised.value)
    assert "c2VjcmV0" not in str(raised.value)  # a credential pasted by mistake is not echoed


def test_valid_run_options_pass() -> None:
    for shm_size in ("2Gi", "512M", "1.5G", "1e9", "100"):
        assert objs(app_of(role()), shm_size=shm_size, ttl=0, namespace="ml-1", queue="team-a.gpu")


@pytest.mark.parametrize("capabilities, message", [
    ({"kubernetes.gpu_resource": {"x": 1}}, "capability 'kubernetes.gpu_resource' must name an extended resource"),
    ({"kubernetes.gpu_resource": "AMD GPU"}, "capability 'kubernetes.gpu_resource' must name"),
    ({"kubernetes.gpu_resourse": "amd.com/gpu"}, "capability 'kubernetes.gpu_resourse' is not one the kubernetes"
                                                 " scheduler knows: did you mean 'kubernetes.gpu_resource'?"),
    ({"node.kubernetes.io/instance-type": {"x": 1}}, "capability 'node.kubernetes.io/instance-type' is a node label"),
    ({"node.kubernetes.io/instance-type": True}, "is a node label"),
    ({"node.kubernetes.io/instance-type": "p4d 24xlarge"}, "is a node label"),
    ({"Bad Prefix/type": "x"}, "not a valid one"),
])
def test_capabilities_of_the_wrong_type_or_shape_are_refused(capabilities: Dict[str, Any], message: str) -> None:
    resource = specs.Resource(cpu=1, gpu=1, memMB=128, capabilities=capabilities)
    with pytest.raises(ValueError, match="role 'trainer': ") as raised:
        objs(app_of(role(resource=resource)))
    assert message in str(raised.value)


def test_an_unknown_kubernetes_key_is_refused_at_its_place() -> None:
    """The check slurm shares (schedulers/spec_keys.py): capabilities and role metadata, every typo at once."""
    resource = specs.Resource(cpu=1, gpu=1, memMB=128, capabilities={"kubernetes.gpu_resourse": "amd.com/gpu"})
    with pytest.raises(ValueError) as raised:
        objs(app_of(role(resource=resource, metadata={"kubernetes.pod_path": {}, "slurm.x": 1})))
    assert [path for path, _ in raised.value.problems] == [  # type: ignore[attr-defined]
        ("roles", 0, "resource", "capabilities", "kubernetes.gpu_resourse"),
        ("roles", 0, "metadata", "kubernetes.pod_path")]
    assert "metadata key 'kubernetes.pod_path' is not one the kubernetes scheduler knows: did you mean" \
           " 'kubernetes.pod_patch'?" in str(raised.value)


def test_other_schedulers_capabilities_are_left_alone() -> None:
    resource = specs.Resource(cpu=1, gpu=1, memMB=128, capabilities={
        "slurm.gres": "gpu:a100:1", "docker.gpu_device_ids": [0], "node.kubernetes.io/instance-type": 4})
    pod = pod_templates(objs(app_of(role(resource=resource)))[1])[0]
    assert pod["spec"]["nodeSelector"] == {"node.kubernetes.io/instance-type": "4"}


@pytest.mark.parametrize("argv", [
    ["dryrun", "-s", "kubernetes", "-c", "namespace=Bad_NS"],
    ["dryrun", "-s", "kubernetes", "-c", "ttl=-1"],
    ["lint", "--scheduler", "kubernetes", "-c", "shm_size=lots"],
])
def test_the_cli_calls_a_bad_run_option_a_usage_error(argv: List[str]) -> None:
    out = subprocess.run([sys.executable, "-m", "torchspec", *argv, str(ROOT / "examples" / "hello.yaml")],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 2, out.stderr
    assert argv[-1].split("=")[0] in out.stderr


@pytest.mark.parametrize("image", [".", "..", "./img", "/home/me/pytorch_trainer", "~/img", "", " "])
def test_a_folder_for_an_image_is_refused(image: str) -> None:
    """`image: .` (the components' default) is no container image: refused, naming the role, with a hint."""
    with pytest.raises(AppRefusedError) as raised:
        objs(app_of(role(), role(name="reader", image=image)))
    assert "role 'reader'" in str(raised.value) and "kubernetes" in str(raised.value)
    assert raised.value.code == "TS603" and raised.value.path == ("roles", 1, "image")
    assert "-p image=" in (raised.value.hint or "") and "image:" in (raised.value.hint or "")


@pytest.mark.parametrize("image", ["busybox", "ghcr.io/pytorch/pytorch:2.3.0", "localhost:5000/team/img@sha256:"
                                   + "0" * 64, "examples/ddp_train"])
def test_container_images_are_taken(image: str) -> None:
    assert container(objs(app_of(role(image=image)))[1])["image"] == image


def test_the_cli_refuses_a_folder_image_with_exit_2() -> None:
    out = subprocess.run([sys.executable, "-m", "torchspec", "dryrun", "-s", "kubernetes", "utils.echo", "-p", "msg=hi"],
                         capture_output=True, text=True, cwd=ROOT, env={**os.environ, "NO_COLOR": "1"})
    assert out.returncode == 2 and out.stdout == "", out.stderr
    assert "kubernetes cannot run this app: role 'echo': its image '.' is a folder" in out.stderr
    assert "hint:" in out.stderr and "-p image=NAME" in out.stderr
    out = subprocess.run([sys.executable, "-m", "torchspec", "dryrun", "-s", "kubernetes", "utils.echo", "-p", "msg=hi",
                          "-p", "image=busybox"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0 and "image: busybox" in out.stdout, out.stderr


def test_role_names_that_collide_on_kubernetes_are_refused() -> None:
    with pytest.raises(ValueError, match="rename"):
        objs(app_of(role(name="ps_0"), role(name="ps-0")))


def test_app_names_become_dns_1035_labels() -> None:
    request = render(app_of(role(), name="3D_Model"))
    assert request.app_id.startswith("app-3d-model-")
    assert validate_manifests(request.objects, [NEWEST]) == []


# ----------------------------------------------------------------------------
# Retries, per flavor
# ----------------------------------------------------------------------------


def test_job_flavor_retries() -> None:
    app = app_of(role(name="a", max_retries=3), role(name="b", max_retries=2, retry_policy=specs.RetryPolicy.ROLE),
                 role(name="c", max_retries=1, retry_policy=specs.RetryPolicy.REPLICA), role(name="d"))
    _, a, b, c, d = objs(app)
    assert a["spec"]["backoffLimit"] == 3 and b["spec"]["backoffLimit"] == 2 and d["spec"]["backoffLimit"] == 0
    assert c["spec"]["backoffLimitPerIndex"] == 1


def test_jobset_flavor_retries() -> None:
    app = app_of(role(name="a", max_retries=3), role(name="c", max_retries=1, retry_policy=specs.RetryPolicy.REPLICA))
    request = render(app, flavor="jobset")
    jobset, = request.objects
    app_id = request.app_id
    assert jobset["spec"]["failurePolicy"] == {"maxRestarts": 3, "rules": [
        {"name": "replicaRetriesSpent", "action": "FailJobSet", "targetReplicatedJobs": ["c"]}]}
    a, c = jobset["spec"]["replicatedJobs"]
    # APPLICATION: the Job fails at once (backoffLimit=max_retries would retry pods alone first)
    assert a["name"] == "a" and a["replicas"] == 1 and a["template"]["spec"]["backoffLimit"] == 0
    assert c["template"]["spec"]["backoffLimitPerIndex"] == 1
    assert jobset["spec"]["network"] == {"enableDNSHostnames": True, "publishNotReadyAddresses": True}
    assert env_of(container(jobset))["TORCHSPEC_RANK0_HOST"] == f"{app_id}-a-0-0.{app_id}"
    assert "subdomain" not in pod_templates(jobset)[0]["spec"]  # JobSet sets it


def test_volcano_flavor_retries_and_gang() -> None:
    app = app_of(role(name="a", max_retries=3, num_replicas=2),
                 role(name="b", max_retries=2, retry_policy=specs.RetryPolicy.ROLE),
                 role(name="c", max_retries=1, retry_policy=specs.RetryPolicy.REPLICA), role(name="d"))
    request = render(app, flavor="volcano")
    vcjob, = request.objects
    spec = vcjob["spec"]
    assert spec["schedulerName"] == "volcano" and spec["minAvailable"] == 2 + 3 + 3 + 3
    assert spec["plugins"] == {"svc": [], "env": []} and spec["maxRetry"] == 3
    actions = {t["name"]: (t["policies"][0]["action"], t.get("maxRetry")) for t in spec["tasks"]}
    assert actions == {"a": ("RestartJob", 3), "b": ("RestartTask", 2), "c": ("RestartPod", 1),
                       "d": ("TerminateJob", None)}
    assert all(t["minAvailable"] == t["replicas"] for t in spec["tasks"])
    c = container(vcjob)
    assert env_of(c)["TORCHSPEC_REPLICA_ID"] == {"fieldRef": {"fieldPath": "metadata.labels['volcano.sh/task-index']"}}
    assert env_of(c)["TORCHSPEC_RANK0_HOST"] == f"{request.app_id}-a-0.{request.app_id}"
    assert pod_templates(vcjob)[0]["spec"]["schedulerName"] == "volcano"


# ----------------------------------------------------------------------------
# kubernetes.pod_patch
# ----------------------------------------------------------------------------


def test_pod_patch_is_a_merge_patch_of_the_pod_template() -> None:
    patch = {"metadata": {"annotations": {"sidecar.istio.io/inject": "false"}},
             "spec": {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                      "restartPolicy": None, "hostNetwork": True}}
    for flavor in ("job", "jobset", "volcano"):  # the Kubeflow flavors': test_kubernetes_kubeflow.py
        obj = objs(app_of(role(metadata={"kubernetes.pod_patch": patch})), flavor=flavor)[-1]
        pod = pod_templates(obj)[0]
        assert pod["spec"]["tolerations"][0]["key"] == "nvidia.com/gpu" and pod["spec"]["hostNetwork"] is True
        assert "restartPolicy" not in pod["spec"]
        assert pod["metadata"]["annotations"] == {"sidecar.istio.io/inject": "false"}
        assert pod["metadata"]["labels"]["torchspec.dev/role-name"] == "trainer"
    as_json = objs(app_of(role(metadata={"kubernetes.pod_patch": json.dumps({"spec": {"hostIPC": True}})})))[1]
    assert pod_templates(as_json)[0]["spec"]["hostIPC"] is True


@pytest.mark.parametrize("patch, message", [
    ([{"op": "add"}], "must be a mapping"),
    ("{not json", "not valid JSON"),
    ({"kind": "Pod"}, "may only patch metadata and spec"),
    ({"spec": {"containers": None}}, "no valid containers"),
    ({"spec": {"containers": [{"name": "x"}]}}, "no valid containers"),
    ({"spec": {"hostNetwork": "yes"}}, "invalid pod: spec.hostNetwork"),
    ({"spec": {"tolerationz": []}}, "invalid pod"),
])
def test_pod_patch_is_checked(patch: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        objs(app_of(role(metadata={"kubernetes.pod_patch": patch})))


def test_merge_patch_follows_rfc_7386() -> None:
    # RFC 7386, appendix A, a few of its cases
    assert merge_patch({"a": "b"}, {"a": "c"}) == {"a": "c"}
    assert merge_patch({"a": "b"}, {"a": None}) == {}
    assert merge_patch({"a": [{"b": "c"}]}, {"a": [1]}) == {"a": [1]}
    assert merge_patch({"e": None}, {"a": 1}) == {"e": None, "a": 1}
    assert merge_patch({}, {"a": {"bb": {"ccc": None}}}) == {"a": {"bb": {}}}
    assert merge_patch({"a": "foo"}, "bar") == "bar"


def test_run_opts_are_declared_once() -> None:
    opts = KubernetesScheduler("s").run_opts()
    names = {name for name, _ in opts}
    assert {"namespace", "flavor", "queue", "service_account", "image_pull_secrets", "priority_class", "ttl",
            "context", "k8s_version"} <= names
    assert opts.get("flavor").default == "job"  # type: ignore[union-attr]
