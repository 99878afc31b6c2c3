"""The run options of the ``docker`` scheduler (``-c KEY=VALUE``) and the checks of their values.

Declared once here, so ``torchspec runopts docker``, the dry run and
``lint --scheduler docker`` all see the same options and defaults.
"""

from __future__ import annotations

from typing import Dict, List, Mapping

from torchspec.errors import AppRefusedError
from torchspec.schedulers import grace, request_timeout
from torchspec.schedulers.docker.labels import DEFAULT_STOP_TIMEOUT_S, PULL_POLICIES
from torchspec.specs import CfgVal, runopts


def docker_run_opts() -> runopts:
    """The run options of ``docker``; declared once, here."""
    opts = runopts()
    opts.add(
        "network",
        type_=str,
        default=None,
        help="network for the containers: host, none, bridge or an existing network's name"
        " (default: a new network per app, with a hostname per replica, removed with the app)",
    )
    opts.add("copy_env", type_=List[str], default=None,
             help="environment variables to copy from the submitting shell: names or globs, e.g. AWS_*;HF_TOKEN")
    opts.add("env", type_=Dict[str, str], default=None,
             help="extra environment variables for every replica, as KEY:VALUE;KEY2:VALUE2; they override the role's")
    opts.add("privileged", type_=bool, default=False, help="run the containers privileged")
    opts.add("shm_size", type_=str, default=None, help="size of /dev/shm, e.g. 2g (Docker's default is 64m)")
    opts.add("publish_ports", type_=bool, default=False,
             help="publish every port of a role's port_map on a host port Docker picks (see status)")
    opts.add("publish_host_ip", type_=str, default="127.0.0.1",
             help="host address published ports listen on (0.0.0.0 for every interface)")
    opts.add("pull", type_=str, default="missing",
             help="when to pull images: missing (only images not present locally), always, never")
    opts.add("keep_containers", type_=bool, default=False,
             help="cancel stops the containers but keeps them (and their logs) until torchspec delete")
    opts.add("stop_timeout", type_=int, default=DEFAULT_STOP_TIMEOUT_S,
             help="seconds between SIGTERM and SIGKILL when containers are stopped (grace_period's older name)")
    grace.add_option(opts, "the containers' stop timeout")
    request_timeout.add_option(opts)
    return opts


def stop_timeout(cfg: Mapping[str, CfgVal]) -> int:
    """The grace period between SIGTERM and SIGKILL (``grace_period``, or its older name here, ``stop_timeout``);
    a negative one is refused."""
    chosen = grace.grace_period(cfg, "stop_timeout", DEFAULT_STOP_TIMEOUT_S)
    return DEFAULT_STOP_TIMEOUT_S if chosen is None else chosen


def pull_policy(cfg: Mapping[str, CfgVal]) -> str:
    """When to pull images (one of ``PULL_POLICIES``); ``missing`` where unset."""
    pull = str(cfg.get("pull") or "missing")
    if pull not in PULL_POLICIES:
        raise AppRefusedError(f"pull must be one of {', '.join(PULL_POLICIES)}, not {pull!r}")
    return pull
