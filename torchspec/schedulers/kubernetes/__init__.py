"""The ``kubernetes`` scheduler: an app is a set of Kubernetes objects, in one of five flavors.

A run option ``flavor`` picks what torchspec creates:

    job       per role one ``batch/v1`` Job (Indexed, completions = parallelism
              = num_replicas) plus one headless Service per app; works on any
              cluster (the default)
    jobset    one ``jobset.x-k8s.io/v1alpha2`` JobSet, a replicated job per role
              (needs the JobSet controller)
    volcano   one ``batch.volcano.sh/v1alpha1`` Job, a task per role, gang
              scheduled (needs Volcano)
    pytorchjob  one ``kubeflow.org/v1`` PyTorchJob for one torchrun role: Master +
              Workers, the Training Operator's rendezvous (needs the operator)
    trainjob  one ``trainer.kubeflow.org/v1alpha1`` TrainJob on a
              ClusterTrainingRuntime (needs Kubeflow Trainer)

All of them start from the same pod template per role.  The replicas of a role share
that template, so per-replica values cannot be written into it:
``${replica_id}`` becomes ``$(TORCHSPEC_REPLICA_ID)``, which Kubernetes itself
expands in ``args`` and ``env`` from a variable the downward API fills with
the pod's index (the completion index the Job controller writes on each pod,
or Volcano's task index).

Everything torchspec needs to know about an app lives in the cluster, as
labels and annotations, so ``status``, ``logs``, ``list``, ``describe`` and
``cancel`` work from any shell that reaches the cluster, with no local state:

    torchspec.dev/app-id      the app's name (also the prefix of every object name)
    torchspec.dev/role-name   the role's key (a DNS label made of its name), on pods
    torchspec.dev/flavor      the flavor, on the top-level objects
    torchspec.dev/version     the torchspec that created the app
    torchspec.dev/role(s)     annotation: the role(s) as submitted, as JSON, for ``describe``

App ids are ``NAMESPACE:NAME`` (as in TorchX), or ``CONTEXT:NAMESPACE:NAME`` for
an app submitted with ``-c context=...``, with ``@FLAVOR`` after the name for
every flavor but ``job`` (an id without one is searched for in every kind): a kubeconfig context is a client-side
name the cluster knows nothing of, so the id has to carry it for ``status``,
``logs`` and ``cancel`` to reach the same cluster later (see ``names.AppRef``).
``${app_id}`` in a role's args and env, and ``TORCHSPEC_APP_ID``, are that
same id, so ``TORCHSPEC_JOB_ID`` is the app's real handle.

Retries map onto each flavor's own mechanism (see each flavor's ``retry_how``
and docs/schedulers/kubernetes.md): nothing of torchspec needs to keep running after ``submit``.

The package, lowest module first (each imports only those above it):

    states.py     label and annotation keys, env names, state maps
    names.py      Kubernetes' name rules, object names, the app id (AppRef)
    flavor.py     what a flavor is: the Flavor base class and its Build input
    torchrun.py   reading a role's torchrun launch, taking its rendezvous options out
    job.py, jobset.py, volcano.py, pytorchjob.py, trainjob.py
                  one module per flavor: what it creates, how to read it back
                  (kubeflow.py: what the two Kubeflow flavors share)
    flavors.py    the table of flavors (adding one: a module and an entry here)
    options.py    the run options and the checks of their values
    origin.py     where in the spec a field of a manifest comes from (lint's positions)
    validate.py   validation against Kubernetes' schemas and the bundled CRDs
    strategic_merge.py  Kubernetes' strategic merge patch (merge keys: patch_strategies.json, from its OpenAPI)
    pod_patch.py  kubernetes.pod_patch: merged into a pod template, refused where it removes what torchspec made
    translate.py  the request (what a dry run prints) and the pod template
    status.py     reading objects and pods back: states, failures, describe
    client.py     the API clients, creating and deleting objects, API errors
    server_dry_run.py  the API server's own dry run of a request (-c server_dry_run=True): its refusals
    logs.py       reading and following a replica's log across its pods
    scheduler.py  the KubernetesScheduler: the lifecycle
    check.py      what lint --scheduler kubernetes checks: the manifests against the schemas (TS602)
    crds/         the CRDs of the custom flavors, for validation

The ``kubernetes`` package is imported only inside functions that talk to a
cluster, so rendering manifests never pays for it; importing this package
imports nothing at all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from torchspec.schedulers.exports import lazy_exports

if TYPE_CHECKING:
    from torchspec.schedulers.kubernetes.scheduler import KubernetesScheduler


def create_scheduler(session_name: str, **kwargs: Any) -> "KubernetesScheduler":
    """The ``kubernetes`` entry point; the ``client``, ``kubeconfig``, ``context``, ``namespace`` and
    ``request_timeout`` (``TORCHSPEC_REQUEST_TIMEOUT``) keywords are used if given."""
    from torchspec.schedulers.kubernetes.scheduler import KubernetesScheduler
    from torchspec.schedulers.request_timeout import seconds

    return KubernetesScheduler(session_name, client=kwargs.get("client"), kubeconfig=kwargs.get("kubeconfig"),
                               context=kwargs.get("context"), namespace=kwargs.get("namespace"),
                               request_timeout=seconds(kwargs.get("request_timeout")))


#: What the single-file ``torchspec.schedulers.kubernetes`` module exported, still importable from the package
#: (loaded from where it now lives on first use).
_EXPORTS = {
    "AppRef": "names",
    "AppView": "status",
    "BUNDLED_CRDS": "validate",
    "FLAVORS": "flavors",
    "KubernetesReplicaStatus": "status",
    "KubernetesRequest": "translate",
    "KubernetesScheduler": "scheduler",
    "META_POD_PATCH": "states",
    "PodView": "status",
    "api_error": "client",
    "app_to_request": "translate",
    "check_capabilities": "translate",
    "check_run_options": "options",
    "crd_schema": "validate",
    "full_app_id": "translate",
    "kubernetes_run_opts": "options",
    "load_crds": "validate",
    "merge_patch": "translate",
    "pod_template": "translate",
    "pod_view": "status",
    "validate_manifests": "validate",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = ["create_scheduler", *_EXPORTS]
