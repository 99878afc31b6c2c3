"""The GitHub Action (action.yml) runs: its own step scripts, against a real git repository.

Each step of the composite action is run as GitHub runs it (``bash
--noprofile --norc -eo pipefail``, in the checkout, with ``$RUNNER_TEMP``,
``$GITHUB_ENV`` read back between steps and the step's ``env`` with its
``${{ inputs.* }}`` filled in), except the two that reach the network:
``install`` (pip) and ``comment`` (the GitHub API); the step before the
latter, which builds the comment's body, runs.  So a change to the CLI that
breaks the action fails here, not in someone's pull request.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent / "gitops"))
from git_repo import GitRepo  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
ACTION = yaml.safe_load((ROOT / "action.yml").read_text())
NETWORK_STEPS = {"install", "comment"}
MARKER = "<!-- torchspec-diff -->"

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="the action's steps are bash")


def spec(name: str, args: list[str], replicas: int = 1) -> str:
    return yaml.safe_dump({"name": name, "roles": [{"name": "main", "image": "ghcr.io/acme/trainer:1.4",
                                                    "entrypoint": "python", "args": args,
                                                    "num_replicas": replicas}]}, sort_keys=False)


def run_action(repo: GitRepo, tmp: pathlib.Path, **inputs: str) -> dict[str, Any]:
    """Every step but the network ones; step id -> its completed process (stopping at the first failure)."""
    values = {name: str(spec.get("default", "")) for name, spec in ACTION["inputs"].items()}
    values.update(inputs)
    temp = tmp / "runner-temp"
    temp.mkdir(exist_ok=True)
    github_env = tmp / "github-env"
    github_env.write_text("")
    env = dict(os.environ, RUNNER_TEMP=str(temp), GITHUB_ENV=str(github_env), GITHUB_BASE_REF="main",
               PATH=f"{pathlib.Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", NO_COLOR="1")
    env.pop("FORCE_COLOR", None)
    done: dict[str, Any] = {}
    for step in ACTION["runs"]["steps"]:
        if step["id"] in NETWORK_STEPS:
            continue
        step_env = {k: _fill(str(v), values) for k, v in (step.get("env") or {}).items()}
        exported = dict(line.split("=", 1) for line in github_env.read_text().splitlines() if "=" in line)
        script = tmp / f"step-{step['id']}.sh"
        script.write_text(step["run"])
        r = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], cwd=repo.root,
                           env={**env, **exported, **step_env}, capture_output=True, text=True, timeout=120)
        done[step["id"]] = r
        if r.returncode != 0:
            break
    return done


def _fill(value: str, inputs: dict[str, str]) -> str:
    """``${{ inputs.NAME }}`` filled in; any other expression is one a network step alone may use."""
    def one(match: re.Match[str]) -> str:
        expr = match.group(1).strip()
        assert expr.startswith("inputs."), f"a step the test runs uses {expr}"
        return inputs[expr.removeprefix("inputs.")]
    return re.sub(r"\$\{\{(.*?)\}\}", one, value)


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
    steps = ACTION["runs"]["steps"]
    assert ACTION["runs"]["using"] == "composite" and {s["id"] for s in steps} >= NETWORK_STEPS | {"body"}
    for step in steps:
        assert step["shell"] == "bash" and "${{" not in step["run"], step["id"]
        assert "uses" not in step, step["id"]


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
