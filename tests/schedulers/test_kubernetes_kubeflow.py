"""The Kubeflow flavors' manifests (PyTorchJob, TrainJob), torchrun's rendezvous handed to the operator, and
queues for every flavor, checked against the published CRDs and the core Kubernetes schemas; no cluster needed."""

from __future__ import annotations

import pathlib
from typing import Any, Dict, List

import pytest

from torchspec import specs
from torchspec.components import find_component
from torchspec.errors import AppRefusedError
from torchspec.loader import load_app
from torchspec.schedulers.kubernetes import attempt
from torchspec.schedulers.kubernetes.flavors import CARRY_ROWS, FLAVOR_TABLE, carry_table
from torchspec.schedulers.kubernetes.names import AppRef
from torchspec.schedulers.kubernetes.options import kubernetes_run_opts, run_options_table
from torchspec.schedulers.kubernetes.scheduler import KubernetesScheduler
from torchspec.schedulers.kubernetes.torchrun import find_launch
from torchspec.schedulers.kubernetes.translate import KubernetesRequest
from torchspec.schedulers.kubernetes.validate import BUNDLED_CRDS, validate_manifests

ROOT = pathlib.Path(__file__).resolve().parents[2]
CRDS = list(BUNDLED_CRDS)
VERSIONS = ["1.29", "1.37"]  # as kubernetes_support.VERSIONS says


def render(app: specs.AppDef, **cfg: Any) -> KubernetesRequest:
    return KubernetesScheduler("test").submit_dryrun(app, cfg).request


def the_object(app: specs.AppDef, **cfg: Any) -> Dict[str, Any]:
    """The one object of a custom flavor, validated for the oldest and newest Kubernetes (k8s_version=1.25 too)."""
    obj, = render(app, **cfg).objects
    assert validate_manifests([obj], VERSIONS, CRDS) == []
    assert validate_manifests(render(app, k8s_version="1.25", **cfg).objects, ["1.25", "1.37"], CRDS) == []
    return obj


def ddp(**params: str) -> specs.AppDef:
    """dist.ddp as the component renders it."""
    return load_app(find_component("dist.ddp"), {"script": "train.py", "image": "ghcr.io/acme/train:1", **params})


def refusal(app: specs.AppDef, **cfg: Any) -> AppRefusedError:
    with pytest.raises(AppRefusedError) as raised:
        render(app, **cfg)
    return raised.value


def role(**kwargs: Any) -> specs.Role:
    base: Dict[str, Any] = dict(name="trainer", image="ghcr.io/acme/train:1", entrypoint="python",
                                args=["train.py"], num_replicas=2)
    base.update(kwargs)
    return specs.Role(**base)


def env_of(container: Dict[str, Any]) -> Dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


# ----------------------------------------------------------------------------
# torchrun's rendezvous options, found and taken out
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("entrypoint, args, kept", [
    ("torchrun", ["--nnodes=2", "--nproc-per-node", "4", "--standalone", "--tee", "3", "train.py", "--nnodes", "9"],
     ["--tee", "3", "train.py", "--nnodes", "9"]),
    ("python3", ["-m", "torch.distributed.run", "--rdzv_endpoint", "h:1", "-m", "pkg.main", "--master_port", "1"],
     ["-m", "torch.distributed.run", "-m", "pkg.main", "--master_port", "1"]),
    ("bash", ["-c", "cd /w && exec torchrun --nnodes 2 --rdzv-id 'a b' x.py \"$HOME\" | tee log; echo done"],
     ["-c", "cd /w && exec torchrun x.py \"$HOME\" | tee log; echo done"]),
    ("/bin/sh", ["-ec", "A=$(hostname) python -m torch.distributed.run --nnodes=$N --node_rank=${R:-0} m.py"],
     ["-ec", "A=$(hostname) python -m torch.distributed.run m.py"]),
])
def test_the_rendezvous_options_are_taken_out_and_the_rest_kept_verbatim(entrypoint: str, args: List[str],
                                                                          kept: List[str]) -> None:
    launch = find_launch(role(entrypoint=entrypoint, args=args))
    assert launch is not None and launch.args == kept


