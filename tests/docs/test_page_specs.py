"""Every spec a documentation page shows lints clean, or raises exactly the errors a marker names; and the CI
guide's samples run as written.

A spec is a fenced ``yaml``, ``toml`` or ``json`` block of a page in docs/ (not docs/dev/) holding an AppDef: a
top-level mapping with a ``roles`` key, in any of its YAML documents (``[[roles]]`` in TOML). A block that does not
parse counts when a line of it opens a top-level ``roles`` key, so a broken spec fails rather than goes unseen;
snippets without roles (a ``params:`` table, a workflow) are not specs. Each spec is written to a folder of its
own under the name its first line gives (``# jobs/train.yaml``), else PAGE-LINE.EXT, beside every other block of
the page that names its file (a template its ``imports`` name, say), and linted with
:func:`torchspec.lint.lint_paths`: no errors (warnings are fine; required params get stand-ins).

An HTML comment on the line before a block's fence (the site shows it nowhere) says otherwise:

- ``<!-- lint: errors TS202 TS204 -->``: the block must raise exactly these error codes (a bad example whose
  lint output the page shows);
- ``<!-- lint: skip (REASON) -->``: a spec fragment, partial on purpose, that is not linted.

A marker that reads otherwise, or that stands before a block that is not a spec, fails, so none goes stale.
"""

from __future__ import annotations

import functools
import json
import pathlib
import re
import sys
from dataclasses import dataclass
from typing import Iterable, List, Optional, Tuple

import pytest
import yaml
from sample_runner import ROOT, Block, Session, blocks, named_path, run_samples, sample_env, samples, write_named

if sys.version_info >= (3, 11):
    import tomllib
else:  # torchspec's own dependency for TOML there
    import tomli as tomllib

DOCS = ROOT / "docs"
PAGES = sorted(path for path in DOCS.rglob("*.md") if path.relative_to(DOCS).parts[0] != "dev")
CI_GUIDE = DOCS / "guides" / "ci.md"
#: a block's language (the first word of its info string) -> the format and extension it is linted as
FORMATS = {"yaml": "yaml", "yml": "yaml", "toml": "toml", "json": "json"}
#: a line that opens a top-level roles key, for a block that does not parse
ROLES_LINE = re.compile(r"""(?m)^(?:roles\s*:|\[\[\s*roles\s*\]\]|\s{0,2}"roles"\s*:)""")
MARKER_LINE = re.compile(r"<!--\s*lint\b")
MARKER = re.compile(r"^ *<!-- lint: (?:errors(?P<codes>(?: TS\d{3})+)|skip \((?P<reason>[^()]+)\)) -->$")


@dataclass(frozen=True)
class Marker:
    """A ``<!-- lint: ... -->`` line of a page: the codes it names, or why its block is skipped."""

    path: pathlib.Path
    line: int
    text: str
    fence: Optional[int]  # the line of the fence it stands before (blank lines between), or None

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    def parsed(self) -> "re.Match[str]":
        match = MARKER.match(self.text)
        assert match, (f"{self.where}: a marker reads `<!-- lint: errors TS202 TS204 -->` or "
                       f"`<!-- lint: skip (REASON) -->`, not {self.text.strip()!r}")
        return match

    @property
    def codes(self) -> Tuple[str, ...]:
        return tuple(self.parsed().group("codes").split()) if self.parsed().group("codes") else ()

    @property
    def skipped(self) -> bool:
        return self.parsed().group("reason") is not None


def language(block: Block) -> Optional[str]:
    """The format a block is linted as, from its info string (```` ```yaml ````), or None."""
    words = block.info.split()
    return FORMATS.get(words[0].lstrip(".{").lower()) if words else None


def holds_spec(block: Block) -> bool:
    """Whether ``block`` shows an AppDef (see the module's docstring)."""
    fmt = language(block)
    if fmt is None:
        return False
    try:
        if fmt == "yaml":
            documents = list(yaml.safe_load_all(block.text))
        elif fmt == "toml":
            documents = [tomllib.loads(block.text)]
        else:
            documents = [json.loads(block.text)]
    except (yaml.YAMLError, tomllib.TOMLDecodeError, ValueError):
        return ROLES_LINE.search(block.text) is not None
    return any(isinstance(document, dict) and "roles" in document for document in documents)


def page_spec_blocks(pages: Iterable[pathlib.Path] = PAGES) -> List[Block]:
    """Every block of ``pages`` that shows a spec, in page order."""
    return [block for path in pages for block in blocks(path) if holds_spec(block)]


