"""The documentation site (mkdocs.yml, docs/): it builds in strict mode, its generated reference holds every
command, option, lint code, exit code, run option and schema key, and Getting started runs as written.

The build needs the ``docs`` extra (Material for MkDocs, mkdocstrings, mkdocs-click). Without it these tests
skip, except where ``TORCHSPEC_REQUIRE_DOCS=1`` (``scripts/test`` sets it in CI, and wherever the extra is
installed) makes them fail instead.
"""

from __future__ import annotations

import html
import importlib
import importlib.util
import json
import os
import pathlib
import re
import subprocess
import sys
from typing import Dict, List

import pytest
import skips
from sample_runner import ROOT, Block, blocks, examples_session, run_samples, samples

GETTING_STARTED = ROOT / "docs" / "getting-started.md"
TOOLS = ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python", "mkdocs_click")


def getting_started_samples() -> List[Block]:
    return samples([GETTING_STARTED])


def docs_tools_or_skip() -> None:
    """Skip (fail under TORCHSPEC_REQUIRE_DOCS=1) unless the docs extra is installed."""
    missing = []
    for name in TOOLS:
        try:
            found = importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:  # a missing parent package of a dotted name
            found = False
        if not found:
            missing.append(name)
    if not missing:
        return
    skips.skip_or_fail("DOCS", f"the docs extra is not installed ({', '.join(missing)} missing): "
                               "pip install -e '.[docs]'")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """The site, built with ``mkdocs build --strict`` (any warning fails: a broken link, a missing anchor, a
    page not in the nav, a docstring reference that resolves nowhere) from this checkout's code."""
    docs_tools_or_skip()
    out = tmp_path_factory.mktemp("site") / "site"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), *sys.path]), NO_MKDOCS_2_WARNING="1",
               NO_COLOR="1")
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"),
                            "-d", str(out)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, f"mkdocs build --strict failed:\n{built.stdout}\n{built.stderr}"
    return out


def page(site: pathlib.Path, name: str) -> str:
    return (site / name / "index.html").read_text()


def section(text: str, anchor: str) -> str:
    """The HTML from the heading whose id is ``anchor`` to the next heading of the same or a higher level."""
    start = re.search(rf'<h([1-6]) id="{re.escape(anchor)}"', text)
    assert start, f"no heading #{anchor}"
    level = int(start.group(1))
    end = re.compile(rf"<h[1-{level}][ >]").search(text, start.end())
    return text[start.start():end.start() if end else len(text)]


def test_the_site_builds_strictly(site: pathlib.Path) -> None:
    for name in ("getting-started", "architecture", "guides/torchx-migration", "reference/cli",
                 "reference/python-api", "reference/lint-codes", "reference/exit-codes", "reference/run-options", "reference/schema"):
        assert (site / name / "index.html").is_file(), name
    assert not (site / "dev").exists(), "docs/dev holds internal notes, kept out of the site"
    assert not (site / "hooks.py").exists()


def test_the_cli_reference_has_every_command_and_option(site: pathlib.Path) -> None:
    from torchspec.cli.main import COMMANDS
    from torchspec.cli.reference import cli

    text = page(site, "reference/cli")
    assert set(cli.commands) == set(COMMANDS)
    for name, command in cli.commands.items():
        part = section(text, f"torchspec-{name}")
        for param in command.params:
            if param.param_type_name != "option" or getattr(param, "hidden", False):
                continue
            for opt in [*param.opts, *param.secondary_opts]:
                assert f"<code>{html.escape(opt)}</code>" in part, f"torchspec {name}: {opt} is not documented"


def test_the_lint_code_reference_has_every_code_with_its_example(site: pathlib.Path) -> None:
    from torchspec.codes import CODES

    text = page(site, "reference/lint-codes")
    for code in CODES.values():
        part = html.unescape(re.sub(r"<[^>]+>", "", section(text, code.code.lower())))
        assert code.name in part and code.severity in part, code.code
        for line in code.example.splitlines():
            assert line in part, f"{code.code}: its example is not on the page: {line!r}"


def test_the_exit_code_reference_has_every_code(site: pathlib.Path) -> None:
    from torchspec.exit_codes import ExitCode

    rows = {re.sub(r"<[^>]+>", "", row[0]): row[1] for row in
            re.findall(r"<tr>\s*<td>(.*?)</td>\s*<td>(.*?)</td>", page(site, "reference/exit-codes"), re.S)}
    for name, member in ExitCode.__members__.items():
        assert f"ExitCode.{name}" in rows.get(str(int(member)), ""), f"exit code {int(member)} ({name})"


