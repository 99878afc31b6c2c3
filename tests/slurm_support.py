"""What the Slurm tests need from a real cluster: one that answers, or a clear skip.

``scripts/test`` starts a throw-away cluster (``scripts/slurm-cluster start
--nodes 3``) and exports its ``SLURM_CONF``; with ``TORCHSPEC_REQUIRE_SLURM=1``
(always in CI) a missing cluster fails the tests instead of skipping them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from typing import Any, Iterable, List

import skips

HOW = "start one with `eval \"$(scripts/slurm-cluster start --nodes 3)\"` (as root), or run `bash scripts/test`"


def cluster_problem() -> str:
    """Why no usable cluster answers here; "" when one does (sinfo lists an idle or mixed node)."""
    if shutil.which("sbatch") is None or shutil.which("sinfo") is None:
        return "the Slurm client commands (sbatch, sinfo) are not installed"
    try:
        result = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=15)
    except subprocess.TimeoutExpired:
        return "sinfo did not answer within 15 s"
    if result.returncode != 0:
        first = (result.stderr.strip().splitlines() or [f"rc {result.returncode}"])[-1]
        return f"no Slurm controller answers ({first}; SLURM_CONF={os.environ.get('SLURM_CONF', 'unset')})"
    states = set(result.stdout.split())
    if not states & {"idle", "mixed", "allocated"}:
        return f"the cluster has no usable node (node states: {', '.join(sorted(states)) or 'none'})"
    return ""


def cluster_or_skip() -> None:
    """Skip the test (fail it under TORCHSPEC_REQUIRE_SLURM=1) unless a Slurm cluster answers."""
    problem = cluster_problem()
    if problem:
        skips.skip_or_fail("SLURM", f"{problem}; {HOW}")


def live_jobs(job_ids: Iterable[str]) -> List[str]:
    """Those of ``job_ids`` that Slurm still runs or plans to run."""
    ids = [j for j in job_ids if j]
    if not ids:
        return []
    out = subprocess.run(["squeue", "-h", "-t", "all", "-o", "%i %T"], capture_output=True, text=True,
                         timeout=30).stdout
    live = []
    for line in out.splitlines():
        job, _, state = line.partition(" ")
        if job.split("+")[0] in ids and state not in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT",
                                                      "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL",
                                                      "DEADLINE"):
            live.append(job.split("+")[0])
    return sorted(set(live))


def cancel_and_wait(job_ids: Iterable[str], timeout: float = 30) -> None:
    """scancel every job of ``job_ids`` still alive and wait until Slurm has ended them."""
    ids = live_jobs(job_ids)
    if ids:
        subprocess.run(["scancel", *ids], capture_output=True, timeout=30)
    deadline = time.monotonic() + timeout
    while live_jobs(ids) and time.monotonic() < deadline:
        time.sleep(0.3)


def wait_terminal(sched: Any, job_id: str, timeout: float = 240) -> Any:
    """The scheduler's DescribeAppResponse of the job once it ended, or after ``timeout`` seconds."""
    from torchspec import specs

    deadline = time.monotonic() + timeout
    while True:
        desc = sched.describe(job_id)
        assert desc is not None, f"Slurm does not know job {job_id}"
        if specs.is_terminal(desc.state) or time.monotonic() > deadline:
            return desc
        time.sleep(1)
