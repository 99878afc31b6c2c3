"""Where torchspec settings come from, and which file each one came from.

Project settings live in ``.torchspec.toml`` (found from the working folder
upwards) or under ``[tool.torchspec]`` in ``pyproject.toml``; user settings
in ``$XDG_CONFIG_HOME/torchspec/config.toml``.  Project beats user; command
line flags beat both (applying those is the caller's job).  Tables merge key
by key, at every depth, so a project file can change one run option of a
scheduler and keep the user's others.

Sections::

    default_scheduler = "local"          # or under [cli]

    [cli]
    default_component = "jobs/train.yaml"   # what submit runs when none is named; a path is relative to this file

    [lint]                               # select, ignore, exclude, strict, template_paths, max_file_size, jobs,
                                         # allow_python_components
    ignore = ["TS305"]

    [diff]                               # allow_python_components

    [apply]                              # lock ("file" or "kubernetes"), lock_timeout, lock_duration
    lock = "kubernetes"

    [scheduler.local]                    # run option defaults (cfg) for one scheduler, below -c
    log_dir = "/tmp/logs"

    [tracker.file]                       # a tracker every job records to (torchspec.tracker), with its config
    config = "/shared/runs"

    [component."dist.ddp"]               # param defaults for a component, below -p
    j = "2x4"
    [component."jobs/train.yaml"]        # a spec path, relative to this config file
    lr = 0.1

Where a project has no torchspec config, a TorchX ``.torchxconfig`` in the
working folder (or the file ``$TORCHXCONFIG`` names) is read instead, with
the same meaning: ``[cli:run]`` ``scheduler`` (the default scheduler, TorchX
names mapped: ``local_cwd`` is local, ``local_docker`` docker) and
``component`` (the component ``submit`` runs when none is named),
``[SCHEDULER]`` run options, ``[component:NAME]`` argument defaults,
``[torchx:tracker]`` tracker names and ``[tracker:NAME]`` their ``config``.

This module knows nothing about schedulers beyond the ``runopts`` they
declare, so ``torchspec lint`` never imports a backend to read its settings.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

from torchspec.components import PYTHON_COMPONENT
from torchspec.errors import UsageError

if TYPE_CHECKING:
    from torchspec.specs.runopts import CfgVal, runopts


__all__ = [
    "Config",
    "apply_settings",
    "component_defaults",
    "config_key",
    "default_component",
    "default_scheduler",
    "explain",
    "find_project_config",
    "load_config",
    "scheduler_cfg",
    "template_paths",
    "trackers",
    "user_config_path",
]

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
_SPEC_SUFFIXES = (".yaml", ".yml", ".toml", ".json")


@dataclass
class Config:
    """The merged settings, plus the file behind every value.

    ``sources`` maps a dotted key as TOML spells it (``lint.ignore``,
    ``scheduler.local.log_dir``, ``component."dist.ddp".j``) to the file that
    set it; ``files`` lists the files read, lowest precedence first.
    """

    data: dict[str, Any] = field(default_factory=dict)
    #: dotted key -> the file that set it
    sources: dict[str, str] = field(default_factory=dict)
    #: the files read, lowest precedence first
    files: list[str] = field(default_factory=list)

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
    """The user file, then the project file found from ``start`` (default: the cwd) upwards, merged."""
    config = Config()
    user = user_config_path()
    layers = []
    if os.path.isfile(user):
        layers.append((user, _read(user)))
    project = find_project_config(start)
    torchx = None if project else find_torchx_config(start)
    if project or torchx:
        layers.append(project or torchx)
    for path, data in layers:
        config.files.append(path)
        # TorchX names a component as it was typed, relative to the working folder (even when $TORCHXCONFIG
        # names a file elsewhere); ours are relative to the file that holds them
        base = os.path.abspath(start or os.getcwd()) if torchx and path == torchx[0] else os.path.dirname(path)
        data = _anchor_template_paths(_anchor_component_paths(data, base), path, confined=path != user)
        _merge(config, config.data, data, (), path)
    return config


#: TorchX's scheduler names, as a ``.torchxconfig`` writes them, and torchspec's.
TORCHX_SCHEDULERS = {"local_cwd": "local", "local_docker": "docker", "kubernetes": "kubernetes", "slurm": "slurm",
                     "ray": "ray"}
#: TorchX run option names that torchspec spells otherwise, by torchspec scheduler: TorchX's local ``log_dir``
#: holds each app's logs as our ``state_dir`` does; Slurm's hyphenated names; ``job_dir``, where TorchX's
#: sbatch writes the logs, is our Slurm ``log_dir`` (torchspec copies no workspace there).
TORCHX_OPTIONS = {"local": {"log_dir": "state_dir"},
                  "slurm": {"mail-user": "mail_user", "mail-type": "mail_type", "job_dir": "log_dir"}}
#: What a TorchX scheduler name means beyond the scheduler: ``local_cwd`` runs in the working folder whatever
#: the image, and TorchX's ``kubernetes`` scheduler always creates Volcano jobs.
TORCHX_IMPLIED = {"local_cwd": {"use_cwd": "true"}, "kubernetes": {"flavor": "volcano"}}


def find_torchx_config(start: str | None = None) -> tuple[str, dict[str, Any]] | None:
    """TorchX's ``.torchxconfig`` as torchspec settings: the file ``$TORCHXCONFIG`` names, else the one in
    the working folder (where TorchX looks), None where there is none."""
    named = os.environ.get("TORCHXCONFIG")
    path = named or os.path.join(os.path.abspath(start or os.getcwd()), ".torchxconfig")
    if not os.path.isfile(path):
        if named:
            raise UsageError(f"TORCHXCONFIG names {named}, which is not a file", "unset it or point it at the file")
        return None
    return path, read_torchx_config(path)


def read_torchx_config(path: str) -> dict[str, Any]:
    """A ``.torchxconfig`` (INI) as the tables of a torchspec config (see the module's docstring)."""
    import configparser

    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign] - option names keep their case
    try:
        with open(path, encoding="utf-8") as f:
            parser.read_file(f)
    except (OSError, configparser.Error) as e:
        raise UsageError(f"cannot read the TorchX config file {path}: {e}", "fix or remove the file") from None
    data: dict[str, Any] = {}
    schedulers: dict[str, dict[str, str]] = {}
    for section in parser.sections():
        values = dict(parser[section])
        if section == "cli:run":
            cli = data.setdefault("cli", {})
            if values.get("scheduler"):
                cli["default_scheduler"] = TORCHX_SCHEDULERS.get(values["scheduler"], values["scheduler"])
                _torchx_options(schedulers, values["scheduler"], {})
            if values.get("component"):
                cli["default_component"] = values["component"]
        elif section.startswith("component:"):
            data.setdefault("component", {})[section.split(":", 1)[1]] = values
        elif section == "torchx:tracker":  # the trackers every job records to: their names
            for name in values:
                data.setdefault("tracker", {}).setdefault(name, {})
        elif section.startswith("tracker:"):  # one tracker's config
            data.setdefault("tracker", {}).setdefault(section.split(":", 1)[1], {}).update(values)
        elif not section.startswith(("cli:", "torchx:")):  # other commands' defaults have no torchspec meaning
            _torchx_options(schedulers, section, values)
    if schedulers:
        data["scheduler"] = schedulers
    return data


