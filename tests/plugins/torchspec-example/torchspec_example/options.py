"""The example backend's run options: what ``-c`` accepts (``torchspec runopts example``), and their checks."""

from __future__ import annotations

from typing import Dict

from torchspec.errors import AppRefusedError
from torchspec.specs import CfgVal, runopts


def run_opts() -> runopts:
    """The options, with types, defaults and help; torchspec checks names and types before ``check`` runs."""
    opts = runopts()
    opts.add("log_dir", str, "folder that keeps each app's output and exit codes"
                             " (default: example/ in the state folder, $TORCHSPEC_HOME)", default=None)
    opts.add("kill_grace_s", int, "seconds cancel waits after SIGTERM before it SIGKILLs a replica", default=5)
    return opts


def check(cfg: Dict[str, CfgVal]) -> None:
    """What the types cannot say; a refusal is an :class:`AppRefusedError` (exit 2), never a bare ValueError."""
    grace = cfg.get("kill_grace_s")
    if isinstance(grace, int) and not 0 <= grace <= 3600:
        raise AppRefusedError(f"run option kill_grace_s={grace} must be 0 to 3600 seconds")
    log_dir = cfg.get("log_dir")
    if isinstance(log_dir, str) and not log_dir.strip():
        raise AppRefusedError("run option log_dir is empty", "leave it out for the default folder")
