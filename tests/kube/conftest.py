"""Fixtures for Kubernetes tests: a fake API server per test and real clients loaded from its kubeconfig."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from apiserver import FakeApiServer


@pytest.fixture
def apiserver() -> Iterator[FakeApiServer]:
    """A running server with only the ``default`` namespace; stopped (streams ended) after the test."""
    with FakeApiServer() as server:
        yield server


@pytest.fixture
def kubeconfig(apiserver: FakeApiServer, tmp_path: Path) -> str:
    return apiserver.write_kubeconfig(tmp_path / "kubeconfig")


@pytest.fixture
def api_client(kubeconfig: str) -> Iterator["kubernetes.client.ApiClient"]:  # noqa: F821 - imported lazily
    """The real client, configured only by the kubeconfig file, as the scheduler will be."""
    import kubernetes
    client = kubernetes.config.new_client_from_config(config_file=kubeconfig)
    yield client
    client.close()
