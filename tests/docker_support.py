"""The one place the tests reach a Docker engine and build their test images.

scripts/test only makes sure an engine is running (and exports
TORCHSPEC_REQUIRE_DOCKER=1 when it found or started one, and always in CI);
everything else lives here, in Python, through the docker SDK:

- ``engine_or_skip()``: a client for the engine DOCKER_HOST (or the default
  socket) names. Without an engine the test skips, unless
  TORCHSPEC_REQUIRE_DOCKER=1, where it fails: CI must never pass by skipping.
- ``ensure_busybox_image(client)``: a tiny image made locally (no registry is
  reachable from CI) from the host's static busybox, like ``docker import``.
- ``labelled_ids`` / ``cleanup_apps``: remove what a test's apps left behind
  (all new ones, or only one scheduler session's).
- ``engine_stopped(client)``: the engine down for a block (fault tests): this
  machine's dockerd stopped, and started again as it was when the block ends.

``docker`` itself is imported lazily: most tests never touch an engine.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import shutil
import signal
import struct
import subprocess
import tarfile
import tempfile
import threading
import time
from typing import Any, Iterator, NoReturn

import skips
from process_support import alive, wait_gone

# Containers and networks the docker scheduler creates carry this label (value: the app id).
APP_LABEL = "torchspec.app-id"

BUSYBOX_IMAGE = "torchspec-test/busybox:latest"

# Bump when the image's contents change, so a stale image on a developer's
# engine is rebuilt instead of used.
_RECIPE_VERSION = 1
# Set on the image; its value ties the image to the recipe and the busybox binary.
# Containers inherit their image's labels, so it stays out of the "torchspec."
# namespace that the schedulers' own container labels use.
_IMAGE_LABEL = "torchspec-test.image"

_HINT = ("start one (see setup_docker in scripts/test: as root it installs and starts dockerd) "
         "or set DOCKER_HOST to a running engine")


def skip_or_fail(reason: str) -> NoReturn:
    """Skip the test, or fail it where a Docker engine is required (TORCHSPEC_REQUIRE_DOCKER=1, or CI)."""
    skips.skip_or_fail("DOCKER", reason)


#: How long a required engine that does not answer is waited for (a fault test's restart of it takes seconds).
ENGINE_WAIT_S = 120.0


def engine_or_skip() -> Any:
    """A docker client for a live engine; skips (or fails, see ``skip_or_fail``) without one."""
    try:
        import docker
    except ImportError as exc:  # the project depends on it, but be clear if it is missing
        skip_or_fail(f"no Docker engine: the docker SDK is not installed ({exc}); pip install -e '.[test]'")
    # where the engine is required, another worker's fault test may be restarting it right now (a module that
    # needs Docker beside the docker group: the cluster's test image): wait for it, as long as a restart takes
    deadline = time.monotonic() + (ENGINE_WAIT_S if skips.required("DOCKER") else 0)
    while True:
        client = None
        try:
            client = docker.from_env()
            client.ping()
            return client
        except Exception as exc:  # DockerException, requests' ConnectionError, ...: all mean "no engine"
            if client is not None:
                client.close()
            if time.monotonic() >= deadline:
                where = os.environ.get("DOCKER_HOST") or "the default socket"
                skip_or_fail(f"no Docker engine at {where}: {_one_line(exc)}; {_HINT}")
            time.sleep(1)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."


# --- the busybox image ------------------------------------------------------

def is_static_elf(path: str) -> bool:
    """True for an ELF executable with no PT_INTERP segment, i.e. one that needs no dynamic loader.

    Raises ValueError when ``path`` is not an ELF file. (A static-PIE binary
    counts as static: it has a PT_DYNAMIC segment but no interpreter.)
    """
    pt_interp = 3
    with open(path, "rb") as f:
        ident = f.read(64)
        if len(ident) < 52 or ident[:4] != b"\x7fELF":
            raise ValueError(f"{path} is not an ELF file")
        end = "<" if ident[5] == 1 else ">"
        if ident[4] == 2:  # ELFCLASS64
            (phoff,) = struct.unpack_from(end + "Q", ident, 32)
            phentsize, phnum = struct.unpack_from(end + "HH", ident, 54)
        else:  # ELFCLASS32
            (phoff,) = struct.unpack_from(end + "I", ident, 28)
            phentsize, phnum = struct.unpack_from(end + "HH", ident, 42)
        f.seek(phoff)
        table = f.read(phentsize * phnum)
    for i in range(phnum):
        (p_type,) = struct.unpack_from(end + "I", table, i * phentsize)
        if p_type == pt_interp:
            return False
    return True


def find_static_busybox() -> tuple[str | None, str]:
    """The host's static busybox (/bin/busybox, else the one on PATH) and "", or None and why there is none."""
    candidates = []
    for path in ("/bin/busybox", shutil.which("busybox")):
        if path and os.path.isfile(path) and path not in candidates:
            candidates.append(path)
    if not candidates:
        return None, ("no busybox on this machine to build the test image from; "
                      "install busybox-static (scripts/test does, as root)")
    for path in candidates:
        try:
            if is_static_elf(path):
                return path, ""
        except (OSError, ValueError):
            continue
    return None, (f"{' and '.join(candidates)} is not a statically linked busybox, so it cannot run "
                  "alone in an image; install busybox-static (scripts/test does, as root)")


