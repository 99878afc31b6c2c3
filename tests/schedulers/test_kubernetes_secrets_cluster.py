"""Secrets on the real Kubernetes cluster (``scripts/k8s-cluster``): a Secret created with the API is read by a replica
by reference (``secretKeyRef`` and a Secret volume), which prints its hash; torchspec never sees the value, and
nothing it prints or keeps holds it (the engine-wide grep, tests/secrets_support.py)."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

from k8s_support import Cluster
from secrets_support import NAME, SOURCE, Cli, assert_not_in_files, new_marker, spec_text

pytestmark = pytest.mark.k8s_cluster

#: the busybox test image as the lifecycle tests tag it for the node (tests/schedulers/test_kubernetes_cluster.py)
K8S_IMAGE = "torchspec-test/busybox:k8s"


@pytest.fixture(scope="module")
def k8s_image(k8s_cluster: Cluster, docker_client: Any, busybox_image: str) -> str:
    docker_client.images.get(busybox_image).tag(K8S_IMAGE)
    k8s_cluster.load(K8S_IMAGE)
    return K8S_IMAGE


def test_a_secret_made_with_the_api_reaches_the_replica_by_reference(
        k8s_cluster: Cluster, k8s_image: str, tmp_path: pathlib.Path) -> None:
    from kubernetes import client, config

    marker = new_marker()
    ns = k8s_cluster.new_namespace("sec")
    api = client.CoreV1Api(config.new_client_from_config(k8s_cluster.kubeconfig))
    api.create_namespaced_secret(ns, client.V1Secret(metadata=client.V1ObjectMeta(name=NAME),
                                                     string_data={"token": marker}))
    (tmp_path / "job.yaml").write_text(spec_text(k8s_image, mount="/etc/hf"))
    cli = Cli(tmp_path, marker, KUBECONFIG=k8s_cluster.kubeconfig)
    del cli.env[SOURCE]  # the cluster's Secret is the one place the value is: torchspec reads nothing
    handle = cli.lifecycle("kubernetes", "job.yaml", f"namespace={ns}", mount=True)
    assert handle.startswith("kubernetes://")
    assert assert_not_in_files(marker, cli.home, tmp_path / "job.yaml") >= 1
    # what torchspec created holds the reference, never the value (the kept spec, labels, annotations)
    created = k8s_cluster.kubectl("get", "jobs.batch,pods", "-n", ns, "-o", "yaml").stdout
    assert "secretKeyRef" in created and marker.split("$")[0] not in created
