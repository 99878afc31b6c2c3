"""AppDef -> the ``local`` request: the pure functions that build one (the classes are in ``request.py``).

:class:`LocalRequest` is what ``dryrun`` prints (its ``__str__``) and what
``schedule`` stores as ``request.json`` for the supervisor.  Nothing here
writes a file or starts a process; the translators only look at the file
system to check that images and entrypoints exist, so a typo fails the submit
instead of every replica.
"""

from __future__ import annotations

import os
from typing import Dict, List, Mapping, Optional

from torchspec.errors import AppRefusedError
from torchspec.schedulers.api import labels_of
from torchspec.schedulers.entrypoint import check_shell_command, resolve_entrypoint
from torchspec.schedulers.local.options import extra_env, kill_grace_s
from torchspec.schedulers.local.request import LocalRequest, ReplicaRequest, RoleRequest
from torchspec.schedulers.local.states import ENV_ERROR_FILE, ERROR_FILE, OUTPUT_LOG, RANK0_HOST
from torchspec.schedulers.replicas import ENV_RANK0_HOST, hosts_env, replica_env
from torchspec.specs import AppDef, CfgVal, RetryPolicy, Role, macros


# ----------------------------------------------------------------------------
# Pure translators: AppDef + cfg -> request
# ----------------------------------------------------------------------------


def resolve_image(image: str, cwd: str, use_cwd: bool = False) -> str:
    """The absolute folder a role runs in: its image, relative to ``cwd`` (so ``.`` is ``cwd``).

    Refuses (a ``ValueError``) a path that is not a folder, since images of
    the local scheduler are folders on this machine, not container images.
    """
    if use_cwd:
        return os.path.abspath(cwd)
    folder = os.path.abspath(os.path.join(cwd, os.path.expanduser(image)))
    if not os.path.isdir(folder):
        raise AppRefusedError(
            f"image {image!r} is not a folder on this machine ({folder}): the local scheduler runs each role"
            f" in a folder. Use `image: .` for the current folder, or the run option use_cwd=True to ignore"
            f" images written for container schedulers."
        )
    return folder


def _check_name(kind: str, name: str) -> None:
    """Role names become folder names; refuse the ones that would escape or collide."""
    if not name or "/" in name or "\0" in name or name in (".", ".."):
        raise AppRefusedError(f"{kind} name {name!r} cannot be used as a folder name by the local scheduler")


def _replica_request(
    role: Role,
    replica_id: int,
    app_id: str,
    app_dir: str,
    img_root: str,
    entrypoint: str,
    extra: Mapping[str, str],
    prepend_path: bool,
) -> ReplicaRequest:
    """Replica ``replica_id`` of ``role``, its macros substituted; see :func:`role_to_request` for its env."""
    values = macros.Values(img_root=img_root, app_id=app_id, replica_id=str(replica_id), rank0_env=ENV_RANK0_HOST)
    filled = values.apply(role)
    replica_dir = os.path.join(app_dir, role.name, str(replica_id))
    env: Dict[str, str] = dict(filled.env)
    env.update({key: values.substitute(value) for key, value in extra.items()})
    env.update(replica_env(app_id, role.name, replica_id, role.num_replicas, RANK0_HOST))
    env.setdefault(ENV_ERROR_FILE, os.path.join(replica_dir, ERROR_FILE))
    env.setdefault("PYTHONUNBUFFERED", "1")
    return ReplicaRequest(
        role=role.name,
        replica_id=replica_id,
        args=[entrypoint] + list(filled.args),
        env=env,
        cwd=img_root,
        path_entry=img_root,
        prepend_path=prepend_path,
        output=os.path.join(replica_dir, OUTPUT_LOG),
        error_file=env[ENV_ERROR_FILE],
    )


def role_to_request(
    role: Role,
    app_id: str,
    app_dir: str,
    img_root: str,
    extra_env: Mapping[str, str],
    prepend_path: bool,
) -> RoleRequest:
    """One :class:`RoleRequest` with a :class:`ReplicaRequest` per replica, macros substituted.

    Each replica's env is, later entries winning: the role's env, the
    ``env`` run option, then torchspec's own variables; ``TORCHELASTIC_ERROR_FILE``
    and ``PYTHONUNBUFFERED=1`` (so Python output reaches the log as it is
    printed) only where nobody set them.
    """
    _check_name("role", role.name)
    search_path = role.env.get("PATH", os.environ.get("PATH"))
    entrypoint = resolve_entrypoint(role.name, role.entrypoint, img_root, search_path)
    replicas = [
        _replica_request(role, replica_id, app_id, app_dir, img_root, entrypoint, extra_env, prepend_path)
        for replica_id in range(role.num_replicas)
    ]
    if replicas:  # the PATH the replicas get: their env's (else this process's), and the image folder
        first = replicas[0]
        replica_path = os.pathsep.join(p for p in (first.env.get("PATH", os.environ.get("PATH")), img_root) if p)
        check_shell_command(role.name, entrypoint, first.args[1:], img_root, replica_path)
    return RoleRequest(
        name=role.name,
        max_retries=role.max_retries,
        retry_policy=RetryPolicy(role.retry_policy).value,
        replicas=replicas,
        depends_on=[[d.role, d.when] for d in role.depends_on],
    )


