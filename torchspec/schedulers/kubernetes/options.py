"""The run options of ``kubernetes`` (``-c flavor=jobset,namespace=ml...``) and the checks of their values.

The runopts declare the types; :func:`check_run_options` refuses the values
Kubernetes would refuse (or misread), before any manifest is written.
"""

from __future__ import annotations

import re
from typing import List, Mapping, Optional, Tuple

from torchspec.errors import AppRefusedError
from torchspec.schedulers import grace, request_timeout
from torchspec.schedulers.kubernetes.flavors import FLAVOR_TABLE, FLAVORS
from torchspec.schedulers.kubernetes.names import (
    DNS_LABEL_RULE,
    DNS_SUBDOMAIN_RULE,
    is_dns_label,
    is_dns_subdomain,
    is_label_value,
    is_quantity,
)
from torchspec.schedulers.kubernetes.states import DEFAULT_FLAVOR, DEFAULT_RUNTIME
from torchspec.specs import CfgVal, runopts
from torchspec.specs.runopts import get_type_name

#: Run options that only some flavors take (each flavor lists its own in ``Flavor.takes``).
FLAVOR_OPTIONS = ("ttl", "priority_class", "priority", "runtime", "clean_pod_policy", "active_deadline",
                  "scheduling_queue")
CLEAN_POD_POLICIES = ("None", "Running", "All")


def _flavor_help() -> str:
    described = [f"{f.name} ({f.summary})" for f in FLAVOR_TABLE.values()]
    return "what to create: " + ", ".join(described[:-1]) + " or " + described[-1]


def kubernetes_run_opts() -> runopts:
    """The run options of ``kubernetes``; declared once, here."""
    opts = runopts()
    opts.add("flavor", type_=str, default=DEFAULT_FLAVOR, help=_flavor_help())
    opts.add("namespace", type_=str, default=None,
             help="namespace of the app (default: the kubeconfig context's, else default)")
    opts.add("context", type_=str, default=None, help="kubeconfig context to use (default: the current one)")
    opts.add("server_dry_run", type_=bool, default=False,
             help="dryrun, lint --scheduler (and submit, before it creates anything): have the cluster's API server"
                  " dry-run every object (dryRun=All: its validation, CEL rules and admission webhooks; nothing is"
                  " stored) and report what it refuses")
    opts.add("queue", type_=str, default=None,
             help="queue: the Kueue LocalQueue (label kueue.x-k8s.io/queue-name; the app is created suspended for"
                  " Kueue to admit), the Volcano queue for volcano")
    opts.add("priority", type_=str, default=None,
             help="Kueue WorkloadPriorityClass of the app (label kueue.x-k8s.io/priority-class); needs queue")
    opts.add("service_account", type_=str, default=None, help="service account the pods run as")
    opts.add("image_pull_secrets", type_=List[str], default=None,
             help="names of Secrets holding registry credentials, e.g. regcred;other")
    opts.add("priority_class", type_=str, default=None, help="PriorityClass of the pods")
    opts.add("ttl", type_=int, default=None,
             help="seconds after the app finishes before Kubernetes deletes it (ttlSecondsAfterFinished)")
    opts.add("k8s_version", type_=str, default=None,
             help="oldest Kubernetes the manifests must work on, e.g. 1.27; below 1.29 REPLICA retries use"
                  " backoffLimit (shared by the role's replicas) instead of backoffLimitPerIndex")
    opts.add("shm_size", type_=str, default=None, help="size limit of the memory-backed /dev/shm, e.g. 2Gi")
    opts.add("privileged", type_=bool, default=False, help="run the containers privileged")
    opts.add("attempt_env", type_=bool, default=True,
             help="give each container TORCHSPEC_ATTEMPT (0 on the first run) by running its command from /bin/sh;"
                  " false for an image without a shell: the command runs as it is, with only the parts of the"
                  " number (TORCHSPEC_ATTEMPT_FAILURES...)")
    opts.add("runtime", type_=str, default=None,
             help=f"trainjob: the ClusterTrainingRuntime the TrainJob refers to (default {DEFAULT_RUNTIME})")
    opts.add("clean_pod_policy", type_=str, default=None,
             help="pytorchjob: runPolicy.cleanPodPolicy, the pods deleted once the job ends: None, Running or All"
                  " (default Running: pods still running or pending are deleted, finished ones kept with their"
                  " logs)")
    grace.add_option(opts, "the pods' terminationGracePeriodSeconds; Kubernetes' default is 30")
    opts.add("active_deadline", type_=int, default=None,
             help="seconds the app may run before it is failed (activeDeadlineSeconds: each role's Job, each"
                  " JobSet attempt's Jobs, the PyTorchJob's runPolicy, the TrainJob); volcano has none")
    opts.add("scheduling_queue", type_=str, default=None,
             help="pytorchjob: runPolicy.schedulingPolicy.queue, the gang scheduler's queue (Volcano,"
                  " scheduler-plugins)")
    request_timeout.add_option(opts)
    return opts


def parse_version(text: Optional[str]) -> Optional[Tuple[int, int]]:
    """``"1.28"``, ``"v1.28.3"`` -> (1, 28); None for None or ``""``."""
    if not text:
        return None
    match = re.fullmatch(r"v?(\d+)\.(\d+)(?:\.\d+)?(?:[-+].*)?", str(text).strip())
    if match is None:
        raise AppRefusedError(f"run option k8s_version must look like 1.29, not {text!r}")
    return int(match.group(1)), int(match.group(2))


def flavor_name(cfg: Mapping[str, CfgVal]) -> str:
    """The flavor ``cfg`` asks for (checked by :func:`check_run_options`)."""
    return str(cfg.get("flavor") or DEFAULT_FLAVOR)


