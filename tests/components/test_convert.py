"""``torchspec convert``: TorchX components become specs that render to the same AppDef, with params; a
``.torchxconfig`` becomes the ``.torchspec.toml`` of the same meaning."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import textwrap
from typing import List

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from torchspec.components.convert import convert_component, convert_torchx_config
from torchspec.components.python import materialize
from torchspec.config import component_defaults, default_component, default_scheduler, load_config, \
    scheduler_cfg
from torchspec.loader import load_app, load_text
from torchspec.specs.convert import dump_app

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "torchx" / "components.py"


def params_of(text: str) -> List[str]:
    import yaml

    return list((yaml.safe_load(text).get("params") or {}))


@pytest.mark.parametrize("function, argv, params", [
    ("echo", [], ["image", "msg", "num_replicas"]),
    ("echo", ["--msg", "{{ not a template }} {% neither %}", "--num_replicas", "3"], ["image", "msg", "num_replicas"]),
    ("trainer", ["--script", "train.py", "--nnodes", "2", "--amp", "True", "--env", "A=1,B=2", "--tags", "x,y",
                 "--", "--epochs", "3"],
     ["image", "lr", "max_retries", "nnodes", "nproc_per_node", "rdzv_port", "script"]),
    ("ps", ["--workers", "3"], ["image", "servers", "workers"]),
])
def test_each_example_converts_to_a_spec_that_renders_the_same(function: str, argv: List[str], params: List[str],
                                                               tmp_path: pathlib.Path) -> None:
    ref = f"{EXAMPLES}:{function}"
    expected = dump_app(materialize(ref, argv))
    text = convert_component(ref, argv)
    assert params_of(text) == params
    path = tmp_path / "converted.yaml"
    path.write_text(text)
    assert dump_app(load_app(str(path))) == expected
    loaded = load_text(text, "converted.yaml")
    assert loaded.ok and not [d for d in loaded.all_diagnostics()], [str(d) for d in loaded.all_diagnostics()]


def test_the_params_are_reusable(tmp_path: pathlib.Path) -> None:
    """The converted spec with other param values renders what the function returns for those values."""
    ref = f"{EXAMPLES}:trainer"
    path = tmp_path / "trainer.yaml"
    path.write_text(convert_component(ref, ["--script", "train.py"]))
    app = load_app(str(path), {"nnodes": "4", "lr": "0.5", "script": "other.py", "rdzv_port": "1234"})
    assert dump_app(app) == dump_app(materialize(ref, ["--script", "other.py", "--nnodes", "4", "--lr", "0.5",
                                                       "--rdzv_port", "1234"]))


def test_a_value_the_function_computes_with_stays_a_plain_value(tmp_path: pathlib.Path) -> None:
    (tmp_path / "comp.py").write_text(textwrap.dedent('''\
        import torchspec.specs as specs

        def double(n: int = 2, name: str = "d") -> specs.AppDef:
            return specs.AppDef(name, [specs.Role("r", image=".", entrypoint="echo", args=[str(n * 2)],
                                                  num_replicas=n * 2)])
        '''))
    ref = f"{tmp_path / 'comp.py'}:double"
    text = convert_component(ref, [])
    assert params_of(text) == ["name"]  # n only shows doubled: it stays a plain value
    assert "num_replicas: 4" in text and "- '4'" in text
    assert dump_app(load_text(text, "x.yaml").documents[0].app) == dump_app(materialize(ref, []))


def test_a_torchxconfig_converts_to_the_same_settings(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("TORCHXCONFIG", raising=False)
    source = tmp_path / "tx"
    source.mkdir()
    (source / ".torchxconfig").write_text((ROOT / "examples" / "torchx" / ".torchxconfig").read_text())
    monkeypatch.chdir(source)  # where TorchX would run, so where its paths start
    before = load_config(str(source))
    target = tmp_path / "ts"
    target.mkdir()
    output = target / ".torchspec.toml"
    output.write_text(convert_torchx_config(".torchxconfig", str(output)))
    after = load_config(str(target))
    assert after.files == [str(target / ".torchspec.toml")]
    assert default_scheduler(after) == default_scheduler(before) == "local"
    assert default_component(after) == default_component(before)
    assert scheduler_cfg(after, "kubernetes") == scheduler_cfg(before, "kubernetes") == {"namespace": "default",
                                                                                 "flavor": "volcano"}
    # the same files: TorchX's paths start at the working folder, the new config's at its own folder
    assert component_defaults(after) == component_defaults(before)
    assert list(component_defaults(after)) == [f"{source / 'examples/torchx/components.py'}:echo"]
    assert 'default_component = "../tx/examples/torchx/components.py:echo"' in output.read_text()


def test_a_torchxconfig_converted_in_its_sub_folder_names_paths_from_there(tmp_path: pathlib.Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The example's paths start at the repository root (where `torchx run` runs); converted inside
    examples/torchx, they are written relative to the new config there, and run options get their types."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
           "TORCHSPEC_HOME": str(tmp_path / "home")}
    env.pop("TORCHXCONFIG", None)
    project = tmp_path / "project"
    shutil.copytree(ROOT / "examples" / "torchx", project / "examples" / "torchx")
    folder = project / "examples" / "torchx"
    r = subprocess.run([sys.executable, "-m", "torchspec", "convert", ".torchxconfig", "--output-file",
                        ".torchspec.toml"], capture_output=True, text=True, env=env, cwd=folder, timeout=120)
    assert r.returncode == 0, r.stderr
    written = tomllib.loads((folder / ".torchspec.toml").read_text())
    assert written["cli"]["default_component"] == "components.py:echo"
    assert written["scheduler"]["local"]["use_cwd"] is True  # a bool, as the run option is
    assert written["scheduler"]["kubernetes"] == {"namespace": "default", "flavor": "volcano"}
    assert list(written["component"]) == ["components.py:echo"]
    monkeypatch.chdir(tmp_path)  # anchored to the config's folder, wherever the command runs
    config = load_config(str(folder))
    assert default_component(config) == f"{folder / 'components.py'}:echo"
    dry = subprocess.run([sys.executable, "-m", "torchspec", "dryrun"], capture_output=True, text=True, env=env,
                         cwd=folder, timeout=120)
    assert dry.returncode == 0 and "hello from .torchxconfig" in dry.stdout, dry.stderr


def test_the_cli_writes_the_file_and_never_over_one(tmp_path: pathlib.Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = tmp_path / "echo.yaml"

    def convert(*argv: str) -> "subprocess.CompletedProcess[str]":
        return subprocess.run([sys.executable, "-m", "torchspec", "convert", *argv], capture_output=True, text=True,
                              env=env, cwd=tmp_path, timeout=120)

    done = convert(f"{EXAMPLES}:echo", "--msg", "hi", "-o", str(out))
    assert done.returncode == 0 and out.is_file(), done.stderr
    written = out.read_text()
    again = convert(f"{EXAMPLES}:echo", "--msg", "other", "-o", str(out))
    assert again.returncode == 2 and "nothing was written" in again.stderr and out.read_text() == written
    assert convert(f"{EXAMPLES}:echo", "--msg", "other", "-o", str(out), "--force").returncode == 0
    assert "default: other" in out.read_text()
    lint = subprocess.run([sys.executable, "-m", "torchspec", "lint", str(out)], capture_output=True, text=True,
                          env=env, timeout=120)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    missing = convert(f"{EXAMPLES}:ech")
    assert missing.returncode == 2 and "did you mean 'echo'" in missing.stderr


def test_a_function_that_refuses_the_markers_gives_a_spec_without_params(tmp_path: pathlib.Path) -> None:
    (tmp_path / "comp.py").write_text(textwrap.dedent('''\
        import torchspec.specs as specs

        def picky(name: str = "d") -> specs.AppDef:
            if len(name) > 5:
                raise ValueError("name too long")
            return specs.AppDef(name, [specs.Role("r", image=".", entrypoint="echo", args=[name])])
        '''))
    ref = f"{tmp_path / 'comp.py'}:picky"
    text = convert_component(ref, [])
    assert params_of(text) == []
    assert dump_app(load_text(text, "x.yaml").documents[0].app) == dump_app(materialize(ref, []))


def test_the_convert_commands_of_the_components_page_run_as_written(tmp_path: pathlib.Path) -> None:
    """docs/concepts/components.md's `torchspec convert` block, from the repository root with each -o into a folder of
    the test's own: the spec it writes is submitted as the page says (here a dry run), with -p nnodes=4."""
    page = (ROOT / "docs" / "concepts" / "components.md").read_text()
    block = page.split("**From a component to a spec: `torchspec convert`.**", 1)[1]
    lines = block.split("```bash\n", 1)[1].split("```", 1)[0].splitlines()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    written = {}
    outputs = []
    for line in lines:
        argv = line.split("#", 1)[0].split()
        for flag in set(argv) & {"--output-file", "-o"}:
            name = argv[argv.index(flag) + 1]
            argv[argv.index(flag) + 1] = written[name] = str(tmp_path / name)
        if argv[:2] == ["torchspec", "submit"]:  # dry run it: torchrun is not here
            argv[1] = "dryrun"
            argv[2:2] = ["-s", "local"]
            argv = [written.get(a, a) for a in argv]
        cwd = ROOT / "examples" / "torchx" if ".torchxconfig" in argv else ROOT
        done = subprocess.run([sys.executable, "-m", *argv], capture_output=True, text=True, env=env, cwd=cwd,
                              timeout=120)
        assert done.returncode == 0, (line, done.stderr)
        outputs.append(done.stdout)
    assert "--nnodes=4" in outputs[1] and "replica(s)" in outputs[1], outputs[1]
    assert "default_scheduler" in pathlib.Path(written[".torchspec.toml"]).read_text()
