"""Paths that try to leave the allowed folders: symlinks found by lint, config template folders, params files, mounts.

Templates (``imports``, ``{% include %}``, ``{% import %}``) are covered in
test_jinja_sandbox.py.  Here: a repository can hold symlinks, so lint never
follows one out of the folder it walks, nor opens a FIFO or a device; a
project config (which a pull request can change) may not widen the template
folders beyond the project; a spec cannot name a params file at all (the
caller does); mounts are passed as written and shown resolved in dry runs.
"""

from __future__ import annotations

import os
import pathlib

import pytest

from input_support import SPEC, assert_clean, cli, first_error
from torchspec.exit_codes import ExitCode

SECRET = "hunter2-do-not-print"


@pytest.fixture
def repo(tmp_path: pathlib.Path) -> pathlib.Path:
    """repo/ with one good spec, and symlinks out of it to a secret that looks like a spec, /proc and devices."""
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.yaml").write_text(f"roles: x\nentrypoint: {SECRET}\ntoken: {SECRET}\n")
    (tmp_path / "outside" / "dir").mkdir()
    (tmp_path / "outside" / "dir" / "deep.yaml").write_text(SPEC.replace("args", f"# {SECRET}\n    args"))
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "good.yaml").write_text(SPEC)
    (repo / "also-good.yaml").symlink_to(repo / "good.yaml")  # inside: linted
    (repo / "leak.yaml").symlink_to(tmp_path / "outside" / "secret.yaml")
    (repo / "environ.yaml").symlink_to("/proc/self/environ")
    (repo / "zero.yaml").symlink_to("/dev/zero")
    (repo / "tty.yaml").symlink_to("/dev/tty")
    (repo / "linked-dir").symlink_to(tmp_path / "outside" / "dir")
    os.mkfifo(repo / "fifo.yaml")
    return repo


def test_lint_never_follows_a_symlink_out_of_the_folder_nor_opens_fifos(repo: pathlib.Path) -> None:
    result = cli("lint", str(repo), env={"LEAKED_VAR": SECRET}, timeout=60)
    output = assert_clean(result, ExitCode.OK, "All 2 files passed")
    assert SECRET not in output
    for name in ("leak.yaml", "environ.yaml", "zero.yaml", "tty.yaml"):
        assert f"note: skipped {repo / name}: a symlink to" in output, output
    assert f"note: skipped {repo / 'fifo.yaml'}: not a regular file" in output
    assert "deep.yaml" not in output  # os.walk does not enter a symlinked folder


def test_a_file_named_on_the_command_line_is_the_callers_choice(repo: pathlib.Path) -> None:
    """Named explicitly, a symlink is followed (the caller chose it); /dev/zero is still only 2 MiB read."""
    assert_clean(cli("lint", str(repo / "also-good.yaml")), ExitCode.OK)
    assert_clean(cli("lint", str(repo / "zero.yaml")), ExitCode.SPEC_ERROR, "TS002")


def project(tmp_path: pathlib.Path, template_paths: str) -> pathlib.Path:
    """A project with .torchspec.toml setting lint.template_paths, a templates/ folder and a spec importing from it."""
    root = tmp_path / "project"
    (root / "templates").mkdir(parents=True)
    (root / "templates" / "lib.j2").write_text("{% macro m() %}from-lib{% endmacro %}")
    (root / "specs").mkdir()
    (root / "specs" / "job.yaml").write_text(SPEC.replace("name: app\n", "name: app\nimports: {lib: lib.j2}\n")
                                             .replace('["hi"]', '["{{ lib.m() }}"]'))
    (root / ".torchspec.toml").write_text(f"[lint]\ntemplate_paths = {template_paths}\n")
    return root


@pytest.mark.parametrize("paths", ['["/"]', '["/etc"]', '[".."]', '["templates/../.."]', '["~"]', '["escape"]'])
def test_a_project_config_cannot_widen_template_folders_beyond_the_project(tmp_path: pathlib.Path, paths: str) -> None:
    root = project(tmp_path, paths)
    (root / "escape").symlink_to(tmp_path)
    result = cli("lint", "specs", cwd=root, env={"XDG_CONFIG_HOME": str(tmp_path / "xdg"), "HOME": str(tmp_path)})
    assert_clean(result, ExitCode.USAGE, "lint.template_paths names", "outside the project folder")


def test_project_template_folders_are_relative_to_the_config_file(tmp_path: pathlib.Path) -> None:
    """Found from the project's folder, whatever the working folder (before: relative to the working folder)."""
    root = project(tmp_path, '["templates"]')
    env = {"XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    assert_clean(cli("lint", "job.yaml", cwd=root / "specs", env=env), ExitCode.OK)
    assert_clean(cli("lint", "specs", cwd=root, env=env), ExitCode.OK)


def test_the_user_config_may_name_any_template_folder(tmp_path: pathlib.Path) -> None:
    root = project(tmp_path, "[]")
    (root / ".torchspec.toml").unlink()
    (tmp_path / "xdg" / "torchspec").mkdir(parents=True)
    (tmp_path / "xdg" / "torchspec" / "config.toml").write_text(f'[lint]\ntemplate_paths = ["{root}/templates"]\n')
    assert_clean(cli("lint", "specs", cwd=root, env={"XDG_CONFIG_HOME": str(tmp_path / "xdg")}), ExitCode.OK)


def test_a_spec_cannot_name_a_params_file() -> None:
    """Values files come from the caller (--params-file), never from the spec: there is no key for one."""
    d = first_error(SPEC.replace("name: app\n", "name: app\nparams_file: /etc/passwd\n"))
    assert d.code == "TS202" and "params_file" in d.message


def test_a_params_file_is_read_as_data_wherever_the_caller_puts_it(tmp_path: pathlib.Path) -> None:
    """``..``, absolute and symlinked params files are the caller's choice; a binary one is refused unprinted."""
    (tmp_path / "up").mkdir()
    (tmp_path / "values.yaml").write_text("msg: from-values\n")
    (tmp_path / "up" / "link.yaml").symlink_to(tmp_path / "values.yaml")
    spec = tmp_path / "up" / "spec.yaml"
    spec.write_text(SPEC.replace("name: app\n", "name: app\nparams: {msg: {type: string}}\n")
                    .replace('["hi"]', '["{{ msg }}"]'))
    for values in ("../values.yaml", str(tmp_path / "values.yaml"), "link.yaml"):
        assert_clean(cli("render", str(spec), "--params-file", values, cwd=tmp_path / "up"), ExitCode.OK,
                     "from-values")
    output = assert_clean(cli("render", str(spec), "--params-file", "/proc/self/environ", env={"LEAK": SECRET}),
                          ExitCode.SPEC_ERROR, "TS307")
    assert SECRET not in output


def test_mounts_are_passed_as_written_and_shown_resolved(tmp_path: pathlib.Path) -> None:
    """torchspec does not police host paths (the job's business), but a dry run shows where '..' leads."""
    spec = tmp_path / "a" / "b" / "mnt.yaml"
    spec.parent.mkdir(parents=True)
    spec.write_text(SPEC.replace("image: .", "image: busybox")
                    + "    mounts: [{type: bind, src_path: ../../.., dst_path: /host}]\n")
    output = assert_clean(cli("dryrun", "-s", "docker", str(spec), cwd=spec.parent), ExitCode.OK)
    assert f"bind:       {tmp_path.parent}:/host:rw" in output
    assert_clean(cli("dryrun", "-s", "kubernetes", str(spec), cwd=spec.parent), ExitCode.USAGE,
                 "must be an absolute path")
