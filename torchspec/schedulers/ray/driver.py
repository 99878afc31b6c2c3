"""The driver: every Ray job torchspec submits runs it (``exec python -u -m torchspec.schedulers.ray.driver``).

It runs inside the job, on the cluster, where torchspec arrives as a
``py_modules`` entry of the job's runtime_env; so it imports nothing but the
standard library, :mod:`.states`, :mod:`.placement`, :mod:`.cleanup`, the shared names of
:mod:`torchspec.schedulers.replicas` and ``ray`` (in
:func:`main`).  It reads its plan (:mod:`.translate`) from the environment
and then:

1. refuses a plan the cluster's nodes can never hold (exit code
   :data:`~.states.EXIT_UNSCHEDULABLE`, the reason as its last line);
2. creates one placement group per role, one bundle per replica, and waits
   until every group is placed (gang scheduling: no replica starts before
   all fit), or ``placement_timeout`` runs out;
3. starts each replica as its own actor (``role/k#attempt``) in its bundle,
   sets ``TORCHSPEC_RANK0_HOST`` to the node address of the role's replica
   0 (127.0.0.1 on that node itself), and runs the replica's command there as a child process, whose lines
   the actor tags with the replica, the stream and the time;
   sets every role's ``TORCHSPEC_HOSTS_<ROLE>`` to its replicas' node addresses, and starts a
   role with ``depends_on`` only once the roles it waits for finished (every replica exited 0) or run;
4. restarts replicas as their role's retry policy says (REPLICA: the one,
   ROLE: the role's, APPLICATION: all), each attempt a new actor in the
   same bundle (so on the same node);
5. ends with a summary line (``describe`` reads it) and the first failed
   replica's exit code, 0 when all succeeded; SIGTERM (``cancel``) stops
   every replica (SIGTERM, then SIGKILL) and exits 143;
6. removes its placement groups on every way out, whatever the stage
   (:mod:`.cleanup`): they hold the cluster's resources until removed.

Each replica runs under a launcher (:mod:`torchspec.schedulers.launcher`)
that ends all it started, even children in sessions of their own, when the
replica exits, when it is stopped, and when its actor dies: so a driver
that crashes or is SIGKILLed (Ray then kills its actors) leaves nothing
running either.  The SIGTERM handler only sets a flag, which the driver
reads between waits on Ray of at most :data:`WAIT_SLICE_S`.
"""

from __future__ import annotations

import base64
import fcntl
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Dict, List, Optional, Set, Tuple

from torchspec.schedulers.order import never_started, startable
from torchspec.schedulers.ray.cleanup import remove_groups
from torchspec.schedulers.replicas import ENV_ATTEMPT, ENV_RANK0_HOST
from torchspec.schedulers.ray.placement import never_fits
from torchspec.schedulers.ray.states import (
    CARRIER_PREFIX,
    ENV_PLAN,
    ENV_SECRETS,
    EXIT_STOPPED,
    EXIT_UNSCHEDULABLE,
    SUMMARY,
    actor_name,
    group_name,
    group_prefix,
    tag,
)

LOOPBACK = "127.0.0.1"
#: The last line of a replica attempt's output, so the driver knows its lines reached the job's log.
END_MARK = "[torchspec-end "
#: Seconds between two looks at the cluster while placement groups wait.
PLACEMENT_POLL_S = 5.0
#: The longest the driver waits on Ray at a time, so a SIGTERM (cancel) is acted on within it.
WAIT_SLICE_S = 0.5
#: How long the driver waits, after an actor became unreachable, for the cluster to say whether its node is
#: lost (Ray's health checks: 5 misses, 3 s apart, by default).
NODE_VERDICT_S = 45.0
#: How often a waiting driver says what it waits for.
PLACEMENT_REPORT_S = 30.0
#: Seconds a stopped replica gets between SIGTERM and SIGKILL unless the plan says (run option grace_period); well
#: within the STOP_WAIT_S the job gives the driver before Ray SIGKILLs it.
STOP_GRACE_S = 1.5
#: The most the driver waits at the end for the replicas' last lines to reach the job's log.
FLUSH_WAIT_S = 5.0

Key = Tuple[int, int]  # (role index, replica id)


class Stopped(Exception):
    """SIGTERM reached the driver (``cancel``): raised by the driver's own code between two waits on Ray."""


