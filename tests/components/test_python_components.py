"""File-based Python components (``FILE.py:FUNCTION``), as TorchX users write them.

Through the Runner (``dryrun_component``, ``run_component``) and the CLI (``dryrun``, ``submit``, ``--help``),
every argument type TorchX derives from a signature, the errors a user meets, the conversion of
``torchx.specs`` objects, and the safety rule: lint and diff never import such a file.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap
from typing import Any, Dict, List, Optional

import pytest

from torchspec.components.python import ComponentError, decode, materialize, parse_docstring
from torchspec.errors import UsageError
from torchspec.runner import get_runner
from torchspec.specs import AppDef, RetryPolicy

COMPONENT = textwrap.dedent('''\
    import os
    from typing import Dict, List, Optional

    import torchspec.specs as specs

    MARKER = os.environ.get("TORCHSPEC_TEST_MARKER")
    if MARKER:  # proves the file was imported (its code ran)
        open(MARKER, "w").close()


    def trainer(msg: str, *script_args: str, replicas: int = 2, lr: float = 0.1, debug: bool = False,
                tags: Optional[List[str]] = None, env: Optional[Dict[str, str]] = None,
                sizes: Optional[List[int]] = None, j: str = "1x1") -> specs.AppDef:
        """Echo a message from each replica.

        Args:
            msg: what to say
            script_args: the rest, after --
            replicas: how many
                replicas to run
            lr: learning rate
            debug: print more
            tags: labels to add
            env: extra environment
            sizes: numbers
            j: nodes x procs
        """
        args = [msg, f"lr={lr}", f"debug={debug}", f"sizes={sizes}", f"j={j}", *script_args, *(tags or [])]
        return specs.AppDef("echo", [specs.Role("echo", image=".", entrypoint="echo", args=args, env=env or {},
                                                num_replicas=replicas)])


    def keyword(*, name: str = "kw") -> specs.AppDef:
        return specs.AppDef(name, [specs.Role(name, image=".", entrypoint="true")])


    def broken(x: int) -> specs.AppDef:
        return 1 // 0


    def not_an_app() -> specs.AppDef:
        return {"name": "nope"}


    def untyped(x) -> specs.AppDef:
        return specs.AppDef("x", [])


    def kwargs(**rest: str) -> specs.AppDef:
        return specs.AppDef("x", [])
    ''')


@pytest.fixture
def comp(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TORCHSPEC_HOME", str(tmp_path / "home"))
    path = tmp_path / "comp.py"
    path.write_text(COMPONENT)
    return path


def args_of(app: AppDef) -> List[str]:
    return app.roles[0].args


def test_every_argument_type_as_torchx_parses_it(comp: pathlib.Path) -> None:
    app = materialize("comp.py:trainer", ["--msg", "hi", "--replicas", "3", "--lr", "0.5", "--debug", "True",
                                          "--tags", "a,b", "--env", "A=1,2,B=3", "--sizes", "1,2", "-j", "2x4",
                                          "--", "--extra", "x"])
    role = app.roles[0]
    assert role.num_replicas == 3
    assert args_of(app) == ["hi", "lr=0.5", "debug=True", "sizes=[1, 2]", "j=2x4", "--extra", "x", "a", "b"]
    assert role.env == {"A": "1,2", "B": "3"}


def test_defaults_come_from_the_signature_then_the_config(comp: pathlib.Path) -> None:
    assert args_of(materialize("comp.py:trainer", ["--msg", "hi"])) == \
        ["hi", "lr=0.1", "debug=False", "sizes=None", "j=1x1"]
    assert args_of(materialize("comp.py:trainer", ["--msg", "hi"], {"lr": "0.9"}))[1] == "lr=0.9"
    assert materialize("comp.py:keyword", []).name == "kw"
    assert materialize("comp.py:keyword", {"name": "other"}).name == "other"


def test_the_runner_runs_one_and_takes_a_mapping_too(comp: pathlib.Path) -> None:
    runner = get_runner(component_defaults={"comp.py:trainer": {"replicas": "1"}})
    info = runner.dryrun_component(str(comp) + ":trainer", ["--msg", "hello"], "local")
    assert info._app is not None and info._app.roles[0].num_replicas == 2  # the defaults are by the name given
    info = runner.dryrun_component("comp.py:trainer", {"msg": "hello", "tags": ["x", "y"]}, "local")
    assert info._app is not None and info._app.roles[0].num_replicas == 1
    assert args_of(info._app)[-2:] == ["x", "y"]
    handle = runner.run_component("comp.py:trainer", ["--msg", "from python", "--replicas", "1"], "local")
    status = runner.wait(handle, timeout=60)
    assert status is not None and status.state.name == "SUCCEEDED"
    assert "from python" in "".join(runner.log_lines(handle, "echo", 0))


def test_the_docstring_gives_the_description_and_each_arguments_help() -> None:
    def fn(a: int, b: str = "x") -> AppDef:
        """Does things.

        More about it.

        Args:
            a (int): the first
                and only
            b: the second

        Returns:
            an app
        """
        raise AssertionError

    assert parse_docstring(fn) == ("Does things. More about it.", {"a": "the first and only", "b": "the second"})


@pytest.mark.parametrize("value, annotation, expected", [
    ("True", bool, True), ("false", bool, False), ("3", int, 3), ("a,b", List[str], ["a", "b"]),
    ("", List[str], []), ("k=v,k2=v2", Dict[str, str], {"k": "v", "k2": "v2"}),
    ("1=2", Dict[int, int], {1: 2}), (None, Optional[int], None), ("2.5", Optional[float], 2.5),
])
def test_decode(value: Any, annotation: Any, expected: Any) -> None:
    assert decode(value, annotation) == expected


@pytest.mark.parametrize("ref, argv, error, words", [
    ("nope.py:trainer", [], UsageError, ["no such file"]),
    ("comp.py:trainr", ["--msg", "x"], UsageError, ["no function 'trainr'", "did you mean 'trainer'"]),
    ("comp.py:trainer", [], UsageError, ["required", "--msg"]),
    ("comp.py:trainer", ["--msg", "x", "--replicas", "two"], UsageError, ["--replicas", "invalid int"]),
    ("comp.py:trainer", ["--msg", "x", "--sizes", "1,b"], UsageError, ["--sizes"]),
    ("comp.py:trainer", ["--msg", "x", "--bogus", "1"], UsageError, ["unrecognized", "--bogus"]),
    ("comp.py:broken", ["--x", "1"], ComponentError, ["raised an error at line", "ZeroDivisionError"]),
    ("comp.py:not_an_app", [], ComponentError, ["returned dict, not an AppDef"]),
    ("comp.py:untyped", ["--x", "1"], ComponentError, ["'x' has no type annotation"]),
    ("comp.py:kwargs", [], ComponentError, ["**rest"]),
])
def test_bad_input_is_one_clear_error(comp: pathlib.Path, ref: str, argv: List[str], error: type,
                                      words: List[str]) -> None:
    with pytest.raises(error) as e:
        materialize(ref, argv)
    text = f"{e.value} {getattr(e.value, 'hint', '')}"
    assert ref.split(":")[0] in text and all(w in text for w in words), text


def test_a_file_that_does_not_import_says_where(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.py").write_text("x = 1\ny = undefined_name\n")
    with pytest.raises(ComponentError, match=r"importing .*bad.py failed at line 2: NameError"):
        materialize("bad.py:f", [])


def test_torchx_specs_objects_are_converted(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A component that builds with ``torchx.specs`` (here a stand-in package of the same shape: dataclasses
    and enums of the same names) gets torchspec objects back, field by field."""
    pkg = tmp_path / "torchx" / "specs"
    pkg.mkdir(parents=True)
    (tmp_path / "torchx" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text(textwrap.dedent('''\
        import enum
        from dataclasses import dataclass, field
        from typing import Dict, List

        class RetryPolicy(str, enum.Enum):
            REPLICA = "REPLICA"
            APPLICATION = "APPLICATION"

        @dataclass
        class Resource:
            cpu: int
            gpu: int
            memMB: int
            capabilities: Dict[str, object] = field(default_factory=dict)

        @dataclass
        class Role:
            name: str
            image: str
            entrypoint: str = ""
            args: List[str] = field(default_factory=list)
            env: Dict[str, str] = field(default_factory=dict)
            num_replicas: int = 1
            max_retries: int = 0
            retry_policy: RetryPolicy = RetryPolicy.APPLICATION
            resource: Resource = field(default_factory=lambda: Resource(1, 0, 1024))
            port_map: Dict[str, int] = field(default_factory=dict)
            only_in_torchx: str = "dropped"

        @dataclass
        class AppDef:
            name: str
            roles: List[Role] = field(default_factory=list)
            metadata: Dict[str, str] = field(default_factory=dict)
        '''))
    (tmp_path / "tx.py").write_text(textwrap.dedent('''\
        import torchx.specs as specs

        def app(n: int = 2) -> specs.AppDef:
            return specs.AppDef("tx", [specs.Role("w", "img:1", "python", ["-m", "w"], {"A": "1"}, n, 3,
                                                  specs.RetryPolicy.REPLICA, specs.Resource(2, 1, 4096),
                                                  {"http": 8080})])
        '''))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [m for m in sys.modules if m == "torchx" or m.startswith("torchx.")]:
        monkeypatch.delitem(sys.modules, name)
    app = materialize("tx.py:app", ["--n", "4"])
    assert isinstance(app, AppDef)
    role = app.roles[0]
    assert (role.name, role.image, role.entrypoint, role.args, role.env) == ("w", "img:1", "python", ["-m", "w"],
                                                                            {"A": "1"})
    assert (role.num_replicas, role.max_retries, role.retry_policy) == (4, 3, RetryPolicy.REPLICA)
    assert (role.resource.cpu, role.resource.gpu, role.resource.memMB) == (2, 1, 4096)
    assert role.port_map == {"http": 8080}


# ----------------------------------------------------------------------------
# The CLI
# ----------------------------------------------------------------------------


def cli(*argv: str, cwd: pathlib.Path, env: Optional[Dict[str, str]] = None) -> "subprocess.CompletedProcess[str]":
    return subprocess.run([sys.executable, "-m", "torchspec", *argv], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, **(env or {})}, timeout=120)


