"""Workspace images: a role's image with the user's project folders copied on top (``submit --workspace``).

The build context is a reproducible tar, so its hash names the image and an
unchanged folder reuses the image built before.  ``.dockerignore`` in a
project folder is honoured with Docker's own matching rules, implemented
here because the context is built in Python, not by the ``docker`` CLI.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import tarfile
from typing import TYPE_CHECKING, Callable, Dict, List, Pattern, Tuple

from torchspec.errors import AppRefusedError, BackendError
from torchspec.schedulers.docker.engine import docker_errors, ensure_image, reason
from torchspec.schedulers.docker.labels import LABEL_VERSION, LABEL_WORKSPACE_BASE
from torchspec.specs import Workspace
from torchspec.version import __version__

if TYPE_CHECKING:
    import docker


def build_workspace_image(
    client: "docker.DockerClient", base_image: str, workspace: Workspace, pull: str, progress: Callable[[str], None]
) -> str:
    """The tag of ``base_image`` with ``workspace`` copied into its working directory, built unless it exists.

    ``progress`` receives one line per build step (the engine's own output).
    """
    errors = docker_errors()
    ensure_image(client, base_image, pull, progress)
    base_id = client.api.inspect_image(base_image)["Id"]
    context, digest = workspace_context(base_image, base_id, workspace)
    tag = f"torchspec-workspace:{digest[:16]}"
    try:
        client.api.inspect_image(tag)
        progress(f"workspace unchanged: reusing image {tag}")
        return tag
    except errors.ImageNotFound:
        pass
    progress(f"building image {tag} from {base_image} and {workspace}")
    try:
        for chunk in client.api.build(fileobj=io.BytesIO(context), custom_context=True, tag=tag, rm=True,
                                      forcerm=True, pull=False, decode=True,
                                      labels={LABEL_WORKSPACE_BASE: base_image, LABEL_VERSION: __version__}):
            if "error" in chunk:
                raise BackendError(f"building the workspace image failed: {chunk['error'].strip()}")
            text = str(chunk.get("stream", "")).strip()
            if text:
                progress(text)
    except errors.APIError as e:
        raise BackendError(f"building the workspace image failed: {reason(e)}") from None
    return tag


def workspace_context(base_image: str, base_id: str, workspace: Workspace) -> Tuple[bytes, str]:
    """A build context (tar) with a Dockerfile that copies the workspace onto ``base_image``, and its hash.

    The tar is byte-for-byte reproducible (sorted entries, zero times and
    owners), so equal folders give equal hashes.
    """
    files: Dict[str, str] = {}
    for src, dst in workspace.projects.items():
        files.update(_project_files(src, dst))
    dockerfile = f"FROM {base_image}\nCOPY ws/ ./\n".encode()
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        _add_bytes(tar, "Dockerfile", dockerfile)
        _add_bytes(tar, ".dockerignore", b"Dockerfile\n.dockerignore\n")
        for arcname in sorted(files):
            info = tar.gettarinfo(files[arcname], arcname=arcname)
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            if info.isfile():
                with open(files[arcname], "rb") as src_file:
                    tar.addfile(info, src_file)
            elif info.issym() or info.isdir():
                tar.addfile(info)
    data = out.getvalue()
    digest = hashlib.sha256(base_id.encode() + b"\0" + data).hexdigest()
    return data, digest


def _project_files(src: str, dst: str) -> Dict[str, str]:
    """Name in the context (``ws/DST/...``) -> path on disk of every file of one project folder not ignored.

    Symbolic links, to files or folders, are kept as links, never followed.
    """
    root = os.path.abspath(src)
    if not os.path.isdir(root):
        raise AppRefusedError(f"workspace {src!r} is not a folder")
    ignore = _dockerignore(root)
    # a "!" pattern may re-include a file inside an excluded folder, so folders are pruned only without one
    prune = not any(negate for negate, _ in ignore)
    files: Dict[str, str] = {}
    for folder, dirs, names in os.walk(root):
        dirs.sort()
        rel_folder = os.path.relpath(folder, root)
        for name in sorted(names) + [d for d in dirs if os.path.islink(os.path.join(folder, d))]:
            rel = os.path.normpath(os.path.join(rel_folder, name)).replace(os.sep, "/")
            if rel in (".dockerignore",) or _ignored(rel, ignore):
                continue
            files[os.path.normpath(os.path.join("ws", dst, rel))] = os.path.join(folder, name)
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(folder, d)) and not (
            prune and _ignored(os.path.normpath(os.path.join(rel_folder, d)).replace(os.sep, "/"), ignore))]
    return files


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), 0o644
    tar.addfile(info, io.BytesIO(data))


def _dockerignore(root: str) -> List[Tuple[bool, Pattern[str]]]:
    """The patterns of ``root/.dockerignore`` as (is an exception, compiled regex), in order."""
    try:
        with open(os.path.join(root, ".dockerignore"), encoding="utf-8") as f:
            lines = [line.strip() for line in f]
    except OSError:
        return []
    patterns = []
    for line in lines:
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        text = os.path.normpath(line[1:].strip() if negate else line).lstrip("/")
        if text and text != ".":
            patterns.append((negate, re.compile(_ignore_regex(text))))
    return patterns


def _ignore_regex(pattern: str) -> str:
    """Docker's ``.dockerignore`` matching as a regex: ``*`` and ``?`` stay within one path part,
    ``**`` spans any number of parts, and a pattern also matches everything below what it names."""
    out, i = "", 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
            continue
        if pattern.startswith("**", i):
            out, i = out + ".*", i + 2
            continue
        if c == "*":
            out += "[^/]*"
        elif c == "?":
            out += "[^/]"
        elif c == "[" and "]" in pattern[i + 1:]:
            end = pattern.index("]", i + 1)
            body = pattern[i + 1:end]
            out += "[" + ("^" + body[1:] if body.startswith("^") else re.escape(body).replace("\\-", "-")) + "]"
            i = end
        elif c == "\\" and i + 1 < len(pattern):
            i += 1
            out += re.escape(pattern[i])
        else:
            out += re.escape(c)
        i += 1
    return f"^{out}(?:/.*)?$"


def _ignored(rel: str, patterns: List[Tuple[bool, Pattern[str]]]) -> bool:
    """Whether ``.dockerignore`` excludes ``rel`` (``/``-separated): the last matching pattern decides."""
    ignored = False
    for negate, regex in patterns:
        if regex.match(rel):
            ignored = not negate
    return ignored
