"""TSM's builders (``torchspec.tsm.api``): chained calls, per-scheduler resources, ElasticRole's torchrun."""

from __future__ import annotations

import pytest

import torchspec.tsm as tsm
from torchspec.specs import NULL_RESOURCE, Resource, RetryPolicy

SMALL = Resource(cpu=1, gpu=0, memMB=64)
BIG = Resource(cpu=8, gpu=1, memMB=4096)


def test_a_role_is_built_by_chained_calls() -> None:
    container = tsm.Container(image="img").require(SMALL).ports(tcp_store=8080, tensorboard=8081)
    role = tsm.Role(name="trainer").runs("train.py", "--arg", "foo", ENV_VAR="FOOBAR").on(container).replicas(4)
    spec = role.to_spec("local")
    assert (spec.name, spec.image, spec.entrypoint, spec.args, spec.env, spec.num_replicas) == (
        "trainer", "img", "train.py", ["--arg", "foo"], {"ENV_VAR": "FOOBAR"}, 4)
    assert spec.resource == SMALL and spec.port_map == {"tcp_store": 8080, "tensorboard": 8081}
    assert tsm.Role(name="ps").run("ps.py").entrypoint == "ps.py"  # TSM's own example spells it run


def test_a_resource_bound_to_one_scheduler_applies_there_only() -> None:
    container = tsm.Container(image="img").require(SMALL).require(BIG, "kubernetes")
    role = tsm.Role(name="t").runs("t.py").on(container)
    assert role.to_spec("kubernetes").resource == BIG
    assert role.to_spec("slurm").resource == SMALL
    assert tsm.Container(image="img").resource_for("local") == NULL_RESOURCE
    assert tsm.Container(image="img").require(BIG, "ray").resource_for("local") == NULL_RESOURCE


def test_an_application_of_roles_is_an_appdef_per_scheduler() -> None:
    app = tsm.Application(name="job").of(tsm.Role(name="a").runs("a"), tsm.Role(name="b").runs("b").replicas(2))
    appdef = app.to_appdef("local")
    assert appdef.name == "job" and [r.name for r in appdef.roles] == ["a", "b"]
    assert appdef.roles[1].num_replicas == 2 and not app.is_attached


def test_retry_policy() -> None:
    role = tsm.Role(name="t").runs("t").with_retry_policy(RetryPolicy.REPLICA, max_retries=3)
    spec = role.to_spec("local")
    assert (spec.retry_policy, spec.max_retries) == (RetryPolicy.REPLICA, 3)


def test_an_elastic_role_runs_torchrun_meeting_at_the_first_replica() -> None:
    role = tsm.ElasticRole("trainer", nproc_per_node=8, nnodes="2:4", max_restarts=3).runs(
        "my_train_script.py", "--script_arg", "foo bar").on(tsm.Container(image="img")).replicas(2)
    spec = role.to_spec("slurm")
    assert spec.entrypoint == "bash" and spec.args[0] == "-c"
    assert spec.args[1] == ("torchrun --rdzv_backend c10d --rdzv_endpoint $${${rank0_env}}:29500 --rdzv_id"
                            " '${app_id}' --nnodes 2:4 --nproc_per_node 8 --max_restarts 3 my_train_script.py"
                            " --script_arg 'foo bar'")
    assert spec.min_replicas == 2 and spec.num_replicas == 2 and spec.port_map == {"c10d": 29500}


def test_an_elastic_role_takes_tsm_spellings_and_its_own_rendezvous() -> None:
    role = tsm.ElasticRole("t", nprocs_per_node=2, rdzv_backend="etcd", rdzv_endpoint="etcd:2379",
                           standalone=False, redirects=True).runs("t.py").replicas(3)
    command = role.to_spec("local").args[1]
    assert "--nproc_per_node 2" in command and "--nnodes 3" in command  # nnodes: the replicas
    assert "--rdzv_backend etcd --rdzv_endpoint etcd:2379" in command
    assert "--redirects" in command and "standalone" not in command
    single = tsm.ElasticRole("t", nproc_per_node=2, nnodes=1).runs("t.py").to_spec("local").args[1]
    assert "--rdzv_endpoint localhost:0" in single


def test_run_config() -> None:
    cfg = tsm.RunConfig()
    cfg.set("log_dir", "/tmp/logs")
    assert cfg.get("log_dir") == "/tmp/logs" and cfg.get("nothing") is None
    assert repr(cfg) == "{'log_dir': '/tmp/logs'}"


def test_the_exceptions_say_what_is_wrong() -> None:
    mismatch = tsm.SessionMismatchException("local://other/app-1", "mine")
    assert str(mismatch) == "App handle: local://other/app-1 is not a handle in the current session: mine"
    attached = tsm.AppNotReRunnableException(tsm.Application(name="job", is_attached=True))
    assert "job" in str(attached) and "attached" in str(attached)


def test_only_the_standalone_session_backend_exists() -> None:
    with pytest.raises(ValueError, match="Unsupported session backend: server"):
        tsm.session(name="s", backend="server")
