"""The slurm Scheduler: submits with ``sbatch``, asks ``scontrol``/``squeue``/``sacct``, cancels with ``scancel``.

This is where the Slurm client commands run and the log folder is touched;
what the script says comes from :mod:`.translate`, what Slurm's answers mean
from :mod:`.query`, and the log folder's layout from :mod:`.logs`.
"""

from __future__ import annotations

import getpass
import json
import logging
import os
import re
import shlex
import shutil
import subprocess
from datetime import datetime
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from torchspec.errors import BackendError, NotFoundError
from torchspec.times import utc_from_epoch
from torchspec.schedulers.api import (
    AppEvent,
    Capability,
    DescribeAppResponse,
    ListAppResponse,
    ReplicaWhyStatus,
    Scheduler,
    Stream,
    aware,
)
from torchspec.schedulers.slurm.logs import (
    find_job_dir,
    follow_log,
    kept_job_dirs,
    keep_submission,
    private_dir,
    read_replica,
    waiting_for,
    read_spec,
    remove_job_files,
    replica_folders,
    replica_log,
)
from torchspec.schedulers.request_timeout import DEFAULT_S, for_cfg, timed_out
from torchspec.schedulers.slurm.flags import ClientHelp, help_options, helps_needed
from torchspec.schedulers.secrets import read_carried
from torchspec.schedulers.slurm.options import slurm_run_opts
from torchspec.schedulers.slurm.secrets import sbatch_env
from torchspec.schedulers.slurm.query import (
    SACCT_FIELDS,
    SQUEUE_LIST_FORMAT,
    JobView,
    first_line,
    forgotten_job_state,
    job_message,
    job_state,
    parse_sacct,
    parse_scontrol,
    parse_squeue_list,
    replica_state,
    unreachable,
    view_from_json,
    view_from_scontrol,
)
from torchspec.schedulers.slurm.states import SPEC_FILE, TERMINAL, is_job_id
from torchspec.schedulers.slurm.translate import SlurmBatchRequest, app_to_request
from torchspec.specs import (
    NONE,
    AppDef,
    AppDryRunInfo,
    AppState,
    CfgVal,
    ReplicaStatus,
    Role,
    RoleStatus,
    runopts,
)

logger: logging.Logger = logging.getLogger(__name__)

#: (role name, number of replicas, the job component it runs in) for each role ``describe`` reports.
Layout = List[Tuple[str, int, Optional[JobView]]]


#: The replica status this backend reports (exit code and restarts).
SlurmReplicaStatus = ReplicaWhyStatus


