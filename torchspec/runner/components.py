"""Components as the runner takes them: their arguments, and the param defaults the config gives them.

A component is a spec file or a built-in (``dist.ddp``); its arguments are
params.  Kept apart from :mod:`torchspec.runner.api` because it is the one
part of the runner that reads spec files (through the loader).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional, Sequence, Union

from torchspec.errors import UsageError, did_you_mean

if TYPE_CHECKING:
    from torchspec.config import Config

#: What ``run_component`` accepts as the component's arguments.
ComponentArgs = Union[Mapping[str, Any], Sequence[str], None]


def component_defaults_for(component: str, path: str, config: Optional["Config"],
                           runner_defaults: Mapping[str, Mapping[str, str]]) -> Dict[str, str]:
    """Param defaults for a component: the config files', then the runner's (which win).

    A section applies whether it names the component as given, by its
    built-in name, or by the spec file's path.  A default for a param the
    spec does not declare is an error naming where it was set: it is a
    typo or a stale setting, and it would otherwise fail every run with a
    message about ``-p`` values nobody typed.
    """
    from torchspec.components import builtin_name

    names = {component}
    builtin = builtin_name(path)
    if builtin:
        names.add(builtin)
    real = os.path.realpath(path)

    def matches(key: str) -> bool:
        if key in names:
            return True
        candidate = os.path.expanduser(key)
        return os.path.isfile(candidate) and os.path.realpath(candidate) == real

    out: Dict[str, str] = {}
    origin: Dict[str, str] = {}
    if config is not None:
        from torchspec.config import component_defaults, config_key

        for key, values in component_defaults(config).items():
            if matches(key):
                for param, value in values.items():
                    out[param] = value
                    origin[param] = config.sources.get(config_key("component", key, param), "config")
    for key, values in runner_defaults.items():
        if matches(key):
            for param, value in values.items():
                out[param] = value
                origin[param] = "the runner's component_defaults"
    from torchspec.loader import declared_params

    declared = declared_params(path)
    if declared is not None:
        for param in out:
            if param not in declared:
                guess = did_you_mean(param, declared)
                raise UsageError(
                    f"{origin[param]}: default for unknown param {param!r} of component {component!r}",
                    f"did you mean {guess!r}?" if guess else
                    (f"its params: {', '.join(declared)}" if declared else "it declares no params"))
    return out


def parse_component_args(component_args: ComponentArgs) -> Dict[str, str]:
    """Component args as ``{param: -p text}``.

    Accepts a mapping (values that are not text become ``-p`` text: ``true``,
    ``4``, JSON for lists and maps), or a list of ``name=value`` strings.
    TorchX's command-line forms work in the list too: ``--name value``,
    ``--name=value``, ``-j 2x4``, and everything after ``--`` becomes the
    ``args`` param (the component's trailing arguments).
    """
    if component_args is None:
        return {}
    if isinstance(component_args, Mapping):
        return {str(k): _as_param_text(v) for k, v in component_args.items()}
    if isinstance(component_args, str):
        raise UsageError("component args must be a list of name=value strings or a mapping, not one string",
                         f"pass [{component_args!r}]")
    out: Dict[str, str] = {}
    items = list(component_args)
    i = 0
    while i < len(items):
        item = str(items[i])
        if item == "--":
            out["args"] = _as_param_text(items[i + 1:])
            break
        flag = item.startswith("-")
        name, sep, value = item.lstrip("-").partition("=")
        if not name:
            raise UsageError(f"component arg {item!r} names no param", "write name=value")
        if not sep:
            if not flag:
                raise UsageError(f"component arg {item!r} has no value", f"write {item}=VALUE")
            if i + 1 >= len(items):
                raise UsageError(f"component arg {item!r} has no value", f"write {item} VALUE or {item}=VALUE")
            value = str(items[i + 1])
            i += 1
        out[name] = value
        i += 1
    return out


def _as_param_text(value: Any) -> str:
    import json

    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(list(value) if isinstance(value, tuple) else value)
    return str(value)


def params_file_keys(params_file: Optional[str]) -> set[str]:
    """The param names a values file sets, so config defaults do not override them."""
    if not params_file:
        return set()
    from torchspec.loader import read_params_file

    return {str(k) for k in read_params_file(params_file).values}


__all__ = ["ComponentArgs", "component_defaults_for", "params_file_keys", "parse_component_args"]
