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
    with pytest.raises(specs.UnknownSchedulerException, match=r"Unknown scheduler: 'locl'\. Did you mean: local\?"):
        get_scheduler_factory("locl")
    with pytest.raises(specs.UnknownSchedulerException, match="Registered schedulers: local"):
        get_scheduler_factory("kubernetes-but-not-installed")


def test_third_party_backend_plugs_in(plugin_root: Path) -> None:
    install_plugin(plugin_root, "ts-plugin-echo", {"zecho": "ts_plugin_echo:create_scheduler",
                                                   "echo": "ts_plugin_echo:create_scheduler"}, "ts_plugin_echo")
    factories = get_scheduler_factories()
    names = list(factories)
    builtin = [n for n in names if factories[n].entry_point.dist.metadata["Name"] == "torchspec"]  # type: ignore[attr-defined]
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
    assert "torchspec (torchspec.schedulers.local:create_scheduler)" in message
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
