"""Where schedulers keep what they must remember on this machine (local apps, docker watchers, slurm logs).

One folder for all backends, so ``TORCHSPEC_HOME`` moves everything at once
(tests point it at a temporary folder).
"""

from __future__ import annotations

import os


def default_state_dir() -> str:
    """``$TORCHSPEC_HOME``, else ``$XDG_STATE_HOME/torchspec``, else ``~/.local/state/torchspec``."""
    home = os.environ.get("TORCHSPEC_HOME")
    if home:
        return os.path.abspath(os.path.expanduser(home))
    xdg = os.environ.get("XDG_STATE_HOME")
    if xdg:
        return os.path.join(os.path.abspath(os.path.expanduser(xdg)), "torchspec")
    return os.path.join(os.path.expanduser("~"), ".local", "state", "torchspec")
