"""snake_case <-> camelCase for run-option names.

Schedulers declare their options in snake_case (``cluster_id``) while
configs written for tools in other ecosystems (Kubernetes manifests, JSON
APIs, ``.torchxconfig`` files shared with such tools) often spell them in
camelCase (``clusterId``).  :class:`~torchspec.specs.runopts.runopts`
accepts both and keeps the declared spelling; these two functions are the
only place that knows how the spellings map.

Both conversions touch only what they must, so names that are neither
(``K``, ``UNKWN``, ``aws_p3.2xlarge``) come back unchanged and never alias
an unrelated option.
"""

from __future__ import annotations

import re

# an upper-case letter that ends a lower-case or digit run starts a new word
_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])([A-Z])")
# an underscore between two word characters ends a word (a leading one is kept)
_SNAKE_BOUNDARY = re.compile(r"(?<=[A-Za-z0-9])_([a-z0-9])")


def camel_to_snake(name: str) -> str:
    """``"clusterName"`` -> ``"cluster_name"``; a name without camel humps is returned as is."""
    return _CAMEL_BOUNDARY.sub(lambda match: "_" + match.group(1).lower(), name)


def snake_to_camel(name: str) -> str:
    """``"cluster_name"`` -> ``"clusterName"``; a name without inner underscores is returned as is."""
    return _SNAKE_BOUNDARY.sub(lambda match: match.group(1).upper(), name)


def spellings(name: str) -> tuple[str, ...]:
    """``name`` first, then its other spelling if it has one: the keys a lookup tries, in order."""
    other = camel_to_snake(name)
    if other == name:
        other = snake_to_camel(name)
    return (name,) if other == name else (name, other)


__all__ = ["camel_to_snake", "snake_to_camel", "spellings"]