class _Stop:
    """Set by the SIGTERM handler, which does nothing else: an exception raised from a signal handler while the
    main thread is inside Ray's C code (``ray.wait``) surfaces as a SystemError that skips the stop path.  A
    plain flag, not a ``threading.Event``: the handler runs in the main thread, also while that thread holds the
    Event's own lock (inside its ``wait``), and an ``Event.set()`` there would wait for that lock for ever."""

    requested = False


def check_stop() -> None:
    if _Stop.requested:
        raise Stopped()


def stop_grace() -> float:
    """The seconds a stopped replica gets between SIGTERM and SIGKILL: the plan's ``grace_period`` (every actor
    has the job's env, the plan in it), else :data:`STOP_GRACE_S`."""
    try:
        given = json.loads(os.environ.get(ENV_PLAN) or "{}").get("grace_period")
    except ValueError:
        given = None
    return float(given) if isinstance(given, (int, float)) else STOP_GRACE_S


def say(text: str) -> None:
    print(tag("driver", None, text.rstrip("\n") + "\n"), end="", flush=True)


#: The folder, in a secret mount folder, of one marker file per replica using it on this node.
USERS = ".torchspec-users"


def write_mounts(mounts: Dict[str, Dict[str, str]], me: str, done: List[str]) -> None:
    """Write each mount folder's secret files (0600) on this node, the folder made 0700 when missing; the
    folders written.  A folder must be this user's and writable by no one else (its files are secrets); a
    marker file ``me`` under :data:`USERS` says this replica uses it (see :func:`remove_mounts`).  Values never
    go through a command line.  ``done`` gets each folder as it is used (for :func:`remove_mounts`, even after a
    failure).  OSError, or ValueError naming a folder that is not private."""
    for folder, files in mounts.items():
        os.makedirs(folder, mode=0o700, exist_ok=True)
        info = os.lstat(folder)
        if not os.path.isdir(folder) or os.path.islink(folder) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
            raise ValueError(f"secret mount folder {folder} must be a folder of this user that no one else may write")
        with _locked(folder):
            os.makedirs(os.path.join(folder, USERS), mode=0o700, exist_ok=True)
            open(os.path.join(folder, USERS, me), "w").close()
            done.append(folder)
            for key, value in files.items():
                path = os.path.join(folder, key)
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    f.write(value)


def remove_mounts(mounts: Dict[str, Dict[str, str]], folders: List[str], me: str) -> None:
    """Remove this replica's marker from each of ``folders``, and the secret files where it was the folder's last
    user on this node (two replicas of a node may share a folder: the files stay while one runs)."""
    for folder in folders:
        with _locked(folder):
            try:
                os.unlink(os.path.join(folder, USERS, me))
                os.rmdir(os.path.join(folder, USERS))
            except OSError:
                continue  # another replica still uses the folder
            for key in mounts.get(folder, {}):
                try:
                    os.unlink(os.path.join(folder, key))
                except OSError:
                    pass


class _locked:
    """flock of a folder, so that replicas on one node write and remove its files one at a time."""

    def __init__(self, folder: str) -> None:
        self.fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)

    def __enter__(self) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)  # releases the lock


def secrets_of(replica: Dict[str, Any], carried: Dict[str, Any]) -> Tuple[Dict[str, str], Dict[str, Dict[str, str]]]:
    """A replica's secret variables and mount files, from the values the job carried (:data:`ENV_SECRETS`)."""
    env: Dict[str, str] = {}
    mounts: Dict[str, Dict[str, str]] = {}
    for item in replica.get("secrets") or []:
        value = carried.get(item["carrier"])
        if value is None:
            raise KeyError(f"secret {item['value']} did not reach the job (no value under {item['carrier']})")
        if "env" in item:
            env[item["env"]] = value
        else:
            mounts[item["mount"]] = value
    return env, mounts


