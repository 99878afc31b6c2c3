"""The GitHub Action (action.yml) runs: its own step scripts, from a folder of their own, against a real git
repository, as a fork's pull request too.

Each step of the composite action is run as GitHub's runner runs it: the action's folder apart from the
repository (``_actions/OWNER/torchspec/REF``, as the runner keeps it), ``bash --noprofile --norc -eo
pipefail`` in the checkout, ``$RUNNER_TEMP``, ``$GITHUB_ENV`` and ``$GITHUB_PATH`` read back between
steps, ``$GITHUB_STEP_SUMMARY``, the event's payload at ``$GITHUB_EVENT_PATH``, the step's ``if:`` and its
``env`` with the ``${{ }}`` expressions filled in, stopping at the first step that fails. The one ``uses:``
step (actions/setup-python) is the runner's business: the ``python3`` on PATH stands in for it. pip installs
from a folder of wheels (the run's wheel, its dependencies made from this interpreter's copies: no index is
reachable), and ``gh`` is a stand-in that records what it was asked and answers as GitHub would (or refuses,
as it does a token that cannot write). So a change to the CLI that breaks the action fails here, not in
someone's pull request.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import stat
import subprocess
import sys
from typing import Any, Dict, Optional

import pytest
import yaml

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent / "gitops"))
from git_repo import GitRepo  # noqa: E402

import wheel_support  # noqa: E402
from torchspec.version import __version__  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
ACTION = yaml.safe_load((ROOT / "action.yml").read_text())
MARKER = "<!-- torchspec-diff -->"
#: the ref a workflow names the action by for this version's releases (`uses: OWNER/torchspec@v0`)
MAJOR_REF = f"v{__version__.split('.')[0]}"

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="the action's steps are bash")

#: ``gh``: each call appended to $GH_CALLS; the comment listing answers $GH_COMMENTS' ids; with
#: GH_REFUSE=1, a write answers as GitHub does a token that cannot write
FAKE_GH = """#!/bin/bash
printf '%s\n' "$*" >> "$GH_CALLS"
case " $* " in
  *" -X "*) if [ "${GH_REFUSE:-}" = 1 ]; then echo "HTTP 403: Resource not accessible by integration" >&2; exit 1; fi ;;
  *) cat "${GH_COMMENTS:-/dev/null}" ;;
esac
"""


def spec(name: str, args: list[str], replicas: int = 1) -> str:
    return yaml.safe_dump({"name": name, "roles": [{"name": "main", "image": "ghcr.io/acme/trainer:1.4",
                                                    "entrypoint": "python", "args": args,
                                                    "num_replicas": replicas}]}, sort_keys=False)


def fork_event(tmp: pathlib.Path, fork: bool = True) -> pathlib.Path:
    """A pull_request event's payload: number 7, from a fork (another repository) or from a branch."""
    head = "someone/jobs" if fork else "acme/jobs"
    event = {"action": "synchronize", "number": 7, "repository": {"full_name": "acme/jobs"},
             "pull_request": {"number": 7, "head": {"ref": "tune", "repo": {"full_name": head, "fork": fork}},
                              "base": {"ref": "main", "repo": {"full_name": "acme/jobs"}}}}
    path = tmp / "event.json"
    path.write_text(json.dumps(event))
    return path


