"""The release's wheel and sdist, built once per test run, and fresh virtual environments with the wheel installed.

Why one build per run: building copies the sources and runs setuptools (about 10 s of CPU on CI's two cores),
and three modules need the result (tests/test_packaging.py, test_installed.py, test_image.py), which xdist may
put on three workers. So the first to ask builds, under a lock, into a folder every worker of the run shares
(the parent of the workers' temporary folders, as pytest-xdist's documentation advises); the others wait and
read it.

Why the environments install offline: CI has two cores and a tight time budget, and the question is whether
the *wheel* works installed, not whether PyPI answers. So a venv gets the wheel from pip (its files, its
``torchspec`` script, its metadata), and its dependencies as links to this interpreter's installed copies of
exactly the distributions the wheel's metadata requires (and what they require, recursively): pip then finds
every requirement met and reaches no index (``--no-index``), and a requirement the links miss fails the
install. Nothing else of this interpreter is visible there: no docker, no kubernetes, no source tree.
"""

from __future__ import annotations

import base64
import contextlib
import email
import fcntl
import hashlib
import importlib.metadata
import importlib.util
import os
import pathlib
import re
import shutil
import subprocess
import sys
import zipfile
from typing import Dict, Iterable, Iterator, List, Set

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = pathlib.Path(__file__).resolve().parent.parent
#: what the build reads, copied to a temporary folder (the checkout gets no build/ or egg-info)
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "CHANGELOG.md", "MANIFEST.in", "torchspec", "tests", "examples",
           "docs", "schemas", "scripts", "bench", "action.yml", "Dockerfile", ".dockerignore", "mkdocs.yml",
           ".pre-commit-hooks.yaml", ".ci", ".github")


def setuptools_new_enough() -> bool:
    """pyproject.toml's SPDX license and license-files need setuptools >= 77."""
    try:
        import setuptools
    except ImportError:
        return False
    return int(setuptools.__version__.split(".")[0]) >= 77


