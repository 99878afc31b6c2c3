#!/usr/bin/env python3
"""Submit-to-running latency of the ``slurm`` scheduler against a bare ``sbatch --wrap``.

    eval "$(scripts/slurm-cluster start --nodes 3)"    # or any cluster SLURM_CONF points at
    python bench/slurm.py                              # 5 rounds
    python bench/slurm.py --repeat 10 --json bench/out/slurm.json

Each round, interleaved so that drift spreads over both:
  torchspec   SlurmScheduler.submit of a one-role, one-replica app whose command
              creates a marker file and sleeps (the request is built, i.e. dry-run,
              before the clock starts; the clock covers sbatch and the job's start:
              the batch script, scontrol for rank 0's host, the srun step)
  sbatch      `sbatch --wrap 'touch MARKER; sleep 60'`: the same command, no step
The clock stops when the marker exists; the job is then cancelled.  Medians are
printed; the goal is that torchspec adds at most 1 s to Slurm's own latency.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from torchspec import specs
from torchspec.schedulers.slurm.scheduler import SlurmScheduler


def wait_for(path: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not appear within {timeout}s")
        time.sleep(0.02)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="torchspec-bench-slurm-"))
    sched = SlurmScheduler("bench")
    times: dict = {"torchspec": [], "sbatch": []}
    jobs = []
    try:
        for i in range(args.repeat):
            marker = tmp / f"ts-{i}"
            app = specs.AppDef("bench", roles=[specs.Role(
                name="r", image=str(tmp), entrypoint="bash", args=["-c", f"touch {marker}; sleep 60"],
                resource=specs.Resource(cpu=1, gpu=0, memMB=0))])
            info = sched.submit_dryrun(app, {"log_dir": str(tmp / "logs")})
            t0 = time.perf_counter()
            jobs.append(sched.schedule(info))
            wait_for(marker)
            times["torchspec"].append(time.perf_counter() - t0)
            sched.cancel(jobs[-1])

            marker = tmp / f"sb-{i}"
            t0 = time.perf_counter()
            out = subprocess.run(["sbatch", "--parsable", f"--output={tmp}/sb-%j.out",
                                  "--wrap", f"touch {marker}; sleep 60"], capture_output=True, text=True, check=True)
            jobs.append(out.stdout.strip())
            wait_for(marker)
            times["sbatch"].append(time.perf_counter() - t0)
            subprocess.run(["scancel", jobs[-1]], check=False)
    finally:
        subprocess.run(["scancel", *jobs], capture_output=True, check=False)
    med = {k: statistics.median(v) for k, v in times.items()}
    overhead = med["torchspec"] - med["sbatch"]
    print(f"submit -> running, median of {args.repeat}:")
    for key, value in med.items():
        print(f"  {key:10s} {value:6.2f} s   (all: {', '.join(f'{t:.2f}' for t in times[key])})")
    print(f"  overhead   {overhead:+6.2f} s   target <= 1.00 s: {'PASS' if overhead <= 1.0 else 'MISS'}")
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump({"times": times, "median": med, "overhead_s": overhead}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
