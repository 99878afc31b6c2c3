"""``submit --sweep`` through the real entry point on ``local``: one app per point, named for it, its params in its
provenance; ``list``/``cancel --sweep ID``; a bad sweep or a point that cannot run submits nothing."""

from __future__ import annotations

import json
import pathlib
import sys

import pytest

from test_lifecycle import Env

OK, SPEC_ERROR, USAGE = 0, 1, 2

SPEC = {"params": {"lr": {"type": "number", "default": 0.1}, "batch": {"type": "integer", "default": 8}},
        "name": "train", "roles": [{"name": "w", "image": "/tmp", "entrypoint": sys.executable,
                                    "args": ["-c", "import time; print('lr={{ lr }} batch={{ batch }}'); "
                                                   "time.sleep(600)"]}]}


@pytest.fixture
def env(tmp_path: pathlib.Path) -> Env:
    (tmp_path / "train.yaml").write_text(json.dumps(SPEC))
    return Env(tmp_path)


def listed(env: Env, *args: str) -> list:
    r = env.run("list", "-s", "local", "-o", "json", *args)
    assert r.returncode == OK, r.stderr
    return json.loads(r.stdout)


def test_a_sweep_submits_the_grid_and_is_one_thing_to_list_and_cancel(env: Env) -> None:
    r = env.run("submit", "-s", "local", "train.yaml", "--sweep", "lr=1e-4,3e-4", "--sweep", "batch=32,64")
    assert r.returncode == OK, r.stderr
    handles = r.stdout.split()
    names = [h.rsplit("/", 1)[1].rsplit("-", 1)[0] for h in handles]
    assert names == ["train-lr-1e-4-batch-32", "train-lr-1e-4-batch-64", "train-lr-3e-4-batch-32",
                     "train-lr-3e-4-batch-64"]
    sweep_id = r.stderr.split()[1].rstrip(":")
    assert r.stderr.startswith(f"sweep {sweep_id}: 4 apps")
    assert [a["app_handle"] for a in listed(env, "--sweep", sweep_id)] == handles
    described = env.run("describe", handles[1])
    assert "# params: batch=64, lr=1e-4" in described.stdout and "name: train-lr-1e-4-batch-64" in described.stdout
    other = env.run("submit", "-s", "local", "train.yaml").stdout.strip()  # not of the sweep: left alone
    r = env.run("cancel", "--sweep", sweep_id, "--yes")
    assert r.returncode == OK and r.stderr.splitlines() == [f"cancelled {h}" for h in handles]
    states = {a["app_handle"]: a["state"] for a in listed(env)}
    assert [states[h] for h in handles] == ["CANCELLED"] * 4 and states[other] != "CANCELLED"
    env.run("cancel", other)


@pytest.mark.parametrize("args, code, said", [
    (["--sweep", "lr="], USAGE, "needs one or more values"),
    (["--sweep", "lrr=1,2"], USAGE, "did you mean 'lr'?"),
    (["--sweep", "lr=1", "--sweep", "lr=2"], USAGE, "given twice"),
    (["--sweep", "lr=1,2", "-p", "lr=3"], USAGE, "given by -p and swept"),
    (["--sweep", "lr=1,2", "--wait"], USAGE, "a sweep submits several"),
    (["--sweep", "batch=1,2,x"], SPEC_ERROR, "'x' is not an integer"),  # the third point: none submitted
])
def test_a_bad_sweep_submits_nothing(env: Env, args: list, code: int, said: str) -> None:
    r = env.run("submit", "-s", "local", "train.yaml", *args)
    assert r.returncode == code and said in r.stderr, r.stderr
    assert r.stdout == "" and listed(env) == []