class ReplicaRunner:
    """What each replica's actor does: run the command as a child, tag its lines, stop it on demand."""

    def __init__(self, who: str, attempt: int) -> None:
        self.who = who
        self.attempt = attempt
        self.proc: Optional[subprocess.Popen] = None
        self.stopped = False
        self.lock = threading.Lock()  # one line at a time on stdout
        self.starting = threading.Lock()  # a replica stopped before its run started it never starts

    def __repr__(self) -> str:  # Ray puts it before each line it forwards: (trainer/0 pid=...)
        return self.who

    def _pump(self, pipe: Any, stream: str) -> None:
        for raw in iter(pipe.readline, b""):
            text = raw.decode("utf-8", errors="replace")
            with self.lock:
                sys.stdout.write(tag(self.who, stream, text if text.endswith("\n") else text + "\n"))
                sys.stdout.flush()
        pipe.close()

    def run(self, args: List[str], env: Dict[str, str], mounts: Optional[Dict[str, Dict[str, str]]] = None) -> int:
        """The replica's exit code (128+N for signal N; 127 when its program cannot start).  ``mounts``: the
        secret files to write on this node first, removed when it ends (:func:`write_mounts`).

        The replica runs under a launcher (:mod:`torchspec.schedulers.launcher`) that ends everything it
        started, children in sessions of their own too, when it exits, when :meth:`stop` asks, or when
        this actor dies (the driver stopped or SIGKILLed): no process of a replica outlives its attempt.
        """
        me = f"{os.getpid()}.{self.who.replace('/', '-')}.{self.attempt}"
        folders: List[str] = []
        try:
            write_mounts(mounts or {}, me, folders)
        except (OSError, ValueError) as e:
            remove_mounts(mounts or {}, folders, me)
            self._end(f"cannot write the secret files: {e}\n")
            return 1
        try:
            return self._run(args, env)
        finally:
            remove_mounts(mounts or {}, folders, me)

    def _run(self, args: List[str], env: Dict[str, str]) -> int:
        from torchspec.schedulers import launcher

        # the plan, and every secret carrier (the job's runtime_env gives every actor all of them): a replica gets
        # its own secrets only, by their names, in env
        full = {k: v for k, v in os.environ.items() if k != ENV_PLAN and not k.startswith(CARRIER_PREFIX)}
        full.update(env)
        program = args[0]
        if "/" not in program and os.path.isfile(program):
            program = os.path.join(".", program)  # a file of the working_dir wins over PATH
        with self.starting:
            if self.stopped:
                self._end("")
                return 128 + signal.SIGTERM
            try:
                self.proc = subprocess.Popen(launcher.command(stop_grace(), [program, *args[1:]]), env=full,
                                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                             start_new_session=True)
            except OSError as e:
                self._end(f"cannot start {program}: {e.strerror or e}\n")
                return 127
        pumps = [threading.Thread(target=self._pump, args=(self.proc.stdout, "stdout"), daemon=True),
                 threading.Thread(target=self._pump, args=(self.proc.stderr, "stderr"), daemon=True)]
        for pump in pumps:
            pump.start()
        code = self.proc.wait()
        for pump in pumps:
            pump.join(timeout=10)
        self._end("")
        return 128 - code if code < 0 else code

    def _end(self, error: str) -> None:
        with self.lock:
            if error:
                sys.stdout.write(tag(self.who, "stderr", error))
            sys.stdout.write(f"{END_MARK}{self.who}#{self.attempt}]\n")
            sys.stdout.flush()

    def stop(self, grace: float) -> None:
        """Ask the replica's launcher to end it (SIGTERM, SIGKILL after ``grace`` seconds); SIGKILL the launcher
        if it has not ended by then.  A replica whose ``run`` has not started it yet never starts (its ``run``
        returns at once, so the driver need not wait)."""
        with self.starting:
            self.stopped = True
            proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, grace + 0.3), (signal.SIGKILL, 0.0)):
            try:
                os.kill(proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                proc.wait(timeout=wait or None)
                return
            except subprocess.TimeoutExpired:
                continue


class Driver:
    """One app's run: placement groups, one actor per replica attempt, retries, the summary."""

    def __init__(self, ray: Any, plan: Dict[str, Any]) -> None:
        self.ray = ray
        self.plan = plan
        self.roles: List[Dict[str, Any]] = plan["roles"]
        self.actor_class = ray.remote(max_concurrency=4)(ReplicaRunner)
        self.pgs: List[Any] = []
        self.actors: Dict[Key, Any] = {}
        self.attempts: Dict[Key, int] = {}
        self.running: Dict[Any, Key] = {}
        self.codes: Dict[Key, Optional[int]] = {}
        #: why a replica failed where its exit code cannot say: its actor died (its node was lost, OOM)
        self.reasons: Dict[Key, str] = {}
        self.role_restarts = [0] * len(self.roles)
        self.app_restarts = 0
        #: the secrets' values by carrier, as the job's runtime_env carried them (translate.RayJobRequest.submit_kwargs)
        self.carried: Dict[str, Any] = json.loads(base64.b64decode(os.environ.get(ENV_SECRETS) or "e30="))
        self.rank0: Dict[Key, str] = {}
        #: every role's TORCHSPEC_HOSTS_<ROLE>, known once the groups are placed
        self.hosts: Dict[str, str] = {}
        #: the roles (by index) that wait for others before they start
        self.waiting: Set[int] = self.initially_waiting()
        #: the node (id, address) each replica's bundle is on
        self.node_of: Dict[Key, Tuple[str, str]] = {}
        #: attempts (``role/k#n``) whose end mark was printed, and those whose mark reached the job's log
        self.ended: Set[str] = set()
        self.seen: Set[str] = set()
        self.lines = threading.Condition()

    # -- placement -------------------------------------------------------------------

    def where(self) -> Tuple[List[Dict[str, float]], str]:
        nodes = [dict(n.get("Resources") or {}) for n in self.ray.nodes() if n.get("Alive")]
        return nodes, f"the cluster has {len(nodes)} node(s)"

    def place(self) -> Optional[str]:
        """Create every role's placement group and wait for all; why they cannot be placed, or None."""
        from ray.util.placement_group import placement_group

        problem = never_fits(self.roles, *self.where())
        if problem:
            return problem
        for role in self.roles:
            name = group_name(self.plan["app_id"], role["role"])
            self.pgs.append(placement_group(role["bundles"], strategy=role["strategy"], name=name))
        timeout = self.plan.get("placement_timeout")
        start = last_report = time.monotonic()
        waiting = {pg.ready(): role["role"] for pg, role in zip(self.pgs, self.roles)}
        last_look = start
        while waiting:
            ready, _ = self.ray.wait(list(waiting), num_returns=len(waiting), timeout=WAIT_SLICE_S)
            check_stop()
            for ref in ready:
                waiting.pop(ref)
            if not waiting or time.monotonic() - last_look < PLACEMENT_POLL_S:
                continue
            last_look = time.monotonic()
            problem = never_fits(self.roles, *self.where())  # the cluster may have lost a node
            if problem:
                return problem
            now = time.monotonic()
            pending = ", ".join(sorted(waiting.values()))
            if timeout and now - start > timeout:
                return (f"the placement groups of {pending} were not placed within placement_timeout={timeout}s;"
                        f" the cluster has {self.ray.available_resources()} free")
            if now - last_report >= PLACEMENT_REPORT_S:
                say(f"waiting for the placement groups of {pending} (the cluster has"
                    f" {self.ray.available_resources()} free)")
                last_report = now
        say(f"placed {len(self.pgs)} placement group(s) in {time.monotonic() - start:.1f}s")
        self.find_rank0()
        return None

    def remove_groups(self) -> None:
        """Remove the app's placement groups: those it holds, and any the cluster lists under the app's name
        (one whose creation the driver did not see return).  Done on every way out, before the summary, and
        again at the very end for a way out that raised; a failure is said, not raised, since the driver's exit
        code is the app's (the scheduler's backstop removes what is left)."""
        try:
            removed = remove_groups(group_prefix(self.plan["app_id"]), [pg.id.hex() for pg in self.pgs])
        except Exception as e:  # the cluster's GCS gone away: the driver is ending anyway
            say(f"could not remove the placement groups: {type(e).__name__}: {e}")
            return
        if removed:
            say(f"removed {len(removed)} placement group(s)")

    def find_rank0(self) -> None:
        """Each replica's ``TORCHSPEC_RANK0_HOST``: the node address of its role's replica 0, or 127.0.0.1 on that
        same node (where torchrun then knows to host the rendezvous, whatever the node's name resolves to)."""
        from ray.util import placement_group_table

        addresses = {n["NodeID"]: n["NodeManagerAddress"] for n in self.ray.nodes()}
        for role_index, pg in enumerate(self.pgs):
            nodes = {int(b): node for b, node in placement_group_table(pg)["bundles_to_node_id"].items()}
            for k in range(len(self.roles[role_index]["replicas"])):
                self.node_of[(role_index, k)] = (nodes.get(k) or "", addresses.get(nodes.get(k), ""))
                same = nodes.get(k) == nodes.get(0)
                self.rank0[(role_index, k)] = LOOPBACK if same else addresses.get(nodes.get(0), "")
        self.set_hosts()

    def set_hosts(self) -> None:
        """Every role's ``TORCHSPEC_HOSTS_<ROLE>``: its replicas' node addresses (:attr:`node_of`), in order."""
        self.hosts = {role["hosts_env"]: ",".join(self.node_of[(r, k)][1] for k in range(len(role["replicas"])))
                      for r, role in enumerate(self.roles) if role.get("hosts_env")}

    # -- replicas --------------------------------------------------------------------

    def who(self, key: Key) -> str:
        return f"{self.roles[key[0]]['role']}/{key[1]}"

    def _actor(self, key: Key) -> Any:
        role_index, k = key
        bundle = self.roles[role_index]["bundles"][k]
        custom = {r: v for r, v in bundle.items() if r not in ("CPU", "GPU", "memory")}
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        strategy = PlacementGroupSchedulingStrategy(placement_group=self.pgs[role_index],
                                                    placement_group_bundle_index=k)
        options: Dict[str, Any] = {"name": actor_name(self.roles[role_index]["role"], k, self.attempts[key]),
                                   "num_cpus": bundle.get("CPU", 0), "num_gpus": bundle.get("GPU", 0),
                                   "resources": custom, "max_restarts": 0, "scheduling_strategy": strategy}
        if bundle.get("memory"):
            options["memory"] = bundle["memory"]
        return self.actor_class.options(**options).remote(self.who(key), self.attempts[key])

    def start(self, keys: List[Key]) -> None:
        """A new actor for each of ``keys`` (its next attempt), then its replica's command."""
        for key in keys:
            self.attempts[key] = self.attempts.get(key, -1) + 1
            self.actors[key] = self._actor(key)
        for key in keys:
            replica = self.roles[key[0]]["replicas"][key[1]]
            secret_env, mounts = secrets_of(replica, self.carried)
            env = {**replica["env"], **secret_env, **self.hosts, ENV_RANK0_HOST: self.rank0[key],
                   ENV_ATTEMPT: str(self.attempts[key])}
            self.running[self.actors[key].run.remote(replica["args"], env, mounts)] = key
            self.codes[key] = None

    def retire(self, key: Key, printed: bool) -> None:
        """Kill the actor of ``key`` once its replica ended: its bundle is free for the next attempt.

        ``printed``: the actor's ``run`` returned, so it printed its end mark, which :meth:`wait_for_lines`
        waits for; an actor killed before that prints none, and waiting for it would only stall the end.
        """
        actor = self.actors.pop(key, None)
        if actor is not None:
            if printed:
                self.ended.add(f"{self.who(key)}#{self.attempts[key]}")
            self.ray.kill(actor, no_restart=True)

    def stop(self, keys: List[Key]) -> None:
        """Stop the running replicas of ``keys`` (SIGTERM, then SIGKILL) and retire their actors.

        Waits, as long as a stop may take, for each one's ``run`` to return too (its last lines printed);
        an actor still starting is killed without it.
        """
        keys = [key for key in keys if key in self.actors]
        runs = {ref: key for ref, key in self.running.items() if key in keys}
        grace = stop_grace()
        refs = [*(self.actors[key].stop.remote(grace) for key in keys), *runs]
        if refs:
            self.ray.wait(refs, num_returns=len(refs), timeout=grace + 0.5)
        returned = self.ray.wait(list(runs), num_returns=len(runs), timeout=0)[0] if runs else []
        printed = {runs[ref] for ref in returned}
        for ref in runs:
            self.running.pop(ref)
        for key in keys:
            self.retire(key, printed=key in printed)

    # -- the run ---------------------------------------------------------------------

    def collect(self, ref: Any, key: Key) -> int:
        """The exit code of the replica whose ``run`` gave ``ref`` (done), recorded; its actor is retired."""
        try:
            code, printed = int(self.ray.get(ref)), True
        except Exception as e:  # the actor died under the replica: its node went away, or out of memory
            self.reasons[key] = f"its actor died ({self.actor_death(key, e)})"
            say(f"{self.who(key)}: {self.reasons[key]}")
            code, printed = 1, False
        self.codes[key] = code
        self.retire(key, printed)
        return code

    def actor_death(self, key: Key, error: Exception) -> str:
        """Why the actor of ``key`` died, in one line: its node lost (asked of the cluster, since Ray may only
        say the actor is unavailable), killed for memory, or what Ray said."""
        node, address = self.node_of.get(key, ("", ""))
        # "unavailable": the actor's node stopped answering; the cluster learns whether the node is gone only
        # once its health checks fail, so wait for that verdict (a cancel still interrupts the wait)
        deadline = time.monotonic() + (NODE_VERDICT_S if "Unavailable" in type(error).__name__ else 0)
        while True:
            if node and node not in {n["NodeID"] for n in self.ray.nodes() if n.get("Alive")}:
                return f"its node {node[:12]}{f' at {address}' if address else ''} was lost"
            if time.monotonic() >= deadline:
                break
            time.sleep(1.0)
            check_stop()
        text = " ".join(str(error).split())
        if "OutOfMemory" in type(error).__name__ or "out of memory" in text.lower():
            return "killed for memory"
        return f"{type(error).__name__}: {text[:200]}" if text else type(error).__name__

    def retry(self, key: Key, code: int) -> Optional[List[Key]]:
        """The replicas to start again after ``key`` failed, as its role's retry policy says; None: no retry left."""
        role_index = key[0]
        role = self.roles[role_index]
        policy, limit = role["retry_policy"], role["max_retries"]
        if policy == "REPLICA":
            if self.attempts[key] >= limit:
                return None
            keys = [key]
        elif policy == "ROLE":
            if self.role_restarts[role_index] >= limit:
                return None
            self.role_restarts[role_index] += 1
            keys = [(role_index, k) for k in range(len(role["replicas"]))]
        else:
            if self.app_restarts >= limit:
                return None
            self.app_restarts += 1
            self.waiting = self.initially_waiting()  # the whole app starts again, in its order
            keys = [(r, k) for r, other in enumerate(self.roles) for k in range(len(other["replicas"]))]
        say(f"{self.who(key)} exited with code {code}; restarting {len(keys)} replica(s) ({policy} retry)")
        self.stop([k for k in keys if k != key])
        return keys

    def initially_waiting(self) -> Set[int]:
        return {r for r, role in enumerate(self.roles) if role.get("depends_on")}

    def start_waiting(self) -> bool:
        """Start the replicas of each waiting role whose dependencies are met now; whether any started."""
        def state(key: Key) -> str:
            return "RUNNING" if key in self.actors else "SUCCEEDED" if self.codes.get(key) == 0 else "PENDING"

        states = {role["role"]: [state((r, k)) for k in range(len(role["replicas"]))]
                  for r, role in enumerate(self.roles)}
        names = startable([self.roles[r]["role"] for r in sorted(self.waiting)], self.depends_on, states)
        ready = [r for r in sorted(self.waiting) if self.roles[r]["role"] in names]
        for r in ready:
            self.waiting.discard(r)
            say(f"role {self.roles[r]['role']}: starts now (after "
                + ", ".join(f"{d} {w}" for d, w in self.roles[r]["depends_on"]) + ")")
            self.start([(r, k) for k in range(len(self.roles[r]["replicas"]))])
        return bool(ready)

    @property
    def depends_on(self) -> Dict[str, List[List[str]]]:
        return {role["role"]: role.get("depends_on") or [] for role in self.roles}

    def run(self) -> int:
        """Run the app to its end; the driver's exit code."""
        self.start([(r, k) for r, role in enumerate(self.roles) for k in range(len(role["replicas"]))
                    if r not in self.waiting])
        say(f"started {len(self.actors)} replica(s)")
        self.start_waiting()
        while self.running or (self.waiting and self.start_waiting()):
            ready, _ = self.ray.wait(list(self.running), num_returns=1, timeout=WAIT_SLICE_S)
            check_stop()
            for ref in ready:
                key = self.running.pop(ref, None)
                if key is None:
                    continue
                code = self.collect(ref, key)
                if code == 0:
                    continue
                again = self.retry(key, code)
                if again is None:
                    say(f"{self.who(key)} exited with code {code}; stopping the app")
                    self.note_ended()
                    self.stop(list(self.actors))
                    return self.finish("FAILED", key, code)
                self.start([k for k in again if k[0] not in self.waiting])
            self.start_waiting()
        return self.finish("SUCCEEDED", None, 0)

    def note_ended(self) -> None:
        """Record the exit codes of replicas that ended too (without waiting), before the rest are stopped."""
        if not self.running:
            return
        done, _ = self.ray.wait(list(self.running), num_returns=len(self.running), timeout=0)
        for ref in done:
            self.collect(ref, self.running.pop(ref))

    def finish(self, state: str, failed: Optional[Key], code: int) -> int:
        self.wait_for_lines()
        replicas = {self.who(key): {"exit_code": self.codes.get(key), "restarts": attempt}
                    for key, attempt in sorted(self.attempts.items())}
        summary = {"state": state, "failed": self.who(failed) if failed else None, "exit_code": code,
                   "replicas": replicas}
        if failed in self.reasons:
            summary["reason"] = self.reasons[failed]
        if self.waiting and state == "FAILED":
            summary["never_started"] = never_started([self.roles[r]["role"] for r in sorted(self.waiting)],
                                                     self.depends_on).lstrip("; ")
        self.end(summary)
        return code if 0 <= code < 256 else 1

    def end(self, summary: Dict[str, Any]) -> None:
        """Remove the groups, then print the summary: the driver's last line, since a failed job's message
        holds only the log's last 10 lines, where ``describe`` looks for it."""
        self.remove_groups()
        say(SUMMARY + json.dumps(summary, separators=(",", ":")))

    def on_log(self, data: Dict[str, Any]) -> None:
        """Ray's log thread hands each batch of forwarded lines here too: note the replicas' end marks."""
        marks = set()
        for line in data.get("lines") or []:
            at = line.find(END_MARK)
            if at >= 0:
                marks.add(line[at + len(END_MARK):].rstrip().rstrip("]"))
        if marks:
            with self.lines:
                self.seen |= marks
                self.lines.notify_all()

    def wait_for_lines(self) -> None:
        """Wait (at most FLUSH_WAIT_S) until every ended replica's last line reached the job's log; woken by
        :meth:`on_log` as the marks arrive, so the app ends as soon as its last line is in."""
        with self.lines:
            self.lines.wait_for(lambda: self.ended <= self.seen, timeout=FLUSH_WAIT_S)


def _stop_on_sigterm(signum: int, frame: Any) -> None:
    _Stop.requested = True


def _watch_logs(driver: Driver) -> bool:
    """Route Ray's forwarded lines past :meth:`Driver.on_log` too; False where this Ray has no such hook."""
    try:
        from ray._private.ray_logging import global_worker_stdstream_dispatcher
    except ImportError:
        return False
    global_worker_stdstream_dispatcher.add_handler("torchspec", driver.on_log)
    return True


def main() -> int:
    # first: a cancel while the driver imports ray is acted on, not fatal; and again once connected, since
    # ray.init puts Ray's own handler in (which logs the signal and breaks the driver's stop path)
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    plan = json.loads(os.environ[ENV_PLAN])
    os.environ["RAY_DEDUP_LOGS"] = "0"  # every replica's lines, even where two print the same
    import ray

    ray.init(namespace=f"torchspec-{plan['app_id']}", log_to_driver=True, logging_level=logging.WARNING)
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    driver = Driver(ray, plan)
    if not _watch_logs(driver):
        driver.wait_for_lines = lambda: time.sleep(1.0)  # type: ignore[method-assign]
    try:
        check_stop()
        problem = driver.place()
        if problem:
            say(problem)
            driver.end({"state": "FAILED", "failed": None, "exit_code": EXIT_UNSCHEDULABLE, "unschedulable": problem})
            return EXIT_UNSCHEDULABLE
        return driver.run()
    except Stopped:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        say("stopped (SIGTERM): stopping every replica")
        try:
            driver.stop(list(driver.actors))
        except Exception as e:  # an actor or the cluster failing a call: its replicas still end with the driver,
            # whose actors Ray ends as it exits (and with them what each replica started), so the app still ended
            # by the cancel; without the summary it would read as a driver that crashed
            say(f"could not stop every replica itself ({type(e).__name__}: {e}); they end as the driver exits")
        driver.end({"state": "CANCELLED", "failed": None, "exit_code": EXIT_STOPPED})
        return EXIT_STOPPED
    finally:
        driver.remove_groups()  # those a path above did not get to (the driver raised), else nothing


if __name__ == "__main__":
    sys.exit(main())
