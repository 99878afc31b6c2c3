"""Built-in components: they lint clean, render, and build what the TorchX components build."""

from __future__ import annotations

import fnmatch
import os
import pathlib
import shlex
from typing import Any, Dict, List, Optional

import pytest

from torchspec import specs
from torchspec.components import COMPONENTS_DIR, ComponentNotFoundError, builtin_name, find_component, list_builtins
from torchspec.errors import SpecError
from torchspec.lint import lint_paths
from torchspec.loader import load_app

ROOT = pathlib.Path(__file__).resolve().parents[2]

#: Params each built-in is rendered with, besides its defaults.
SAMPLES: Dict[str, Dict[str, str]] = {
    "utils.echo": {"msg": "hi there", "num_replicas": "2"},
    "utils.sh": {"script": "echo $1", "args": "a,b"},
    "utils.python": {"m": "http.server", "args": "8080"},
    "dist.ddp": {"j": "2x4", "script": "train.py", "args": '["--lr", "0.1"]'},
}


def render(component: str, /, **params: str) -> specs.AppDef:
    return load_app(find_component(component), params)


# ---------------------------------------------------------------- every built-in


def test_builtins_are_listed_with_descriptions() -> None:
    builtins = list_builtins()
    assert set(builtins) == set(SAMPLES)
    for name, (path, description) in builtins.items():
        assert os.path.isfile(path) and path.startswith(COMPONENTS_DIR)
        assert description and "\n" not in description and "yaml-language-server" not in description, name
        assert builtin_name(path) == name


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_builtin_lints_clean(name: str) -> None:
    result = lint_paths([list_builtins()[name][0]])
    assert result.diagnostics == [], "\n".join(str(d) for d in result.diagnostics)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_builtin_renders_with_defaults_and_with_sample_params(name: str) -> None:
    for params in ({}, SAMPLES[name]):
        app = render(name, **params)
        assert app.roles and all(r.entrypoint and r.num_replicas >= 1 for r in app.roles)
        assert all(r.resource != specs.NULL_RESOURCE for r in app.roles)


def test_shell_helpers_are_identical_copies() -> None:
    """Imports may only come from the spec's own folder, so each folder carries a copy."""
    copies = {p.read_text() for p in pathlib.Path(COMPONENTS_DIR).glob("*/shell.j2")}
    assert len(copies) == 1


def test_package_data_ships_every_component_file() -> None:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["torchspec"]
    package = pathlib.Path(COMPONENTS_DIR).parent
    for path in pathlib.Path(COMPONENTS_DIR).rglob("*"):
        if path.is_file() and path.suffix in (".yaml", ".j2"):
            rel = path.relative_to(package).as_posix()
            assert any(fnmatch.fnmatch(rel, p) for p in patterns), rel


# ---------------------------------------------------------------- finding components