class SlurmScheduler(Scheduler[Dict[str, CfgVal]]):
    """Submits each app as one (heterogeneous) batch job with ``sbatch`` and asks ``scontrol`` about it."""

    capabilities = frozenset({Capability.LOGS, Capability.FOLLOW_LOGS, Capability.LOG_WINDOW, Capability.LOG_STREAMS, Capability.DELETE, Capability.LABELS, Capability.ROLE_ORDER,
                              Capability.EVENTS})
    keeps_labels = True  # in the job's comment (and its spec.json)

    def __init__(self, session_name: str, request_timeout: Optional[float] = None) -> None:
        super().__init__("slurm", session_name)
        self._version: Optional[Tuple[int, int]] = None
        #: seconds any one Slurm command may take before the controller counts as not answering (each command
        #: is one request to slurmctld, or a few); see torchspec.schedulers.request_timeout
        self.request_timeout = request_timeout or float(DEFAULT_S)
        #: what ``sbatch --help`` and ``srun --help`` list, by command, read once (tests set them)
        self.helps: Dict[str, ClientHelp] = {}

    # -- running Slurm's commands -------------------------------------------------

    def _run(self, args: Sequence[str], check: bool = True, input_text: Optional[str] = None,
             extra_env: Optional[Mapping[str, str]] = None) -> subprocess.CompletedProcess[str]:
        """Run a Slurm client command; a missing command or a silent controller is a BackendError.
        ``extra_env``: variables added to the command's environment only (sbatch's secret carriers)."""
        exe = shutil.which(args[0])
        if exe is None:
            raise BackendError(
                f"{args[0]} not found: the Slurm client commands are not installed here",
                "run torchspec on a login node of the cluster, or install Slurm's client (e.g. apt-get install"
                " slurm-client) with the cluster's slurm.conf",
            )
        try:
            result = subprocess.run([exe, *args[1:]], capture_output=True, text=True, input=input_text,
                                    timeout=self.request_timeout,
                                    env={**os.environ, **extra_env} if extra_env else None)
        except subprocess.TimeoutExpired:
            raise timed_out("the Slurm controller", controller_address(), self.request_timeout,
                            f"`{shlex.join(args)}`", "`scontrol ping`, `sinfo`") from None
        err = result.stderr.strip()
        if result.returncode != 0 and unreachable(err):
            raise BackendError(f"the Slurm controller does not answer: {first_line(err)}",
                               "check that slurmctld runs (scontrol ping) and that SLURM_CONF names this cluster's"
                               " slurm.conf")
        if check and result.returncode != 0:
            raise BackendError(f"`{shlex.join(args[:2])} ...` failed: {first_line(err) or result.returncode}")
        return result

    def list_where(self, cfg: Mapping[str, Any]) -> List[ListAppResponse]:
        """:meth:`list`, with the run option ``request_timeout`` (``list -s slurm -c request_timeout=...``)."""
        self.request_timeout = for_cfg(cfg, self.request_timeout)
        return self.list()

    def _down_nodes(self, nodes: str) -> str:
        """``: vm-2 is down (reason)`` for each of ``nodes`` (a hostlist) that is down now: which node failed."""
        if not nodes:
            return ""
        out = self._run(["sinfo", "-h", "-N", "-n", nodes, "-t", "down,drain,fail", "-o", "%N|%E"], check=False)
        down = [line.split("|", 1) for line in out.stdout.splitlines() if "|" in line]
        said = [f"{name} is down" + (f" ({why})" if why and why != "none" else "") for name, why in down]
        return f": {', '.join(said)}" if said else ""

    def version(self) -> Tuple[int, int]:
        """Slurm's (major, minor), e.g. (22, 5): decides whether ``scontrol --json`` exists (23.02 on)."""
        if self._version is None:
            out = self._run(["scontrol", "--version"]).stdout
            match = re.search(r"(\d+)\.(\d+)", out)
            self._version = (int(match.group(1)), int(match.group(2))) if match else (0, 0)
        return self._version

    # -- submitting ---------------------------------------------------------

    def _run_opts(self) -> runopts:
        return slurm_run_opts()

    def _validate(self, app: AppDef, scheduler: str) -> None:
        """Accept roles without resources: Slurm then gives the partition's defaults."""

    def _submit_dryrun(self, app: AppDef, cfg: Dict[str, CfgVal]) -> AppDryRunInfo[SlurmBatchRequest]:
        from torchspec.redaction import for_describe
        from torchspec.specs.convert import dump_app

        cwd = os.getcwd()
        helps = {command: self.client_help(command) for command in helps_needed(app, cfg, cwd)}
        request = app_to_request(app, cfg, cwd, helps)
        request.spec = for_describe(dump_app(app))
        return AppDryRunInfo(request, str)

    def client_help(self, command: str) -> ClientHelp:
        """The option names ``COMMAND --help`` and ``--usage`` list (pyxis' too, for srun); unknown, and why,
        where they cannot be read: not installed (a dry run on a laptop), no slurm.conf, no answer."""
        if command not in self.helps:
            exe = shutil.which(command)
            self.helps[command] = (self._read_help(command, exe) if exe is not None
                                   else ClientHelp(command, None, f"{command} is not installed here"))
        return self.helps[command]

    def _read_help(self, command: str, exe: str) -> ClientHelp:
        texts = []
        for flag in ("--help", "--usage"):
            try:
                out = subprocess.run([exe, flag], capture_output=True, text=True, timeout=self.request_timeout)
            except (OSError, subprocess.TimeoutExpired) as e:
                return ClientHelp(command, None, f"`{command} {flag}` failed: {e}")
            if out.returncode != 0:
                why = first_line(out.stderr.strip()) or f"exit code {out.returncode}"
                return ClientHelp(command, None, f"`{command} {flag}` failed: {why}")
            texts.append(out.stdout)
        options = help_options(*texts)
        return ClientHelp(command, options) if options else ClientHelp(command, None, f"`{command} --help` lists none")

    def schedule(self, dryrun_info: AppDryRunInfo[SlurmBatchRequest]) -> str:
        """``sbatch --parsable`` the script, the secrets in sbatch's environment only (.secrets); then keep the
        spec and script next to the logs."""
        request = dryrun_info.request
        self.request_timeout = for_cfg(dryrun_info._cfg, self.request_timeout)  # -c request_timeout
        carried = sbatch_env(*read_carried(dryrun_info.app)) if dryrun_info.app else {}  # before anything is made
        private_dir(request.log_root)
        script = request.script()
        result = self._run(request.sbatch_args(), check=False, input_text=script, extra_env=carried)
        if result.returncode != 0:
            why = first_line(result.stderr.strip()).removeprefix("sbatch: error: ")
            raise BackendError(f"sbatch refused the job: {why or f'exit code {result.returncode}'}",
                               "run `torchspec dryrun -s slurm ...` and `sbatch --test-only` on its output for details")
        job_id = result.stdout.strip().split(";")[0].strip()
        if not is_job_id(job_id):
            raise BackendError(f"sbatch answered {result.stdout.strip()!r}, not a job id")
        keep_submission(request.log_root, job_id, request.spec, script)
        return job_id

    # -- asking -------------------------------------------------------------

    def read_job(self, app_id: str) -> List[JobView]:
        """Every component of job ``app_id`` as the controller knows it; [] once it forgot the job."""
        if not is_job_id(app_id):
            return []
        if self.version() >= (23, 2):
            result = self._run(["scontrol", "show", "job", "--json", app_id], check=False)
            if result.returncode == 0:
                jobs = json.loads(result.stdout).get("jobs", [])
                return sorted((view_from_json(j) for j in jobs), key=lambda v: v.offset)
        else:
            result = self._run(["scontrol", "show", "job", "-o", app_id], check=False)
            if result.returncode == 0:
                return sorted((view_from_scontrol(f) for f in parse_scontrol(result.stdout)), key=lambda v: v.offset)
        if "Invalid job id" in result.stderr:
            return self._read_sacct(app_id)
        raise BackendError(f"cannot read job {app_id}: {first_line(result.stderr.strip())}")

    def _read_sacct(self, app_id: str) -> List[JobView]:
        """The job from accounting, where configured; [] without accounting or when it does not know it."""
        if shutil.which("sacct") is None:
            return []
        result = self._run(["sacct", "-n", "-P", "-X", "-j", app_id, "-o", SACCT_FIELDS], check=False)
        return parse_sacct(result.stdout) if result.returncode == 0 else []

    def _job_dir(self, app_id: str, views: List[JobView]) -> Optional[str]:
        """The app's log folder, as a real path, from the job's comment or the default log root."""
        return find_job_dir(app_id, [str(v.log_root) for v in views if v.log_root])

    def _job_over(self, app_id: str) -> bool:
        """Whether the job can run no more: Slurm forgot it, or it ended."""
        views = self.read_job(app_id)
        return not views or job_state(views) in TERMINAL

    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        if not is_job_id(app_id):
            return None  # not a job id: no job, and no folder to read
        views = self.read_job(app_id)
        job_dir = self._job_dir(app_id, views)
        if views and views[0].log_root is None:
            return None  # a job torchspec did not submit
        if not views and job_dir is None:
            return None
        spec = read_spec(job_dir) if job_dir else None
        roles = _rebuild_roles(app_id, spec)
        roles_statuses, failed, replica_states = _role_statuses(_layout(views, roles, spec, job_dir), job_dir,
                                                                app_over=bool(views) and job_state(views) in TERMINAL)
        leader = views[0] if views else None
        metadata = {"log_dir": job_dir or "", "session_name": self.session_name}
        if leader is not None:
            state = job_state(views)
            msg = job_message(leader)
            if leader.state.startswith("NODE_FAIL"):
                msg += self._down_nodes(",".join(v.nodes for v in views if v.nodes))
            if failed and state == AppState.FAILED:
                msg = f"{'; '.join(failed)} ({msg})" if msg else "; ".join(failed)
            restarts = leader.restarts
            metadata["nodes"] = ",".join(v.nodes for v in views if v.nodes)
        else:
            # Slurm forgot the job and there is no accounting: the replicas' exit codes are all there is.
            state = forgotten_job_state(replica_states)
            msg = f"Slurm no longer knows job {app_id}; state from its log folder {job_dir}"
            restarts = 0
        # the comment, else (a job Slurm forgot) the metadata of the spec as submitted
        labels = (leader.labels if leader is not None else {}) or _spec_labels(spec)
        return DescribeAppResponse(app_id=app_id, state=state, num_restarts=restarts, msg=msg,
                                   roles_statuses=roles_statuses, roles=roles, metadata=metadata, labels=labels,
                                   name=str((spec or {}).get("name") or "") or None)

    def events(self, app_id: str) -> List[AppEvent]:
        """The job's record and its log folder's (:mod:`.events`)."""
        from torchspec.schedulers.slurm.events import job_events

        if not is_job_id(app_id):
            return []
        views = self.read_job(app_id)
        return job_events(views, self._job_dir(app_id, views))

    def exists(self, app_id: str) -> bool:
        if not is_job_id(app_id):
            return False
        views = self.read_job(app_id)
        if views:
            return views[0].log_root is not None
        return self._job_dir(app_id, views) is not None

    def list(self) -> List[ListAppResponse]:
        """The user's jobs that torchspec submitted (comment ``torchspec:...``), oldest first: those Slurm
        knows, then those it forgot (``MinJobAge`` after they ended) whose log folder is still in the default
        log root, with the state their replicas' exit codes tell and the labels of their spec."""
        out = self._run(["squeue", "-h", "-t", "all", "-u", getpass.getuser(), "-o", SQUEUE_LIST_FORMAT]).stdout
        apps = {j: ListAppResponse(app_id=j, state=s, labels=labels, created=when)
                for j, s, labels, when in parse_squeue_list(out)}
        for job_id, job_dir in kept_job_dirs():
            spec = read_spec(job_dir)
            if job_id not in apps and spec:
                _, _, states = _role_statuses(_layout([], _rebuild_roles(job_id, spec), spec, job_dir), job_dir)
                apps[job_id] = ListAppResponse(app_id=job_id, state=forgotten_job_state(states),
                                               labels=_spec_labels(spec), created=_written_at(job_dir))
        return [apps[j] for j in sorted(apps, key=int)]

    # -- cancelling and deleting -------------------------------------------------

    def _cancel_existing(self, app_id: str) -> None:
        """``scancel`` the job: Slurm signals every step (SIGTERM, SIGKILL after KillWait) of every component.

        A job Slurm forgot has ended: there is nothing to cancel.
        """
        # scancel takes more than ids (e.g. 12_[1-3]); only a job id is an app
        if is_job_id(app_id) and self.read_job(app_id):
            self._run(["scancel", app_id])

    def delete(self, app_id: str) -> None:
        """Cancel the job if it runs, then remove its log folder (Slurm forgets jobs by itself).

        Does nothing for an id that is no job id, or a job torchspec did not
        submit; removes only the folder :meth:`_job_dir` vouches for.
        """
        if not is_job_id(app_id):
            return
        views = self.read_job(app_id)
        job_dir = self._job_dir(app_id, views)
        if views and views[0].log_root is None:
            return
        if views and job_state(views) not in TERMINAL:
            self._run(["scancel", app_id])
        if job_dir:
            remove_job_files(app_id, job_dir)

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
        """Lines of replica ``k`` of ``role_name`` from its log files, without their timestamps.

        ``since`` (inclusive) and ``until`` (exclusive) select on the time each
        line reached the batch script (to the second).  With ``should_tail``
        the iterator follows the file until the job is over, or until this
        replica exited 0.  Files appear when the job starts: following a
        pending job waits for them.
        """
        views = self.read_job(app_id) if is_job_id(app_id) else []
        job_dir = self._job_dir(app_id, views)  # None for anything but a job id
        if job_dir is None:
            raise NotFoundError(f"unknown app {app_id!r}: no such Slurm job with a torchspec log folder")
        path = replica_log(app_id, job_dir, role_name, k, streams)
        pattern = re.compile(regex) if regex else None
        return follow_log(path, pattern, aware(since), aware(until), should_tail,
                          job_over=lambda: self._job_over(app_id))


