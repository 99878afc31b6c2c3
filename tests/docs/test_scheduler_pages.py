"""The scheduler pages (docs/schedulers/*.md): each is laid out the same way, holds its scheduler's generated
run option table, and its samples run as written (tests/docs/sample_runner.py) with no cluster or engine.

The samples of a page run in order, in one session, from a copy of the repository's examples/, with the
addresses of backends (a Docker engine, a Ray dashboard, a kubeconfig) unset, so a dry run prints what it
prints for a reader who set none. The one sample that needs a cluster, the kubernetes page's
``-c server_dry_run=True``, is left to tests/docs/test_samples.py and
tests/schedulers/test_kubernetes_server_dry_run.py.
"""

from __future__ import annotations

import pathlib
import re
from typing import Dict, Iterator, List

import pytest
from sample_runner import ROOT, Block, Session, blocks, examples_session, run_samples, sample_env, samples, steps

PAGES = ROOT / "docs" / "schedulers"
SCHEDULERS = ("local", "docker", "kubernetes", "slurm", "ray")
#: the sections every page has, in this order (others follow them)
FIRST_SECTIONS = ("What it needs", "Try it", "Run options")
#: the first command of a sample that needs a cluster's API server
NEEDS_A_CLUSTER = "-c server_dry_run=True"
#: what points torchspec at a backend; unset, so that the samples print the defaults the pages show
BACKEND_ADDRESSES = ("DOCKER_HOST", "RAY_ADDRESS", "RAY_API_SERVER_ADDRESS", "TORCHSPEC_DASHBOARD_ADDRESS")


def page(scheduler: str) -> pathlib.Path:
    return PAGES / f"{scheduler}.md"


def needs_a_cluster(block: Block) -> bool:
    return NEEDS_A_CLUSTER in steps(block)[0].command


def page_samples(scheduler: str) -> List[Block]:
    """The samples of a scheduler's page that run without a cluster, in page order."""
    return [block for block in samples([page(scheduler)]) if not needs_a_cluster(block)]


def scheduler_page_samples() -> List[Block]:
    """Every sample of docs/schedulers/*.md that these tests run (each page's but the server dry run)."""
    return [block for scheduler in SCHEDULERS for block in page_samples(scheduler)]


def run_options_marker(scheduler: str) -> str:
    return ("<!-- generated: kubernetes-run-options -->" if scheduler == "kubernetes"
            else f"<!-- generated: run-options {scheduler} -->")


def sections(path: pathlib.Path) -> Dict[str, str]:
    """A page's ``##`` sections by title, each with its text up to the next one, in page order (no sample
    or spec on these pages holds a line starting with ``## ``)."""
    parts = re.split(r"^## (.+)\n", path.read_text(), flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def test_every_scheduler_has_a_page_in_the_overview() -> None:
    assert sorted(p.stem for p in PAGES.glob("*.md")) == sorted([*SCHEDULERS, "index"])
    overview = (PAGES / "index.md").read_text()
    for scheduler in SCHEDULERS:
        assert f"]({scheduler}.md)" in overview, scheduler


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_the_page_layout(scheduler: str) -> None:
    """What it needs, Try it (its samples, each under it), then Run options with the generated table, on a
    line of its own: nothing in it is typed by hand."""
    found = sections(page(scheduler))
    assert list(found)[:len(FIRST_SECTIONS)] == list(FIRST_SECTIONS), list(found)
    assert run_options_marker(scheduler) in found["Run options"].splitlines()
    assert not re.search(r"^ *\|", found["Run options"], re.M), "a table typed by hand"
    ran = page_samples(scheduler)
    assert ran and all(block.heading == "Try it" and block.info == "console" for block in ran), \
        [(b.where, b.heading, b.info) for b in ran]


def test_only_the_server_dry_run_is_left_out() -> None:
    left = [b for s in SCHEDULERS for b in samples([page(s)]) if b not in page_samples(s)]
    assert [b.path.stem for b in left] == ["kubernetes"], [b.where for b in left]
    every = blocks(page("kubernetes"))
    spec = every[every.index(left[0]) - 1]
    assert spec.info == "yaml" and "name: greedy" in spec.text, spec.where


@pytest.fixture
def session(tmp_path: pathlib.Path) -> Iterator[Session]:
    """A session in a folder holding a copy of examples/, no backend's address set; every local app it leaves
    running is cancelled."""
    env = sample_env(tmp_path)
    for name in BACKEND_ADDRESSES:
        env.pop(name, None)
    with examples_session(tmp_path, env) as started:
        yield started


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_the_try_it_samples(scheduler: str, session: Session) -> None:
    """The page's commands, in order, in one session: what each prints is what the page shows."""
    run_samples(session, page_samples(scheduler), timeout=60)
