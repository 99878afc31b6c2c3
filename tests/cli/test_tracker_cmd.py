"""``torchspec tracker lineage`` (also TorchX's ``tracker list lineage``) and its filters, over a file tracker."""

from __future__ import annotations

import json
import pathlib

import tracker_support
from torchspec.tracker.backend.fsspec import FsspecTracker

PARENT, CHILD, OTHER = "local://s/prep-1", "local://s/train-2", "local://s/eval-3"


def test_lineage_in_both_places_with_torchx_filters(tmp_path: pathlib.Path) -> None:
    tracker = FsspecTracker(str(tmp_path / "runs"))
    tracker.add_source(CHILD, PARENT, "dataset")
    tracker.add_source(CHILD, OTHER, "vocab")
    tracker.add_source("local://s/eval-4", CHILD)
    (tmp_path / ".torchspec.toml").write_text(f'[tracker.file]\nconfig = "{tmp_path / "runs"}"\n')
    cli = tracker_support.cli_in(tmp_path)

    whole = cli("tracker", "lineage", CHILD).stdout.splitlines()
    assert whole == [CHILD, f"  from {PARENT} (dataset)", f"  from {OTHER} (vocab)", "  to   local://s/eval-4"]
    assert cli("tracker", "list", "lineage", CHILD).stdout.splitlines() == whole  # where TorchX has it
    assert cli("tracker", "list", "lineage", "--sources-only", CHILD).stdout.splitlines() == whole[:3]
    assert cli("tracker", "list", "lineage", "--descendants-only", CHILD).stdout.splitlines() == [whole[0], whole[3]]
    found = json.loads(cli("tracker", "lineage", "--artifact", "vocab", "-o", "json", CHILD).stdout)
    assert found == {"run_id": CHILD, "children": ["local://s/eval-4"],
                     "sources": [{"source_run_id": OTHER, "artifact_name": "vocab"}]}
    both = cli("tracker", "list", "lineage", "--sources-only", "--descendants-only", CHILD)
    assert both.returncode == 2 and "not both" in both.stderr, both.stderr