def _check_names(cfg: Mapping[str, CfgVal]) -> None:
    """The options that name Kubernetes objects follow Kubernetes' name rules."""
    namespace = cfg.get("namespace")
    if namespace and not is_dns_label(str(namespace)):
        raise AppRefusedError(f"run option namespace={namespace!r} is not a namespace name (a DNS-1123 label:"
                              f" {DNS_LABEL_RULE})")
    ttl = cfg.get("ttl")
    if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, int) or ttl < 0):
        raise AppRefusedError(f"run option ttl={ttl!r} must be a number of seconds, 0 or more")
    shm_size = cfg.get("shm_size")
    if shm_size and not is_quantity(str(shm_size)):
        raise AppRefusedError(f"run option shm_size={shm_size!r} is not a Kubernetes quantity (e.g. 2Gi, 512Mi, 1G)")
    for option in ("service_account", "priority_class"):
        value = cfg.get(option)
        if value and not is_dns_subdomain(str(value)):
            raise AppRefusedError(f"run option {option}={value!r} is not a valid name ({DNS_SUBDOMAIN_RULE})")
    for i, secret in enumerate(cfg.get("image_pull_secrets") or []):  # type: ignore[arg-type]
        if not is_dns_subdomain(str(secret)):  # the value is not echoed: it may be the credential itself
            raise AppRefusedError(f"run option image_pull_secrets: item {i + 1} is no Secret name"
                                  f" ({DNS_SUBDOMAIN_RULE}); the option takes the names of Secrets (e.g. regcred),"
                                  " never their content")


def _check_queue(queue: CfgVal, kueue: bool) -> None:
    """A Kueue queue is a label value as well as a name; a Volcano queue only a name."""
    name = str(queue)
    valid = is_label_value(name) and is_dns_subdomain(name) if kueue else is_dns_subdomain(name)
    if not valid:
        raise AppRefusedError(f"run option queue={queue!r} is not a valid queue name (lowercase letters, digits,"
                              f" inner '-' and '.'{', at most 63 characters' if kueue else ''})")


def check_run_options(cfg: Mapping[str, CfgVal]) -> None:
    """Refuse a run option Kubernetes would refuse (or misread), with AppRefusedError naming the option.

    The runopts types are checked before this; here are the values: names
    follow Kubernetes' rules, ``ttl`` is not negative, ``shm_size`` is a
    quantity.  ``image_pull_secrets`` must be Secret *names*: the manifests
    (and dry runs, which get pasted around) must never carry a Secret's
    content, which a pasted ``.dockerconfigjson`` or token would be.
    """
    flavor = flavor_name(cfg)
    if flavor not in FLAVORS:
        raise AppRefusedError(f"run option flavor must be one of {', '.join(FLAVORS)}, not {flavor!r}")
    _check_names(cfg)
    queue = cfg.get("queue")
    if queue:
        _check_queue(queue, FLAVOR_TABLE[flavor].kueue)
    parse_version(str(cfg.get("k8s_version") or ""))
    _check_flavor_options(cfg, flavor)


def _check_flavor_options(cfg: Mapping[str, CfgVal], flavor: str) -> None:
    """The options only some flavors take: given to one that does, and with values Kubernetes takes."""
    for option in FLAVOR_OPTIONS:
        if cfg.get(option) not in (None, "") and option not in FLAVOR_TABLE[flavor].takes:
            takers = [f.name for f in FLAVOR_TABLE.values() if option in f.takes]
            why = FLAVOR_TABLE[flavor].lacks.get(option)
            raise AppRefusedError(f"run option {option} does not apply to flavor {flavor}"
                                  + (f": {why}; it is for flavor " if why else ": it is for flavor ")
                                  + ", ".join(takers[:-1]) + (" and " if len(takers) > 1 else "") + takers[-1])
    for option in ("priority", "runtime", "scheduling_queue"):
        value = cfg.get(option)
        if value and not (is_dns_subdomain(str(value)) and (option != "priority" or is_label_value(str(value)))):
            raise AppRefusedError(f"run option {option}={value!r} is not a valid name ({DNS_SUBDOMAIN_RULE})")
    if cfg.get("priority") and not cfg.get("queue"):
        raise AppRefusedError("run option priority is Kueue's workload priority: it needs queue (the LocalQueue)")
    policy = cfg.get("clean_pod_policy")
    if policy and policy not in CLEAN_POD_POLICIES:
        raise AppRefusedError(f"run option clean_pod_policy must be one of {', '.join(CLEAN_POD_POLICIES)},"
                              f" not {policy!r}")
    deadline = cfg.get("active_deadline")
    if deadline is not None and (isinstance(deadline, bool) or not isinstance(deadline, int) or deadline <= 0):
        raise AppRefusedError(f"run option active_deadline={deadline!r} must be a number of seconds, 1 or more")


def run_options_table() -> str:
    """The run options as a markdown table, for docs/schedulers/kubernetes.md (docs/hooks.py puts it there):
    each option's type, default, the flavors that take it, and its help."""
    lines = ["| option | type | default | flavors | what it does |", "| --- | --- | --- | --- | --- |"]
    for name, opt in kubernetes_run_opts():
        takers = [f.name for f in FLAVOR_TABLE.values() if name not in FLAVOR_OPTIONS or name in f.takes]
        flavors = "all" if len(takers) == len(FLAVOR_TABLE) else ", ".join(takers)
        default = "" if opt.default in (None, False) else f"`{opt.default}`"
        kind = get_type_name(opt.opt_type).replace("typing.List", "list")
        lines.append(f"| `{name}` | {kind} | {default} | {flavors} | {opt.help} |")
    return "\n".join(lines)
