#!/usr/bin/env python3
"""Benchmark the ``local`` scheduler against plain ``subprocess.Popen`` and ``cat`` baselines.

    python bench/local.py                          # 32 replicas, 3 runs each, 200,000 log lines
    python bench/local.py --replicas 8 --repeat 5 --lines 50000
    python bench/local.py --json bench/out/local.json

Everything runs on this machine, under a temporary TORCHSPEC_HOME that is
removed at the end. It times, in one run and each several times (the median
is reported; every measurement runs once untimed first, and the rounds are
interleaved so that drift in the machine's speed spreads over all of them):

  submit       submit -> all N replicas running, for an app of N replicas
               whose entrypoint is `python -c` code that creates the marker
               file READY_DIR/<replica_id> at start, then sleeps. The clock
               starts just before the call and stops when all N markers exist:
                 cli        subprocess.run(["torchspec", "submit", SPEC, ...])
                 runner     torchspec.runner.get_runner().run(app, "local"), in process
                            (the spec is loaded with load_app before the clock starts)
                 popen      baseline: the same N commands, same env (macros
                            substituted by hand), started by a Popen loop
               then `torchspec cancel` / Runner.cancel / SIGTERM, timed until
               the app is CANCELLED (the processes gone). The supervisor's own log
               splits the torchspec times: until the supervisor runs, its launch
               loop, then the replicas' start-up.
  status       `torchspec status HANDLE` on a running N-replica app, against
               `python -c "import yaml"` (interpreter start-up) and `cat
               state.json` of the app's folder; with `torchspec --version`,
               `python -c pass` and the import of the supervisor module, which
               show what the submit latency is made of.
  logs         `torchspec logs HANDLE printer/0` on a finished app whose one
               replica printed --lines lines (~50 bytes each), against `cat`
               of that replica's output.log and a minimal Python loop doing
               logs' job (skip time marks, strip the tag, add the prefix); output to
               /dev/null; throughput is bytes written per second.

It prints the ratios against their targets with PASS or MISS. The targets are
goals for the implementation, not assertions: the script exits 0 whatever the
timings (pass --fail-on-miss to exit 1 on a MISS). It exits 3 if any process
it started (a replica, a supervisor) is still alive at the end; such
processes are killed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

from common import as_installed, find_torchspec, fmt_s, median, proc_matches

REPO = Path(__file__).resolve().parent.parent
PY = sys.executable

TERMINAL = ("SUCCEEDED", "FAILED", "CANCELLED")
ROLE = "worker"
PRINTER = "printer"

# The replica: create READY_DIR/<replica_id>, then sleep. argv: replica_id, token, seconds.
# The token is only there so that every replica (ours or the baseline's) can be found in /proc.
# No braces and no dollar signs: spec strings are Jinja templates and may hold runtime macros.
MARKER_CODE = (
    "import os, sys, time\n"
    "open(os.path.join(os.environ['READY_DIR'], sys.argv[1]), 'w').close()\n"
    "time.sleep(float(sys.argv[3]))\n"
)

# The log printer: argv: lines, token. 50 bytes a line; written in large chunks, so the
# replica is not what limits how fast the supervisor can store them.
PRINTER_CODE = (
    "import sys\n"
    "n = int(sys.argv[1])\n"
    "out = sys.stdout.buffer\n"
    "for start in range(0, n, 10000):\n"
    "    out.write(''.join('line %07d abcdefghijklmnopqrstuvwxyz0123456789\\n' % i\n"
    "                      for i in range(start, min(n, start + 10000))).encode())\n"
    "out.flush()\n"
)

# What `torchspec logs H printer/0` does, as plain Python: skip the stored time marks
# ("t..." lines), drop each line's one-byte stream tag, prefix the replica's label.
LOGS_BASELINE = r"""
import sys
prefix = sys.argv[2].encode() + b" "
out = sys.stdout.buffer
with open(sys.argv[1], "rb") as src:
    for line in src:
        if line[:1] != b"t":
            out.write(prefix + line[1:])
