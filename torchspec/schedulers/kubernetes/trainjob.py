"""The ``trainjob`` flavor: one Kubeflow Trainer ``trainer.kubeflow.org/v1alpha1`` TrainJob.

Needs Kubeflow Trainer (v2.3 or newer) and the ClusterTrainingRuntime the
job refers to (``-c runtime=``, ``torch-distributed`` by default).  The
runtime owns the pods' shape: a JobSet whose replicated job ``node`` runs
the trainer container ``node`` on ``numNodes`` Indexed pods
(``{app}-node-0-{k}``, under the JobSet's subdomain), the torch runtime
handing each torchrun's rendezvous as ``PET_*`` variables.  A TrainJob
sets the trainer's ``image``, ``command``, ``args``, ``env``, ``numNodes``,
``numProcPerNode`` and ``resourcesPerNode``; everything else torchspec
puts on a pod goes through ``runtimePatches`` (a manager's patch of the
runtime's pod template), which takes only some pod fields.  A pod patch is
merged into the role's pod template as on every flavor and the TrainJob built
from the result, so it may change the role's container where a TrainJob has
a place for it (image, command, args, env, resources; volumeMounts and
securityContext), but not add a container.  What the model cannot express (a second role, ports, retries, elastic sizes, other
pod fields) is refused at dry run, each where the spec writes it.
"""

from __future__ import annotations

import dataclasses
from typing import List, Mapping, Optional, Tuple

from torchspec.schedulers.kubernetes import attempt
from torchspec.schedulers.kubernetes.flavor import Build, Flavor, Refusal, Version, operator_state, refuse
from torchspec.schedulers.kubernetes.kubeflow import is_elastic, launch_refusals, nproc_per_node, one_role, \
    rendezvous_port_names
from torchspec.schedulers.kubernetes.states import DEFAULT_RUNTIME, META_POD_PATCH, Obj
from torchspec.schedulers.kubernetes.torchrun import find_launch
from torchspec.schedulers.replicas import dns_label
from torchspec.specs import AppDef, AppState, CfgVal, Role

TRAINER_GROUP = "trainer.kubeflow.org"
#: The replicated job and container of the runtime's trainer (as every runtime Kubeflow ships names them).
NODE = "node"
#: The ``runtimePatches`` entry torchspec owns.
MANAGER = "torchspec.dev/torchspec"
#: The pod fields a runtime patch may set (Trainer v2.3), and the trainer container's (its env is the trainer's).
POD_FIELDS = ("affinity", "imagePullSecrets", "initContainers", "nodeSelector", "schedulingGates", "securityContext",
              "serviceAccountName", "terminationGracePeriodSeconds", "tolerations", "volumes")
CONTAINER_FIELDS = ("volumeMounts", "securityContext")
#: The fields ``runtimePatches`` takes for each of the runtime's containers (Trainer v2.3's CRD).
RUNTIME_CONTAINER_FIELDS = ("env", "securityContext", "volumeMounts")
#: What a pod patch may set on the role's container: spec.trainer carries image, command, args, env and
#: resources (as resourcesPerNode), runtimePatches the rest (the TrainJob is built from the patched template).
TRAINER_CONTAINER_FIELDS = ("name", "image", "command", "args", "env", "resources") + CONTAINER_FIELDS
_HINT = ("a TrainJob runs one role the runtime's way: use -c flavor=jobset (several roles, retries, ports),"
         " pytorchjob (a torchrun role: elastic, retries) or job")


def _pod_patch_refusals(role: Role) -> List[Refusal]:
    """The fields of the role's ``kubernetes.pod_patch`` that a TrainJob cannot carry.

    The patch is merged into the role's pod template as on every flavor, and the TrainJob is built from the
    result: the role's container (named after the role) may be patched in what the TrainJob has a place for
    (:data:`TRAINER_CONTAINER_FIELDS`); a container the runtime does not have cannot be added, as
    ``runtimePatches`` only patches the runtime's own containers (the CRD takes no image there)."""
    patch = role.metadata.get(META_POD_PATCH)
    if not isinstance(patch, Mapping):
        return []
    where = ("roles", 0, "metadata", META_POD_PATCH)
    out = [Refusal(where + ("metadata", key), f"role {role.name!r}: {META_POD_PATCH} sets metadata.{key}, which a"
                   " TrainJob cannot (only labels and annotations)")
           for key in (patch.get("metadata") or {}) if key not in ("labels", "annotations")]
    for key, value in (patch.get("spec") or {}).items():
        if key in ("containers", "initContainers"):
            out += _container_refusals(role, key, value, where + ("spec", key))
        elif key not in POD_FIELDS:
            out.append(Refusal(where + ("spec", key), f"role {role.name!r}: {META_POD_PATCH} sets spec.{key}, which"
                               f" a TrainJob's runtime patch cannot (it takes {', '.join(POD_FIELDS)})"))
    return out