def _torchx_options(into: dict[str, dict[str, str]], torchx_name: str, values: Mapping[str, str]) -> None:
    """Add a TorchX scheduler section's run options to ``into`` under torchspec's scheduler and option names,
    with what the TorchX name implies (``local_cwd``: ``use_cwd``) where the file does not say otherwise."""
    name = TORCHX_SCHEDULERS.get(torchx_name, torchx_name)
    table = into.setdefault(name, {})
    renames = TORCHX_OPTIONS.get(name, {})
    table.update({renames.get(key, key): value for key, value in values.items()})
    for key, value in TORCHX_IMPLIED.get(torchx_name, {}).items():
        table.setdefault(key, value)


# ---------------------------------------------------------------- what the runner and the CLI ask


def default_component(config: Config) -> str | None:
    """``[cli] default_component``: what ``submit`` and ``dryrun`` run when no component is named
    (``.torchxconfig``'s ``[cli:run] component``)."""
    value = config.section("cli").get("default_component")
    return value if isinstance(value, str) and value else None


def default_scheduler(config: Config) -> str | None:
    """``default_scheduler`` (top level or under ``[cli]``) from the file with the highest precedence.

    Both spellings are accepted because TorchX users look for a ``[cli]``
    table; if one file sets both, ``[cli]`` wins.
    """
    # (file rank, spelling rank, key, value): the later file wins, then [cli]
    candidates = []
    cli = config.section("cli")
    if "default_scheduler" in cli:
        key = "cli.default_scheduler"
        candidates.append((_rank(config, key), 1, key, cli["default_scheduler"]))
    if "default_scheduler" in config.data:
        key = "default_scheduler"
        candidates.append((_rank(config, key), 0, key, config.data["default_scheduler"]))
    if not candidates:
        return None
    _, _, key, value = max(candidates, key=lambda c: (c[0], c[1]))
    if not isinstance(value, str) or not value:
        raise UsageError(f"{config.sources.get(key, 'config')}: {key} must be a scheduler name (a string)",
                         'write: default_scheduler = "local"')
    return value


