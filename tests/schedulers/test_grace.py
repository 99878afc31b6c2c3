"""``grace_period``: one run option on every backend for a replica's time between SIGTERM and SIGKILL, as each
engine says it (dry runs: what each would send), the older names kept, and Slurm's refusal said in words."""

from __future__ import annotations

import json

import pytest

from torchspec import specs
from torchspec.errors import AppRefusedError
from torchspec.runner import get_runner
from torchspec.schedulers.grace import grace_period


def app(image: str = "ghcr.io/acme/train:1") -> specs.AppDef:
    return specs.AppDef("g", [specs.Role("r", image=image, entrypoint="true", num_replicas=1,
                                         resource=specs.Resource(cpu=1, gpu=0, memMB=64))])


def request(scheduler: str, image: str = "ghcr.io/acme/train:1", **cfg: object) -> object:
    with get_runner() as runner:
        return runner.dryrun(app(image), scheduler, cfg=runner.run_options(scheduler, dict(cfg))).request


def test_every_backend_takes_the_one_name() -> None:
    with get_runner() as runner:
        for scheduler in ("local", "docker", "kubernetes", "slurm", "ray"):
            assert "grace_period" in {name for name, _ in runner.scheduler_run_opts(scheduler)}, scheduler


def test_each_engine_gets_it_its_own_way(tmp_path) -> None:
    assert request("local", str(tmp_path), grace_period=45).kill_grace_s == 45
    assert request("local", str(tmp_path)).kill_grace_s == 5  # the default, as before
    assert request("local", str(tmp_path), kill_grace_s=7).kill_grace_s == 7  # the older name still works
    assert {c.stop_timeout for c in request("docker", grace_period=45).containers} == {45}
    pods = [o["spec"]["template"]["spec"] for o in request("kubernetes", grace_period=45).objects if o["kind"] == "Job"]
    assert [p["terminationGracePeriodSeconds"] for p in pods] == [45]
    pods = [o["spec"]["template"]["spec"] for o in request("kubernetes").objects if o["kind"] == "Job"]
    assert ["terminationGracePeriodSeconds" in p for p in pods] == [False]  # Kubernetes' own 30
    ray = request("ray", grace_period=45, dashboard_address="127.0.0.1:8265")
    assert ray.plan()["grace_period"] == 45
    assert ray.runtime_env["env_vars"]["RAY_JOB_STOP_WAIT_TIME_S"] == "75"  # Ray waits for the driver past it


def test_the_older_names_and_bad_values_are_refused_in_words() -> None:
    with pytest.raises(AppRefusedError, match="grace_period=45 and stop_timeout=3 disagree"):
        grace_period({"grace_period": 45, "stop_timeout": 3}, "stop_timeout", 10)
    assert grace_period({"grace_period": 45, "stop_timeout": 10}, "stop_timeout", 10) == 45  # 10: the default
    assert grace_period({"grace_period": 45, "stop_timeout": 45}, "stop_timeout", 10) == 45
    assert grace_period({}, "stop_timeout", 10) is None
    with pytest.raises(AppRefusedError, match="must be 0 or more seconds"):
        grace_period({"grace_period": -1})


def test_slurm_refuses_it_and_says_whose_it_is(tmp_path) -> None:
    with pytest.raises(AppRefusedError) as refused:
        request("slurm", str(tmp_path), grace_period=45)
    assert "GraceTime" in str(refused.value) and "signal=USR1@120" in str(refused.value.hint)
    assert json.dumps(str(request("slurm", str(tmp_path))))  # without it, as before
