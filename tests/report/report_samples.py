"""One hand-built lint result that exercises every corner the reporters must handle.

A plain module with a unique name (not a conftest) so that every test file can
import it without clashing with another folder's helpers.
"""

from __future__ import annotations

from torchspec.errors import Diagnostic
from torchspec.lint.result import LintResult

TRAIN = "jobs/train.yaml"
CLEAN = "jobs/clean.yaml"
SERVE = "jobs/serve.toml"
UNICODE = "jobs/ünïcode spec.json"


def sample_result() -> LintResult:
    """Four files (one clean), errors and a warning, a second YAML document, missing positions,
    a multi-line hint, tabs and wide characters in a source line, and a non-ASCII file name."""
    return LintResult(
        files=[TRAIN, CLEAN, SERVE, UNICODE],
        diagnostics=[
            Diagnostic("TS202", "unknown key 'num_replica' in role 'trainer'", file=TRAIN, line=6, column=5,
                       path="roles[0].num_replica", hint="did you mean 'num_replicas'?",
                       source_line="    num_replica: 2\n"),
            Diagnostic("TS305", "param 'x' is declared but never used", file=TRAIN, line=2, column=3,
                       path="params.x", severity="warning", document=1, source_line="  x: {type: string}"),
            Diagnostic("TS001", "the file is not UTF-8 text", file=SERVE,
                       hint="save it as UTF-8\nor remove the byte at offset 12"),
            Diagnostic("TS204", "'gpux' is not one of 'gpu', 'cpu'", file=UNICODE, line=3, column=5,
                       path="roles[1].resource.gpu", hint="use one of: gpu, cpu",
                       source_line='名前:\t"gpux"'),
        ],
    )

