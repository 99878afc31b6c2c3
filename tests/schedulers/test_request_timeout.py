"""Every command that asks an engine ends within the request timeout when the engine takes the request and never
answers (torchspec/schedulers/request_timeout.py).

Each backend is pointed at one :class:`~black_hole_support.BlackHole` (a loopback server that accepts and reads
for ever): ray by its dashboard address, docker by ``DOCKER_HOST=tcp://...``, kubernetes by a kubeconfig whose
server is ``https://127.0.0.1:PORT``, slurm by a copy of the test cluster's slurm.conf whose controller is the
hole (a hung slurmctld, as squeue meets it: no fake commands).  Every command (status, list, logs, cancel,
describe, wait, and ``list -c request_timeout=...``) runs as a real CLI process, all of one backend's at once (as
the CI's 50 concurrent ``status`` calls that found the bug), with a 2 s limit: each must exit 6 well before the
SDK's own limit (none for Ray's job client and Kubernetes' client, 60 s for Docker's, slurm's MessageTimeout of
10 s), naming the engine and its address and saying how to raise the limit, with no traceback.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest

from black_hole_support import BlackHole
from torchspec.errors import RequestTimeoutError, UnreachableError, UsageError
from torchspec.schedulers import request_timeout

LIMIT_S = 1
#: How long one command may take: the limit, a few requests' worth, on a loaded 2-CPU machine; far below
#: Docker's own 60 s, and Ray and Kubernetes would wait for ever.
BOUND_S = 15
COMMANDS = ("status {h}", "list -s {b}", "logs {h}", "cancel {h}", "describe {h}", "wait {h}")

#: Runs ``torchspec`` command lines one after the other in one Python (each as the executable would: main(),
#: its exit code, its stderr), timing each; the SDKs are imported first, and the first command is run once
#: untimed, so that a command's time is its own, not the first imports of torchspec's modules (in CI, on a busy
#: machine, the first command once took 17 s, where it takes 1 s alone).
DRIVER = """
import contextlib, importlib, io, json, os, sys, time
from torchspec.cli.main import main
todo = json.loads(sys.stdin.read())
for module in todo["preload"]:
    importlib.import_module(module)
for warm, (argv, env) in [(True, todo["commands"][0])] + [(False, c) for c in todo["commands"]]:
    os.environ.clear()
    os.environ.update(env)
    err = io.StringIO()
    began = time.monotonic()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            main(argv)
        except SystemExit as e:
            code = e.code
    if not warm:
        print(json.dumps([" ".join(argv), code, err.getvalue(), time.monotonic() - began]), flush=True)
"""


def run_all(commands: List[Tuple[str, Dict[str, str]]], preload: List[str]) -> List[Tuple[str, int, str, float]]:
    """Every ``torchspec`` command line, each with its environment: (line, exit code, stderr, seconds) each; a
    failed test naming those that did not end within BOUND_S each."""
    todo = json.dumps({"preload": preload, "commands": [(line.split(), env) for line, env in commands]})
    proc = subprocess.Popen([sys.executable, "-c", DRIVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(todo, timeout=60 + BOUND_S * len(commands))
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    results = [tuple(json.loads(line)) for line in out.splitlines()]
    hung = [line for line, _ in commands[len(results):]]
    assert not hung, f"no end within {BOUND_S}s each against an engine that never answers: {hung}\n{err[-2000:]}"
    return results  # type: ignore[return-value]


def check_all(backend: str, handle: str, env: Dict[str, str], engine: str, address: str,
              preload: List[str]) -> None:
    """Every command against the hole: exit 6 within BOUND_S, the engine and address named, the limit said."""
    env = {**env, request_timeout.ENV: str(LIMIT_S)}
    lines = [(c.format(h=handle, b=backend), env) for c in COMMANDS]
    # the run option wins over the environment: with 10 minutes there, -c's 2 s must still end it
    lines.append((f"list -s {backend} -c request_timeout={LIMIT_S}", {**env, request_timeout.ENV: "600"}))
    for line, code, err, took in run_all(lines, preload):
        assert code == 6, f"{line}: exit {code}, not 6:\n{err}"
        assert "Traceback" not in err, f"{line}:\n{err}"
        assert f"{engine} at " in err and address in err, f"{line}: the engine is not named:\n{err}"
        assert f"did not answer within {LIMIT_S}s" in err, f"{line}: not the request timeout's error:\n{err}"
        assert request_timeout.ENV in err, f"{line}: the hint does not say how to raise the limit:\n{err}"
        assert took < BOUND_S, f"{line}: took {took:.1f}s"


def clean_env(**extra: str) -> Dict[str, str]:
    """This environment without torchspec's scheduler parameters (a kubeconfig, an address), plus ``extra``."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("TORCHSPEC_") or k in ("TORCHSPEC_HOME",) or k.startswith("TORCHSPEC_REQUIRE_")}
    for name in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS", "DOCKER_HOST", "DOCKER_CONTEXT", "KUBECONFIG"):
        env.pop(name, None)
    env.update(extra)
    return env


def test_ray_dashboard_that_never_answers() -> None:
    from ray_support import ray_or_skip

    ray_or_skip()
    with BlackHole() as hole:
        check_all("ray", f"ray://torchspec/{hole.address}-hello-k3x9q2", clean_env(RAY_ADDRESS=hole.address),
                  "the Ray dashboard", f"http://{hole.address}", ["ray.job_submission", "ray.util.state"])
        assert hole.accepted


