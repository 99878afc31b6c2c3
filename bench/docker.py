#!/usr/bin/env python3
"""Benchmark the ``docker`` scheduler against the docker SDK used by hand.

    python bench/docker.py                          # 8 replicas, 5 runs each
    python bench/docker.py --replicas 4 --repeat 3
    python bench/docker.py --json bench/out/docker.json

It needs a Docker engine (DOCKER_HOST, else the default socket) and the
image torchspec-test/busybox:latest, which it builds as the tests do
(tests/docker_support.py) when it is missing. Everything else runs under a
temporary TORCHSPEC_HOME and working folder, removed at the end. It times, in
one run and each several times (the median is reported; every measurement
runs once untimed first, and the rounds are interleaved so that drift in the
machine's speed, and other users of the engine, spread over all of them):

  submit       submit -> all N containers running, for an app of one role of
               N replicas running `sh -c "trap 'exit 0' TERM; sleep 60 & wait"`
               in the busybox image. The clock starts just before the call and
               stops when the benchmark, polling the engine's container list
               (label filter, status=running) every --poll seconds, first sees
               all N running:
                 sdk        baseline: the docker SDK's APIClient by hand, with a
                            client connected before the clock starts: create a
                            bridge network, then create and start each
                            container in turn, with the same image, command,
                            hostname and network alias, and an env and labels
                            of about the same size as torchspec's
                 cli        subprocess.Popen(["torchspec", "submit", "-s", "docker", SPEC]),
                            polled while it runs: what a user types, Python
                            start-up included
                 runner     in process, with one Runner kept over all runs (so
                            its engine client is connected, as the baseline's):
                            runner.dryrun_component(SPEC, {}, "docker"), then
                            runner.schedule(info); together exactly what
                            run_component does, timed apart
               The engine's own timestamps (network and container Created,
               container StartedAt) split each time into phases, from the
               same clock as the benchmark's t0.
  status       `torchspec status HANDLE` (a fresh process) on each CLI app while
               its N replicas run,
  cancel       then `torchspec cancel HANDLE`, until it exits (the containers
               are stopped, with SIGTERM, and removed with the network);
               in process Runner.cancel on the runner's apps, and the baseline
               stopping and removing its containers and network with the SDK;
               with `torchspec --version`, `python -c pass` and
               `python -c "import docker"` for what start-up is made of.

Containers of the baseline carry the label torchspec-bench.run, never
torchspec.app-id, so tools that clean up torchspec's apps leave them alone;
an app of torchspec that vanishes during a run (someone else's clean-up of
torchspec-labelled containers on a shared engine) makes that run start
again, up to --retries times.

It prints the ratios against their targets with PASS or MISS. The targets are
goals for the implementation, not assertions: the script exits 0 whatever the
timings (pass --fail-on-miss to exit 1 on a MISS). It exits 2 when no engine
answers or the image cannot be had, and 3 if anything it created (a
container, a network, a watcher process) is still there at the end; such
things are removed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from common import as_installed, find_torchspec, fmt_s, median, proc_matches  # before the sys.path change below

REPO = Path(__file__).resolve().parent.parent
PY = sys.executable

# This file is named docker.py, and Python puts its folder first on sys.path: take that
# off, or `import docker` would import this script instead of the docker SDK.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or os.curdir).resolve() != _HERE]

IMAGE = "torchspec-test/busybox:latest"
ROLE = "worker"
# `sleep & wait` so that the shell, PID 1 of the container, gets SIGTERM at once and exits 0.
COMMAND = ["-c", "trap 'exit 0' TERM; sleep 60 & wait"]
LABEL_APP_ID = "torchspec.app-id"  # what torchspec labels its containers and networks with
BENCH_LABEL = "torchspec-bench"  # what the baseline labels its containers and networks with (never the above)
STOP_TIMEOUT_S = 10  # torchspec's default grace period; the baseline's containers get the same


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------


class Vanished(RuntimeError):
    """A torchspec app of ours lost containers during a run: someone else removed them; run it again."""


def one_line(text: str | bytes) -> str:
    """The end of a command's output, on one line, for an error message."""
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    return " ".join(text.split())[-300:]


_STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)?$")


def engine_time(text: str | None) -> float | None:
    """Epoch seconds of one of the engine's RFC 3339 (nanosecond) timestamps; None for none or Go's zero time."""
    match = _STAMP.match(text or "")
    if match is None or match.group(1).startswith("0001-"):
        return None
    fraction = (match.group(2) or "0")[:6].ljust(6, "0")
    when = datetime.strptime(f"{match.group(1)}.{fraction}", "%Y-%m-%dT%H:%M:%S.%f")
    zone = match.group(3) or "Z"
    offset = 0 if zone == "Z" else (1 if zone[0] == "+" else -1) * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    return when.replace(tzinfo=timezone.utc).timestamp() - offset


def reap_children() -> None:
    """Reap exited children (the watchers an in-process schedule starts are ours until they end)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


@dataclass
class Series:
    """Timed values of one measurement (seconds), plus named breakdown points."""

    label: str
    times: list[float] = field(default_factory=list)
    parts: dict[str, list[float]] = field(default_factory=dict)
    cancel: list[float] = field(default_factory=list)
    retried: int = 0
    rc: int | None = None

    def add_part(self, name: str, value: float | None) -> None:
        if value is not None:
            self.parts.setdefault(name, []).append(value)

    @property
    def median(self) -> float:
        return median(self.times)


PARTS = ("network created", "first container created", "last container created", "first container started",
         "last container started", "submit call returned")


# --------------------------------------------------------------------------
# The bench
# --------------------------------------------------------------------------


class Bench:
    def __init__(self, args: argparse.Namespace, ts: list[str], root: Path, client: Any) -> None:
        self.args = args
        self.ts = ts
        self.root = root
        self.client = client
        self.api = client.api
        self.home = root / "home"
        self.work = root / "work"
        self.token = secrets.token_hex(3)  # in every name we create: tsb-<token>-NNN
        self.home.mkdir()
        self.work.mkdir()
        self.env = dict(os.environ, TORCHSPEC_HOME=str(self.home), NO_COLOR="1", TERM="dumb", COLUMNS="120",
                        **as_installed(self.home.parent / "cache"))
        self.env.pop("FORCE_COLOR", None)
        os.environ["TORCHSPEC_HOME"] = str(self.home)  # for the in-process runner (watcher logs go there)
        self.runner: Any = None
        self.counter = 0
        self.app_ids: list[str] = []  # every torchspec app submitted, for the clean-up
        self.bench_runs: list[str] = []  # every baseline run, for the clean-up

    # -- specs -----------------------------------------------------------------

    def new_spec(self, tag: str) -> tuple[Path, str]:
        """A spec file whose app name is unique to this run; returns it and the prefix of its app id.

        The app id is the name plus a random suffix, and every container is
        named ``{app_id}-worker-K``, so the name finds the run's containers
        before its handle is known (the CLI prints that only at the end).
        """
        self.counter += 1
        name = f"tsb-{self.token}-{self.counter:03d}{tag[0]}"
        spec = {
            "name": name,
            "roles": [{
                "name": ROLE,
                "image": IMAGE,
                "entrypoint": "sh",
                "args": COMMAND,
                "num_replicas": self.args.replicas,
            }],
        }
        import yaml

        path = self.work / f"{name}.yaml"
        path.write_text(yaml.safe_dump(spec, sort_keys=False))
        return path, name + "-"

    def get_runner(self) -> Any:
        if self.runner is None:
            from torchspec.runner import get_runner

            self.runner = get_runner()
        return self.runner

    # -- the engine --------------------------------------------------------------

    def containers(self, filters: dict, all_: bool = False) -> list[dict]:
        return self.api.containers(all=all_, filters=filters)

    def wait_running(self, filters: dict, t0: float, proc: subprocess.Popen | None = None) -> tuple[float, list[str]]:
        """perf_counter() when the engine first lists N running containers matching ``filters``; their ids.

        With ``proc`` (the CLI), a process that exits with an error ends the wait.
        """
        n = self.args.replicas
        deadline = t0 + self.args.timeout
        running = dict(filters, status="running")
        while True:
            found = self.containers(running)
            if len(found) >= n:
                return time.perf_counter(), [c["Id"] for c in found]
            if proc is not None and proc.poll() not in (None, 0):
                err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
                raise Vanished(f"torchspec submit exited {proc.returncode}: {one_line(err)}")
            if proc is None or proc.poll() == 0:
                # the submission has returned, so every container exists and was started: fewer is someone else's doing
                existing = self.containers(filters, all_=True)
                if len(existing) < n:
                    raise Vanished(f"only {len(existing)} of {n} containers exist after the submission returned")
            if time.perf_counter() > deadline:
                raise RuntimeError(f"only {len(found)} of {n} containers running after {self.args.timeout:.0f} s")
            time.sleep(self.args.poll)

    def engine_parts(self, series: Series, ids: list[str], wall0: float, network: str | None) -> None:
        """Phases from the engine's own timestamps, relative to the wall-clock time at t0."""
        created, started = [], []
        for cid in ids:
            attrs = self.api.inspect_container(cid)
            created.append(engine_time(attrs.get("Created")))
            started.append(engine_time((attrs.get("State") or {}).get("StartedAt")))
        if network:
            try:
                series.add_part("network created", engine_time(self.api.inspect_network(network).get("Created")) - wall0)
            except Exception:  # noqa: BLE001 - a phase we cannot read is left out
                pass
        created = [c for c in created if c is not None]
        started = [s for s in started if s is not None]
        if created:
            series.add_part("first container created", min(created) - wall0)
            series.add_part("last container created", max(created) - wall0)
        if started:
            series.add_part("first container started", min(started) - wall0)
            series.add_part("last container started", max(started) - wall0)

    def remove_app(self, app_id: str) -> None:
        """Force-remove what is left of a torchspec app, by its label; gone already is fine."""
        self.remove_labelled(f"{LABEL_APP_ID}={app_id}")

    def remove_bench(self, run: str) -> None:
        """Force-remove a baseline run's containers and network, by its label."""
        self.remove_labelled(f"{BENCH_LABEL}.run={run}")

    def remove_labelled(self, label: str) -> None:
        """Force-remove the containers, then the networks, that carry ``label``.

        Gone already, or being removed by someone else (409: removal already in
        progress), is fine: ``cleanup`` looks again at the end.
        """
        import docker.errors

        for c in self.containers({"label": label}, all_=True):
            try:
                self.api.remove_container(c["Id"], force=True)
            except docker.errors.APIError:
                pass
        for n in self.api.networks(filters={"label": label}):
            try:
                self.api.remove_network(n["Id"])
            except docker.errors.APIError:
                pass

    def app_id_of(self, prefix: str) -> str | None:
        for c in self.containers({"label": LABEL_APP_ID, "name": prefix}, all_=True):
            app_id = (c.get("Labels") or {}).get(LABEL_APP_ID, "")
            if app_id.startswith(prefix):
                return app_id
        return None

    def run_cmd(self, cmd: list[str]) -> tuple[float, int, bytes]:
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.env, cwd=self.work,
                              stdin=subprocess.DEVNULL)
        elapsed = time.perf_counter() - t0
        return elapsed, proc.returncode, (proc.stdout or b"") + (proc.stderr or b"")

    # -- 1. submit -> all running ---------------------------------------------

    def submit_cli(self, series: Series, extra: dict[str, Series], timed: bool) -> None:
        spec, prefix = self.new_spec("cli")
        filters = {"label": LABEL_APP_ID, "name": prefix}
        app_id = None
        try:
            wall0 = time.time()
            t0 = time.perf_counter()
            proc = subprocess.Popen(self.ts + ["submit", "-s", "docker", str(spec)], stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, env=self.env, cwd=self.work, stdin=subprocess.DEVNULL)
            t_all, ids = self.wait_running(filters, t0, proc)
            out, err = proc.communicate()
            t_ret = time.perf_counter()
            if proc.returncode != 0:
                raise Vanished(f"torchspec submit exited {proc.returncode}: {one_line(err)}")
            handle = out.decode().strip().splitlines()[-1]
            app_id = handle.rsplit("/", 1)[-1]
            self.app_ids.append(app_id)
            if timed:
                series.times.append(t_all - t0)
                series.add_part("submit call returned", t_ret - t0)
                self.engine_parts(series, ids, wall0, f"torchspec-{app_id}")
            # status, then cancel, each a fresh process, on the running app
            t, rc, text = self.run_cmd(self.ts + ["status", handle])
            if rc != 0 or "RUNNING" not in text.decode(errors="replace"):
                raise Vanished(f"torchspec status {handle} exited {rc}: {one_line(text)}")
            if timed:
                extra["status"].times.append(t)
            extra["status"].rc = rc
            t, rc, text = self.run_cmd(self.ts + ["cancel", handle])
            if rc != 0:
                raise Vanished(f"torchspec cancel {handle} exited {rc}: {one_line(text)}")
            if timed:
                series.cancel.append(t)
                extra["cancel"].times.append(t)
            extra["cancel"].rc = rc
            deadline = time.perf_counter() + 5  # a removal someone else had in progress may still be ending
            while self.containers({"label": f"{LABEL_APP_ID}={app_id}"}, all_=True):
                if time.perf_counter() > deadline:
                    left = self.containers({"label": f"{LABEL_APP_ID}={app_id}"}, all_=True)
                    if "already in progress" in text.decode(errors="replace"):  # someone else removed them too
                        raise Vanished(f"torchspec cancel {handle} raced with another removal: {one_line(text)}")
                    raise RuntimeError(f"torchspec cancel {handle} left {len(left)} containers: {one_line(text)}")
                time.sleep(0.05)
        finally:
            app_id = app_id or self.app_id_of(prefix)
            if app_id:
                self.remove_app(app_id)

    def submit_runner(self, series: Series, timed: bool) -> None:
        from torchspec.errors import BackendError

        spec, prefix = self.new_spec("runner")
        runner = self.get_runner()
        filters = {"label": LABEL_APP_ID, "name": prefix}
        handle = None
        try:
            wall0 = time.time()
            t0 = time.perf_counter()
            info = runner.dryrun_component(str(spec), {}, "docker")
            t_dry = time.perf_counter()
            try:
                handle = runner.schedule(info)
            except BackendError as e:  # e.g. "No such container": removed while being started, by someone else
                raise Vanished(f"schedule failed: {e}") from None
            t_ret = time.perf_counter()
            self.app_ids.append(handle.rsplit("/", 1)[-1])
            t_all, ids = self.wait_running(filters, t0)
            if timed:
                series.times.append(t_all - t0)
                series.add_part("dryrun_component returned", t_dry - t0)
                series.add_part("submit call returned", t_ret - t0)
                self.engine_parts(series, ids, wall0, f"torchspec-{handle.rsplit('/', 1)[-1]}")
            c0 = time.perf_counter()
            runner.cancel(handle)
            c1 = time.perf_counter()
            if timed:
                series.cancel.append(c1 - c0)
        finally:
            app_id = handle.rsplit("/", 1)[-1] if handle else self.app_id_of(prefix)
            if app_id:
                self.remove_app(app_id)
            reap_children()

    def submit_sdk(self, series: Series, timed: bool) -> None:
        """The baseline: what a careful user writes with the SDK, for the same N containers."""
        from torchspec.version import __version__

        n = self.args.replicas
        self.counter += 1
        run = f"tsb-{self.token}-{self.counter:03d}s-base"
        network = f"tsbench-{run}"
        self.bench_runs.append(run)
        api = self.api
        # env and labels of about the size torchspec gives each replica (its role JSON label included)
        role_json = json.dumps({"name": ROLE, "image": IMAGE, "entrypoint": "sh", "args": COMMAND,
                                "num_replicas": n, "env": {}, "resource": {"cpu": -1, "gpu": 0, "memMB": -1},
                                "max_retries": 0, "retry_policy": "APPLICATION"}, separators=(",", ":"))
        requests = []
        for i in range(n):
            name = f"{run}-{ROLE}-{i}"
            env = {
                "BENCH_JOB_ID": f"docker://bench/{run}",
                "BENCH_APP_ID": run,
                "BENCH_ROLE_NAME": ROLE,
                "BENCH_REPLICA_ID": str(i),
                "BENCH_NUM_REPLICAS": str(n),
                "BENCH_RANK0_HOST": f"{run}-{ROLE}-0",
                "PYTHONUNBUFFERED": "1",
            }
            labels = {
                BENCH_LABEL: "1",
                f"{BENCH_LABEL}.run": run,
                f"{BENCH_LABEL}.role-name": ROLE,
                f"{BENCH_LABEL}.replica-id": str(i),
                f"{BENCH_LABEL}.num-replicas": str(n),
                f"{BENCH_LABEL}.network": network,
                f"{BENCH_LABEL}.version": __version__,
                f"{BENCH_LABEL}.role": role_json,
            }
            requests.append((name, env, labels))
        filters = {"label": f"{BENCH_LABEL}.run={run}"}
        try:
            wall0 = time.time()
            t0 = time.perf_counter()
            api.create_network(network, driver="bridge", labels={BENCH_LABEL: "1", f"{BENCH_LABEL}.run": run})
            for name, env, labels in requests:
                cid = api.create_container(
                    image=IMAGE, name=name, entrypoint=["sh"], command=COMMAND, hostname=name, environment=env,
                    labels=labels, stop_timeout=STOP_TIMEOUT_S, detach=True,
                    host_config=api.create_host_config(network_mode=network),
                    networking_config=api.create_networking_config(
                        {network: api.create_endpoint_config(aliases=[name])}),
                )["Id"]
                api.start(cid)
            t_ret = time.perf_counter()
            t_all, ids = self.wait_running(filters, t0)
            if timed:
                series.times.append(t_all - t0)
                series.add_part("submit call returned", t_ret - t0)
                self.engine_parts(series, ids, wall0, network)
            # the baseline's cancel: stop (SIGTERM, grace period) and remove each, then the network
            c0 = time.perf_counter()
            for cid in ids:
                api.stop(cid, timeout=STOP_TIMEOUT_S)
                api.remove_container(cid)
            api.remove_network(network)
            c1 = time.perf_counter()
            if timed:
                series.cancel.append(c1 - c0)
        finally:
            self.remove_bench(run)

    def attempt(self, what: str, series: Series, fn: Any) -> None:
        """Run one measurement; run it again when an app of ours vanished under it (up to --retries times)."""
        import docker.errors

        for i in range(self.args.retries + 1):
            try:
                fn()
                return
            except (Vanished, docker.errors.NotFound) as e:
                series.retried += 1
                if i == self.args.retries:
                    raise RuntimeError(f"{what}: {e} (gave up after {self.args.retries} retries)") from None
                print(f"  {what}: {one_line(str(e))}; running it again", file=sys.stderr)

    # -- clean-up ----------------------------------------------------------------

    def cleanup(self) -> list[str]:
        """Remove every container, network and watcher of ours; returns what was still there (then removed)."""
        left: list[str] = []
        if self.runner is not None:
            try:
                self.runner.close()
            except Exception:  # noqa: BLE001 - keep cleaning up
                pass
        labels = [f"{LABEL_APP_ID}={a}" for a in self.app_ids] + [f"{BENCH_LABEL}.run={r}" for r in self.bench_runs]
        for label in labels:
            cs = self.containers({"label": label}, all_=True)
            ns = self.api.networks(filters={"label": label})
            left += [f"container {c['Names'][0].lstrip('/')}" for c in cs] + [f"network {n['Name']}" for n in ns]
            self.remove_labelled(label)
        deadline = time.monotonic() + 10  # removals someone else had in progress end, or we try again
        while time.monotonic() < deadline:
            rest = [label for label in labels if self.containers({"label": label}, all_=True)
                    or self.api.networks(filters={"label": label})]
            if not rest:
                break
            time.sleep(0.2)
            for label in rest:
                self.remove_labelled(label)
        # watchers exit once their app's containers are gone; give them a moment
        needle = f"tsb-{self.token}-".encode()
        deadline = time.monotonic() + 10
        procs = proc_matches([needle])
        while procs and time.monotonic() < deadline:
            time.sleep(0.1)
            reap_children()
            procs = proc_matches([needle])
        for pid, cmdline in procs:
            left.append(f"process {pid}: {cmdline}")
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        reap_children()
        return left


