"""What a release ships: the wheel holds every file the package reads (schemas, templates, static files,
component specs, CRDs...), the sdist holds what the tests need, the metadata is the release's, the
changelog names the version, and the release workflow publishes on a tag.

The wheel and sdist are built once per run (tests/wheel_support.py), from a copy of the sources in a
temporary folder (the checkout gets no build/ or egg-info), by ``python -m build --no-isolation`` where
``build`` is installed, else by ``pip wheel --no-deps --no-build-isolation``: no network, the setuptools at
hand (>= 77, as pyproject.toml asks).
"""

from __future__ import annotations

import email
import pathlib
import re
import shutil
import subprocess
import tarfile
import zipfile
from typing import Dict

import pytest
import yaml

import wheel_support
from torchspec.version import DIST_NAME, __version__

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "torchspec"

pytestmark = pytest.mark.skipif(not wheel_support.setuptools_new_enough(),
                                reason="building needs setuptools >= 77 installed")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, pathlib.Path]:
    """The run's one wheel and sdist (tests/wheel_support.py: test_installed.py and test_image.py use them too)."""
    return wheel_support.built_dists(tmp_path_factory)


def test_the_wheel_holds_every_file_of_the_package(built: Dict[str, pathlib.Path]) -> None:
    assert built["wheel"].name == f"torchspec_cli-{__version__}-py3-none-any.whl"
    names = set(zipfile.ZipFile(built["wheel"]).namelist())
    # every file under torchspec/ the code may read: Python modules and data alike (JSON Schemas, Jinja
    # templates, component specs, CRDs, the dashboard's pages and static files, py.typed...)
    wanted = {p.relative_to(ROOT).as_posix() for p in PACKAGE.rglob("*")
              if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"}
    assert sorted(wanted - names) == []
    data = {n for n in wanted if not n.endswith(".py")}
    for kind in (".json", ".yaml", ".j2", ".html", ".js", ".css", "py.typed"):
        assert any(n.endswith(kind) for n in data), kind  # the check above covered each kind of data file
    # nothing else: no tests, no examples, no stray top-level packages
    info = f"torchspec_cli-{__version__}.dist-info/"
    assert sorted(n for n in names if not n.startswith(("torchspec/", info))) == []
    assert f"{info}licenses/LICENSE" in names


def test_the_wheel_metadata_is_the_release(built: Dict[str, pathlib.Path]) -> None:
    with zipfile.ZipFile(built["wheel"]) as wheel:
        meta = email.message_from_string(wheel.read(f"torchspec_cli-{__version__}.dist-info/METADATA").decode())
        entry_points = wheel.read(f"torchspec_cli-{__version__}.dist-info/entry_points.txt").decode()
    assert (meta["Name"], meta["Version"], meta["License-Expression"]) == (DIST_NAME, __version__, "BSD-3-Clause")
    assert meta.get_all("License-File") == ["LICENSE"]
    requires = meta.get_all("Requires-Dist")
    core = sorted(re.split(r"[<>=;\[ ]", r)[0] for r in requires if "extra ==" not in r)
    assert core == ["click", "jinja2", "jsonschema", "pyyaml", "rich", "tomli"]  # no SDK in the core
    extras = set(meta.get_all("Provides-Extra"))
    assert {"docker", "kubernetes", "ray", "ui", "lsp", "all", "kubernetes-validate", "torch", "test"} <= extras
    assert "torchspec = torchspec.cli.main:program" in entry_points
    assert meta["Description-Content-Type"] == "text/markdown" and meta.get_all("Project-URL")


def test_the_sdist_holds_what_the_tests_need(built: Dict[str, pathlib.Path]) -> None:
    top = f"torchspec_cli-{__version__}/"
    with tarfile.open(built["sdist"]) as sdist:
        names = {n[len(top):] for n in sdist.getnames() if n.startswith(top)}
    tracked = subprocess.run(["git", "-C", str(ROOT), "ls-files", "tests", "examples", "docs", "schemas"],
                             capture_output=True, text=True).stdout.split() if shutil.which("git") else []
    for name in ["LICENSE", "CHANGELOG.md", "README.md", "mkdocs.yml", "tests/conftest.py", "examples/hello.yaml",
                 "docs/index.md", "schemas/appdef.schema.json", "torchspec/schemas/appdef.schema.json", ".ci/run",
                 "Dockerfile", ".dockerignore",
                 ".github/workflows/release.yml", *tracked]:
        assert name in names, name
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


def test_the_changelog_names_this_version() -> None:
    text = (ROOT / "CHANGELOG.md").read_text()
    releases = re.findall(r"^## \[([^\]]+)\](?: - (\d{4}-\d{2}-\d{2}))?$", text, flags=re.M)
    assert releases[0] == ("Unreleased", "")
    assert releases[1][0] == __version__ and releases[1][1], releases  # the newest release, with its date
    assert f"[{__version__}]: " in text


def test_the_release_workflow_publishes_a_tag() -> None:
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "release.yml").read_text())
    assert workflow[True]["push"]["tags"] == ["v[0-9]+.[0-9]+.[0-9]+*"]  # YAML 1.1 reads the key `on` as true
    steps = [step for job in workflow["jobs"].values() for step in job["steps"]]
    text = yaml.safe_dump(steps)
    for needed in ("python -m build", "twine check", "pypa/gh-action-pypi-publish", "torchspec/version.py"):
        assert needed in text, needed
    publish = next(job for job in workflow["jobs"].values()
                   if any("pypa/gh-action-pypi-publish" in str(s.get("uses", "")) for s in job["steps"]))
    assert publish["permissions"]["id-token"] == "write"  # trusted publishing: no token stored


def test_every_docs_address_in_a_message_is_a_published_page() -> None:
    """Messages point wheel users at the published docs (torchspec.version.docs_url), never at docs/ files they
    do not have: each address the code writes is a page of the site, at a heading the page has."""
    import re

    from torchspec.version import DOCS_URL, docs_url

    site = (ROOT / "mkdocs.yml").read_text()
    assert f"site_url: {DOCS_URL}\n" in site
    sources = "\n".join(p.read_text() for p in (ROOT / "torchspec").rglob("*.py"))
    pages = set(re.findall(r"docs_url\('([\w/-]+)'(?:, '([\w-]+)')?\)", sources))
    pages |= {(page, "") for page in re.findall(re.escape(DOCS_URL) + r"([\w/-]+?)/(?=[\s\"')#])", sources)}
    assert ("security", "") in pages and ("schedulers/kubernetes", "pods") in pages
    for page, section in pages:
        text = (ROOT / "docs" / f"{page}.md").read_text()
        assert not section or re.search(rf"^#+ {section}$", text, re.M | re.I), (page, section)
    assert docs_url("guides/secrets") == f"{DOCS_URL}guides/secrets/"
