"""What every job uploads: torchspec itself (``py_modules``), content-addressed by Ray, so that a submit
finds it uploaded already.  Needs Ray's packaging code, not a cluster."""

from __future__ import annotations

import shutil
from pathlib import Path

from ray_support import ray_or_skip
from torchspec import specs
from torchspec.schedulers.ray.translate import app_to_request, torchspec_folder


def test_torchspec_uploads_as_the_same_package_whatever_bytecode_is_cached(tmp_path: Path) -> None:
    ray_or_skip()
    from ray._private.runtime_env.packaging import get_uri_for_directory

    app = specs.AppDef("a", roles=[specs.Role(name="r", image="i", entrypoint="true")])
    excludes = app_to_request(app, "127.0.0.1:8265", "PACK", {}, {}, "s").runtime_env["excludes"]
    copy = tmp_path / "torchspec"
    shutil.copytree(torchspec_folder(), copy, ignore=shutil.ignore_patterns("__pycache__"))

    def uri() -> str:
        return get_uri_for_directory(str(copy), include_gitignore=True, excludes=excludes)

    bare = uri()
    for folder in (copy, copy / "lint", copy / "schedulers" / "ray"):  # what running some commands leaves
        (folder / "__pycache__").mkdir()
        (folder / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\x00bytecode")
    assert uri() == bare
    (copy / "version.py").write_text((copy / "version.py").read_text() + "\n")
    assert uri() != bare