def _container_refusals(role: Role, key: str, items: object, where: Tuple[object, ...]) -> List[Refusal]:
    """What a patch of ``containers`` or ``initContainers`` sets that a TrainJob has no place for: a field of
    the role's container beyond :data:`TRAINER_CONTAINER_FIELDS`, another container, or an init container
    beyond the fields ``runtimePatches`` takes (it patches the runtime's, never adds one). Items that are
    not named containers are left to the merge, which refuses them at their place."""
    if not isinstance(items, list):
        return []
    own = dns_label(role.name)
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            continue
        fields = [f for f in item if not str(f).startswith("$")]  # $patch, $retainKeys...: the merge's
        if key == "containers" and item["name"] != own:
            out.append(Refusal(where + (i,), f"role {role.name!r}: {META_POD_PATCH} adds container {item['name']!r}:"
                               " a TrainJob's pods run only the runtime's containers (runtimePatches patches"
                               " them, never adds one); put a sidecar in the ClusterTrainingRuntime, or use"
                               f" -c flavor=jobset or job (the role's own container is {own!r})"))
            continue
        allowed = TRAINER_CONTAINER_FIELDS if key == "containers" else ("name",) + RUNTIME_CONTAINER_FIELDS
        takes = (f"the role's container {own!r} takes {', '.join(TRAINER_CONTAINER_FIELDS[1:])}" if key == "containers"
                 else f"an init container of the runtime takes {', '.join(RUNTIME_CONTAINER_FIELDS)}; runtimePatches"
                      " patches the runtime's own, never adds one: a sidecar belongs in the ClusterTrainingRuntime,"
                      " or use -c flavor=jobset or job")
        out += [Refusal(where + (i, f), f"role {role.name!r}: {META_POD_PATCH} sets {key}[{i}].{f}, which a TrainJob"
                        f" has no place for ({takes})") for f in fields if f not in allowed]
    return out


def _refusals(app: AppDef) -> List[Refusal]:
    role = app.roles[0]
    out = one_role(app, "a TrainJob")
    launch = find_launch(role)
    if launch is not None:
        out += launch_refusals(role, launch, ("auto",))
    if is_elastic(role):
        out.append(Refusal(("roles", 0, "min_replicas"), f"role {role.name!r}: min_replicas={role.min_replicas}: a"
                           " TrainJob runs a fixed number of nodes (flavor pytorchjob runs elastic roles)"))
    if role.max_retries > 0:
        out.append(Refusal(("roles", 0, "max_retries"), f"role {role.name!r}: max_retries={role.max_retries}: a"
                           " TrainJob's retries are its runtime's (the ClusterTrainingRuntime's JobSet failurePolicy)"))
    rendezvous = rendezvous_port_names(role, launch)
    out += [Refusal(("roles", 0, "port_map", name), f"role {role.name!r}: port {name}={number}: a TrainJob cannot"
                    " declare container ports (the runtime's pod template owns them)")
            for name, number in role.port_map.items() if name not in rendezvous]
    out += [Refusal(("roles", 0, "secrets", i), f"role {role.name!r}: secret {ref.ref!r} with env_prefix: a TrainJob's"
                    " trainer takes env entries, not envFrom (name each key with env: and key:)")
            for i, ref in enumerate(role.secrets) if ref.env_prefix is not None]
    return out + _pod_patch_refusals(role)


def _runtime_patch(template: Obj) -> Obj:
    """What torchspec sets on the runtime's trainer pods beyond the trainer fields: its labels (which find the
    pods again), volumes, the node selector, pull secrets, the service account and the pod patch's fields."""
    spec = template["spec"]
    container = spec["containers"][0]
    pod: Obj = {key: spec[key] for key in POD_FIELDS if key in spec}
    pod["containers"] = [{"name": NODE, **{key: container[key] for key in CONTAINER_FIELDS if key in container}}]
    job = {"name": NODE, "template": {"spec": {"template": {"metadata": template["metadata"], "spec": pod}}}}
    return {"manager": MANAGER, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [job]}}}}


