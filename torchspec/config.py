"""Where torchspec settings come from, and which file each one came from.

Project settings live in ``.torchspec.toml`` (found from the working folder
upwards) or under ``[tool.torchspec]`` in ``pyproject.toml``; user settings
in ``$XDG_CONFIG_HOME/torchspec/config.toml``.  Project beats user; command
line flags beat both.  Sections: ``[lint]`` (select, ignore, exclude, strict,
template_paths, max_file_size).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from torchspec.errors import UsageError



@dataclass
class Config:
    data: dict[str, Any] = field(default_factory=dict)
    #: "section.key" -> the file that set it
    sources: dict[str, str] = field(default_factory=dict)

    def section(self, name: str) -> dict[str, Any]:
        value = self.data.get(name, {})
        return value if isinstance(value, dict) else {}


def user_config_path() -> str:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "torchspec", "config.toml")


def find_project_config(start: str | None = None) -> tuple[str, dict[str, Any]] | None:
    """The nearest ``.torchspec.toml``, or ``pyproject.toml`` with a ``[tool.torchspec]`` table."""
    folder = os.path.abspath(start or os.getcwd())
    while True:
        candidate = os.path.join(folder, ".torchspec.toml")
        if os.path.isfile(candidate):
            return candidate, _read(candidate)
        pyproject = os.path.join(folder, "pyproject.toml")
        if os.path.isfile(pyproject) and _mentions_torchspec(pyproject):
            table = _read(pyproject).get("tool", {}).get("torchspec")
            if isinstance(table, dict):
                return pyproject, table
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def load_config(start: str | None = None) -> Config:
    config = Config()
    user = user_config_path()
    layers = []
    if os.path.isfile(user):
        layers.append((user, _read(user)))
    project = find_project_config(start)
    if project:
        layers.append(project)
    for path, data in layers:
        for section, values in data.items():
            if isinstance(values, dict):
                target = config.data.setdefault(section, {})
                for key, value in values.items():
                    target[key] = value
                    config.sources[f"{section}.{key}"] = path
            else:
                config.data[section] = values
                config.sources[section] = path
    return config


def _mentions_torchspec(path: str) -> bool:
    """Cheap text test before parsing: most pyproject.toml files have no [tool.torchspec] table."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return "tool.torchspec" in f.read()
    except OSError:
        return False


def _read(path: str) -> dict[str, Any]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise UsageError(f"cannot read the config file {path}: {e}", "fix or remove the file") from None