def test_status_and_wait_take_a_sweep(env: Env) -> None:
    (env.tmp / "ends.yaml").write_text(json.dumps({
        "params": {"code": {"type": "integer", "default": 0}}, "name": "ends",
        "roles": [{"name": "w", "image": "/tmp", "entrypoint": sys.executable,
                   "args": ["-c", "import sys, time; time.sleep(1); sys.exit({{ code }})"]}]}))
    r = env.run("submit", "-s", "local", "ends.yaml", "--sweep", "code=0,3")
    assert r.returncode == OK, r.stderr
    handles, sweep_id = r.stdout.split(), r.stderr.split()[1].rstrip(":")
    r = env.run("wait", "--sweep", sweep_id, "--timeout", "120")
    assert r.returncode == 4 and r.stdout.splitlines() == [f"{handles[0]} SUCCEEDED", f"{handles[1]} FAILED"]
    r = env.run("wait", *handles)
    assert r.returncode == 4 and r.stdout.splitlines() == [f"{handles[0]} SUCCEEDED", f"{handles[1]} FAILED"]
    r = env.run("status", "--sweep", sweep_id, "-o", "json")
    assert r.returncode == OK and [(a["app_handle"], a["state"]) for a in json.loads(r.stdout)] == [
        (handles[0], "SUCCEEDED"), (handles[1], "FAILED")]
    text = env.run("status", "--sweep", sweep_id).stdout
    assert text.count("app:") == 2 and all(h in text for h in handles)
    for args in (["status"], ["status", handles[0], "--sweep", sweep_id], ["wait"], ["wait", handles[0], "--sweep", "x"]):
        assert env.run(*args).returncode == USAGE
    r = env.run("wait", "--sweep", "sw-nothing")
    assert r.returncode == USAGE and "no apps of sweep sw-nothing on local" in r.stderr


def test_a_params_files_sweep_block_is_a_grid_too(env: Env) -> None:
    (env.tmp / "grid.yaml").write_text("batch: 16\nsweep:\n  lr: [1.0e-4, 3.0e-4]\n")
    r = env.run("submit", "-s", "local", "train.yaml", "--params-file", "grid.yaml", "--sweep", "batch=32,64")
    assert r.returncode == OK, r.stderr
    handles = r.stdout.split()
    names = [h.rsplit("/", 1)[1].rsplit("-", 1)[0] for h in handles]
    # --sweep's params first (varying slowest), then the file's; a swept param wins over the file's value
    assert names == ["train-batch-32-lr-0-0001", "train-batch-32-lr-0-0003", "train-batch-64-lr-0-0001",
                     "train-batch-64-lr-0-0003"]
    assert "# params: batch=64, lr=0.0003" in env.run("describe", handles[3]).stdout
    env.run("cancel", "--sweep", r.stderr.split()[1].rstrip(":"), "--yes")


@pytest.mark.parametrize("command", [["render"], ["dryrun", "-s", "local"]])
def test_one_point_of_a_params_files_sweep_is_chosen_with_p(env: Env, command: list) -> None:
    (env.tmp / "grid.yaml").write_text("sweep:\n  lr: [0.5, 0.25]\n")
    r = env.run(*command, "train.yaml", "--params-file", "grid.yaml")
    assert r.returncode == SPEC_ERROR, r.stderr
    assert "grid.yaml:1:1: error TS307 the params file sweeps 'lr'" in r.stderr and "-p lr=0.5" in r.stderr
    r = env.run(*command, "train.yaml", "--params-file", "grid.yaml", "-p", "lr=0.25")
    assert r.returncode == OK and "lr=0.25" in r.stdout, r.stderr


@pytest.mark.parametrize("block, said", [
    ("sweep: [1, 2]", "grid.yaml:1:8: error TS307 the params file's sweep must map params to lists of values"),
    ("sweep:\n  lr: 0.5", "grid.yaml:2:7: error TS307 sweep 'lr' must be a list of one or more values"),
    ("sweep:\n  lr: [0.5, 0.5]", "sweep 'lr' gives a value twice"),
    ("sweep:\n  lr: [0.5, {a: 1}]", "grid.yaml:2:13: error TS307 sweep 'lr': a value must be a string, number"),
    ("sweep:\n  lrr: [0.5]", "grid.yaml:2:3: error TS301 unknown param 'lrr' in the params file's sweep"),
    ("sweep:\n  batch: [1, x]", "grid.yaml:2:14: error TS303 param 'batch' swept by the params file"),
])
def test_a_bad_sweep_block_is_found_by_lint_at_its_place_and_submits_nothing(env: Env, block: str, said: str
                                                                            ) -> None:
    (env.tmp / "grid.yaml").write_text(block + "\n")
    for command in (["lint", "train.yaml"], ["submit", "-s", "local", "train.yaml"]):
        r = env.run(*command, "--params-file", "grid.yaml")
        assert r.returncode == SPEC_ERROR and said in r.stderr + r.stdout, (command, r.stdout, r.stderr)
    assert listed(env) == []
