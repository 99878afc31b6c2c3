"""``torchspec convert``: a TorchX Python component, or a ``.torchxconfig``, as torchspec files.

A component becomes the spec of the AppDef it returns for the arguments given,
with a typed ``params:`` entry for each of its ``str``, ``int`` and ``float``
parameters whose value shows in that AppDef, the value replaced there by
``{{ name }}`` and given as the param's default (the docstring's help as its
help).  Which fields a parameter reaches is learnt by calling the function
again with every such parameter set to a marker value of its type (a word, a
large number) and reading where the markers land; a parameter the function
computes with (``replicas * 2``) does not land as itself and stays a plain
value.  The spec is then rendered by the loader and compared with the
function's AppDef: if they differ, the spec is written without params, so a
converted spec always renders to what the function returns.
"""

from __future__ import annotations

import inspect
import json
import os
import re
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Tuple

from torchspec.components.python import bind, invoke, load_function, parameters, parse_docstring, \
    unwrap_optional

if TYPE_CHECKING:
    from torchspec.loader import LoadedFile, LoadOptions

#: The Jinja markers a literal string must not carry into a spec (they would be rendered).
_JINJA = re.compile(r"\{\{|\{%|\{#")
_TYPES = {str: "string", int: "integer", float: "number"}


def convert_component(ref: str, component_args: Any = None) -> str:
    """The spec file (YAML text) for ``ref``'s function called with ``component_args``."""
    from torchspec.specs.convert import dump_app

    fn = load_function(ref)
    values = bind(ref, fn, component_args)
    data = dump_app(invoke(ref, fn, values))
    templated, used = _templated(ref, fn, values, data)
    params = _params(ref, fn, values, used)
    text = _yaml(ref, component_args, templated, params)
    if params and not _renders_the_same(text, data):
        params, text = {}, _yaml(ref, component_args, _escaped(data), {})
    return text


def load_converted(ref: str, options: "LoadOptions") -> "LoadedFile":
    """``ref`` loaded as the spec :func:`convert_component` makes of it, ``options.params`` as its arguments:
    how ``lint`` and ``diff`` read a Python component (its code runs: only where the user allowed it)."""
    import dataclasses

    from torchspec.loader import load_text

    argv = [arg for name, value in options.params.items() for arg in (f"--{name}", str(value))]
    return load_text(convert_component(ref, argv), ref, "yaml",
                     dataclasses.replace(options, params={}, params_file=None))


def _escape(text: str) -> str:
    """``text`` as a template that renders to itself: each Jinja opener written as a Jinja string."""
    return _JINJA.sub(lambda m: "{{ '" + m.group(0) + "' }}", text)


