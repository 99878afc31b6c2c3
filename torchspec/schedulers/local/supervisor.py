"""The detached process that runs one ``local`` app: ``python -m torchspec.schedulers.local.supervisor APP_DIR``.

``LocalScheduler.schedule`` starts it in a session of its own, so it outlives
the command that submitted the app and ignores that terminal's Ctrl-C.  It:

- launches every replica of ``request.json`` in its own process group (a new
  session), so a replica and everything it spawned stop together.  A session,
  not only a group: where the kernel gives each session a scheduling group
  (autogroup), replicas busy starting up would otherwise starve the
  supervisor's launch loop (5x slower for 32 Python replicas), though
  creating that group costs ~2 ms a launch;
- reads each replica's stdout and stderr and appends every line, once, to
  the replica's ``output.log`` (:class:`~torchspec.schedulers.local.logs.LogWriter`:
  tagged with its stream, with coarse time marks for since/until), all
  replicas in one thread (:class:`~torchspec.schedulers.local.pump.Pump`),
  which also learns of each replica's exit as it happens (pidfds);
- when a replica's main process exits, SIGKILLs what is left of its process
  group (as a container's processes end with it) and applies the role's
  retry policy: APPLICATION restarts every replica, ROLE the role's
  replicas, REPLICA only the failed one, each time writing a
  ``--- torchspec: restart N of replica ROLE/K (exit code X) ---`` line to
  the restarted replicas' logs; once ``max_retries`` is used up the app is
  FAILED and the other replicas are stopped;
- on SIGTERM (how ``cancel`` reaches it) or a ``cancel_requested`` flag in
  ``state.json``, stops every replica: SIGTERM to each process group,
  ``kill_grace_s`` seconds, then SIGKILL; the app ends CANCELLED;
- holds ``supervisor.lock`` from before it reports ready until it exits,
  so others know it is alive (the kernel drops the lock when it dies);
- then forks its guard (:mod:`~torchspec.schedulers.local.guard`), which
  stops the app should the supervisor be killed;
- is a child subreaper (Linux), so what the replicas start outside their
  process groups (``setsid``) becomes its child once orphaned: it reaps those
  that exit and, when the app ends, SIGKILLs the rest before recording the
  end;
- writes ``state.json`` (under its lock) when something changes, at most
  every 50 ms while replicas start or end (every save rewrites the state of
  every replica), at once when the app ends, and at least every second as a
  heartbeat;
- outlives a disk that fills up or turns read-only: a log that cannot be
  written stops keeping output (the replicas run on, their pipes still
  read) and the state records why (``write_error``); a state that cannot be
  saved is saved again at the next heartbeat, after freeing the app's
  reserve of disk space where the disk is full; an end that cannot be
  recorded within :data:`_RECORD_END_S` is given up on (exit code 1), for
  readers to report from what they find.

It gives up on an app somebody else already marked finished (e.g. declared
its supervisor dead after a long stall): it stops the replicas and exits.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from types import FrameType
from typing import Any, Callable, Dict, List, Optional

from torchspec.schedulers.local.guard import start_guard
from torchspec.schedulers.local.logs import LogTrouble, LogWriter
from torchspec.schedulers.processes import kill_strays, reap_strays, signal_group
from torchspec.schedulers.local.pump import Drain, Pump
from torchspec.schedulers.local.state import (
    NO_SPACE,
    finish_app,
    hold_supervisor_lock,
    now_iso,
    read_json,
    read_state,
    release_reserve,
    update_state,
    write_problem,
)
from torchspec.schedulers.local.states import (
    CARRIER_PREFIX,
    ENV_RESTART_COUNT,
    HEARTBEAT_INTERVAL_S,
    REQUEST_FILE,
    SUPERVISOR_LOG,
    TERMINAL,
)
from torchspec.schedulers.order import never_started, startable, waiting_roles
from torchspec.schedulers.replicas import ENV_ATTEMPT
from torchspec.schedulers.local.request import LocalRequest, ReplicaRequest, RoleRequest

# How often the main loop looks at its replicas when nothing wakes it earlier.
_POLL_S = 0.1

# While replicas start or end, the state is saved at most this often (each save rewrites every replica's record).
_SAVE_EVERY_S = 0.05

# Threads that launch replicas at once (this one included).
_LAUNCHERS = 4

# How long to wait for a replica's output to drain after its process group is gone.
_DRAIN_S = 2.0

# The exit code a replica gets when its program cannot even be started, as in shells.
_CANNOT_START = 127

# How long the supervisor tries to record the app's end where state.json cannot be written (full, read-only).
_RECORD_END_S = 5.0


def _say(message: str) -> None:
    """One line in ``supervisor.log``: what the supervisor did, for whoever debugs an app.

    Where the log cannot be written (the disk full, read-only) the line is
    lost: the app must not end for want of its supervisor's diary.
    """
    try:
        sys.stdout.write(f"{now_iso()} {message}\n")  # one write a line (print writes the end apart)
        sys.stdout.flush()
    except (OSError, ValueError):
        pass


def _describe_exit(code: Optional[int]) -> str:
    if code is None:
        return "no exit code"
    if code < 0:
        try:
            return f"exit code {code}, killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"exit code {code}"
    return f"exit code {code}"


def _join_path(*parts: Optional[str]) -> str:
    return os.pathsep.join(part.strip(os.pathsep) for part in parts if part)


class _Replica:
    """One replica: its request, its record in the state (edited in place) and its current process."""

    def __init__(self, index: int, role: RoleRequest, request: ReplicaRequest, record: Dict[str, Any],
                 pump: Pump, on_exit: "Callable[[_Replica, subprocess.Popen[bytes]], None]",
                 trouble: LogTrouble) -> None:
        self.index = index
        self.role = role
        self.request = request
        self.record = record
        self.logs = LogWriter(request.output, trouble)
        self.proc: Optional["subprocess.Popen[bytes]"] = None
        self.drain = Drain(0)
        self.launch_failed = False
        self._pump = pump
        self._on_exit = on_exit
        # whether the pump reports the current process's exit, and the last process it saw exit
        self.watched = False
        self.exited_proc: Optional["subprocess.Popen[bytes]"] = None

    @property
    def name(self) -> str:
        return f"{self.role.name}/{self.request.replica_id}"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.record["state"] == "RUNNING"

    def launch(self) -> None:
        """Start the replica's process; a program that cannot start fails the replica with exit code 127."""
        env = dict(os.environ)
        env.update(self.request.env)
        for name, (carrier, _) in self.request.secret_env.items():
            env[name] = os.environ.get(carrier, "")  # schedule put every value in this process's environment
        for name in [name for name in env if name.startswith(CARRIER_PREFIX)]:
            del env[name]  # a replica gets its own secrets only, by their names
        env[ENV_RESTART_COUNT] = env[ENV_ATTEMPT] = str(self.record["restarts"])
        path = env.get("PATH")
        entry = self.request.path_entry
        env["PATH"] = _join_path(entry, path) if self.request.prepend_path else _join_path(path, entry)
        self.record.update(started_at=now_iso(), ended_at=None, exit_code=None)
        try:
            proc = subprocess.Popen(
                self.request.args,
                env=env,
                cwd=self.request.cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                close_fds=True,
            )
        except OSError as e:
            import shlex

            self.logs.write("stderr", f"torchspec: cannot start {shlex.join(self.request.args)}: {e}".encode())
            self.proc = None
            self.watched = False
            self.launch_failed = True
            self.record.update(state="FAILED", pid=None, pgid=None, exit_code=_CANNOT_START, ended_at=now_iso())
            _say(f"{self.name}: cannot start: {e}")
            return
        self.proc = proc
        # start_new_session makes the replica the leader of a new session and process group
        self.record.update(state="RUNNING", pid=proc.pid, pgid=proc.pid)
        assert proc.stdout is not None and proc.stderr is not None
        self.drain = self._pump.follow([(proc.stdout, "stdout"), (proc.stderr, "stderr")], self.logs)
        self.watched = self._pump.watch_exit(proc.pid, lambda: self._on_exit(self, proc))
        _say(f"{self.name}: started pid {proc.pid} (restart {self.record['restarts']})")

    def exited(self) -> bool:
        """True once the main process exited (or could not start); it is not reaped yet.

        Not reaping keeps the pid, hence the process group id, from being
        reused before :meth:`collect` has killed what is left of the group.
        """
        if self.launch_failed:
            return True
        if not self.running or self.proc is None:
            return False
        if self.watched:
            return self.exited_proc is self.proc
        if not hasattr(os, "waitid"):
            return self.proc.poll() is not None
        try:
            return os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:
            return True

    def collect(self, final_state: Optional[str] = None, deadline: Optional[float] = None) -> None:
        """After the main process exited: kill the rest of its group, reap it, drain its output, record it.

        ``deadline`` (monotonic) bounds the wait for the output to end; by default :data:`_DRAIN_S` from now.
        """
        if self.launch_failed:
            self.launch_failed = False
            return
        proc = self.proc
        if proc is None:
            return
        signal_group(self.record.get("pgid"), signal.SIGKILL)
        code = proc.wait()
        deadline = time.monotonic() + _DRAIN_S if deadline is None else deadline
        self.drain.done.wait(max(0.0, deadline - time.monotonic()))
        state = final_state or ("SUCCEEDED" if code == 0 else "FAILED")
        self.record.update(state=state, exit_code=code, ended_at=now_iso())
        _say(f"{self.name}: {_describe_exit(code)} -> {state}")