def run_action(repo: GitRepo, tmp: pathlib.Path, ref: str = "main", token: str = "", event: Optional[pathlib.Path]
               = None, env: Optional[Dict[str, str]] = None, **inputs: str) -> dict[str, Any]:
    """Every step GitHub would run, in order; step id -> its completed process, or None for the ``uses:`` step
    (stopping at the first failure). Inputs the test does not give take their defaults, but ``install``
    (``"false"``: the torchspec the tests run, first on PATH), as with ``install: false``."""
    action_dir = tmp / "_actions" / "acme" / "torchspec" / ref  # the action, apart from the repository
    action_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "action.yml", action_dir / "action.yml")
    contexts = {"github.action_path": str(action_dir), "github.action_ref": ref, "github.token": token,
                "steps.python.outputs.python-path": ""}
    values = {"install": "false"}
    values.update(inputs)
    for name, declared in ACTION["inputs"].items():
        values.setdefault(name, _fill(str(declared.get("default", "")), {}, contexts))
    temp = tmp / "runner-temp"
    temp.mkdir(exist_ok=True)
    files = {name: tmp / name.lower() for name in ("GITHUB_ENV", "GITHUB_PATH", "GITHUB_STEP_SUMMARY", "GH_CALLS")}
    for path in files.values():
        path.write_text("")
    fake_bin = tmp / "fake-bin"
    fake_bin.mkdir(exist_ok=True)
    (fake_bin / "gh").write_text(FAKE_GH)
    (fake_bin / "gh").chmod(0o755 | stat.S_IXUSR)
    base_env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "FORCE_COLOR", "PYTHONPATH"))}
    base_env.update(RUNNER_TEMP=str(temp), GITHUB_BASE_REF="main", GITHUB_REPOSITORY="acme/jobs", NO_COLOR="1",
                    GITHUB_EVENT_NAME="pull_request" if event else "push", **{k: str(v) for k, v in files.items()},
                    PATH=os.pathsep.join([str(fake_bin), str(pathlib.Path(sys.executable).parent),
                                          os.environ["PATH"]]))
    if event is not None:
        base_env["GITHUB_EVENT_PATH"] = str(event)
    base_env.update(env or {})
    done: dict[str, Any] = {}
    for step in ACTION["runs"]["steps"]:
        if not _condition(step.get("if", ""), values):
            continue
        if "uses" in step:
            done[step["id"]] = None  # the runner's own (setup-python): the python3 on PATH stands in
            continue
        step_env = {k: _fill(str(v), values, contexts) for k, v in (step.get("env") or {}).items()}
        exported = dict(line.split("=", 1) for line in files["GITHUB_ENV"].read_text().splitlines() if "=" in line)
        added = [line for line in reversed(files["GITHUB_PATH"].read_text().splitlines()) if line]
        path = os.pathsep.join([*added, base_env["PATH"]])
        script = tmp / f"step-{step['id']}.sh"
        script.write_text(step["run"])
        r = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], cwd=repo.root,
                           env={**base_env, **exported, **step_env, "PATH": path}, capture_output=True, text=True,
                           timeout=300)
        done[step["id"]] = r
        if r.returncode != 0:
            break
    return done


def _fill(value: str, inputs: dict[str, str], contexts: dict[str, str]) -> str:
    """``${{ inputs.NAME }}`` and the contexts the runner gives (``github.action_path``...) filled in; any
    other expression fails the test: the runner would give it a value the test does not know."""
    def one(match: re.Match[str]) -> str:
        expr = match.group(1).strip()
        if expr.startswith("inputs."):
            return inputs[expr.removeprefix("inputs.")]
        assert expr in contexts, f"a step uses {expr}, which the test does not give"
        return contexts[expr]
    return re.sub(r"\$\{\{(.*?)\}\}", one, value)


def _condition(expr: str, inputs: dict[str, str]) -> bool:
    """A step's ``if:``: comparisons of inputs with literals, joined by ``&&`` (what action.yml uses)."""
    if not expr:
        return True
    result = True
    for part in expr.split("&&"):
        match = re.fullmatch(r"\s*inputs\.([\w-]+)\s*(==|!=)\s*'([^']*)'\s*", part)
        assert match, f"the test cannot evaluate `if: {expr}`"
        equal = inputs[match.group(1)] == match.group(3)
        result = result and (equal if match.group(2) == "==" else not equal)
    return result