def test_cli_dryrun_takes_the_components_arguments_after_it(comp: pathlib.Path) -> None:
    done = cli("dryrun", "-s", "local", "comp.py:trainer", "--msg", "hello", "--tags", "a,b", "-p", "lr=0.7", "--",
               "--extra", cwd=comp.parent)
    assert done.returncode == 0, done.stderr
    assert "echo hello lr=0.7 debug=False sizes=None j=1x1 --extra a b" in done.stdout, done.stdout


def test_cli_help_after_the_component_is_its_own(comp: pathlib.Path) -> None:
    done = cli("submit", "comp.py:trainer", "--help", cwd=comp.parent)
    assert done.returncode == 0, done.stderr
    assert "Echo a message from each replica." in done.stdout
    assert "--replicas REPLICAS" in done.stdout and "how many replicas to run (default: 2)" in done.stdout


def test_cli_submit_runs_it_to_the_end(comp: pathlib.Path) -> None:
    done = cli("submit", "comp.py:trainer", "--msg", "from the cli", "--replicas", "1", "--log", cwd=comp.parent)
    assert done.returncode == 0, done.stderr
    assert "from the cli" in done.stderr


@pytest.mark.parametrize("argv, code, words", [
    (["comp.py:trainr"], 2, ["did you mean 'trainer'"]),
    (["comp.py:broken", "--x", "1"], 1, ["ZeroDivisionError", "TORCHSPEC_DEBUG=1"]),
    (["comp.py:trainer", "--msg", "x", "--replicas", "two"], 2, ["invalid int value: 'two'"]),
])
def test_cli_errors_have_exit_codes_and_no_traceback(comp: pathlib.Path, argv: List[str], code: int,
                                                     words: List[str]) -> None:
    done = cli("dryrun", "-s", "local", *argv, cwd=comp.parent)
    assert done.returncode == code, done
    assert "Traceback" not in done.stderr and all(w in done.stderr for w in words), done.stderr


