"""Every sample of README.md and the site's pages that shows what a command prints, printed by a real run
(tests/docs/sample_runner.py).

Each test picks its blocks by the page and heading they are under; ``test_every_sample_is_run`` checks that
together with the samples other modules run (Getting started's, the scheduler pages', the CI guide's) they
are every block with a ``$ `` command in README.md and docs/**/*.md, so a new sample needs a test.
"""

from __future__ import annotations

import pathlib
import shlex
import shutil
import subprocess
from typing import Iterator, List

import pytest
from k8s_support import Cluster
from sample_runner import (APP_ID, ROOT, SAMPLES, Block, Randoms, Session, blocks, cancel_running, examples_session,
                           named_path, run_samples, sample_env, samples, steps, write_named)
from test_page_specs import ci_guide_samples
from test_scheduler_pages import scheduler_page_samples
from test_site import getting_started_samples

README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(p for p in DOCS.rglob("*.md") if p.relative_to(DOCS).parts[0] != "dev")]
LINTING = DOCS / "concepts" / "linting.md"
KUBERNETES = DOCS / "schedulers" / "kubernetes.md"
GITOPS = DOCS / "guides" / "gitops.md"
PROVENANCE = DOCS / "guides" / "provenance.md"
CONFIGURATION = DOCS / "concepts" / "configuration.md"
PRODUCTION = DOCS / "guides" / "production-jobs.md"
COMPONENTS = DOCS / "concepts" / "components.md"
#: what a Slurm 22.05 login node's sbatch and srun print for --help and --usage (srun's with pyxis' options)
LOGIN_NODE_HELP = SAMPLES / "production" / "slurm"


def readme_samples() -> List[Block]:
    return samples([README])


def first_command(block: Block) -> str:
    return steps(block)[0].command


def lint_samples() -> List[Block]:
    return [b for b in samples([LINTING]) if b.heading == "`torchspec lint`"]


def kubernetes_lint_sample() -> Block:
    (block,) = [b for b in samples([KUBERNETES])
                if first_command(b).startswith("torchspec lint --scheduler kubernetes")]
    return block


def diff_samples() -> List[Block]:
    return [b for b in samples([GITOPS]) if b.heading == "GitOps" and first_command(b).startswith("torchspec diff")]


def provenance_samples() -> List[Block]:
    return [b for b in samples([PROVENANCE]) if b.heading == "Provenance and `rerun`"]


def configuration_samples() -> List[Block]:
    return samples([CONFIGURATION])


def walkthrough_samples() -> List[Block]:
    return [b for b in samples([GITOPS]) if b.heading == "From a new repository to a merged pull request"]


def production_samples() -> List[Block]:
    return samples([PRODUCTION])


def component_samples() -> List[Block]:
    return samples([COMPONENTS])


def test_every_sample_is_run() -> None:
    runs = [*readme_samples(), *lint_samples(), kubernetes_lint_sample(), *diff_samples(), *walkthrough_samples(),
            *provenance_samples(), *getting_started_samples(), *ci_guide_samples(),
            *scheduler_page_samples(), *configuration_samples(), *production_samples(), *component_samples()]
    assert len(runs) == len(set(runs))
    assert set(runs) == set(samples(PAGES)), [b.where for b in set(samples(PAGES)) - set(runs)]
    assert (len(readme_samples()), len(lint_samples()), len(diff_samples()), len(walkthrough_samples()),
            len(provenance_samples()), len(getting_started_samples()), len(ci_guide_samples()),
            len(scheduler_page_samples()), len(configuration_samples()),
            len(production_samples()), len(component_samples())) == (1, 1, 3, 3, 1, 6, 2, 14, 1, 8, 1)


def test_the_readme_sample(tmp_path: pathlib.Path) -> None:
    """README's first run, in a folder holding a copy of examples/; its spec is examples/hello.yaml's."""
    (shown,) = [b for b in blocks(README) if b.info == "yaml"]
    spec = (ROOT / "examples" / "hello.yaml").read_text()
    assert spec[spec.index("name: hello"):] == shown.text
    with examples_session(tmp_path) as session:
        run_samples(session, readme_samples())


def test_the_configuration_sample(tmp_path: pathlib.Path) -> None:
    """Run options given wrong: every problem at once, before anything is submitted."""
    with examples_session(tmp_path) as session:
        run_samples(session, configuration_samples())


def login_node_clients(folder: pathlib.Path) -> None:
    """``sbatch`` and ``srun`` in ``folder`` that print what a login node's own print for ``--help`` and
    ``--usage`` (srun's listing pyxis' options) and fail at anything else: all a Slurm dry run asks of them. So the
    production guide's samples print the same here with no Slurm, with the test cluster (whose srun has no
    pyxis: the image would be refused) and without it (the script would say `not checked`)."""
    for command in ("sbatch", "srun"):
        stand_in = folder / command
        stand_in.write_text(
            "#!/bin/sh\n"
            'case "$1" in\n'
            f"  --help) exec cat {shlex.quote(str(LOGIN_NODE_HELP / f'{command}-help.txt'))} ;;\n"
            f"  --usage) exec cat {shlex.quote(str(LOGIN_NODE_HELP / f'{command}-usage.txt'))} ;;\n"
            "esac\n"
            f'echo "{command}: a stand-in for the docs tests: only --help and --usage" >&2\n'
            "exit 1\n")
        stand_in.chmod(0o755)


