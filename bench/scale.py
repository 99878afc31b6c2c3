#!/usr/bin/env python3
"""How the local scheduler scales with replicas: time per replica should stay flat as apps grow.

    python bench/scale.py                       # 16, 64, 256 and 1,000 replicas
    python bench/scale.py --sizes 16,256 --repeat 3

For each size N, each measurement a blocking subprocess (nothing here polls):

  run       `torchspec submit --wait` of N replicas running `true`
  status    `torchspec status` of an app of N replicas running `sleep`
  cancel    `torchspec cancel` of that app, then `torchspec wait` until it is CANCELLED

It prints the curve: the total time and the marginal time per replica (what
each replica added between two sizes; a fixed start-up cost hides in the
per-replica average of small apps, so flatness is judged on the margin).  Per
measurement it is PASS when the margin of the last interval is at most
--flat (default 1.5) times the margin of the one before (at least 0.1 ms, so
that noise on a near-zero margin does not decide): time per replica is
flat, not growing.  The script exits 0 whatever the timings (1 on a MISS with
--fail-on-miss).  Needs at least three sizes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import find_torchspec, median, timed

MEASUREMENTS = ("run", "status", "cancel")


def spec(work: Path, name: str, n: int, command: str) -> Path:
    path = work / f"{name}-{n}.yaml"
    path.write_text(f"name: {name}\nroles:\n  - name: r\n    image: .\n    entrypoint: sh\n"
                    f"    args: [-c, '{command}']\n    num_replicas: {n}\n")
    return path


def wait_all_running(app_dir: Path, n: int, timeout: float = 600) -> None:
    """Block until the app's state.json says every replica runs: woken by each state write, no polling."""
    from torchspec.schedulers.filewatch import FolderWatch

    deadline = time.monotonic() + timeout
    with FolderWatch(str(app_dir)) as watch:
        while time.monotonic() < deadline:
            state = json.loads((app_dir / "state.json").read_text())
            running = [r for role in state["roles"].values() for r in role["replicas"] if r["state"] == "RUNNING"]
            if len(running) == n:
                return
            watch.wait(5)
    raise RuntimeError(f"{app_dir.name}: not all {n} replicas running after {timeout:.0f} s")


def measure(ts: list[str], env: dict[str, str], work: Path, n: int) -> dict[str, float]:
    """Seconds of each measurement for an app of ``n`` replicas."""
    out: dict[str, float] = {}
    out["run"], _ = timed(ts + ["submit", "--wait", str(spec(work, "noop", n, "true"))], env, work)
    _, handle = timed(ts + ["submit", str(spec(work, "sleep", n, "echo up; exec sleep 600"))], env, work)
    handle = handle.strip()
    app_dir = Path(env["TORCHSPEC_HOME"]) / "apps" / handle.rsplit("/", 1)[-1]
    wait_all_running(app_dir, n)
    out["status"], _ = timed(ts + ["status", handle], env, work)
    cancelled, _ = timed(ts + ["cancel", handle], env, work)
    waited, _ = timed(ts + ["wait", handle], env, work, ok=(5,))
    out["cancel"] = cancelled + waited
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="16,64,256,1000", help="replica counts (default 16,64,256,1000)")
    ap.add_argument("--repeat", type=int, default=2, help="rounds per size; the median is reported (default 2)")
    ap.add_argument("--flat", type=float, default=1.5, help="largest/smallest per-replica time allowed")
    ap.add_argument("--runner", choices=["auto", "script", "module"], default="auto")
    ap.add_argument("--fail-on-miss", action="store_true")
    args = ap.parse_args()
    ts = find_torchspec(args.runner)
    if ts is None:
        print("torchspec is not installed (pip install -e .)", file=sys.stderr)
        return 2
    sizes = sorted(int(s) for s in args.sizes.split(","))
    if len(sizes) < 3:
        ap.error("--sizes needs at least three sizes")
    work = Path(tempfile.mkdtemp(prefix="torchspec-bench-scale-"))
    try:
        env = {**os.environ, "TORCHSPEC_HOME": str(work / "home"), "NO_COLOR": "1"}
        totals: dict[int, dict[str, float]] = {}
        for n in sizes:
            rounds = [measure(ts, env, work, n) for _ in range(args.repeat)]
            totals[n] = {m: median([r[m] for r in rounds]) for m in MEASUREMENTS}
            print(f"{n:>6} replicas: " + "  ".join(f"{m} {totals[n][m] * 1000:8.1f} ms" for m in MEASUREMENTS),
                  flush=True)
        margins = {m: [(totals[b][m] - totals[a][m]) / (b - a) for a, b in zip(sizes, sizes[1:])]
                   for m in MEASUREMENTS}
        print("\nmarginal ms per replica, by interval: "
              + "  ".join(f"{a}->{b}" for a, b in zip(sizes, sizes[1:])))
        for m in MEASUREMENTS:
            print(f"  {m:<8} " + "  ".join(f"{v * 1000:7.2f}" for v in margins[m]))
        missed = False
        print(f"\n{'measurement':<12} {'last/previous':>17} {'target':>8}  verdict")
        for m in MEASUREMENTS:
            previous, last = max(margins[m][-2], 1e-4), margins[m][-1]
            ratio = last / previous
            missed |= ratio > args.flat
            print(f"{m:<12} {ratio:17.2f} {'<= ' + str(args.flat):>8}  {'PASS' if ratio <= args.flat else 'MISS'}")
        return 1 if missed and args.fail_on_miss else 0
    finally:
        subprocess.run(["pkill", "-f", str(work)], check=False)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