class Supervisor:
    """Runs the app of one folder to its end; :meth:`run` returns the process's exit code."""

    def __init__(self, app_dir: str) -> None:
        self.app_dir = app_dir
        self.request = LocalRequest.from_json(read_json(os.path.join(app_dir, REQUEST_FILE)))
        state = read_state(app_dir)
        if state is None:
            raise RuntimeError(f"{app_dir} has no state.json")
        self.state: Dict[str, Any] = state
        self.replicas: List[_Replica] = []
        #: set by the stop signals and by a ``cancel_requested`` in state.json; a plain flag, not an Event: a
        #: signal handler runs in the main thread between any two bytecodes, also inside ``wake.clear()`` while
        #: it holds the Event's lock, and an ``Event.set()`` there would wait for that lock for ever
        self.cancelled = False
        self.wake = threading.Event()
        self.disowned = False
        #: why the last save did not reach state.json (None when it did)
        self.unsaved: Optional[OSError] = None
        self.trouble = LogTrouble(self._on_log_trouble)
        self._last_save = 0.0
        self._dirty = False
        self._lock_fd: Optional[int] = None
        self.pump: Optional[Pump] = None  # made after the guard is forked: its fds are this process's alone
        # replicas whose process the pump saw exit, in the order it did; taken by the main loop
        self._exits: List[_Replica] = []
        self._exits_lock = threading.Lock()
        #: each role's depends_on, and the roles that wait for theirs (started by :meth:`start_waiting`)
        self.depends_on = {role.name: role.depends_on for role in self.request.roles}
        self.waiting = list(waiting_roles(self.depends_on))

    # -- state --------------------------------------------------------------

    def _role_state(self, role: RoleRequest) -> Dict[str, Any]:
        return self.state["roles"][role.name]

    def save(self) -> None:
        """Write the state (and heartbeat); pick up a cancel request or notice the app was taken from us.

        Where the disk is full, the app's reserve is freed for the state and
        the write tried again; a write that still fails is left for the next
        heartbeat (:attr:`unsaved` says why).
        """

        def merge(disk: Dict[str, Any]) -> Dict[str, Any]:
            if disk.get("cancel_requested"):
                self.state["cancel_requested"] = True
            self.state["supervisor"]["heartbeat"] = time.time()
            return self.state

        self._note_trouble()
        failed: List[OSError] = []
        disk = update_state(self.app_dir, merge, failed)
        if failed and failed[0].errno in NO_SPACE and release_reserve(self.app_dir):
            _say("the disk is full: freed the app's reserve of space to record its state")
            failed.clear()
            disk = update_state(self.app_dir, merge, failed)
        self._last_save = time.monotonic()
        if failed and self.unsaved is None:
            _say(f"cannot record the app's state: {write_problem(str(failed[0].filename), failed[0])}")
        self.unsaved = failed[0] if failed else None
        if self.state.get("cancel_requested"):
            self.cancelled = True
        if disk is not self.state and disk.get("state") in TERMINAL:
            self.disowned = True

    def _on_log_trouble(self) -> None:
        """In the pump's thread: a log could not be written; the main loop records why, soon."""
        self._dirty = True
        self.wake.set()

    def _note_trouble(self) -> None:
        """Put in the state what no log could store since when (``write_error``, shown after the message)."""
        error = self.trouble.error
        if error is None:
            return
        since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.trouble.since))
        what = "no replica's output is kept" if self.trouble.no_space else "that log keeps no more output"
        lost = sum(replica.logs.lost_lines for replica in self.replicas)
        lost_s = f"{lost} lines lost" if self.state.get("state") in TERMINAL else f"{lost} lines lost so far"
        self.state["write_error"] = f"{write_problem(str(error.filename), error)}: {what} from {since} on ({lost_s})"

    def heartbeat(self) -> None:
        """Save when a change waits (at most every :data:`_SAVE_EVERY_S`) or the heartbeat is due."""
        since = time.monotonic() - self._last_save
        if since >= HEARTBEAT_INTERVAL_S or (self._dirty and since >= _SAVE_EVERY_S):
            self._dirty = False
            self.save()

    def _pause(self) -> float:
        """How long the main loop may sleep before :meth:`heartbeat` has something to do."""
        due = _SAVE_EVERY_S if self._dirty else HEARTBEAT_INTERVAL_S
        return max(0.0, min(_POLL_S, self._last_save + due - time.monotonic()))

    # -- exits --------------------------------------------------------------

    def _on_exit(self, replica: _Replica, proc: "subprocess.Popen[bytes]") -> None:
        """In the pump's thread: ``proc`` exited.  Stale news (the replica restarted since) is harmless:
        :meth:`_Replica.exited` compares the process."""
        replica.exited_proc = proc
        with self._exits_lock:
            self._exits.append(replica)
        self.wake.set()

    def take_exits(self) -> List[_Replica]:
        """The replicas that exited since the last call, in the order of :attr:`replicas`."""
        with self._exits_lock:
            seen, self._exits = self._exits, []
        unwatched = [r for r in self.replicas if not r.watched]
        found = {id(r): r for r in seen + unwatched if r.exited()}
        return sorted(found.values(), key=lambda r: r.index)

    # -- stopping -----------------------------------------------------------

    def stop(self, replicas: List[_Replica], final_state: Optional[str]) -> None:
        """SIGTERM the running replicas' groups, wait up to the grace period, then SIGKILL and collect."""
        running = [replica for replica in replicas if replica.running]
        if not running:
            return
        for replica in running:
            signal_group(replica.record.get("pgid"), signal.SIGTERM)
        deadline = time.monotonic() + self.request.kill_grace_s
        left = running
        while True:
            self.wake.clear()  # before looking: an exit after the look wakes the wait below
            left = [replica for replica in left if not replica.exited()]
            remaining = deadline - time.monotonic()
            if not left or remaining <= 0:
                break
            watched = all(replica.watched for replica in left)
            self.wake.wait(min(remaining, self._pause() if watched else 0.05))
            self.heartbeat()
        if len(replicas) == len(self.replicas):
            self.kill_all(running)
        drained_by = time.monotonic() + _DRAIN_S
        for replica in running:
            replica.collect(final_state, drained_by)
        self._dirty = True

    def kill_all(self, running: List[_Replica]) -> None:
        """The whole app stops: SIGKILL the replicas, then the orphans they leave (which may hold their pipes)."""
        for replica in running:
            signal_group(replica.record.get("pgid"), signal.SIGKILL)
        deadline = time.monotonic() + _DRAIN_S
        while time.monotonic() < deadline and not all(replica.exited() for replica in running):
            time.sleep(0.01)
        kill_strays([replica.proc.pid for replica in running if replica.proc])

    def finish(self, final: str, msg: str) -> int:
        """Record the app's end; where that cannot be written for :data:`_RECORD_END_S`, exit 1 without it."""
        kill_strays()  # what the replicas left behind outside their process groups, before anyone sees the end
        finish_app(self.state, final, msg)
        self.save()
        deadline = time.monotonic() + _RECORD_END_S
        while self.unsaved is not None and time.monotonic() < deadline:
            time.sleep(HEARTBEAT_INTERVAL_S / 2)
            self.save()
        for replica in self.replicas:
            replica.logs.close()
        if self.unsaved is not None:
            problem = write_problem(str(self.unsaved.filename), self.unsaved)
            _say(f"app {self.request.app_id}: {final} {msg}; this could not be recorded: {problem}")
            return 1
        _say(f"app {self.request.app_id}: {final} {msg}".rstrip())
        return 0

    def abandon(self) -> int:
        """Someone else ended the app (declared us dead): stop its replicas and leave the state alone."""
        _say("the app was marked finished by another process; stopping its replicas")
        self.stop(self.replicas, "FAILED")
        kill_strays()
        for replica in self.replicas:
            replica.logs.close()
        return 1

    def emergency_stop(self, msg: str) -> None:
        """After a crash: SIGKILL every replica group and record the app as FAILED."""
        for replica in self.replicas:
            if replica.running:
                signal_group(replica.record.get("pgid"), signal.SIGKILL)
        kill_strays()

        update_state(self.app_dir, lambda state: finish_app(state, "FAILED", msg), [])

    # -- retries ------------------------------------------------------------

    def restart(self, replicas: List[_Replica], why: str) -> None:
        """Stop ``replicas`` that still run, then start each again with a restart marker in its logs."""
        self.state["msg"] = why
        _say(f"restarting {', '.join(replica.name for replica in replicas)}: {why}")
        self.stop(replicas, None)
        for replica in replicas:
            replica.record["restarts"] += 1
            replica.logs.marker(
                f"--- torchspec: restart {replica.record['restarts']} of replica {replica.name}"
                f" (exit code {replica.record['exit_code']}) ---"
            )
        self.launch([replica for replica in replicas if replica.role.name not in self.waiting])
        self.save()

    def give_up(self, cause: _Replica, failed: List[_Replica]) -> int:
        self.stop(self.replicas, "CANCELLED")
        for replica in self.replicas:
            if replica.role.name in self.waiting:
                replica.record["state"] = "CANCELLED"  # never started: the app ended first
        role = cause.role
        details = ", ".join(f"{r.name} ({_describe_exit(r.record['exit_code'])})" for r in failed)
        msg = (
            f"replica {cause.name} failed with {_describe_exit(cause.record['exit_code'])} and role"
            f" {role.name!r} has no retries left (max_retries={role.max_retries},"
            f" retry_policy={role.retry_policy}, app restarts: {self.state['num_restarts']});"
            f" failed replicas: {details}"
        )
        return self.finish("FAILED", msg + never_started(self.waiting, self.depends_on))

    def on_exits(self, exited: List[_Replica]) -> Optional[int]:
        """Apply the retry policies to replicas that just exited; an exit code when the app is over."""
        failed = [replica for replica in exited if replica.record["state"] == "FAILED"]
        if not failed:
            return None
        from torchspec.specs import RetryPolicy  # only now: the supervisor starts without the specs

        app_cause: Optional[_Replica] = None
        role_causes: Dict[str, _Replica] = {}
        replica_causes: List[_Replica] = []
        for replica in failed:
            role = replica.role
            policy = role.retry_policy
            if policy == RetryPolicy.APPLICATION.value:
                if self.state["app_restarts"] >= role.max_retries:
                    return self.give_up(replica, failed)
                app_cause = app_cause or replica
            elif policy == RetryPolicy.ROLE.value:
                if self._role_state(role)["restarts"] >= role.max_retries:
                    return self.give_up(replica, failed)
                role_causes.setdefault(role.name, replica)
            else:
                if replica.record["restarts"] >= role.max_retries:
                    return self.give_up(replica, failed)
                replica_causes.append(replica)

        if app_cause is not None:
            self.state["app_restarts"] += 1
            self.state["num_restarts"] += 1
            why = f"app restart {self.state['app_restarts']}: {app_cause.name} {_describe_exit(app_cause.record['exit_code'])}"
            self.waiting = list(waiting_roles(self.depends_on))  # the whole app starts again, in its order
            self.restart(self.replicas, why)
            return None
        for role_name, cause in role_causes.items():
            role_state = self.state["roles"][role_name]
            role_state["restarts"] += 1
            self.state["num_restarts"] += 1
            why = f"role {role_name} restart {role_state['restarts']}: {cause.name} {_describe_exit(cause.record['exit_code'])}"
            self.restart([r for r in self.replicas if r.role.name == role_name], why)
        for replica in replica_causes:
            if replica.role.name in role_causes:
                continue
            self.state["num_restarts"] += 1
            why = f"replica {replica.name} restart {replica.record['restarts'] + 1}: {_describe_exit(replica.record['exit_code'])}"
            self.restart([replica], why)
        return None

    # -- the loop -----------------------------------------------------------

    def _on_signal(self, signum: int, frame: Optional[FrameType]) -> None:
        """Takes no lock (see :attr:`cancelled`): the main loop sleeps at most ``_POLL_S`` and sees the flag then."""
        self.cancelled = True

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

        self._lock_fd = hold_supervisor_lock(self.app_dir)
        start_guard(self.app_dir)  # from here on, this process is the guarded child
        self.pump = Pump()

        def register(state: Dict[str, Any]) -> None:
            state["supervisor"].update(pid=os.getpid(), ready=True, heartbeat=time.time())
            state["state"] = "PENDING"

        self.state = update_state(self.app_dir, register)
        if self.state.get("state") in TERMINAL:
            _say(f"app {self.request.app_id} is already {self.state['state']}; nothing to do")
            return 0
        _say(f"supervisor pid {os.getpid()} runs app {self.request.app_id}")
        for role in self.request.roles:
            records = self._role_state(role)["replicas"]
            for replica in role.replicas:
                self.replicas.append(_Replica(len(self.replicas), role, replica, records[replica.replica_id],
                                              self.pump, self._on_exit, self.trouble))
        if self.state.get("cancel_requested"):
            return self.finish("CANCELLED", "cancelled before it started")

        self.state["state"] = "RUNNING"
        self.state["started_at"] = now_iso()
        self.launch([replica for replica in self.replicas if replica.role.name not in self.waiting])
        self.start_waiting()
        self.save()
        return self.loop()

    def start_waiting(self) -> None:
        """Launch the replicas of each waiting role whose dependencies are met now (``depends_on``: the
        roles it waits for finished, or are running), until no more can start."""
        while self.waiting:
            states: Dict[str, List[str]] = {}
            for replica in self.replicas:
                states.setdefault(replica.role.name, []).append(replica.record["state"])
            ready = startable(self.waiting, self.depends_on, states)
            if not ready:
                return
            for name in ready:
                self.waiting.remove(name)
                _say(f"role {name}: starts now (after " + ", ".join(f"{r} {w}" for r, w in self.depends_on[name])
                     + ")")
            self.launch([replica for replica in self.replicas if replica.role.name in ready])
            self._dirty = True

    def launch(self, replicas: List[_Replica]) -> None:
        """Start ``replicas``: replica 0 of each role first, then the others a few at a time.

        Replica 0 of a role is its rank-0 host, and a rendezvous that ranks
        nodes as they join (torchrun's c10d) makes the first to arrive rank 0:
        it is started before the others, as when replicas were started one by
        one.  Python lets go of the GIL while a child it spawns gets to
        ``exec``, and that is most of a launch here (the new session alone
        costs the kernel ~2 ms where it gives each session a scheduling group),
        so a few threads launch the others about three times as fast as one.
        This thread launches too, and saves the state (with the pids so far) at
        most every :data:`_SAVE_EVERY_S`: were it to die now, others could still
        stop what it started, but each save rewrites every replica's record.
        """
        for replica in replicas:
            if replica.request.replica_id == 0:
                replica.launch()
        pending = [replica for replica in reversed(replicas) if replica.request.replica_id != 0]
        take = threading.Lock()

        def work() -> None:
            while True:
                with take:
                    if not pending:
                        return
                    replica = pending.pop()
                replica.launch()

        helpers = [threading.Thread(target=work, name="torchspec-launch", daemon=True)
                   for _ in range(min(_LAUNCHERS, len(pending)) - 1)]
        for helper in helpers:
            helper.start()
        while True:
            with take:
                replica = pending.pop() if pending else None
            if replica is None:
                break
            replica.launch()
            if time.monotonic() - self._last_save >= _SAVE_EVERY_S:
                self.save()
        for helper in helpers:
            helper.join()

    def loop(self) -> int:
        """Until the app ends: collect the replicas that exit, apply the retry policies, save, heartbeat."""
        while True:
            self.wake.clear()  # before looking: whatever happens after the look wakes the wait below
            if self.disowned:
                return self.abandon()
            if self.cancelled:
                self.save()
                self.stop(self.replicas, "CANCELLED")
                for replica in self.replicas:
                    if replica.record["state"] not in TERMINAL:
                        replica.record["state"] = "CANCELLED"
                return self.finish("CANCELLED", "cancelled")
            exited = self.take_exits()
            for replica in exited:
                replica.collect()
            if exited:
                outcome = self.on_exits(exited)
                if outcome is not None:
                    return outcome
                if all(replica.record["state"] == "SUCCEEDED" for replica in self.replicas):
                    return self.finish("SUCCEEDED", "")
                self.start_waiting()
                self._dirty = True
            reap_strays([replica.proc.pid for replica in self.replicas if replica.running and replica.proc])
            self.heartbeat()
            self.wake.wait(self._pause())


def _print_exc() -> None:
    import traceback  # only on the way out: the supervisor starts without it

    try:
        traceback.print_exc()
    except (OSError, ValueError):  # supervisor.log cannot be written: the app must still be stopped
        pass


def main(argv: Optional[List[str]] = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m torchspec.schedulers.local.supervisor APP_DIR", file=sys.stderr)
        return 2
    app_dir = os.path.abspath(args[0])
    try:
        supervisor = Supervisor(app_dir)
    except Exception as e:
        _print_exc()
        reason = f"the supervisor cannot start: {e}"
        update_state(app_dir, lambda state: finish_app(state, "FAILED", reason), [])
        return 1
    try:
        return supervisor.run()
    except BaseException as e:
        _print_exc()
        supervisor.emergency_stop(f"the supervisor crashed: {e!r}; see {os.path.join(app_dir, SUPERVISOR_LOG)}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