def _escaped(data: Any) -> Any:
    if isinstance(data, dict):
        return {_escaped(k): _escaped(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_escaped(v) for v in data]
    return _escape(data) if isinstance(data, str) else data


def _markers(ref: str, fn: Callable[..., Any], values: Mapping[str, Any]) -> Dict[str, Tuple[Any, str]]:
    """A marker value for each parameter that may show as itself: ``name -> (marker, its text)``."""
    out: Dict[str, Tuple[Any, str]] = {}
    for i, p in enumerate(parameters(ref, fn)):
        kind = unwrap_optional(p.annotation)
        if p.kind == inspect.Parameter.VAR_POSITIONAL or kind not in _TYPES or values.get(p.name) is None:
            continue
        marker: Any = {str: f"torchspec-param-{i}-{p.name}", int: 7_340_033 + 1_009 * i,
                       float: 7_340_033.25 + 1_009 * i}[kind]
        out[p.name] = (marker, str(marker))
    return out


def _templated(ref: str, fn: Callable[..., Any], values: Mapping[str, Any], data: Any) -> Tuple[Any, List[str]]:
    """``data`` with each parameter's value replaced by ``{{ name }}`` where the marker probe shows it lands,
    and the names placed; ``(data, [])`` where the probe cannot run."""
    from torchspec.specs.convert import dump_app

    markers = _markers(ref, fn, values)
    if not markers:
        return _escaped(data), []
    try:
        probe = dump_app(invoke(ref, fn, {**values, **{n: m for n, (m, _) in markers.items()}}))
    except Exception:  # noqa: BLE001 - the function cannot take markers (it validates or computes): no params
        return _escaped(data), []
    used: List[str] = []

    def walk(base: Any, seen: Any) -> Any:
        """``base`` with a marker's place in ``seen`` (the probe) templated where putting the value back in
        gives ``base`` again; anything the function computed from a marker stays ``base``."""
        if isinstance(base, dict) and isinstance(seen, dict) and list(base) == [_back(k) for k in seen]:
            return {walk(k, sk): walk(v, sv) for (k, v), (sk, sv) in zip(base.items(), seen.items())}
        if isinstance(base, list) and isinstance(seen, list) and len(base) == len(seen):
            return [walk(b, p) for b, p in zip(base, seen)]
        for name, (marker, _) in markers.items():
            if not isinstance(marker, str) and not isinstance(seen, bool) and seen == marker \
                    and base == values[name]:
                used.append(name)
                return f"{{{{ {name} }}}}"
        if isinstance(base, str) and isinstance(seen, str) and _back(seen) == base:
            out = _escape(seen)
            for name, (_, text) in markers.items():
                if text in out:
                    used.append(name)
                    out = out.replace(text, f"{{{{ {name} }}}}")
            return out
        return _escaped(base)

    def _back(value: Any) -> Any:
        """``value`` of the probe with each marker's text replaced by the value converted with."""
        if not isinstance(value, str):
            return value
        for name, (_, text) in markers.items():
            value = value.replace(text, str(values[name]))
        return value

    return walk(data, probe), sorted(set(used))


def _params(ref: str, fn: Callable[..., Any], values: Mapping[str, Any], used: List[str]) -> Dict[str, Any]:
    """The ``params:`` entries of the names ``used``: type, the value converted with as default, help."""
    _, helps = parse_docstring(fn)
    hints = {p.name: unwrap_optional(p.annotation) for p in parameters(ref, fn)}
    out: Dict[str, Any] = {}
    for name in used:
        entry: Dict[str, Any] = {"type": _TYPES[hints[name]], "default": values[name]}
        if helps.get(name, "").strip():
            entry["help"] = helps[name].strip()
        out[name] = entry
    return out


def _yaml(ref: str, component_args: Any, data: Any, params: Dict[str, Any]) -> str:
    import yaml

    from torchspec.components.python import as_argv

    body = {"name": data["name"], **({"params": params} if params else {}),
            **{k: v for k, v in data.items() if k != "name"}}
    args = " ".join(as_argv(component_args))
    header = (f"# Converted by `torchspec convert {ref}{' ' + args if args else ''}`: the AppDef the function"
              " returns for\n# those arguments" + (", its arguments as params (defaults: the values above)"
                                                     if params else "") + ".\n")
    return header + yaml.safe_dump(body, sort_keys=False, allow_unicode=True, width=100)


def _renders_the_same(text: str, data: Any) -> bool:
    from torchspec.loader import load_text
    from torchspec.specs.convert import dump_app

    loaded = load_text(text, "<converted>")
    apps = [d.app for d in loaded.documents if d.app is not None]
    return loaded.ok and len(apps) == 1 and dump_app(apps[0]) == data


def convert_torchx_config(path: str, output: str | None = None,
                          typed: Callable[[str, str, str], Any] | None = None) -> str:
    """A ``.torchxconfig`` as the ``.torchspec.toml`` of the same meaning, to be written at ``output``
    (default: a file in the working folder).

    TorchX reads a component's path relative to the folder it runs in, torchspec relative to the config
    file: each path is written relative to ``output``'s folder, for the file found where TorchX would look
    (the working folder), else in the config's folder or the nearest one above it that has it (the
    project's root, where its ``torchx run`` ran). ``typed(scheduler, option, text)`` gives a run
    option's value as its type (``use_cwd = true``, not ``"true"``); without it every value stays text.
    """
    from torchspec.config import read_torchx_config

    data = read_torchx_config(path)
    rebase = _Rebase(path, output)
    lines = [f"# Converted by `torchspec convert {path}` from TorchX's config.", ""]
    cli = dict(data.get("cli", {}))
    if "default_component" in cli:
        cli["default_component"] = rebase(cli["default_component"])
    if cli:
        lines += ["[cli]", *[f"{k} = {json.dumps(v)}" for k, v in cli.items()], ""]
    for name, table in data.get("scheduler", {}).items():
        values = {k: typed(name, k, v) if typed else v for k, v in table.items()}
        lines += [f"[scheduler.{json.dumps(name)}]", *[f"{k} = {json.dumps(v)}" for k, v in values.items()], ""]
    for name, table in data.get("component", {}).items():
        lines += [f"[component.{json.dumps(rebase(name))}]", *[f"{k} = {json.dumps(v)}" for k, v in table.items()],
                  ""]
    return "\n".join(lines)


class _Rebase:
    """A component reference of a ``.torchxconfig`` (``FILE.py:FUNCTION``, a spec's path, a built-in's name)
    as the new config at ``output`` names it: a path relative to that config's folder."""

    def __init__(self, path: str, output: str | None) -> None:
        config_dir = os.path.dirname(os.path.abspath(path))
        self.bases = [os.getcwd(), *_ancestors(config_dir)]
        self.folder = os.path.dirname(os.path.abspath(output or "x"))

    def __call__(self, ref: str) -> str:
        from torchspec.components import PYTHON_COMPONENT
        from torchspec.config import is_component_path

        python = PYTHON_COMPONENT.match(ref)
        file, suffix = (python.group("path"), ":" + python.group("function")) if python else (ref, "")
        if not python and not is_component_path(ref):
            return ref  # a built-in or a package's component: a name, not a path
        if os.path.isabs(os.path.expanduser(file)):
            return os.path.expanduser(file) + suffix
        found = os.path.normpath(next((os.path.join(b, file) for b in self.bases
                                       if os.path.exists(os.path.join(b, file))), os.path.join(self.bases[0], file)))
        if os.path.commonpath([found, self.folder]) == os.sep:  # no folder in common: the absolute path
            return found + suffix
        return os.path.relpath(found, self.folder) + suffix


def _ancestors(folder: str) -> List[str]:
    out = [folder]
    while os.path.dirname(out[-1]) != out[-1]:
        out.append(os.path.dirname(out[-1]))
    return out


__all__ = ["convert_component", "convert_torchx_config"]
