#!/usr/bin/env python3
"""Submit-to-running and submit-to-succeeded of the ``ray`` scheduler against ``ray job submit``.

    ray start --head --num-cpus=2 ...; ray start --address=HEAD:6379 --num-cpus=2 ...   # or any cluster
    python bench/ray.py --address 127.0.0.1:8265            # 5 rounds (default: $RAY_ADDRESS, else 127.0.0.1:8265)
    python bench/ray.py --repeat 10 --json bench/out/ray.json

The app: one role of 4 replicas, each `true` with 1 CPU.  Each round, the two
sides interleaved (after one untimed round of each, so that both find their
packages uploaded and the cluster warm):

  torchspec   `torchspec submit -s ray -c dashboard_address=ADDR app.json` (a fresh process,
              what a user types), then RayScheduler.describe every --poll seconds:
              RUNNING once the driver placed the role's placement group (4 bundles) and
              started the 4 replica actors; SUCCEEDED once all 4 exited 0 and the job ended
  ray         `ray job submit --no-wait --address http://ADDR --working-dir W -- python app.py`
              (a fresh process), then JobSubmissionClient.get_job_info every --poll
              seconds: RUNNING once Ray started the entrypoint (earlier than torchspec's
              RUNNING, which waits for the placement), "its 4 actors exist" once the State
              API lists the script's 4 actors (the moment torchspec calls RUNNING),
              SUCCEEDED when it ended.  app.py does what torchspec's driver does: one
              placement group of 4 {CPU: 1} bundles, one actor per bundle, each running
              `true` as a child process

Both sides run as installed (bench/common.py's bench_env: torchspec's bytecode
compiled, as pip compiled Ray's; a source checkout under PYTHONDONTWRITEBYTECODE
would compile torchspec's modules again in every `torchspec submit`).  The
clock starts before the submitting process starts.  Medians are printed,
with the ratio torchspec / ray; the target is 1.2 or less for every row.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import bench_env, find_torchspec, fmt_s, median, runner_options  # before the sys.path change below

_HERE = Path(__file__).resolve().parent
# This file is named ray.py, and Python puts its folder first on sys.path: take that
# off, or `import ray` would import this script instead of Ray.
sys.path[:] = [p for p in sys.path if Path(p or os.curdir).resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

TARGET = 1.2
REPLICAS = 4
BASELINE = f'''
import subprocess, sys
import ray
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

ray.init()
pg = ray.util.placement_group([{{"CPU": 1}}] * {REPLICAS}, strategy="PACK")
ray.get(pg.ready())


@ray.remote(num_cpus=1)
class Replica:
    def run(self):
        return subprocess.run(["true"]).returncode


actors = [Replica.options(scheduling_strategy=PlacementGroupSchedulingStrategy(pg, k)).remote()
          for k in range({REPLICAS})]
sys.exit(max(ray.get([a.run.remote() for a in actors])))
'''


def poll(state_of, wanted: str, t0: float, every: float, timeout: float = 300) -> dict:
    """Seconds from ``t0`` until ``state_of()`` first says RUNNING (or REPLICAS: the app's actors exist) and
    until it says ``wanted``."""
    seen: dict = {}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = state_of()
        now = time.perf_counter() - t0
        for phase in ("RUNNING", "REPLICAS"):
            if (state in (phase, wanted) or (phase == "RUNNING" and state == "REPLICAS")) and phase not in seen:
                seen[phase] = now
        if state in ("SUCCEEDED", "FAILED", "STOPPED", "CANCELLED"):
            if state != wanted:
                raise RuntimeError(f"the app ended {state}")
            seen[wanted] = now
            return seen
        time.sleep(every)
    raise TimeoutError(f"no {wanted} within {timeout}s")


def torchspec_round(cmd: list, env: dict, work: Path, sched, every: float) -> dict:
    t0 = time.perf_counter()
    out = subprocess.run([*cmd, "submit", "-s", "ray", "-c", f"dashboard_address={sched.dashboard_address}",
                          str(work / "app.json")], capture_output=True, text=True, env=env, cwd=work)
    if out.returncode != 0:
        raise RuntimeError(f"torchspec submit failed: {out.stderr[-800:]}")
    app_id = out.stdout.strip().rsplit("/", 1)[1]

    def state() -> str:  # torchspec's RUNNING is when the replicas' actors exist
        name = sched.describe(app_id).state.name
        return "REPLICAS" if name == "RUNNING" else name

    return poll(state, "SUCCEEDED", t0, every)


def ray_round(address: str, env: dict, work: Path, client, cluster, every: float) -> dict:
    t0 = time.perf_counter()
    out = subprocess.run(["ray", "job", "submit", "--no-wait", "--address", f"http://{address}",
                          "--working-dir", str(work / "baseline"), "--", "python", "app.py"],
                         capture_output=True, text=True, env=env, cwd=work)
    if out.returncode != 0:
        raise RuntimeError(f"ray job submit failed: {out.stderr[-800:]}")
    sid = next(w for line in out.stdout.splitlines() + out.stderr.splitlines() for w in line.replace("'", " ").split()
               if w.startswith("raysubmit_"))
    job_id = []

    def state() -> str:  # Ray's RUNNING (the entrypoint started), then REPLICAS once the script's actors exist
        job = client.get_job_info(sid)
        if str(job.status.value) == "RUNNING" and job.job_id:
            job_id[:] = [job.job_id]
            with_actors = cluster.actors_of_job(job.job_id)
            return "REPLICAS" if len(with_actors) >= REPLICAS else "RUNNING"
        return str(job.status.value)

    return poll(state, "SUCCEEDED", t0, every)


class Actors:
    """The State API's actors of a job (what the baseline's script created), through the dashboard."""

    def __init__(self, address: str) -> None:
        self.url = f"http://{address}"

    def actors_of_job(self, job_id: str) -> list:
        from ray.util.state import list_actors

        os.environ["RAY_API_SERVER_ADDRESS"] = self.url  # Ray prefers it to the address given
        return list_actors(address=self.url, filters=[("job_id", "=", job_id)], raise_on_missing_output=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--address", default=None, help="the dashboard, host:port")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--poll", type=float, default=0.05, help="seconds between two looks at the app")
    parser.add_argument("--json", help="also write the results here")
    runner_options(parser)
    args = parser.parse_args()
    address = (args.address or os.environ.get("RAY_ADDRESS") or "127.0.0.1:8265").removeprefix("http://")
    cmd = find_torchspec(args.runner)
    if cmd is None:
        print("torchspec is not installed here", file=sys.stderr)
        return 2
    from ray.job_submission import JobSubmissionClient

    from torchspec.schedulers.ray.scheduler import RayScheduler

    work = Path(tempfile.mkdtemp(prefix="torchspec-bench-ray-"))
    # torchspec as installed (its bytecode compiled, as Ray's is), for both sides' processes
    env = {k: v for k, v in bench_env(work).items() if k not in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS")}
    client = JobSubmissionClient(f"http://{address}")
    sched = RayScheduler("bench", dashboard_address=address)
    (work / "baseline").mkdir()
    (work / "baseline" / "app.py").write_text(BASELINE)
    (work / "app.json").write_text(json.dumps({"name": "bench", "roles": [{
        "name": "r", "image": ".", "entrypoint": "true", "num_replicas": REPLICAS,
        "resource": {"cpu": 1, "gpu": 0, "memMB": 0}}]}))
    times: dict = {"torchspec": [], "ray": []}
    torchspec_round(cmd, env, work, sched, args.poll)  # untimed: upload torchspec, warm the cluster
    cluster = Actors(address)
    ray_round(address, env, work, client, cluster, args.poll)
    for _ in range(args.repeat):
        times["torchspec"].append(torchspec_round(cmd, env, work, sched, args.poll))
        times["ray"].append(ray_round(address, env, work, client, cluster, args.poll))
    misses = report(times, args.repeat)
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump({"times": times, "target_ratio": TARGET}, f, indent=1)
    return 1 if (args.fail_on_miss and misses) else 0


def report(times: dict, repeat: int) -> int:
    print(f"a {REPLICAS}-replica `true` app, median of {repeat} (torchspec / ray job submit, target <= {TARGET}x):")
    misses = 0
    rows = (("RUNNING", "RUNNING", "RUNNING (ray: entrypoint started)"),
            ("RUNNING", "REPLICAS", "RUNNING (ray: its 4 actors exist)"),
            ("SUCCEEDED", "SUCCEEDED", "SUCCEEDED"))
    for ours_phase, their_phase, label in rows:
        ours = median([t[ours_phase] for t in times["torchspec"]])
        theirs = median([t[their_phase] for t in times["ray"]])
        ratio = ours / theirs
        verdict = "PASS" if ratio <= TARGET else "MISS"
        misses += verdict == "MISS"
        print(f"  submit -> {label:35s} torchspec {fmt_s(ours)}  ray {fmt_s(theirs)}  {ratio:5.2f}x  {verdict}")
    return misses


if __name__ == "__main__":
    sys.exit(main())