def busybox_image_tar(busybox: str) -> bytes:
    """A root filesystem, as an uncompressed tar: busybox, one symlink per applet, /etc/passwd and /etc/group."""
    with open(busybox, "rb") as f:
        binary = f.read()
    listing = subprocess.run([busybox, "--list"], capture_output=True, text=True, check=True).stdout
    applets = sorted({name.strip() for name in listing.split()} - {"", "busybox"})
    mtime = 1_700_000_000  # fixed, so the same inputs give the same layer

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        def add(name: str, kind: bytes, mode: int, data: bytes = b"", target: str = "") -> None:
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.mtime = kind, mode, mtime
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            if kind == tarfile.SYMTYPE:
                info.linkname = target
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data else None)

        for d, mode in (("bin", 0o755), ("etc", 0o755), ("root", 0o700), ("tmp", 0o1777),
                        ("usr", 0o755), ("var", 0o755), ("var/tmp", 0o1777)):
            add(d, tarfile.DIRTYPE, mode)
        # merged /usr: /usr/bin/env, /sbin/ip ... all work, whatever path a script names
        for link, target in (("usr/bin", "../bin"), ("usr/sbin", "../bin"), ("sbin", "bin")):
            add(link, tarfile.SYMTYPE, 0o777, target=target)
        add("bin/busybox", tarfile.REGTYPE, 0o755, binary)
        for applet in applets:
            if "/" not in applet:
                add(f"bin/{applet}", tarfile.SYMTYPE, 0o777, target="busybox")
        add("etc/passwd", tarfile.REGTYPE, 0o644,
            b"root:x:0:0:root:/root:/bin/sh\n"
            b"nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n")
        add("etc/group", tarfile.REGTYPE, 0o644, b"root:x:0:\nnogroup:x:65534:\n")
    return buf.getvalue()


_image_lock = threading.Lock()


class _FileLock:
    """An exclusive flock on a file in the temp dir, so parallel pytest processes build the image once.

    Best effort: where the lock cannot be taken (no fcntl, a lock file owned by
    another user) it does nothing; building twice is harmless, only slower.
    """

    def __init__(self, name: str) -> None:
        self.path = os.path.join(tempfile.gettempdir(), name)
        self.fd: int | None = None

    def __enter__(self) -> "_FileLock":
        try:
            import fcntl
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        except (ImportError, OSError):
            if self.fd is not None:
                os.close(self.fd)
            self.fd = None
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing releases the flock
            self.fd = None


def _image_labels(client: Any, ref: str) -> dict | None:
    """The image's labels ({} when it has none), or None when there is no such image."""
    import docker.errors
    try:
        return client.api.inspect_image(ref)["Config"].get("Labels") or {}
    except docker.errors.ImageNotFound:
        return None


