"""Write an OCI image archive (what ``ctr images import`` reads) from files on this machine.

scripts/k8s-cluster makes the pod sandbox ("pause") image with it: no
registry is reachable here, and the cluster must not need a Docker engine to
start.  Usage::

    python3 oci_image.py OUT.tar NAME:TAG ENTRYPOINT HOST_FILE=IMAGE_PATH... [IMAGE_PATH->TARGET...]

Each HOST_FILE is copied, executable, to IMAGE_PATH; each IMAGE_PATH->TARGET
is a symbolic link (busybox's applets).  The layer is written with fixed
owners and times, so the same inputs give the same image digest.
"""

from __future__ import annotations

import hashlib
import io
import json
import sys
import tarfile
from typing import Dict, List, Tuple


def _layer(files: List[Tuple[str, str]], links: List[Tuple[str, str]] = ()) -> bytes:  # type: ignore[assignment]
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path, target in links:
            info = tarfile.TarInfo(path.lstrip("/"))
            info.type, info.linkname, info.mode, info.mtime = tarfile.SYMTYPE, target, 0o777, 0
            tar.addfile(info)
        for host, path in files:
            with open(host, "rb") as f:
                data = f.read()
            info = tarfile.TarInfo(path.lstrip("/"))
            info.size, info.mode, info.mtime = len(data), 0o755, 0
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _blob(tar: tarfile.TarFile, data: bytes) -> Dict[str, object]:
    digest = hashlib.sha256(data).hexdigest()
    info = tarfile.TarInfo(f"blobs/sha256/{digest}")
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))
    return {"digest": f"sha256:{digest}", "size": len(data)}


def write_image(out: str, name: str, entrypoint: List[str], files: List[Tuple[str, str]],
                links: List[Tuple[str, str]] = ()) -> None:  # type: ignore[assignment]
    layer = _layer(files, links)
    config = json.dumps({
        "architecture": "amd64", "os": "linux",
        "config": {"Entrypoint": entrypoint, "WorkingDir": "/"},
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{hashlib.sha256(layer).hexdigest()}"]},
    }, sort_keys=True).encode()
    with tarfile.open(out, "w") as tar:
        layer_desc = _blob(tar, layer)
        config_desc = _blob(tar, config)
        manifest = json.dumps({
            "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **config_desc},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", **layer_desc}],
        }, sort_keys=True).encode()
        manifest_desc = _blob(tar, manifest)
        index = json.dumps({"schemaVersion": 2, "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json", **manifest_desc,
            "platform": {"architecture": "amd64", "os": "linux"},
            "annotations": {"io.containerd.image.name": name,
                            "org.opencontainers.image.ref.name": name.rpartition(":")[2]}}]}).encode()
        for path, data in (("oci-layout", b'{"imageLayoutVersion":"1.0.0"}'), ("index.json", index)):
            info = tarfile.TarInfo(path)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def main(argv: List[str]) -> int:
    if len(argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    out, name, entrypoint, *pairs = argv
    links = [tuple(p.split("->", 1)) for p in pairs if "->" in p]
    files = [tuple(p.split("=", 1)) for p in pairs if "->" not in p]
    write_image(out, name, [entrypoint], files, links)  # type: ignore[arg-type]
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
