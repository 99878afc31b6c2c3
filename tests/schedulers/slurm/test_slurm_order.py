"""The slurm scheduler and roles that find each other or wait for each other: every replica's
``TORCHSPEC_HOSTS_<ROLE>`` (computed by the batch script once Slurm has allocated the nodes; the bash tried here),
and ``depends_on``: the batch script starts a role that waits once the roles it names are finished or ready (its
text; run by bash with srun stood in for; on the real cluster in test_slurm_cluster.py)."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from typing import List, Tuple

import pytest

from torchspec import specs
from torchspec.errors import AppRefusedError
from torchspec.schedulers.api import Capability
from torchspec.schedulers.slurm.scheduler import SlurmScheduler
from torchspec.schedulers.slurm.options import slurm_run_opts
from torchspec.schedulers.slurm.query import JobView, replica_state
from torchspec.schedulers.slurm.translate import _FUNCTIONS, app_to_request


@pytest.fixture
def img(tmp_path) -> str:
    folder = tmp_path / "img"
    folder.mkdir()
    (folder / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (folder / "run.sh").chmod(0o755)
    return str(folder)


def role(img: str, name: str, n: int = 1, *deps: specs.RoleDependency) -> specs.Role:
    return specs.Role(name=name, image=img, entrypoint="run.sh", args=["${hosts_env:parameter-server}"],
                      num_replicas=n, resource=specs.Resource(cpu=1, gpu=0, memMB=64), depends_on=list(deps))


def script(app: specs.AppDef, **cfg: object) -> str:
    return str(app_to_request(app, slurm_run_opts().resolve(cfg), "/work"))  # type: ignore[arg-type]


def test_every_replica_gets_every_roles_hosts_once_the_job_runs(img) -> None:
    app = specs.AppDef("tpr", [role(img, "trainer", 2), role(img, "parameter-server", 3)])
    text = script(app)
    assert 'readonly TS_HOSTS_0="$(hosts_of 2 "${TS_NODES_0[@]}")"' in text  # one per replica, on its node
    assert 'readonly TS_HOSTS_1="$(hosts_of 3 "${TS_NODES_1[@]}")"' in text
    assert text.count('        TORCHSPEC_HOSTS_TRAINER="$TS_HOSTS_0" \\\n') == 5  # in all 5 replicas' env
    assert text.count('        TORCHSPEC_HOSTS_PARAMETER_SERVER="$TS_HOSTS_1" \\\n') == 5
    assert f"{img}/run.sh TORCHSPEC_HOSTS_PARAMETER_SERVER" in text  # the macro names the variable
    packed = script(app, one_node_per_replica=False)  # replicas share the component's nodes: all of them
    assert 'readonly TS_HOSTS_1="$(hosts_of 0 "${TS_NODES_1[@]}")"' in packed


@pytest.mark.parametrize(("n", "nodes", "hosts"), [("2", ["a", "b", "c"], "host-a,host-b"),
                                                   ("0", ["a", "b", "c"], "host-a,host-b,host-c"),
                                                   ("1", ["a"], "host-a")])
def test_hosts_of_names_the_first_nodes_hosts(n: str, nodes: list, hosts: str) -> None:
    functions = re.search(r"(?ms)^node_host\(\).*?^}\n.*?^hosts_of\(\).*?^}$", _FUNCTIONS)
    assert functions
    stub = 'scontrol() { echo "NodeName=$3 NodeHostName=host-$3 State=IDLE"; }\n'  # what `scontrol show node N -o` says
    done = subprocess.run(["bash", "-c", stub + functions.group(0) + '\nhosts_of "$@"', "bash", n, *nodes],
                          capture_output=True, text=True, timeout=10)
    assert done.stdout == hosts + "\n", done.stderr


def test_a_waiting_role_is_started_by_the_script_after_the_roles_it_names(img) -> None:
    app = specs.AppDef("ordered", [role(img, "download"),
                                   role(img, "trainer", 2, specs.RoleDependency("download")),
                                   role(img, "eval", 1, specs.RoleDependency("trainer", "ready"))])
    sched = SlurmScheduler("test")
    assert sched.supports(Capability.ROLE_ORDER)
    text = str(sched.submit_dryrun(app, {}).request)
    head, loop = text.split("\nTS_RC=0\nwhile ")
    assert "run_replica download 0" in head and "run_replica trainer" not in head  # download at once, no other
    assert "TS_WAITING_1=1  # role trainer waits for download to be finished" in head
    assert "TS_WAITING_2=1  # role eval waits for trainer to be ready" in head
    assert "    if ((TS_WAITING_1)) && role_is download 1 finished; then" in loop
    assert "    if ((TS_WAITING_2)) && role_is trainer 2 ready; then" in loop
    assert loop.index("role_is download") < loop.index("run_replica trainer 0") < loop.index("role_is trainer")
    assert "torchspec: role eval never started (it waits for trainer to be ready)" in loop
    assert "wait -n" not in text  # a replica that ended before the loop would be lost to it: reap collects them
    plain = str(sched.submit_dryrun(specs.AppDef("plain", [role(img, "a"), role(img, "b")]), {}).request)
    assert "wait -n" in plain and "role_is " not in plain  # an app without depends_on: the script as before


def test_depends_on_a_role_the_app_lacks_is_refused_by_the_scheduler_too(img) -> None:
    app = specs.AppDef("ordered", [role(img, "trainer", 1, specs.RoleDependency("downlaod"))])
    with pytest.raises(AppRefusedError, match="'downlaod', which is no other role"):
        SlurmScheduler("test").submit_dryrun(app, {})


# ----------------------------------------------------------------------------
# The script's ordered start, run by bash with srun and scontrol stood in for (the real cluster: below)
# ----------------------------------------------------------------------------

#: srun: drop its options, start the step's command in --chdir; scontrol: four nodes, each host named for itself
FAKE_SRUN = """#!/bin/bash
while [[ $1 == --* ]]; do
    case $1 in --chdir=*) cd "${1#--chdir=}" || exit 1 ;; esac
    shift
