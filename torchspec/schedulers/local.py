"""The ``local`` scheduler: every replica is a process on this machine, and apps outlive the CLI.

``schedule`` writes the app's folder under the state dir and starts a
detached supervisor (:mod:`torchspec.schedulers.local_supervisor`) that
launches the replicas, timestamps their output into log files, restarts
them as the retry policy says and records everything in ``state.json``.
``describe``, ``list``, ``log_iter`` and ``cancel`` only read and write that
folder, so any later process (``torchspec status`` in another shell) sees the
same app.  The layout of one app::

    $STATE_DIR/apps/hello-k3x9q2/
        spec.json            the AppDef as submitted (macros not substituted)
        request.json         the request: each replica's command, env, cwd, log paths
        state.json           live state, replaced atomically under state.lock
        state.lock
        supervisor.lock      held by the supervisor while it lives
        supervisor.log       the supervisor's own output
        trainer/0/stdout.log, stderr.log, combined.log (and error.json if the replica writes one)

The module reads in the order every scheduler module does: state maps, pure
translators (AppDef -> request), the request whose ``__str__`` is what a dry
run prints, the options, the scheduler class, ``create_scheduler``.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Pattern

from torchspec.schedulers.api import DescribeAppResponse, ListAppResponse, Scheduler, Stream, aware
from torchspec.schedulers.entrypoint import resolve_entrypoint
from torchspec.schedulers.logfile import follow_lines
from torchspec.schedulers.replicas import (
    ENV_APP_ID,
    ENV_NUM_REPLICAS,
    ENV_RANK0_HOST,
    ENV_REPLICA_ID,
    ENV_ROLE_NAME,
    make_app_id,
    replica_env,
)
from torchspec.schedulers.local_state import (
    APPS,
    ERROR_FILE,
    FORMAT_VERSION,
    HEARTBEAT_TIMEOUT_S,
    STARTUP_TIMEOUT_S,
    REQUEST_FILE,
    SPEC_FILE,
    STATE_FILE,
    STDERR_LOG,
    STDOUT_LOG,
    COMBINED_LOG,
    SUPERVISOR_LOG,
    TERMINAL,
    default_state_dir,
    is_valid_app_id,
    kill_groups,
    now_iso,
    pid_alive,
    read_json,
    read_state,
    supervisor_lock_held,
    update_state,
    write_json,
)
from torchspec.specs import (
    NONE,
    AppDef,
    AppDryRunInfo,
    AppState,
    CfgVal,
    ReplicaStatus,
    RetryPolicy,
    Role,
    RoleStatus,
    macros,
    runopts,
)

logger: logging.Logger = logging.getLogger(__name__)

# ----------------------------------------------------------------------------
# State maps
# ----------------------------------------------------------------------------

#: ``state.json`` stores states by name; anything unrecognised reads as UNKNOWN.
_STATES: Dict[str, AppState] = {state.name: state for state in AppState}

#: Set by the supervisor at each launch: 0 first, then how often this replica was restarted.
ENV_RESTART_COUNT = "TORCHSPEC_RESTART_COUNT"
#: Where a replica (torchelastic's ``@record``) writes its error as JSON, shown by ``describe``.
ENV_ERROR_FILE = "TORCHELASTIC_ERROR_FILE"

#: The host every replica reaches rank 0 at.
RANK0_HOST = "localhost"


def _app_state(name: Optional[str]) -> AppState:
    return _STATES.get(name or "", AppState.UNKNOWN)


# ----------------------------------------------------------------------------
# Pure translators: AppDef + cfg -> request
# ----------------------------------------------------------------------------


def resolve_image(image: str, cwd: str, use_cwd: bool = False) -> str:
    """The absolute folder a role runs in: its image, relative to ``cwd`` (so ``.`` is ``cwd``).

    Raises ``ValueError`` when that is not a folder, since images of the
    local scheduler are folders on this machine, not container images.
    """
    if use_cwd:
        return os.path.abspath(cwd)
    folder = os.path.abspath(os.path.join(cwd, os.path.expanduser(image)))
    if not os.path.isdir(folder):
        raise ValueError(
            f"image {image!r} is not a folder on this machine ({folder}): the local scheduler runs each role"
            f" in a folder. Use `image: .` for the current folder, or the run option use_cwd=True to ignore"
            f" images written for container schedulers."
        )
    return folder


def _check_name(kind: str, name: str) -> None:
    """Role names become folder names; refuse the ones that would escape or collide."""
    if not name or "/" in name or "\0" in name or name in (".", ".."):
        raise ValueError(f"{kind} name {name!r} cannot be used as a folder name by the local scheduler")


def role_to_request(
    role: Role,
    app_id: str,
    app_dir: str,
    img_root: str,
    extra_env: Mapping[str, str],
    prepend_path: bool,
) -> "RoleRequest":
    """One :class:`RoleRequest` with a :class:`ReplicaRequest` per replica, macros substituted.

    Each replica's env is, later entries winning: the role's env, the
    ``env`` run option, then torchspec's own variables; ``TORCHELASTIC_ERROR_FILE``
    and ``PYTHONUNBUFFERED=1`` (so Python output reaches the log as it is
    printed) only where nobody set them.
    """
    _check_name("role", role.name)
    search_path = role.env.get("PATH", os.environ.get("PATH"))
    entrypoint = resolve_entrypoint(role.name, role.entrypoint, img_root, search_path)
    replicas: List[ReplicaRequest] = []
    for replica_id in range(role.num_replicas):
        values = macros.Values(
            img_root=img_root, app_id=app_id, replica_id=str(replica_id), rank0_env=ENV_RANK0_HOST
        )
        filled = values.apply(role)
        replica_dir = os.path.join(app_dir, role.name, str(replica_id))
        env: Dict[str, str] = dict(filled.env)
        env.update({key: values.substitute(value) for key, value in extra_env.items()})
        env.update(replica_env(app_id, role.name, replica_id, role.num_replicas, RANK0_HOST))
        env.setdefault(ENV_ERROR_FILE, os.path.join(replica_dir, ERROR_FILE))
        env.setdefault("PYTHONUNBUFFERED", "1")
        replicas.append(
            ReplicaRequest(
                role=role.name,
                replica_id=replica_id,
                args=[entrypoint] + list(filled.args),
                env=env,
                cwd=img_root,
                path_entry=img_root,
                prepend_path=prepend_path,
                stdout=os.path.join(replica_dir, STDOUT_LOG),
                stderr=os.path.join(replica_dir, STDERR_LOG),
                combined=os.path.join(replica_dir, COMBINED_LOG),
                error_file=env[ENV_ERROR_FILE],
            )
        )
    return RoleRequest(
        name=role.name,
        max_retries=role.max_retries,
        retry_policy=RetryPolicy(role.retry_policy).value,
        replicas=replicas,
    )


def set_cuda_visible_devices(app: AppDef, roles: List["RoleRequest"], device_count: int) -> None:
    """Give each replica of a GPU role its own ``CUDA_VISIBLE_DEVICES``, as TorchX's local scheduler does.

    Devices are handed out in role order, ``resource.gpu`` per replica.
    When the app asks for more GPUs than the machine has, nothing is set
    (with a warning) rather than making replicas share devices silently.
    """
    wanted = sum(max(role.resource.gpu, 0) * role.num_replicas for role in app.roles)
    if wanted <= 0:
        return
    if wanted > device_count:
        logger.warning(
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


def app_to_request(
    app: AppDef,
    cfg: Mapping[str, CfgVal],
    app_id: str,
    app_dir: str,
    session_name: str,
    cwd: str,
    device_count: int = 0,
    index_dir: Optional[str] = None,
) -> "LocalRequest":
    """The whole request for ``app`` under a resolved ``cfg``; touches no state, starts nothing.

    ``cwd`` is what ``image: .`` means (the submitting process's folder);
    ``device_count`` the GPUs ``auto_set_cuda_visible_devices`` may hand out.
    """
    if not app.roles:
        raise ValueError(f"app {app.name!r} has no roles")
    names = [role.name for role in app.roles]
    for role in app.roles:
        if names.count(role.name) > 1:
            raise ValueError(f"app {app.name!r} has two roles named {role.name!r}")
        if role.num_replicas <= 0:
            raise ValueError(f"role {role.name!r} has {role.num_replicas} replicas; it needs at least one")
    raw_env = cfg.get("env")
    extra_env = {str(k): str(v) for k, v in raw_env.items()} if isinstance(raw_env, dict) else {}
    use_cwd = bool(cfg.get("use_cwd"))
    prepend_path = bool(cfg.get("prepend_cwd"))
    roles = [
        role_to_request(role, app_id, app_dir, resolve_image(role.image, cwd, use_cwd), extra_env, prepend_path)
        for role in app.roles
    ]
    if cfg.get("auto_set_cuda_visible_devices"):
        set_cuda_visible_devices(app, roles, device_count)
    kill_grace = cfg.get("kill_grace_s")
    return LocalRequest(
        app_id=app_id,
        app_name=app.name,
        session_name=session_name,
        app_dir=app_dir,
        index_dir=index_dir,
        kill_grace_s=int(kill_grace) if isinstance(kill_grace, (int, float)) else DEFAULT_KILL_GRACE_S,
        roles=roles,
    )


# ----------------------------------------------------------------------------
# The request: what ``dryrun`` prints and ``schedule`` hands to the supervisor
# ----------------------------------------------------------------------------


@dataclass
class ReplicaRequest:
    """How to start one replica.

    ``env`` is what the replica gets on top of the supervisor's environment
    (which is the submitting process's); ``PATH`` is that environment's
    ``PATH`` with ``path_entry`` (the image folder) appended, or prepended
    when ``prepend_path``.
    """

    role: str
    replica_id: int
    args: List[str]
    env: Dict[str, str]
    cwd: str
    path_entry: str
    prepend_path: bool
    stdout: str
    stderr: str
    combined: str
    error_file: str

    def log_path(self, stream: Stream) -> str:
        return {Stream.STDOUT: self.stdout, Stream.STDERR: self.stderr, Stream.COMBINED: self.combined}[stream]


@dataclass
class RoleRequest:
    """A role's replicas and its retry settings (``retry_policy`` as its string value)."""

    name: str
    max_retries: int
    retry_policy: str
    replicas: List[ReplicaRequest]


@dataclass
class LocalRequest:
    """Everything the supervisor needs to run the app; stored as ``request.json``.

    ``index_dir`` is the scheduler's own ``apps`` folder when the ``state_dir``
    run option put the app elsewhere: ``schedule`` links the app there so
    status and log commands, which get no run options, still find it.
    ``spec`` is the AppDef as submitted, kept for ``spec.json``.
    """

    app_id: str
    app_name: str
    session_name: str
    app_dir: str
    kill_grace_s: int
    roles: List[RoleRequest]
    index_dir: Optional[str] = None
    spec: Dict[str, Any] = field(default_factory=dict, repr=False)

    def to_json(self) -> Dict[str, Any]:
        data = asdict(self)
        data.pop("spec")
        data["version"] = FORMAT_VERSION
        return data

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> "LocalRequest":
        roles = [
            RoleRequest(
                name=role["name"],
                max_retries=int(role["max_retries"]),
                retry_policy=role["retry_policy"],
                replicas=[ReplicaRequest(**replica) for replica in role["replicas"]],
            )
            for role in data["roles"]
        ]
        return LocalRequest(
            app_id=data["app_id"],
            app_name=data["app_name"],
            session_name=data["session_name"],
            app_dir=data["app_dir"],
            kill_grace_s=int(data["kill_grace_s"]),
            roles=roles,
            index_dir=data.get("index_dir"),
        )

    def role(self, name: str) -> Optional[RoleRequest]:
        return next((role for role in self.roles if role.name == name), None)

    def __str__(self) -> str:
        lines = [
            f"local app {self.app_id} (session {self.session_name!r})",
            f"  app folder: {self.app_dir}",
            f"  kill grace: {self.kill_grace_s}s (SIGTERM, then SIGKILL to each replica's process group)",
        ]
        if self.index_dir:
            lines.append(f"  linked from: {os.path.join(self.index_dir, self.app_id)}")
        for role in self.roles:
            lines.append(
                f"  role {role.name}: {len(role.replicas)} replica(s),"
                f" max_retries={role.max_retries}, retry_policy={role.retry_policy}"
            )
            for replica in role.replicas:
                path = f"{replica.path_entry}:$PATH" if replica.prepend_path else f"$PATH:{replica.path_entry}"
                lines += [
                    f"    {role.name}/{replica.replica_id}:",
                    f"      command:  {shlex.join(replica.args)}",
                    f"      cwd:      {replica.cwd}",
                    f"      PATH:     {path}",
                    "      env:",
                ]
                lines += [f"        {key}={value}" for key, value in replica.env.items()]
                lines.append(f"        {ENV_RESTART_COUNT}=<restarts so far, set at each launch>")
                lines += [
                    f"      stdout:   {replica.stdout}",
                    f"      stderr:   {replica.stderr}",
                    f"      combined: {replica.combined}",
                ]
        return "\n".join(lines)


# ----------------------------------------------------------------------------
# Options
# ----------------------------------------------------------------------------

DEFAULT_KILL_GRACE_S = 5


def local_run_opts() -> runopts:
    """The run options of ``local``; declared once, here."""
    opts = runopts()
    opts.add(
        "state_dir",
        type_=str,
        default=None,
        help="folder for this app's state and logs (default: $TORCHSPEC_HOME, else $XDG_STATE_HOME/torchspec,"
        " else ~/.local/state/torchspec); the default folder keeps a link so status and logs still find it",
    )
    opts.add(
        "use_cwd",
        type_=bool,
        default=False,
        help="run every role in the current folder whatever its image says (like TorchX's local_cwd),"
        " e.g. to try locally a spec written for a container scheduler",
    )
    opts.add(
        "prepend_cwd",
        type_=bool,
        default=False,
        help="put the role's folder (its image) first on the replicas' PATH instead of last,"
        " so programs there win over same-named ones on PATH",
    )
    opts.add(
        "auto_set_cuda_visible_devices",
        type_=bool,
        default=False,
        help="give each replica of a role that asks for GPUs its own CUDA_VISIBLE_DEVICES (resource.gpu"
        " devices each); does nothing when the app asks for more GPUs than nvidia-smi lists",
    )
    opts.add(
        "kill_grace_s",
        type_=int,
        default=DEFAULT_KILL_GRACE_S,
        help="seconds between SIGTERM and SIGKILL when replicas are stopped (cancel, restart, failure)",
    )
    opts.add(
        "env",
        type_=Dict[str, str],
        default=None,
        help="extra environment variables for every replica, as KEY:VALUE;KEY2:VALUE2;"
        " they override the role's env",
    )
    return opts


def _gpu_device_count() -> int:
    """GPUs that ``nvidia-smi -L`` lists; 0 without nvidia-smi."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return 0
    try:
        result = subprocess.run([exe, "-L"], capture_output=True, text=True, check=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as e:
        logger.warning("cannot list GPUs with nvidia-smi: %s", e)
        return 0
    return len([line for line in result.stdout.splitlines() if line.strip()])


# ----------------------------------------------------------------------------
# The scheduler
# ----------------------------------------------------------------------------


class LocalScheduler(Scheduler[Dict[str, CfgVal]]):
    """Runs each replica as a process on this machine under a detached supervisor.

    Resources are not enforced (``_validate`` accepts roles without one).
    Retry policies APPLICATION, ROLE and REPLICA are honoured with each role's
    ``max_retries``.  ``close`` stops nothing: apps keep running after the
    submitting process exits, which is the point.
    """

    def __init__(self, session_name: str, state_dir: Optional[str] = None) -> None:
        super().__init__("local", session_name)
        self.state_dir: str = (
            os.path.abspath(os.path.expanduser(state_dir)) if state_dir else default_state_dir()
        )
        self._supervisors: Dict[str, "subprocess.Popen[bytes]"] = {}

    # -- submitting ---------------------------------------------------------

    def _run_opts(self) -> runopts:
        return local_run_opts()

    def _validate(self, app: AppDef, scheduler: str) -> None:
        """Accept roles without resources: a local process gets whatever the machine has."""

    def _submit_dryrun(self, app: AppDef, cfg: Dict[str, CfgVal]) -> AppDryRunInfo[LocalRequest]:
        from torchspec.convert import dump_app

        app_id = make_app_id(app.name)
        override = cfg.get("state_dir")
        state_dir = os.path.abspath(os.path.expanduser(str(override))) if override else self.state_dir
        wants_gpus = bool(cfg.get("auto_set_cuda_visible_devices")) and any(
            role.resource.gpu > 0 for role in app.roles
        )
        request = app_to_request(
            app,
            cfg,
            app_id=app_id,
            app_dir=os.path.join(state_dir, APPS, app_id),
            session_name=self.session_name,
            cwd=os.getcwd(),
            device_count=_gpu_device_count() if wants_gpus else 0,
            index_dir=os.path.join(self.state_dir, APPS) if state_dir != self.state_dir else None,
        )
        request.spec = dump_app(app)
        return AppDryRunInfo(request, str)

    def schedule(self, dryrun_info: AppDryRunInfo[LocalRequest]) -> str:
        """Write the app folder, start its supervisor, and return the app id without waiting."""
        request = dryrun_info.request
        app_dir = request.app_dir
        try:
            os.makedirs(os.path.dirname(app_dir), exist_ok=True)
            os.mkdir(app_dir)
        except FileExistsError:
            raise RuntimeError(f"app folder {app_dir} already exists: submit the app again for a new id") from None
        except OSError as e:
            raise ValueError(f"cannot create the app folder {app_dir}: {e.strerror or e}"
                             " (check the state_dir run option or TORCHSPEC_HOME)") from None
        write_json(os.path.join(app_dir, SPEC_FILE), request.spec)
        write_json(os.path.join(app_dir, REQUEST_FILE), request.to_json())
        for role in request.roles:
            for replica in role.replicas:
                os.makedirs(os.path.dirname(replica.stdout), exist_ok=True)
                for path in (replica.stdout, replica.stderr, replica.combined):
                    open(path, "ab").close()
        write_json(os.path.join(app_dir, STATE_FILE), _initial_state(request))
        if request.index_dir:
            os.makedirs(request.index_dir, exist_ok=True)
            os.symlink(app_dir, os.path.join(request.index_dir, request.app_id))

        with open(os.path.join(app_dir, SUPERVISOR_LOG), "ab") as log:
            try:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "torchspec.schedulers.local_supervisor", app_dir],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=app_dir,
                    start_new_session=True,
                    close_fds=True,
                )
            except OSError as e:
                reason = f"cannot start the supervisor: {e}"
                update_state(app_dir, lambda st: _finish(st, "FAILED", reason))
                raise

        def record_pid(state: Dict[str, Any]) -> None:
            state["supervisor"]["pid"] = state["supervisor"].get("pid") or proc.pid

        update_state(app_dir, record_pid)
        self._supervisors[request.app_id] = proc
        return request.app_id

    # -- asking -------------------------------------------------------------

    def app_dir(self, app_id: str) -> Optional[str]:
        """The folder of ``app_id`` (links followed), or None if this scheduler does not know it."""
        if not is_valid_app_id(app_id):
            return None
        path = os.path.join(self.state_dir, APPS, app_id)
        if not os.path.isdir(path):
            return None
        return os.path.realpath(path)

    def exists(self, app_id: str) -> bool:
        """Whether the app's folder exists; cheaper than ``describe`` and has no side effects."""
        return self.app_dir(app_id) is not None

    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        app_dir = self.app_dir(app_id)
        if app_dir is None:
            return None
        state = read_state(app_dir)
        if state is None:
            return DescribeAppResponse(app_id=app_id, state=AppState.SUBMITTED, num_restarts=0)
        state = self._check_supervisor(app_dir, state)
        request = _read_request(app_dir)

        roles_statuses: List[RoleStatus] = []
        errors: List[tuple[float, str]] = []
        for role_name, role_state in state.get("roles", {}).items():
            replicas = []
            role_request = request.role(role_name) if request else None
            for replica in role_state.get("replicas", []):
                error = NONE
                if role_request is not None and replica["id"] < len(role_request.replicas):
                    error_file = role_request.replicas[replica["id"]].error_file
                    error = _read_error_file(error_file)
                    if error != NONE:
                        errors.append((os.path.getmtime(error_file), error))
                replicas.append(
                    LocalReplicaStatus(
                        id=replica["id"],
                        state=_app_state(replica.get("state")),
                        role=role_name,
                        hostname=RANK0_HOST,
                        structured_error_msg=error,
                        exit_code=replica.get("exit_code"),
                        num_restarts=int(replica.get("restarts") or 0),
                    )
                )
            roles_statuses.append(RoleStatus(role=role_name, replicas=replicas))

        msg = state.get("msg") or ""
        silence = time.time() - float(state.get("supervisor", {}).get("heartbeat", 0))
        if state.get("state") not in TERMINAL and silence > HEARTBEAT_TIMEOUT_S:
            msg = f"{msg} (no heartbeat from the supervisor for {silence:.0f}s: it may be stalled)".lstrip()
        return DescribeAppResponse(
            app_id=app_id,
            state=_app_state(state.get("state")),
            num_restarts=int(state.get("num_restarts", 0)),
            msg=msg,
            structured_error_msg=min(errors)[1] if errors else NONE,
            ui_url=f"file://{app_dir}",
            roles_statuses=roles_statuses,
            roles=_read_roles(app_dir),
            metadata={"app_dir": app_dir, "session_name": str(state.get("session_name", ""))},
        )

    def list(self) -> List[ListAppResponse]:
        """The apps in this scheduler's state dir (including linked ones), oldest first."""
        apps_dir = os.path.join(self.state_dir, APPS)
        try:
            names = os.listdir(apps_dir)
        except FileNotFoundError:
            return []
        found = []
        for name in names:
            app_dir = self.app_dir(name)
            state = read_state(app_dir) if app_dir else None
            if app_dir is None or state is None:
                continue
            state = self._check_supervisor(app_dir, state)
            found.append((state.get("submitted_at", ""), name, _app_state(state.get("state"))))
        return [ListAppResponse(app_id=name, state=app_state) for _, name, app_state in sorted(found)]

    # -- cancelling ---------------------------------------------------------

    def _cancel_existing(self, app_id: str) -> None:
        """Ask the supervisor to stop the app; if it is dead, stop the replicas from here.

        The request is recorded in ``state.json`` before the supervisor is
        signalled, so a supervisor that is still starting (no SIGTERM handler
        yet, ``ready`` false) finds it when it does start.
        """
        app_dir = self.app_dir(app_id)
        if app_dir is None:
            return

        def request_cancel(state: Dict[str, Any]) -> None:
            state["cancel_requested"] = True

        state = update_state(app_dir, request_cancel)
        if state.get("state") in TERMINAL:
            return
        supervisor = state.get("supervisor", {})
        pid = supervisor.get("pid")
        if self._supervisor_alive(app_dir, state):
            if not (supervisor.get("ready") and pid):
                return  # still starting: it reads cancel_requested once ready
            try:
                os.kill(pid, signal.SIGTERM)
                return
            except ProcessLookupError:
                pass  # it died just now: stop the replicas from here
        request = _read_request(app_dir)
        grace = request.kill_grace_s if request else DEFAULT_KILL_GRACE_S
        kill_groups(_running_groups(state), grace)

        def cancelled(state: Dict[str, Any]) -> None:
            for role in state.get("roles", {}).values():
                for replica in role.get("replicas", []):
                    if replica.get("state") not in TERMINAL:
                        replica["state"] = "CANCELLED"
                        replica["ended_at"] = now_iso()
            _finish(state, "CANCELLED", "cancelled; the supervisor was not running, so torchspec stopped the replicas")

        update_state(app_dir, cancelled)

    def delete(self, app_id: str) -> None:
        """Cancel the app if it runs, wait for it to end, then remove its folder (and the link to it)."""
        app_dir = self.app_dir(app_id)
        if app_dir is None:
            return
        self.cancel(app_id)
        request = _read_request(app_dir)
        deadline = time.monotonic() + (request.kill_grace_s if request else DEFAULT_KILL_GRACE_S) + 10
        while time.monotonic() < deadline:
            state = read_state(app_dir)
            if state is None or self._check_supervisor(app_dir, state).get("state") in TERMINAL:
                break
            time.sleep(0.1)
        else:
            from torchspec.errors import BackendError

            raise BackendError(f"app {app_id} did not stop in time; its folder {app_dir} is kept",
                               f"try again, or look at {os.path.join(app_dir, SUPERVISOR_LOG)}")
        link = os.path.join(self.state_dir, APPS, app_id)
        if os.path.islink(link):
            os.unlink(link)
        shutil.rmtree(app_dir)

    # -- logs ---------------------------------------------------------------

    def log_iter(
        self,
        app_id: str,
        role_name: str,
        k: int = 0,
        regex: Optional[str] = None,
        since: Optional[datetime] = None,
        until: Optional[datetime] = None,
        should_tail: bool = False,
        streams: Optional[Stream] = None,
    ) -> Iterable[str]:
        """Lines of replica ``k`` of ``role_name``, from its log files, with their timestamps removed.

        Every line the supervisor wrote carries the time it was read from the
        replica; ``since`` (inclusive) and ``until`` (exclusive) select on it,
        and naive datetimes are taken as local time.  ``streams`` defaults to
        the combined log.  With ``should_tail`` the iterator follows the file
        until the app is finished, or until this replica is finished and no
        retry policy can start it again, then returns the rest.  Restarts
        show as ``--- torchspec: restart N of replica ROLE/K (exit code X) ---``
        lines.  Arguments are checked here, before iteration starts.
        """
        app_dir = self.app_dir(app_id)
        if app_dir is None:
            raise ValueError(f"unknown app {app_id!r} in {self.state_dir}")
        request = _read_request(app_dir)
        if request is None:
            raise ValueError(f"app {app_id!r} has no readable {REQUEST_FILE}")
        role = request.role(role_name)
        if role is None:
            known = ", ".join(r.name for r in request.roles)
            raise ValueError(f"app {app_id!r} has no role {role_name!r}; its roles: {known}")
        if not 0 <= k < len(role.replicas):
            raise ValueError(f"role {role_name!r} of app {app_id!r} has replicas 0..{len(role.replicas) - 1}, not {k}")
        stream = Stream(streams) if streams is not None else Stream.COMBINED
        pattern = re.compile(regex) if regex else None
        return self._follow(
            app_dir,
            request,
            role_name,
            k,
            role.replicas[k].log_path(stream),
            pattern,
            aware(since),
            aware(until),
            should_tail,
        )

    def _follow(
        self,
        app_dir: str,
        request: LocalRequest,
        role_name: str,
        k: int,
        path: str,
        pattern: Optional[Pattern[str]],
        since: Optional[datetime],
        until: Optional[datetime],
        should_tail: bool,
    ) -> Iterator[str]:
        with open(path, "rb") as log:
            yield from follow_lines(log, _parse_log_line, pattern, since, until, should_tail,
                                    done=lambda: self._replica_done(app_dir, request, role_name, k))

    def _replica_done(self, app_dir: str, request: LocalRequest, role_name: str, k: int) -> bool:
        """True once replica ``k`` can write no more: the app ended, or nothing can restart the replica."""
        state = read_state(app_dir)
        if state is None:
            return False
        state = self._check_supervisor(app_dir, state)
        if state.get("state") in TERMINAL:
            return True
        role_state = state.get("roles", {}).get(role_name, {})
        replicas = role_state.get("replicas", [])
        if k >= len(replicas) or replicas[k].get("state") not in TERMINAL:
            return False
        for role in request.roles:
            if role.retry_policy == RetryPolicy.APPLICATION.value and state.get("app_restarts", 0) < role.max_retries:
                return False
        role = request.role(role_name)
        if role is None:
            return True
        if role.retry_policy == RetryPolicy.ROLE.value and role_state.get("restarts", 0) < role.max_retries:
            return False
        replica = replicas[k]
        if (
            role.retry_policy == RetryPolicy.REPLICA.value
            and replica.get("state") == "FAILED"
            and replica.get("restarts", 0) < role.max_retries
        ):
            return False
        return True

    # -- supervisor liveness ------------------------------------------------

    def _supervisor_alive(self, app_dir: str, state: Mapping[str, Any]) -> bool:
        """Whether the app's supervisor lives.

        Once it reported ready it holds ``supervisor.lock`` until it dies, and
        that is the whole test.  Before that (it is still starting) its pid
        must run, for at most ``STARTUP_TIMEOUT_S`` after the submit.
        """
        proc = self._supervisors.get(os.path.basename(app_dir))
        if proc is not None:
            proc.poll()
        supervisor = state.get("supervisor", {})
        if supervisor.get("ready"):
            return supervisor_lock_held(app_dir)
        starting = time.time() - float(supervisor.get("heartbeat", 0)) < STARTUP_TIMEOUT_S
        pid = supervisor.get("pid")
        return starting and (pid is None or pid_alive(pid))

    def _check_supervisor(self, app_dir: str, state: Dict[str, Any]) -> Dict[str, Any]:
        """``state``, or, when its supervisor died before the app finished, the app marked FAILED.

        The replicas of a dead supervisor have lost their log pipes and their
        restarts, so they are stopped (SIGTERM, SIGKILL a second later)
        rather than left running unsupervised.
        """
        if state.get("state") in TERMINAL:
            return state
        if self._supervisor_alive(app_dir, state):
            return state

        def mark_failed(current: Dict[str, Any]) -> None:
            if self._supervisor_alive(app_dir, current):
                return
            kill_groups(_running_groups(current), 1.0)
            for role in current.get("roles", {}).values():
                for replica in role.get("replicas", []):
                    if replica.get("state") not in TERMINAL:
                        replica["state"] = "FAILED"
                        replica["ended_at"] = now_iso()
            pid = current.get("supervisor", {}).get("pid")
            _finish(
                current,
                "FAILED",
                f"the supervisor (pid {pid}) died while the app was {current.get('state', 'SUBMITTED')};"
                f" its replicas were stopped. See {os.path.join(app_dir, SUPERVISOR_LOG)}",
            )

        return update_state(app_dir, mark_failed)

    def close(self) -> None:
        """Reap supervisors that have exited; running apps are left running on purpose."""
        for proc in self._supervisors.values():
            proc.poll()


# ----------------------------------------------------------------------------
# Helpers shared by the class and the supervisor
# ----------------------------------------------------------------------------


def _initial_state(request: LocalRequest) -> Dict[str, Any]:
    """The state ``schedule`` writes before the supervisor starts: every replica PENDING."""
    return {
        "version": FORMAT_VERSION,
        "app_id": request.app_id,
        "session_name": request.session_name,
        "state": "SUBMITTED",
        "num_restarts": 0,
        "app_restarts": 0,
        "msg": "",
        "cancel_requested": False,
        "submitted_at": now_iso(),
        "started_at": None,
        "ended_at": None,
        "supervisor": {"pid": None, "ready": False, "heartbeat": time.time()},
        "roles": {
            role.name: {
                "restarts": 0,
                "replicas": [
                    {
                        "id": replica.replica_id,
                        "state": "PENDING",
                        "pid": None,
                        "pgid": None,
                        "exit_code": None,
                        "restarts": 0,
                        "started_at": None,
                        "ended_at": None,
                    }
                    for replica in role.replicas
                ],
            }
            for role in request.roles
        },
    }


def _finish(state: Dict[str, Any], final: str, msg: str) -> Dict[str, Any]:
    state["state"] = final
    state["msg"] = msg
    state["ended_at"] = now_iso()
    return state


def _running_groups(state: Mapping[str, Any]) -> List[tuple[int, int]]:
    """``(pid, pgid)`` of every replica ``state`` records as started and not finished."""
    groups = []
    for role in state.get("roles", {}).values():
        for replica in role.get("replicas", []):
            if replica.get("state") not in TERMINAL and replica.get("pid") and replica.get("pgid"):
                groups.append((int(replica["pid"]), int(replica["pgid"])))
    return groups


def _read_request(app_dir: str) -> Optional[LocalRequest]:
    try:
        return LocalRequest.from_json(read_json(os.path.join(app_dir, REQUEST_FILE)))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _read_roles(app_dir: str) -> List[Role]:
    """The roles of ``spec.json``, for the runner to rebuild the AppDef; [] if unreadable."""
    from torchspec.convert import build_app

    try:
        return build_app(read_json(os.path.join(app_dir, SPEC_FILE))).roles
    except (OSError, ValueError, KeyError, TypeError) as e:
        logger.debug("cannot rebuild the roles of %s: %s", app_dir, e)
        return []


def _read_error_file(path: str) -> str:
    """A replica's JSON error file as compact JSON, or NONE when it left none (or an unreadable one)."""
    try:
        with open(path, encoding="utf-8") as src:
            return json.dumps(json.load(src))
    except (OSError, ValueError):
        return NONE


@dataclass
class LocalReplicaStatus(ReplicaStatus):
    """A ReplicaStatus that also carries what the supervisor knows: the exit code and restart count.

    A subclass, so ``torchspec.specs.ReplicaStatus`` stays exactly TorchX's.
    """

    exit_code: Optional[int] = None
    num_restarts: int = 0


def _parse_log_line(raw: bytes, with_time: bool = True) -> tuple[Optional[datetime], str]:
    """Split a stored line into its timestamp and the replica's text; lines without one keep it all.

    Parsing the timestamp is most of the cost of reading logs, so it is skipped
    unless ``since``/``until`` need it.
    """
    stamp, sep, rest = raw.partition(b"\t")
    if sep and _looks_like_stamp(stamp):
        if not with_time:
            return None, rest.decode("utf-8", errors="replace")
        try:
            return datetime.fromisoformat(stamp.decode("ascii")), rest.decode("utf-8", errors="replace")
        except ValueError:
            pass
    return None, raw.decode("utf-8", errors="replace")


def _looks_like_stamp(stamp: bytes) -> bool:
    """``2026-11-22T21:14:12.366000+00:00``: cheap shape test before trusting the split."""
    return 19 <= len(stamp) <= 40 and stamp[4:5] == b"-" and stamp[10:11] == b"T"


# ----------------------------------------------------------------------------
# Factory
# ----------------------------------------------------------------------------


def create_scheduler(session_name: str, **kwargs: Any) -> LocalScheduler:
    """The ``local`` entry point; ``state_dir`` is the one keyword used, others are ignored."""
    state_dir = kwargs.get("state_dir")
    return LocalScheduler(session_name, state_dir=str(state_dir) if state_dir else None)


__all__ = [
    "COMBINED_LOG",
    "DEFAULT_KILL_GRACE_S",
    "ENV_APP_ID",
    "ENV_ERROR_FILE",
    "ENV_NUM_REPLICAS",
    "ENV_RANK0_HOST",
    "ENV_REPLICA_ID",
    "ENV_RESTART_COUNT",
    "ENV_ROLE_NAME",
    "LocalRequest",
    "LocalScheduler",
    "RANK0_HOST",
    "ReplicaRequest",
    "RoleRequest",
    "STDERR_LOG",
    "STDOUT_LOG",
    "app_to_request",
    "create_scheduler",
    "default_state_dir",
    "local_run_opts",
    "make_app_id",
    "resolve_entrypoint",
    "resolve_image",
    "role_to_request",
    "set_cuda_visible_devices",
]
