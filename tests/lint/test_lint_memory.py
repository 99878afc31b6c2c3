"""Linting many files keeps nothing of each file once it is reported: memory stays flat in the number of files."""

from __future__ import annotations

import gc
import pathlib
import tracemalloc

from torchspec.lint import LintOptions, lint_paths

SPEC = """name: job-{n}
roles:
  - name: trainer
    image: ghcr.io/acme/train:{n}
    entrypoint: python
    args: ["-m", "train", "--epochs", "{n}"]
    num_replicas: {replicas}
    max_retries: 3
    resource: {{cpu: 4, gpu: 0, memMB: 1024}}
    port_map: {{c10d: 29500}}
    mounts:
      - {{type: bind, src_path: /data, dst_path: /data, read_only: true}}
    metadata: {{ratio: 0.5, tag: null, on: true}}
"""


def _specs(folder: pathlib.Path, count: int) -> pathlib.Path:
    folder.mkdir()
    for n in range(count):
        (folder / f"spec{n}.yaml").write_text(SPEC.format(n=n, replicas=n % 4 + 1))
    return folder


def _retained_after(paths: list[str]) -> int:
    result = lint_paths(paths, LintOptions(jobs=1))  # in this process, whose memory is measured
    assert result.files and not result.diagnostics, [str(d) for d in result.diagnostics[:3]]
    del result
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


def test_linting_more_files_retains_no_more_memory(tmp_path: pathlib.Path) -> None:
    few, many = _specs(tmp_path / "few", 50), _specs(tmp_path / "many", 400)
    lint_paths([str(few)], LintOptions(jobs=1))  # imports, the schema, the caches
    tracemalloc.start()
    try:
        before = _retained_after([str(few)])
        after = _retained_after([str(many)])
    finally:
        tracemalloc.stop()
    # every scalar PyYAML built used to be remembered for ever: ~2 KB a file of this size
    assert (after - before) / 400 < 256, f"{after - before} bytes kept after linting 400 more files"
