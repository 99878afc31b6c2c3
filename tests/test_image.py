"""The container image (the Dockerfile at the repository's root): built from the run's wheel on the test engine,
it lints a mounted folder as a user other than root, with the exit codes the command line has.

No registry is reachable from CI, so the build's ``BASE`` is a stand-in for python:3.11-slim made here
(tests/python_image.py: this machine's Python and torchspec's core dependencies in a busybox root); the
Dockerfile's own steps (the wheel copied and pip-installed, the user, the command) run as they are.
"""

from __future__ import annotations

import pathlib
import re
import shutil
from typing import Any, Iterator, Tuple

import pytest

import python_image
import wheel_support

ROOT = wheel_support.ROOT
IMAGE = "torchspec-test/torchspec-cli:test"
GOOD = (ROOT / "examples" / "hello.yaml").read_text()
BAD = "name: bad\nroles:\n  - name: x\n    image: .\n    entrypoint: echo\n    num_replicas: many\n"

pytestmark = pytest.mark.skipif(not wheel_support.setuptools_new_enough(),
                                reason="building needs setuptools >= 77 installed")


@pytest.fixture(scope="module")
def image(docker_client: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The Dockerfile built with the wheel in dist/, as its comment says, from the stand-in base."""
    import docker.errors

    wheel = wheel_support.built_dists(tmp_path_factory)["wheel"]
    base = python_image.ensure_python_image(docker_client, wheel)
    context = tmp_path_factory.mktemp("image-context")
    for name in ("Dockerfile", ".dockerignore"):
        shutil.copy(ROOT / name, context / name)
    (context / "dist").mkdir()
    shutil.copy(wheel, context / "dist" / wheel.name)
    (context / "README.md").write_text("left out by .dockerignore\n")
    try:
        built, _ = docker_client.images.build(path=str(context), tag=IMAGE, buildargs={"BASE": base}, rm=True,
                                              forcerm=True)
    except docker.errors.BuildError as error:
        pytest.fail("docker build failed:\n" + "".join(str(line.get("stream", line)) for line in error.build_log))
    yield IMAGE
    try:
        docker_client.images.remove(built.id, force=True)
    except docker.errors.APIError:
        pass


def run(client: Any, image: str, folder: pathlib.Path, *command: str, user: str = "") -> Tuple[int, str]:
    """The image run on ``folder`` mounted read-only at /work, as a CI system runs it: exit code, output."""
    container = client.containers.run(image, list(command) or None, detach=True, user=user or None,
                                      volumes={str(folder): {"bind": "/work", "mode": "ro"}},
                                      environment={"NO_COLOR": "1"})
    try:
        code = container.wait(timeout=120)["StatusCode"]
        return code, container.logs().decode()
    finally:
        container.remove(force=True)


@pytest.fixture(scope="module")
def specs(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    folder = tmp_path_factory.mktemp("repo")
    (folder / "jobs").mkdir()
    (folder / "jobs" / "hello.yaml").write_text(GOOD)
    (folder / "broken").mkdir()
    (folder / "broken" / "bad.yaml").write_text(BAD)
    folder.chmod(0o755)
    return folder


def test_the_dockerfile_names_a_slim_python_base() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^ARG BASE=python:3\.\d+-slim$", text, re.M) and re.search(r"^FROM \$\{BASE\}$", text, re.M)
    assert re.search(r"^USER 10001:10001$", text, re.M)


def test_the_image_lints_a_mounted_folder(docker_client: Any, image: str, specs: pathlib.Path) -> None:
    code, out = run(docker_client, image, specs, "torchspec", "lint", "jobs")
    assert (code, out.strip()) == (0, "1 file passed")
    code, out = run(docker_client, image, specs, "torchspec", "lint", "jobs", "broken")
    assert code == 1 and "broken/bad.yaml:6:19: error TS201 expected an integer, got the string 'many'" in out, out
    assert "Found 1 error in 1 file (checked 2 files)" in out, out
    # the default command: torchspec lint . (the whole mounted folder)
    code, out = run(docker_client, image, specs)
    assert code == 1 and "broken/bad.yaml:6:19" in out and "checked 2 files" in out, out


def test_the_image_runs_as_a_user_of_its_own(docker_client: Any, image: str, specs: pathlib.Path) -> None:
    assert docker_client.api.inspect_image(image)["Config"]["User"] == "10001:10001"
    code, out = run(docker_client, image, specs, "sh", "-c", "id -u; id -un; echo $HOME; torchspec --version")
    lines = out.splitlines()
    assert code == 0 and lines[:3] == ["10001", "torchspec", "/home/torchspec"], out
    assert lines[3].startswith("torchspec ") and "installed by: pip (torchspec-cli)" in lines, out
    # a CI system that runs it as its own uid (Jenkins passes the agent's): lint works, its caches unwritable
    code, out = run(docker_client, image, specs, "torchspec", "lint", "jobs", user="4321:4321")
    assert (code, out.strip()) == (0, "1 file passed")
