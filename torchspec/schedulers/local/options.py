"""The run options of the ``local`` scheduler, declared once, and how a resolved cfg is read.

``runopts`` has already checked each value's type by the time the translator
sees the cfg; the readers here only turn what may be absent into what the
request needs.
"""

from __future__ import annotations

from typing import Dict, Mapping

from torchspec.schedulers import grace
from torchspec.specs import CfgVal, runopts

#: Seconds between SIGTERM and SIGKILL when the ``kill_grace_s`` option is not given.
DEFAULT_KILL_GRACE_S = 5


def local_run_opts() -> runopts:
    """The run options of ``local``; declared once, here."""
    opts = runopts()
    opts.add(
        "state_dir",
        type_=str,
        default=None,
        help="folder for this app's state and logs (default: $TORCHSPEC_HOME, else $XDG_STATE_HOME/torchspec,"
        " else ~/.local/state/torchspec); the default folder keeps a link so status and logs still find it",
    )
    opts.add(
        "use_cwd",
        type_=bool,
        default=False,
        help="run every role in the current folder whatever its image says (like TorchX's local_cwd),"
        " e.g. to try locally a spec written for a container scheduler",
    )
    opts.add(
        "prepend_cwd",
        type_=bool,
        default=False,
        help="put the role's folder (its image) first on the replicas' PATH instead of last,"
        " so programs there win over same-named ones on PATH",
    )
    opts.add(
        "auto_set_cuda_visible_devices",
        type_=bool,
        default=False,
        help="give each replica of a role that asks for GPUs its own CUDA_VISIBLE_DEVICES (resource.gpu"
        " devices each); does nothing when the app asks for more GPUs than nvidia-smi lists",
    )
    opts.add(
        "kill_grace_s",
        type_=int,
        default=DEFAULT_KILL_GRACE_S,
        help="seconds between SIGTERM and SIGKILL when replicas are stopped (cancel, restart, failure)",
    )
    grace.add_option(opts, "kill_grace_s is its older name here")
    opts.add(
        "env",
        type_=Dict[str, str],
        default=None,
        help="extra environment variables for every replica, as KEY:VALUE;KEY2:VALUE2;"
        " they override the role's env",
    )
    return opts


def extra_env(cfg: Mapping[str, CfgVal]) -> Dict[str, str]:
    """The ``env`` option as strings; empty when it is not given."""
    raw_env = cfg.get("env")
    return {str(k): str(v) for k, v in raw_env.items()} if isinstance(raw_env, dict) else {}


def kill_grace_s(cfg: Mapping[str, CfgVal]) -> int:
    """``grace_period`` (or its older name here, ``kill_grace_s``), or the default when a caller passed a cfg
    without either."""
    chosen = grace.grace_period(cfg, "kill_grace_s", DEFAULT_KILL_GRACE_S)
    return DEFAULT_KILL_GRACE_S if chosen is None else chosen


__all__ = ["DEFAULT_KILL_GRACE_S", "extra_env", "kill_grace_s", "local_run_opts"]
