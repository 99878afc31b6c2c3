"""A Python base image made locally, for building the Dockerfile at the repository's root in tests.

The Dockerfile starts ``FROM python:3.11-slim`` (its ``BASE`` build argument), but no registry is reachable
from CI, so nothing can be pulled. This module makes a stand-in the way tests/docker_support.py makes its
busybox image (``docker import`` of a root filesystem written here): the static busybox for ``/bin/sh`` and
the tools a ``RUN`` line uses, this machine's own Python interpreter (its executable, standard library and
the shared libraries ``ldd`` says they load, at the paths they have here, so the interpreter finds its
prefix as it does here), ``python`` and ``python3`` in ``/usr/local/bin`` as python:*-slim has them, its
scripts folder (where pip puts ``torchspec``) on PATH, and in
its site-packages pip plus the distributions torchspec's core requires, copied from this interpreter's. The
Dockerfile's own ``pip install`` of the wheel then finds every requirement met and needs no index, where on
the real base it downloads them.

The image is labelled with what it was made from and made again only when that changes.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import io
import json
import os
import pathlib
import re
import subprocess
import sys
import tarfile
import tempfile
import threading
from typing import Any, Dict, Iterable, List, Set

import docker_support
import wheel_support

PYTHON_IMAGE = "torchspec-test/python:slim"
#: bump when what goes into the image changes, so a stale one is made again
_RECIPE_VERSION = 4
_LABEL = "torchspec-test.python-image"
#: parts of the standard library no torchspec command imports (and the biggest)
_STDLIB_LEFT_OUT = {"test", "idlelib", "tkinter", "turtledemo", "lib2to3", "ensurepip", "site-packages",
                    "dist-packages"}
_lock = threading.Lock()


def _base_python() -> Dict[str, str]:
    """This interpreter's executable, prefix, standard library and site-packages, as its own base install has
    them (under a venv, the interpreter the venv was made from)."""
    executable = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    code = ("import json, sys, sysconfig; print(json.dumps({'prefix': sys.prefix, 'stdlib': "
            "sysconfig.get_path('stdlib'), 'platstdlib': sysconfig.get_path('platstdlib'), "
            "'purelib': sysconfig.get_path('purelib'), 'scripts': sysconfig.get_path('scripts'), "
            "'version': sys.version}))")
    out = json.loads(subprocess.run([executable, "-I", "-c", code], capture_output=True, text=True,
                                    check=True).stdout)
    return {"executable": executable, **out}


def _shared_libraries(binaries: Iterable[str]) -> Set[str]:
    """Every library ``ldd`` names for these ELF files, the dynamic loader too; a library not found is left
    out (the extension module that needs it cannot be imported there: none torchspec uses)."""
    found: Set[str] = set()
    binaries = list(binaries)
    for start in range(0, len(binaries), 64):
        r = subprocess.run(["ldd", *binaries[start:start + 64]], capture_output=True, text=True)
        for line in r.stdout.splitlines():
            match = re.search(r"(?:=>\s*)?(/\S+)\s+\(0x", line)
            if match:
                found.add(match.group(1))
    return found


def _files(python: Dict[str, str], dists: List[importlib.metadata.Distribution]) -> Dict[str, str]:
    """image path (absolute) -> file here: the interpreter, its standard library, the distributions."""
    files: Dict[str, str] = {python["executable"]: python["executable"]}
    for top in sorted({python["stdlib"], python["platstdlib"]}):
        for folder, dirs, names in os.walk(top):
            dirs[:] = [d for d in dirs if not (folder == top and d in _STDLIB_LEFT_OUT)]
            for name in names:
                if "_tkinter" in name or (name.endswith(".pyc") and ".opt-" in name) or name == "EXTERNALLY-MANAGED":
                    continue  # PEP 668's marker (Debian's Python) would refuse the Dockerfile's pip install
                files[os.path.join(folder, name)] = os.path.join(folder, name)
    site = python["purelib"]
    for dist in dists:
        here = pathlib.Path(str(dist.locate_file("")))
        for entry in dist.files or []:
            path = (here / entry).resolve()
            relative = pathlib.PurePath(str(entry))
            if relative.parts[0] == ".." or not path.is_file():
                continue  # scripts in bin/: the image needs none of the dependencies' commands
            files[os.path.join(site, str(relative))] = str(path)
    elf = [f for f in files.values() if f.endswith(".so") or ".so." in f or f == python["executable"]]
    for library in _shared_libraries(elf):
        files[library] = os.path.realpath(library)
    return files


def _recipe(python: Dict[str, str], dists: List[importlib.metadata.Distribution]) -> str:
    """What the image is made from, hashed: the interpreter, the distributions, the busybox, the recipe."""
    busybox, _ = docker_support.find_static_busybox()
    parts = [str(_RECIPE_VERSION), python["executable"], python["version"], str(busybox)]
    parts += [f"{d.metadata['Name']}=={d.version}@{d.locate_file('')}" for d in dists]
    return f"python-v{_RECIPE_VERSION}-" + hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def _write_root(out: str, busybox: str, files: Dict[str, str], python: Dict[str, str]) -> None:
    """The image's root filesystem as a tar: busybox's (every folder above a file made readable by all), then
    the files at their paths (a path under busybox's /usr/bin symlink goes to /bin, which it names)."""
    base = tarfile.open(fileobj=io.BytesIO(docker_support.busybox_image_tar(busybox)))
    dirs = {m.name for m in base.getmembers() if m.isdir()}
    targets = {m.name: os.path.normpath(os.path.join(os.path.dirname(m.name), m.linkname))
               for m in base.getmembers() if m.issym()}
    dir_links = {name: target for name, target in targets.items() if target in dirs}  # usr/bin -> bin...

    def in_image(path: str) -> str:
        name = path.lstrip("/")
        for link, target in dir_links.items():
            if name.startswith(link + "/"):
                return target + name[len(link):]
        return name

    wanted = {in_image(path): source for path, source in files.items()}
    bin_dir = in_image(os.path.dirname(python["executable"]))
    folders: Set[str] = set()
    for name in wanted:
        parent = os.path.dirname(name)
        while parent and parent not in folders:
            folders.add(parent)
            parent = os.path.dirname(parent)
    folders.add("usr/local/bin")
    folders.add("usr/local")
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
        for member in base.getmembers():
            if member.isdir() and member.name in folders:
                member.mode |= 0o755
            tar.addfile(member, base.extractfile(member) if member.isfile() else None)
        existing = set(base.getnames())
        for folder in sorted(folders - existing):
            info = tarfile.TarInfo(folder)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 1_700_000_000
            tar.addfile(info)
        for name, source in sorted(wanted.items()):
            info = tar.gettarinfo(source, arcname=name)
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            info.mode |= 0o444
            with open(source, "rb") as data:
                tar.addfile(info, data)
        for alias in ("python", "python3"):
            if f"usr/local/bin/{alias}" not in wanted:
                info = tarfile.TarInfo(f"usr/local/bin/{alias}")
                info.type, info.mode = tarfile.SYMTYPE, 0o777
                info.linkname = f"/{bin_dir}/{os.path.basename(python['executable'])}"
                tar.addfile(info)


def ensure_python_image(client: Any, wheel: pathlib.Path, tag: str = PYTHON_IMAGE) -> str:
    """``tag`` as the stand-in for python:3.11-slim with the wheel's core dependencies (made when missing or
    stale); returns ``tag``."""
    import docker.errors

    busybox, why_not = docker_support.find_static_busybox()
    if busybox is None:
        docker_support.skip_or_fail(f"cannot make the Python test image {tag}: {why_not}")
    python = _base_python()
    dists = wheel_support.closure(["pip", *wheel_support.wheel_requirements(wheel)])
    wanted = _recipe(python, dists)
    repository, _, version = tag.rpartition(":")
    with _lock, docker_support._FileLock("torchspec-test-python-image.lock"):
        labels = docker_support._image_labels(client, tag)
        if (labels or {}).get(_LABEL) == wanted:
            return tag
        stale = client.api.inspect_image(tag)["Id"] if labels is not None else None
        with tempfile.TemporaryDirectory(prefix="torchspec-python-image-") as tmp:
            root = os.path.join(tmp, "root.tar")
            _write_root(root, busybox, _files(python, dists), python)
            client.api.import_image_from_file(
                root, repository=repository, tag=version,
                changes=[f"ENV PATH={python['scripts']}:/usr/local/bin:/bin:/usr/bin", "ENV LANG=C.UTF-8",
                         f"LABEL {_LABEL}={wanted}", 'CMD ["python3"]'])
        if (docker_support._image_labels(client, tag) or {}).get(_LABEL) != wanted:
            raise RuntimeError(f"importing the Python test image did not make {tag}")
        if stale is not None:
            with contextlib.suppress(docker.errors.APIError):  # untagged now; it goes unless a container uses it
                client.api.remove_image(stale)
    return tag
