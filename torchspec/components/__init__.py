"""Built-in components: ordinary spec files shipped inside the package.

TorchX's built-ins are Python functions (``torchx.components.dist.ddp``);
ours are spec files, so the same linter, renderer and JSON Schema apply to
them as to any user spec, and ``torchspec render dist.ddp`` shows exactly what
would run.  A component's name is its place under this folder with the
suffix dropped: ``utils/echo.yaml`` is ``utils.echo`` and ``dist/ddp.yaml``
is ``dist.ddp``, the names TorchX users already type.

Jinja files next to a spec (``*.j2``) are its imports, not components.
"""

from __future__ import annotations

import os
import re

from torchspec.errors import UsageError

__all__ = ["COMPONENTS_DIR", "ComponentNotFoundError", "builtin_name", "find_component", "is_python_component",
           "list_builtins", "refuse_python", "spec_description"]

#: ``FILE.py:FUNCTION`` (the path may hold ``:``; the last one splits): a Python component, see
#: :mod:`torchspec.components.python`.
PYTHON_COMPONENT = re.compile(r"^(?P<path>.+\.py):(?P<function>[A-Za-z_]\w*)$")


def is_python_component(name: str) -> bool:
    """Whether ``name`` names a function of a Python file (``comp.py:trainer``), not a spec or a built-in."""
    return PYTHON_COMPONENT.match(name) is not None


def refuse_python(name: str, where: str) -> None:
    """Raise a :class:`UsageError` when ``name`` is a Python component: ``where`` never runs code."""
    if is_python_component(name):
        raise UsageError(f"{name} is a Python component, and {where} runs no code (a spec may come from a pull"
                         " request: importing a Python file would run it)",
                         "submit, dryrun and run load Python components, since they run what you name; lint and"
                         " diff take --allow-python-components to run one (only for code you trust); `torchspec"
                         " convert` makes a spec of it")


#: Where the built-in spec files live (inside the installed package).
COMPONENTS_DIR: str = os.path.dirname(os.path.abspath(__file__))

_SPEC_SUFFIXES = (".yaml", ".yml", ".toml", ".json")


class ComponentNotFoundError(UsageError):
    """Neither an existing spec file nor a built-in component name (TorchX: ComponentNotFoundException).

    A :class:`~torchspec.errors.UsageError` because it is the caller's input
    that is wrong, so the CLI exits with the usage code and prints the hint.
    ``str()`` carries the hint too, for library callers who only print the
    exception: the did-you-mean is the useful part.
    """

    def __str__(self) -> str:
        return f"{self.message}; {self.hint}" if self.hint else self.message


def list_builtins() -> dict[str, tuple[str, str]]:
    """Every built-in component: ``{"dist.ddp": (path, one-line description)}``, sorted by name.

    The description is the spec's first comment line that is not an editor
    modeline, so the file documents itself and nothing has to be kept in sync.
    """
    found: dict[str, tuple[str, str]] = {}
    for folder, dirs, files in os.walk(COMPONENTS_DIR):
        dirs[:] = sorted(d for d in dirs if not d.startswith(("_", ".")))
        for file in sorted(files):
            stem, suffix = os.path.splitext(file)
            if suffix not in _SPEC_SUFFIXES or stem.startswith(("_", ".")):
                continue
            path = os.path.join(folder, file)
            rel = os.path.relpath(os.path.join(folder, stem), COMPONENTS_DIR)
            found[rel.replace(os.sep, ".")] = (path, spec_description(path))
    return dict(sorted(found.items()))


def find_component(name_or_path: str) -> str:
    """The spec file for ``name_or_path``: an existing file wins, else a built-in name.

    A file wins so that a project can keep its own ``dist/ddp.yaml`` and still
    run it by path even though ``dist.ddp`` is also a built-in name.

    Raises:
        ComponentNotFoundError: neither a file nor a built-in, with a did-you-mean
            over the built-in names (and a hint when it looks like a missing path).
    """
    expanded = os.path.expanduser(name_or_path)
    if os.path.isfile(expanded):
        return expanded
    builtins = list_builtins()
    if name_or_path in builtins:
        return builtins[name_or_path][0]
    from torchspec.errors import did_you_mean

    names = list(builtins)
    looks_like_path = os.sep in name_or_path or "/" in name_or_path or name_or_path.endswith(_SPEC_SUFFIXES)
    guess = did_you_mean(name_or_path, names)
    if looks_like_path and os.path.exists(expanded):
        message = f"{name_or_path} is a folder, not a spec file"
        hint = "name the spec file inside it"
    elif looks_like_path and guess is None:
        message = f"no such spec file: {name_or_path}"
        hint = f"built-in components: {', '.join(names)}"
    else:
        message = f"unknown component {name_or_path!r}: not a spec file and not a built-in component"
        hint = f"did you mean {guess!r}?" if guess else f"built-in components: {', '.join(names)}"
    raise ComponentNotFoundError(message, hint)


def builtin_name(path: str) -> str | None:
    """The built-in name of the spec file at ``path``, or None when it is not a built-in.

    Lets config sections written for ``dist.ddp`` apply when the same file is
    named by its path, and the other way round.
    """
    real = os.path.realpath(path)
    for name, (builtin_path, _) in list_builtins().items():
        if os.path.realpath(builtin_path) == real:
            return name
    return None


def spec_description(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                stripped = line.strip()
                if not stripped.startswith("#"):
                    if stripped:
                        break
                    continue
                text = stripped.lstrip("#").strip()
                if text and not text.startswith("yaml-language-server:"):
                    return text
    except OSError:
        pass
    return ""