def test_what_the_options_said_is_kept() -> None:
    app = ddp(j="2x4")
    launch = find_launch(app.roles[0])
    assert launch is not None
    assert (launch.nnodes, launch.value("nproc_per_node"), launch.port) == (("2", "2"), "4", 29500)
    assert launch.dropped == ["--rdzv_backend c10d", "--rdzv_endpoint $${${rank0_env}}:29500",
                              "--rdzv_id '${app_id}'", "--nnodes 2", "--nproc_per_node 4"]


@pytest.mark.parametrize("entrypoint, args", [
    ("python", ["train.py"]), ("bash", ["-c", "echo torchrun --nnodes 2"]), ("bash", ["script.sh"]),
    ("sh", ["-c", "'torchrun'x"]),
])
def test_roles_that_do_not_run_torchrun_have_no_launch(entrypoint: str, args: List[str]) -> None:
    assert find_launch(role(entrypoint=entrypoint, args=args)) is None


# ----------------------------------------------------------------------------
# pytorchjob
# ----------------------------------------------------------------------------


def test_pytorchjob_is_a_master_and_workers_with_the_operators_rendezvous() -> None:
    obj = the_object(ddp(j="3x4"), flavor="pytorchjob")
    assert (obj["apiVersion"], obj["kind"]) == ("kubeflow.org/v1", "PyTorchJob")
    spec = obj["spec"]
    assert spec["nprocPerNode"] == "4" and "elasticPolicy" not in spec
    assert spec["runPolicy"] == {"backoffLimit": 0, "cleanPodPolicy": "Running"}
    replicas = spec["pytorchReplicaSpecs"]
    assert [(k, v["replicas"], v["restartPolicy"]) for k, v in replicas.items()] == [("Master", 1, "Never"),
                                                                                     ("Worker", 2, "Never")]
    container, = replicas["Master"]["template"]["spec"]["containers"]
    assert container["name"] == "pytorch"
    assert container["ports"] == [{"name": "pytorchjob-port", "containerPort": 29500}]
    assert container["command"][:2] == ["/bin/sh", "-c"] and container["command"][3] == "bash"
    assert 'TORCHSPEC_REPLICA_ID="$RANK"' in container["command"][2]
    assert container["args"] == ["-c", "torchrun --tee 3 --role '' train.py"]
    env = env_of(container)
    assert "TORCHSPEC_REPLICA_ID" not in env and env["TORCHSPEC_RANK0_HOST"] == f"{obj['metadata']['name']}-master-0"
    assert env["TORCHSPEC_APP_ID"] == f"$(TORCHSPEC_NAMESPACE):{obj['metadata']['name']}@pytorchjob"
    assert replicas["Worker"]["template"] == replicas["Master"]["template"]


def test_one_node_is_a_master_alone() -> None:
    spec = the_object(ddp(j="1x2"), flavor="pytorchjob")["spec"]
    assert list(spec["pytorchReplicaSpecs"]) == ["Master"] and spec["nprocPerNode"] == "2"


def test_an_elastic_role_gets_the_elastic_policy() -> None:
    spec = the_object(ddp(j="2:4x2"), flavor="pytorchjob")["spec"]
    name = spec["pytorchReplicaSpecs"]["Master"]["template"]["metadata"]["labels"]["torchspec.dev/app-id"]
    assert spec["elasticPolicy"] == {"rdzvBackend": "c10d", "rdzvHost": f"{name}-master-0", "rdzvPort": 29500,
                                     "rdzvId": name, "minReplicas": 2, "maxReplicas": 4}
    assert spec["pytorchReplicaSpecs"]["Worker"]["replicas"] == 3


def test_pods_left_running_or_pending_are_cleaned_by_default_and_finished_ones_kept() -> None:
    """cleanPodPolicy Running unless the user names one: the operator's default (None) leaves a replica it
    recreated after the job failed waiting forever for the deleted Master (seen on the real operator)."""
    assert the_object(ddp(j="2x1"), flavor="pytorchjob")["spec"]["runPolicy"]["cleanPodPolicy"] == "Running"
    for policy in ("None", "All"):
        spec = the_object(ddp(j="2x1"), flavor="pytorchjob", clean_pod_policy=policy)["spec"]
        assert spec["runPolicy"]["cleanPodPolicy"] == policy


