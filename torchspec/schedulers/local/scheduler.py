"""The ``local`` Scheduler class: submit, describe, list, logs, cancel and delete, all through the app folder.

``schedule`` writes the app folder and starts the detached supervisor
(:mod:`torchspec.schedulers.local.supervisor`); every other method only reads
and writes that folder (:mod:`torchspec.schedulers.local.state`), so any later
process sees the same app.  When a supervisor died before its app ended, the
first reader to notice marks the app FAILED and stops its replicas.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import signal
import subprocess
import time
from datetime import datetime
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Pattern

from torchspec.errors import AppRefusedError, NotFoundError, StateError
from torchspec.schedulers.secrets import carried_values
from torchspec.schedulers.api import (
    AppEvent,
    Capability,
    DescribeAppResponse,
    ListAppResponse,
    ReplicaRunStatus,
    Scheduler,
    Stream,
    aware,
    check_replica,
)
from torchspec.schedulers.local.logs import OutputParser, parse_log_line, replica_finished, view_blocks
from torchspec.schedulers.local.options import DEFAULT_KILL_GRACE_S, local_run_opts
from torchspec.schedulers.processes import kill_orphans, pid_alive
from torchspec.schedulers.local.state import (
    NO_SPACE,
    RESERVE_BYTES,
    damaged,
    end_replicas,
    finish_app,
    folder_problem,
    initial_state,
    is_valid_app_id,
    load_request,
    make_reserve,
    read_json,
    read_request,
    read_state,
    release_reserve,
    running_groups,
    saved_at,
    supervisor_died,
    supervisor_lock_held,
    unwritable,
    update_state,
    write_json,
    write_problem,
)
from torchspec.schedulers.local.states import (
    APPS,
    HEARTBEAT_TIMEOUT_S,
    RANK0_HOST,
    REQUEST_FILE,
    SPEC_FILE,
    STARTUP_TIMEOUT_S,
    STATE_FILE,
    SUPERVISOR_LOG,
    TERMINAL,
    app_state,
)
from torchspec.schedulers.local.translate import LocalRequest, app_to_request
from torchspec.schedulers.detached import start_detached
from torchspec.schedulers.filewatch import FileWatch, FolderWatch
from torchspec.schedulers.logfile import LineParser, follow_lines
from torchspec.schedulers.replicas import make_app_id
from torchspec.schedulers.state_dir import default_state_dir
from torchspec.times import utc_from_iso
from torchspec.specs import NONE, AppDef, AppDryRunInfo, AppState, CfgVal, Role, RoleStatus, runopts

#: What ``schedule`` starts, detached, for each app.
SUPERVISOR_MODULE = "torchspec.schedulers.local.supervisor"


#: The replica status this backend reports (exit code and restarts).
LocalReplicaStatus = ReplicaRunStatus


def _gpu_device_count() -> int:
    """GPUs that ``nvidia-smi -L`` lists; 0 without nvidia-smi."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return 0
    try:
        result = subprocess.run([exe, "-L"], capture_output=True, text=True, check=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as e:
        import logging  # only here: it costs every command's start-up

        logging.getLogger(__name__).warning("cannot list GPUs with nvidia-smi: %s", e)
        return 0
    return len([line for line in result.stdout.splitlines() if line.strip()])


class LocalScheduler(Scheduler[Dict[str, CfgVal]]):
    """Runs each replica as a process on this machine under a detached supervisor.

    Resources are not enforced (``_validate`` accepts roles without one).
    Retry policies APPLICATION, ROLE and REPLICA are honoured with each role's
    ``max_retries``.  ``close`` stops nothing: apps keep running after the
    submitting process exits, which is the point.
    """

    capabilities = frozenset({Capability.LOGS, Capability.FOLLOW_LOGS, Capability.LOG_WINDOW, Capability.LOG_STREAMS, Capability.DELETE, Capability.LABELS, Capability.ROLE_ORDER, Capability.EVENTS})
    keeps_labels = True  # in state.json

    def __init__(self, session_name: str, state_dir: Optional[str] = None) -> None:
        super().__init__("local", session_name)
        self.state_dir: str = (
            os.path.abspath(os.path.expanduser(state_dir)) if state_dir else default_state_dir()
        )
        self._supervisors: Dict[str, "subprocess.Popen[bytes]"] = {}
        self._watches: Dict[str, FolderWatch] = {}

    # -- submitting ---------------------------------------------------------

    def _run_opts(self) -> runopts:
        return local_run_opts()

    def _validate(self, app: AppDef, scheduler: str) -> None:
        """Accept roles without resources: a local process gets whatever the machine has."""

    def _submit_dryrun(self, app: AppDef, cfg: Dict[str, CfgVal]) -> AppDryRunInfo[LocalRequest]:
        from torchspec.redaction import for_describe
        from torchspec.specs.convert import dump_app

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
        request.spec = for_describe(dump_app(app))
        return AppDryRunInfo(request, str)

    def schedule(self, dryrun_info: AppDryRunInfo[LocalRequest]) -> str:
        """Write the app folder, start its supervisor, and return the app id without waiting."""
        request = dryrun_info.request
        carried = carried_values(dryrun_info.app) if dryrun_info.app else {}  # before anything is written
        _write_app_folder(request)
        proc = _start_supervisor(request.app_dir, carried)

        def record_pid(state: Dict[str, Any]) -> None:
            state["supervisor"]["pid"] = state["supervisor"].get("pid") or proc.pid

        update_state(request.app_dir, record_pid, [])  # a help to readers only: the supervisor records its pid
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

    def app_ids_here(self) -> List[str]:
        """The apps' folders (linked ones too), their state files left unread: all a bare id needs."""
        try:
            names = os.listdir(os.path.join(self.state_dir, APPS))
        except OSError:  # no state folder yet, or one that cannot be read: `status` of a handle says why
            return []
        return sorted(name for name in names if is_valid_app_id(name))

    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        app_dir = self.app_dir(app_id)
        if app_dir is None:
            return None
        state = read_state(app_dir)
        if state is None:
            if not os.path.exists(os.path.join(app_dir, REQUEST_FILE)):
                return None  # a folder that is no app (or one whose submit has only begun)
            return DescribeAppResponse(app_id=app_id, state=AppState.SUBMITTED, num_restarts=0)
        state = self._check_supervisor(app_dir, state)
        request = read_request(app_dir)

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
                        state=app_state(replica.get("state")),
                        role=role_name,
                        hostname=RANK0_HOST,
                        structured_error_msg=error,
                        exit_code=replica.get("exit_code"),
                        num_restarts=int(replica.get("restarts") or 0),
                    )
                )
            roles_statuses.append(RoleStatus(role=role_name, replicas=replicas))

        msg = _message(app_dir, state)
        spec = _read_spec(app_dir)
        return DescribeAppResponse(
            app_id=app_id,
            state=app_state(state.get("state")),
            num_restarts=int(state.get("num_restarts", 0)),
            msg=msg,
            structured_error_msg=min(errors)[1] if errors else NONE,
            ui_url=f"file://{app_dir}",
            roles_statuses=roles_statuses,
            roles=_read_roles(spec, app_dir),
            metadata={"app_dir": app_dir, "session_name": str(state.get("session_name", ""))},
            labels=dict(state.get("labels") or {}),
            name=str(spec.get("name") or "") or None,
        )

    def events(self, app_id: str) -> List[AppEvent]:
        """The supervisor's record of the app (:mod:`.events`)."""
        from torchspec.schedulers.local.events import read_events

        app_dir = self.app_dir(app_id)
        return [] if app_dir is None else read_events(app_dir, read_state(app_dir))

    def list(self) -> List[ListAppResponse]:
        """The apps in this scheduler's state dir (including linked ones), oldest first.

        An app whose folder is damaged is left out with a warning naming the file.
        """
        apps_dir = os.path.join(self.state_dir, APPS)
        try:
            names = os.listdir(apps_dir)
        except FileNotFoundError:
            return []
        except OSError as e:
            raise damaged(apps_dir, e) from None
        found = []
        for name in names:
            app_dir = self.app_dir(name)
            try:
                state = read_state(app_dir) if app_dir else None
                if app_dir is None or state is None:
                    continue
                state = self._check_supervisor(app_dir, state)
            except StateError as e:
                import logging  # only here: it costs every command's start-up

                logging.getLogger(__name__).warning("warning: skipping app %s: %s", name, e)
                continue
            found.append((state.get("submitted_at", ""), name, app_state(state.get("state")),
                          dict(state.get("labels") or {})))
        return [ListAppResponse(app_id=name, state=st, labels=labels, created=utc_from_iso(submitted))
                for submitted, name, st, labels in sorted(found)]

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

        unrecorded: List[OSError] = []  # a read-only or full disk: a running supervisor hears SIGTERM all the same
        state = update_state(app_dir, request_cancel, unrecorded)
        if state.get("state") in TERMINAL:
            return
        supervisor = state.get("supervisor", {})
        pid = supervisor.get("pid")
        if self._supervisor_alive(app_dir, state):
            if not (supervisor.get("ready") and pid):
                if unrecorded:
                    raise unwritable(os.path.join(app_dir, STATE_FILE), unrecorded[0])
                return  # still starting: it reads cancel_requested once ready
            try:
                os.kill(pid, signal.SIGTERM)
                return
            except ProcessLookupError:
                pass  # it died just now: stop the replicas from here
        kill_orphans(running_groups(state), _kill_grace_s(app_dir), app_id, saved_at(state))

        def cancelled(state: Dict[str, Any]) -> None:
            end_replicas(state, "CANCELLED")
            finish_app(
                state, "CANCELLED", "cancelled; the supervisor was not running, so torchspec stopped the replicas"
            )

        update_state(app_dir, cancelled, [])  # stopped all the same; status says why it is not recorded

    def delete(self, app_id: str) -> None:
        """Cancel the app if it runs, wait for it to end, then remove its folder (and the link to it)."""
        app_dir = self.app_dir(app_id)
        if app_dir is None:
            return
        self.cancel(app_id)
        deadline = time.monotonic() + _kill_grace_s(app_dir) + 10
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
        try:
            if os.path.islink(link):
                os.unlink(link)
            shutil.rmtree(app_dir)
        except OSError as e:
            raise unwritable(app_dir, e, "remove the app folder") from None
        release_reserve(app_dir)

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
            raise NotFoundError(f"unknown app {app_id!r} in {self.state_dir}")
        request = load_request(app_dir)
        check_replica(app_id, role_name, k, {r.name: len(r.replicas) for r in request.roles})
        role = request.role(role_name)
        assert role is not None
        stream = Stream(streams) if streams is not None else Stream.COMBINED
        replica = role.replicas[k]
        path, parse = replica.output, OutputParser(stream)
        if not os.path.exists(path) and os.path.exists(replica.legacy_log(stream)):
            path, parse = replica.legacy_log(stream), parse_log_line  # an app of an earlier torchspec
        pattern = re.compile(regex) if regex else None
        return self._follow(app_dir, request, role_name, k, path, parse, pattern, aware(since), aware(until),
                            should_tail)

    def log_blocks(self, app_id: str, role_name: str, k: int, streams: Optional[Stream],
                   prefix: bytes) -> Optional[Iterator[bytes]]:
        """All of replica ``k``'s log as :meth:`log_iter` gives it (no filter, no tail), each line after
        ``prefix``, in blocks of bytes; None for an app of an earlier torchspec (its files are read by line)."""
        app_dir = self.app_dir(app_id)
        request = read_request(app_dir) if app_dir is not None else None
        if app_dir is None or request is None:
            return None  # log_iter says why
        check_replica(app_id, role_name, k, {r.name: len(r.replicas) for r in request.roles})
        role = request.role(role_name)
        assert role is not None
        path = role.replicas[k].output
        if not os.path.isfile(path):
            return None  # log_iter reads it, or says what is wrong with it
        return view_blocks(path, Stream(streams) if streams is not None else Stream.COMBINED, prefix)

    def _follow(
        self,
        app_dir: str,
        request: LocalRequest,
        role_name: str,
        k: int,
        path: str,
        parse: LineParser,
        pattern: Optional[Pattern[str]],
        since: Optional[datetime],
        until: Optional[datetime],
        should_tail: bool,
    ) -> Iterator[str]:
        # following: woken by each write to the log, so `logs -f` shows a line as soon as it is stored
        try:
            log = open(path, "rb")
        except OSError as e:
            raise damaged(path, e) from None
        watch = FileWatch(path) if should_tail else None
        try:
            with log:
                yield from follow_lines(log, parse, pattern, since, until, should_tail,
                                        done=lambda: self._replica_done(app_dir, request, role_name, k),
                                        wait=watch.wait if watch else None)
        finally:
            if watch is not None:
                watch.close()

    def _replica_done(self, app_dir: str, request: LocalRequest, role_name: str, k: int) -> bool:
        """True once replica ``k`` can write no more: the app ended, or nothing can restart the replica."""
        state = read_state(app_dir)
        if state is None:
            return False
        return replica_finished(request, self._check_supervisor(app_dir, state), role_name, k)

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

        last: List[str] = []

        def mark_failed(current: Dict[str, Any]) -> None:
            if self._supervisor_alive(app_dir, current):
                return
            last.append(str(current.get("state", "SUBMITTED")))
            kill_orphans(running_groups(current), 1.0, os.path.basename(app_dir), saved_at(current))
            supervisor_died(current, app_dir)

        unrecorded: List[OSError] = []
        state = update_state(app_dir, mark_failed, unrecorded)
        if unrecorded and last:  # FAILED for this reader only: the next one looks again
            problem = write_problem(str(unrecorded[0].filename), unrecorded[0])
            state["msg"] = (f"how the app ended was not recorded: {problem}; its supervisor (pid"
                            f" {state.get('supervisor', {}).get('pid')}) is gone and no process of the app runs"
                            f" any more (last recorded: {last[0]})")
        return state

    def wait_for_change(self, app_id: str, timeout: float) -> None:
        """Wake when the app's folder changes (the supervisor replaces state.json on every change)."""
        watch = self._watches.get(app_id)
        if watch is None:
            app_dir = self.app_dir(app_id)
            if app_dir is None:
                super().wait_for_change(app_id, timeout)
                return
            watch = self._watches[app_id] = FolderWatch(app_dir)
        watch.wait(timeout)

    def close(self) -> None:
        """Reap supervisors that have exited and free folder watches; running apps are left running on purpose."""
        for proc in self._supervisors.values():
            proc.poll()
        for watch in self._watches.values():
            watch.close()
        self._watches.clear()


