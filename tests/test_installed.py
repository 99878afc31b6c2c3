"""The wheel, tested as a user has it: installed by pip into a fresh venv, run from a folder outside the clone.

Every other test imports torchspec from the checkout, so a file the wheel lacks, an entry point it does not
register or an import of a package only the test extra brings would pass them all and break every user. Here
nothing of the checkout is on sys.path (no editable install, no PYTHONPATH, the working folder a temporary
one): the commands are the venv's ``torchspec`` script.

Two venvs (tests/wheel_support.py makes them offline, from the one wheel the run builds):

- the base install, the core's dependencies only: lint, render, dryrun on every backend (a dry run needs no
  SDK), a local app submitted, waited for and its logs read, ``new scheduler``, ``convert``; docker and
  kubernetes are not importable there, so none of that needs them;
- the ``ui`` and ``lsp`` extras: the dashboard serves its static files, the language server answers
  ``initialize`` over stdio.
"""

from __future__ import annotations

import http.cookiejar
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import urllib.request
from typing import IO, Dict, Iterator, List, NamedTuple

import pytest
import yaml

import wheel_support
from torchspec.version import DIST_NAME, __version__

ROOT = wheel_support.ROOT

pytestmark = pytest.mark.skipif(not wheel_support.setuptools_new_enough(),
                                reason="building needs setuptools >= 77 installed")

HELLO = (ROOT / "examples" / "hello.yaml").read_text()
#: a spec the container schedulers and ray take (an image, a resource)
TRAIN = yaml.safe_dump({"name": "train", "roles": [{"name": "trainer", "image": "ghcr.io/acme/trainer:1.4",
                                                    "entrypoint": "python", "args": ["-m", "train"],
                                                    "num_replicas": 2, "resource": {"cpu": 1, "memMB": 512}}]})
BAD = "name: bad\nroles:\n  - name: x\n    image: .\n    entrypoint: echo\n    num_replicas: many\n"