def ensure_busybox_image(client: Any, tag: str = BUSYBOX_IMAGE) -> str:
    """Make sure ``tag`` is the busybox test image (building it when missing or stale); return ``tag``.

    The image is ``docker import``-ed from an in-memory tar (see
    ``busybox_image_tar``): nothing is pulled. A check-then-import under a
    thread lock and a file lock; a concurrent import of the same tag by
    another engine client is harmless (the tag ends up on an equal image).
    """
    import docker.errors

    busybox, why_not = find_static_busybox()
    prefix = f"busybox-v{_RECIPE_VERSION}-"
    wanted = None
    if busybox is not None:
        with open(busybox, "rb") as f:
            wanted = prefix + hashlib.sha256(f.read()).hexdigest()[:16]
    repository, _, version = tag.rpartition(":")
    if not repository or "/" in version:  # no tag given: "name" or "host:5000/name"
        repository, version = tag, "latest"

    with _image_lock, _FileLock("torchspec-test-image.lock"):
        labels = _image_labels(client, tag)
        have = (labels or {}).get(_IMAGE_LABEL, "")
        if wanted is None:
            # nothing here to build from (a remote engine, a Mac): an image
            # of this recipe built elsewhere will do
            if have.startswith(prefix):
                return tag
            skip_or_fail(f"cannot build the test image {tag}: {why_not}")
        if have == wanted:
            return tag
        stale_id = client.api.inspect_image(tag)["Id"] if labels is not None else None
        client.api.import_image_from_data(
            busybox_image_tar(busybox), repository=repository, tag=version,
            changes=["ENV PATH=/bin:/usr/bin", f"LABEL {_IMAGE_LABEL}={wanted}", 'CMD ["sh"]'],
        )
        try:
            new_id = client.api.inspect_image(tag)["Id"]
        except docker.errors.ImageNotFound:
            raise RuntimeError(f"importing the busybox test image did not create {tag}") from None
        if stale_id is not None and stale_id != new_id:
            try:  # untagged now; it goes unless a container still uses it
                client.api.remove_image(stale_id)
            except docker.errors.APIError:
                pass
    return tag


# --- cleaning up after apps -------------------------------------------------

# The scheduler's containers (not its networks) name their session with this label.
SESSION_LABEL = "torchspec.session"


def labelled_ids(client: Any) -> set[str]:
    """Ids of every container (running or not) and network that carries the app label."""
    ids = {c["Id"] for c in client.api.containers(all=True, filters={"label": APP_LABEL})}
    ids.update(n["Id"] for n in client.api.networks(filters={"label": APP_LABEL}))
    return ids


def cleanup_apps(client: Any, before_ids: set[str], session: str | None = None) -> list[str]:
    """Force-remove the labelled containers, then networks, not in ``before_ids``; return the removed ids.

    Call it with ``labelled_ids(client)`` taken before a test, so that a
    failing test leaves nothing behind and apps that were there before (a
    developer's) are left alone. Things that vanish meanwhile are fine.

    Everything new is removed, so on an engine that another test run uses at
    the same time, that run's apps go too. With ``session``, only containers
    of that scheduler session go, with the new networks of their apps: give
    each test's scheduler a unique session name for that.
    """
    import docker.errors

    container_filter = [APP_LABEL] if session is None else [APP_LABEL, f"{SESSION_LABEL}={session}"]
    removed, app_ids = [], set()
    for c in client.api.containers(all=True, filters={"label": container_filter}):
        if c["Id"] in before_ids:
            continue
        app_ids.add((c.get("Labels") or {}).get(APP_LABEL))
        try:
            client.api.remove_container(c["Id"], force=True, v=True)
        except docker.errors.APIError as e:
            if e.status_code not in (404, 409):  # gone, or its removal is already in progress
                raise
        removed.append(c["Id"])
    for n in client.api.networks(filters={"label": APP_LABEL}):
        if n["Id"] in before_ids:
            continue
        if session is not None and (n.get("Labels") or {}).get(APP_LABEL) not in app_ids:
            continue
        try:
            # containers without the label (a test's own helpers) may still be attached
            for cid in (client.api.inspect_network(n["Id"]).get("Containers") or {}):
                try:
                    client.api.disconnect_container_from_network(cid, n["Id"], force=True)
                except docker.errors.APIError:
                    pass
            client.api.remove_network(n["Id"])
        except docker.errors.APIError as e:
            if e.status_code not in (404, 409):
                raise
        removed.append(n["Id"])
    return removed


