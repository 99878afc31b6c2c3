"""The Docker test support itself, against a real engine: the busybox image, networks, clean-up.

Without an engine these skip, except under TORCHSPEC_REQUIRE_DOCKER=1 (CI),
where they fail. The first few tests need no engine at all.
"""

from __future__ import annotations

import struct
import uuid

import pytest

import docker_support


def _name(kind: str) -> str:
    return f"torchspec-test-{kind}-{uuid.uuid4().hex[:10]}"


# --- no engine needed ----------------------------------------------------

def _elf64(tmp_path, name: str, p_types: list[int]) -> str:
    """A minimal little-endian ELF64 header followed by one program header per type."""
    phoff, phentsize = 64, 56
    header = bytearray(64)
    header[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<Q", header, 32, phoff)
    struct.pack_into("<HH", header, 54, phentsize, len(p_types))
    table = b"".join(struct.pack("<I", t) + bytes(phentsize - 4) for t in p_types)
    path = tmp_path / name
    path.write_bytes(bytes(header) + table)
    return str(path)


def test_is_static_elf_looks_for_an_interpreter(tmp_path) -> None:
    pt_load, pt_dynamic, pt_interp = 1, 2, 3
    assert docker_support.is_static_elf(_elf64(tmp_path, "static", [pt_load, pt_load]))
    assert docker_support.is_static_elf(_elf64(tmp_path, "static-pie", [pt_load, pt_dynamic]))
    assert not docker_support.is_static_elf(_elf64(tmp_path, "dynamic", [pt_load, pt_interp, pt_dynamic]))
    (tmp_path / "script").write_text("#!/bin/sh\n")
    with pytest.raises(ValueError, match="not an ELF"):
        docker_support.is_static_elf(str(tmp_path / "script"))


@pytest.mark.parametrize("required", [False, True])
def test_no_engine_skips_or_fails(monkeypatch, tmp_path, required: bool) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-such.sock")
    monkeypatch.delenv("CI", raising=False)  # where every requirement holds
    if required:
        monkeypatch.setenv("TORCHSPEC_REQUIRE_DOCKER", "1")
    else:
        monkeypatch.delenv("TORCHSPEC_REQUIRE_DOCKER", raising=False)
    outcome = pytest.fail.Exception if required else pytest.skip.Exception
    with pytest.raises(outcome, match="no Docker engine at unix://.*no-such.sock.*DOCKER_HOST"):
        docker_support.engine_or_skip()


# --- against the engine --------------------------------------------------
# Every container and network here carries the app label and a session unique
# to the test (docker_session), as the scheduler's do, so that docker_cleanup
# removes whatever a failing test leaves, and nothing of another test run
# sharing the engine.

def _labels(session: str, app_id: str) -> dict[str, str]:
    return {docker_support.APP_LABEL: app_id, docker_support.SESSION_LABEL: session}


def test_busybox_image_runs(docker_cleanup, docker_session: str, busybox_image: str) -> None:
    out = docker_cleanup.containers.run(
        busybox_image, ["sh", "-c", "echo hi; ls /bin/ping; id -un nobody; echo $PATH"],
        remove=True, labels=_labels(docker_session, _name("app")),
    )
    assert out.decode().splitlines() == ["hi", "/bin/ping", "nobody", "/bin:/usr/bin"]


def test_busybox_image_has_a_writable_tmp(docker_cleanup, docker_session: str, busybox_image: str) -> None:
    out = docker_cleanup.containers.run(
        busybox_image, ["sh", "-c", "stat -c %a /tmp && echo ok > /tmp/f && cat /tmp/f && /usr/bin/env true"],
        user="nobody", remove=True, labels=_labels(docker_session, _name("app")),
    )
    assert out.decode().split() == ["1777", "ok"]


def test_containers_resolve_each_other_by_network_alias(docker_cleanup, docker_session: str,
                                                         busybox_image: str) -> None:
    client = docker_cleanup
    app_id = _name("app")
    net = client.networks.create(app_id, driver="bridge", labels={docker_support.APP_LABEL: app_id})
    client.containers.run(
        busybox_image, ["sleep", "60"], name=f"{app_id}-server", detach=True, labels=_labels(docker_session, app_id),
        network=net.name, networking_config={net.name: client.api.create_endpoint_config(aliases=["server"])},
    )
    out = client.containers.run(
        busybox_image, ["sh", "-c", "nslookup server && ping -c1 -W5 server"], remove=True,
        labels=_labels(docker_session, app_id), network=net.name,
    ).decode()
    assert "1 packets received" in out, out
    # the server and the network are left to docker_cleanup, as a crashed test would leave them


def test_cleanup_removes_only_what_is_new(docker_cleanup, docker_session: str, busybox_image: str) -> None:
    client = docker_cleanup
    old = client.containers.create(busybox_image, ["true"], name=_name("old"),
                                   labels=_labels(docker_session, _name("app")))
    unlabelled = client.containers.create(busybox_image, ["true"], name=_name("plain"))
    mine = [old, unlabelled]
    try:
        before = docker_support.labelled_ids(client)
        assert old.id in before

        app_id = _name("app")
        net = client.networks.create(app_id, labels={docker_support.APP_LABEL: app_id})
        running = client.containers.run(busybox_image, ["sleep", "60"], name=app_id, detach=True,
                                        labels=_labels(docker_session, app_id), network=net.name)
        helper = client.containers.create(busybox_image, ["true"], name=_name("plain"))
        mine.append(helper)
        net.connect(helper)  # a container without the label, still on the app's network
        # an app of another session (another test run on this engine) must survive
        other_app = _name("app")
        other = client.containers.create(busybox_image, ["true"], name=other_app,
                                         labels=_labels(_name("other-session"), other_app))
        mine.append(other)

        removed = docker_support.cleanup_apps(client, before, session=docker_session)

        assert set(removed) == {running.id, net.id}
        for c in mine:
            client.containers.get(c.id)  # untouched
        assert docker_support.cleanup_apps(client, before, session=docker_session) == []
    finally:
        for c in mine:
            c.remove(force=True)


def test_cleanup_without_a_session_removes_every_new_app(docker_client, busybox_image: str) -> None:
    client = docker_client
    app_id = _name("app")
    net = client.networks.create(app_id, labels={docker_support.APP_LABEL: app_id})
    c = client.containers.create(busybox_image, ["true"], name=app_id, network=net.name,
                                 labels={docker_support.APP_LABEL: app_id})
    # Without a session everything new goes; so that a test run sharing this
    # engine loses nothing, "before" is taken now, as if ours were all that is new.
    before = docker_support.labelled_ids(client) - {c.id, net.id}

    removed = docker_support.cleanup_apps(client, before)

    assert {c.id, net.id} <= set(removed)
    assert not {c.id, net.id} & docker_support.labelled_ids(client)


def test_ensure_busybox_image_builds_a_missing_tag_once(docker_client) -> None:
    tag = f"torchspec-test/busybox-build:{uuid.uuid4().hex[:10]}"
    try:
        assert docker_support.ensure_busybox_image(docker_client, tag) == tag
        first = docker_client.images.get(tag).id
        assert docker_support.ensure_busybox_image(docker_client, tag) == tag
        assert docker_client.images.get(tag).id == first
        assert docker_client.containers.run(tag, ["echo", "built"], remove=True) == b"built\n"
    finally:
        docker_client.images.remove(tag, force=True)


def test_without_a_static_busybox_an_existing_image_still_serves(docker_client, busybox_image: str,
                                                                  monkeypatch) -> None:
    """A remote engine or a Mac: nothing here to build from, but an image of the recipe built elsewhere will do."""
    monkeypatch.setattr(docker_support, "find_static_busybox", lambda: (None, "no busybox here"))
    monkeypatch.delenv("TORCHSPEC_REQUIRE_DOCKER", raising=False)
    monkeypatch.delenv("CI", raising=False)
    assert docker_support.ensure_busybox_image(docker_client, busybox_image) == busybox_image
    with pytest.raises(pytest.skip.Exception, match="cannot build the test image .*: no busybox here"):
        docker_support.ensure_busybox_image(docker_client, f"torchspec-test/busybox-none:{uuid.uuid4().hex[:10]}")