#: Why a folder cannot be written that is the disk's doing, not the user's choice of folder (BackendError, exit 6).
_DISK_ERRORS = NO_SPACE | {errno.EROFS, errno.EIO}


def _message(app_dir: str, state: Mapping[str, Any]) -> str:
    """The app's message, and what keeps torchspec from recording it: a full or read-only disk, a stall."""
    parts = [state.get("msg") or ""]
    if state.get("state") not in TERMINAL:
        problem = folder_problem(app_dir)
        silence = time.time() - float(state.get("supervisor", {}).get("heartbeat", 0))
        if problem:
            parts.append(f"{problem}: the state shown is the last torchspec could record")
        elif silence > HEARTBEAT_TIMEOUT_S:
            parts[0] = f"{parts[0]} (no heartbeat from the supervisor for {silence:.0f}s: it may be stalled)".lstrip()
    parts.append(state.get("write_error") or "")
    return "; ".join(part for part in parts if part)


def _write_app_folder(request: LocalRequest) -> None:
    """Everything the supervisor reads, in a new folder: spec, request, empty logs, the first state.

    The log files exist before any replica does, so ``logs`` right after a
    submit reads an empty log instead of failing.  A ``state_dir`` elsewhere
    gets its link in the scheduler's own ``apps`` folder.  A folder that
    cannot be written whole (the disk full) is removed again: no half app.
    """
    app_dir = request.app_dir
    try:
        os.makedirs(os.path.dirname(app_dir), exist_ok=True)
        os.mkdir(app_dir)
    except OSError as e:
        if isinstance(e, FileExistsError) and os.path.isdir(app_dir):
            raise RuntimeError(f"app folder {app_dir} already exists: submit the app again for a new id") from None
        if e.errno in _DISK_ERRORS:
            raise unwritable(app_dir, e, "create the app folder") from None
        raise AppRefusedError(f"cannot create the app folder {app_dir}: {e.strerror or e}"
                              " (check the state_dir run option or TORCHSPEC_HOME)") from None
    try:
        _fill_app_folder(request)
    except OSError as e:
        release_reserve(app_dir)
        shutil.rmtree(app_dir, ignore_errors=True)
        raise unwritable(app_dir, e, "write the app folder") from None