@functools.lru_cache(maxsize=None)
def markers(path: pathlib.Path) -> Tuple[Marker, ...]:
    """Every line of ``path`` that looks like a lint marker, with the fence after it."""
    lines = path.read_text().splitlines()
    found = []
    for index, text in enumerate(lines):
        if not MARKER_LINE.search(text):
            continue
        after = next((i for i in range(index + 1, len(lines)) if lines[i].strip()), None)
        fence = after + 1 if after is not None and lines[after].lstrip().startswith("```") else None
        found.append(Marker(path, index + 1, text, fence))
    return tuple(found)


def marker(block: Block) -> Optional[Marker]:
    """The marker standing before ``block``, if any."""
    return next((m for m in markers(block.path) if m.fence == block.line), None)


def spec_file(block: Block, folder: pathlib.Path) -> pathlib.Path:
    """``block`` written under ``folder`` with the other blocks of its page that name their files."""
    write_named([other for other in blocks(block.path) if other != block], folder)
    path = folder / (named_path(block) or f"{block.path.stem}-{block.line}.{language(block)}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(block.text)
    return path


def test_the_pages_show_specs() -> None:
    """The scan finds the pages' specs and the marker of a bad one; a multi-document YAML block, a TOML one and
    one that does not parse are specs too, a ``params:`` snippet is not."""
    found = page_spec_blocks()
    assert {DOCS / "getting-started.md", DOCS / "concepts" / "linting.md", CI_GUIDE} <= {b.path for b in found}
    assert any(marker(b) and marker(b).codes for b in found)  # type: ignore[union-attr]
    fake = Block(CI_GUIDE, 1, "yaml", "", "name: a\nroles: [{name: r, image: ., entrypoint: e}]\n---\nname: b\n")
    assert holds_spec(fake) and holds_spec(Block(CI_GUIDE, 1, "toml", "", '[[roles]]\nname = "r"\n'))
    assert holds_spec(Block(CI_GUIDE, 1, "yaml", "", "name: a\nroles:\n  - {{ broken\n"))
    assert not holds_spec(Block(CI_GUIDE, 1, "yaml", "", "params:\n  n: {type: integer}\n"))


def lintable_blocks() -> List[Block]:
    """The pages' specs but the fragments a ``lint: skip (REASON)`` marker names: those are not tests at all,
    rather than tests that skip (a skip fails CI)."""
    return [block for block in page_spec_blocks() if not ((found := marker(block)) and found.skipped)]


@pytest.mark.parametrize("block", lintable_blocks(), ids=lambda block: block.where)
def test_each_spec_shown_lints_as_its_page_says(block: Block, tmp_path: pathlib.Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from torchspec.lint import LintOptions, lint_paths
    from torchspec.report import get_reporter

    found = marker(block)
    monkeypatch.chdir(tmp_path)  # the report names the file as the page does
    spec = str(spec_file(block, tmp_path).relative_to(tmp_path))
    result = lint_paths([spec], LintOptions(jobs=1))
    report = get_reporter("text")().render(result)
    errors = sorted({d.code for d in result.diagnostics if d.is_error})
    expected = sorted(set(found.codes)) if found else []
    assert result.files == [spec]
    assert errors == expected, (
        f"{block.where}: the spec shown should raise {expected or 'no errors'}, and lint says:\n{report}")


def test_every_marker_stands_before_a_spec() -> None:
    """A marker is well formed, names codes that exist, and belongs to a spec block (so it cannot go stale)."""
    from torchspec.codes import CODES

    specs = {(block.path, block.line) for block in page_spec_blocks()}
    problems = []
    for path in PAGES:
        for found in markers(path):
            found.parsed()
            problems += [f"{found.where}: no lint code {code}" for code in found.codes if code not in CODES]
            if (path, found.fence) not in specs:
                problems.append(f"{found.where}: the marker stands before no spec block")
    assert not problems, "\n".join(problems)


def ci_guide_samples() -> List[Block]:
    """The CI guide's console samples (the ``test_the_ci_guide_samples`` test runs them)."""
    return samples([CI_GUIDE])


def test_the_ci_guide_samples(tmp_path: pathlib.Path) -> None:
    """The guide's files written out (its blocks opening with ``# PATH``: jobs/bad.yaml...), then its samples run
    in order, from the folder holding them."""
    work = tmp_path / "work"
    written = write_named(blocks(CI_GUIDE), work)
    assert {work / "jobs" / "bad.yaml", work / "jobs" / "sweep.yaml"} <= set(written)
    session = Session(work, sample_env(tmp_path))
    run_samples(session, ci_guide_samples())
    assert len(ci_guide_samples()) == 2