def trackers(config: Config) -> dict[str, str | None]:
    """``[tracker.NAME]`` tables: the trackers every job records to, each with its ``config`` (None where
    none is set); .torchxconfig's ``[torchx:tracker]`` names and ``[tracker:NAME] config`` read the same."""
    found: dict[str, str | None] = {}
    for name, table in config.section("tracker").items():
        value = table.get("config") if isinstance(table, dict) else None
        if value is not None and not isinstance(value, str):
            raise UsageError(f"{config.sources.get(config_key('tracker', name, 'config'), 'config')}: tracker.{name}"
                             ".config must be a string (the tracker's config: a folder, a URL or a file)",
                             f'write: [tracker.{name}] config = "/shared/runs"')
        found[name] = value or None
    return found


#: ``(config file, scheduler, key)`` already warned about in this process.
_WARNED: set[tuple[str, str, str]] = set()


def scheduler_cfg(config: Config, name: str, opts: "runopts | None" = None) -> dict[str, "CfgVal"]:
    """The run option defaults that ``[scheduler.NAME]`` sets, typed by ``opts`` when given.

    TOML values are typed already; text is cast as ``-c`` text would be
    (``"a;b"`` for a list, ``"true"`` for a bool) so either spelling works.
    Keys the scheduler does not declare are dropped with a warning, as
    TorchX's ``.torchxconfig`` loader does: they are typos or stale options,
    and one config file serves every scheduler.
    """
    table = config.section("scheduler").get(name, {})
    if not isinstance(table, dict):
        raise UsageError(f"{config.sources.get(_key(('scheduler', name)), 'config')}: scheduler.{name} must be a table",
                         f"write: [scheduler.{name}] followed by key = value lines")
    if opts is None:
        return dict(table)
    out: dict[str, CfgVal] = {}
    for key, value in table.items():
        source = config.sources.get(_key(("scheduler", name, key)), "config")
        opt = opts.get(key)
        if opt is None:
            if (source, name, key) not in _WARNED:  # once: a submit resolves its cfg twice (the CLI, then dryrun)
                _WARNED.add((source, name, key))
                import logging  # only here: lint's start-up path reads config too

                logging.getLogger(__name__).warning(
                    "%s: `%s` in [scheduler.%s] is not a run option of the %s scheduler; ignored", source, key, name,
                    name)
            continue
        out[key] = _typed(value, opt, source, f"scheduler.{name}.{key}")
    return out


def component_defaults(config: Config) -> dict[str, dict[str, str]]:
    """``[component."NAME_OR_PATH"]`` tables as ``{component: {param: value as -p text}}``.

    Values become the text ``-p`` would take (``true``, ``2``, JSON for lists
    and maps) because component defaults slot in under ``-p`` values and go
    through the same conversion.  Path keys come back absolute (they are
    written relative to the config file that holds them).
    """
    out: dict[str, dict[str, str]] = {}
    for component, table in config.section("component").items():
        if not isinstance(table, dict):
            source = config.sources.get(_key(("component", component)), "config")
            raise UsageError(
                f"{source}: component.{component} must be a table",
                f'write: [component."{component}"] followed by param = value lines')
        out[component] = {str(k): _param_text(v) for k, v in table.items()}
    return out