@pytest.mark.parametrize("argv, code, words", [
    (["lint", "comp.py:trainer"], 0, ["1 file passed"]),  # checked from its syntax tree (TS511)
    (["diff", "comp.py:trainer", "comp.py:trainer"], 2, ["is a Python component", "runs no code"]),
])
def test_lint_and_diff_never_import_a_python_component(comp: pathlib.Path, argv: List[str], code: int,
                                                        words: List[str]) -> None:
    marker = comp.parent / "imported"
    done = cli(*argv, cwd=comp.parent, env={"TORCHSPEC_TEST_MARKER": str(marker)})
    assert done.returncode == code, done
    assert all(w in done.stdout + done.stderr for w in words), done
    assert not marker.exists()
    cli("dryrun", "-s", "local", "comp.py:trainer", "--msg", "x", cwd=comp.parent,
        env={"TORCHSPEC_TEST_MARKER": str(marker)})
    assert marker.exists()  # the marker works: dryrun, which the user asked to run it, did import it


def test_the_components_page_example_runs_as_written(tmp_path: pathlib.Path) -> None:
    page = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "concepts" / "components.md").read_text()
    section = page.split("## Python components", 1)[1].split("\n## ", 1)[0]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    (tmp_path / "comp.py").write_text(code)
    commands = section.split("```bash\n", 1)[1].split("```", 1)[0].splitlines()
    for line in commands:
        argv = line.split("#", 1)[0].split()
        if argv[:2] == ["torchspec", "dryrun"] or argv[-1:] == ["--help"]:
            done = cli(*argv[1:], cwd=tmp_path)
            assert done.returncode == 0, (line, done.stderr)
            if argv[1] == "dryrun":
                assert "echo hi --extra a b" in done.stdout and "A=1" in done.stdout, done.stdout
            else:
                assert "how many replicas to run" in done.stdout


