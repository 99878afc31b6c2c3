"""``torchspec diff --base`` on a real repository: a base commit on main, a pull-request commit on a branch."""

from __future__ import annotations

import json
import pathlib

import pytest
from git_repo import GitRepo

from torchspec.cli.main import main

SPEC = """name: {name}
roles:
  - name: r
    image: img:1
    entrypoint: python
    args: {args}
    num_replicas: {replicas}
"""


def spec(name: str, args: str = '["-m", "job"]', replicas: int = 1) -> str:
    return SPEC.format(name=name, args=args, replicas=replicas)


BASE = {
    "README.md": "# jobs\n",
    "jobs/train.yaml": spec("train", '["--lr", "0.1"]'),
    "jobs/scale.yaml": spec("scale", replicas=2),
    "jobs/old_name.yaml": spec("moved"),
    "jobs/gone.yaml": spec("gone"),
    "jobs/untouched.yaml": spec("untouched"),
    "jobs/uses_lib.yaml": ('name: uses-lib\nimports: {m: lib/macros.j2}\n'
                           'roles: [{name: r, image: "{{ m.image() }}", entrypoint: run}]\n'),
    # mentions the macro file's name but renders nothing from it: git grep finds it, the loader rules it out
    "jobs/other.yaml": '# not from macros.j2\nname: other\nroles: [{name: r, image: "{{ 1 + 1 }}", entrypoint: run}]\n',
    "jobs/lib/macros.j2": "{% macro image() %}img:1{% endmacro %}",
    "jobs/secret.yaml": ('name: secret\nroles:\n  - name: r\n    image: img\n    entrypoint: echo\n'
                         '    env: {TOKEN: "{{ env(\'TS_DIFF_TOKEN\') }}"}\n'),
    "jobs/reformat.yaml": spec("reformat", '["a", "b"]', 3),
}

PR = {
    "README.md": "# jobs, edited\n",
    "jobs/train.yaml": spec("train", '["--lr", "0.2"]'),
    "jobs/scale.yaml": spec("scale", replicas=4),
    "jobs/lib/macros.j2": "{% macro image() %}img:2{% endmacro %}",
    "jobs/secret.yaml": BASE["jobs/secret.yaml"].replace("TS_DIFF_TOKEN", "TS_DIFF_TOKEN_V2"),
    # the same job, written otherwise: keys reordered, flow style, other quoting
    "jobs/reformat.yaml": ("roles:\n- {num_replicas: 3, entrypoint: 'python', name: r, args: [a, 'b'],\n"
                           "   image: \"img:1\"}\nname: 'reformat'\n"),
}

EXPECTED = {  # path -> (status, old path, changed fields)
    "jobs/train.yaml": ("modified", "jobs/train.yaml", ["roles.r.args"]),
    "jobs/scale.yaml": ("modified", "jobs/scale.yaml", ["roles.r.num_replicas"]),
    "jobs/new_name.yaml": ("renamed", "jobs/old_name.yaml", []),
    "jobs/gone.yaml": ("removed", "jobs/gone.yaml", None),
    "jobs/uses_lib.yaml": ("modified", "jobs/uses_lib.yaml", ["roles.r.image"]),
    "jobs/secret.yaml": ("modified", "jobs/secret.yaml", ["roles.r.env.TOKEN"]),
}
SECRETS = ("old-secret-value-1", "new-secret-value-2")