def test_docker_engine_that_never_answers() -> None:
    with BlackHole() as hole:
        check_all("docker", "docker://torchspec/hello-k3x9q2", clean_env(DOCKER_HOST=f"tcp://{hole.address}"),
                  "the Docker engine", f"tcp://{hole.address}", ["docker"])
        assert hole.accepted


def test_kubernetes_api_server_that_never_answers(tmp_path: Path) -> None:
    with BlackHole() as hole:
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(f"""apiVersion: v1
kind: Config
clusters:
- name: hole
  cluster: {{server: "https://{hole.address}", insecure-skip-tls-verify: true}}
contexts:
- name: hole
  context: {{cluster: hole, user: someone, namespace: default}}
current-context: hole
users:
- name: someone
  user: {{token: not-a-secret}}
""")
        check_all("kubernetes", "kubernetes://torchspec/default:hello-k3x9q2", clean_env(KUBECONFIG=str(kubeconfig)),
                  "the Kubernetes API server", f"https://{hole.address}", ["kubernetes.client", "kubernetes.config"])
        assert hole.accepted


def test_slurm_controller_that_never_answers(tmp_path: Path) -> None:
    from slurm_support import cluster_or_skip

    cluster_or_skip()  # its slurm.conf and munge socket: the client commands sign what they send
    conf = Path(os.environ.get("SLURM_CONF") or "/etc/slurm/slurm.conf").read_text()
    with BlackHole() as hole:
        hung = re.sub(r"(?mi)^(SlurmctldHost|ControlMachine)=.*$", "SlurmctldHost=torchspec-hole(127.0.0.1)", conf)
        hung = re.sub(r"(?mi)^SlurmctldPort=.*$", "", hung) + f"\nSlurmctldPort={hole.port}\n"
        (tmp_path / "slurm.conf").write_text(hung)
        check_all("slurm", "slurm://torchspec/4242", clean_env(SLURM_CONF=str(tmp_path / "slurm.conf")),
                  "the Slurm controller", f"(127.0.0.1):{hole.port}", [])
        assert hole.accepted


# -- the setting itself ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("given, expected", [(None, 30.0), ("", 30.0), ("2", 2.0), ("0.5", 0.5), (45, 45.0)])
def test_seconds_reads_the_setting(given: object, expected: float) -> None:
    assert request_timeout.seconds(given) == expected


@pytest.mark.parametrize("given", ["ten", "0", "-3", "nan", "inf"])
def test_seconds_refuses_what_is_no_limit(given: str) -> None:
    with pytest.raises(UsageError, match=rf"\$TORCHSPEC_REQUEST_TIMEOUT={given!r} is not a number of seconds"):
        request_timeout.seconds(given)


def test_a_bad_setting_is_a_usage_error_naming_the_variable() -> None:
    env = clean_env(**{request_timeout.ENV: "soon"})
    result = subprocess.run([sys.executable, "-m", "torchspec", "status", "ray://torchspec/127.0.0.1:1-x"],
                            env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    assert "TORCHSPEC_REQUEST_TIMEOUT='soon' is not a number of seconds" in result.stderr


def test_the_error_is_an_outage_that_wait_rides_out() -> None:
    error = request_timeout.timed_out("the Docker engine", "tcp://127.0.0.1:9", 2, "list", "`docker info`")
    assert isinstance(error, RequestTimeoutError) and isinstance(error, UnreachableError)
    assert (error.engine, error.address, error.seconds) == ("the Docker engine", "tcp://127.0.0.1:9", 2)
    assert error.message == "the Docker engine at tcp://127.0.0.1:9 did not answer within 2s (list)"


def test_is_timeout_follows_what_an_sdk_wraps() -> None:
    def raised_from(inner: BaseException) -> Optional[BaseException]:
        try:
            try:
                raise inner
            except BaseException:
                raise RuntimeError("the SDK's own words")
        except RuntimeError as outer:
            return outer

    class Retried(Exception):  # urllib3's MaxRetryError keeps the last error as .reason
        def __init__(self, reason: BaseException) -> None:
            super().__init__("max retries")
            self.reason = reason

    assert request_timeout.is_timeout(TimeoutError())
    assert request_timeout.is_timeout(raised_from(TimeoutError("read timed out")))  # type: ignore[arg-type]
    assert request_timeout.is_timeout(Retried(TimeoutError()))
    assert not request_timeout.is_timeout(raised_from(ConnectionRefusedError()))  # type: ignore[arg-type]
    assert not request_timeout.is_timeout(Retried(ConnectionResetError()))


def test_is_timeout_knows_urllib3s_refusal_from_its_timeouts() -> None:
    from urllib3 import exceptions  # the docker and kubernetes SDKs' (torchspec's own dependencies)
    refused = exceptions.NewConnectionError(None, "Failed to establish a new connection: [Errno 111] refused")
    assert isinstance(refused, exceptions.TimeoutError)  # as urllib3 writes it, for old callers
    assert not request_timeout.is_timeout(exceptions.MaxRetryError(None, "/", refused))
    read = exceptions.ReadTimeoutError(None, "/", "Read timed out. (read timeout=1)")
    assert request_timeout.is_timeout(exceptions.MaxRetryError(None, "/", read))