done
exec "$@"
"""
FAKE_SCONTROL = """#!/bin/bash
case "$1 $2" in
    "show hostnames") printf 'node%s\n' 1 2 3 4 ;;
    "show node") echo "NodeName=$3 NodeHostName=$3" ;;
esac
"""
#: each replica: "start ROLE/K <time>", then for download: sleep, write the data file, exit CODE; trainer: fail
#: (9) without the data file; any other: sleep, "end ROLE/K <time>", exit CODE
STEP = r"""#!/bin/bash
role=$TORCHSPEC_ROLE_NAME k=$TORCHSPEC_REPLICA_ID
echo "start $role/$k $(date +%s.%N)" >>"$EVENTS"
if [[ $role == trainer && ! -e $DATA ]]; then echo "trainer/$k found no data" >>"$EVENTS"; exit 9; fi
sleep "$1"
[[ $role != download ]] || echo data >"$DATA"
echo "end $role/$k $(date +%s.%N)" >>"$EVENTS"
exit "$2"
"""


def run_script(tmp_path, app: specs.AppDef) -> Tuple[subprocess.CompletedProcess, List[Tuple[str, str, float]]]:
    """Run the app's batch script as Slurm would, on one stood-in node; its exit and each (event, replica, time)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("srun", FAKE_SRUN), ("scontrol", FAKE_SCONTROL)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    text = str(SlurmScheduler("test").submit_dryrun(app, {"log_dir": str(tmp_path / "logs")}).request)
    (tmp_path / "job.sbatch").write_text(text)
    events = tmp_path / "events"
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "SLURM_JOB_ID": "77",
           "SLURM_JOB_NODELIST": "node1", "EVENTS": str(events), "DATA": str(tmp_path / "data")}
    # as Slurm does when the batch script ends, the replicas still running are then stopped (their group killed);
    # the script's output goes to a file, which they do not hold open past that
    with open(tmp_path / "batch.log", "w+") as out:
        script = subprocess.Popen(["bash", str(tmp_path / "job.sbatch")], stdout=out, stderr=out, env=env,
                                  start_new_session=True)
        try:
            code = script.wait(timeout=60)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(script.pid, signal.SIGKILL)
        out.seek(0)
        done = subprocess.CompletedProcess(script.args, code, "", out.read())
    lines = [line.split() for line in events.read_text().splitlines()] if events.exists() else []
    return done, [(line[0], line[1], float(line[2]) if len(line) > 2 else 0.0) for line in lines]


