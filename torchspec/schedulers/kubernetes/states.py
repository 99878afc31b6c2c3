"""The words torchspec and Kubernetes share: label and annotation keys, env names, state maps.

The lowest module of the package: it imports nothing else from it, so every
other module (the pure translators and the code that reads the cluster back)
can name the same keys without importing one another.
"""

from __future__ import annotations

from typing import Any, Dict

from torchspec.schedulers.replicas import ENV_REPLICA_ID
from torchspec.specs import AppState

#: A Kubernetes object (or any part of one) as plain JSON data.
Obj = Dict[str, Any]

LABEL_APP_ID = "torchspec.dev/app-id"
LABEL_ROLE_NAME = "torchspec.dev/role-name"
LABEL_FLAVOR = "torchspec.dev/flavor"
LABEL_VERSION = "torchspec.dev/version"
LABEL_SESSION = "torchspec.dev/session"
#: Annotation of a ``job``-flavor Job: its role as JSON; and the role's position in the app.
ANNOTATION_ROLE = "torchspec.dev/role"
ANNOTATION_ROLE_INDEX = "torchspec.dev/role-index"
#: Annotation of a JobSet or Volcano Job: every role, in order, as a JSON list.
ANNOTATION_ROLES = "torchspec.dev/roles"
#: Annotation of every object of an app with labels: its labels (its AppDef.metadata) as JSON.
ANNOTATION_METADATA = "torchspec.dev/metadata"
#: the app's name as submitted (its AppDef.name), which ``describe`` shows: the object's name is the app id
ANNOTATION_APP_NAME = "torchspec.dev/app-name"
#: Kueue picks up workloads that carry this label (the LocalQueue's name).
LABEL_KUEUE_QUEUE = "kueue.x-k8s.io/queue-name"
#: The WorkloadPriorityClass Kueue gives the workload (run option ``priority``).
LABEL_KUEUE_PRIORITY = "kueue.x-k8s.io/priority-class"
#: The label Kueue puts on each Workload: the uid of the job object it admits.
LABEL_KUEUE_JOB_UID = "kueue.x-k8s.io/job-uid"
#: Kueue's Workload, which says why a suspended job is not admitted yet.
KUEUE_WORKLOAD_API = ("kueue.x-k8s.io/v1beta1", "workloads")

#: Where the Job controller writes a pod's index (annotation since 1.21, also a label since 1.28).
JOB_INDEX_KEY = "batch.kubernetes.io/job-completion-index"
#: Where Volcano writes a pod's index within its task (label; some releases also annotate it).
VOLCANO_INDEX_KEY = "volcano.sh/task-index"
#: What the Job controller writes on each pod it makes again for an index (under ``backoffLimitPerIndex``,
#: which every torchspec Job sets where the cluster has it): the index's earlier pods it counted as failed, and
#: those it ignored (a disruption: the podFailurePolicy's one Ignore rule, :data:`job.IGNORE_DISRUPTIONS`).
INDEX_FAILURE_COUNT = "batch.kubernetes.io/job-index-failure-count"
INDEX_IGNORED_FAILURE_COUNT = "batch.kubernetes.io/job-index-ignored-failure-count"
#: JobSet's label on every Job and pod of an attempt: how often the whole JobSet restarted before it.
JOBSET_RESTARTS_KEY = "jobset.sigs.k8s.io/restart-attempt"
#: Volcano's annotation on every pod: how often the Job restarted before the pod was made.
VOLCANO_RETRY_COUNT_KEY = "volcano.sh/job-retry-count"
#: The variable Indexed Jobs know their index by; declared explicitly so ``$(...)`` can use it.
ENV_JOB_COMPLETION_INDEX = "JOB_COMPLETION_INDEX"
#: What ``${replica_id}`` becomes: Kubernetes expands ``$(VAR)`` in command, args and env values.
REPLICA_ID_REF = f"$({ENV_REPLICA_ID})"
#: The pod's namespace, from the downward API: the namespace part of ``${app_id}`` refers to it, so
#: the id is right even for a dry run applied with ``kubectl apply -n NS`` (no namespace in the manifests).
ENV_NAMESPACE = "TORCHSPEC_NAMESPACE"
NAMESPACE_REF = f"$({ENV_NAMESPACE})"

#: The flavor an app gets without ``-c flavor=...``: plain Jobs work on any cluster.
DEFAULT_FLAVOR = "job"
#: The ClusterTrainingRuntime a TrainJob refers to without ``-c runtime=``.
DEFAULT_RUNTIME = "torch-distributed"

#: Role metadata key: a JSON merge patch (RFC 7386) applied to the role's pod template.
META_POD_PATCH = "kubernetes.pod_patch"
#: Resource capability naming the extended resource a role's ``gpu`` count asks for.
CAP_GPU_RESOURCE = "kubernetes.gpu_resource"
DEFAULT_GPU_RESOURCE = "nvidia.com/gpu"
#: Resource capabilities: resource name -> quantity, what the container requests (and may use at most) where
#: that differs from what cpu, memMB, gpu and devices ask for on both sides (``null``: not set at all).
CAP_REQUESTS = "kubernetes.requests"
CAP_LIMITS = "kubernetes.limits"
#: Resource capability: Linux capabilities added to the container (``[IPC_LOCK, SYS_PTRACE]``), no privileges.
CAP_LINUX_CAPABILITIES = "kubernetes.linux_capabilities"
#: Every resource capability this scheduler reads.
OWN_CAPABILITIES = (CAP_GPU_RESOURCE, CAP_REQUESTS, CAP_LIMITS, CAP_LINUX_CAPABILITIES)
#: App metadata kept in the annotation only, never made a label: the provenance summary (compact JSON, which no
#: label value can hold; torchspec.runner.provenance.LABEL).
ANNOTATION_ONLY_METADATA = ("torchspec.dev/provenance",)
#: The first Kubernetes release where ``backoffLimitPerIndex`` is on by default (beta).
PER_INDEX_MIN_VERSION = (1, 29)
#: The first Kubernetes release where a Job's ``podFailurePolicy`` and the pods' DisruptionTarget condition are
#: on by default (beta).
DISRUPTION_MIN_VERSION = (1, 26)

#: Volcano's job phases (status.state.phase).
VOLCANO_STATES: Dict[str, AppState] = {
    "Pending": AppState.PENDING,
    "Inqueue": AppState.PENDING,
    "Running": AppState.RUNNING,
    "Restarting": AppState.RUNNING,
    "Completing": AppState.RUNNING,
    "Completed": AppState.SUCCEEDED,
    "Aborting": AppState.FAILED,
    "Aborted": AppState.FAILED,
    "Terminating": AppState.FAILED,
    "Terminated": AppState.FAILED,
    "Failed": AppState.FAILED,
}
POD_PHASES: Dict[str, AppState] = {
    "Pending": AppState.PENDING,
    "Running": AppState.RUNNING,
    "Succeeded": AppState.SUCCEEDED,
    "Failed": AppState.FAILED,
    "Unknown": AppState.UNKNOWN,
}
#: Waiting reasons that mean the pod cannot start as it is, spelled out for ``status``.
WAITING_TROUBLE = {
    "ErrImagePull": "cannot pull its image",
    "ImagePullBackOff": "cannot pull its image",
    "InvalidImageName": "has an invalid image name",
    "CreateContainerConfigError": "cannot be configured (a missing ConfigMap or Secret?)",
    "CrashLoopBackOff": "keeps crashing",
}