def _fill_app_folder(request: LocalRequest) -> None:
    """The files of :func:`_write_app_folder`'s new folder, and the app's reserve of disk space beside it."""
    app_dir = request.app_dir
    write_json(os.path.join(app_dir, SPEC_FILE), request.spec)
    write_json(os.path.join(app_dir, REQUEST_FILE), request.to_json())
    for role in request.roles:
        for replica in role.replicas:
            os.makedirs(os.path.dirname(replica.output), exist_ok=True)
            open(replica.output, "ab").close()
    state_file = os.path.join(app_dir, STATE_FILE)
    write_json(state_file, initial_state(request))
    make_reserve(app_dir, RESERVE_BYTES + 2 * os.path.getsize(state_file))
    if request.index_dir:
        os.makedirs(request.index_dir, exist_ok=True)
        os.symlink(app_dir, os.path.join(request.index_dir, request.app_id))


def _start_supervisor(app_dir: str, carried: Dict[str, str]) -> "subprocess.Popen[bytes]":
    """The app's supervisor, in a session of its own so it outlives this process and its terminal's Ctrl-C;
    ``carried``: the secret values it hands the replicas, in its environment only."""
    try:
        # bare: the supervisor imports only the standard library and torchspec's local package
        return start_detached(SUPERVISOR_MODULE, [app_dir], os.path.join(app_dir, SUPERVISOR_LOG), cwd=app_dir,
                              bare=True, env=carried)
    except OSError as e:
        reason = f"cannot start the supervisor: {e}"
        update_state(app_dir, lambda st: finish_app(st, "FAILED", reason))
        raise