"""


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------


def fmt_rate(bps: float) -> str:
    return f"{bps / 1e6:9.1f} MB/s" if bps < 1e9 else f"{bps / 1e9:9.2f} GB/s"


def read_json(path: Path) -> Any:
    with open(path, encoding="utf-8") as src:
        return json.load(src)


def app_state(app_dir: Path) -> dict:
    try:
        return read_json(app_dir / "state.json")
    except (OSError, ValueError):
        return {}


def tail(path: Path, n: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return f"({path} unreadable)"


def wait_gone(pid: int | None, timeout: float = 10.0) -> bool:
    """Wait for ``pid`` to exit (reaping it when it is our child); True once it is gone."""
    if not pid:
        return True
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return True
        except ChildProcessError:
            pass
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                if f.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                    return True
        except (OSError, IndexError):
            return True
        time.sleep(0.005)
    return False


def wait_markers(folder: Path, n: int, timeout: float, check: Callable[[], None] | None = None) -> float:
    """perf_counter() when ``folder`` first holds ``n`` files; polls every millisecond."""
    deadline = time.perf_counter() + timeout
    next_check = 0.0
    while True:
        if len(os.listdir(folder)) >= n:
            return time.perf_counter()
        now = time.perf_counter()
        if now > deadline:
            raise RuntimeError(f"only {len(os.listdir(folder))} of {n} replicas started within {timeout:.0f} s")
        if check is not None and now >= next_check:
            check()
            next_check = now + 0.25
        time.sleep(0.001)


def wait_state(app_dir: Path, timeout: float, poll: float = 0.005) -> str:
    """perf-timed wait until the app's state.json is terminal; returns the state."""
    deadline = time.perf_counter() + timeout
    while True:
        state = app_state(app_dir).get("state")
        if state in TERMINAL:
            return state
        if time.perf_counter() > deadline:
            raise RuntimeError(f"{app_dir.name} still {state} after {timeout:.0f} s; supervisor log:\n"
                               + tail(app_dir / "supervisor.log"))
        time.sleep(poll)


def supervisor_times(app_dir: Path) -> tuple[float | None, float | None, float | None]:
    """Epoch times, from supervisor.log, of: supervisor running, first and last replica started."""
    ready = first = last = None
    try:
        lines = (app_dir / "supervisor.log").read_text(errors="replace").splitlines()
    except OSError:
        return None, None, None
    for line in lines:
        stamp, _, rest = line.partition(" ")
        try:
            when = datetime.fromisoformat(stamp).timestamp()
        except ValueError:
            continue
        if rest.startswith("supervisor pid") and ready is None:
            ready = when
        elif ": started pid" in rest:
            first = when if first is None else first
            last = when
    return ready, first, last


@dataclass
class Series:
    """Timed values of one measurement (seconds), plus named breakdown points."""

    label: str
    times: list[float] = field(default_factory=list)
    parts: dict[str, list[float]] = field(default_factory=dict)
    cancel: list[float] = field(default_factory=list)
    rc: int | None = None
    out_bytes: int | None = None

    def add_part(self, name: str, value: float | None) -> None:
        if value is not None:
            self.parts.setdefault(name, []).append(value)

    @property
    def median(self) -> float:
        return median(self.times)


# --------------------------------------------------------------------------
# The bench
# --------------------------------------------------------------------------


