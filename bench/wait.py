#!/usr/bin/env python3
"""Benchmark how long torchspec takes to notice that a local app ended, against a Popen floor.

    python bench/wait.py                     # 32 replicas, 7 rounds
    python bench/wait.py --replicas 8 --repeat 11

The app's replicas run `true`: they do no work of their own, so what is
measured is torchspec's overhead.  Each round times, interleaved so that
drift in the machine's speed spreads over all of them:

  submit-wait  `torchspec submit --wait SPEC` until it exits (the app SUCCEEDED)
  wait         `torchspec submit SPEC`, then `torchspec wait HANDLE`, until wait exits
  submit       `torchspec submit SPEC` until it returns the handle
  floor        a Python script that Popens N `true` processes and waits for them all
  logs -f      one replica prints a line with its time.time() every 0.1 s (after 1.5 s,
               so `torchspec logs -f` is following by then); the latency of a line is
               when `logs -f` printed it (read here with a blocking readline) minus that time

Nothing here polls: every time is one blocking subprocess.run.  It prints
the medians and the ratios against their targets with PASS or MISS; the
targets are goals, not assertions (the script exits 0 whatever the timings,
or 1 on a MISS with --fail-on-miss).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import bench_env, median, parse_and_find, timed

FLOOR = """
import subprocess, sys
procs = [subprocess.Popen(["true"]) for _ in range(int(sys.argv[1]))]
for p in procs:
    p.wait()
"""

TICKER = "import time\ntime.sleep(1.5)\nfor _ in range(40):\n    print(f'tick {time.time():.6f}', flush=True)\n" \
         "    time.sleep(0.1)\n"
#: ``logs -f``: a line printed by a replica -> printed by torchspec, median (seconds)
LOGS_F_TARGET = 0.050

#: (what, numerator, target ratio to the floor)
TARGETS = [("submit --wait / floor", "submit-wait", 2.0), ("submit + wait / floor", "wait", 2.5),
           ("submit / floor", "submit", 2.0)]


def logs_follow_latency(ts: list[str], env: dict[str, str], work: Path) -> list[float]:
    """Seconds from each line's time.time() in the replica to its arrival through `torchspec logs -f`."""
    spec = work / "ticker.yaml"
    spec.write_text("name: ticker\nroles:\n  - name: t\n    image: .\n    entrypoint: python3\n"
                    f"    args: [-c, {json.dumps(TICKER)}]\n")
    _, handle = timed(ts + ["submit", str(spec)], env, work)
    follow = subprocess.Popen(ts + ["logs", "-f", handle.strip(), "t/0"], env=env, cwd=work, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    latencies = []
    assert follow.stdout is not None
    for line in follow.stdout:  # blocking reads: nothing here polls
        arrived = time.time()
        stamp = line.rsplit(" ", 1)[-1]
        latencies.append(arrived - float(stamp))
    follow.wait()
    return latencies


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--replicas", type=int, default=32, help="replicas of the app (default 32)")
    ap.add_argument("--repeat", type=int, default=7, help="timed rounds; the median is reported (default 7)")
    args, ts = parse_and_find(ap)
    work = Path(tempfile.mkdtemp(prefix="torchspec-bench-wait-"))
    try:
        env = bench_env(work)
        spec = work / "true.yaml"
        spec.write_text(f"name: nothing\nroles:\n  - name: t\n    image: .\n    entrypoint: 'true'\n"
                        f"    num_replicas: {args.replicas}\n")
        runs: dict[str, list[float]] = {"submit-wait": [], "wait": [], "submit": [], "floor": []}
        for round_ in range(args.repeat + 1):  # the first round warms caches and is not counted
            results = {
                "submit-wait": timed(ts + ["submit", "--wait", str(spec)], env, work)[0],
                "floor": timed([sys.executable, "-c", FLOOR, str(args.replicas)], env, work)[0],
            }
            submitted, handle = timed(ts + ["submit", str(spec)], env, work)
            waited, _ = timed(ts + ["wait", handle.strip()], env, work)
            results["submit"], results["wait"] = submitted, submitted + waited
            if round_:
                for name, value in results.items():
                    runs[name].append(value)
        medians = {name: median(values) for name, values in runs.items()}
        print(f"{args.replicas} replicas running `true`, {args.repeat} rounds (medians)")
        for name, value in medians.items():
            print(f"  {name:<12} {value * 1000:8.1f} ms")
        latencies = logs_follow_latency(ts, env, work)
        latency = median(latencies)
        print(f"  logs -f      {latency * 1000:8.1f} ms a line"
              f" ({len(latencies)} lines; max {max(latencies) * 1000:.1f} ms)")
        missed = latency > LOGS_F_TARGET
        print(f"\n{'ratio':<24} {'value':>6} {'target':>8}  verdict")
        for what, name, target in TARGETS:
            ratio = medians[name] / medians["floor"]
            missed |= ratio > target
            print(f"{what:<24} {ratio:6.2f} {'<= ' + str(target):>8}  {'PASS' if ratio <= target else 'MISS'}")
        ok = latency <= LOGS_F_TARGET
        print(f"{'logs -f latency (ms)':<24} {latency * 1000:6.1f} {'<= ' + str(int(LOGS_F_TARGET * 1000)):>8}  "
              f"{'PASS' if ok else 'MISS'}")
        return 1 if missed and args.fail_on_miss else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