def test_retries_and_run_policy_options() -> None:
    app = ddp(j="2x1", max_retries="3")
    spec = the_object(app, flavor="pytorchjob", clean_pod_policy="All", ttl=60, active_deadline=3600,
                      scheduling_queue="gang", queue="team-a", priority="high")["spec"]
    assert spec["runPolicy"] == {"backoffLimit": 3, "cleanPodPolicy": "All", "ttlSecondsAfterFinished": 60,
                                 "activeDeadlineSeconds": 3600, "schedulingPolicy": {"queue": "gang"},
                                 "suspend": True}
    assert {r["restartPolicy"] for r in spec["pytorchReplicaSpecs"].values()} == {"OnFailure"}
    assert "restartPolicy OnFailure, runPolicy.backoffLimit=3" in str(KubernetesScheduler("t").submit_dryrun(
        app, {"flavor": "pytorchjob"}))


def test_replica_id_in_args_is_the_operators_rank() -> None:
    app = specs.AppDef("a", [role(entrypoint="torchrun", args=["--nnodes", "2", "t.py", "--shard=${replica_id}",
                                                                  "--literal=$(TORCHSPEC_REPLICA_ID)"])])
    spec = the_object(app, flavor="pytorchjob")["spec"]
    container = spec["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert container["args"] == ["t.py", "--shard=$(RANK)", "--literal=$$(TORCHSPEC_REPLICA_ID)"]


@pytest.mark.parametrize("app, paths, words", [
    (specs.AppDef("a", [role(), role(name="ps")]), [("roles", 0, "entrypoint"), ("roles", 1)],
     ["runs python, not torchrun", "'ps' is a second role"]),
    (specs.AppDef("a", [role(entrypoint="torchrun", args=["--nnodes=3", "t.py"], env={"S": "${replica_id}"})]),
     [("roles", 0, "args"), ("roles", 0, "env", "S")], ["--nnodes 3 is not the role's 2", "env S uses"]),
    (specs.AppDef("a", [role(entrypoint="torchrun", args=["--nproc_per_node=$N", "t.py"])]), [("roles", 0, "args")],
     ["--nproc_per_node $N"]),
])
def test_what_a_pytorchjob_cannot_run_is_refused_where_it_is_written(app: specs.AppDef, paths: List[Any],
                                                                      words: List[str]) -> None:
    e = refusal(app, flavor="pytorchjob")
    assert [p for p, _ in e.problems] == paths
    assert all(w in e.message for w in words), e.message
    assert "flavor=jobset" in (e.hint or "") and "trainjob" in (e.hint or "")


# ----------------------------------------------------------------------------
# trainjob
# ----------------------------------------------------------------------------


def test_trainjob_sets_the_trainer_and_refers_to_the_runtime() -> None:
    app = ddp(j="2x4", gpu="4", env='{"LOGLEVEL": "INFO"}')
    obj = the_object(app, flavor="trainjob")
    spec, name = obj["spec"], obj["metadata"]["name"]
    assert (obj["apiVersion"], obj["kind"]) == ("trainer.kubeflow.org/v1alpha1", "TrainJob")
    assert spec["runtimeRef"] == {"apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime",
                                  "name": "torch-distributed"}
    trainer = spec["trainer"]
    assert (trainer["image"], trainer["command"][3:], trainer["numNodes"], trainer["numProcPerNode"]) == (
        "ghcr.io/acme/train:1", ["bash"], 2, 4)
    assert trainer["command"][:3] == attempt.wrap([], FLAVOR_TABLE["trainjob"].attempt_parts)  # TORCHSPEC_ATTEMPT
    assert trainer["args"] == ["-c", "torchrun --tee 3 --role '' train.py"]
    assert trainer["resourcesPerNode"]["limits"] == {"cpu": "2", "memory": "1024Mi", "nvidia.com/gpu": "4"}
    env = env_of(trainer)
    assert env["LOGLEVEL"] == "INFO" and env["TORCHSPEC_RANK0_HOST"] == f"{name}-node-0-0.{name}"
    assert env["TORCHSPEC_REPLICA_ID"] == "$(JOB_COMPLETION_INDEX)" and env["TORCHSPEC_APP_ID"].endswith("@trainjob")
    patch, = spec["runtimePatches"]
    assert patch["manager"] == "torchspec.dev/torchspec"
    job, = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    pod = job["template"]["spec"]["template"]
    assert job["name"] == "node" and pod["metadata"]["labels"]["torchspec.dev/app-id"] == name
    assert pod["spec"]["containers"] == [{"name": "node", "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}]}]
    assert "ports" not in str(spec)  # the c10d port is the runtime's rendezvous now


def test_trainjob_carries_mounts_and_pod_options_through_the_runtime_patch() -> None:
    mounts = [specs.VolumeMount("data", "/data"), specs.DeviceMount("/dev/fuse", "/dev/fuse")]
    resource = specs.Resource(cpu=1, gpu=0, memMB=512, capabilities={"node.kubernetes.io/instance-type": "p4d"})
    patch = {"spec": {"tolerations": [{"operator": "Exists"}]}}
    app = specs.AppDef("a", [role(mounts=mounts, resource=resource, metadata={"kubernetes.pod_patch": patch})])
    spec = the_object(app, flavor="trainjob", runtime="my-runtime", service_account="sa", image_pull_secrets=["reg"],
                      shm_size="1Gi", queue="team-a", active_deadline=60)["spec"]
    assert spec["runtimeRef"]["name"] == "my-runtime" and spec["suspend"] is True
    assert spec["activeDeadlineSeconds"] == 60 and "numProcPerNode" not in spec["trainer"]
    pod = spec["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]["template"][
        "spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "sa" and pod["imagePullSecrets"] == [{"name": "reg"}]
    assert pod["nodeSelector"] == {"node.kubernetes.io/instance-type": "p4d"}
    assert pod["tolerations"] == [{"operator": "Exists"}]
    assert [v["name"] for v in pod["volumes"]] == ["dshm", "mount-0", "mount-1"]
    container, = pod["containers"]
    assert container["securityContext"] == {"privileged": True} and len(container["volumeMounts"]) == 3


def test_what_a_trainjob_cannot_carry_is_refused_where_it_is_written() -> None:
    patch = {"metadata": {"name": "x"}, "spec": {"hostNetwork": True, "tolerations": [],
                                                 "containers": [{"name": "proxy", "image": "ghcr.io/acme/proxy:1"}]}}
    app = specs.AppDef("a", [role(port_map={"http": 8080}, max_retries=2, min_replicas=1,
                                  metadata={"kubernetes.pod_patch": patch}), role(name="ps")])
    e = refusal(app, flavor="trainjob")
    patch_at = ("roles", 0, "metadata", "kubernetes.pod_patch")
    assert [p for p, _ in e.problems] == [("roles", 1), ("roles", 0, "min_replicas"), ("roles", 0, "max_retries"),
                                          ("roles", 0, "port_map", "http"), patch_at + ("metadata", "name"),
                                          patch_at + ("spec", "hostNetwork"), patch_at + ("spec", "containers", 0)]
    assert "a TrainJob cannot declare container ports" in e.message and "jobset" in (e.hint or "")


@pytest.mark.parametrize("cfg, words", [
    (dict(flavor="trainjob", ttl=5), "run option ttl does not apply to flavor trainjob"),
    (dict(flavor="trainjob", priority_class="p"), "run option priority_class does not apply to flavor trainjob"),
    (dict(flavor="job", runtime="r"), "run option runtime does not apply to flavor job: it is for flavor trainjob"),
    (dict(flavor="jobset", clean_pod_policy="All"), "it is for flavor pytorchjob"),
    (dict(flavor="volcano", queue="q", priority="p"), "run option priority does not apply to flavor volcano"),
    (dict(flavor="pytorchjob", priority="p"), "needs queue"),
    (dict(flavor="pytorchjob", clean_pod_policy="Some"), "must be one of None, Running, All"),
    (dict(flavor="pytorchjob", active_deadline=0), "active_deadline=0"),
    (dict(flavor="trainjob", runtime="Torch Distributed"), "run option runtime='Torch Distributed'"),
])
def test_options_only_some_flavors_take_are_checked(cfg: Dict[str, Any], words: str) -> None:
    assert words in refusal(ddp(j="2x1"), **cfg).message


# ----------------------------------------------------------------------------
# Queues, every flavor the way Kueue wants it
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("flavor, suspend_at", [("jobset", ("spec", "suspend")), ("pytorchjob", ("spec", "runPolicy",
                                                "suspend")), ("trainjob", ("spec", "suspend"))])
def test_the_queue_label_goes_on_the_object_kueue_admits_created_suspended(flavor: str, suspend_at: Any) -> None:
    obj = the_object(ddp(j="2x1"), flavor=flavor, queue="team-a", priority="batch-low")
    labels = obj["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/queue-name"] == "team-a" and labels["kueue.x-k8s.io/priority-class"] == "batch-low"
    node: Any = obj
    for key in suspend_at:
        node = node[key]
    assert node is True
    assert "kueue.x-k8s.io" not in str(obj["spec"])  # not on the pods: Kueue would manage them as pods too
    without = render(ddp(j="2x1"), flavor=flavor).objects[0]
    assert "kueue.x-k8s.io/queue-name" not in without["metadata"]["labels"] and "suspend" not in str(without["spec"])


def test_the_job_flavor_queues_each_job_and_says_kueue_admits_them_apart() -> None:
    app = specs.AppDef("a", [role(), role(name="ps")])
    request = render(app, queue="team-a", priority="high")
    service, *jobs = request.objects
    assert "kueue.x-k8s.io/queue-name" not in service["metadata"]["labels"]
    assert all(j["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a" and j["spec"]["suspend"] is True
               for j in jobs)
    assert any("Kueue admits each role's Job on its own" in n for n in request.notes)
    assert validate_manifests(request.objects, VERSIONS) == []


def test_volcano_keeps_its_own_queue() -> None:
    obj = the_object(ddp(j="2x1"), flavor="volcano", queue="research")
    assert obj["spec"]["queue"] == "research" and "kueue.x-k8s.io/queue-name" not in obj["metadata"]["labels"]


# ----------------------------------------------------------------------------
# App ids carry the flavor
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("app_id, ref", [
    ("ns:demo@pytorchjob", AppRef("demo", "ns", None, "pytorchjob")),
    ("admin@kind:ns:demo@trainjob", AppRef("demo", "ns", "admin@kind", "trainjob")),
    ("demo@jobset", AppRef("demo", flavor="jobset")),
    ("ns:demo", AppRef("demo", "ns")),
    ("ns:demo@", None),
    ("ns:demo@Bad_Kind", None),
])
def test_app_ids_name_the_flavor_after_an_at(app_id: str, ref: Any) -> None:
    assert AppRef.parse(app_id) == ref
    if ref is not None and ref.flavor:
        assert str(ref) == app_id


def test_the_validator_is_strict_about_the_kubeflow_crds() -> None:
    pytorchjob = render(ddp(j="2x1"), flavor="pytorchjob").objects[0]
    pytorchjob["spec"]["runPolicy"]["backofLimit"] = 1
    problems = validate_manifests([pytorchjob], VERSIONS, CRDS)
    assert len(problems) == 1 and "backofLimit" in problems[0] and "(CRD)" in problems[0]
    trainjob = render(ddp(j="2x1"), flavor="trainjob").objects[0]
    trainjob["spec"]["trainer"]["env"].append({"name": "BAD", "value": 1})
    assert any("(CRD)" in p for p in validate_manifests([trainjob], VERSIONS, CRDS))
    trainjob = render(ddp(j="2x1"), flavor="trainjob").objects[0]
    pod = trainjob["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0][
        "template"]["spec"]["template"]["spec"]
    pod["volumes"].append({"name": "m", "image": {"reference": "x"}})  # the CRD takes it; Kubernetes 1.25 did not
    assert validate_manifests([trainjob], ["1.25", "1.37"], CRDS) == [
        f"TrainJob {trainjob['metadata']['name']} trainer[0] pod template (1.25): spec.volumes.1: Additional"
        " properties are not allowed ('image' was unexpected)"]


def test_the_kubernetes_page_shows_what_each_flavor_carries_and_the_run_options() -> None:
    """The page's two tables are generated at build time (docs/hooks.py) from these functions, so they
    cannot drift; each flavor says how it carries every row."""
    page = (ROOT / "docs" / "schedulers" / "kubernetes.md").read_text()
    rows = {key for key, _ in CARRY_ROWS}  # a flavor says each, or its default does (order: refused)
    assert all(set({**f.carries_by_default, **f.carries}) == rows for f in FLAVOR_TABLE.values())
    assert "<!-- generated: kubernetes-flavors -->" in page and "<!-- generated: kubernetes-run-options -->" in page
    assert carry_table().splitlines()[0] == "| | " + " | ".join(f"`{name}`" for name in FLAVOR_TABLE) + " |"
    assert all(f"| `{name}` |" in run_options_table() for name, _ in kubernetes_run_opts())