class TrainJobFlavor(Flavor):
    name = "trainjob"
    #: the runtime's JobSet makes the pods; its Jobs count an index's pods only if the runtime set
    #: backoffLimitPerIndex
    attempt_parts = (attempt.FAILURES, attempt.DISRUPTIONS, attempt.JOBSET_RESTARTS)
    summary = "a Kubeflow TrainJob on a ClusterTrainingRuntime (-c runtime=), for one role; needs Kubeflow Trainer"
    api_version = f"{TRAINER_GROUP}/v1alpha1"
    kind = "TrainJob"
    plural = "trainjobs"
    takes = ("priority", "runtime", "active_deadline")
    template_paths = {"trainer": "spec.trainer"}
    carries = {
        "needs": "Kubeflow Trainer (v2.3+) and the runtime", "roles": "one; more are refused",
        "entrypoint": "any; torchrun's rendezvous options become the runtime's", "elastic": "refused",
        "retries": "refused: they are the runtime's", "ports": "refused (a torchrun rendezvous port is the runtime's)",
        "mounts": "yes (runtimePatches)",
        "pod_patch": "the role's container's image, command, args, env, resources, volumeMounts, securityContext,"
                     " and the pod fields runtimePatches takes; others refused",
        "replica_id": "yes", "queue": "Kueue (spec.suspend)", "deadline": "spec.activeDeadlineSeconds",
    }

    def replica_host(self, app_id: str, key: str, k: int) -> str:
        return f"{app_id}-{NODE}-0-{k}.{app_id}"  # the runtime's JobSet: {jobset}-node-0-{k} under its subdomain

    def elastic_refusals(self, app: AppDef) -> List[Refusal]:
        """None here: adapt refuses an elastic role with every other part a TrainJob cannot carry, at once."""
        return []

    def adapt(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDef:
        refuse(self.name, _refusals(app), _HINT)
        role = app.roles[0]
        launch = find_launch(role)
        kept = {name: port for name, port in role.port_map.items() if name not in rendezvous_port_names(role, launch)}
        return dataclasses.replace(app, roles=[dataclasses.replace(role, args=launch.args if launch else role.args,
                                                                   port_map=kept)])

    def build(self, b: Build) -> List[Obj]:
        role = b.app.roles[0]
        template = b.templates[role.name]
        container = template["spec"]["containers"][0]
        trainer: Obj = {"image": container["image"], "command": container["command"], "args": container["args"],
                        "env": container["env"], "numNodes": role.num_replicas}
        launch = find_launch(role)
        if launch is not None and nproc_per_node(launch).isdigit():
            trainer["numProcPerNode"] = int(nproc_per_node(launch))
        if container.get("resources"):
            trainer["resourcesPerNode"] = container["resources"]
        spec: Obj = {"runtimeRef": {"apiGroup": TRAINER_GROUP, "kind": "ClusterTrainingRuntime",
                                    "name": str(b.option("runtime") or DEFAULT_RUNTIME)}}
        if b.suspend:
            spec["suspend"] = True
        if b.option("active_deadline"):
            spec["activeDeadlineSeconds"] = int(b.option("active_deadline"))
        spec["trainer"] = trainer
        spec["runtimePatches"] = [_runtime_patch(template)]
        return [b.top_object(self, spec)]

    def notes(self, b: Build) -> List[str]:
        role = b.app.roles[0]
        launch = find_launch(role)
        runtime = b.option("runtime") or DEFAULT_RUNTIME
        taken = f"; the runtime's rendezvous replaces torchrun's {', '.join(launch.dropped)}" \
            if launch is not None and launch.dropped else ""
        return [f"role {role.name}: the trainer of ClusterTrainingRuntime {runtime}, {role.num_replicas}"
                f" node(s){taken}"]

    def retry_how(self, role: Role, k8s_version: Version) -> str:
        return ("the runtime's (its Jobs' backoffLimit, 6 where the runtime sets none as in Kubeflow's"
                " torch-distributed, and its JobSet failurePolicy)")

    def controller_state(self, top: List[Obj]) -> Tuple[Optional[AppState], str]:
        return operator_state(top[0], "trainjob", "Complete", bool((top[0].get("spec") or {}).get("suspend")))

    def pod_templates(self, obj: Obj) -> List[Tuple[str, Obj]]:
        """The trainer's pod as the patch and the trainer fields make it, to check it as a core Pod."""
        spec = obj.get("spec") or {}
        trainer = spec.get("trainer") or {}
        try:
            patched = spec["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0][
                "template"]["spec"]["template"]
        except (KeyError, IndexError, TypeError):
            patched = {}
        pod = dict(patched.get("spec") or {})
        container = {"name": NODE, **{k: trainer[k] for k in ("image", "command", "args", "env") if k in trainer}}
        if "resourcesPerNode" in trainer:
            container["resources"] = trainer["resourcesPerNode"]
        for patch in pod.pop("containers", []):
            container.update({k: v for k, v in patch.items() if k != "name"})
        pod["containers"] = [container]
        return [("trainer[0]", {"metadata": patched.get("metadata") or {}, "spec": pod})]


FLAVOR = TrainJobFlavor()
