"""The example Scheduler: what torchspec asks of a backend, answered from this package's engine.

Every command runs in a process of its own (``submit`` ends long before the
app does), so nothing is kept in this object: ``schedule`` writes what later
calls need into ``self.store`` (one JSON record per app, found again from the
app id alone) and ``describe``, ``log_iter``, ``cancel`` and ``delete`` read
it back, the run options the app was submitted with included.

The engine (at the end of this file, marked) starts each replica as a
detached process on this machine; replace those functions with calls to your
engine's API and keep the rest.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from datetime import datetime
from typing import Any, Dict, Iterable, Iterator, List, Optional

from torchspec.schedulers.api import (
    Capability,
    DescribeAppResponse,
    ListAppResponse,
    ReplicaRunStatus,
    Scheduler,
    Stream,
    check_replica,
    labels_of,
)
from torchspec.schedulers.replicas import check_role_names, make_app_id
from torchspec.schedulers.state_dir import default_state_dir
from torchspec.specs import AppDef, AppDryRunInfo, AppState, CfgVal, RoleStatus, runopts
from torchspec_example import options
from torchspec_example.states import BACKEND, RANK0_HOST, STATE_MAP
from torchspec_example.translate import ExampleSchedulerRequest, ReplicaLaunch, app_to_request

#: how often ``logs -f`` and ``cancel`` look again
POLL_S = 0.1


class ExampleScheduler(Scheduler[Dict[str, CfgVal]]):
    """Runs each replica as a process on this machine; see the module's docstring."""

    #: all this backend does beyond the minimum; torchspec refuses the rest with a clear message
    #: (``logs --since`` here: lines carry no times, so there is no LOG_WINDOW)
    capabilities = frozenset({Capability.LOGS, Capability.FOLLOW_LOGS, Capability.LOG_STREAMS,
                              Capability.DELETE, Capability.LABELS})

    def __init__(self, session_name: str, **params: Any) -> None:
        super().__init__(BACKEND, session_name)
        self.params = params

    def _run_opts(self) -> runopts:
        return options.run_opts()

    def _validate(self, app: AppDef, scheduler: str) -> None:
        """Resources mean nothing to this engine, so a role need not have one (the default demands it)."""
        check_role_names(app)

    def _submit_dryrun(self, app: AppDef, cfg: Dict[str, CfgVal]) -> AppDryRunInfo[ExampleSchedulerRequest]:
        from torchspec.redaction import for_describe
        from torchspec.specs.convert import dump_app

        options.check(cfg)
        request = app_to_request(app, cfg, make_app_id(app.name), os.getcwd(), default_state_dir())
        request.spec = for_describe(dump_app(app))  # describe runs later: keep no secret
        request.labels = labels_of(app)
        return AppDryRunInfo(request, str)

    def schedule(self, dryrun_info: AppDryRunInfo[Any]) -> str:
        request: ExampleSchedulerRequest = dryrun_info.request
        os.makedirs(request.folder, exist_ok=True)
        record: Dict[str, Any] = {"name": request.app_name, "spec": request.spec, "labels": request.labels,
                                  "folder": request.folder, "kill_grace_s": request.kill_grace_s,
                                  "cancelled": False, "replicas": []}
        self.store.put(request.app_id, record)  # first: a failed start can still be cancelled and deleted
        for launch in request.replicas:
            started = start_replica(launch)
            record["replicas"].append({"role": launch.role, "id": launch.replica_id, "log": launch.log, **started})
            self.store.put(request.app_id, record)
        return request.app_id

    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        from torchspec.specs.convert import build_role

        record = self.store.get(app_id)
        if record is None:
            return None
        statuses: Dict[str, RoleStatus] = {}
        for replica in record["replicas"]:
            state, code = replica_state(replica, record["cancelled"])
            statuses.setdefault(replica["role"], RoleStatus(replica["role"], [])).replicas.append(
                ReplicaRunStatus(replica["id"], state, replica["role"], RANK0_HOST, exit_code=code))
        state = app_state([r.state for s in statuses.values() for r in s.replicas], record["cancelled"])
        failed = [f"{r.role}/{r.id} exited with code {r.exit_code}" for s in statuses.values() for r in s.replicas
                  if isinstance(r, ReplicaRunStatus) and r.state == AppState.FAILED]
        return DescribeAppResponse(app_id=app_id, state=state, num_restarts=0, msg="; ".join(failed),
                                   roles_statuses=list(statuses.values()), name=record["name"],
                                   roles=[build_role(r) for r in record["spec"].get("roles", [])],
                                   labels=record["labels"], ui_url=f"file://{record['folder']}")

    def list(self) -> List[ListAppResponse]:
        apps = []
        for app_id in self.store.app_ids():
            described = self.describe(app_id)
            if described is not None:
                apps.append(ListAppResponse(app_id=app_id, state=described.state, labels=described.labels))
        return apps

    def _cancel_existing(self, app_id: str) -> None:
        record = self.store.get(app_id) or {"replicas": []}
        running = [r for r in record["replicas"] if replica_alive(r)]
        if running:  # an app that already ended stays as it ended
            self.store.update(app_id, lambda rec: {**rec, "cancelled": True})
            stop_replicas(running, record.get("kill_grace_s", 5))

    def delete(self, app_id: str) -> None:
        record = self.store.get(app_id)
        if record is None:
            return
        self._cancel_existing(app_id)
        shutil.rmtree(record["folder"], ignore_errors=True)
        self.store.remove(app_id)

    def log_iter(self, app_id: str, role_name: str, k: int = 0, regex: Optional[str] = None,
                 since: Optional[datetime] = None, until: Optional[datetime] = None, should_tail: bool = False,
                 streams: Optional[Stream] = None) -> Iterable[str]:
        """The replica's lines: stdout, stderr or both (stdout's as far as written, then stderr's: the order
        between the two is not kept).  ``since``/``until`` are refused by torchspec before this is called."""
        record = self.store.get(app_id) or {"replicas": []}
        replicas = {r["role"]: 0 for r in record["replicas"]}
        for r in record["replicas"]:
            replicas[r["role"]] += 1
        check_replica(app_id, role_name, k, replicas)
        replica = next(r for r in record["replicas"] if r["role"] == role_name and r["id"] == k)
        stream = Stream(streams or Stream.COMBINED)
        suffixes = {Stream.STDOUT: [".out"], Stream.STDERR: [".err"], Stream.COMBINED: [".out", ".err"]}[stream]
        lines = read_lines(replica, suffixes, should_tail)
        pattern = re.compile(regex) if regex else None
        return (line for line in lines if pattern is None or pattern.search(line))


