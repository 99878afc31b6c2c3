"""What changed since a ref, and a commit's files served to the loader: nothing checked out."""

from __future__ import annotations

import os

import pytest

from torchspec.errors import UsageError
from torchspec.gitops.git import Change, Repo
from torchspec.loader import LoadOptions, load_file

from git_repo import GitRepo


def test_changes_name_added_removed_renamed_modified_and_untracked_files(repo: GitRepo) -> None:
    repo.write({"a.yaml": "a: 1\n", "b.yaml": "b: 1\n", "keep/long.yaml": "x: 1\n" * 20, "gone.txt": "g\n"})
    repo.commit("base")
    repo.write({"a.yaml": "a: 2\n", "new.yaml": "n: 1\n"})
    os.remove(repo.root / "gone.txt")
    (repo.root / "moved").mkdir()
    repo.git("mv", "keep/long.yaml", "moved/long.yaml")
    git = Repo(str(repo.root / "keep"))
    assert os.path.realpath(git.root) == os.path.realpath(repo.root)
    changes = sorted(git.changes(git.commit("main")), key=lambda c: c.path)
    assert changes == [Change("modified", "a.yaml", "a.yaml"), Change("removed", "gone.txt", "gone.txt"),
                       Change("renamed", "moved/long.yaml", "keep/long.yaml"), Change("added", "new.yaml", None)]


def test_a_bad_ref_or_no_repository_is_a_usage_error(repo: GitRepo, tmp_path) -> None:
    repo.write({"a": "1"})
    repo.commit("base")
    with pytest.raises(UsageError, match="not a commit"):
        Repo(str(repo.root)).commit("no-such-branch")
    outside = tmp_path / "plain"
    outside.mkdir()
    with pytest.raises(UsageError, match="not inside a git repository"):
        Repo(str(outside))


def test_the_loader_reads_a_spec_and_its_imports_from_the_commit(repo: GitRepo) -> None:
    spec = ('name: "{{ m.name() }}"\nimports: {m: lib/m.j2}\n'
            'roles: [{name: r, image: i, entrypoint: e, args: ["{% include \'lib/arg.j2\' %}"]}]\n')
    repo.write({"jobs/a.yaml": spec, "jobs/lib/m.j2": "{% macro name() %}old{% endmacro %}",
                "jobs/lib/arg.j2": "old-arg"})
    os.symlink("lib", repo.root / "jobs" / "link")
    repo.commit("base")
    repo.write({"jobs/lib/m.j2": "{% macro name() %}new{% endmacro %}", "jobs/lib/arg.j2": "new-arg"})
    git = Repo(str(repo.root))
    with git.source(git.commit("main")) as source:
        loaded = load_file(git.abs("jobs/a.yaml"), LoadOptions(source=source))
        assert loaded.ok, loaded.all_diagnostics()
        app = loaded.documents[0].app
        assert app is not None and app.name == "old" and app.roles[0].args == ["old-arg"]
        assert loaded.documents[0].dependencies == [git.abs("jobs/lib/arg.j2"), git.abs("jobs/lib/m.j2")]
        assert source.realpath(git.abs("jobs/link/m.j2")) == git.abs("jobs/lib/m.j2")
        assert source.read(git.abs("jobs/link/arg.j2"), 100) == b"old-arg"
        assert source.is_file(git.abs("jobs/lib/m.j2")) and not source.is_file(git.abs("jobs/lib"))
        assert source.exists(git.abs("jobs/lib")) and not source.exists(git.abs("jobs/nope.j2"))
        with pytest.raises(FileNotFoundError):
            source.read(git.abs("jobs/nope.yaml"), 10)
        with pytest.raises(IsADirectoryError):
            source.read(git.abs("jobs"), 10)
    assert (repo.root / "jobs" / "lib" / "m.j2").read_text() == "{% macro name() %}new{% endmacro %}"
    assert repo.git("status", "--porcelain").split() == ["M", "jobs/lib/arg.j2", "M", "jobs/lib/m.j2"]