class Bench:
    def __init__(self, args: argparse.Namespace, ts: list[str], root: Path) -> None:
        self.args = args
        self.ts = ts
        self.root = root
        self.home = root / "home"
        self.work = root / "work"
        self.token = "tsbench-" + secrets.token_hex(6)
        self.home.mkdir()
        self.work.mkdir()
        self.env = dict(os.environ, TORCHSPEC_HOME=str(self.home), NO_COLOR="1", TERM="dumb", COLUMNS="120",
                        **as_installed(self.home.parent / "cache"))
        self.env.pop("FORCE_COLOR", None)
        os.environ["TORCHSPEC_HOME"] = str(self.home)  # for the in-process runner
        self.handles: list[str] = []  # every app submitted, for the clean-up
        self.popen: list[subprocess.Popen] = []  # baseline processes still to reap
        self.runner: Any = None
        self.counter = 0
        self.marker_spec = self.work / "marker.json"
        self.printer_spec = self.work / "printer.json"
        self._write_specs()

    # -- specs -----------------------------------------------------------------

    def _write_specs(self) -> None:
        marker = {
            "name": "bench-marker",
            "params": {
                "ready_dir": {"type": "string", "help": "folder for the marker files"},
                "sleep": {"type": "string", "default": str(self.args.sleep), "help": "seconds each replica sleeps"},
            },
            "roles": [{
                "name": ROLE,
                "image": str(self.work),
                "entrypoint": PY,
                "args": ["-c", MARKER_CODE, "${replica_id}", self.token, "{{ sleep }}"],
                "env": {"READY_DIR": "{{ ready_dir }}"},
                "num_replicas": self.args.replicas,
            }],
        }
        printer = {
            "name": "bench-printer",
            "roles": [{
                "name": PRINTER,
                "image": str(self.work),
                "entrypoint": PY,
                "args": ["-c", PRINTER_CODE, str(self.args.lines), self.token],
                "num_replicas": 1,
            }],
        }
        self.marker_spec.write_text(json.dumps(marker, indent=2) + "\n")
        self.printer_spec.write_text(json.dumps(printer, indent=2) + "\n")

    def ready_dir(self, tag: str) -> Path:
        self.counter += 1
        folder = self.work / "ready" / f"{self.counter:03d}-{tag}"
        folder.mkdir(parents=True)
        return folder

    def app_dir(self, handle: str) -> Path:
        return self.home / "apps" / handle.rsplit("/", 1)[1]

    def get_runner(self) -> Any:
        if self.runner is None:
            from torchspec.runner import get_runner

            self.runner = get_runner()
        return self.runner

    def load(self, spec: Path, params: dict[str, str]) -> Any:
        from torchspec.loader import load_app

        return load_app(str(spec), params)

    def run_cmd(self, cmd: list[str], stdout: int = subprocess.PIPE) -> tuple[float, int, bytes]:
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, stdout=stdout, stderr=subprocess.PIPE, env=self.env, cwd=self.work,
                              stdin=subprocess.DEVNULL)
        elapsed = time.perf_counter() - t0
        return elapsed, proc.returncode, (proc.stdout or b"") + (proc.stderr or b"")

    def app_checker(self, app_dir: Path) -> Callable[[], None]:
        def check() -> None:
            state = app_state(app_dir).get("state")
            if state in TERMINAL:
                raise RuntimeError(f"{app_dir.name} ended {state} before all replicas started: "
                                   f"{app_state(app_dir).get('msg')}\n" + tail(app_dir / "supervisor.log"))
        return check

    def no_replica_left(self, what: str) -> None:
        """Between runs: the replicas of the previous one must all be gone (they would eat the CPUs)."""
        deadline = time.monotonic() + 5
        while True:
            left = proc_matches([self.token.encode()])
            if not left:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"after {what}, {len(left)} replica processes are still alive, e.g. {left[0]}")
            time.sleep(0.01)

    # -- 1. submit -> all running ---------------------------------------------

    def submit_torchspec(self, series: Series, mode: str, timed: bool) -> None:
        n = self.args.replicas
        folder = self.ready_dir(mode)
        params = {"ready_dir": str(folder)}
        app = self.load(self.marker_spec, params) if mode == "runner" else None
        runner = self.get_runner() if mode == "runner" else None
        wall0 = time.time()
        t0 = time.perf_counter()
        if mode == "cli":
            proc = subprocess.run(self.ts + ["submit", str(self.marker_spec), "-s", "local", "-p", f"ready_dir={folder}"],
                                  capture_output=True, env=self.env, cwd=self.work, stdin=subprocess.DEVNULL)
            t_ret = time.perf_counter()
            if proc.returncode != 0:
                raise RuntimeError(f"torchspec submit exited {proc.returncode}: {proc.stderr.decode(errors='replace')}")
            handle = proc.stdout.decode().strip().splitlines()[-1]
        else:
            handle = runner.run(app, "local")
            t_ret = time.perf_counter()
        self.handles.append(handle)
        app_dir = self.app_dir(handle)
        t_all = wait_markers(folder, n, timeout=60, check=self.app_checker(app_dir))
        # cancel, timed until the app is CANCELLED (the supervisor writes that once every replica is reaped)
        c0 = time.perf_counter()
        if mode == "cli":
            proc = subprocess.run(self.ts + ["cancel", handle], capture_output=True, env=self.env, cwd=self.work,
                                  stdin=subprocess.DEVNULL)
            if proc.returncode != 0:
                raise RuntimeError(f"torchspec cancel exited {proc.returncode}: {proc.stderr.decode(errors='replace')}")
        else:
            runner.cancel(handle)
        final = wait_state(app_dir, timeout=60)
        c1 = time.perf_counter()
        if final != "CANCELLED":
            raise RuntimeError(f"{handle} ended {final}, not CANCELLED: {app_state(app_dir).get('msg')}")
        wait_gone(app_state(app_dir).get("supervisor", {}).get("pid"))
        self.no_replica_left(f"cancelling {handle}")
        if timed:
            series.times.append(t_all - t0)
            series.cancel.append(c1 - c0)
            series.add_part("returned", t_ret - t0)
            ready, first, last = supervisor_times(app_dir)
            series.add_part("supervisor running", None if ready is None else ready - wall0)
            series.add_part("first replica started", None if first is None else first - wall0)
            series.add_part("last replica started", None if last is None else last - wall0)

    def submit_popen(self, series: Series, timed: bool) -> None:
        n = self.args.replicas
        folder = self.ready_dir("popen")
        base = dict(self.env)
        base.update(READY_DIR=str(folder), PYTHONUNBUFFERED="1", TORCHSPEC_APP_ID="baseline",
                    TORCHSPEC_ROLE_NAME=ROLE, TORCHSPEC_NUM_REPLICAS=str(n), TORCHSPEC_RANK0_HOST="localhost",
                    TORCHSPEC_RESTART_COUNT="0", TORCHSPEC_JOB_ID="local://torchspec/baseline")
        cmds = []
        for i in range(n):
            env = dict(base, TORCHSPEC_REPLICA_ID=str(i),
                       TORCHELASTIC_ERROR_FILE=str(self.work / "baseline" / ROLE / str(i) / "error.json"))
            cmds.append(([PY, "-c", MARKER_CODE, str(i), self.token, str(self.args.sleep)], env))
        t0 = time.perf_counter()
        for cmd, env in cmds:
            self.popen.append(subprocess.Popen(cmd, env=env, cwd=self.work, stdin=subprocess.DEVNULL,
                                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                               start_new_session=True, close_fds=True))
        t_ret = time.perf_counter()
        t_all = wait_markers(folder, n, timeout=60)
        c0 = time.perf_counter()
        for p in self.popen:
            p.terminate()
        for p in self.popen:
            p.wait()
        c1 = time.perf_counter()
        self.popen.clear()
        self.no_replica_left("the Popen baseline")
        if timed:
            series.times.append(t_all - t0)
            series.cancel.append(c1 - c0)
            series.add_part("returned", t_ret - t0)

    # -- 2. status ---------------------------------------------------------------

    def start_status_app(self) -> tuple[str, Path]:
        """An N-replica app, running (its replicas sleep long enough for the whole phase)."""
        folder = self.ready_dir("status")
        app = self.load(self.marker_spec, {"ready_dir": str(folder), "sleep": str(self.args.status_sleep)})
        handle = self.get_runner().run(app, "local")
        self.handles.append(handle)
        app_dir = self.app_dir(handle)
        wait_markers(folder, self.args.replicas, timeout=60, check=self.app_checker(app_dir))
        return handle, app_dir

    def stop_app(self, handle: str) -> None:
        app_dir = self.app_dir(handle)
        if app_state(app_dir).get("state") not in TERMINAL:
            self.get_runner().cancel(handle)
            wait_state(app_dir, timeout=60)
        wait_gone(app_state(app_dir).get("supervisor", {}).get("pid"))

    # -- 3. logs -----------------------------------------------------------------

    def printer_app(self) -> tuple[str, Path, float]:
        """A finished app whose one replica printed --lines lines; returns it and the submit-to-end time."""
        app = self.load(self.printer_spec, {})
        t0 = time.perf_counter()
        handle = self.get_runner().run(app, "local")
        self.handles.append(handle)
        app_dir = self.app_dir(handle)
        final = wait_state(app_dir, timeout=max(120.0, self.args.lines / 2000), poll=0.02)
        elapsed = time.perf_counter() - t0
        if final != "SUCCEEDED":
            raise RuntimeError(f"the printer app ended {final}: {app_state(app_dir).get('msg')}\n"
                               + tail(app_dir / "supervisor.log"))
        wait_gone(app_state(app_dir).get("supervisor", {}).get("pid"))
        return handle, app_dir, elapsed

    # -- clean-up ----------------------------------------------------------------

    def cleanup(self) -> list[tuple[int, str]]:
        """Stop every app and baseline process; returns what was still alive at the end (then killed)."""
        for p in self.popen:
            try:
                p.kill()
                p.wait(5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.popen.clear()
        for handle in self.handles:
            app_dir = self.app_dir(handle)
            state = app_state(app_dir)
            if state.get("state") in TERMINAL:
                continue
            try:
                self.get_runner().cancel(handle)
                wait_state(app_dir, timeout=20)
            except Exception as e:  # noqa: BLE001 - keep cleaning up
                print(f"bench: cancelling {handle} failed: {e}; killing its processes", file=sys.stderr)
                for role in state.get("roles", {}).values():
                    for replica in role.get("replicas", []):
                        if replica.get("pgid"):
                            try:
                                os.killpg(int(replica["pgid"]), signal.SIGKILL)
                            except OSError:
                                pass
        for handle in self.handles:
            wait_gone(app_state(self.app_dir(handle)).get("supervisor", {}).get("pid"), timeout=10)
        if self.runner is not None:
            self.runner.close()
        # Anything left: our replicas carry the token, supervisors name their app folder under home.
        needles = [self.token.encode(), str(self.home).encode()]
        deadline = time.monotonic() + 3
        left = proc_matches(needles)
        while left and time.monotonic() < deadline:
            time.sleep(0.05)
            left = proc_matches(needles)
        for pid, _ in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        return left


# --------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------

# Targets: goals for the implementation, not assertions (see the module docstring).
SUBMIT_CLI_TARGET = 1.5      # torchspec submit -> all running, over the Popen loop
SUBMIT_RUNNER_TARGET = 1.3   # Runner.run in process -> all running, over the Popen loop
STATUS_MS_TARGET = 150.0     # torchspec status of a running app, absolute
STATUS_RATIO_TARGET = 2.0    # ... over `python -c "import yaml"`
LOGS_VS_CAT_TARGET = 0.01    # bytes/s of torchspec logs over cat's (a plain Python loop reaches ~0.015)
LOGS_VS_PY_TARGET = 1.25     # torchspec logs time over the minimal Python loop: at least 0.8x its throughput


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--replicas", type=int, default=32, help="replicas of the submitted app (default 32)")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs of each measurement; the median is reported (default 3)")
    ap.add_argument("--lines", type=int, default=200_000, help="lines the logs app prints, ~50 bytes each (default 200000)")
    ap.add_argument("--sleep", type=float, default=30.0, help="seconds each submit-bench replica sleeps after its marker (default 30)")
    ap.add_argument("--status-sleep", type=float, default=120.0,
                    help="seconds the replicas of the app that `status` is timed on sleep (default 120; it is cancelled when done)")
    ap.add_argument("--runner", choices=["auto", "script", "module"], default="auto",
                    help="run torchspec as the console script beside sys.executable, or as `python -m torchspec` (default auto)")
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON to PATH")
    ap.add_argument("--fail-on-miss", action="store_true", help="exit 1 when a target is missed (off by default: timings vary by machine)")
    args = ap.parse_args(argv)
    if args.replicas < 1 or args.repeat < 1 or args.lines < 1:
        ap.error("--replicas, --repeat and --lines must be at least 1")
    if not sys.platform.startswith("linux"):
        print("bench: this benchmark reads /proc to check that no process survives; it runs on Linux only", file=sys.stderr)
        return 2

    ts = find_torchspec(args.runner)
    if ts is None:
        print("bench: cannot run torchspec: no `torchspec` script beside", PY,
              "and no torchspec/__main__.py; install the project (pip install -e .)", file=sys.stderr)
        return 2
    cat = shutil.which("cat")
    if cat is None:
        print("bench: no `cat` on PATH", file=sys.stderr)
        return 2
    # installed libraries import from bytecode; compile torchspec too, whatever PYTHONDONTWRITEBYTECODE says
    subprocess.run([PY, "-m", "compileall", "-q", str(REPO / "torchspec")], check=False)

    started = time.perf_counter()
    root = Path(tempfile.mkdtemp(prefix="torchspec-bench-local-"))
    bench = Bench(args, ts, root)
    R = args.repeat
    submit = {m: Series(m) for m in ("cli", "runner", "popen")}
    startup: dict[str, Series] = {}
    logs: dict[str, Series] = {}
    info: dict[str, Any] = {}
    survivors: list[tuple[int, str]] = []
    failed: BaseException | None = None
    try:
        # 1. submit -> all replicas running ------------------------------------------
        print(f"1/3 submit -> all {args.replicas} replicas running ({R} runs each after a warm-up, then cancel) ...",
              file=sys.stderr)
        for r in range(R + 1):
            timed = r > 0
            bench.submit_torchspec(submit["cli"], "cli", timed)
            bench.submit_torchspec(submit["runner"], "runner", timed)
            bench.submit_popen(submit["popen"], timed)
            print(f"  {'warm-up' if r == 0 else f'round {r}/{R}'} done", file=sys.stderr)

        # 2. status and start-up -------------------------------------------------------
        print(f"2/3 status of a running {args.replicas}-replica app, and start-up times ...", file=sys.stderr)
        handle, app_dir = bench.start_status_app()
        try:
            cmds = {
                "status": ts + ["status", handle],
                "import-yaml": [PY, "-c", "import yaml"],
                "cat-state": [cat, str(app_dir / "state.json")],
                "pass": [PY, "-c", "pass"],
                "version": ts + ["--version"],
                "import-supervisor": [PY, "-c", "import torchspec.schedulers.local.supervisor"],
            }
            startup = {name: Series(name) for name in cmds}
            for r in range(R + 1):
                for name, cmd in cmds.items():
                    t, rc, out = bench.run_cmd(cmd)
                    if rc != 0:
                        raise RuntimeError(f"{' '.join(cmd)} exited {rc}: {out.decode(errors='replace')[:500]}")
                    if r > 0:
                        startup[name].times.append(t)
                    startup[name].rc = rc
            info["status_state"] = app_state(app_dir).get("state")
        finally:
            bench.stop_app(handle)
        bench.no_replica_left("the status app")

        # 3. logs throughput --------------------------------------------------------------
        print(f"3/3 logs of a replica that printed {args.lines} lines ...", file=sys.stderr)
        handle, app_dir, ingest = bench.printer_app()
        output_log = app_dir / PRINTER / "0" / "output.log"
        label = f"{PRINTER}/0"
        payload = sum(len("line %07d abcdefghijklmnopqrstuvwxyz0123456789\n" % i) for i in range(args.lines))
        info.update(ingest_s=ingest, payload_bytes=payload, stored_bytes=output_log.stat().st_size)
        cmds = {
            "logs": ts + ["logs", handle, label],
            "py-logs": [PY, "-c", LOGS_BASELINE, str(output_log), label],
            "cat": [cat, str(output_log)],
        }
        logs = {name: Series(name) for name in cmds}
        # warm-up: output captured, to count the bytes and check that logs prints what was printed
        outputs: dict[str, bytes] = {}
        for name, cmd in cmds.items():
            proc = subprocess.run(cmd, capture_output=True, env=bench.env, cwd=bench.work, stdin=subprocess.DEVNULL)
            logs[name].rc = proc.returncode
            logs[name].out_bytes = len(proc.stdout)
            outputs[name] = proc.stdout
            if proc.returncode != 0:
                raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr.decode(errors='replace')[:500]}")
        lines = outputs["logs"].splitlines()
        expect = [f"{label} line {i:07d} abcdefghijklmnopqrstuvwxyz0123456789".encode() for i in (0, args.lines - 1)]
        info["logs_output_ok"] = len(lines) == args.lines and [lines[0], lines[-1]] == expect
        info["logs_same_as_python"] = outputs["logs"] == outputs["py-logs"]
        if not info["logs_output_ok"]:
            print(f"  warning: torchspec logs printed {len(lines)} lines (expected {args.lines}); first:"
                  f" {lines[:1]!r}", file=sys.stderr)
        del outputs, lines
        for r in range(R):
            for name, cmd in cmds.items():
                t, rc, _ = bench.run_cmd(cmd, stdout=subprocess.DEVNULL)
                logs[name].times.append(t)
                logs[name].rc = rc
    except BaseException as e:  # noqa: BLE001 - clean up first, report after
        failed = e
    finally:
        survivors = bench.cleanup()
        shutil.rmtree(root, ignore_errors=True)
    if failed is not None:
        if survivors:
            print(f"bench: killed {len(survivors)} processes that survived: {survivors[:3]}", file=sys.stderr)
        if isinstance(failed, KeyboardInterrupt):
            return 130
        print(f"bench: {failed}", file=sys.stderr)
        return 2

    total = time.perf_counter() - started
    N = args.replicas

    # ------------------------------------------------------------------ report
    print()
    print(f"python {platform.python_version()} on {platform.system()} {platform.machine()}, {os.cpu_count()} cpus;"
          f" torchspec runs as: {' '.join(ts)}; total {total:.0f} s")
    print()
    print(f"{'submit -> all ' + str(N) + ' replicas running':44} {'median':>11} {'min':>11} {'runs':>5}"
          f" {'cancel':>11}")
    print("-" * 86)
    labels = {"cli": "torchspec submit SPEC (CLI)", "runner": "get_runner().run(app, 'local')",
              "popen": f"baseline: Popen loop of {N}"}
    for m in ("cli", "runner", "popen"):
        s = submit[m]
        print(f"{labels[m]:44} {fmt_s(s.median):>11} {fmt_s(min(s.times)):>11} {len(s.times):>5}"
              f" {fmt_s(median(s.cancel)):>11}")
    print()
    print(f"{'where the time goes (medians from t0)':44} {'cli':>11} {'runner':>11} {'popen':>11}")
    print("-" * 80)
    for part in ("returned", "supervisor running", "first replica started", "last replica started"):
        cells = [fmt_s(median(submit[m].parts.get(part, []))) for m in ("cli", "runner", "popen")]
        what = {"returned": "submit call returned / Popen loop done"}.get(part, part)
        print(f"{what:44} {cells[0]:>11} {cells[1]:>11} {cells[2]:>11}")
    cells = [fmt_s(submit[m].median) for m in ("cli", "runner", "popen")]
    print(f"{'all markers exist':44} {cells[0]:>11} {cells[1]:>11} {cells[2]:>11}")
    print("(cancel: `torchspec cancel` / Runner.cancel until state.json says CANCELLED; baseline: SIGTERM + wait)")

    print()
    slabels = {
        "status": f"torchspec status H ({N} replicas running)",
        "cat-state": "cat state.json",
        "import-yaml": 'python -c "import yaml"',
        "pass": 'python -c "pass"',
        "version": "torchspec --version",
        "import-supervisor": "python -c 'import ...local.supervisor'",
    }
    print(f"{'command':44} {'median':>11} {'min':>11} {'runs':>5} {'exit':>5}")
    print("-" * 80)
    for name in ("status", "cat-state", "import-yaml", "pass", "version", "import-supervisor"):
        s = startup[name]
        print(f"{slabels[name]:44} {fmt_s(s.median):>11} {fmt_s(min(s.times)):>11} {len(s.times):>5} {s.rc:>5}")

    print()
    llabels = {"logs": f"torchspec logs H {PRINTER}/0", "py-logs": "baseline: python strip+prefix loop",
               "cat": "cat output.log"}
    print(f"{'logs of ' + str(args.lines) + ' lines (stdout to /dev/null)':44} {'median':>11} {'bytes out':>11}"
          f" {'throughput':>14}")
    print("-" * 84)
    rates = {}
    for name in ("logs", "py-logs", "cat"):
        s = logs[name]
        rates[name] = (s.out_bytes or 0) / s.median
        print(f"{llabels[name]:44} {fmt_s(s.median):>11} {s.out_bytes:>11,} {fmt_rate(rates[name]):>14}")
    print(f"(the replica printed {info['payload_bytes']:,} bytes; the supervisor stored {info['stored_bytes']:,}"
          f" in output.log (nothing else), submit to SUCCEEDED in {info['ingest_s']:.2f} s ="
          f" {fmt_rate(info['payload_bytes'] / info['ingest_s']).strip()} of replica output)")

    # ratios
    ratios = [
        ("submit CLI / Popen", submit["cli"].median / submit["popen"].median, "<=", SUBMIT_CLI_TARGET),
        ("submit runner / Popen", submit["runner"].median / submit["popen"].median, "<=", SUBMIT_RUNNER_TARGET),
        ("status (ms)", startup["status"].median * 1000, "<=", STATUS_MS_TARGET),
        ("status / import-yaml", startup["status"].median / startup["import-yaml"].median, "<=", STATUS_RATIO_TARGET),
        ("logs / cat throughput", rates["logs"] / rates["cat"], ">=", LOGS_VS_CAT_TARGET),
        ("logs / python-loop time", logs["logs"].median / logs["py-logs"].median, "<=", LOGS_VS_PY_TARGET),
    ]
    print()
    print(f"{'ratio':28} {'value':>8} {'target':>9}  verdict")
    print("-" * 58)
    misses = 0
    for label, value, op, target in ratios:
        ok = value <= target if op == "<=" else value >= target
        misses += not ok
        print(f"{label:28} {value:8.3f} {op + ' ' + str(target):>9}  {'PASS' if ok else 'MISS'}")
    if not info.get("logs_output_ok", True) or not info.get("logs_same_as_python", True):
        print("warning: torchspec logs did not print exactly the replica's lines, each prefixed with its label")

    # what dominates the submit latency: split both paths at the same points and compare
    cli, run, pop = submit["cli"], submit["runner"], submit["popen"]
    version, sup_import, bare = startup["version"].median, startup["import-supervisor"].median, startup["pass"].median
    m = lambda s, part: median(s.parts.get(part, []))  # noqa: E731
    cli_ret, cli_ready, cli_last = m(cli, "returned"), m(cli, "supervisor running"), m(cli, "last replica started")
    sup_start = m(run, "supervisor running") - m(run, "returned")  # in process nothing else runs meanwhile
    pop_loop = m(pop, "returned")
    phases = [
        ("Python start-ups before the first replica can start", cli_ready),
        (f"a slower launch loop than Popen's for {N} processes", (cli_last - cli_ready) - pop_loop),
        ("the replicas' own start-up after the last launch", (cli.median - cli_last) - (pop.median - pop_loop)),
    ]
    print()
    print(f"what dominates the submit latency (CLI, medians): {fmt_s(cli.median - pop.median).strip()} more than the"
          f" Popen loop, of which")
    print(f"  {fmt_s(phases[0][1]).strip():>9} before the supervisor can launch anything: the CLI runs"
          f" {fmt_s(cli_ret).strip()} (start-up, imports, loading the spec; `torchspec --version` alone:"
          f" {fmt_s(version).strip()},")
    print(f"            `python -c pass` {fmt_s(bare).strip()}), and the supervisor it starts needs ~"
          f"{fmt_s(sup_start).strip()} to run (in process: run() returned -> supervisor running;")
    print(f"            importing its module alone: {fmt_s(sup_import).strip()}); the two overlap a little")
    print(f"  {fmt_s(phases[1][1]).strip():>9} in the launch loop: the supervisor starts the {N} replicas in"
          f" {fmt_s(cli_last - cli_ready).strip()} ({(cli_last - cli_ready) / max(N - 1, 1) * 1000:.1f} ms each),"
          f" the Popen loop in {fmt_s(pop_loop).strip()} ({pop_loop / N * 1000:.1f} ms each)")
    print(f"  {fmt_s(phases[2][1]).strip():>9} after the last launch, until every marker exists")
    top = max(phases, key=lambda p: p[1])
    print(f"  -> dominated by {top[0]}")
    info["submit_phases"] = {name: value for name, value in phases}
    info["supervisor_startup_s"] = sup_start

    print()
    if survivors:
        print(f"FAILED: {len(survivors)} processes survived the bench and were killed: {survivors[:3]}")
    else:
        print(f"no process survived: none of the replicas (marker token {bench.token}) nor supervisors"
              f" is alive; {root} removed")

    if args.json:
        report = {
            "replicas": N, "repeat": R, "lines": args.lines, "python": platform.python_version(),
            "cpus": os.cpu_count(), "runner": ts, "total_s": total,
            "submit": {m: {"median": s.median, "runs": s.times, "cancel": s.cancel, "parts": s.parts}
                       for m, s in submit.items()},
            "startup": {n: {"median": s.median, "runs": s.times} for n, s in startup.items()},
            "logs": {n: {"median": s.median, "runs": s.times, "bytes": s.out_bytes} for n, s in logs.items()},
            "info": info,
            "ratios": {label: {"value": value, "target": f"{op} {target}"} for label, value, op, target in ratios},
            "survivors": survivors,
        }
        out = Path(args.json)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=2) + "\n")
        print(f"results written to {out}")
    if survivors:
        return 3
    return 1 if (args.fail_on_miss and misses) else 0


if __name__ == "__main__":
    sys.exit(main())
