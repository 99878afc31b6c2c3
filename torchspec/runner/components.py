"""Components as the runner takes them: their arguments, and the param defaults the config gives them.

A component is a spec file or a built-in (``dist.ddp``); its arguments are
params.  Kept apart from :mod:`torchspec.runner.api` because it is the one
part of the runner that reads spec files (through the loader).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional, Sequence, Tuple, Union

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


def load_component(component: str, component_args: ComponentArgs, config: Optional["Config"],
                   runner_defaults: Mapping[str, Mapping[str, str]], *, params_file: Optional[str] = None,
                   app_name: Optional[str] = None, template_paths: Tuple[str, ...] = ()) -> Any:
    """The AppDef of ``component`` (``Runner.load_component``): a Python component or a package's function
    called with its arguments, else a spec file (a file on disk, a package's, a built-in) rendered."""
    from torchspec.components import find_component, is_python_component
    from torchspec.loader import load_app

    python = is_python_component(component)
    package = None if python else package_component(component)
    if python or (package is not None and package.fn is not None):
        if params_file or app_name or template_paths:
            raise UsageError(f"{component} is a Python component: --params-file, --app and --template-path are"
                             " for spec files",
                             "give its arguments on the command line (--name value, -- for *args)")
        from torchspec.components.python import call_component, materialize  # argparse, inspect: only here

        defaults = python_defaults(component, config, runner_defaults)
        if package is not None and package.fn is not None:
            return call_component(component, package.fn, component_args, defaults)
        return materialize(component, component_args, defaults)
    path = package.path if package is not None and package.path else find_component(component)
    given = parse_component_args(component_args)
    defaults = component_defaults_for(component, path, config, runner_defaults)
    if defaults:
        taken = set(given) | params_file_keys(params_file)
        params = {**{k: v for k, v in defaults.items() if k not in taken}, **given}
    else:
        params = given
    from torchspec.config import template_paths as config_template_paths

    return load_app(path, params, params_file, template_paths=config_template_paths(config, template_paths),
                    app=app_name)


def component_help(component: str, config: Optional["Config"],
                   runner_defaults: Mapping[str, Mapping[str, str]]) -> Optional[str]:
    """A Python component's (or a package function's) own help; None for a spec."""
    from torchspec.components.python import component_help as python_help
    from torchspec.components.python import is_python_component

    defaults = python_defaults(component, config, runner_defaults)
    if is_python_component(component):
        return python_help(component, defaults)
    package = package_component(component)
    if package is not None and package.fn is not None:
        return python_help(component, defaults, fn=package.fn)
    return None


def package_component(component: str) -> Any:
    """The installed package's component named ``component`` (a ``PackageComponent``), None where no
    package offers it or it names a file on disk (a file wins, as for the built-ins).

    Raises:
        UsageError: a built-in has the same name (or two packages offer it): both are named.
    """
    if os.path.isfile(os.path.expanduser(component)):
        return None
    from torchspec.components import list_builtins
    from torchspec.components.packages import find_package_component

    package = find_package_component(component)
    if package is not None and component in list_builtins():
        raise UsageError(f"component {component!r} is both a built-in and {package.origin}",
                         "rename that entry point (built-in names are reserved), or run the built-in's"
                         f" spec file by its path: {list_builtins()[component][0]}")
    return package


def python_defaults(component: str, config: Optional["Config"],
                    runner_defaults: Mapping[str, Mapping[str, str]]) -> Dict[str, str]:
    """A Python component's argument defaults: the config files' ``[component."NAME"]`` tables, then the
    runner's ``component_defaults`` (which win), each under the name as given."""
    from torchspec.components import PYTHON_COMPONENT
    from torchspec.config import component_defaults

    def same(key: str) -> bool:  # a config's FILE.py keys are absolute (anchored to the config file)
        if key == component:
            return True
        ours, theirs = PYTHON_COMPONENT.match(component), PYTHON_COMPONENT.match(key)
        return bool(ours and theirs and ours.group("function") == theirs.group("function")
                    and os.path.realpath(os.path.expanduser(ours.group("path")))
                    == os.path.realpath(os.path.expanduser(theirs.group("path"))))

    out: Dict[str, str] = {}
    for key, values in (component_defaults(config) if config is not None else {}).items():
        if same(key):
            out.update(values)
    return {**out, **runner_defaults.get(component, {})}
