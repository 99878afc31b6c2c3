"""``torchspec new scheduler``: what it writes, what it refuses, and that what it writes is a working plug-in.

The slow test installs the package with pip into a virtual environment that
sees this interpreter's packages (torchspec, pytest, setuptools: nothing is
downloaded), runs the package's own tests there untouched, and then drives
every torchspec command through the plug-in from the CLI.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, Iterator, List

import pytest

from torchspec.errors import UsageError
from torchspec.scaffold import create_scheduler_package, render_scheduler_package

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "tests" / "plugins" / "torchspec-example"
HELLO = REPO / "examples" / "hello.yaml"


def committed_files(root: Path) -> Dict[str, bytes]:
    skip = ("__pycache__", ".egg-info", ".pytest_cache")
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not any(part.endswith(skip) for part in p.relative_to(root).parts)}


def test_the_committed_example_is_what_the_scaffold_writes_now(tmp_path: Path) -> None:
    """tests/plugins/torchspec-example is generated: regenerate it (`torchspec new scheduler example DIR`)
    after changing a template, so the example README points to never drifts from the scaffold."""
    written = create_scheduler_package("example", tmp_path / "out")
    assert committed_files(written) == committed_files(EXAMPLE)
    assert {"pyproject.toml", "README.md", "torchspec_example/scheduler.py", "tests/test_example.py"} \
        <= set(committed_files(EXAMPLE))


def swap_name(text: str, name: str, camel: str) -> str:
    """The example's text as the scaffold should write it for ``name``: each of the example's own names (the
    word ``example``, ``torchspec_example``/``torchspec-example``, ``test_example``, ``ExampleScheduler``...)
    with ``name`` (``camel`` in class names); ``examples/`` and other words that hold it are left alone."""
    return re.sub(r"\bexample\b|(?<=torchspec[_-])example|(?<=test_)example|Example(?=Scheduler)",
                  lambda m: camel if m.group(0) == "Example" else name, text)


@pytest.mark.parametrize("name, camel", [("batch_q", "BatchQ"), ("zeta", "Zeta")])
def test_another_name_gets_the_example_with_its_names_swapped(name: str, camel: str) -> None:
    """The expected package derived from the committed example (which the slow test below installs and runs),
    not from the scaffold: only the names differ from one package to another."""
    example = {path: data.decode() for path, data in committed_files(EXAMPLE).items()}
    expected = {swap_name(path, name, camel): swap_name(text, name, camel) for path, text in example.items()}
    assert render_scheduler_package(name) == expected
    assert f"class {camel}Scheduler" in expected[f"torchspec_{name}/scheduler.py"]
    assert "examples/hello.yaml" in expected["README.md"]  # a word that holds the name, left alone


@pytest.mark.parametrize("name", ["example", "batch_q"])
def test_the_package_is_small_and_each_name_is_filled_in(name: str) -> None:
    files = render_scheduler_package(name)
    assert f'{name} = "torchspec_{name}:create_scheduler"' in files["pyproject.toml"]
    assert f'name = "torchspec-{name}"' in files["pyproject.toml"]
    for path, text in files.items():
        assert "{{" not in text and "{%" not in text, path
        if path.endswith(".py"):
            tree = ast.parse(text, path)  # valid Python, and as small as torchspec's own modules must be
            assert text.count("\n") <= 300, path
            long = [n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
                    and (n.end_lineno or 0) - n.lineno + 1 > 80]
            assert long == [], path
    assert "class BatchQScheduler" in render_scheduler_package("batch_q")["torchspec_batch_q/scheduler.py"]


def new(cwd: Path, *args: str) -> "subprocess.CompletedProcess[str]":
    return subprocess.run([sys.executable, "-m", "torchspec", "new", "scheduler", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=60)


def test_the_cli_writes_into_torchspec_name_and_says_what_next(tmp_path: Path) -> None:
    r = new(tmp_path, "batchq")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "torchspec-batchq" / "torchspec_batchq" / "scheduler.py").is_file()
    assert "torchspec-batchq/pyproject.toml" in r.stdout
    assert "pip install -e torchspec-batchq" in r.stdout and "torchspec submit -s batchq" in r.stdout


@pytest.mark.parametrize("args, message", [
    (["local"], "'local' is a built-in scheduler's name"),
    (["kubernetes", "k8s"], "'kubernetes' is a built-in scheduler's name"),
    (["Bad-Name"], "'Bad-Name' cannot name a scheduler"),
    (["9lives"], "'9lives' cannot name a scheduler"),
    (["ok", "full"], "full is there and not an empty folder; nothing was written"),
])
def test_the_cli_refuses_with_exit_2(tmp_path: Path, args: List[str], message: str) -> None:
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "mine.txt").write_text("keep me")
    r = new(tmp_path, *args)
    assert r.returncode == 2 and message in r.stderr, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["full"]  # nothing written
    assert (tmp_path / "full" / "mine.txt").read_text() == "keep me"


def test_an_empty_folder_is_fine_and_the_library_raises_usage_errors(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    assert create_scheduler_package("ok", tmp_path / "empty") == tmp_path / "empty"
    with pytest.raises(UsageError, match="not an empty folder"):
        create_scheduler_package("ok", tmp_path / "empty")


# -- the plug-in installed with pip, driven through every command ------------------------------------------


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dict[str, Path]]:
    """The example package written afresh and installed (editable, offline) into a new virtual environment."""
    root = tmp_path_factory.mktemp("plugin")
    package = create_scheduler_package("example", root / "torchspec-example")
    env_dir = root / "venv"
    # --without-pip: the venv's own pip would bring an old setuptools; this interpreter's pip and setuptools work
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(env_dir)],
                   check=True, timeout=120)
    python = env_dir / "bin" / "python"
    pip = subprocess.run([str(python), "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index",
                          "-q", "-e", str(package)], capture_output=True, text=True, timeout=300)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    yield {"python": python, "package": package, "root": root}


def test_the_packages_own_tests_pass_untouched(venv: Dict[str, Path]) -> None:
    r = subprocess.run([str(venv["python"]), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        str(venv["package"] / "tests")], capture_output=True, text=True, timeout=300,
                       cwd=venv["package"])
    assert r.returncode == 0 and " passed" in r.stdout, r.stdout + r.stderr


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False


class Cli:
    """``python -m torchspec`` of the virtual environment, in a state folder of its own."""

    def __init__(self, python: Path, cwd: Path) -> None:
        self.python, self.cwd = python, cwd
        self.env = {**os.environ, "TORCHSPEC_HOME": str(cwd / "home"), "NO_COLOR": "1"}

    def __call__(self, *args: str, code: int = 0) -> "subprocess.CompletedProcess[str]":
        r = subprocess.run([str(self.python), "-m", "torchspec", *args], capture_output=True, text=True,
                           env=self.env, cwd=self.cwd, timeout=120)
        assert r.returncode == code, (args, r.returncode, r.stdout, r.stderr)
        return r

    def record(self, app_id: str) -> Dict[str, object]:
        path = self.cwd / "home" / "store" / "example" / f"{app_id}.json"
        return json.loads(path.read_text())  # type: ignore[no-any-return]


@pytest.fixture
def cli(venv: Dict[str, Path], tmp_path: Path) -> Cli:
    return Cli(venv["python"], tmp_path)


def test_the_plugin_answers_the_information_commands(cli: Cli) -> None:
    listed = [line.split() for line in cli("schedulers").stdout.splitlines()]
    assert ["example", "logs", "follow_logs", "log_streams", "delete", "labels"] in listed
    runopts = cli("runopts", "example").stdout
    assert "kill_grace_s=KILL_GRACE_S (int, 5)" in runopts and "log_dir" in runopts
    assert "default_scheduler" in cli("config").stdout
    assert "1 file passed" in cli("lint", "--scheduler", "example", str(HELLO)).stdout + \
        cli("lint", "--scheduler", "example", str(HELLO)).stderr
    dry = cli("dryrun", "-s", "example", "-c", "kill_grace_s=2", str(HELLO)).stdout
    assert "greeter/1:" in dry and "TORCHSPEC_RANK0_HOST=localhost" in dry
    typo = cli("dryrun", "-s", "example", "-c", "kill_grace=2", str(HELLO), code=2)
    assert "did you mean 'kill_grace_s'" in typo.stderr
    refused = cli("dryrun", "-s", "example", "-c", "kill_grace_s=-1", str(HELLO), code=2)
    assert "kill_grace_s=-1 must be 0 to 3600" in refused.stderr
    assert not (cli.cwd / "home" / "store" / "example").exists()  # a dry run keeps nothing


def test_an_app_goes_through_every_command(cli: Cli) -> None:
    handle = cli("submit", "-s", "example", str(HELLO)).stdout.strip().splitlines()[-1]
    app_id = handle.rpartition("/")[2]
    assert handle == f"example://torchspec/{app_id}"
    assert cli("wait", handle).returncode == 0
    status = cli("status", app_id).stdout  # the bare id: the store knows it
    assert "SUCCEEDED" in status and "greeter" in status
    logs = cli("logs", handle).stdout
    assert f"greeter/0 hello from app {app_id} replica 0" in logs and "greeter/1 " in logs
    assert sorted(cli("logs", "-f", handle).stdout.splitlines()) == sorted(logs.splitlines())
    (cli.cwd / "slow.yaml").write_text("name: slow\nroles:\n  - {name: main, image: ., entrypoint: sh, "
                                       "args: [-c, 'echo start; sleep 1; echo end >&2']}\n")
    slow = cli("submit", "-s", "example", "slow.yaml").stdout.strip().splitlines()[-1]
    followed = cli("logs", "-f", slow).stdout  # follows until the replica ended, then ends
    assert followed.splitlines() == ["main/0 start", "main/0 end"], followed
    assert cli("logs", "--streams", "stderr", slow).stdout.splitlines() == ["main/0 end"]
    since = cli("logs", "--since", "5m", handle, code=2)
    assert "the example scheduler cannot select log lines by time" in since.stderr
    described = cli("describe", handle).stdout
    assert "name: hello" in described and "TORCHSPEC_JOB_ID" not in described
    assert "TORCHSPEC_JOB_ID: example://torchspec/${app_id}" in cli("describe", "--all", handle).stdout
    assert handle in cli("list", "-s", "example").stdout
    record = cli.record(app_id)
    folder = Path(str(record["folder"]))
    assert folder.is_dir()
    cli("delete", handle)
    assert not folder.exists() and not (cli.cwd / "home" / "store" / "example" / f"{app_id}.json").exists()
    assert handle not in cli("list", "-s", "example").stdout


def test_a_failed_app_and_a_cancelled_one(cli: Cli) -> None:
    (cli.cwd / "bad.yaml").write_text("name: bad\nroles:\n  - {name: main, image: ., entrypoint: sh, "
                                      "args: [-c, 'echo about to fail; exit 7']}\n")
    bad = cli("submit", "-s", "example", "bad.yaml").stdout.strip().splitlines()[-1]
    assert "FAILED" in cli("wait", bad, code=4).stdout  # ExitCode.APP_FAILED
    status = cli("status", bad).stdout
    assert "FAILED" in status and "7" in status
    (cli.cwd / "sleepy.yaml").write_text("name: sleepy\nroles:\n  - {name: main, image: ., entrypoint: sleep, "
                                         "args: ['60'], num_replicas: 2}\n")
    sleepy = cli("submit", "-s", "example", "-c", "kill_grace_s=1", "sleepy.yaml").stdout.strip().splitlines()[-1]
    replicas = cli.record(sleepy.rpartition("/")[2])["replicas"]
    pids = [r["pid"] for r in replicas]  # type: ignore[union-attr]
    assert len(pids) == 2 and all(alive(pid) for pid in pids)
    assert "RUNNING" in cli("status", sleepy).stdout
    cli("cancel", sleepy)
    assert not any(alive(pid) for pid in pids)
    assert "CANCELLED" in cli("status", sleepy).stdout
    cli("wait", sleepy, code=5)  # ExitCode.APP_CANCELLED


def test_apply_finds_what_it_submitted_by_the_labels_the_plugin_keeps(cli: Cli) -> None:
    subprocess.run(["git", "init", "-q", str(cli.cwd)], check=True)
    jobs = cli.cwd / "jobs"
    jobs.mkdir()
    for name in ("a", "b"):
        (jobs / f"{name}.yaml").write_text(f"name: {name}\nroles:\n  - {{name: main, image: ., entrypoint: "
                                           f"echo, args: [{name}]}}\n")
    plan = cli("apply", "jobs", "-s", "example", "--plan", code=1).stdout  # 1: something to do
    assert "jobs/a.yaml" in plan and "jobs/b.yaml" in plan
    cli("apply", "jobs", "-s", "example")
    labelled = cli("list", "-s", "example", "-l", "torchspec.dev/apply-id=jobs/a.yaml").stdout
    assert "example://torchspec/a-" in labelled and "/b-" not in labelled
    again = cli("apply", "jobs", "-s", "example").stdout
    assert "unchanged" in again, again
    cli("apply", "jobs", "-s", "example", "--plan")  # 0: nothing to do