@pytest.fixture
def pull_request(tmp_path: pathlib.Path) -> GitRepo:
    """main: two jobs; the branch: train's args and replicas edited, a broken spec added, a workflow file."""
    repo = GitRepo(tmp_path / "repo")
    repo.write({"jobs/train.yaml": spec("train", ["-m", "train", "--lr", "0.1"]),
                "jobs/eval.yaml": spec("eval", ["-m", "eval"]), "README.md": "jobs\n"})
    repo.commit("two jobs")
    repo.git("update-ref", "refs/remotes/origin/main", "main")
    repo.git("checkout", "-q", "-b", "tune")
    repo.write({"jobs/train.yaml": spec("train", ["-m", "train", "--lr", "0.05"], replicas=4),
                "jobs/broken.yaml": spec("broken", ["x"]).replace("num_replicas: 1", "num_replicas: many"),
                ".github/workflows/ci.yml": "on: push\njobs: {}\n"})
    repo.commit("tune train")
    return repo


def test_the_steps_are_plain_commands() -> None:
    """Every step is a bash script reading its inputs from the environment, but setup-python, which gives the
    action a Python of its own without changing the caller's."""
    steps = ACTION["runs"]["steps"]
    assert ACTION["runs"]["using"] == "composite" and [s["id"] for s in steps] == [
        "python", "install", "changed", "lint", "diff", "body", "comment", "result"]
    setup, *scripts = steps
    assert setup["uses"].startswith("actions/setup-python@") and setup["with"]["update-environment"] is False
    for step in scripts:
        assert step["shell"] == "bash" and "${{" not in step["run"] and "uses" not in step, step["id"]


def test_a_pull_request_gets_annotations_sarif_and_the_comment_body(pull_request: GitRepo, tmp_path: pathlib.Path,
                                                                     ) -> None:
    done = run_action(pull_request, tmp_path, paths="jobs", sarif="out/torchspec.sarif")
    assert done["changed"].stdout.splitlines()[1:] == ["  jobs/broken.yaml", "  jobs/train.yaml"]
    annotations = done["lint"].stdout
    assert annotations.startswith("::error file=jobs/broken.yaml,line=") and "train.yaml" not in annotations
    sarif = json.loads((pull_request.root / "out" / "torchspec.sarif").read_text())
    results = sarif["runs"][0]["results"]
    assert {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in results} == {"jobs/broken.yaml"}

    body = (tmp_path / "runner-temp" / "torchspec-comment.md").read_text()
    assert body.startswith(MARKER + "\n### torchspec diff against `")
    assert "jobs/train.yaml" in body and "roles.main.num_replicas: changed" in body and '"0.05"' in body
    assert "jobs/eval.yaml" not in body
    result = done["result"]
    assert result.returncode == 1 and "::error title=torchspec lint::" in result.stdout


def test_a_clean_pull_request_passes(pull_request: GitRepo, tmp_path: pathlib.Path) -> None:
    (pull_request.root / "jobs" / "broken.yaml").unlink()
    pull_request.commit("drop the broken spec")
    done = run_action(pull_request, tmp_path)  # the defaults: the whole repository, torchspec.sarif
    assert [r.returncode for r in done.values()] == [0] * len(done) and "result" in done
    assert json.loads((pull_request.root / "torchspec.sarif").read_text())["runs"][0]["results"] == []
    assert "1 file changes what runs" in (tmp_path / "runner-temp" / "torchspec-comment.md").read_text()


def test_no_spec_changed_still_writes_sarif_and_a_comment(pull_request: GitRepo, tmp_path: pathlib.Path) -> None:
    pull_request.git("checkout", "-q", "main")
    pull_request.write({"README.md": "more\n"})
    pull_request.commit("docs only")
    done = run_action(pull_request, tmp_path, base="main~1")
    assert done["result"].returncode == 0
    assert json.loads((pull_request.root / "torchspec.sarif").read_text())["runs"][0]["results"] == []
    assert "No change in what runs" in (tmp_path / "runner-temp" / "torchspec-comment.md").read_text()


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """The run's wheel and its dependencies as wheels: what pip finds instead of an index."""
    wheel = wheel_support.built_dists(tmp_path_factory)["wheel"]
    folder = tmp_path_factory.mktemp("wheels")
    shutil.copy(wheel, folder / wheel.name)
    return wheel_support.wheelhouse(folder, wheel_support.closure(wheel_support.wheel_requirements(wheel)))