def step_role(tmp_path, name: str, n: int = 1, sleep: float = 0, code: int = 0,
              *deps: specs.RoleDependency) -> specs.Role:
    img = tmp_path / "img"
    img.mkdir(exist_ok=True)
    (img / "step.sh").write_text(STEP)
    (img / "step.sh").chmod(0o755)
    return specs.Role(name=name, image=str(img), entrypoint="step.sh", args=[str(sleep), str(code)],
                      num_replicas=n, resource=specs.Resource(cpu=1, gpu=0, memMB=64), depends_on=list(deps))


def test_script_starts_a_role_once_the_one_it_waits_for_finished(tmp_path) -> None:
    app = specs.AppDef("ordered", [step_role(tmp_path, "download", 1, 1.5),
                                   step_role(tmp_path, "trainer", 2, 0, 0, specs.RoleDependency("download"))])
    done, events = run_script(tmp_path, app)
    assert done.returncode == 0, (done.stderr, events)
    end = next(t for e, r, t in events if (e, r) == ("end", "download/0"))
    starts = sorted(t for e, r, t in events if e == "start" and r.startswith("trainer/"))
    assert len(starts) == 2 and starts[0] >= end, events
    assert "torchspec: role trainer starts now (download is finished)" in done.stderr
    assert not list((tmp_path / "logs" / "77").glob("*/*/waiting"))  # nothing left that says it still waits


def test_script_starts_a_role_once_the_one_it_waits_for_is_ready_while_it_runs(tmp_path) -> None:
    app = specs.AppDef("ordered", [step_role(tmp_path, "ps", 2, 3),
                                   step_role(tmp_path, "worker", 1, 0, 0, specs.RoleDependency("ps", "ready"))])
    done, events = run_script(tmp_path, app)
    assert done.returncode == 0, (done.stderr, events)
    ps_starts = [t for e, r, t in events if e == "start" and r.startswith("ps/")]
    ps_end = min(t for e, r, t in events if e == "end" and r.startswith("ps/"))
    worker = next(t for e, r, t in events if (e, r) == ("start", "worker/0"))
    assert max(ps_starts) <= worker < ps_end, events  # after every ps replica started, before they ended


def test_script_never_starts_a_role_whose_dependency_failed_and_fails_with_its_code(tmp_path) -> None:
    app = specs.AppDef("ordered", [step_role(tmp_path, "download", 1, 0, 3),
                                   step_role(tmp_path, "other", 1, 30),
                                   step_role(tmp_path, "trainer", 1, 0, 0, specs.RoleDependency("download"))])
    start = time.monotonic()
    done, events = run_script(tmp_path, app)
    assert done.returncode == 3, (done.stderr, events)
    assert time.monotonic() - start < 20  # the failure ended the job; it did not wait for "other"'s 30 s
    assert not [r for e, r, _ in events if r.startswith("trainer/")], events
    assert "torchspec: role trainer never started (it waits for download to be finished)" in done.stderr
    assert (tmp_path / "logs" / "77" / "trainer" / "0" / "waiting").read_text() == \
        "waits for download to be finished\n"  # what status shows for the replica


def test_a_waiting_replica_is_pending_while_the_job_runs_and_unknown_once_it_ended() -> None:
    running, failed = (JobView(job_id="1", offset=0, state=name, reason="", exit_code="0:0", restarts=0,
                               comment="", nodes="n") for name in ("RUNNING", "FAILED"))
    assert replica_state(running, None, waiting=True) == specs.AppState.PENDING
    assert replica_state(failed, None, waiting=True) == specs.AppState.UNKNOWN
    assert replica_state(running, None) == specs.AppState.RUNNING
    assert replica_state(running, 0, waiting=True) == specs.AppState.SUCCEEDED  # an exit code decides
