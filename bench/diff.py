#!/usr/bin/env python3
"""Benchmark ``torchspec diff --base`` on a generated repository against ``git diff`` of the same change.

    python bench/diff.py                      # 500 specs, 10 files changed, 5 runs each
    python bench/diff.py --files 2000 --repeat 3
    python bench/diff.py --keep /tmp/diffrepo # keep the generated repository there

It writes a git repository of N realistic spec files (bench/lint.py's
generator) plus a macro file that a few specs import, commits it on ``main``,
then on a branch changes 10 files: 9 specs (one field each, and the file
rewritten in another YAML style, so formatting changes too) and the macro file
(which touches the specs importing it).  It times, each several times (the
median is reported; every command runs once untimed first):

  diff      torchspec diff --base main --format json   (checks it reports exactly the touched specs)
  git-diff  git diff main                                (the text diff of the same change)

and prints the time against the 2 s target and the ratio to ``git diff`` with
PASS or MISS.  ``diff`` only loads what changed and what uses it, so its time
should not grow with the size of the repository: try ``--files 2000``.  The
script exits 0 whatever the timings (``--fail-on-miss`` exits 1 on a MISS).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from common import find_torchspec, fmt_s, median, runner_options, timed
from lint import generate

#: seconds ``torchspec diff --base`` may take on the default repository
TARGET_S = 2.0
CHANGED_SPECS = 9
IMPORTERS = 5
MACROS = "{% macro image() %}ghcr.io/acme/trainer:1.0{% endmacro %}\n"
IMPORTER = """name: imports-{index}
imports: {{m: lib/macros.j2}}
roles:
  - name: trainer
    image: "{{{{ m.image() }}}}"
    entrypoint: python
    args: [train.py, --shard={index}]
"""


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@example.com",
           "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@example.com"}
    return subprocess.run(["git", "-c", "commit.gpgsign=false", *args], cwd=repo, env=env, check=True,
                          capture_output=True, text=True).stdout


def build(repo: Path, count: int, seed: int) -> set[str]:
    """The repository with its two commits; returns the specs the change touches (repository-relative)."""
    import yaml

    jobs = repo / "jobs"
    paths = generate(jobs, count - IMPORTERS, seed)
    (jobs / "lib").mkdir()
    (jobs / "lib" / "macros.j2").write_text(MACROS)
    for i in range(IMPORTERS):
        (jobs / f"imports-{i}.yaml").write_text(IMPORTER.format(index=i))
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    git(repo, "checkout", "-q", "-b", "change")
    touched = set()
    for path in random.Random(seed).sample(paths, CHANGED_SPECS):
        data = yaml.safe_load(path.read_text())
        data["roles"][0].setdefault("env", {})["BENCH_EDIT"] = "1"  # one field; the file rewritten in block style
        path.write_text(yaml.safe_dump(data, sort_keys=True, default_flow_style=False, width=1000))
        touched.add(path.relative_to(repo).as_posix())
    (jobs / "lib" / "macros.j2").write_text(MACROS.replace("1.0", "1.1"))
    touched.update(f"jobs/imports-{i}.yaml" for i in range(IMPORTERS))
    git(repo, "commit", "-q", "-am", "change")
    return touched


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=500, help="spec files in the repository (default 500)")
    ap.add_argument("--repeat", type=int, default=5, help="timed runs; the median is reported (default 5)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--keep", metavar="DIR", help="build the repository in DIR (emptied first) and keep it")
    runner_options(ap)
    args = ap.parse_args()
    ts = find_torchspec(args.runner)
    if ts is None:
        print("torchspec is not installed (pip install -e .)", file=sys.stderr)
        return 2
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="torchspec-bench-diff-"))
    if args.keep:
        shutil.rmtree(work, ignore_errors=True)
    repo = work / "repo"
    repo.mkdir(parents=True)
    try:
        touched = build(repo, args.files, args.seed)
        env = {**os.environ, "TORCHSPEC_HOME": str(work / "home"), "NO_COLOR": "1"}
        runs: dict[str, list[float]] = {"diff": [], "git-diff": []}
        for round_ in range(args.repeat + 1):  # the first round warms caches and is not counted
            took, out = timed(ts + ["diff", "--base", "main", "--format", "json"], env, repo, ok=(1,))
            found = {f["path"] for f in json.loads(out)["files"]}
            if found != touched:
                raise RuntimeError(f"diff reported {sorted(found ^ touched)} differently from the change")
            git_took, _ = timed(["git", "diff", "main"], env, repo)
            if round_:
                runs["diff"].append(took)
                runs["git-diff"].append(git_took)
        diff_s, git_s = median(runs["diff"]), median(runs["git-diff"])
        print(f"{args.files} spec files, 10 files changed ({len(touched)} specs touched), "
              f"{args.repeat} runs (medians)")
        print(f"  torchspec diff --base  {fmt_s(diff_s)}")
        print(f"  git diff               {fmt_s(git_s)}")
        ok = diff_s <= TARGET_S
        print(f"\n{'what':<28} {'value':>9} {'target':>8}  verdict")
        print(f"{'diff --base (s)':<28} {diff_s:9.3f} {'<= ' + str(TARGET_S):>8}  {'PASS' if ok else 'MISS'}")
        print(f"{'diff --base / git diff':<28} {diff_s / git_s:9.1f} {'':>8}  (for reference)")
        return 1 if not ok and args.fail_on_miss else 0
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