def controller_address() -> str:
    """Where slurmctld is, as the slurm.conf the commands read says (``SlurmctldHost``, ``SlurmctldPort``), for
    an error that names it; the file is read, not asked of Slurm, since this is for when Slurm does not answer."""
    path = os.environ.get("SLURM_CONF") or "/etc/slurm/slurm.conf"
    found: Dict[str, str] = {}
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                key, sep, value = line.split("#", 1)[0].strip().partition("=")
                if sep and key.strip().lower() in ("slurmctldhost", "controlmachine", "slurmctldport"):
                    found.setdefault(key.strip().lower().replace("controlmachine", "slurmctldhost"), value.strip())
    except OSError:
        return f"the controller {path} names"
    host = found.get("slurmctldhost", "?")
    return f"{host}:{found.get('slurmctldport', '6817')} ({path})"


def _rebuild_roles(app_id: str, spec: Optional[Dict[str, Any]]) -> List[Role]:
    """The roles of the AppDef as submitted; none for a job handed to sbatch by hand (or a spec gone bad)."""
    from torchspec.specs.convert import build_app

    if not spec:
        return []
    try:
        return build_app(spec).roles
    except (KeyError, TypeError, ValueError) as e:
        logger.debug("cannot rebuild the roles of %s: %s", app_id, e)
        return []