def test_the_run_option_reference_has_every_option_of_every_builtin_scheduler(site: pathlib.Path) -> None:
    from torchspec.entry_points import entry_points
    from torchspec.schedulers.registry import GROUP
    from torchspec.version import is_own_dist

    text = page(site, "reference/run-options")
    builtin = [ep for ep in entry_points(GROUP) if is_own_dist(ep.dist)]
    assert {"local", "docker", "kubernetes", "slurm", "ray"} <= {ep.name for ep in builtin}
    for ep in builtin:
        scheduler = ep.load()("docs-test")
        try:
            opts = list(scheduler.run_opts())
        finally:
            scheduler.close()
        part = section(text, ep.name)
        for key, _ in opts:
            assert f"<code>{key}</code>" in part, f"{ep.name}: run option {key} is not documented"


def test_the_schema_page_has_every_key_and_the_schema_is_published_at_its_id(site: pathlib.Path) -> None:
    schema_file = ROOT / "schemas" / "appdef.schema.json"
    data = json.loads(schema_file.read_text())
    text = page(site, "reference/schema")
    objects: Dict[str, dict] = {"appdef": data, **{name.lower(): node for name, node in data["$defs"].items()}}
    for anchor, node in objects.items():
        part = section(text, anchor)
        for key in node.get("properties", {}):
            assert f"<code>{html.escape(key)}</code>" in part, f"{anchor}: {key} is not documented"
    # the $id is the site's URL of the file, so the published path is the one editors and catalogues use
    site_url = re.search(r"^site_url:\s*(\S+)", (ROOT / "mkdocs.yml").read_text(), re.M).group(1)
    assert data["$id"].startswith(site_url)
    published = site / data["$id"][len(site_url):]
    assert published.read_bytes() == schema_file.read_bytes()


def test_the_first_spec_shown_is_examples_hello_yaml() -> None:
    """The spec Getting started shows is the file its samples run (its comment header left out)."""
    (shown,) = [b for b in blocks(GETTING_STARTED) if b.info == "yaml"]
    spec = (ROOT / "examples" / "hello.yaml").read_text()
    assert spec[spec.index("name: hello"):] == shown.text


def test_the_getting_started_samples(tmp_path: pathlib.Path) -> None:
    """No mkdocs needed: the page's commands, in order, in one session, from a copy of examples/."""
    with examples_session(tmp_path) as session:
        run_samples(session, getting_started_samples())


def test_reference_module_is_not_imported_by_the_cli() -> None:
    """The reference loads every command; the CLI itself must keep loading them only when run."""
    found = subprocess.run([sys.executable, "-c", "import sys, torchspec.cli.main; "
                            "print('torchspec.cli.reference' in sys.modules, 'torchspec.cli.submit_cmd' in sys.modules)"],
                           env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True, check=True)
    assert found.stdout.split() == ["False", "False"]
    importlib.import_module("torchspec.cli.reference")


def test_the_readme_is_short_and_its_links_lead_somewhere() -> None:
    """README.md is the one screen a newcomer reads (issue 27: about 150 lines at most); everything else is on
    the site, so every link of it names a file that is there, and an anchor a heading of that file."""
    readme = ROOT / "README.md"
    text = readme.read_text()
    assert len(text.splitlines()) <= 150
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    assert links
    for link in links:
        if re.match(r"[a-z]+:", link):
            continue
        path, _, anchor = link.partition("#")
        target = (readme.parent / path) if path else readme
        assert target.is_file(), link
        if anchor:
            headings = re.findall(r"^#+ (.*)$", target.read_text(), re.M)
            slugs = {re.sub(r"\s+", "-", re.sub(r"[^\w\s-]", "", h.lower()).strip()) for h in headings}
            assert anchor in slugs, link


def test_the_installation_page_names_every_extra() -> None:
    """Its table of extras is written by hand (what each is for is prose), so a new extra must be added."""
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    page = (ROOT / "docs" / "installation.md").read_text()
    for name in extras:
        assert f"`{name}`" in page, f"the extra {name} is not on docs/installation.md"
