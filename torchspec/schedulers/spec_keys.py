"""A backend's own keys in a spec: ``BACKEND.*`` resource capabilities and role metadata, a typo refused.

A spec says what it wants of one scheduler under that scheduler's prefix
(``slurm.gres``, ``kubernetes.pod_patch``).  Keys of other schedulers are
left alone, so one spec runs anywhere; but a key under the scheduler's own
prefix that it does not know is a typo (``slurm.gress``) that would
otherwise be dropped without a word.  :func:`check_backend_keys` refuses
every such key at once, each at its place in the spec (``lint --scheduler``
reports one TS601 per key, at its line) with a did-you-mean.
"""

from __future__ import annotations

from typing import Any, Collection, Iterable, List, Tuple

from torchspec.errors import AppRefusedError, did_you_mean
from torchspec.specs import AppDef

#: Where a role's capabilities and metadata sit in the spec data (``roles[i].resource.capabilities``).
_PLACES = (("resource", "capabilities"), ("metadata",))
_WHAT = {"capabilities": "resource capability", "metadata": "metadata key"}


def unknown_key(backend: str, role: str, what: str, key: str, known: Collection[str]) -> str:
    """The message for one unknown key: what it is, where, the guess, and what the backend knows."""
    guess = did_you_mean(key, known)
    knows = ", ".join(repr(k) for k in sorted(known)) or "none"
    return (f"role {role!r}: {what} {key!r} is not one the {backend} scheduler knows"
            + (f": did you mean {guess!r}?" if guess else "") + f" (it knows {knows})")


def backend_key_problems(app: AppDef, backend: str, capabilities: Collection[str],
                         metadata: Collection[str] = ()) -> List[Tuple[Tuple[Any, ...], str]]:
    """(where in the spec, message) for every ``BACKEND.*`` capability or role metadata key the backend does
    not know; other keys (other schedulers', node labels) are not looked at."""
    prefix = backend + "."
    problems: List[Tuple[Tuple[Any, ...], str]] = []
    for index, role in enumerate(app.roles):
        for place, keys, known in ((_PLACES[0], role.resource.capabilities, capabilities),
                                   (_PLACES[1], role.metadata, metadata)):
            for key in _own(keys, prefix):
                if key not in known:
                    problems.append((("roles", index, *place, key),
                                     unknown_key(backend, role.name, _WHAT[place[-1]], key, known)))
    return problems


def _own(keys: Iterable[Any], prefix: str) -> List[str]:
    return [str(k) for k in keys if str(k).startswith(prefix)]


def check_backend_keys(app: AppDef, backend: str, capabilities: Collection[str],
                       metadata: Collection[str] = ()) -> None:
    """Refuse ``app`` (one :class:`AppRefusedError` naming every key, each at its place) when a role has a
    ``BACKEND.*`` capability or metadata key the backend does not know."""
    problems = backend_key_problems(app, backend, capabilities, metadata)
    if problems:
        raise AppRefusedError("; ".join(message for _, message in problems),
                              f"{backend}'s keys are documented on its page (docs/schedulers/{backend}.md); keys"
                              f" of other schedulers are left alone",
                              path=problems[0][0], problems=problems)