def _kill_grace_s(app_dir: str) -> int:
    """The app's ``kill_grace_s``, or the default when its request is unreadable."""
    request = read_request(app_dir)
    return request.kill_grace_s if request else DEFAULT_KILL_GRACE_S


def _read_spec(app_dir: str) -> Dict[str, Any]:
    """``spec.json``, the app as submitted; {} if unreadable (``describe`` then shows no roles)."""
    try:
        spec = read_json(os.path.join(app_dir, SPEC_FILE))
    except (OSError, ValueError) as e:
        import logging  # only here: it costs every command's start-up

        logging.getLogger(__name__).debug("cannot read the spec of %s: %s", app_dir, e)
        return {}
    return spec if isinstance(spec, dict) else {}


def _read_roles(spec: Dict[str, Any], app_dir: str) -> List[Role]:
    """The roles of the app's spec, for the runner to rebuild the AppDef; [] if they do not build."""
    from torchspec.specs.convert import build_app

    if not spec:
        return []
    try:
        return build_app(spec).roles
    except (ValueError, KeyError, TypeError) as e:
        import logging  # only here: it costs every command's start-up

        logging.getLogger(__name__).debug("cannot rebuild the roles of %s: %s", app_dir, e)
        return []


def _read_error_file(path: str) -> str:
    """A replica's JSON error file as compact JSON, or NONE when it left none (or an unreadable one)."""
    try:
        with open(path, encoding="utf-8") as src:
            return json.dumps(json.load(src))
    except (OSError, ValueError):
        return NONE


__all__ = ["LocalReplicaStatus", "LocalScheduler"]
