"""Scheduler discovery through the ``torchspec.schedulers`` entry-point group, with throwaway plug-ins."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Dict

import pytest

from torchspec import specs
from torchspec.schedulers import (
    DuplicateSchedulerError,
    Scheduler,
    get_default_scheduler_name,
    get_scheduler_factories,
    get_scheduler_factory,
    get_schedulers,
)
from torchspec.schedulers.local.scheduler import LocalScheduler
from torchspec.version import is_own_dist

PLUGIN_MODULE = textwrap.dedent(
    '''
    """A throwaway scheduler backend, installed by a test."""
    from typing import Any, List, Optional

    from torchspec import specs
    from torchspec.schedulers.api import DescribeAppResponse, ListAppResponse, Scheduler


    class EchoScheduler(Scheduler):
        def __init__(self, session_name: str, **kwargs: Any) -> None:
            super().__init__("echo", session_name)
            self.kwargs = kwargs

        def _submit_dryrun(self, app, cfg):
            return specs.AppDryRunInfo(app.name, str)

        def schedule(self, dryrun_info) -> str:
            return "echo-" + dryrun_info.request

        def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
            return DescribeAppResponse(app_id=app_id, state=specs.AppState.SUCCEEDED)

        def list(self) -> List[ListAppResponse]:
            return []

        def _cancel_existing(self, app_id: str) -> None:
            pass


    def create_scheduler(session_name: str, **kwargs: Any) -> EchoScheduler:
        return EchoScheduler(session_name, **kwargs)
    '''
)


def install_plugin(root: Path, dist: str, entry_points: Dict[str, str], module: str = "") -> None:
    """A minimal installed distribution: a ``*.dist-info`` with metadata and entry points, plus a module."""
    info = root / f"{dist.replace('-', '_')}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    lines = "".join(f"{name} = {value}\n" for name, value in entry_points.items())
    (info / "entry_points.txt").write_text(f"[torchspec.schedulers]\n{lines}")
    if module:
        (root / f"{module}.py").write_text(PLUGIN_MODULE)


@pytest.fixture
def plugin_root(tmp_path, monkeypatch) -> Path:
    """A folder on sys.path for this test only; modules imported from it are forgotten afterwards."""
    root = tmp_path / "site"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    before = set(sys.modules)
    yield root
    for name in set(sys.modules) - before:
        if name.startswith("ts_plugin_"):
            del sys.modules[name]


def test_local_is_built_in_and_the_default() -> None:
    factories = get_scheduler_factories()
    assert next(iter(factories)) == "local"
    assert get_default_scheduler_name() == "local"
    sched = get_scheduler_factory("local")("session", unused_kwarg=1)
    assert isinstance(sched, LocalScheduler) and sched.session_name == "session" and sched.backend == "local"


def test_unknown_scheduler_suggests_a_name() -> None:
    with pytest.raises(specs.UnknownSchedulerException, match=r"Unknown scheduler: 'locl'\. Did you mean 'local'\?"):
        get_scheduler_factory("locl")
    with pytest.raises(specs.UnknownSchedulerException, match="Registered schedulers: local"):
        get_scheduler_factory("kubernetes-but-not-installed")


def test_third_party_backend_plugs_in(plugin_root: Path) -> None:
    install_plugin(plugin_root, "ts-plugin-echo", {"zecho": "ts_plugin_echo:create_scheduler",
                                                   "echo": "ts_plugin_echo:create_scheduler"}, "ts_plugin_echo")
    factories = get_scheduler_factories()
    names = list(factories)
    builtin = [n for n in names if is_own_dist(factories[n].entry_point.dist)]  # type: ignore[attr-defined]
    assert builtin[0] == "local" and {"docker", "kubernetes"} <= set(builtin)  # local, the default, leads
    assert names[len(builtin):][:2] == ["echo", "zecho"]  # built-ins first, then plug-ins by name
    assert get_default_scheduler_name() == "local"
    sched = get_scheduler_factory("echo")("s", flag=True)
    assert isinstance(sched, Scheduler) and sched.session_name == "s"
    assert sched.submit(specs.AppDef("hi"), {}) == "echo-hi"
    assert set(get_schedulers("s")) >= {"local", "echo", "zecho"}


def test_plugins_are_imported_only_when_used(plugin_root: Path) -> None:
    install_plugin(plugin_root, "ts-plugin-broken", {"broken": "ts_plugin_missing:create_scheduler"})
    factories = get_scheduler_factories()
    assert "broken" in factories
    assert isinstance(factories["local"]("s"), LocalScheduler)
    with pytest.raises(ModuleNotFoundError):
        factories["broken"]("s")


def test_two_providers_of_one_name_is_an_error_naming_both(plugin_root: Path) -> None:
    install_plugin(plugin_root, "ts-plugin-rogue", {"local": "ts_plugin_rogue:create_scheduler"})
    with pytest.raises(DuplicateSchedulerError) as err:
        get_scheduler_factories()
    message = str(err.value)
    assert "'local'" in message
    assert "torchspec-cli (torchspec.schedulers.local:create_scheduler)" in message
    assert "ts-plugin-rogue (ts_plugin_rogue:create_scheduler)" in message


def test_the_plugin_is_gone_after_its_test() -> None:
    assert "echo" not in get_scheduler_factories()


def test_the_package_imports_without_backend_sdks() -> None:
    # Only the local scheduler is built in; neither docker nor kubernetes may load on import.
    code = (
        "import sys, torchspec.schedulers, torchspec.schedulers.local.scheduler;"
        "print([m for m in ('docker', 'kubernetes') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


#: the example plug-in, as `torchspec new scheduler example` writes it (tests/test_scaffold.py installs it with pip
#: and drives every command through it)
EXAMPLE_BACKEND = Path(__file__).resolve().parent.parent / "plugins" / "torchspec-example"


def test_every_backend_is_a_package_of_the_same_shape() -> None:
    """Where X lives for backend Y has one answer: the same file names in every backend, the example's too."""
    import ast

    import torchspec.schedulers as schedulers

    root = Path(schedulers.__file__).parent
    packages = [p for p in root.iterdir() if (p / "__init__.py").exists()] + [EXAMPLE_BACKEND / "torchspec_example"]
    assert {p.name for p in packages} >= {"local", "docker", "kubernetes", "slurm", "torchspec_example"}
    for package in packages:
        files = {p.name for p in package.glob("*.py")}
        assert {"__init__.py", "options.py", "translate.py", "scheduler.py"} <= files, package
        assert files & {"states.py", "labels.py"}, package
        tree = ast.parse((package / "__init__.py").read_text())
        defined = [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
        assert defined == ["create_scheduler"], (package, defined)


def test_the_names_the_single_file_backends_exported_still_import() -> None:
    """Code that imported ``torchspec.schedulers.local.LocalScheduler`` keeps working, without the package
    importing its modules (or an SDK) before a name is asked for."""
    import subprocess

    code = (
        "import sys\n"
        "from torchspec.schedulers.local import LocalScheduler, app_to_request, default_state_dir\n"
        "assert 'torchspec.schedulers.docker.scheduler' not in sys.modules\n"
        "from torchspec.schedulers.docker import DockerScheduler, role_to_containers\n"
        "from torchspec.schedulers.kubernetes import KubernetesScheduler, validate_manifests\n"
        "from torchspec.schedulers.slurm import SlurmScheduler, render_script\n"
        "assert not any(m.split('.')[0] in ('docker', 'kubernetes') for m in sys.modules)\n"
        "import torchspec.schedulers.local as local\n"
        "try:\n    local.nope\nexcept AttributeError as e:\n    print(e)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0 and "has no attribute 'nope'" in r.stdout, r.stderr


def test_a_scheduler_registered_twice_is_a_usage_error_on_every_command(plugin_root: Path, tmp_path: Path) -> None:
    import os
    import subprocess

    install_plugin(plugin_root, "ts-plugin-rogue", {"local": "ts_plugin_rogue:create_scheduler"})
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plugin_root), os.environ.get("PYTHONPATH", "")])}
    for args in (["submit", "utils.echo"], ["list"], ["status", "local://s/app"], ["lint", "--scheduler", "local", "."]):
        r = subprocess.run([sys.executable, "-m", "torchspec", *args], capture_output=True, text=True, env=env,
                           cwd=tmp_path)
        assert r.returncode == 2 and "registered twice" in r.stderr and "uninstall one" in r.stderr, (args, r.stderr)
