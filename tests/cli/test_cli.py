"""The CLI through its real entry point: exit codes, output formats, start-up imports."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXE = pathlib.Path(sys.executable).with_name("torchspec")


def run(*args: str, cwd: str | os.PathLike[str] | None = None, env: dict[str, str] | None = None,
        ) -> subprocess.CompletedProcess[str]:
    command = [str(EXE)] if EXE.exists() else [sys.executable, "-m", "torchspec"]
    full_env = dict(os.environ, NO_COLOR="1", **(env or {}))
    return subprocess.run(command + list(args), capture_output=True, text=True, cwd=cwd or ROOT, env=full_env,
                          timeout=120)


BAD = textwrap.dedent(
    """\
    name: bad
    roles:
      - name: trainer
        image: img
        entrypoint: python
        num_replica: 2
        retry_policy: application
    """
)


@pytest.fixture
def bad(tmp_path) -> str:
    path = tmp_path / "bad.yaml"
    path.write_text(BAD)
    return str(path)


def test_version() -> None:
    from torchspec.version import __version__

    for argv in (["--version"], ["-V"], ["-V", "lint"]):  # the fast path, and click's option
        r = run(*argv)
        assert r.returncode == 0, r.stderr
        lines = r.stdout.splitlines()
        assert lines[0] == f"torchspec {__version__}"  # the first line, as it always was
        assert lines[1].startswith("location: ") and lines[1].endswith("torchspec")
        assert lines[2].startswith(f"python: {sys.version.split()[0]} (")
        assert lines[3].startswith(("source checkout: ", "installed by: ")), lines


def test_lint_examples_clean() -> None:
    r = run("lint", "examples/")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "passed" in r.stdout


def test_lint_bad_file_text_output(bad: str) -> None:
    r = run("lint", bad)
    assert r.returncode == 1
    assert f"{bad}:6:5" in r.stdout
    assert "TS202" in r.stdout and "num_replicas" in r.stdout
    assert f"{bad}:7:19" in r.stdout and "APPLICATION" in r.stdout
    lines = r.stdout.splitlines()
    caret = next(i for i, line in enumerate(lines) if line.strip() == "^")
    assert lines[caret].index("^") == lines[caret - 1].index("num_replica")
    assert "\x1b[" not in r.stdout


def test_lint_json_github_sarif(bad: str) -> None:
    data = json.loads(run("lint", "-f", "json", bad).stdout)
    assert {d["code"] for d in data["diagnostics"]} == {"TS202", "TS204"}
    assert data["diagnostics"][0]["line"] == 6
    gh = run("lint", "--format", "github", bad).stdout
    assert f"::error file={bad},line=6,col=5" in gh
    sarif = json.loads(run("lint", "-f", "sarif", bad).stdout)
    assert sarif["version"] == "2.1.0"
    assert {r["ruleId"] for r in sarif["runs"][0]["results"]} == {"TS202", "TS204"}


def test_lint_output_file(bad: str, tmp_path) -> None:
    out = tmp_path / "report.json"
    r = run("lint", "-f", "json", "-o", str(out), bad)
    assert r.returncode == 1 and json.loads(out.read_text())["summary"]["errors"] == 2


def test_select_ignore_and_config(bad: str, tmp_path) -> None:
    assert run("lint", "--ignore", "TS202,TS204", bad).returncode == 0
    assert run("lint", "--select", "TS2", "--ignore", "unknown-key", bad).returncode == 1
    assert run("lint", "--select", "TS5", bad).returncode == 0
    (tmp_path / ".torchspec.toml").write_text('[lint]\nignore = ["TS2"]\n')
    assert run("lint", bad, cwd=tmp_path).returncode == 0
    r = run("lint", "--ignore", "TS9999", bad)
    assert r.returncode == 2 and "unknown lint code" in r.stderr


def test_strict_makes_warnings_fail(tmp_path) -> None:
    spec = tmp_path / "w.yaml"
    spec.write_text("name: w\nparams: {x: {type: string, default: a}}\nroles: [{name: r, image: i, entrypoint: e}]\n")
    assert run("lint", str(spec)).returncode == 0
    assert run("lint", "--strict", str(spec)).returncode == 1


def test_usage_errors_exit_2(tmp_path) -> None:
    assert run("lint", str(tmp_path / "missing.yaml")).returncode == 2
    r = run("lnt")
    assert r.returncode == 2 and "lint" in r.stderr
    assert run("render", "examples/ddp.yaml", "-p", "nnodes").returncode == 2
    assert run("lint", "--format", "xml").returncode == 2


def test_explain() -> None:
    r = run("lint", "--explain", "TS202")
    assert r.returncode == 0 and "unknown-key" in r.stdout and "How to fix it" in r.stdout
    assert run("lint", "--explain", "unknown-key").stdout == r.stdout
    listing = run("lint", "--explain", "all").stdout
    assert "TS001" in listing and "TS508" in listing
    assert run("lint", "--explain", "TS999").returncode == 2


def test_render_yaml_and_json() -> None:
    import yaml

    r = run("render", "examples/ddp.yaml", "-p", "nnodes=4")
    assert r.returncode == 0, r.stderr
    app = yaml.safe_load(r.stdout)
    assert app["roles"][0]["num_replicas"] == 4
    assert "$${${rank0_env}}:29500" in app["roles"][0]["args"][1]
    j = json.loads(run("render", "examples/ddp.yaml", "-p", "nnodes=3", "-o", "json").stdout)
    assert j["roles"][0]["num_replicas"] == 3


def test_render_output_lints_and_renders_again(tmp_path) -> None:
    r = run("render", "examples/trainer_ps_reader.yaml")
    again = tmp_path / "again.yaml"
    again.write_text(r.stdout)
    assert run("lint", str(again)).returncode == 0
    assert run("render", str(again)).stdout == r.stdout


def test_render_errors_and_env_report(tmp_path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text("name: '{{ env(\"TS_USER\", \"nobody\") }}'\nparams: {n: {type: integer, help: how many}}\n"
                    "roles: [{name: r, image: i, entrypoint: e, num_replicas: '{{ n }}'}]\n")
    r = run("render", str(spec))
    assert r.returncode == 1 and "TS302" in r.stderr and "how many" in r.stderr
    r = run("render", str(spec), "-p", "n=2", "--show-env", env={"TS_USER": "s3cret-value"})
    assert r.returncode == 0 and "name: <value from env(TS_USER)>" in r.stdout, r.stdout
    assert "TS_USER" in r.stderr and "s3cret-value" not in r.stdout + r.stderr
    r = run("render", str(spec), "-p", "n=2", "--reveal-env", env={"TS_USER": "s3cret-value"})
    assert r.returncode == 0 and "name: s3cret-value" in r.stdout


def test_schema_command() -> None:
    r = run("schema")
    assert json.loads(r.stdout) == json.loads((ROOT / "schemas" / "appdef.schema.json").read_text())
    strict = json.loads(run("schema", "--strict").stdout)
    assert "#/$defs/template" not in json.dumps(strict["$defs"]["Role"])


def test_lint_start_up_stays_light(tmp_path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text("name: a\nroles: [{name: r, image: i, entrypoint: e}]\n")
    code = ("import sys\nfrom torchspec.cli.main import main\n"
            f"sys.argv = ['torchspec', 'lint', {str(spec)!r}]\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('rich', 'docker', 'kubernetes', 'jsonschema', 'jinja2', 'torchspec.specs', 'logging',"
            " 'click', 'torchspec.report.sarif') if m in sys.modules))")  # lint PATH alone needs no click
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.stdout.strip().splitlines()[-1] == "[]"


def test_lint_of_paths_alone_reports_as_with_options(tmp_path, bad: str) -> None:
    good = tmp_path / "good.yaml"
    good.write_text("name: a\nroles: [{name: r, image: i, entrypoint: e}]\n")
    for path in (str(good), bad):
        fast, full = run("lint", path), run("lint", "-o", "text", path)
        assert (fast.returncode, fast.stdout, fast.stderr) == (full.returncode, full.stdout, full.stderr)
    assert run("lint", str(tmp_path / "missing.yaml")).returncode == run("lint", "-o", "text",
                                                                         str(tmp_path / "missing.yaml")).returncode


def test_readme_and_ci_run_the_same_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "bash scripts/test" in readme
    assert "bash scripts/test" in ci


def test_pre_commit_hook_entry_skips_non_specs(tmp_path, bad: str) -> None:
    import shlex

    import yaml

    hook, = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert hook["id"] == "torchspec-lint"
    workflow = tmp_path / "ci.yml"
    workflow.write_text("on: push\njobs: {}\n")
    args = shlex.split(hook["entry"])[1:]
    assert run(*args, str(workflow), str(ROOT / "examples" / "hello.yaml")).returncode == 0
    assert run(*args, str(workflow), bad).returncode == 1


def test_lint_show_env(tmp_path) -> None:
    spec = tmp_path / "e.yaml"
    spec.write_text("name: '{{ env(\"TS_TOKEN\", \"x\") }}'\nroles: [{name: r, image: i, entrypoint: e}]\n")
    r = run("lint", "--show-env", str(spec), env={"TS_TOKEN": "secret-value"})
    assert r.returncode == 0 and "TS_TOKEN" in r.stderr and "secret-value" not in r.stderr + r.stdout


def test_lint_of_the_repository_root_skips_json_schemas() -> None:
    r = run("lint")
    assert r.returncode == 0, r.stdout


def test_help_shows_the_exit_codes_of_the_one_table() -> None:
    """--help and the site's exit code page (docs/hooks.py; tests/docs/test_site.py checks it) come from
    ExitCode."""
    from torchspec.exit_codes import ExitCode, help_text

    r = subprocess.run([sys.executable, "-m", "torchspec", "--help"], capture_output=True, text=True, check=True)
    assert all(line.strip() in r.stdout for line in help_text().splitlines())
    assert [int(c) for c in ExitCode] == [0, 1, 2, 3, 4, 5, 6, 7, 124, 130]  # stable: never renumbered


def test_app_picks_one_app_of_a_multi_document_file(tmp_path: pathlib.Path) -> None:
    """--app NAME on render, dryrun and submit; without it the error lists the names; a typo gets a guess."""
    spec = ROOT / "examples" / "multi.yaml"

    def run(*args: str) -> "subprocess.CompletedProcess[str]":
        return subprocess.run([sys.executable, "-m", "torchspec", *args], capture_output=True, text=True,
                              cwd=tmp_path, env={**os.environ, "TORCHSPEC_HOME": str(tmp_path / "home")})

    missing = run("dryrun", "-s", "kubernetes", str(spec))
    assert missing.returncode == 1 and "preprocess-imagenet, train-imagenet" in missing.stderr
    assert "--app NAME" in missing.stderr
    # the CLI's words, with a name to copy, not the Python call's (load_app(..., app=NAME))
    assert "(e.g. --app preprocess-imagenet)" in missing.stderr and "load_app" not in missing.stderr
    picked = run("dryrun", "-s", "kubernetes", str(spec), "--app", "train-imagenet")
    assert picked.returncode == 0 and "app train-imagenet-" in picked.stdout and "preprocess" not in picked.stdout
    typo = run("dryrun", "-s", "kubernetes", str(spec), "--app", "train-imagent")
    assert typo.returncode == 2 and "did you mean 'train-imagenet'?" in typo.stderr
    rendered = run("render", str(spec), "--app", "preprocess-imagenet")
    assert rendered.returncode == 0 and rendered.stdout.startswith("name: preprocess-imagenet")
    assert "train-imagenet" not in rendered.stdout


def test_app_loads_only_the_named_document(tmp_path: pathlib.Path) -> None:
    """A broken neighbour in the same file does not stop the app asked for; asking for it shows its errors."""
    from torchspec.errors import SpecError
    from torchspec.loader import load_app

    spec = tmp_path / "two.yaml"
    spec.write_text("name: good\nroles: [{name: r, image: i, entrypoint: e}]\n---\n"
                    "name: bad\nroles: [{name: r, image: i, entrypoint: e, num_replicas: zero}]\n")
    assert load_app(str(spec), app="good").name == "good"
    with pytest.raises(SpecError):
        load_app(str(spec), app="bad")
    with pytest.raises(SpecError, match="TS2"):  # no --app: the broken document is reported
        load_app(str(spec))


def test_a_config_key_that_is_no_run_option_is_warned_about_once(tmp_path) -> None:
    (tmp_path / ".torchspec.toml").write_text("[scheduler.local]\nbogus = 1\n")
    spec = tmp_path / "s.yaml"
    spec.write_text("name: a\nroles: [{name: r, image: ., entrypoint: 'true'}]\n")
    r = run("dryrun", str(spec), cwd=tmp_path, env={"TORCHSPEC_HOME": str(tmp_path / "home")})
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("`bogus` in [scheduler.local] is not a run option") == 1


@pytest.mark.parametrize("thread", [False, True])
def test_the_executable_ends_at_once_yet_runs_atexit_waits_for_threads_and_flushes(tmp_path, thread: bool) -> None:
    """`torchspec` (program()) skips the interpreter's teardown: what a normal exit does that a user can see
    must still happen, and the exit code must be main()'s."""
    spec = tmp_path / "bad.yaml"
    spec.write_text("name: a\nroles: [{name: r, image: i, entrypoint: e, num_replicas: -1}]\n")
    code = ("import atexit, sys, threading, time\nfrom torchspec.cli.main import program\n"
            "atexit.register(lambda: print('atexit ran', flush=True))\n"
            + ("threading.Thread(target=lambda: (time.sleep(0.2), print('thread done', flush=True))).start()\n"
               if thread else "") +
            f"sys.argv = ['torchspec', 'lint', {str(spec)!r}]\nprogram()\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 1, r.stderr
    assert "TS" in r.stdout and r.stdout.rstrip().endswith("atexit ran")
    assert ("thread done" in r.stdout) == thread
    big = subprocess.run([sys.executable, "-m", "torchspec", "schema"], capture_output=True, text=True)
    assert big.returncode == 0 and json.loads(big.stdout)["$defs"]  # all of it, flushed into a pipe