def set_cuda_visible_devices(app: AppDef, roles: List[RoleRequest], device_count: int) -> None:
    """Give each replica of a GPU role its own ``CUDA_VISIBLE_DEVICES``, as TorchX's local scheduler does.

    Devices are handed out in role order, ``resource.gpu`` per replica.
    When the app asks for more GPUs than the machine has, nothing is set
    (with a warning) rather than making replicas share devices silently.
    """
    wanted = sum(max(role.resource.gpu, 0) * role.num_replicas for role in app.roles)
    if wanted <= 0:
        return
    if wanted > device_count:
        import logging  # only here: it costs every command's start-up

        logging.getLogger(__name__).warning(
            "not setting CUDA_VISIBLE_DEVICES: the app asks for %d GPUs, this machine has %d", wanted, device_count
        )
        return
    start = 0
    for role, request in zip(app.roles, roles):
        per_replica = max(role.resource.gpu, 0)
        if per_replica == 0:
            continue
        for replica in request.replicas:
            devices = range(start + per_replica * replica.replica_id, start + per_replica * (replica.replica_id + 1))
            replica.env["CUDA_VISIBLE_DEVICES"] = ",".join(str(device) for device in devices)
        start += per_replica * role.num_replicas


def _check_roles(app: AppDef) -> None:
    """Refuse an app the supervisor could not run: no roles, two roles of one name, a role without replicas."""
    if not app.roles:
        raise AppRefusedError(f"app {app.name!r} has no roles")
    names = [role.name for role in app.roles]
    for role in app.roles:
        if names.count(role.name) > 1:
            raise AppRefusedError(f"app {app.name!r} has two roles named {role.name!r}")
        if role.num_replicas <= 0:
            raise AppRefusedError(f"role {role.name!r} has {role.num_replicas} replicas; it needs at least one")


def app_to_request(
    app: AppDef,
    cfg: Mapping[str, CfgVal],
    app_id: str,
    app_dir: str,
    session_name: str,
    cwd: str,
    device_count: int = 0,
    index_dir: Optional[str] = None,
) -> LocalRequest:
    """The whole request for ``app`` under a resolved ``cfg``; touches no state, starts nothing.

    ``cwd`` is what ``image: .`` means (the submitting process's folder);
    ``device_count`` the GPUs ``auto_set_cuda_visible_devices`` may hand out.
    """
    _check_roles(app)
    env = extra_env(cfg)
    use_cwd = bool(cfg.get("use_cwd"))
    prepend_path = bool(cfg.get("prepend_cwd"))
    roles = [
        role_to_request(role, app_id, app_dir, resolve_image(role.image, cwd, use_cwd), env, prepend_path)
        for role in app.roles
    ]
    if cfg.get("auto_set_cuda_visible_devices"):
        set_cuda_visible_devices(app, roles, device_count)
    hosts = hosts_env(app, lambda role, k: RANK0_HOST)  # every replica runs on this machine
    for request in roles:
        for replica in request.replicas:
            replica.env.update(hosts)
    _add_secret_env(app, roles)
    return LocalRequest(
        app_id=app_id,
        app_name=app.name,
        session_name=session_name,
        app_dir=app_dir,
        index_dir=index_dir,
        kill_grace_s=kill_grace_s(cfg),
        roles=roles,
        labels=labels_of(app),
    )


def _add_secret_env(app: AppDef, roles: List[RoleRequest]) -> None:
    """Each replica's secret variables, by the carrier the supervisor gets their values in (schedule reads them)."""
    from torchspec.schedulers.secrets import secret_env_by_role

    by_role = secret_env_by_role(app, "local", {r.name: set(r.replicas[0].env) for r in roles if r.replicas})
    for request in roles:
        for replica in request.replicas:
            replica.secret_env = dict(by_role[request.name])


__all__ = [
    "LocalRequest",
    "ReplicaRequest",
    "RoleRequest",
    "app_to_request",
    "resolve_image",
    "role_to_request",
    "set_cuda_visible_devices",
]
