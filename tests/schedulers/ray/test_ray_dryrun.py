"""The ray scheduler without a cluster: the request and the driver's plan, run options, placement checks,
status and log-line parsing.  No Ray needed (and none imported)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from torchspec import specs
from torchspec.errors import AppRefusedError
from torchspec.runner.options import RunOptionsError, resolve_run_options
from torchspec.schedulers.api import Stream
from torchspec.schedulers.ray.client import RayCluster
from torchspec.schedulers.ray.logs import LineFilter, replica_lines
from torchspec.schedulers.ray.options import ray_run_opts
from torchspec.schedulers.ray.placement import never_fits
from torchspec.schedulers.ray.scheduler import RayScheduler
from torchspec.schedulers.ray.states import ENV_PLAN, ENV_STOP_WAIT, STOP_WAIT_S, split_app_id, tag
from torchspec.schedulers.ray.status import describe_job
from torchspec.specs import AppState


def app(**resource: object) -> specs.AppDef:
    res = {"cpu": 2, "gpu": 1, "memMB": 512, **resource}
    return specs.AppDef("trainer", roles=[
        specs.Role(name="trainer", image="img", entrypoint="python", num_replicas=2,
                   args=["train.py", "--id", "${replica_id}", "--app", "${app_id}", "--host", "$${${rank0_env}}"],
                   env={"A": "${img_root}"}, resource=specs.Resource(**res)),  # type: ignore[arg-type]
        specs.Role(name="ps", image="img", entrypoint="ps.sh", resource=specs.Resource(cpu=1, gpu=0, memMB=0),
                   max_retries=2, retry_policy=specs.RetryPolicy.REPLICA),
    ])


def dryrun(the_app: specs.AppDef, **cfg: object):
    return RayScheduler("sess").submit_dryrun(the_app, {"dashboard_address": "10.0.0.1:8265", **cfg})


def test_one_placement_group_per_role_one_bundle_per_replica() -> None:
    request = dryrun(app(capabilities={"accel": 2, "note": "x"}), placement_strategy="spread").request
    plan = request.plan("trainer-abc123")
    trainer, ps = plan["roles"]
    assert trainer["strategy"] == "SPREAD"
    assert trainer["bundles"] == [{"CPU": 2, "GPU": 1, "memory": 512 * 2**20, "accel": 2}] * 2
    assert trainer["ignored"] == ["capability note='x'"]
    assert ps["bundles"] == [{"CPU": 1}] and (ps["retry_policy"], ps["max_retries"]) == ("REPLICA", 2)
    r1 = trainer["replicas"][1]
    assert r1["args"] == ["python", "train.py", "--id", "1", "--app", "trainer-abc123", "--host",
                          "${TORCHSPEC_RANK0_HOST}"]
    assert r1["env"]["A"] == "img" and r1["env"]["TORCHSPEC_APP_ID"] == "trainer-abc123"
    assert r1["env"]["TORCHSPEC_REPLICA_ID"] == "1" and r1["env"]["TORCHSPEC_NUM_REPLICAS"] == "2"


def test_the_entrypoint_is_the_process_ray_stops(tmp_path: Path) -> None:
    """Ray runs the entrypoint as ``sh -c`` in a session of its own and, on ``stop_job``, signals that process and
    the children it has at that moment: the driver must be that process, so a cancel landing before the shell
    forked cannot leave the driver running (a stand-in ``python`` reports its pid and parent)."""
    fake = tmp_path / "python"
    fake.write_text('#!/bin/sh\necho "$$ $PPID"\n')
    fake.chmod(0o755)
    entrypoint = dryrun(app()).request.submit_kwargs("trainer-abc123")["entrypoint"]
    shell = subprocess.Popen(entrypoint, shell=True, start_new_session=True, stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"})
    out, _ = shell.communicate(timeout=30)
    pid, parent = out.split()
    assert int(pid) == shell.pid and int(parent) == os.getpid()


def test_the_submission_carries_the_plan_the_spec_and_torchspec_itself() -> None:
    request = dryrun(app(), metadata={"team": "ml"}).request
    kwargs = request.submit_kwargs("trainer-abc123")
    assert kwargs["entrypoint"] == "exec python -u -m torchspec.schedulers.ray.driver"
    assert kwargs["submission_id"] == "trainer-abc123"
    plan = kwargs["runtime_env"]["env_vars"][ENV_PLAN]
    assert json.loads(plan) == request.plan("trainer-abc123")
    assert "$" not in plan  # Ray would expand ${TORCHSPEC_RANK0_HOST} in env_vars before the driver saw it
    assert kwargs["runtime_env"]["py_modules"][0].endswith("torchspec")
    assert kwargs["metadata"]["team"] == "ml" and kwargs["metadata"]["torchspec.app"] == "trainer"
    assert json.loads(kwargs["metadata"]["torchspec.spec"])["roles"][0]["name"] == "trainer"


def test_the_dry_run_is_readable_stable_data() -> None:
    text = str(dryrun(app()))
    assert text == str(dryrun(app()))
    data = yaml.safe_load(text)
    assert data["address"] == "http://10.0.0.1:8265"
    assert data["runtime_env"]["env_vars"][ENV_PLAN] == "<the plan below, as JSON>"
    replica = data["plan"]["roles"][0]["replicas"][0]
    assert replica["args"][5] == "${app_id}" and replica["bundle_index"] == 0
    assert replica["env"]["TORCHSPEC_RANK0_HOST"] == "<node address of trainer/0, set by the driver>"


def test_run_options_are_checked_with_did_you_mean(tmp_path, monkeypatch) -> None:
    with pytest.raises(RunOptionsError, match="did you mean 'placement_strategy'"):
        resolve_run_options("ray", ray_run_opts(), "placement_stratgy=PACK")
    with pytest.raises(AppRefusedError, match="did you mean 'SPREAD'"):
        dryrun(app(), placement_strategy="SPRAED")
    with pytest.raises(AppRefusedError, match="not the address of a Ray dashboard"):
        dryrun(app(), dashboard_address="ray://x:1")
    monkeypatch.setenv("RAY_ADDRESS", "http://head:8265")
    assert RayScheduler("s").submit_dryrun(app(), {}).request.address == "head:8265"
    env_file = tmp_path / "env.yaml"
    env_file.write_text("pip: [numpy]\nenv_vars: {X: '1'}\n")
    reqs = tmp_path / "requirements.txt"
    reqs.write_text("torch\n# comment\n")
    with pytest.raises(AppRefusedError) as e:
        dryrun(app(), runtime_env=str(env_file), requirements=str(reqs), working_dir=str(tmp_path / "nope"),
               metadata={"torchspec.app": "x"})
    assert "4 problems" not in str(e.value) and "3 problems" in str(e.value)
    request = dryrun(app(), runtime_env=str(env_file), working_dir=str(tmp_path)).request
    assert request.runtime_env["pip"] == ["numpy"] and request.runtime_env["working_dir"] == str(tmp_path)
    assert dryrun(app(), requirements=str(reqs)).request.runtime_env["pip"] == ["torch"]


def test_never_fits_names_the_role_and_the_resource() -> None:
    nodes = [{"CPU": 2, "memory": 2e9}, {"CPU": 2, "memory": 2e9}]

    def roles(cpu: float, n: int, strategy: str = "PACK", **more: float):
        return [{"role": "t", "strategy": strategy, "bundles": [{"CPU": cpu, **more}] * n}]

    assert never_fits(roles(1, 4), nodes, "here") is None
    assert never_fits(roles(64, 1), nodes, "here") == (
        "role 't' asks for 64 CPU per replica, but no node has more than 2 CPU (here)")
    assert "no node has any GPU" in never_fits(roles(1, 1, GPU=1), nodes, "here")
    assert "3 GiB memory" in never_fits(roles(1, 1, memory=3 * 2**30), nodes, "here")
    assert "STRICT_PACK" in never_fits(roles(1, 3, "STRICT_PACK"), nodes, "here")
    assert never_fits(roles(1, 2, "STRICT_PACK"), nodes, "here") is None
    assert "only 2 node(s)" in never_fits(roles(1, 3, "STRICT_SPREAD"), nodes, "here")
    assert "5 CPU in all" in never_fits(roles(1, 5), nodes, "here")


def test_app_ids_name_the_dashboard() -> None:
    assert split_app_id("127.0.0.1:8265-trainer-abc123") == ("127.0.0.1:8265", "trainer-abc123")
    assert split_app_id("ray-head.svc:8265-a-b") == ("ray-head.svc:8265", "a-b")
    assert split_app_id("trainer-abc123") is None


def test_log_lines_are_kept_per_replica_stream_and_time() -> None:
    t0 = "2026-01-01T00:00:00.000000Z"
    t1 = "2026-01-01T00:00:01.000000Z"
    log = ("(driver) noise\n"
           f"\x1b[36m(t/0 pid=1)\x1b[0m {tag('t/0', 'stdout', 'a [torchspec t/1 stdout ' + t0 + '] x', t0)}\n"
           f"(t/1 pid=2) {tag('t/1', 'stderr', 'b', t0)}\n(t/0 pid=1) {tag('t/0', 'stderr', 'c', t1)}\n")
    chunks = [log[:30], log[30:77], log[77:]]
    assert list(replica_lines(chunks, LineFilter("t/0"))) == [f"a [torchspec t/1 stdout {t0}] x\n", "c\n"]
    assert list(replica_lines(chunks, LineFilter("t/0", Stream.STDERR))) == ["c\n"]
    since = datetime(2026, 1, 1, 0, 0, 1, tzinfo=timezone.utc)
    assert list(replica_lines(chunks, LineFilter("t/0", since=since))) == ["c\n"]
    assert list(replica_lines(chunks, LineFilter("t/0", until=since))) == [f"a [torchspec t/1 stdout {t0}] x\n"]
    assert list(replica_lines(chunks, LineFilter("t/1"))) == ["b\n"]


def test_describe_maps_the_job_its_actors_and_the_summary() -> None:
    spec = json.dumps({"name": "a", "roles": [{"name": "t", "image": "i", "entrypoint": "e", "num_replicas": 2}]})
    summary = tag("driver", None, 'summary {"state":"FAILED","failed":"t/1","exit_code":3,'
                  '"replicas":{"t/0":{"exit_code":null,"restarts":0},"t/1":{"exit_code":3,"restarts":1}}}')
    job = SimpleNamespace(status="FAILED", metadata={"torchspec.app": "a", "torchspec.spec": spec},
                          message=f"Job entrypoint command failed with exit code 3, last available logs:\n{summary}",
                          submission_id="a-1", job_id="02000000", driver_exit_code=3)
    actors = [{"name": "t/0#0", "state": "DEAD", "node_id": "n1"}, {"name": "t/1#1", "state": "DEAD", "node_id": "n2"},
              {"name": "t/1#0", "state": "DEAD", "node_id": "n2"}]
    desc = describe_job("h:1-a-1", job, actors, {"n1": "10.0.0.1", "n2": "10.0.0.2"})
    assert (desc.state, desc.msg, desc.num_restarts) == (AppState.FAILED, "t/1 exited with code 3", 1)
    r0, r1 = desc.roles_statuses[0].replicas
    assert (r0.state, r0.exit_code, r0.hostname) == (AppState.CANCELLED, None, "10.0.0.1")
    assert (r1.state, r1.exit_code, r1.num_restarts) == (AppState.FAILED, 3, 1)
    waiting = describe_job("h:1-a-1", SimpleNamespace(**{**vars(job), "status": "RUNNING", "message": ""}), [], {})
    assert waiting.state == AppState.PENDING and "placement groups" in waiting.msg
    running = describe_job("h:1-a-1", SimpleNamespace(**{**vars(job), "status": "RUNNING"}),
                           [{"name": "t/0#0", "state": "ALIVE", "node_id": "n1"}], {})
    assert running.state == AppState.RUNNING
    assert [r.state for r in running.roles_statuses[0].replicas] == [AppState.RUNNING, AppState.PENDING]


def test_node_addresses_are_listed_again_only_for_a_node_not_seen_yet(monkeypatch) -> None:
    cluster = RayCluster("10.0.0.1:8265")
    calls = []

    def list_nodes(what: str, **kwargs: object) -> list:
        calls.append(what)
        return [SimpleNamespace(node_id="n1", node_ip="10.0.0.1", state="ALIVE", resources_total={"CPU": 2})]

    monkeypatch.setattr(cluster, "_state", list_nodes)
    assert cluster.node_ips(["n1", None, ""]) == {"n1": "10.0.0.1"} and calls == ["list_nodes"]
    assert cluster.node_ips(["n1"]) == {"n1": "10.0.0.1"} and cluster.node_ips([]) == {}
    assert calls == ["list_nodes"]  # describe of a running app: no third round trip
    assert cluster.node_ips(["n1", "n2"]) == {"n1": "10.0.0.1"} and calls == ["list_nodes"] * 2


def test_a_dry_run_needs_no_ray(tmp_path) -> None:
    script = ("import importlib.abc, sys\n"
              "class Block(importlib.abc.MetaPathFinder):\n"
              "    def find_spec(self, name, path=None, target=None):\n"
              "        if name.split('.')[0] == 'ray': raise ImportError('blocked')\n"
              "sys.meta_path.insert(0, Block())\n"
              "from torchspec import specs\n"
              "from torchspec.schedulers.ray import create_scheduler\n"
              "app = specs.AppDef('a', roles=[specs.Role(name='r', image='i', entrypoint='true',"
              " resource=specs.Resource(cpu=1, gpu=0, memMB=1))])\n"
              "print(create_scheduler('s').submit_dryrun(app, {}))\n"
              "assert not [m for m in sys.modules if m.split('.')[0] == 'ray']\n")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "placement_timeout" in r.stdout


def test_without_ray_a_command_that_needs_it_is_a_usage_error_naming_the_extra(tmp_path) -> None:
    """Exit 2, install the extra; not 6, which says a backend cannot be reached (none was asked)."""
    script = ("import importlib.abc, sys\n"
              "class Block(importlib.abc.MetaPathFinder):\n"
              "    def find_spec(self, name, path=None, target=None):\n"
              "        if name.split('.')[0] == 'ray': raise ImportError(f'No module named {name!r}', name=name)\n"
              "sys.meta_path.insert(0, Block())\n"
              "from torchspec.cli.main import main\n"
              "main(sys.argv[1:])\n")
    from torchspec.install import install_command

    for args in (["list", "-s", "ray"], ["status", "ray://s/127.0.0.1:8265-a-1"]):
        r = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, cwd=tmp_path,
                           env={**os.environ, "TORCHSPEC_HOME": str(tmp_path / "home")})
        assert r.returncode == 2, (args, r.stderr)
        assert "which is not installed" in r.stderr and f"hint: {install_command('ray')}" in r.stderr, r.stderr


def test_stopped_reads_cancelled_only_where_the_driver_confirmed_it() -> None:
    """Ray says STOPPED for any job it was asked to stop; the driver's own log says whether it stopped its
    replicas (its CANCELLED summary): a driver that crashed or was killed on the way reads FAILED."""
    from torchspec.schedulers.ray.states import SUMMARY
    from torchspec.schedulers.ray.status import stopped_state

    placed = tag("driver", None, "placed 1 placement group(s) in 0.1s\n")
    confirmed = placed + tag("driver", None, SUMMARY + json.dumps({"state": "CANCELLED", "failed": None}) + "\n")
    assert stopped_state(confirmed)[0] == AppState.CANCELLED
    assert stopped_state("")[0] == AppState.CANCELLED  # stopped before its driver said anything: nothing ran
    state, summary = stopped_state(placed + "Traceback (most recent call last):\nSystemError: ...\n")
    assert state == AppState.FAILED and "without confirming" in summary["driver_lost"]
    job = SimpleNamespace(status="STOPPED", message="Job was intentionally stopped.", metadata={},
                          submission_id="a-1", job_id="02000000", driver_exit_code=None)
    assert describe_job("h:1-a-1", job, [], {}, stopped_log=confirmed).state == AppState.CANCELLED
    lost = describe_job("h:1-a-1", job, [], {}, stopped_log=placed)
    assert lost.state == AppState.FAILED and "driver ended without confirming" in lost.msg


@pytest.mark.parametrize("code, name", [(-9, "SIGKILL"), (137, "SIGKILL"), (139, "SIGSEGV")])
def test_a_driver_killed_by_a_signal_is_named_so(code: int, name: str) -> None:
    job = SimpleNamespace(status="FAILED", message=f"Job entrypoint command failed with exit code {code}",
                          metadata={}, submission_id="a-1", job_id="02000000", driver_exit_code=code)
    desc = describe_job("h:1-a-1", job, [], {})
    assert desc.state == AppState.FAILED and f"the driver died, killed by {name}" in desc.msg, desc.msg


def test_the_job_gives_its_driver_time_to_stop_every_replica(tmp_path: Path) -> None:
    """Ray SIGKILLs a stopped driver 3 s after SIGTERM unless the job's env_vars say otherwise; under load the
    driver's stop path took longer, and the app read FAILED instead of CANCELLED.  A runtime_env's own value wins."""
    env = RayScheduler("s").submit_dryrun(app(), {}).request.submit_kwargs("x-1")["runtime_env"]["env_vars"]
    assert env[ENV_STOP_WAIT] == str(STOP_WAIT_S) and STOP_WAIT_S >= 10
    env_file = tmp_path / "env.yaml"
    env_file.write_text(f"env_vars: {{{ENV_STOP_WAIT}: '60'}}\n")
    request = dryrun(app(), runtime_env=str(env_file)).request
    assert request.runtime_env["env_vars"][ENV_STOP_WAIT] == "60"