@pytest.fixture
def pr(repo: GitRepo, monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> GitRepo:
    """The repository on the pull-request branch, checked out, with main as the base."""
    repo.write(BASE)
    repo.commit("base")
    repo.git("checkout", "-q", "-b", "pr")
    repo.write(PR)
    (repo.root / "jobs" / "gone.yaml").unlink()
    (repo.root / "jobs" / "old_name.yaml").rename(repo.root / "jobs" / "new_name.yaml")
    repo.commit("the pull request")
    monkeypatch.chdir(repo.root)
    monkeypatch.setenv("TORCHSPEC_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TS_DIFF_TOKEN", SECRETS[0])
    monkeypatch.setenv("TS_DIFF_TOKEN_V2", SECRETS[1])
    monkeypatch.setenv("NO_COLOR", "1")
    return repo


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exit_:
        main(list(args))
    out = capsys.readouterr()
    assert not any(s in out.out + out.err for s in SECRETS)
    return int(exit_.value.code or 0), out.out


def test_json_names_exactly_the_changes_of_the_pull_request(pr: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(capsys, "diff", "--base", "main", "--format", "json")
    assert code == 1
    report = json.loads(out)
    assert report["version"] == 1 and report["base"] == "main" and report["summary"] == {"changed": 6, "errors": 0}
    files = {f["path"]: f for f in report["files"]}
    assert set(files) == set(EXPECTED)
    for path, (status, old_path, fields) in EXPECTED.items():
        found = files[path]
        assert (found["status"], found["old_path"]) == (status, old_path), path
        changed = [c["field"] for app in found["apps"] for c in app["changes"]]
        if fields is not None:
            assert changed == fields, path
    assert files["jobs/uses_lib.yaml"]["reasons"] == ["jobs/lib/macros.j2 changed"]
    secret, = files["jobs/secret.yaml"]["apps"][0]["changes"]
    assert secret == {"field": "roles.r.env.TOKEN", "path": ["roles", "r", "env", "TOKEN"], "kind": "changed",
                      "secret": True}
    args, = files["jobs/train.yaml"]["apps"][0]["changes"]
    assert (args["old"], args["new"]) == (["--lr", "0.1"], ["--lr", "0.2"])
    assert files["jobs/gone.yaml"]["apps"][0]["status"] == "removed"


def test_text_markdown_and_github_show_the_same_files(pr: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    code, text = run(capsys, "diff", "--base", "main")
    assert code == 1
    titles = [line for line in text.splitlines() if line.startswith("jobs/")]
    assert sorted(t.split(":")[0] for t in titles) == sorted(
        ["jobs/old_name.yaml -> jobs/new_name.yaml" if p == "jobs/new_name.yaml" else p for p in EXPECTED])
    assert "    roles.r.num_replicas: changed\n      - 2\n      + 4\n" in text
    assert "roles.r.env.TOKEN: secret changed (not shown)" in text
    assert "jobs/uses_lib.yaml: modified (jobs/lib/macros.j2 changed)" in text
    assert text.rstrip().endswith("6 files change what runs (7 compared)")

    code, md = run(capsys, "diff", "--base", "main", "--format", "markdown")
    assert code == 1 and md.startswith("### torchspec diff against `main`")
    assert md.count("<details>") == md.count("</details>") == 4  # the rename and the removal have no body
    assert "- <code>jobs/gone.yaml: removed</code>: gone removed\n" in md
    assert "- <code>jobs/old_name.yaml -&gt; jobs/new_name.yaml: renamed</code>" in md
    assert "\n- 2\n+ 4\n" in md

    code, gh = run(capsys, "diff", "--base", "main", "--format", "github")
    assert code == 1
    notices = [line for line in gh.splitlines() if line.startswith("::notice file=")]
    assert sorted(n.split(",")[0].removeprefix("::notice file=") for n in notices) == sorted(EXPECTED)
    assert "roles.r.args changed" in gh and "secret roles.r.env.TOKEN changed" in gh


@pytest.mark.parametrize("scheduler", [None, "local"])
def test_a_removed_or_added_spec_is_one_line_per_app_in_every_format(pr: GitRepo, scheduler: str | None) -> None:
    """No field list (internal fields included: role_order, empty mounts), nor a request diff, for a whole app."""
    from torchspec.gitops.diff import DiffOptions, diff_base
    from torchspec.gitops.git import Repo
    from torchspec.gitops.report import FORMATS, render
    from torchspec.runner import get_runner

    pr.write({"jobs/added.yaml": "# nothing like gone.yaml, so git sees no rename\nname: added\nroles:\n"
                                 "  - {name: main, image: other:2, entrypoint: bash, num_replicas: 5}\n"})
    pr.commit("a new job")
    with get_runner() as runner:
        options = DiffOptions(scheduler=scheduler, run_options={"use_cwd": True} if scheduler else {})
        result = diff_base(Repo(), "main", ["jobs/gone.yaml", "jobs/added.yaml"], options, runner)
    out = {fmt: render(result, fmt) for fmt in FORMATS}
    assert not any(field in text for text in out.values() for field in ("role_order", "mounts", "entrypoint"))
    assert out["text"] == ("jobs/added.yaml: added\n  app added: added\njobs/gone.yaml: removed\n  app gone: removed\n"
                           "\n2 files change what runs (2 compared)\n")
    assert "- <code>jobs/gone.yaml: removed</code>: gone removed\n" in out["markdown"]
    assert "<details>" not in out["markdown"]
    assert "::notice file=jobs/added.yaml,title=torchspec diff%3A added::added added\n" in out["github"]
    assert "::notice file=jobs/gone.yaml,title=torchspec diff%3A removed::gone removed\n" in out["github"]
    apps = [app for file in json.loads(out["json"])["files"] for app in file["apps"]]
    assert apps == [{"name": "added", "status": "added", "changes": [], "native": None},
                    {"name": "gone", "status": "removed", "changes": [], "native": None}]


def test_reformatting_alone_shows_nothing(repo: GitRepo, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    repo.write({"jobs/reformat.yaml": BASE["jobs/reformat.yaml"], "jobs/lib/x.j2": "{% macro v() %}1{% endmacro %}"})
    repo.commit("base")
    repo.write({"jobs/reformat.yaml": PR["jobs/reformat.yaml"],
                "jobs/lib/x.j2": "{% macro v() %}{{ 1 }}{% endmacro %}"})
    monkeypatch.chdir(repo.root)
    for fmt in ("text", "markdown", "json", "github"):
        code, out = run(capsys, "diff", "--base", "main", "--format", fmt)
        assert code == 0, out
    assert "No change in what runs (1 compared)" in out
    code, out = run(capsys, "diff", "jobs/reformat.yaml", "jobs/reformat.yaml")
    assert code == 0


def test_paths_limit_which_specs_are_compared(pr: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(capsys, "diff", "--base", "main", "--format", "json", "jobs/train.yaml", "jobs/uses_lib.yaml")
    assert code == 1
    assert [f["path"] for f in json.loads(out)["files"]] == ["jobs/train.yaml", "jobs/uses_lib.yaml"]
    code, _ = run(capsys, "diff", "--base", "main", str(pr.root.parent))
    assert code == 2  # outside the repository


def test_a_file_broken_on_one_side_is_reported_and_the_others_still_compared(
        pr: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    pr.write({"jobs/train.yaml": spec("train").replace("num_replicas: 1", "num_replicas: 1\n    bogus: 1")})
    code, out = run(capsys, "diff", "--base", "main", "--format", "json")
    assert code == 7
    report = json.loads(out)
    files = {f["path"]: f for f in report["files"]}
    assert report["summary"] == {"changed": 5, "errors": 1}
    assert [d["code"] for d in files["jobs/train.yaml"]["errors"]["new"]] == ["TS202"]
    assert files["jobs/scale.yaml"]["apps"][0]["changes"][0]["field"] == "roles.r.num_replicas"
    code, text = run(capsys, "diff", "--base", "main")
    assert code == 7 and "does not load (new side):" in text and "jobs/train.yaml:8:5: error TS202" in text
    code, gh = run(capsys, "diff", "--base", "main", "--format", "github")
    assert code == 7 and "::error file=jobs/train.yaml,line=8,col=5,title=TS202 unknown-key::" in gh


def test_a_file_broken_at_the_base_is_reported_on_the_old_side(repo: GitRepo, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    repo.write({"a.yaml": spec("a").replace("image: img:1", "image: [1]"), "b.yaml": spec("b")})
    repo.commit("base")
    repo.write({"a.yaml": spec("a"), "b.yaml": spec("b", replicas=2)})
    monkeypatch.chdir(repo.root)
    code, out = run(capsys, "diff", "--base", "main", "--format", "json")
    files = {f["path"]: f for f in json.loads(out)["files"]}
    assert code == 7 and list(files["a.yaml"]["errors"]) == ["old"]
    assert files["a.yaml"]["errors"]["old"][0]["file"] == "main:a.yaml"
    assert files["b.yaml"]["apps"][0]["status"] == "modified"


@pytest.mark.parametrize("scheduler, cfg, before, after", [
    ("local", "use_cwd=true", "role r: 2 replica(s)", "role r: 4 replica(s)"),
    ("kubernetes", "namespace=ns", "  completions: 2", "  completions: 4"),
])
def test_with_a_scheduler_the_native_request_is_diffed_too(pr: GitRepo, capsys: pytest.CaptureFixture[str],
                                                           scheduler: str, cfg: str, before: str, after: str) -> None:
    code, out = run(capsys, "diff", "--base", "main", "-s", scheduler, "-c", cfg, "--format", "json",
                    "jobs/scale.yaml", "jobs/secret.yaml")
    assert code == 1
    files = {f["path"]: f for f in json.loads(out)["files"]}
    native = files["jobs/scale.yaml"]["apps"][0]["native"].splitlines()
    assert native[:2] == ["--- main:jobs/scale.yaml", "+++ jobs/scale.yaml"]
    assert any(line.startswith("-") and before in line for line in native)
    assert any(line.startswith("+") and after in line for line in native)
    assert not any("${app_id}" not in line and "scale-" in line for line in native)  # random ids made ${app_id}
    secret_native = files["jobs/secret.yaml"]["apps"][0]["native"] or ""
    assert "<value from env(TS_DIFF_TOKEN" in secret_native  # the variable's name, never its value
    code, text = run(capsys, "diff", "--base", "main", "-s", scheduler, "-c", cfg, "jobs/scale.yaml")
    assert f"    {scheduler} request:" in text


def test_two_files_are_compared_without_git(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.yaml").write_text(spec("a"))
    (tmp_path / "b.yaml").write_text(spec("a", replicas=2))
    code, out = run(capsys, "diff", "a.yaml", "b.yaml")
    assert code == 1 and "b.yaml: modified" in out and "roles.r.num_replicas: changed" in out
    code, _ = run(capsys, "diff", "a.yaml")
    assert code == 2
    code, _ = run(capsys, "diff", "--base", "main")
    assert code == 2  # not a git repository


def test_a_changed_params_file_touches_every_spec_and_its_old_side_comes_from_git(
        repo: GitRepo, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    templated = spec("p").replace("num_replicas: 1", "num_replicas: \"{{ n }}\"").replace(
        "name: p", "name: p\nparams: {n: {type: integer}}")
    repo.write({"jobs/a.yaml": templated, "jobs/b.yaml": templated.replace("name: p", "name: q"),
                "values/prod.yaml": "n: 2\n"})
    repo.commit("base")
    repo.write({"values/prod.yaml": "n: 3\n"})
    monkeypatch.chdir(repo.root / "jobs")
    code, out = run(capsys, "diff", "--base", "main", "--params-file", "../values/prod.yaml", "--format", "json")
    files = json.loads(out)["files"]
    assert code == 1 and [f["path"] for f in files] == ["jobs/a.yaml", "jobs/b.yaml"]
    assert files[0]["reasons"] == ["the params file values/prod.yaml changed"]
    change, = files[0]["apps"][0]["changes"]
    assert (change["field"], change["old"], change["new"]) == ("roles.r.num_replicas", 2, 3)
    code, out = run(capsys, "diff", "--base", "main", "--format", "json")  # no values: stand-ins, no change
    assert code == 0 and json.loads(out)["files"] == []