class Venv(NamedTuple):
    python: pathlib.Path
    #: the folder commands run in: a temporary one, far from the checkout
    work: pathlib.Path
    env: Dict[str, str]

    def run(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """``torchspec ARGS`` as the venv's user types it."""
        return subprocess.run(["torchspec", *args], cwd=self.work, env=self.env, capture_output=True, text=True,
                              timeout=timeout)

    def python_says(self, code: str) -> str:
        r = subprocess.run([str(self.python), "-c", code], cwd=self.work, env=self.env, capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        return r.stdout.strip()


def _venv(tmp_path_factory: pytest.TempPathFactory, name: str, extras: List[str]) -> Venv:
    wheel = wheel_support.built_dists(tmp_path_factory)["wheel"]
    folder = tmp_path_factory.mktemp(name)
    python = wheel_support.make_venv(folder / "venv", wheel, extras)
    work = folder / "work"
    work.mkdir()
    (work / "hello.yaml").write_text(HELLO)
    (work / "train.yaml").write_text(TRAIN)
    (work / "bad.yaml").write_text(BAD)
    return Venv(python, work, wheel_support.venv_env(python, folder / "home"))


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Venv:
    """The core's dependencies and nothing else."""
    return _venv(tmp_path_factory, "base", [])


@pytest.fixture(scope="module")
def extras(tmp_path_factory: pytest.TempPathFactory) -> Venv:
    return _venv(tmp_path_factory, "extras", ["ui", "lsp"])


def test_the_installed_wheel_is_what_runs(base: Venv) -> None:
    site = base.python_says("import sysconfig; print(sysconfig.get_path('purelib'))")
    where = base.python_says("import json, sys, torchspec; print(torchspec.__file__); print(json.dumps(sys.path))")
    module, path = where.splitlines()
    assert module == f"{site}/torchspec/__init__.py"
    assert not [p for p in json.loads(path) if p and pathlib.Path(p).resolve().is_relative_to(ROOT)]
    assert shutil.which("torchspec", path=base.env["PATH"]) == str(base.python.parent / "torchspec")
    version = base.run("--version").stdout.splitlines()
    assert version[:2] == [f"torchspec {__version__}", f"location: {site}/torchspec"]
    assert version[-1] == f"installed by: pip ({DIST_NAME})"
    # the base install brings no backend SDK
    assert base.python_says("import importlib.util as u; print([m for m in ('docker', 'kubernetes', 'aiohttp', "
                            "'pydantic', 'starlette', 'pygls') if u.find_spec(m)])") == "[]"


@pytest.mark.parametrize("venv", ["base", "extras"])
def test_lint_needs_neither_docker_nor_kubernetes(venv: str, request: pytest.FixtureRequest) -> None:
    env: Venv = request.getfixturevalue(venv)
    good = env.run("lint", "hello.yaml", "train.yaml")
    assert (good.returncode, good.stdout.strip()) == (0, "All 2 files passed"), good.stderr
    bad = env.run("lint", "bad.yaml")
    assert bad.returncode == 1 and "bad.yaml:6:19: error TS201" in bad.stdout, bad.stdout + bad.stderr
    sarif = env.run("lint", "-o", "sarif", "bad.yaml")
    assert json.loads(sarif.stdout)["runs"][0]["results"][0]["ruleId"] == "TS201"


def test_render_and_dryrun_on_every_backend(base: Venv) -> None:
    render = base.run("render", "hello.yaml")
    assert render.returncode == 0 and yaml.safe_load(render.stdout)["roles"][0]["num_replicas"] == 2, render.stderr
    expected = {"local": ("hello.yaml", "local app hello-"), "slurm": ("hello.yaml", "#SBATCH"),
                "docker": ("train.yaml", "ghcr.io/acme/trainer:1.4"), "kubernetes": ("train.yaml", "kind: Job"),
                "ray": ("train.yaml", "submission_id: <train-")}
    for scheduler, (spec, shows) in expected.items():
        r = base.run("dryrun", "-s", scheduler, spec)
        assert r.returncode == 0 and shows in r.stdout, (scheduler, r.stdout, r.stderr)
    listed = base.run("schedulers")
    assert all(name in listed.stdout for name in expected), listed.stdout


def test_a_local_app_runs_and_its_logs_read(base: Venv) -> None:
    submitted = base.run("submit", "-s", "local", "hello.yaml")
    handle = submitted.stdout.strip()
    assert submitted.returncode == 0 and handle.startswith("local://torchspec/hello-"), submitted.stderr
    waited = base.run("wait", handle)
    assert waited.returncode == 0 and "SUCCEEDED" in waited.stdout, waited.stdout + waited.stderr
    logs = base.run("logs", handle)
    app_id = handle.rsplit("/", 1)[1]
    assert sorted(logs.stdout.splitlines()) == [f"greeter/{k} hello from app {app_id} replica {k}" for k in (0, 1)]


def test_new_scheduler_writes_a_package_that_imports(base: Venv) -> None:
    r = base.run("new", "scheduler", "acme", "acme")
    assert r.returncode == 0, r.stderr
    package = base.work / "acme"
    assert (package / "pyproject.toml").is_file() and (package / "tests" / "test_acme.py").is_file()
    # the next step it prints names a spec the package holds: a wheel user has no examples/ of the repository
    step = r.stdout.strip().splitlines()[-1].split()
    assert step[:4] == ["torchspec", "submit", "-s", "acme"] and (base.work / step[-1]).is_file(), r.stdout
    assert base.run("lint", step[-1]).returncode == 0
    # its templates came from the wheel's package data; the package imports against the installed torchspec
    code = "import torchspec_acme; print(torchspec_acme.create_scheduler('s').__class__.__name__)"
    env = {**base.env, "PYTHONPATH": str(package)}
    out = subprocess.run([str(base.python), "-c", code], cwd=base.work, env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and out.stdout.strip().endswith("Scheduler"), out.stderr


def test_convert_a_component_and_a_torchxconfig(base: Venv) -> None:
    for name in ("components.py", ".torchxconfig"):
        shutil.copy(ROOT / "examples" / "torchx" / name, base.work / name)
    r = base.run("convert", "components.py:echo", "--msg", "hi", "--output-file", "echo.yaml")
    assert r.returncode == 0, r.stderr
    linted = base.run("lint", "echo.yaml")
    assert linted.returncode == 0, linted.stdout
    rendered = yaml.safe_load(base.run("render", "echo.yaml").stdout)
    assert rendered["roles"][0]["args"] == ["hi"]
    r = base.run("convert", ".torchxconfig", "--output-file", ".torchspec.toml")
    assert r.returncode == 0 and 'default_scheduler = "local"' in (base.work / ".torchspec.toml").read_text()


@pytest.fixture
def ui_url(extras: Venv) -> Iterator[str]:
    proc = subprocess.Popen(["torchspec", "ui", "--no-browser", "--host", "127.0.0.1", "--port", "0"],
                            cwd=extras.work, env=extras.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/\?token=\S+", url), (url, proc.stderr.read() if proc.stderr
                                                                           and proc.poll() is not None else "")
        yield url
    finally:
        proc.send_signal(signal.SIGINT)  # Ctrl-C
        try:
            # it stops: uvicorn re-raises the interrupt after its shutdown, so the CLI's 130 (interrupted)
            assert proc.wait(15) in (0, 130)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_ui_serves_its_static_files(ui_url: str) -> None:
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
    root, token = ui_url.split("/?")
    # the token, once: a cookie and a redirect to the same URL without it
    with opener.open(f"{root}/static/ui.css?{token}", timeout=15) as answer:
        assert answer.status == 200 and answer.headers["content-type"].startswith("text/css")
        assert answer.read() == (ROOT / "torchspec" / "ui" / "static" / "ui.css").read_bytes()
    with opener.open(f"{root}/static/ui.js", timeout=15) as answer:
        assert answer.status == 200 and b"function" in answer.read()


def _message(body: Dict[str, object]) -> bytes:
    data = json.dumps(body).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(data), data)


def _read_message(stream: IO[bytes]) -> Dict[str, object]:
    """One JSON-RPC message of the base protocol: headers, a blank line, Content-Length bytes of JSON."""
    length = 0
    while (line := stream.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode().partition(":")
        if name.lower() == "content-length":
            length = int(value)
    assert length, "the server closed its output"
    return json.loads(stream.read(length))


def test_lsp_answers_initialize_over_stdio(extras: Venv) -> None:
    proc = subprocess.Popen(["torchspec", "lsp"], cwd=extras.work, env=extras.env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(_message({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                   "params": {"processId": os.getpid(), "rootUri": extras.work.as_uri(),
                                              "capabilities": {}}}))
        proc.stdin.flush()
        answer = _read_message(proc.stdout)
        while "id" not in answer:  # a notification (a log message) may come first
            answer = _read_message(proc.stdout)
        assert answer["id"] == 1 and isinstance(answer.get("result"), dict), answer
        result: Dict[str, object] = answer["result"]  # type: ignore[assignment]
        assert result["serverInfo"]["name"] == "torchspec"  # type: ignore[index]
        assert {"hoverProvider", "completionProvider"} <= set(result["capabilities"])  # type: ignore[arg-type]
        for message in ({"jsonrpc": "2.0", "id": 2, "method": "shutdown"}, {"jsonrpc": "2.0", "method": "exit"}):
            proc.stdin.write(_message(message))
        proc.stdin.close()
        assert proc.wait(15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        assert proc.stderr is not None
        proc.stderr.close()
        proc.stdout.close()
