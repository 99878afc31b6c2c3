"""A role that starts after another: ``depends_on: [{role: download, when: finished}]``.

``Role.depends_on`` lists :class:`RoleDependency` items.  ``when`` says what
the earlier role must have done before any replica of the later one starts:

- ``finished``: every replica of it exited with 0 (a data download, a
  conversion); if it fails, the later role never starts and the app fails;
- ``ready``: every replica of it is running (a parameter server, a database).

How each scheduler waits is the scheduler's business (JobSet's ``dependsOn``,
the ordered start of local, docker, ray and Slurm's batch script); one
that cannot wait refuses the app saying why, never starts the role at once.
:func:`dependency_problems` is the one check of the references themselves
(a role that does not exist, the role itself, a cycle), used by lint (TS510)
on spec data and by the runner on every AppDef.  Plain data: no I/O here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterator, List, Sequence, Set, Tuple

from torchspec.errors import did_you_mean_hint

#: Every replica of the earlier role exited with 0.
FINISHED = "finished"
#: Every replica of the earlier role is running.
READY = "ready"
WHENS = (FINISHED, READY)


@dataclass(frozen=True)
class RoleDependency:
    """Start no replica of the role holding this before every replica of ``role`` is ``when`` (see module)."""

    role: str
    when: str = FINISHED


#: ``(path below the role, message, hint)``: one problem of a role's ``depends_on``.
Problem = Tuple[Tuple[object, ...], str, str]


def dependency_problems(roles: Sequence[Tuple[str, Sequence[RoleDependency]]]) -> Iterator[Tuple[int, Problem]]:
    """``(role index, problem)`` for each reference to a missing role, to the role itself, of an unknown ``when``,
    and once for each cycle (at the reference that closes it): a scheduler would wait forever on any of them."""
    names = [name for name, _ in roles]
    for index, (name, deps) in enumerate(roles):
        for position, dep in enumerate(deps):
            at: Tuple[object, ...] = ("depends_on", position)
            if dep.when not in WHENS:
                yield index, (at + ("when",), f"role {name!r} waits for {dep.role!r} to be {dep.when!r}, which no "
                              f"scheduler knows", f"write one of {', '.join(WHENS)}")
            if dep.role == name:
                yield index, (at + ("role",), f"role {name!r} depends on itself: it would never start",
                              "name another role, or drop this item")
            elif dep.role not in names:
                hint = did_you_mean_hint(dep.role, [n for n in names if n != name], "the app's other roles")
                yield index, (at + ("role",), f"role {name!r} depends on {dep.role!r}, which is no role of the app",
                              hint)
    yield from _cycles(roles)


def _cycles(roles: Sequence[Tuple[str, Sequence[RoleDependency]]]) -> Iterator[Tuple[int, Problem]]:
    """Each cycle once, at the reference that closes it, found by a depth-first walk in the roles' order."""
    index_of = {name: i for i, (name, _) in enumerate(roles)}
    state: Dict[str, int] = {}  # 1: on the walk's path, 2: done
    path: List[str] = []

    def walk(name: str) -> Iterator[Tuple[int, Problem]]:
        state[name] = 1
        path.append(name)
        for position, dep in enumerate(roles[index_of[name]][1]):
            if dep.role == name or dep.role not in index_of:
                continue  # said above
            if state.get(dep.role) == 1:
                loop = path[path.index(dep.role):] + [dep.role]
                yield index_of[name], (("depends_on", position, "role"),
                                       f"roles wait for each other in a cycle: {' -> '.join(loop)}; none would start",
                                       "drop one of these dependencies")
            elif dep.role not in state:
                yield from walk(dep.role)
        path.pop()
        state[name] = 2

    for name, _ in roles:
        if name not in state:
            yield from walk(name)


def start_waves(roles: Sequence[Tuple[str, Sequence[RoleDependency]]]) -> List[List[str]]:
    """The roles in the order they can start: each wave's roles wait only for roles of earlier waves.
    Expects references :func:`dependency_problems` found no problem in."""
    left = {name: {d.role for d in deps} for name, deps in roles}
    waves: List[List[str]] = []
    done: Set[str] = set()
    while left:
        wave = [name for name, needs in left.items() if needs <= done]
        if not wave:
            raise ValueError(f"the roles {', '.join(left)} wait for each other")
        waves.append(wave)
        done.update(wave)
        for name in wave:
            del left[name]
    return waves


__all__ = ["FINISHED", "READY", "WHENS", "RoleDependency", "dependency_problems", "start_waves"]
