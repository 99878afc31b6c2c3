"""What the Kubernetes tests need from a real cluster: one that answers, or a clear skip.

The real cluster is the control plane and kubelet that ``scripts/k8s-cluster
up`` builds from Kubernetes' own Go modules and starts on 127.0.0.1.
``scripts/test`` starts it and exports ``TORCHSPEC_K8S_KUBECONFIG`` (its
admin kubeconfig) and ``TORCHSPEC_K8S_DIR``; with ``TORCHSPEC_REQUIRE_K8S=1``
(always in CI) a missing cluster fails the tests instead of skipping them.
The API stand-in in tests/kube is a different thing: it never needs this.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from typing import Iterator, List, Optional

import skips

KUBECONFIG_ENV = "TORCHSPEC_K8S_KUBECONFIG"
DIR_ENV = "TORCHSPEC_K8S_DIR"
ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "k8s-cluster"
HOW = "start one with `eval \"$(scripts/k8s-cluster up)\"` (as root), or run `bash scripts/test`"
#: Set by scripts/test when it starts the cluster in the background: the file its exit code is written to.
UP_RC_ENV = "TORCHSPEC_K8S_UP_RC"
UP_LOG_ENV = "TORCHSPEC_K8S_UP_LOG"
#: How long a test waits for that start: a cold one builds the binaries (~25 min on 2 cores, longer while
#: the other tests take the CPU first).
UP_WAIT_S = float(os.environ.get("TORCHSPEC_K8S_UP_WAIT", "3600"))


def default_dir() -> str:
    return os.environ.get(DIR_ENV) or os.path.join(os.environ.get("TMPDIR", "/tmp"), "torchspec-k8s")


def kubeconfig_path() -> str:
    """The real cluster's admin kubeconfig: ``$TORCHSPEC_K8S_KUBECONFIG``, else the script's default folder's."""
    return os.environ.get(KUBECONFIG_ENV) or os.path.join(default_dir(), "admin.kubeconfig")


def kubectl_path(cluster_dir: str) -> str:
    """The cluster's own kubectl (built with it, same version), else the one on PATH."""
    own = os.path.join(cluster_dir, "bin", "kubectl")
    return own if os.path.exists(own) else (shutil.which("kubectl") or own)


def cluster_problem(kubeconfig: str, cluster_dir: str) -> str:
    """Why no usable cluster answers; "" when its API server is ready and a node is Ready."""
    if not os.path.exists(kubeconfig):
        return f"no kubeconfig at {kubeconfig}"
    kubectl = kubectl_path(cluster_dir)
    if not os.path.exists(kubectl):
        return "no kubectl (scripts/k8s-cluster builds one into DIR/bin)"
    try:
        done = subprocess.run([kubectl, "--kubeconfig", kubeconfig, "get", "nodes", "--no-headers"],
                              capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        return "the cluster's API server did not answer within 20 s"
    if done.returncode != 0:
        return f"the cluster does not answer: {done.stderr.strip()[-300:]}"
    if " Ready" not in done.stdout:
        return f"the cluster has no Ready node: {done.stdout.strip()!r}"
    return ""


@dataclass
class Cluster:
    """A real cluster: its kubeconfig, its folder, and what a test does to it through ``scripts/k8s-cluster``."""

    kubeconfig: str
    dir: str
    namespaces: List[str] = field(default_factory=list)

    def kubectl(self, *args: str, check: bool = True, timeout: float = 60,
                input: Optional[str] = None) -> "subprocess.CompletedProcess[str]":
        done = subprocess.run([kubectl_path(self.dir), "--kubeconfig", self.kubeconfig, *args], capture_output=True,
                              text=True,
                              timeout=timeout, input=input)
        if check and done.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {done.stderr}")
        return done

    def script(self, *args: str, timeout: float = 300) -> "subprocess.CompletedProcess[str]":
        done = subprocess.run(["bash", str(SCRIPT), *args, self.dir], capture_output=True, text=True,
                              timeout=timeout)
        if done.returncode != 0:
            raise AssertionError(f"scripts/k8s-cluster {' '.join(args)} failed: {done.stderr[-2000:]}")
        return done

    def load(self, image: str) -> None:
        """Put an image of the local Docker engine on the node, as ``kind load docker-image`` does."""
        self.script("load", image)

    def new_namespace(self, prefix: str = "t") -> str:
        """A fresh namespace for one test, deleted when the session's cluster fixture ends."""
        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        self.kubectl("create", "namespace", name)
        self.namespaces.append(name)
        return name

    def cleanup(self) -> None:
        for name in self.namespaces:
            self.kubectl("delete", "namespace", name, "--wait=false", "--ignore-not-found", check=False)
        self.namespaces.clear()


def background_start_problem(rc_file: str, log_file: str, wait_s: float = UP_WAIT_S) -> str:
    """Wait for scripts/test's background ``up`` to end; why it failed, or "" once it succeeded.

    The tests that need the cluster are ordered last (tests/conftest.py), so
    by then the build has usually ended; the first of them waits for the rest.
    """
    deadline = time.monotonic() + wait_s
    while not os.path.exists(rc_file):
        if time.monotonic() > deadline:
            return f"scripts/k8s-cluster up, started in the background, had not ended after {wait_s:.0f} s (log: {log_file})"
        time.sleep(2)
    rc = pathlib.Path(rc_file).read_text().strip()
    if rc == "0":
        return ""
    try:
        tail = pathlib.Path(log_file).read_text(errors="replace")[-1500:]
    except OSError:
        tail = "(no log)"
    return f"scripts/k8s-cluster up, started in the background, exited {rc}; the end of {log_file}:\n{tail}"


def cluster_or_skip() -> Cluster:
    """The real cluster; skips the test (fails it under TORCHSPEC_REQUIRE_K8S=1) when none answers."""
    kubeconfig = kubeconfig_path()
    cluster_dir = os.environ.get(DIR_ENV) or os.path.dirname(kubeconfig)
    problem = ""
    if os.environ.get(UP_RC_ENV):
        problem = background_start_problem(os.environ[UP_RC_ENV], os.environ.get(UP_LOG_ENV, "(unknown)"))
    problem = problem or cluster_problem(kubeconfig, cluster_dir)
    if problem:
        skips.skip_or_fail("K8S", f"no real Kubernetes cluster: {problem}; {HOW}")
    return Cluster(kubeconfig=kubeconfig, dir=cluster_dir)


def session_cluster() -> Iterator[Cluster]:
    cluster = cluster_or_skip()
    yield cluster
    cluster.cleanup()
