"""Which roles of an app may start now: the ordered start of ``depends_on``, for the backends that start
roles themselves (the ``local`` supervisor, the ``docker`` watcher, the ``ray`` driver).

Each of them runs apart from the specs (the supervisor starts without them, the driver runs on the cluster):
only the standard library here, and plain data.  A role's ``depends_on`` is ``[[ROLE, WHEN], ...]``
(``finished``: every replica of ROLE succeeded; ``ready``: every replica of ROLE is running, or already
succeeded); replica states are :class:`AppState` names (``RUNNING``, ``SUCCEEDED``...).
"""

from __future__ import annotations

from typing import Dict, List, Mapping, Sequence

#: The replica states that count as ready: it was started and has not failed.
_READY = ("RUNNING", "SUCCEEDED")


def met(when: str, states: Sequence[str]) -> bool:
    """Whether replicas in ``states`` (one role's) are ``when`` (``finished`` or ``ready``)."""
    if when == "ready":
        return bool(states) and all(state in _READY for state in states)
    return bool(states) and all(state == "SUCCEEDED" for state in states)


def startable(waiting: Sequence[str], depends_on: Mapping[str, List[List[str]]],
              states: Mapping[str, List[str]]) -> List[str]:
    """The roles of ``waiting`` whose every dependency is met, given each role's replica ``states``."""
    return [name for name in waiting
            if all(met(when, states.get(role, [])) for role, when in depends_on.get(name, []))]


def never_started(waiting: Sequence[str], depends_on: Mapping[str, List[List[str]]]) -> str:
    """What an app that ends with roles still waiting says of them: ``; role 'train' never started (it waits
    for 'download' to be finished)``, or ``""``."""
    parts = [f"role {name!r} never started (it waits for "
             + ", ".join(f"{role!r} to be {when}" for role, when in depends_on.get(name, [])) + ")"
             for name in waiting]
    return "; " + "; ".join(parts) if parts else ""


def waiting_roles(depends_on: Mapping[str, List[List[str]]]) -> Dict[str, List[List[str]]]:
    """The roles that wait for another before they start (a role without dependencies starts at once)."""
    return {name: deps for name, deps in depends_on.items() if deps}


__all__ = ["met", "never_started", "startable", "waiting_roles"]