def test_the_component_lint_sample(tmp_path: pathlib.Path) -> None:
    """The components page's component written out and linted: TS511 at each parameter, and the file never ran
    (a marker it would write is not there)."""
    work = tmp_path / "work"
    (written,) = write_named([b for b in blocks(COMPONENTS) if named_path(b) == "components.py"], work)
    marker = tmp_path / "ran"
    written.write_text(written.read_text() + f"\nopen({str(marker)!r}, 'w').close()\n")
    session = Session(work, sample_env(tmp_path), Randoms(APP_ID))
    run_samples(session, component_samples())
    assert not marker.exists()


def test_the_production_guide_samples(tmp_path: pathlib.Path) -> None:
    """The guide's spec and .torchspec.toml written out, then its samples run in order from their folder, with
    a pyxis login node's sbatch and srun first on PATH (:func:`login_node_clients`)."""
    work = tmp_path / "work"
    written = write_named(blocks(PRODUCTION), work)
    assert {work / "jobs" / "train.yaml", work / "jobs" / "patched.yaml", work / "jobs" / "tokenize.yaml",
            work / ".torchspec.toml"} <= set(written)
    env = sample_env(tmp_path)  # its shims folder, tmp_path/bin, comes first on PATH
    login_node_clients(tmp_path / "bin")
    session = Session(work, env, Randoms(APP_ID))
    run_samples(session, production_samples())
    assert any("--container-image=nvcr.io#acme" in printed for _, printed in session.ran)


def test_the_lint_sample(tmp_path: pathlib.Path) -> None:
    """The page's spec files (blocks opening with ``# PATH``) written out, then its samples run."""
    work = tmp_path / "work"
    write_named(blocks(LINTING), work)
    session = Session(work, sample_env(tmp_path))
    run_samples(session, lint_samples())


def test_the_kubernetes_server_dry_run_sample(tmp_path: pathlib.Path, k8s_cluster: Cluster) -> None:
    """The spec shown just above it, linted against the real cluster's API server (a dry run: nothing is
    created)."""
    sample = kubernetes_lint_sample()
    every = blocks(KUBERNETES)
    spec = every[every.index(sample) - 1]
    assert spec.info == "yaml" and "name: greedy" in spec.text, spec.where
    work = tmp_path / "work"
    work.mkdir()
    (work / first_command(sample).split()[-1]).write_text(spec.text)
    session = Session(work, sample_env(tmp_path, KUBECONFIG=k8s_cluster.kubeconfig), Randoms(APP_ID))
    session.run(steps(sample))
    session.check()


def git(cwd: pathlib.Path, env: dict, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True)


def test_the_diff_samples(tmp_path: pathlib.Path) -> None:
    """samples/diff/base is main; the pull request (a branch, checked out) makes it samples/diff/head: the
    image bumped in jobs/lib/images.j2 (train.yaml and serve.yaml import it), train's lr and replicas, the
    variable its secret is read from, and eval.yaml renamed."""
    env = sample_env(tmp_path, WANDB_API_KEY="old-wandb-key", WANDB_TEAM_API_KEY="new-wandb-key")
    repo = tmp_path / "repo"
    shutil.copytree(SAMPLES / "diff" / "base", repo)
    git(repo, env, "init", "-q", "-b", "main")
    git(repo, env, "add", "-A")
    git(repo, env, "commit", "-q", "-m", "base")
    git(repo, env, "switch", "-q", "-c", "pull-request")
    shutil.rmtree(repo / "jobs")
    shutil.copytree(SAMPLES / "diff" / "head" / "jobs", repo / "jobs")
    git(repo, env, "add", "-A")
    git(repo, env, "commit", "-q", "-m", "the pull request")
    session = Session(repo, env)
    run_samples(session, diff_samples())
    assert not any(secret in printed for _, printed in session.ran for secret in ("old-wandb-key", "new-wandb-key"))


@pytest.fixture
def walkthrough(tmp_path: pathlib.Path) -> Iterator[Session]:
    """A session whose folder will hold ml-jobs with the files of samples/gitops already there (jobs/*.yaml
    and train.py; the sample's `git init` makes the repository of them); every app it started is cancelled."""
    shutil.copytree(SAMPLES / "gitops", tmp_path / "work" / "ml-jobs")
    session = Session(tmp_path / "work", sample_env(tmp_path), Randoms(APP_ID))
    yield session
    cancel_running(session)


def test_the_gitops_walkthrough(walkthrough: Session) -> None:
    """The section's three blocks, one shell session: a repository, apply, a pull request, its merge."""
    run_samples(walkthrough, walkthrough_samples())


def test_the_provenance_sample(tmp_path: pathlib.Path) -> None:
    """samples/provenance committed with fixed dates (so the commit is the page's), then the sample: submit,
    describe (the commit, the content hash, the run options), an edit, and rerun saying what changed."""
    env = sample_env(tmp_path, GIT_AUTHOR_DATE="2026-11-27T12:00:00+00:00",
                     GIT_COMMITTER_DATE="2026-11-27T12:00:00+00:00")
    repo = tmp_path / "repo"
    shutil.copytree(SAMPLES / "provenance", repo)
    git(repo, env, "init", "-q", "-b", "main")
    git(repo, env, "add", "-A")
    git(repo, env, "commit", "-q", "-m", "a job")
    session = Session(repo, env, Randoms(APP_ID))
    run_samples(session, provenance_samples())