def test_find_component_by_name_and_by_path(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    echo = list_builtins()["utils.echo"][0]
    assert find_component("utils.echo") == echo
    assert find_component(echo) == echo
    # an existing file wins over a built-in of the same name
    monkeypatch.chdir(tmp_path)
    (tmp_path / "utils.echo").write_text("name: mine\nroles: [{name: r, image: i, entrypoint: e}]\n")
    assert find_component("utils.echo") == "utils.echo"


@pytest.mark.parametrize(
    "given, message, hint",
    [
        ("dist.dpp", "unknown component 'dist.dpp'", "did you mean 'dist.ddp'?"),
        ("utils.ech", "unknown component 'utils.ech'", "did you mean 'utils.echo'?"),
        ("nothing.like.it", "unknown component", "built-in components: dist.ddp, utils.echo"),
        ("jobs/missing.yaml", "no such spec file: jobs/missing.yaml", "built-in components:"),
    ],
)
def test_unknown_component(given: str, message: str, hint: str) -> None:
    with pytest.raises(ComponentNotFoundError) as raised:
        find_component(given)
    assert message in raised.value.message
    assert raised.value.hint is not None and hint in raised.value.hint


def test_a_folder_is_not_a_component(tmp_path: pathlib.Path) -> None:
    with pytest.raises(ComponentNotFoundError, match="is a folder"):
        find_component(str(tmp_path) + "/")


# ---------------------------------------------------------------- dist.ddp


def torchx_ddp_command(j: str, script: Optional[str] = None, m: Optional[str] = None, args: List[str] = (),
                       rdzv_port: int = 29500, rdzv_backend: str = "c10d", max_restarts: Optional[int] = None) -> str:
    """The ``bash -c`` command TorchX's dist.ddp builds for these inputs (its algorithm, restated).

    Every word goes through shlex.quote except the multi-node rendezvous
    endpoint, which must reach the shell unquoted so it expands rank 0's host.
    """
    parts = j.split("x")
    nnodes_rep = parts[0] if len(parts) == 2 else "1"
    nproc = parts[-1]
    max_nnodes = int(nnodes_rep.split(":")[-1])
    endpoint = "localhost:0" if max_nnodes == 1 else f"$${{${{rank0_env}}}}:{rdzv_port}"
    words = [shlex.quote(w) for w in ["torchrun", "--rdzv_backend", rdzv_backend, "--rdzv_endpoint"]]
    words.append(endpoint)
    words += [shlex.quote(w) for w in ["--rdzv_id", "${app_id}", "--nnodes", nnodes_rep,
                                        "--nproc_per_node", nproc, "--tee", "3", "--role", ""]]
    if max_restarts is not None:
        words += ["--max_restarts", str(max_restarts)]
    words += [shlex.quote(w) for w in ([script] if script else ["-m", m or ""])]
    words += [shlex.quote(a) for a in args]
    return " ".join(words)


@pytest.mark.parametrize(
    "params, expected",
    [
        ({"j": "2x1", "script": "train.py"},
         "torchrun --rdzv_backend c10d --rdzv_endpoint $${${rank0_env}}:29500 --rdzv_id '${app_id}'"
         " --nnodes 2 --nproc_per_node 1 --tee 3 --role '' train.py"),
        ({"j": "1x4", "script": "train.py"},
         "torchrun --rdzv_backend c10d --rdzv_endpoint localhost:0 --rdzv_id '${app_id}'"
         " --nnodes 1 --nproc_per_node 4 --tee 3 --role '' train.py"),
        ({"j": "2x1", "m": "my_pkg.train"},
         "torchrun --rdzv_backend c10d --rdzv_endpoint $${${rank0_env}}:29500 --rdzv_id '${app_id}'"
         " --nnodes 2 --nproc_per_node 1 --tee 3 --role '' -m my_pkg.train"),
        ({"j": "1x4", "m": "my_pkg.train", "args": '["--lr", "0.1", "two words"]'},
         "torchrun --rdzv_backend c10d --rdzv_endpoint localhost:0 --rdzv_id '${app_id}'"
         " --nnodes 1 --nproc_per_node 4 --tee 3 --role '' -m my_pkg.train --lr 0.1 'two words'"),
    ],
)
def test_ddp_command_line_is_torchx_s(params: Dict[str, str], expected: str) -> None:
    role = render("dist.ddp", **params).roles[0]
    assert role.entrypoint == "bash"
    assert role.args == ["-c", expected]


@pytest.mark.parametrize(
    "j, script, m, args, port",
    [
        ("2x1", "train.py", None, [], 29500),
        ("1x4", "train.py", None, [], 29500),
        ("1x2", None, "a.b.c", ["--x", "it's"], 29500),
        ("4", "dir/main.py", None, ["$HOME", ""], 29500),
        ("1:3x2", None, "m", [], 1234),
        ("16x8", "my-script.py", None, ["--data=/d", "a b"], 29400),
    ],
)
def test_ddp_matches_the_torchx_algorithm(j: str, script: Optional[str], m: Optional[str], args: List[str],
                                          port: int) -> None:
    params: Dict[str, Any] = {"j": j, "args": __import__("json").dumps(args), "rdzv_port": str(port)}
    params.update({"script": script} if script else {"m": m})
    app = render("dist.ddp", **params)
    assert app.roles[0].args[1] == torchx_ddp_command(j, script, m, args, port)


@pytest.mark.parametrize("j, max_restarts", [("1:3x2", 3), ("2x1", 0), ("4", None)])
def test_ddp_max_restarts_as_torchx_passes_it(j: str, max_restarts: Optional[int]) -> None:
    params = {"j": j, "script": "train.py"}
    if max_restarts is not None:
        params["max_restarts"] = str(max_restarts)
    role = render("dist.ddp", **params).roles[0]
    assert role.args[1] == torchx_ddp_command(j, "train.py", max_restarts=max_restarts)


def test_ddp_max_restarts_must_be_a_whole_number() -> None:
    with pytest.raises(SpecError, match="max_restarts_must_be_a_whole_number"):
        render("dist.ddp", script="train.py", max_restarts="three")


def test_ddp_topology_from_j() -> None:
    role = render("dist.ddp", j="2x4", script="train.py").roles[0]
    assert (role.num_replicas, role.min_replicas) == (2, 2)
    role = render("dist.ddp", j="4", script="train.py").roles[0]
    assert (role.num_replicas, role.min_replicas) == (1, 1)
    role = render("dist.ddp", j="1:3x2", script="train.py").roles[0]
    assert (role.num_replicas, role.min_replicas) == (3, 1)
    assert "--nnodes 1:3 " in role.args[1]


def test_ddp_role_and_app_names() -> None:
    app = render("dist.ddp", script="src/train_model.py")
    assert (app.name, app.roles[0].name) == ("train_model", "train_model")
    app = render("dist.ddp", m="my_pkg.trainer.main", name="nightly")
    assert (app.name, app.roles[0].name) == ("nightly", "main")


def test_ddp_resources_env_retries_ports() -> None:
    role = render("dist.ddp", script="t.py").roles[0]
    assert role.resource == specs.Resource(cpu=2, gpu=0, memMB=1024)  # TorchX's defaults
    assert role.env == {"LOGLEVEL": "WARNING"}
    assert role.port_map == {"c10d": 29500} and role.max_retries == 0 and role.image == "."
    role = render("dist.ddp", script="t.py", cpu="8", gpu="2", memMB="4096", env="A=1,B=two",
                  max_retries="3", rdzv_port="1234", image="ghcr.io/me/img:1", j="2x2").roles[0]
    assert role.resource == specs.Resource(cpu=8, gpu=2, memMB=4096)
    assert role.env == {"A": "1", "B": "two"}
    assert role.max_retries == 3 and role.port_map == {"c10d": 1234} and role.image == "ghcr.io/me/img:1"
    assert "--rdzv_endpoint $${${rank0_env}}:1234 " in role.args[1]
    # a named resource wins over cpu/gpu/memMB
    role = render("dist.ddp", script="t.py", h="aws_p3.8xlarge", cpu="1").roles[0]
    assert role.resource == specs.named_resources["aws_p3.8xlarge"]


def test_ddp_rendezvous_is_expanded_by_the_shell_once_the_scheduler_fills_the_macros() -> None:
    role = render("dist.ddp", j="2x1", script="train.py").roles[0]
    filled = specs.macros.Values(img_root="/img", app_id="app-7", replica_id="1", rank0_env="MASTER_ADDR").apply(role)
    words = shlex.split(filled.args[1])
    assert words[words.index("--rdzv_endpoint") + 1] == "${MASTER_ADDR}:29500"
    assert words[words.index("--rdzv_id") + 1] == "app-7"


@pytest.mark.parametrize(
    "params, fragment",
    [
        ({"script": "a.py", "m": "b"}, "give_only_one_of_script_or_m"),
        ({"script": "a.py", "j": "2y4"}, "j_must_look_like"),
        ({"script": "a.py", "j": "1x2x3"}, "j_must_look_like"),
    ],
)
def test_ddp_refuses_contradictions(params: Dict[str, str], fragment: str) -> None:
    with pytest.raises(SpecError) as raised:
        render("dist.ddp", **params)
    assert fragment in str(raised.value)


# ---------------------------------------------------------------- utils


def test_echo() -> None:
    app = render("utils.echo", msg="hello ${replica_id}", num_replicas="3")
    role = app.roles[0]
    assert (app.name, role.entrypoint, role.args, role.num_replicas) == ("echo", "echo", ["hello ${replica_id}"], 3)
    assert role.image == "."
    assert render("utils.echo").roles[0].args == ["hello world"]


def test_sh_joins_args_like_torchx() -> None:
    role = render("utils.sh", args='["ls", "-l", "/tmp/a b", "it\'s"]').roles[0]
    assert role.entrypoint == "sh"
    assert role.args == ["-c", shlex.join(["ls", "-l", "/tmp/a b", "it's"])]


def test_sh_script_takes_args_as_positional_parameters() -> None:
    role = render("utils.sh", script='echo "$1 $2"', args="x,y").roles[0]
    assert role.args == ["-c", 'echo "$1 $2"', "sh", "x", "y"]


@pytest.mark.parametrize(
    "params, args, env",
    [
        ({"m": "pkg.mod", "args": "a,b"}, ["-m", "pkg.mod", "a", "b"], {"HYDRA_MAIN_MODULE": "pkg.mod"}),
        ({"script": "main.py"}, ["main.py"], {}),
        ({"c": "print(1)"}, ["-c", "print(1)"], {}),
    ],
)
def test_python(params: Dict[str, str], args: List[str], env: Dict[str, str]) -> None:
    role = render("utils.python", **params).roles[0]
    assert (role.entrypoint, role.args, role.env) == ("python", args, env)
    assert role.resource == specs.Resource(cpu=1, gpu=0, memMB=1024)


def test_python_refuses_two_entry_points() -> None:
    with pytest.raises(SpecError, match="give_only_one_of_m_script_or_c"):
        render("utils.python", m="a", c="print(1)")