def test_lint_lints_a_python_component_only_when_allowed(comp: pathlib.Path) -> None:
    """--allow-python-components (or [lint] allow_python_components) lints the spec `convert` makes of it:
    its code runs then, and -p values are its arguments."""
    marker = comp.parent / "imported"
    env = {"TORCHSPEC_TEST_MARKER": str(marker)}
    done = cli("lint", "--allow-python-components", "-p", "msg=hi", "comp.py:trainer", cwd=comp.parent, env=env)
    assert done.returncode == 0 and "passed" in done.stdout, (done.stdout, done.stderr)
    assert marker.exists()
    (comp.parent / "empty.py").write_text("import torchspec.specs as specs\n\n\n"
                                          "def nothing() -> specs.AppDef:\n    return specs.AppDef('x', [])\n")
    (comp.parent / ".torchspec.toml").write_text("[lint]\nallow_python_components = true\n")
    bad = cli("lint", "empty.py:nothing", cwd=comp.parent)
    assert bad.returncode == 1 and "empty.py:nothing" in bad.stdout, (bad.stdout, bad.stderr)


def test_diff_compares_python_components_only_when_allowed(comp: pathlib.Path) -> None:
    """--allow-python-components (or [diff] allow_python_components): each side is the spec `convert` makes of
    it, -p values its arguments; a change the function makes shows field by field."""
    changed = comp.parent / "comp2.py"
    changed.write_text(COMPONENT.replace('f"lr={lr}"', 'f"rate={lr}"'))
    same = cli("diff", "--allow-python-components", "-p", "msg=hi", "comp.py:trainer", "comp.py:trainer",
               cwd=comp.parent)
    assert same.returncode == 0, (same.stdout, same.stderr)
    done = cli("diff", "--allow-python-components", "-p", "msg=hi", "--format", "json", "comp.py:trainer",
               "comp2.py:trainer", cwd=comp.parent)
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "rate=0.1" in done.stdout and "lr=0.1" in done.stdout, done.stdout
    (comp.parent / ".torchspec.toml").write_text("[diff]\nallow_python_components = true\n")
    assert cli("diff", "-p", "msg=hi", "comp.py:trainer", "comp2.py:trainer", cwd=comp.parent).returncode == 1
    missing = cli("diff", "-p", "msg=hi", "comp.py:trainer", "comp.py:trainr", cwd=comp.parent)
    assert missing.returncode == 2 and "trainer" in missing.stderr and "Traceback" not in missing.stderr, missing


def test_lint_scheduler_checks_an_allowed_python_component(comp: pathlib.Path) -> None:
    """lint --scheduler runs the scheduler's check on the spec a Python component converts to."""
    done = cli("lint", "--allow-python-components", "-p", "msg=hi", "--scheduler", "local", "comp.py:trainer",
               cwd=comp.parent)
    assert done.returncode == 0 and "passed" in done.stdout, (done.stdout, done.stderr)
    docker = cli("lint", "--allow-python-components", "-p", "msg=hi", "--scheduler", "docker", "comp.py:trainer",
                 cwd=comp.parent)
    assert docker.returncode == 1 and "TS6" in docker.stdout, (docker.stdout, docker.stderr)
