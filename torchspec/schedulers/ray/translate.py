"""AppDef -> Ray job submission: the request ``schedule`` sends and the driver's plan, built by pure functions.

One app is one Ray job.  Its entrypoint is torchspec's driver
(``python -m torchspec.schedulers.ray.driver``), shipped with the job as a
``py_modules`` entry of its runtime_env, and its plan travels in the
runtime_env too (:data:`~.states.ENV_PLAN`, JSON).  The plan has one
placement group per role, one bundle per replica sized from the role's
resource, and every replica's command and environment with the macros filled
in: ``${replica_id}``, ``${img_root}`` (the role's image, as TorchX),
``${rank0_env}`` (the *name* ``TORCHSPEC_RANK0_HOST``, whose value the
driver sets to the node address of the role's replica 0 once the groups are
placed) and ``${app_id}`` (the submission id, known at ``schedule``: until
then :data:`APP_ID_MARK`, printed as ``${app_id}``).

Nothing here talks to Ray; the runtime_env's files are read by
:mod:`.options` before.
"""

from __future__ import annotations

import base64
import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional

from torchspec.errors import AppRefusedError
from torchspec.schedulers.secrets import carrier, check_env_names, refuse_kubernetes_only
from torchspec.schedulers.ray.states import (
    DRIVER_MODULE,
    ENV_PLAN,
    ENV_SECRETS,
    ENV_STOP_WAIT,
    META_APP,
    META_SESSION,
    META_SPEC,
    STOP_WAIT_S,
    is_role_name,
)
from torchspec.schedulers.replicas import ENV_RANK0_HOST, check_role_names, refuse_elastic, replica_env
from torchspec.specs.api import role_hosts_env
from torchspec.specs import AppDef, RetryPolicy, Role, macros

#: Stands for the submission id (the ``${app_id}`` of every replica) until ``schedule`` picks it.
APP_ID_MARK = "\x00APP_ID\x00"
#: What the dry run shows for the values that only exist as JSON of what it already shows.
PLAN_SHOWN = "<the plan below, as JSON>"
SPEC_SHOWN = "<the app's spec, as JSON, for describe>"
SECRETS_SHOWN = "<the secrets' values, read at submit: base64 of JSON>"
#: Left out of the upload of torchspec itself (and of the working_dir: they are never needed on the cluster).
#: ``__pycache__`` without a trailing slash: Ray hashes a folder's name too, even when a pattern leaves out
#: every file in it, so ``__pycache__/`` made the package's hash, and with it the upload, change each time
#: a command first imported a module of a new folder (``torchspec lint`` after ``submit``, say).
EXCLUDES = ["__pycache__", "*.pyc"]
_BYTES_PER_MB = 1024 * 1024


@dataclass
class ReplicaPlan:
    """One replica: the bundle it runs in (its index in the role's placement group), its command and env."""

    replica_id: int
    args: List[str]
    env: Dict[str, str]
    #: the role's secrets: {"env": VAR} or {"mount": FOLDER}, with the carrier the driver finds the value under
    #: and what a dry run shows; their values travel apart from the plan (RayJobRequest.submit_kwargs)
    secrets: List[Dict[str, str]] = field(default_factory=list)


@dataclass
class RolePlan:
    """One role: a placement group of ``num_replicas`` equal bundles, and what each replica runs."""

    role: str
    strategy: str
    bundle: Dict[str, float]
    retry_policy: str
    max_retries: int
    replicas: List[ReplicaPlan] = field(default_factory=list)
    #: resource capabilities and devices that are no Ray resource (not numbers), shown in the dry run
    ignored: List[str] = field(default_factory=list)
    #: the role's depends_on, ``[[ROLE, finished|ready], ...]``: the driver starts it once those roles finished
    #: or run (schedulers/order.py)
    depends_on: List[List[str]] = field(default_factory=list)
    #: the variable holding the role's hosts (``TORCHSPEC_HOSTS_<ROLE>``), which the driver sets in every replica
    hosts_env: str = ""