#: ``[apply]`` keys: what each must be, and the check (``apply``'s flags win over them).
APPLY_KEYS: dict[str, tuple[str, Any]] = {
    "lock": ('"file" or "kubernetes"', lambda v: v in ("file", "kubernetes")),
    "lock_timeout": ("a number of seconds, 0 or more",
                     lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0),
    "lock_duration": ("a whole number of seconds, 1 or more",
                      lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1),
}


def template_paths(config: Config | None, given: tuple[str, ...] | list[str] = ()) -> tuple[str, ...]:
    """The folders templates may import from: ``--template-path`` where given, else ``[lint] template_paths``.
    Every command that reads a spec takes them (lint, render, dryrun, submit, diff, apply, the language server),
    so a file that lints clean also renders and runs."""
    if given:
        return tuple(given)
    return tuple(config.section("lint").get("template_paths", [])) if config is not None else ()


def apply_settings(config: Config) -> dict[str, Any]:
    """``[apply]``: the defaults of ``apply``'s lock options, checked; a :class:`UsageError` naming the file
    for a bad value.  Unknown keys are left alone (a newer torchspec's, or a typo ``torchspec config`` shows)."""
    table = config.section("apply")
    out: dict[str, Any] = {}
    for key, (wanted, ok) in APPLY_KEYS.items():
        if key in table:
            if not ok(table[key]):
                source = config.sources.get(_key(("apply", key)), "config")
                raise UsageError(f"{source}: apply.{key} must be {wanted}, not {table[key]!r}")
            out[key] = table[key]
    return out


def explain(config: Config) -> list[tuple[str, Any, str]]:
    """Every setting as ``(dotted key, value, file that set it)``, sorted by key, for ``torchspec config``."""
    rows = []
    for key, source in config.sources.items():
        rows.append((key, _lookup(config.data, key), source))
    return sorted(rows, key=lambda row: row[0])


# ---------------------------------------------------------------- merging


def _merge(config: Config, target: dict[str, Any], data: dict[str, Any], prefix: tuple[str, ...], path: str) -> None:
    """Merge ``data`` into ``target``: tables key by key, anything else replaced whole."""
    for key, value in data.items():
        here = prefix + (key,)
        if isinstance(value, dict):
            existing = target.get(key)
            if not isinstance(existing, dict):
                target[key] = existing = {}
                _forget(config, here)
            _merge(config, existing, value, here, path)
        else:
            if isinstance(target.get(key), dict):
                _forget(config, here)
            target[key] = value
            config.sources[_key(here)] = path


def _forget(config: Config, parts: tuple[str, ...]) -> None:
    """Drop the sources of a table that a plain value replaced (or the other way round)."""
    key = _key(parts)
    for k in [k for k in config.sources if k == key or k.startswith(key + ".")]:
        del config.sources[k]


def _anchor_component_paths(data: dict[str, Any], folder: str) -> dict[str, Any]:
    """``[component."jobs/x.yaml"]`` keys and ``[cli] default_component`` made absolute against ``folder``
    (the config file's).

    Done per file before merging, so a relative path in the user file and one
    in the project file can never be confused.
    """
    folder = os.path.abspath(folder)
    cli = data.get("cli")
    if isinstance(cli, dict) and isinstance(cli.get("default_component"), str):
        data = dict(data, cli=dict(cli, default_component=_anchored(cli["default_component"], folder)))
    components = data.get("component")
    if not isinstance(components, dict):
        return data
    return dict(data, component={_anchored(name, folder): table for name, table in components.items()})


def _anchored(name: str, folder: str) -> str:
    """A component reference with its file's path made absolute against ``folder``; a built-in's name as it is."""
    python = PYTHON_COMPONENT.match(name)  # FILE.py:FUNCTION: its file anchored
    if python:
        return (os.path.normpath(os.path.join(folder, os.path.expanduser(python.group("path"))))
                + ":" + python.group("function"))
    if name and is_component_path(name):
        return os.path.normpath(os.path.join(folder, os.path.expanduser(name)))
    return name