@pytest.mark.skipif(not wheel_support.setuptools_new_enough(), reason="building needs setuptools >= 77 installed")
def test_a_fork_pull_request_installs_the_release_and_reports_to_the_summary(
        pull_request: GitRepo, tmp_path: pathlib.Path, wheels: pathlib.Path) -> None:
    """@v0: the newest 0.x release, into a venv of the action's own; the fork's token cannot write, so no
    comment is tried and the summary has the report; the lint's errors alone fail the job."""
    env = {"PIP_FIND_LINKS": str(wheels), "PIP_NO_INDEX": "1", "PIP_NO_COMPILE": "1", "PIP_CONFIG_FILE": os.devnull}
    done = run_action(pull_request, tmp_path, ref=MAJOR_REF, event=fork_event(tmp_path), env=env, paths="jobs",
                      install="true")
    assert done["python"] is None  # setup-python: the runner's
    install = done["install"]
    assert install.returncode == 0, install.stdout + install.stderr
    major = int(MAJOR_REF[1:])
    assert install.stdout.splitlines()[-1] == f"installed torchspec-cli>={major},<{major + 1}: torchspec {__version__}"
    venv_bin = tmp_path / "runner-temp" / "torchspec-venv" / "bin"
    assert (tmp_path / "github_path").read_text().splitlines() == [str(venv_bin)]
    assert "::error file=jobs/broken.yaml,line=" in done["lint"].stdout

    comment = done["comment"]
    assert comment.returncode == 0 and "::notice title=torchspec::no comment: a pull request from a fork" in \
        comment.stdout
    assert (tmp_path / "gh_calls").read_text() == ""  # GitHub was not asked
    summary = (tmp_path / "github_step_summary").read_text()
    assert summary.startswith("### torchspec diff against `") and "roles.main.num_replicas: changed" in summary
    assert summary.endswith("**torchspec lint**: the changed spec files have errors (see the annotations)\n")
    assert done["result"].returncode == 1  # the lint's errors, and nothing else, fail the job


def test_a_token_that_cannot_write_does_not_fail_a_clean_pull_request(pull_request: GitRepo,
                                                                       tmp_path: pathlib.Path) -> None:
    """A branch of the repository itself, but a read-only token (a Dependabot pull request, a workflow's
    permissions): GitHub refuses the comment, the step warns, the job passes on the lint."""
    (pull_request.root / "jobs" / "broken.yaml").unlink()
    pull_request.commit("drop the broken spec")
    done = run_action(pull_request, tmp_path, token="ghs_readonly", event=fork_event(tmp_path, fork=False),
                      env={"GH_REFUSE": "1"})
    calls = (tmp_path / "gh_calls").read_text().splitlines()
    assert calls[0] == ("api --paginate repos/acme/jobs/issues/7/comments --jq .[] | select(.body | "
                        'startswith("<!-- torchspec-diff -->")) | .id')
    assert calls[1].startswith("api -X POST repos/acme/jobs/issues/7/comments -F body=@") and len(calls) == 2
    comment = done["comment"]
    assert comment.returncode == 0 and "::warning title=torchspec::could not post the comment" in comment.stdout
    assert "1 file changes what runs" in (tmp_path / "github_step_summary").read_text()
    assert [r.returncode for r in done.values()] == [0] * len(done) and "result" in done