# --- stopping and starting the engine (fault tests) ------------------------------------------------------------------

#: Where a restarted dockerd writes when the one it replaces wrote to no file.
DOCKERD_LOG = "/tmp/dockerd.log"
#: Left behind by a containerd that dockerd did not stop in time; a new dockerd refuses to start while it names
#: a live process (here: one that reuses the pid).
_CONTAINERD_PID = "/var/run/docker/containerd/containerd.pid"


def _dockerd() -> tuple[int, list[str], dict[str, str], str, str]:
    """(pid, argv, environment, working folder, log file) of this machine's dockerd; skips without one we may stop."""
    if os.environ.get("DOCKER_HOST", "unix://").split("://")[0] != "unix":
        skip_or_fail("the engine is not on this machine (DOCKER_HOST), so this test cannot stop and start it")
    for name in os.listdir("/proc"):
        if not name.isdigit() or not alive(int(name)):
            continue
        try:
            with open(f"/proc/{name}/comm") as f:
                if f.read().strip() != "dockerd":
                    continue
            with open(f"/proc/{name}/cmdline", "rb") as f:
                argv = [a.decode() for a in f.read().split(b"\0") if a]
            with open(f"/proc/{name}/environ", "rb") as f:
                pairs = [a.decode(errors="replace").partition("=") for a in f.read().split(b"\0") if a]
            cwd = os.readlink(f"/proc/{name}/cwd")
            log = os.readlink(f"/proc/{name}/fd/2")
            if not os.path.isdir(cwd):  # "/tmp/x (deleted)": the folder it was started from is gone
                cwd = "/"
        except (FileNotFoundError, ProcessLookupError):
            continue  # it ended meanwhile
        except OSError as e:
            skip_or_fail(f"cannot read dockerd's process {name} ({e}): this test needs to stop and start it (root)")
        return int(name), argv, {k: v for k, _, v in pairs}, cwd, log if os.path.isfile(log) else DOCKERD_LOG
    skip_or_fail("no dockerd process on this machine (a remote engine, Docker Desktop): this test stops and starts it")


def _start_dockerd(argv: list[str], env: dict[str, str], cwd: str, log: str) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                start_new_session=True)


def _engine_answers(client: Any, timeout: float) -> bool:
    """Wait until the engine answers ``info`` on a fresh connection and on ``client``'s (whose pooled ones died)."""
    import docker

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            fresh = docker.from_env(timeout=5)
            try:
                fresh.info()
            finally:
                fresh.close()
            client.ping()
            return True
        except Exception:  # noqa: BLE001 - anything the SDK raises for "not yet"
            time.sleep(0.1)
    return False


def start_engine(client: Any, argv: list[str], env: dict[str, str], cwd: str, log: str,
                 timeout: float = 60) -> None:
    """Start dockerd as ``argv`` (if it is not running) and wait for it; retried once without a stale containerd pid."""
    for attempt in range(2):
        proc = _start_dockerd(argv, env, cwd, log)
        if _engine_answers(client, timeout):
            return
        if proc.poll() is None:
            break
        if attempt == 0 and os.path.exists(_CONTAINERD_PID):
            os.remove(_CONTAINERD_PID)
    raise RuntimeError(f"dockerd ({' '.join(argv)}) did not answer within {timeout}s; see {log}")


@contextlib.contextmanager
def engine_stopped(client: Any, timeout: float = 60) -> Iterator[float]:
    """Stop this machine's dockerd (SIGTERM, then wait for it to exit) for the block; start it again, the same way,
    when the block ends, even on failure: other tests share the engine.  Yields how long the stop took.

    The engine stops every container as it shuts down: that is the fault.
    """
    pid, argv, env, cwd, log = _dockerd()
    started = time.monotonic()
    os.kill(pid, signal.SIGTERM)
    try:
        if wait_gone([pid], timeout):
            raise RuntimeError(f"dockerd {pid} still runs {timeout}s after SIGTERM")
        yield time.monotonic() - started
    finally:
        if not alive(pid):
            start_engine(client, argv, env, cwd, log, timeout)
