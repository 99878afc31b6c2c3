"""The names and numbers every part of the ``local`` backend agrees on.

State names as ``state.json`` stores them and their :class:`AppState`, the
files of an app folder, the environment variables the supervisor sets, and
the timings of supervisor liveness.  The lowest module of the package: it
imports nothing else from it, so the scheduler, the supervisor and the state
file format can all depend on it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, Optional

if TYPE_CHECKING:
    from torchspec.specs import AppState

#: Bump when ``state.json`` or ``request.json`` change (2: one ``output.log`` per replica); readers take older ones.
FORMAT_VERSION = 2

# The files of the state dir and of one app folder (see the layout in the package docstring).
APPS = "apps"
SPEC_FILE = "spec.json"
REQUEST_FILE = "request.json"
STATE_FILE = "state.json"
LOCK_FILE = "state.lock"
SUPERVISOR_LOCK = "supervisor.lock"
SUPERVISOR_LOG = "supervisor.log"

#: The supervisor's variables that carry secret values from schedule to the replicas (never to a file):
#: torchspec.schedulers.secrets.CARRIER_PREFIX, repeated here for the supervisor, which imports no specs.
CARRIER_PREFIX = "TORCHSPEC_CARRIED_SECRET_"

# The files of one replica's folder: its output (see logs.py), and the reply file it may leave.
OUTPUT_LOG = "output.log"
ERROR_FILE = "error.json"
# What apps of FORMAT_VERSION 1 stored instead of output.log.
STDOUT_LOG = "stdout.log"
STDERR_LOG = "stderr.log"
COMBINED_LOG = "combined.log"

#: Names of the app states as stored; terminal ones are never overwritten.
TERMINAL = frozenset({"SUCCEEDED", "FAILED", "CANCELLED"})

#: ``state.json`` stores states by name; anything unrecognised reads as UNKNOWN.  Filled on first use, so
#: the supervisor, which only writes names, never imports the specs.
_STATES: Dict[str, "AppState"] = {}

#: Set by the supervisor at each launch: 0 first, then how often this replica was restarted.
ENV_RESTART_COUNT = "TORCHSPEC_RESTART_COUNT"
#: Where a replica (torchelastic's ``@record``) writes its error as JSON, shown by ``describe``.
ENV_ERROR_FILE = "TORCHELASTIC_ERROR_FILE"

#: The host every replica reaches rank 0 at.
RANK0_HOST = "localhost"

#: How often a live supervisor refreshes its heartbeat in ``state.json``.
HEARTBEAT_INTERVAL_S = 1.0
#: A heartbeat older than this is reported as a stalled supervisor; it does not
#: end the app, since a suspended laptop stalls every process for hours.
HEARTBEAT_TIMEOUT_S = 30.0
#: How long a supervisor may take from ``schedule`` to holding its lock before
#: a start-up that never finished counts as dead.
STARTUP_TIMEOUT_S = 120.0


def app_state(name: Optional[str]) -> "AppState":
    """The :class:`AppState` of a state name read from ``state.json`` (UNKNOWN for anything else)."""
    if not _STATES:
        from torchspec.specs import AppState

        _STATES.update((state.name, state) for state in AppState)
    return _STATES.get(name or "") or _STATES["UNKNOWN"]


__all__ = [
    "APPS",
    "COMBINED_LOG",
    "ENV_ERROR_FILE",
    "ENV_RESTART_COUNT",
    "ERROR_FILE",
    "FORMAT_VERSION",
    "HEARTBEAT_INTERVAL_S",
    "HEARTBEAT_TIMEOUT_S",
    "LOCK_FILE",
    "RANK0_HOST",
    "REQUEST_FILE",
    "SPEC_FILE",
    "STARTUP_TIMEOUT_S",
    "STATE_FILE",
    "STDERR_LOG",
    "OUTPUT_LOG",
    "STDOUT_LOG",
    "SUPERVISOR_LOCK",
    "SUPERVISOR_LOG",
    "TERMINAL",
    "app_state",
]
