"""TorchX's names for what the runner does, beside torchspec's, so code written for TorchX runs as it is.

- Every role gets the job id and parent run id under both names
  (``TORCHSPEC_JOB_ID`` and ``TORCHX_JOB_ID``...): a tracker or script that
  reads TorchX's finds it.
- The caller's parent run id is read from ``TORCHSPEC_PARENT_RUN_ID``, else
  ``TORCHX_PARENT_RUN_ID`` (ours wins when both are set), else the argument.
- Scheduler parameters come from ``TORCHX_*`` variables as well as
  ``TORCHSPEC_*`` (ours win), except the names that mean something else.
- TorchX's scheduler names that differ from ours are aliases: ``local_cwd``
  is ``local`` with ``use_cwd`` on, ``local_docker`` is ``docker``.
- The trackers of the config (``[tracker.NAME]``, or ``.torchxconfig``'s
  ``[torchx:tracker]``) reach every role under both names
  (``TORCHSPEC_TRACKERS``/``TORCHX_TRACKERS``, and each one's
  ``..._TRACKER_<NAME>_CONFIG``); the caller's ``TORCHSPEC_TRACKERS`` or
  ``TORCHX_TRACKERS`` names them instead, as TorchX's runner reads it.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Dict, Mapping, Optional, Tuple

from torchspec.tracker.api import ENV_TRACKERS, tracker_config_env_var_name

if TYPE_CHECKING:
    from torchspec.config import Config

#: Set in every role to the app's handle, so an app (or a tracker in it) can name itself.
ENV_TORCHSPEC_JOB_ID = "TORCHSPEC_JOB_ID"
#: Set in every role when a parent run is known (from the caller or this same variable).
ENV_TORCHSPEC_PARENT_RUN_ID = "TORCHSPEC_PARENT_RUN_ID"
#: TorchX's names for the same two.
ENV_TORCHX_JOB_ID = "TORCHX_JOB_ID"
ENV_TORCHX_PARENT_RUN_ID = "TORCHX_PARENT_RUN_ID"

#: The prefixes of environment variables passed to scheduler factories as keyword arguments, ours first.
SCHEDULER_PARAM_ENV_PREFIXES = ("TORCHSPEC_", "TORCHX_")

#: ``TORCHSPEC_*``/``TORCHX_*`` variables with other meanings: torchspec's and TorchX's own settings, and what
#: the runner and the local scheduler set in every replica (a job may run a Runner itself): passing them on
#: would hand e.g. ``job_id=`` to every scheduler of a job that runs a runner.
_NOT_SCHEDULER_PARAMS = frozenset({
    "JOB_ID", "PARENT_RUN_ID", "DEBUG", "HOME", "TRACKERS",
    "APP_ID", "ROLE_NAME", "REPLICA_ID", "NUM_REPLICAS", "RANK0_HOST", "RESTART_COUNT", "ATTEMPT",
})
#: Prefixes of such names: the test suite's switches (``TORCHSPEC_REQUIRE_DOCKER``...) and the trackers' config.
_NOT_SCHEDULER_PARAM_PREFIXES = ("REQUIRE_", "SKIP_", "TRACKER_")

#: TorchX scheduler names that are not torchspec's, with the torchspec scheduler and the run options each
#: implies (TorchX's ``local_cwd`` runs in the working folder whatever the image).
SCHEDULER_ALIASES: Dict[str, Tuple[str, Mapping[str, object]]] = {
    "local_cwd": ("local", {"use_cwd": True}),
    "local_docker": ("docker", {}),
}


def job_env(handle: str, parent_run_id: Optional[str]) -> Dict[str, str]:
    """The variables the runner sets in every role: the job id (and parent run id) under both names."""
    env = {ENV_TORCHSPEC_JOB_ID: handle, ENV_TORCHX_JOB_ID: handle}
    if parent_run_id:
        env[ENV_TORCHSPEC_PARENT_RUN_ID] = env[ENV_TORCHX_PARENT_RUN_ID] = parent_run_id
    return env


#: Every variable :func:`job_env` may set (``describe`` hides them: they are not the app as written).
JOB_ENV = (ENV_TORCHSPEC_JOB_ID, ENV_TORCHX_JOB_ID, ENV_TORCHSPEC_PARENT_RUN_ID, ENV_TORCHX_PARENT_RUN_ID)


def parent_run_id(given: Optional[str]) -> Optional[str]:
    """The parent run id: the caller's environment (ours, else TorchX's), else ``given``."""
    return os.environ.get(ENV_TORCHSPEC_PARENT_RUN_ID) or os.environ.get(ENV_TORCHX_PARENT_RUN_ID) or given


def scheduler_params_from_env() -> Dict[str, str]:
    """``TORCHSPEC_FOO_BAR=x`` (or ``TORCHX_FOO_BAR=x``) -> ``{"foo_bar": "x"}``, ours winning.

    The prefix is cut, not ``str.strip``-ped as in TorchX (which would eat
    leading and trailing letters of the name too).
    """
    params: Dict[str, str] = {}
    for prefix in reversed(SCHEDULER_PARAM_ENV_PREFIXES):  # TorchX's first, so that ours overwrite them
        for key, value in os.environ.items():
            if not key.upper().startswith(prefix):
                continue
            rest = key[len(prefix):].upper()
            if rest and rest not in _NOT_SCHEDULER_PARAMS and not rest.startswith(_NOT_SCHEDULER_PARAM_PREFIXES):
                params[rest.lower()] = value
    return params


def scheduler_alias(name: str, registered: Mapping[str, object]) -> Tuple[str, Mapping[str, object]]:
    """The scheduler ``name`` means and the run options it implies: itself and none, unless it is one of
    TorchX's names (:data:`SCHEDULER_ALIASES`) that no installed scheduler registers as its own."""
    if name in registered or name not in SCHEDULER_ALIASES:
        return name, {}
    return SCHEDULER_ALIASES[name]


#: The prefixes of the variables holding each tracker's config (``TORCHX_TRACKER_FILE_CONFIG``), as
#: :func:`torchspec.tracker.api.tracker_config_env_var_name` writes them.
TRACKER_CONFIG_PREFIXES = ("TORCHSPEC_TRACKER_", "TORCHX_TRACKER_")


def configured_trackers(config: Optional["Config"]) -> Dict[str, Optional[str]]:
    """The trackers every job gets, each with its config: the config file's, or the ones the caller's
    ``TORCHSPEC_TRACKERS``/``TORCHX_TRACKERS`` names (their config still from the file)."""
    from torchspec.config import trackers

    found = trackers(config) if config is not None else {}
    named = next((os.environ[name] for name in ENV_TRACKERS if os.environ.get(name)), None)
    if named is None:
        return found
    return {name: found.get(name) for name in (n.strip() for n in named.split(",")) if name}


def tracker_env(trackers: Mapping[str, Optional[str]]) -> Dict[str, str]:
    """The variables that tell a job its trackers (:func:`torchspec.tracker.app_run_from_env` reads them)."""
    if not trackers:
        return {}
    env = {name: ",".join(trackers) for name in ENV_TRACKERS}
    for tracker, config in trackers.items():
        if config:
            for prefix in ("TORCHSPEC", "TORCHX"):
                env[tracker_config_env_var_name(tracker, prefix)] = config
    return env


def is_job_env(name: str) -> bool:
    """Whether the runner set ``name`` in every role (``describe`` leaves these out)."""
    return name in JOB_ENV or name in ENV_TRACKERS or name.startswith(TRACKER_CONFIG_PREFIXES)