@dataclass
class RayJobRequest:
    """Everything ``schedule`` sends: where, the job's entrypoint, runtime_env and metadata, and the driver's plan."""

    address: str
    app_name: str
    runtime_env: Dict[str, Any]
    metadata: Dict[str, str]
    roles: List[RolePlan]
    placement_timeout: Optional[int] = None
    #: run option grace_period: a stopped replica's seconds between SIGTERM and SIGKILL (None: the driver's own)
    grace_period: Optional[int] = None
    spec: Dict[str, Any] = field(default_factory=dict)
    #: ``exec``: Ray runs the entrypoint with ``sh -c`` and, to stop the job, signals that shell and the children
    #: it has at that moment; a cancel that lands before the shell forks python would kill the shell alone and
    #: leave the driver running, its job STOPPED (ci50).  exec makes the driver the process Ray signals.
    entrypoint: str = f"exec python -u -m {DRIVER_MODULE}"

    def plan(self, submission_id: str = APP_ID_MARK) -> Dict[str, Any]:
        """What the driver reads: every role's group, bundles and replicas, ``${app_id}`` filled in."""
        data = {
            "app_id": submission_id,
            "app_name": self.app_name,
            "placement_timeout": self.placement_timeout,
            "grace_period": self.grace_period,
            "roles": [_role_data(r) for r in self.roles],
        }
        return _fill(data, submission_id)

    def submit_kwargs(self, submission_id: str, carried: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
        """The keyword arguments of ``JobSubmissionClient.submit_job`` for this request.  ``carried``: the
        secrets read at submit, by carrier, which go into the runtime_env (the one way Ray hands a job data
        that is not in its entrypoint or a file; whoever may read the job's details can read them there)."""
        runtime_env = dict(self.runtime_env)
        # Ray expands $NAME and ${NAME} in env_vars: every $ of the plan goes as JSON's \u0024, which it leaves be
        plan = json.dumps(self.plan(submission_id), separators=(",", ":")).replace("$", "\\u0024")
        runtime_env["env_vars"] = {**runtime_env.get("env_vars", {}), ENV_PLAN: plan}
        if carried:  # base64: no $ for Ray to expand, whatever a value holds
            encoded = base64.b64encode(json.dumps(dict(carried), separators=(",", ":")).encode()).decode()
            runtime_env["env_vars"][ENV_SECRETS] = encoded
        metadata = {**self.metadata, META_SPEC: json.dumps(self.spec, separators=(",", ":"))}
        return {"entrypoint": self.entrypoint, "submission_id": submission_id, "runtime_env": runtime_env,
                "metadata": metadata}

    def shown(self) -> Dict[str, Any]:
        """The request as data, as the dry run prints it: the submission, then the plan."""
        runtime_env = dict(self.runtime_env)
        runtime_env["env_vars"] = {**runtime_env.get("env_vars", {}), ENV_PLAN: PLAN_SHOWN}
        if any(r.secrets for plan in self.roles for r in plan.replicas):
            runtime_env["env_vars"][ENV_SECRETS] = SECRETS_SHOWN
        return {
            "address": f"http://{self.address}",
            "submission_id": f"<{self.app_name}-XXXXXX, chosen at submit>",
            "entrypoint": self.entrypoint,
            "runtime_env": runtime_env,
            "metadata": {**self.metadata, META_SPEC: SPEC_SHOWN},
            "plan": _fill(self.plan(), "${app_id}"),
        }

    def __str__(self) -> str:
        import yaml  # only dry runs print requests

        return "# Ray job submission (JobSubmissionClient.submit_job) and the driver's plan\n" + yaml.safe_dump(
            self.shown(), sort_keys=False, width=120, default_flow_style=None)


def _role_data(plan: RolePlan) -> Dict[str, Any]:
    data: Dict[str, Any] = {
        "role": plan.role,
        "strategy": plan.strategy,
        "bundles": [dict(plan.bundle) for _ in plan.replicas],
        "retry_policy": plan.retry_policy,
        "max_retries": plan.max_retries,
        "replicas": [{"replica_id": r.replica_id, "bundle_index": r.replica_id, "args": list(r.args),
                      "env": dict(r.env), **({"secrets": [dict(s) for s in r.secrets]} if r.secrets else {})}
                     for r in plan.replicas],
    }
    if plan.ignored:
        data["ignored"] = list(plan.ignored)
    if plan.depends_on:
        data["depends_on"] = [list(d) for d in plan.depends_on]
    data["hosts_env"] = plan.hosts_env
    return data


def _fill(data: Any, submission_id: str) -> Any:
    """``data`` with :data:`APP_ID_MARK` replaced by ``submission_id`` in every string."""
    if isinstance(data, str):
        return data.replace(APP_ID_MARK, submission_id)
    if isinstance(data, dict):
        return {key: _fill(value, submission_id) for key, value in data.items()}
    if isinstance(data, list):
        return [_fill(value, submission_id) for value in data]
    return data


def role_bundle(role: Role) -> tuple[Dict[str, float], List[str]]:
    """One replica's bundle (CPU, GPU, memory in bytes, numeric capabilities as custom resources), and what
    of the resource is no Ray resource.

    A role without a CPU count gets 1 (as TorchX), since Ray refuses empty
    bundles; ``memMB`` becomes Ray's ``memory`` resource.
    """
    res = role.resource
    bundle: Dict[str, float] = {"CPU": res.cpu if res.cpu and res.cpu > 0 else 1}
    if res.gpu and res.gpu > 0:
        bundle["GPU"] = res.gpu
    if res.memMB and res.memMB > 0:
        bundle["memory"] = int(res.memMB) * _BYTES_PER_MB
    ignored: List[str] = []
    for key, value in sorted(res.capabilities.items()):
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
            if key in ("CPU", "GPU", "memory", "object_store_memory"):
                raise AppRefusedError(f"role {role.name!r}: capability {key!r} is one of Ray's own resources;"
                                      f" give it as the resource's cpu, gpu or memMB")
            bundle[key] = value
        else:
            ignored.append(f"capability {key}={value!r}")
    ignored.extend(f"device {key}={value}" for key, value in sorted(res.devices.items()))
    return bundle, ignored


def role_to_plan(role: Role, strategy: str, role_index: int = 0) -> RolePlan:
    """The placement group and the replicas of ``role`` (``role_index`` in the app: its secrets' carriers),
    macros filled in (but for ``${app_id}``)."""
    if not is_role_name(role.name):
        raise AppRefusedError(f"role name {role.name!r} must be letters, digits, '_', '.' and '-', starting and"
                              f" ending with a letter or digit (it names the role's actors and log lines)")
    if role.num_replicas < 1:
        raise AppRefusedError(f"role {role.name!r} has {role.num_replicas} replicas; Ray needs at least one")
    bundle, ignored = role_bundle(role)
    replicas = []
    for k in range(role.num_replicas):
        values = macros.Values(img_root=role.image, app_id=APP_ID_MARK, replica_id=str(k), rank0_env=ENV_RANK0_HOST)
        filled = values.apply(role)
        env = dict(filled.env)
        env.update(replica_env(APP_ID_MARK, role.name, k, role.num_replicas, rank0_shown(role.name)))
        env.setdefault("PYTHONUNBUFFERED", "1")
        replicas.append(ReplicaPlan(replica_id=k, args=[filled.entrypoint, *filled.args], env=env,
                                    secrets=role_secrets(role, role_index)))
    return RolePlan(role=role.name, strategy=strategy, bundle=bundle, retry_policy=RetryPolicy(role.retry_policy).value,
                    max_retries=max(0, int(role.max_retries or 0)), replicas=replicas, ignored=ignored,
                    depends_on=[[d.role, d.when] for d in role.depends_on], hosts_env=role_hosts_env(role.name))


def role_secrets(role: Role, role_index: int) -> List[Dict[str, str]]:
    """The role's ``{env}`` and ``{mount}`` secrets as the driver reads them: where, the carrier, the placeholder."""
    return [{("env" if ref.env else "mount"): str(ref.env or ref.mount), "carrier": carrier(role_index, i),
             "value": ref.placeholder} for i, ref in enumerate(role.secrets) if ref.env or ref.mount]


def rank0_shown(role: str) -> str:
    """What the plan holds for ``TORCHSPEC_RANK0_HOST`` until the driver sets it."""
    return f"<node address of {role}/0, set by the driver>"


def add_hosts_shown(plans: List[RolePlan]) -> None:
    """Every replica's ``TORCHSPEC_HOSTS_<ROLE>`` of every role, as the plan holds them until the driver sets them
    (the nodes' addresses are known once the placement groups are placed)."""
    shown = {p.hosts_env: f"<node addresses of {p.role}'s replicas, set by the driver>" for p in plans}
    for replica in (r for p in plans for r in p.replicas):
        replica.env.update(shown)


def app_to_request(app: AppDef, address: str, strategy: str, runtime_env: Mapping[str, Any],
                   metadata: Mapping[str, str], session: str, placement_timeout: Optional[int] = None,
                   grace_period: Optional[int] = None) -> RayJobRequest:
    """The whole request for ``app``; talks to no Ray.  ``runtime_env`` comes from :func:`.options.runtime_env`."""
    check_role_names(app)
    refuse_kubernetes_only(app, "ray", mounts=True)
    refuse_elastic(app, "ray")  # every replica is gang-scheduled: never a silent wait for all of them
    env = dict(runtime_env)
    env["py_modules"] = [*env.get("py_modules", []), torchspec_folder()]
    env["excludes"] = [*env.get("excludes", []), *(e for e in EXCLUDES if e not in env.get("excludes", []))]
    # the driver's stop path needs more than Ray's default 3 s before SIGKILL under load; a runtime_env's own wins
    env["env_vars"] = {ENV_STOP_WAIT: str(STOP_WAIT_S + (grace_period or 0)), **(env.get("env_vars") or {})}
    request = RayJobRequest(
        address=address,
        app_name=app.name,
        runtime_env=env,
        metadata={**dict(metadata), META_APP: app.name, META_SESSION: session},
        roles=[role_to_plan(role, strategy, r) for r, role in enumerate(app.roles)],
        placement_timeout=placement_timeout,
        grace_period=grace_period,
    )
    add_hosts_shown(request.roles)
    check_env_names(app, {plan.role: set(plan.replicas[0].env) for plan in request.roles if plan.replicas})
    return request


def torchspec_folder() -> str:
    """The folder of the torchspec package, uploaded with every job so that the driver imports there."""
    import torchspec

    return os.path.dirname(os.path.abspath(torchspec.__file__))
