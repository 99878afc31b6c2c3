"""Secrets on docker through the CLI: the value in the container's env only (what ``docker inspect`` shows to whoever
may talk to the engine, as docs/guides/secrets.md says), never in what torchspec prints or keeps (the engine-wide
grep, tests/secrets_support.py)."""

from __future__ import annotations

import pathlib
from typing import Any

from secrets_support import Cli, assert_not_in_files, new_marker, spec_text
from torchspec.schedulers.docker.labels import LABEL_APP_ID


def test_the_replica_gets_it_and_nothing_torchspec_writes_holds_it(
        tmp_path: pathlib.Path, busybox_image: str, docker_client: Any) -> None:
    marker = new_marker()
    (tmp_path / "job.yaml").write_text(spec_text(busybox_image))
    cli = Cli(tmp_path, marker)
    handle = cli.lifecycle("docker", "job.yaml")
    try:
        app_id = handle.rsplit("/", 1)[1]
        containers = docker_client.containers.list(all=True, filters={"label": f"{LABEL_APP_ID}={app_id}"})
        assert containers
        for container in containers:  # the labels torchspec sets (the kept spec, provenance) hold no value
            assert marker.split("$")[0] not in repr(container.labels)
        assert assert_not_in_files(marker, cli.home, tmp_path / "job.yaml") >= 1
    finally:
        cli.run("delete", handle)