def _run_folder(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """A folder this run's processes share: the workers' common parent under xdist, else this run's own."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextlib.contextmanager
def _locked(path: pathlib.Path) -> Iterator[None]:
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def built_dists(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, pathlib.Path]:
    """{"wheel": ..., "sdist": ...}: built by the first process of the run to ask, read by the others."""
    shared = _run_folder(tmp_path_factory)
    out = shared / "torchspec-dists"
    with _locked(shared / "torchspec-dists.lock"):
        if not (out / "done").exists():
            shutil.rmtree(out, ignore_errors=True)
            _build(shared / "torchspec-dists-src", out)
            (out / "done").write_text("")
    wheel, = out.glob("*.whl")
    sdist, = out.glob("*.tar.gz")
    return {"wheel": wheel, "sdist": sdist}


def _build(src: pathlib.Path, out: pathlib.Path) -> None:
    """``python -m build --no-isolation`` where ``build`` is installed, else ``pip wheel`` and setuptools' sdist:
    no network, the setuptools at hand."""
    shutil.rmtree(src, ignore_errors=True)
    src.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache", ".hypothesis", "*.egg-info", "out")
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=ignore)
        elif path.exists():
            shutil.copy2(path, src / name)
    out.mkdir(parents=True)
    if importlib.util.find_spec("build") is not None:
        command = [sys.executable, "-m", "build", "--no-isolation", "--sdist", "--wheel", "--outdir", str(out),
                   str(src)]
    else:
        command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out),
                   str(src)]
    r = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=src)
    assert r.returncode == 0, r.stdout + r.stderr
    if not list(out.glob("*.tar.gz")):  # pip makes no sdist: setuptools' own command does
        r = subprocess.run([sys.executable, "-c", "from setuptools import setup; setup()", "-q", "sdist", "-d",
                            str(out)], capture_output=True, text=True, timeout=120, cwd=src)
        assert r.returncode == 0, r.stdout + r.stderr


# --- the wheel's dependencies, as installed here ---------------------------------------------------------------

def wheel_requirements(wheel: pathlib.Path) -> List[str]:
    """The wheel's Requires-Dist lines, as its metadata (not pyproject.toml) says."""
    with zipfile.ZipFile(wheel) as archive:
        name, = (n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        return email.message_from_string(archive.read(name).decode()).get_all("Requires-Dist") or []


def closure(requirements: Iterable[str], extras: Iterable[str] = ()) -> List[importlib.metadata.Distribution]:
    """The installed distributions these requirements (with ``extras`` of the first level) need, recursively.

    A requirement this interpreter does not have fails the test: the environment could not be made offline."""
    found: Dict[str, importlib.metadata.Distribution] = {}
    todo = [(text, set(extras)) for text in requirements]
    while todo:
        text, wanted = todo.pop()
        req = Requirement(text)
        if req.marker is not None and not any(req.marker.evaluate({**default_environment(), "extra": e})
                                              for e in (wanted or {""})):
            continue
        key = canonicalize_name(req.name)
        if key in found:
            continue
        try:
            dist = importlib.metadata.distribution(req.name)
        except importlib.metadata.PackageNotFoundError:
            pytest.fail(f"{req.name} ({text}) is not installed here, so the wheel's environment cannot be made "
                        "offline: pip install -e '.[test]'")
        assert dist.version in req.specifier or not req.specifier, f"{req.name} {dist.version} does not meet {text}"
        assert dist.files, (f"{req.name} is installed without a list of its files (RECORD: an OS package?), so it "
                            f"cannot be carried into a venv: pip install --force-reinstall '{text}'")
        found[key] = dist
        todo.extend((sub, set(req.extras)) for sub in dist.requires or [])
    return sorted(found.values(), key=lambda d: canonicalize_name(d.metadata["Name"]))


def _top_level(dist: importlib.metadata.Distribution) -> Set[str]:
    """The names a distribution puts in site-packages: packages, modules, its .dist-info (not scripts)."""
    names = {pathlib.PurePath(str(f)).parts[0] for f in dist.files or []}
    return {n for n in names if n not in ("..", "__pycache__") and not n.endswith(".pth")}


def _site_of(dist: importlib.metadata.Distribution) -> pathlib.Path:
    return pathlib.Path(str(dist.locate_file(""))).resolve()


def make_venv(path: pathlib.Path, wheel: pathlib.Path, extras: Iterable[str] = ()) -> pathlib.Path:
    """A fresh venv at ``path`` with the wheel (and its ``extras``) installed by pip; returns its python.

    The dependencies are links to this interpreter's copies (see the module's docstring); pip checks them."""
    extras = sorted(extras)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=60)
    python = path / "bin" / "python"
    site = pathlib.Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                       capture_output=True, text=True, check=True).stdout.strip())
    for dist in closure(wheel_requirements(wheel), extras):
        for name in _top_level(dist):
            target = _site_of(dist) / name
            if target.exists() and not (site / name).exists():
                (site / name).symlink_to(target)
    spec = f"{wheel}[{','.join(extras)}]" if extras else str(wheel)
    # pip of this interpreter, run for the venv's (--python); --isolated: no config file or PIP_* variable
    # (a find-links folder, an index) changes what it may install
    r = subprocess.run([sys.executable, "-m", "pip", "--isolated", "--python", str(python), "install", "-q",
                        "--no-index", "--no-cache-dir", "--disable-pip-version-check", spec],
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    return python


def venv_env(venv_python: pathlib.Path, home: pathlib.Path) -> Dict[str, str]:
    """An environment as a user of that venv has it: its bin first on PATH, nothing of this checkout on
    sys.path (no PYTHONPATH), state, config and caches in ``home``, no colour."""
    keep = {k: v for k, v in os.environ.items()
            if not k.startswith(("PYTHON", "TORCHSPEC_", "XDG_", "VIRTUAL_ENV", "FORCE_COLOR", "PIP_"))}
    return {**keep, "PATH": f"{venv_python.parent}{os.pathsep}{keep.get('PATH', '')}", "HOME": str(home),
            "XDG_CACHE_HOME": str(home / ".cache"), "XDG_CONFIG_HOME": str(home / ".config"),
            "XDG_STATE_HOME": str(home / ".state"), "NO_COLOR": "1", "VIRTUAL_ENV": str(venv_python.parent.parent)}


def wheelhouse(folder: pathlib.Path, dists: Iterable[importlib.metadata.Distribution]) -> pathlib.Path:
    """A folder of wheels for pip's ``--find-links``, each made from an installed distribution's own files
    (its .dist-info as installed, less what installing adds): for a test that lets pip install the way a user's
    machine does (a venv of its own, requirements resolved) where no index is reachable."""
    folder.mkdir(parents=True, exist_ok=True)
    for dist in dists:
        site = _site_of(dist)
        entries = [pathlib.PurePath(str(f)) for f in dist.files or []]
        info = next(e.parts[0] for e in entries if e.parts[0].endswith(".dist-info"))
        tags = [line.split(":", 1)[1].strip() for line in (site / info / "WHEEL").read_text().splitlines()
                if line.startswith("Tag:")]
        name = re.sub(r"[-_.]+", "_", dist.metadata["Name"])
        path = folder / f"{name}-{dist.version}-{tags[0]}.whl"
        kept = [e for e in entries if e.parts[0] != ".." and "__pycache__" not in e.parts
                and e.as_posix() not in (f"{info}/RECORD", f"{info}/INSTALLER", f"{info}/REQUESTED",
                                         f"{info}/direct_url.json") and (site / e).is_file()]
        record = []
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
            for entry in kept:
                data = (site / entry).read_bytes()
                archive.writestr(entry.as_posix(), data)
                digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                record.append(f"{entry.as_posix()},sha256={digest},{len(data)}")
            record.append(f"{info}/RECORD,,")
            archive.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return folder
