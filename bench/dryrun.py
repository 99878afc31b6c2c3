#!/usr/bin/env python3
"""Benchmark ``torchspec dryrun`` of the built-in ``dist.ddp`` against ``torchx run --dryrun`` of TorchX's.

    python bench/dryrun.py                  # 9 rounds
    python bench/dryrun.py --repeat 5

Both print the request a scheduler would get for the same job (one node of
two processes running train.py), without submitting it:

  local         torchspec dryrun -s local dist.ddp -p j=1x2 -p script=train.py
  torchx-local  torchx run --workspace "" --dryrun -s local_cwd dist.ddp -j 1x2 --script train.py
  kubernetes    torchspec dryrun -s kubernetes -c flavor=volcano,queue=default dist.ddp -p j=1x2 ...
  torchx-k8s    torchx run --workspace "" --dryrun -s kubernetes -cfg queue=default dist.ddp -j 1x2 ...

torchx comes from the `bench` extra (it needs no torch for a dry run); when
it is not importable its rows are skipped with a note, and so are the k8s
rows of either tool when the kubernetes package is missing.  Rounds are
interleaved, every command runs once untimed first, and each time is one
blocking subprocess.run (the median is reported).  It prints the ratios
against their targets with PASS or MISS and exits 0 whatever the timings (1
on a MISS with --fail-on-miss).
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import sys
import tempfile
from pathlib import Path

from common import bench_env, median, parse_and_find, timed

#: (ratio, numerator, denominator, target)
TARGETS = [("local / torchx", "local", "torchx-local", 0.4), ("kubernetes / torchx", "kubernetes", "torchx-k8s", 0.3)]


def find_torchx() -> list[str] | None:
    """The command that runs torchx: its script beside sys.executable, else ``python -m torchx.cli.main``."""
    script = Path(sys.executable).parent / "torchx"
    if script.exists():
        return [str(script)]
    try:
        found = importlib.util.find_spec("torchx.cli.main") is not None
    except ImportError:
        found = False
    return [sys.executable, "-m", "torchx.cli.main"] if found else None


def commands(ts: list[str], tx: list[str] | None) -> dict[str, list[str]]:
    """What to time, by row name; rows whose tool is missing are left out (and said so)."""
    job = ["dist.ddp", "-p", "j=1x2", "-p", "script=train.py"]
    out = {"local": ts + ["dryrun", "-s", "local", *job]}
    k8s = importlib.util.find_spec("kubernetes") is not None
    if k8s:
        # a Volcano Job in queue default: what TorchX's kubernetes scheduler makes (it needs the queue)
        # with TorchX's own image for dist.ddp: a folder ('.', the local default) is no container image
        out["kubernetes"] = ts + ["dryrun", "-s", "kubernetes", "-c", "flavor=volcano,queue=default", *job, "-p",
                                  "image=ghcr.io/pytorch/torchx:0.7.0"]
    else:
        print("note: the kubernetes package is missing: no kubernetes rows", file=sys.stderr)
    if tx is None:
        print("note: torchx is not importable (pip install -e '.[bench]'): no torchx rows", file=sys.stderr)
        return out
    tx_job = ["dist.ddp", "-j", "1x2", "--script", "train.py"]
    # --workspace "": no image build (for kubernetes TorchX would build and push the current folder); torchspec
    # builds none without --workspace either
    out["torchx-local"] = tx + ["run", "--workspace", "", "--dryrun", "-s", "local_cwd", *tx_job]
    if k8s:
        out["torchx-k8s"] = tx + ["run", "--workspace", "", "--dryrun", "-s", "kubernetes", "-cfg", "queue=default", *tx_job]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=9, help="timed rounds; the median is reported (default 9)")
    args, ts = parse_and_find(ap)
    work = Path(tempfile.mkdtemp(prefix="torchspec-bench-dryrun-"))
    try:
        (work / "train.py").write_text("print('train')\n")
        env = bench_env(work)
        env["TORCHX_TRACKING_EXPERIMENT_NAME"] = "bench"  # keeps torchx from asking anything of its trackers
        rows = commands(ts, find_torchx())
        times: dict[str, list[float]] = {name: [] for name in rows}
        for round_ in range(args.repeat + 1):  # the first round warms caches and is not counted
            for name, cmd in rows.items():
                elapsed, _ = timed(cmd, env, work)
                if round_:
                    times[name].append(elapsed)
        print(f"dry run of dist.ddp (1 node x 2 processes), {args.repeat} rounds (medians)")
        medians = {name: median(values) for name, values in times.items()}
        for name, value in medians.items():
            print(f"  {name:<13} {value * 1000:8.1f} ms")
        missed = False
        print(f"\n{'ratio':<22} {'value':>6} {'target':>8}  verdict")
        for what, num, den, target in TARGETS:
            if num not in medians or den not in medians:
                print(f"{what:<22} {'-':>6} {'<= ' + str(target):>8}  skipped")
                continue
            ratio = medians[num] / medians[den]
            missed |= ratio > target
            print(f"{what:<22} {ratio:6.2f} {'<= ' + str(target):>8}  {'PASS' if ratio <= target else 'MISS'}")
        return 1 if missed and args.fail_on_miss else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
