"""Fixtures for tests that need a real Docker engine (see tests/docker_support.py).

``docker`` is imported only when one of these fixtures runs: most tests never
need an engine, and collecting them should not pay for the SDK.
"""

from __future__ import annotations

import uuid
from typing import Any, Iterator

import pytest

import docker_support

#: suite_plan: the suite's order (tests that need the real Kubernetes cluster last) and its time budget;
#: run_policy: under CI=true a skip is a failure, and the run ends with its counts per engine
pytest_plugins = ["run_policy", "suite_plan"]


@pytest.fixture(scope="session")
def docker_client() -> Iterator[Any]:
    """A client for the engine DOCKER_HOST names; skips without one (fails with TORCHSPEC_REQUIRE_DOCKER=1)."""
    client = docker_support.engine_or_skip()
    yield client
    client.close()


@pytest.fixture(scope="session")
def busybox_image(docker_client: Any) -> str:
    """The tag of the local busybox test image, built on first use (nothing is pulled)."""
    return docker_support.ensure_busybox_image(docker_client)


@pytest.fixture
def docker_session() -> str:
    """A scheduler session name unique to this test; with it, ``docker_cleanup`` removes only that session's apps."""
    return f"torchspec-test-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def docker_cleanup(docker_client: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    """The docker client; afterwards, labelled containers and networks the test created are removed.

    That is everything labelled that appeared during the test, which on an
    engine shared with another test run may include that run's apps; a test
    that also uses ``docker_session`` (and names its scheduler's session
    with it) only has that session's apps removed.
    """
    # looked up now, so that it is still there at teardown
    session = request.getfixturevalue("docker_session") if "docker_session" in request.fixturenames else None
    before = docker_support.labelled_ids(docker_client)
    yield docker_client
    docker_support.cleanup_apps(docker_client, before, session=session)


@pytest.fixture
def slurm_jobs() -> Iterator[list]:
    """A list a Slurm test appends its job ids to; they are cancelled (and waited for) afterwards.

    Skips without a cluster that answers (fails under TORCHSPEC_REQUIRE_SLURM=1).
    """
    import slurm_support

    slurm_support.cluster_or_skip()
    jobs: list = []
    yield jobs
    slurm_support.cancel_and_wait(jobs)


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[Any]:
    """A real two-node Ray cluster (tests/ray_support.py), started once per session and stopped at its end.

    Skips without ray installed (fails with TORCHSPEC_REQUIRE_RAY=1).
    """
    import ray_support

    cluster = ray_support.start_cluster()
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def k8s_cluster() -> Iterator[Any]:
    """The real Kubernetes cluster of ``scripts/k8s-cluster`` (tests/k8s_support.py), shared by the session.

    Skips without one that answers (fails with TORCHSPEC_REQUIRE_K8S=1); the
    namespaces tests made with ``new_namespace`` are deleted at the end.
    """
    import k8s_support

    yield from k8s_support.session_cluster()


#: The example plug-in's own tests (tests/plugins/torchspec-example/tests) need it installed with pip, which
#: tests/test_scaffold.py does in a virtual environment of its own, and runs them there.
collect_ignore = ["plugins"]
