"""Values read with ``env()`` are secrets: nothing torchspec prints or keeps for ``describe`` holds them.

A spec from a pull request can read CI secrets with ``{{ env('TOKEN') }}``.
The loader records every variable an ``env()`` call read in this process
(:data:`ENV_READ`); the value of each (three characters or more: shorter
ones would blank out digits and words everywhere) is replaced by
``<value from env(NAME)>``:

- in data, before it is printed or encoded (:func:`redact_data`): render's
  YAML and JSON, a dry run's request, the copy of the spec a scheduler keeps
  for ``describe`` (local's and slurm's spec.json, docker's role label,
  kubernetes' role annotations).  Redacting before encoding is what makes it
  hold for any value: once shell-quoted, YAML- or JSON-escaped, a value with
  quotes, backslashes or non-ASCII letters no longer appears as written;
- in text that quotes a value (:func:`redact_text`): diagnostics and error
  messages, where the value may also appear as Python's ``repr`` or a JSON
  string writes it.

Names (of the app and roles) are left: they name containers, pods and log
prefixes, so a secret used as a name cannot be hidden.  What the job itself
prints, and what the backend shows of a running job (``docker inspect``,
``kubectl get pod``), is beyond torchspec.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
from typing import Any, Collection, Iterable, Iterator, List, Optional, Tuple

#: Every variable an ``env()`` call read in this process (the loader's Renderer adds to it).
ENV_READ: set[str] = set()
#: Shorter values are left as they are.
MIN_LENGTH = 3


def placeholder(name: str) -> str:
    """What a value read from ``name`` shows as."""
    return f"<value from env({name})>"


def secrets(names: Optional[Iterable[str]] = None) -> List[Tuple[str, str]]:
    """``(value, name)`` of every variable ``env()`` read (of ``names``, where given) that is set and long
    enough, longest value first."""
    found = {(os.environ[n], n) for n in (ENV_READ if names is None else names)
             if len(os.environ.get(n, "")) >= MIN_LENGTH}
    return sorted(found, key=lambda pair: (-len(pair[0]), pair[1]))


def _forms(value: str) -> Iterator[str]:
    """``value`` as written, then as Python's repr and JSON write it inside their quotes, longest first."""
    seen = {value}
    yield value
    for form in sorted({repr(value)[1:-1], ascii(value)[1:-1], json.dumps(value)[1:-1],
                        json.dumps(value, ensure_ascii=False)[1:-1]}, key=len, reverse=True):
        if form not in seen:
            seen.add(form)
            yield form


def redact_text(text: str, names: Optional[Iterable[str]] = None) -> str:
    """``text`` with every secret (of the variables ``names``, where given), as written or as repr and JSON
    quote it, replaced by its placeholder."""
    for value, name in secrets(names):
        for form in _forms(value):
            text = text.replace(form, placeholder(name))
    return text


def redact_data(data: Any, keep: Collection[str] = ()) -> Any:
    """A copy of ``data`` (mappings, lists, tuples, dataclasses and plain objects, to any depth) with every
    string's secrets replaced; the values under a mapping key in ``keep`` (e.g. ``name``) stay as they are.

    ``data`` itself when there is no secret to hide.  Mapping keys are left.
    """
    found = secrets()
    return _redacted(data, found, frozenset(keep)) if found else data


def _redacted(data: Any, found: List[Tuple[str, str]], keep: frozenset) -> Any:
    if type(data) is str:  # not str subclasses: enum values are no secrets and must stay enums
        for value, name in found:
            data = data.replace(value, placeholder(name))
        return data
    if isinstance(data, dict):
        out = copy.copy(data)
        for key, value in data.items():
            out[key] = value if key in keep else _redacted(value, found, keep)
        return out
    if type(data) in (list, tuple):
        return type(data)(_redacted(item, found, keep) for item in data)
    if _is_record(data):
        out = copy.copy(data)
        for attr, value in vars(data).items():
            object.__setattr__(out, attr, value if attr in keep else _redacted(value, found, keep))
        return out
    return data


def _is_record(data: Any) -> bool:
    """A dataclass instance, or an object of a torchspec class (a scheduler's request), but no function."""
    if isinstance(data, type) or callable(data) or not hasattr(data, "__dict__"):
        return False
    return dataclasses.is_dataclass(data) or type(data).__module__.startswith("torchspec")


def for_describe(spec: Any) -> Any:
    """The copy of a spec (as :func:`~torchspec.specs.convert.dump_app` writes it) that a scheduler keeps for
    ``describe``: secrets hidden, names kept (a scheduler finds its roles by them).

    ``describe`` runs later, in a process that cannot know what was secret, so
    the copy is made safe when the app is submitted.  Re-running a described
    app needs those values passed again.
    """
    return redact_data(spec, keep=("name",))
