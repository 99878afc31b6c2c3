"""``torchx.specs.finder``: components by name, with their description and what the component linter finds.

``get_component("dist.ddp")`` (a built-in), ``get_component("acme.train")``
(an installed package's) and ``get_component("path/to/comp.py:trainer")``
each return a :class:`_Component` whose ``fn`` makes the AppDef: a Python
component's own function, or, for a spec file, a function that renders it
with its keyword arguments as params.  A Python component is checked by the
component linter (:mod:`torchspec.specs.file_linter`) first: findings raise
:class:`ComponentValidationException`, as in TorchX.  Finding a component
needs the loader, so this module sits in the loader layer, by name, though
it is found where TorchX users import it from.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List

from torchspec.components import (ComponentNotFoundError, find_component, is_python_component, list_builtins,
                                  spec_description)
from torchspec.errors import ComponentError

__all__ = ["ComponentNotFoundException", "ComponentValidationException", "get_builtin_source", "get_component",
           "get_components"]

#: TorchX's name for a component that cannot be found (a UsageError: the CLI exits 2 with a did-you-mean).
ComponentNotFoundException = ComponentNotFoundError


class ComponentValidationException(ComponentError):
    """The component breaks the component standard (TorchX's name; the findings are in the message)."""


@dataclass
class _Component:
    """A component: its name, one-line description, function name and function, and the linter's findings."""

    name: str
    description: str
    fn_name: str
    fn: Callable[..., Any]
    validation_errors: List[str] = field(default_factory=list)


def get_component(name: str) -> _Component:
    """The component ``name``: a Python component (``FILE.py:FUNCTION``), a package's or a built-in.

    Raises:
        ComponentNotFoundException: no such component (with a did-you-mean).
        ComponentValidationException: a Python component the component linter finds fault with.
    """
    if is_python_component(name):
        component = _python(name)
        if component.validation_errors:
            raise ComponentValidationException(f"Component {name} has validation errors: \n "
                                               + "\n".join(component.validation_errors))
        return component
    from torchspec.components.packages import find_package_component

    package = find_package_component(name)
    if package is not None and package.fn is not None:
        return _function(name, package.fn, package.fn.__name__)
    return _spec(name, package.path if package is not None and package.path else find_component(name))


def get_components() -> Dict[str, _Component]:
    """Every built-in component by name (TorchX lists its built-ins the same way)."""
    return {name: _spec(name, path) for name, (path, _) in list_builtins().items()}


def get_builtin_source(name: str) -> str:
    """The text of the built-in component ``name`` (a spec file here; TorchX's are Python)."""
    with open(find_component(name), encoding="utf-8") as f:
        return f.read()


def _python(ref: str) -> _Component:
    from torchspec.components.python import load_function
    from torchspec.specs.file_linter import validate

    path, _, function = ref.rpartition(":")
    if not os.path.isfile(path):
        raise ComponentNotFoundException(f"component {ref}: no such file: {path}",
                                         "a Python component is FILE.py:FUNCTION")
    errors = [f"{path}:{m.line}:{m.char + 1}: {m.description}" for m in validate(path, function)]
    if errors:
        return _Component(ref, "", function, lambda *a, **k: None, errors)
    return _function(ref, load_function(ref), function)


def _function(name: str, fn: Callable[..., Any], fn_name: str) -> _Component:
    from torchspec.specs.file_linter import get_fn_docstring

    return _Component(name, get_fn_docstring(fn)[0], fn_name, fn)


def _spec(name: str, path: str) -> _Component:
    def render(**params: Any) -> Any:
        """The spec rendered with these params (lists and maps as JSON, as ``-p`` takes them)."""
        from torchspec.loader import load_app

        return load_app(path, {key: _as_param(value) for key, value in params.items()})

    return _Component(name, spec_description(path), os.path.splitext(os.path.basename(path))[0], render)


def _as_param(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)