def _written_at(job_dir: str) -> Optional[datetime]:
    """When a job Slurm forgot was submitted: when sbatch's caller wrote its spec into the job's log folder."""
    try:
        return utc_from_epoch(os.stat(os.path.join(job_dir, SPEC_FILE)).st_mtime)
    except OSError:
        return None


def _spec_labels(spec: Optional[Dict[str, Any]]) -> Dict[str, str]:
    """The labels of the app as submitted: its metadata."""
    return {str(k): str(v) for k, v in ((spec or {}).get("metadata") or {}).items()}


def _layout(views: List[JobView], roles: List[Role], spec: Optional[Dict[str, Any]], job_dir: Optional[str]
            ) -> Layout:
    """Each role to report, with its replica count and component: from the spec, else from the log folders.

    A job handed to sbatch by hand has no spec; its replicas' log folders
    still show its roles, so that status and logs show them too.
    """
    leader = views[0] if views else None
    by_offset = {v.offset: v for v in views}
    if not spec and job_dir:
        return [(name, count, leader) for name, count in replica_folders(job_dir)]
    return [(r.name, r.num_replicas, by_offset.get(g, leader)) for g, r in enumerate(roles)]


def _role_statuses(layout: Layout, job_dir: Optional[str], app_over: bool = False
                   ) -> Tuple[List[RoleStatus], List[str], List[AppState]]:
    """Each role's replica statuses, what failed (in words), and every replica's state; ``app_over``: the app is
    terminal, so a replica still waiting for another role never started."""
    roles_statuses: List[RoleStatus] = []
    failed: List[str] = []
    replica_states: List[AppState] = []
    for name, count, component in layout:
        replicas: List[ReplicaStatus] = []
        for k in range(count):
            code, restarts = read_replica(job_dir, name, k)
            waits = waiting_for(job_dir, name, k) if code is None else None
            state = replica_state(component, code, waiting=waits is not None, app_over=app_over)
            replica_states.append(state)
            if code:
                failed.append(f"{name}/{k} exited with code {code}")
            replicas.append(SlurmReplicaStatus(
                id=k, state=state, role=name, hostname=component.nodes if component else "",
                structured_error_msg=NONE, exit_code=code, num_restarts=restarts or 0,
                msg=(waits if state == AppState.PENDING else f"never started: it {waits}") if waits else "",
            ))
        roles_statuses.append(RoleStatus(role=name, replicas=replicas))
    return roles_statuses, failed, replica_states