def _anchor_template_paths(data: dict[str, Any], config_path: str, confined: bool) -> dict[str, Any]:
    """``[lint] template_paths`` made absolute against the config file's folder; ``confined``: inside it only.

    A project config comes with the specs it lints, so a pull request can
    change it: were it free to name ``/`` a template folder, any spec could
    read any file on the machine.  The user's own config may name any folder.
    """
    lint = data.get("lint")
    entries = lint.get("template_paths") if isinstance(lint, dict) else None
    if not isinstance(entries, list):
        return data
    folder = os.path.dirname(os.path.abspath(config_path))
    anchored = []
    for entry in entries:
        if isinstance(entry, str):
            entry = os.path.normpath(os.path.join(folder, os.path.expanduser(entry)))
            # loader.sandbox.inside() written out: importing the loader would slow every command that reads config
            real, root = os.path.realpath(entry), os.path.realpath(folder)
            if confined and real != root and not real.startswith(root + os.sep):
                raise UsageError(f"{config_path}: lint.template_paths names {entry}, outside the project folder "
                                 f"{folder}", "a project config may name template folders inside the project only; "
                                 "pass others with --template-path, or set them in your user config")
        anchored.append(entry)
    return dict(data, lint=dict(lint, template_paths=anchored))


def is_component_path(name: str) -> bool:
    """A component key that names a file rather than a built-in (``dist.ddp`` has no slash, no suffix)."""
    return "/" in name or os.sep in name or name.startswith(("~", ".")) or name.endswith(_SPEC_SUFFIXES)


def config_key(*parts: str) -> str:
    """A dotted key as TOML writes it, as :attr:`Config.sources` and :func:`explain` spell it.

    Parts that are not bare keys are quoted: ``component."dist.ddp".j``.
    """
    return ".".join(p if _BARE_KEY.match(p) else json.dumps(p) for p in parts)


def _key(parts: tuple[str, ...]) -> str:
    return config_key(*parts)


def _split_key(key: str) -> list[str]:
    parts, i = [], 0
    while i < len(key):
        if key[i] == '"':
            end = i + 1
            while key[end] != '"':
                end += 2 if key[end] == "\\" else 1
            parts.append(json.loads(key[i:end + 1]))
            i = end + 2
        else:
            end = key.find(".", i)
            end = len(key) if end < 0 else end
            parts.append(key[i:end])
            i = end + 1
    return parts


def _lookup(data: dict[str, Any], key: str) -> Any:
    value: Any = data
    for part in _split_key(key):
        value = value[part]
    return value


def _rank(config: Config, key: str) -> int:
    source = config.sources.get(key)
    return config.files.index(source) if source in config.files else -1


# ---------------------------------------------------------------- values


def _typed(value: Any, opt: Any, source: str, where: str) -> "CfgVal":
    """A config value as the run option's type; text is cast the way ``-c`` text is."""
    from torchspec.specs.runopts import get_type_name, runopts as _runopts

    if _runopts.is_type(value, opt.opt_type):
        return value  # type: ignore[no-any-return]
    try:
        if isinstance(value, str):
            return opt.cast_to_type(value)  # type: ignore[no-any-return]
        if opt.opt_type is float and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, list):
            candidate: Any = [_scalar_text(v) for v in value]
        elif isinstance(value, dict):
            candidate = {str(k): _scalar_text(v) for k, v in value.items()}
        elif opt.opt_type is str and isinstance(value, (int, float)) and not isinstance(value, bool):
            candidate = str(value)
        else:
            candidate = None
        if candidate is not None and _runopts.is_type(candidate, opt.opt_type):
            return candidate  # type: ignore[no-any-return]
    except (TypeError, ValueError) as e:
        raise UsageError(f"{source}: {where}: {e}", f"give a {get_type_name(opt.opt_type)}") from None
    raise UsageError(f"{source}: {where} must be a {get_type_name(opt.opt_type)}, not {value!r}",
                     f"give a {get_type_name(opt.opt_type)}")


def _scalar_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        raise TypeError(f"{value!r} is nested; only flat lists and maps of text are allowed")
    return str(value)


def _param_text(value: Any) -> str:
    """A TOML value as ``-p`` text: the loader converts it to the param's declared type."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        return json.dumps(value, default=str)
    return str(value)


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