def app_state(states: List[AppState], cancelled: bool) -> AppState:
    """The app's state from its replicas': running while any runs, then cancelled, failed or succeeded."""
    if AppState.RUNNING in states:
        return AppState.RUNNING
    if cancelled:
        return AppState.CANCELLED
    return AppState.FAILED if AppState.FAILED in states else AppState.SUCCEEDED


def read_lines(replica: Dict[str, Any], suffixes: List[str], follow: bool) -> Iterator[str]:
    """The lines of the replica's files; with ``follow``, new ones as they come until the replica ended."""
    offsets = dict.fromkeys(suffixes, 0)
    pending = dict.fromkeys(suffixes, "")
    while True:
        ended = not replica_alive(replica)  # before reading: what it wrote before it ended is read below
        for suffix in suffixes:
            chunk, offsets[suffix] = read_from(replica["log"] + suffix, offsets[suffix])
            *complete, pending[suffix] = (pending[suffix] + chunk).split("\n")
            yield from (line + "\n" for line in complete)
        if not follow or ended:
            yield from (rest for rest in pending.values() if rest)
            return
        time.sleep(POLL_S)


def read_from(path: str, offset: int) -> "tuple[str, int]":
    """What ``path`` holds from ``offset`` on, and the offset after it; nothing for a file not there yet."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read()
    except FileNotFoundError:
        return "", offset
    return data.decode("utf-8", "replace"), offset + len(data)


# -- THE ENGINE ------------------------------------------------------------------------------------------
# Replace what follows with calls to your engine: start a replica, ask for its state, stop replicas.
# Here a replica is a process group on this machine, started detached so that it outlives `submit`: in a new
# session, STARTER runs WRAPPER in the background and ends; WRAPPER runs the replica, stdout to LOG.out and
# stderr to LOG.err, then writes its exit code to LOG.exit (through a rename: all or nothing).
_WRAPPER = '"$@" >"$0.out" 2>"$0.err" </dev/null; echo $? >"$0.exit.tmp" && mv "$0.exit.tmp" "$0.exit"'
#: starts the wrapper in the background, its stdio off the starter's pipe, and prints its pid
_STARTER = 'w=$1; shift; sh -c "$w" "$@" </dev/null >/dev/null 2>&1 & echo $!'


def start_replica(launch: ReplicaLaunch) -> Dict[str, int]:
    """Start one replica detached, in a new session: ``{"pid": the wrapper's, "pgid": its process group's}``.

    The starter shell leads the new session and ends at once, so the replica is
    nobody's child here (no zombie in a long-lived caller) and its group, named
    by the starter's pid, holds everything the replica starts.
    """
    os.makedirs(os.path.dirname(launch.log), exist_ok=True)
    starter = subprocess.Popen(["sh", "-c", _STARTER, "sh", _WRAPPER, launch.log, *launch.argv],
                               cwd=launch.cwd, env={**os.environ, **launch.env},
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, start_new_session=True)
    out, _ = starter.communicate()
    return {"pid": int(out.strip()), "pgid": starter.pid}


def replica_state(replica: Dict[str, Any], cancelled: bool) -> "tuple[AppState, Optional[int]]":
    """The replica's state and exit code (None while it runs, or where it was stopped before it wrote one)."""
    try:
        with open(replica["log"] + ".exit", encoding="utf-8") as f:
            code: Optional[int] = int(f.read().strip())
    except (FileNotFoundError, ValueError):
        code = None
    if code is None and replica_alive(replica):
        return STATE_MAP["running"], None
    if code is None:  # stopped by cancel (or killed from outside: then it failed)
        return STATE_MAP["stopped" if cancelled else "failed"], None
    return STATE_MAP["exited" if code == 0 else "failed"], code


def replica_alive(replica: Dict[str, Any]) -> bool:
    """Whether any process of the replica's group runs (the wrapper lives as long as the replica)."""
    return pid_alive(replica["pid"])


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` runs; a zombie (dead, not yet reaped by its parent) does not."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:  # no /proc (macOS): ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


def group_alive(pgid: int) -> bool:
    """Whether any process of the group runs: a replica's children, or a replica that outlived its wrapper."""
    if not os.path.isdir("/proc"):
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        return True
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8") as f:
                fields = f.read().rpartition(")")[2].split()
        except (OSError, ValueError):
            continue  # not a process, or one that just ended
        if fields[0] != "Z" and fields[2] == str(pgid):
            return True
    return False


def stop_replicas(replicas: List[Dict[str, Any]], grace_s: float) -> None:
    """SIGTERM every replica's process group, wait up to ``grace_s`` for them to end, then SIGKILL the groups."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        for replica in replicas:
            try:
                os.killpg(replica["pgid"], sig)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + wait_s
        while any(group_alive(r["pgid"]) for r in replicas) and time.monotonic() < deadline:
            time.sleep(POLL_S)
