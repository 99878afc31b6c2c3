"""How torchspec was installed (torchspec/install.py): the command a missing extra's hint names, and
``torchspec --version`` (the version, where, the Python, a checkout's commit: read without running git)."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from torchspec import install
from torchspec.errors import MissingExtraError
from torchspec.version import DIST_NAME, __version__, is_own_dist

ROOT = pathlib.Path(__file__).resolve().parent.parent
#: a git checkout, not an unpacked sdist
CHECKOUT = (ROOT / ".git").exists()


@pytest.fixture
def site(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    """torchspec as if installed into a site-packages folder (no checkout), in an environment at sys.prefix."""
    packages = tmp_path / "site-packages"
    info = packages / "torchspec_cli-0.1.0.dist-info"
    info.mkdir(parents=True)
    (info / "INSTALLER").write_text("pip\n")
    (info / "METADATA").write_text('Name: torchspec-cli\nRequires-Dist: docker>=7; extra == "docker"\n'
                                   'Requires-Dist: starlette>=0.37; extra == "ui"\n'
                                   'Requires-Dist: uvicorn>=0.29; extra == "ui"\n')
    monkeypatch.setattr(install, "ROOT", str(packages))
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "env"))
    (tmp_path / "env").mkdir()
    return tmp_path


def test_the_install_command_fits_the_installer(site: pathlib.Path) -> None:
    assert install.installer() == "pip"
    assert install.install_command("docker") == "pip install 'torchspec-cli[docker]'"
    (site / "site-packages" / "torchspec_cli-0.1.0.dist-info" / "INSTALLER").write_text("uv\n")
    assert install.install_command("docker") == "uv pip install 'torchspec-cli[docker]'"
    (site / "env" / "uv-receipt.toml").write_text("[tool]\n")
    assert install.install_command("ui") == "uv tool install 'torchspec-cli[ui]'"
    (site / "env" / "pipx_metadata.json").write_text("{}")
    # pipx adds packages to an application's environment by name: the extra's own requirements, from the metadata
    assert install.install_command("ui") == "pipx inject torchspec-cli 'starlette>=0.37' 'uvicorn>=0.29'"
    assert install.install_command("kubernetes") == "pipx inject torchspec-cli 'kubernetes>=28'"  # the fallback table


@pytest.mark.skipif(not CHECKOUT, reason="an unpacked sdist is no source checkout")
def test_a_source_checkout_installs_the_extra_in_place() -> None:
    assert install.source_checkout() == str(ROOT)
    assert install.install_command("ray") == f"pip install -e '{ROOT}[ray]'"


def test_missing_extra_error_names_the_extra_and_the_command(site: pathlib.Path) -> None:
    error = MissingExtraError.for_import(ModuleNotFoundError("No module named 'docker'", name="docker.errors"),
                                         "the docker scheduler")
    assert error is not None and error.extra == "docker"
    assert error.message == ("the docker scheduler needs the docker package, which is not installed: it comes with"
                             " the docker extra")
    assert error.hint == "pip install 'torchspec-cli[docker]'"
    # not a module an extra installs, or not a missing module (a broken install): no extra to name
    assert MissingExtraError.for_import(ModuleNotFoundError("x", name="yaml"), "x") is None
    assert MissingExtraError.for_import(ImportError("cannot import name 'X'", name="docker"), "x") is None


def test_extras_table_matches_pyproject() -> None:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == DIST_NAME
    extras = project["optional-dependencies"]
    for extra, requirements in install.EXTRA_REQUIREMENTS.items():
        assert extras[extra] == requirements, extra
    assert set(install.EXTRA_OF_MODULE.values()) <= set(extras)


def test_own_distribution_names() -> None:
    assert is_own_dist("torchspec-cli") and is_own_dist("torchspec_cli") and is_own_dist("torchspec")
    assert not is_own_dist("torchspec-example")


def _git(root: pathlib.Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_the_commit_is_read_from_dot_git(tmp_path: pathlib.Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "trunk")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "one")
    head = _git(repo, "rev-parse", "HEAD")
    assert install.git_commit(str(repo)) == f"{head[:12]}, branch trunk"
    _git(repo, "pack-refs", "--all")  # the branch now only in packed-refs
    assert install.git_commit(str(repo)) == f"{head[:12]}, branch trunk"
    _git(repo, "worktree", "add", "-q", "--detach", str(tmp_path / "wt"))  # .git is a file naming the real one
    assert install.git_commit(str(tmp_path / "wt")) == f"{head[:12]}, detached"
    _git(repo, "-C", str(tmp_path / "wt"), "switch", "-q", "-c", "side")
    assert install.git_commit(str(tmp_path / "wt")) == f"{head[:12]}, branch side"
    assert install.git_commit(str(tmp_path)) is None


def test_version_names_the_checkout_without_running_git() -> None:
    code = ("import sys\nfrom torchspec.cli.main import main\n"
            "try:\n    main(['--version'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('subprocess', 'click', 'importlib.metadata') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                       env={**os.environ, "PATH": "", "PYTHONPATH": str(ROOT)})
    lines = r.stdout.splitlines()
    assert lines[0] == f"torchspec {__version__}", r.stderr
    assert lines[1] == f"location: {ROOT / 'torchspec'}"
    assert lines[2] == f"python: {sys.version.split()[0]} ({sys.executable})"
    if CHECKOUT and shutil.which("git"):
        head = _git(ROOT, "rev-parse", "HEAD")
        assert lines[3].startswith(f"source checkout: {ROOT} (commit {head[:12]}, "), lines
    elif not CHECKOUT:
        assert lines[3].startswith("installed by: "), lines
    assert lines[-1] == "[]"  # no git started, no click, no metadata scan