def test_a_writable_token_updates_the_one_comment(pull_request: GitRepo, tmp_path: pathlib.Path) -> None:
    comments = tmp_path / "comments"
    comments.write_text("4242\n")  # the comment an earlier push made
    done = run_action(pull_request, tmp_path, token="ghs_write", event=fork_event(tmp_path, fork=False),
                      env={"GH_COMMENTS": str(comments)})
    calls = (tmp_path / "gh_calls").read_text().splitlines()
    assert calls[1] == f"api -X PATCH repos/acme/jobs/issues/comments/4242 -F body=@{tmp_path}/runner-temp/" \
        "torchspec-comment.md" and len(calls) == 2
    assert done["comment"].returncode == 0 and "::warning" not in done["comment"].stdout
    assert done["result"].returncode == 1  # the broken spec


#: stands in for the runner's python3 in the install step: makes the venv's python (itself) and torchspec, and
#: says what pip was asked to install
FAKE_PYTHON = """#!/bin/bash
case "$1 $2" in
  "-m venv") mkdir -p "$3/bin" && cp "$0" "$3/bin/python"
             printf '#!/bin/sh\necho "torchspec X"\n' > "$3/bin/torchspec" && chmod +x "$3/bin/torchspec" ;;
  "-m pip") echo "pip: ${*: -1}" ;;
esac
"""


@pytest.mark.parametrize(("ref", "inputs", "wanted"), [
    ("v1", {}, "torchspec-cli>=1,<2"),
    ("v0", {}, "torchspec-cli>=0,<1"),
    ("v1.2", {}, "torchspec-cli>=1.2,<1.3"),
    ("v1.2.3", {}, "torchspec-cli==1.2.3"),
    ("v2.0.0rc1", {}, "torchspec-cli==2.0.0rc1"),
    ("main", {}, "ACTION_PATH"),
    ("0123456789abcdef0123456789abcdef01234567", {}, "ACTION_PATH"),
    ("v1", {"version": "1.4.0"}, "torchspec-cli==1.4.0"),
    ("v1", {"version": "1.4.0", "package": "torchspec-cli[kubernetes]==1.4.1"}, "torchspec-cli[kubernetes]==1.4.1"),
])
def test_the_ref_names_the_release_installed(ref: str, inputs: Dict[str, str], wanted: str, tmp_path: pathlib.Path,
                                             ) -> None:
    """The tag scheme: @v1 the newest 1.x, @v1.2 the newest 1.2.x, @v1.2.3 that release; a branch or commit
    installs the action's own source; the version and package inputs win."""
    fake = tmp_path / "python3"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(0o755)
    install = next(step for step in ACTION["runs"]["steps"] if step["id"] == "install")
    script = tmp_path / "install.sh"
    script.write_text(install["run"])
    action_path = str(tmp_path / "_actions" / "acme" / "torchspec" / ref)
    values = {"version": "", "package": "", **inputs}
    contexts = {"github.action_path": action_path, "github.action_ref": ref, "steps.python.outputs.python-path": ""}
    env = {k: _fill(str(v), values, contexts) for k, v in install["env"].items()}
    (tmp_path / "temp").mkdir()
    r = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], cwd=tmp_path,
                       env={**os.environ, **env, "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}",
                            "RUNNER_TEMP": str(tmp_path / "temp"), "GITHUB_PATH": str(tmp_path / "github_path")},
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    expected = action_path if wanted == "ACTION_PATH" else wanted
    assert r.stdout.splitlines() == [f"pip: {expected}", f"installed {expected}: torchspec X"]


def test_the_release_moves_the_major_and_minor_tags() -> None:
    """`uses: OWNER/torchspec@v1` follows 1.x: each release of X.Y.Z points vX and vX.Y at itself; the release
    workflow starts on X.Y.Z tags only, so moving vX starts nothing."""
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "release.yml").read_text())
    assert workflow[True]["push"]["tags"] == ["v[0-9]+.[0-9]+.[0-9]+*"]
    job = workflow["jobs"]["action-tags"]
    assert job["needs"] == "publish" and job["permissions"]["contents"] == "write"
    text = "\n".join(step.get("run", "") for step in job["steps"])
    assert 'git tag -f "v${major}"' in text and 'git tag -f "v${major}.${minor}"' in text
    assert "git push -f origin" in text
