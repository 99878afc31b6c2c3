"""A plug-in package written for TorchX (its entry points in ``torchx.schedulers``, ``torchx.named_resources``
and ``torchx.components``, only its import lines changed to torchspec), installed by pip into a venv: torchspec
finds each of its entry points after its own, and a name it shares with a torchspec plug-in is an error naming
both packages."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap
from typing import Dict, List

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent

PYPROJECT = textwrap.dedent("""\
    [build-system]
    requires = ["setuptools"]
    build-backend = "setuptools.build_meta"

    [project]
    name = "{name}"
    version = "0.1"

    [tool.setuptools]
    packages = ["{module}"]
    {entry_points}
""")

TORCHX_STYLE = {
    "__init__.py": "",
    # what TorchX's docs show a plug-in writing, with `torchx` changed to `torchspec` in the imports
    "scheduler.py": textwrap.dedent("""\
        from torchspec.schedulers.local import create_scheduler as local_scheduler


        def create_scheduler(session_name: str, **kwargs):
            return local_scheduler(session_name, **kwargs)
    """),
    "resources.py": textwrap.dedent("""\
        from torchspec.specs import Resource


        def acme_gpu() -> Resource:
            return Resource(cpu=3, gpu=0, memMB=333)
    """),
    "components.py": textwrap.dedent("""\
        import torchspec.specs as specs


        def echo(msg: str = "hi") -> specs.AppDef:
            \"\"\"Echo msg.\"\"\"
            return specs.AppDef(name="echo", roles=[specs.Role(name="echo", image=".", entrypoint="echo",
                                                               args=[msg], resource=specs.resource(h="acme_gpu"))])
    """),
}


def package(where: pathlib.Path, name: str, module: str, files: Dict[str, str], groups: Dict[str, List[str]]) -> str:
    folder = where / name
    (folder / module).mkdir(parents=True)
    for file, text in files.items():
        (folder / module / file).write_text(text)
    entry_points = "\n".join(f'[project.entry-points."{group}"]\n' + "\n".join(lines) + "\n"
                             for group, lines in groups.items())
    (folder / "pyproject.toml").write_text(PYPROJECT.format(name=name, module=module, entry_points=entry_points))
    return str(folder)


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """A venv that sees this environment's packages (torchspec, pip and setuptools among them) and holds the
    TorchX-style plug-in."""
    where = tmp_path_factory.mktemp("torchx-plugin")
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(where / "venv")], check=True,
                   timeout=120)
    source = package(where, "acme-torchx", "acme_torchx", TORCHX_STYLE, {
        "torchx.schedulers": ['acme = "acme_torchx.scheduler:create_scheduler"'],
        "torchx.named_resources": ['acme_gpu = "acme_torchx.resources:acme_gpu"'],
        "torchx.components": ['acme = "acme_torchx.components"'],
    })
    pip(where / "venv", source)
    return where / "venv"


def pip(venv: pathlib.Path, source: str) -> None:
    done = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                           "--no-build-isolation", source], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr


def torchspec(venv: pathlib.Path, *argv: str, cwd: pathlib.Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "XDG_CACHE_HOME": str(cwd / "cache"), "XDG_CONFIG_HOME": str(cwd / "xdg"), "NO_COLOR": "1",
           "TORCHSPEC_HOME": str(cwd / "home")}
    return subprocess.run([str(venv / "bin" / "python"), "-m", "torchspec", *argv], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=120)


def test_a_torchx_plugin_scheduler_resource_and_component_are_found(venv: pathlib.Path,
                                                                    tmp_path: pathlib.Path) -> None:
    done = torchspec(venv, "dryrun", "-s", "acme", "acme.echo", "--msg", "hello", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "echo hello" in done.stdout, done.stdout
    resource = subprocess.run([str(venv / "bin" / "python"), "-c", "from torchspec.specs import named_resources;"
                               " r = named_resources['acme_gpu']; print(r.cpu, r.memMB)"],
                              capture_output=True, text=True, timeout=120, cwd=tmp_path,
                              env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")})
    assert resource.stdout.split() == ["3", "333"], resource.stderr
    listed = torchspec(venv, "schedulers", cwd=tmp_path)
    assert listed.returncode == 0 and "acme" in listed.stdout, (listed.stdout, listed.stderr)


def test_a_name_in_both_groups_is_an_error_naming_both_packages(venv: pathlib.Path, tmp_path: pathlib.Path) -> None:
    ours = package(tmp_path, "acme-torchspec", "acme_torchspec", TORCHX_STYLE,
                   {"torchspec.schedulers": ['acme = "acme_torchspec.scheduler:create_scheduler"']})
    pip(venv, ours)
    try:
        done = torchspec(venv, "dryrun", "-s", "acme", "acme.echo", cwd=tmp_path)
        assert done.returncode == 2, done
        assert "acme-torchspec" in done.stderr and "acme-torchx" in done.stderr and "twice" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
    finally:
        subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "uninstall", "-q", "-y", "acme-torchspec"],
                       capture_output=True, timeout=120)