# --------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------

# Targets: goals for the implementation, not assertions (see the module docstring).
SUBMIT_CLI_TARGET = 1.5      # torchspec submit -> all running, over the SDK baseline
SUBMIT_RUNNER_TARGET = 1.2   # dryrun_component + schedule in process -> all running, over the SDK baseline


def connect() -> tuple[Any | None, str]:
    """A docker client that has reached the engine, or None and why not."""
    try:
        import docker
    except ImportError as e:
        return None, f"the docker SDK is not installed ({e}); pip install -e ."
    client = None
    try:
        client = docker.from_env()
        client.ping()
    except Exception as e:  # noqa: BLE001 - the SDK raises several unrelated types for "no engine"
        if client is not None:
            client.close()
        where = os.environ.get("DOCKER_HOST") or "the default socket"
        return None, f"no Docker engine answers at {where}: {' '.join(str(e).split())[:300]}"
    return client, ""


def ensure_image(client: Any) -> str:
    """'' when IMAGE is on the engine (built by tests/docker_support.py when missing), else why not."""
    import docker.errors

    try:
        client.api.inspect_image(IMAGE)
        return ""
    except docker.errors.ImageNotFound:
        pass
    print(f"building {IMAGE} with tests/docker_support.py ...", file=sys.stderr)
    sys.path.insert(0, str(REPO / "tests"))
    try:
        from docker_support import ensure_busybox_image

        ensure_busybox_image(client)
    except BaseException as e:  # noqa: BLE001 - it skips (pytest's Skipped, a BaseException) when it cannot build
        if isinstance(e, KeyboardInterrupt):
            raise
        return f"cannot build {IMAGE}: {e}"
    finally:
        sys.path.remove(str(REPO / "tests"))
    return ""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--replicas", type=int, default=8, help="replicas of the submitted app (default 8)")
    ap.add_argument("--repeat", type=int, default=5, help="timed runs of each measurement; the median is reported (default 5)")
    ap.add_argument("--poll", type=float, default=0.01, help="seconds between two looks at the engine's container list (default 0.01)")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds a submission may take to have every container running (default 60)")
    ap.add_argument("--retries", type=int, default=3,
                    help="times a run whose torchspec app vanished (someone else's clean-up) is run again (default 3)")
    ap.add_argument("--runner", choices=["auto", "script", "module"], default="auto",
                    help="run torchspec as the console script beside sys.executable, or as `python -m torchspec` (default auto)")
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON to PATH")
    ap.add_argument("--fail-on-miss", action="store_true", help="exit 1 when a target is missed (off by default: timings vary by machine)")
    args = ap.parse_args(argv)
    if args.replicas < 1 or args.repeat < 1 or args.poll <= 0 or args.retries < 0:
        ap.error("--replicas and --repeat must be at least 1, --poll above 0, --retries not negative")
    if not sys.platform.startswith("linux"):
        print("bench: this benchmark reads /proc to check that no watcher survives; it runs on Linux only", file=sys.stderr)
        return 2

    ts = find_torchspec(args.runner)
    if ts is None:
        print("bench: cannot run torchspec: no `torchspec` script beside", PY,
              "and no torchspec/__main__.py; install the project (pip install -e .)", file=sys.stderr)
        return 2
    client, why = connect()
    if client is None:
        print(f"bench: {why}; start one (e.g. `sudo dockerd &`) or point DOCKER_HOST at one", file=sys.stderr)
        return 2
    why = ensure_image(client)
    if why:
        print(f"bench: {why}", file=sys.stderr)
        return 2
    engine = client.version().get("Version", "?")
    # installed libraries import from bytecode; compile torchspec too, whatever PYTHONDONTWRITEBYTECODE says
    subprocess.run([PY, "-m", "compileall", "-q", str(REPO / "torchspec")], check=False)

    started = time.perf_counter()
    root = Path(tempfile.mkdtemp(prefix="torchspec-bench-docker-"))
    bench = Bench(args, ts, root, client)
    R = args.repeat
    submit = {m: Series(m) for m in ("sdk", "cli", "runner")}
    extra = {name: Series(name) for name in ("status", "cancel", "version", "pass", "import-docker")}
    left: list[str] = []
    failed: BaseException | None = None
    try:
        print(f"1/2 submit -> all {args.replicas} containers running ({R} runs each after a warm-up, then cancel) ...",
              file=sys.stderr)
        for r in range(R + 1):
            timed = r > 0
            bench.attempt("baseline", submit["sdk"], lambda t=timed: bench.submit_sdk(submit["sdk"], t))
            bench.attempt("torchspec submit", submit["cli"], lambda t=timed: bench.submit_cli(submit["cli"], extra, t))
            bench.attempt("runner", submit["runner"], lambda t=timed: bench.submit_runner(submit["runner"], t))
            print(f"  {'warm-up' if r == 0 else f'round {r}/{R}'} done", file=sys.stderr)

        print("2/2 start-up times ...", file=sys.stderr)
        cmds = {"version": ts + ["--version"], "pass": [PY, "-c", "pass"], "import-docker": [PY, "-c", "import docker"]}
        for r in range(R + 1):
            for name, cmd in cmds.items():
                t, rc, out = bench.run_cmd(cmd)
                if rc != 0:
                    raise RuntimeError(f"{' '.join(cmd)} exited {rc}: {out.decode(errors='replace')[:500]}")
                if r > 0:
                    extra[name].times.append(t)
                extra[name].rc = rc
    except BaseException as e:  # noqa: BLE001 - clean up first, report after
        failed = e
    finally:
        left = bench.cleanup()
        client.close()
        shutil.rmtree(root, ignore_errors=True)
    if failed is not None:
        if left:
            print(f"bench: removed {len(left)} things that were left: {left[:3]}", file=sys.stderr)
        if isinstance(failed, KeyboardInterrupt):
            return 130
        print(f"bench: {failed}", file=sys.stderr)
        return 2

    total = time.perf_counter() - started
    N = args.replicas

    # ------------------------------------------------------------------ report
    print()
    print(f"python {platform.python_version()} on {platform.system()} {platform.machine()}, {os.cpu_count()} cpus;"
          f" docker engine {engine}; torchspec runs as: {' '.join(ts)}; total {total:.0f} s")
    print()
    print(f"{'submit -> all ' + str(N) + ' containers running':44} {'median':>11} {'min':>11} {'runs':>5}"
          f" {'cancel':>11}")
    print("-" * 86)
    labels = {"sdk": f"baseline: SDK network + {N} create/start",
              "cli": "torchspec submit -s docker SPEC (CLI)",
              "runner": "runner dryrun_component + schedule"}
    for m in ("sdk", "cli", "runner"):
        s = submit[m]
        print(f"{labels[m]:44} {fmt_s(s.median):>11} {fmt_s(min(s.times)):>11} {len(s.times):>5}"
              f" {fmt_s(median(s.cancel)):>11}")
    print()
    print(f"{'where the time goes (medians from t0)':44} {'sdk':>11} {'cli':>11} {'runner':>11}")
    print("-" * 80)
    for part in ("dryrun_component returned",) + PARTS:
        cells = [fmt_s(median(submit[m].parts.get(part, []))) for m in ("sdk", "cli", "runner")]
        what = {"submit call returned": "submit returned / SDK loop done",
                "dryrun_component returned": "dryrun_component returned (spec loaded)"}.get(part, part)
        print(f"{what:44} {cells[0]:>11} {cells[1]:>11} {cells[2]:>11}")
    cells = [fmt_s(submit[m].median) for m in ("sdk", "cli", "runner")]
    print(f"{'all running, seen by the poll':44} {cells[0]:>11} {cells[1]:>11} {cells[2]:>11}")
    print(f"(engine timestamps, from t0; cancel: `torchspec cancel` until it exits / Runner.cancel / the SDK stopping"
          f" and removing the {N} containers one by one, then the network)")
    retried = {m: s.retried for m, s in submit.items() if s.retried}
    if retried:
        print(f"(runs started again because an app vanished or a command failed: {retried})")

    print()
    slabels = {
        "status": f"torchspec status H ({N} containers running)",
        "cancel": f"torchspec cancel H ({N} containers running)",
        "version": "torchspec --version",
        "pass": 'python -c "pass"',
        "import-docker": 'python -c "import docker"',
    }
    print(f"{'command':44} {'median':>11} {'min':>11} {'runs':>5} {'exit':>5}")
    print("-" * 80)
    for name in ("status", "cancel", "version", "pass", "import-docker"):
        s = extra[name]
        print(f"{slabels[name]:44} {fmt_s(s.median):>11} {fmt_s(min(s.times)):>11} {len(s.times):>5} {s.rc:>5}")

    ratios = [
        ("submit CLI / SDK", submit["cli"].median / submit["sdk"].median, "<=", SUBMIT_CLI_TARGET),
        ("submit runner / SDK", submit["runner"].median / submit["sdk"].median, "<=", SUBMIT_RUNNER_TARGET),
    ]
    print()
    print(f"{'ratio':28} {'value':>8} {'target':>9}  verdict")
    print("-" * 58)
    misses = 0
    for label, value, op, target in ratios:
        ok = value <= target if op == "<=" else value >= target
        misses += not ok
        print(f"{label:28} {value:8.3f} {op + ' ' + str(target):>9}  {'PASS' if ok else 'MISS'}")

    # what the CLI adds to the baseline: split both at the same engine events and compare
    cli, sdk = submit["cli"], submit["sdk"]
    m = lambda s, part: median(s.parts.get(part, []))
    phases = [
        ("before the first engine call (the network's creation)", m(cli, "network created") - m(sdk, "network created")),
        (f"from there to the last of the {N} containers started",
         (m(cli, "last container started") - m(cli, "network created"))
         - (m(sdk, "last container started") - m(sdk, "network created"))),
        ("from there until the poll sees them all running",
         (cli.median - m(cli, "last container started")) - (sdk.median - m(sdk, "last container started"))),
    ]
    print()
    print(f"what the CLI adds to the baseline (medians): {fmt_s(cli.median - sdk.median).strip()}, of which")
    print(f"  {fmt_s(phases[0][1]).strip():>9} {phases[0][0]}: start-up, imports, loading the spec"
          f" (`python -c pass` {fmt_s(extra['pass'].median).strip()}, `python -c \"import docker\"`"
          f" {fmt_s(extra['import-docker'].median).strip()})")
    print(f"  {fmt_s(phases[1][1]).strip():>9} {phases[1][0]}: torchspec creates all, then starts all;"
          f" the baseline creates and starts each in turn")
    print(f"  {fmt_s(phases[2][1]).strip():>9} {phases[2][0]}")
    top = max(phases, key=lambda p: p[1])
    print(f"  -> dominated by {top[0]}")

    print()
    if left:
        print(f"FAILED: {len(left)} things of the bench were left at the end and were removed: {left[:3]}")
    else:
        print(f"nothing left: no container, network or watcher process of this run (names tsb-{bench.token}-*)"
              f" remains; {root} removed")

    if args.json:
        report = {
            "replicas": N, "repeat": R, "poll_s": args.poll, "python": platform.python_version(),
            "cpus": os.cpu_count(), "engine": engine, "runner": ts, "total_s": total,
            "submit": {m: {"median": s.median, "runs": s.times, "cancel": s.cancel, "parts": s.parts,
                           "retried": s.retried} for m, s in submit.items()},
            "commands": {n: {"median": s.median, "runs": s.times} for n, s in extra.items()},
            "ratios": {label: {"value": value, "target": f"{op} {target}"} for label, value, op, target in ratios},
            "cli_overhead_phases": {name: value for name, value in phases},
            "left": left,
        }
        out = Path(args.json)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=2) + "\n")
        print(f"results written to {out}")
    if left:
        return 3
    return 1 if (args.fail_on_miss and misses) else 0


if __name__ == "__main__":
    sys.exit(main())
