"""Secrets on the real Kubernetes cluster (``scripts/k8s-cluster``): a Secret created with the API is read by a replica
by reference (``secretKeyRef`` and a Secret volume), which prints its hash; torchspec never sees the value, and
nothing it prints or keeps holds it (the engine-wide grep, tests/secrets_support.py)."""

from __future__ import annotations

import pathlib

import pytest

from k8s_support import Cluster
from secrets_support import NAME, SOURCE, Cli, assert_not_in_files, new_marker, spec_text
from test_kubernetes_cluster import k8s_image  # noqa: F401 - the fixture: the busybox test image on the node

pytestmark = pytest.mark.k8s_cluster


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
