"""The ray backend's run options, their checks, and the runtime_env they make.

:mod:`torchspec.runner.options` resolves every backend's options the same
way (unknown keys and wrong types, all at once, with a did-you-mean); what
only Ray knows is checked here: the placement strategy (with a did-you-mean
of its own), the address, and the files the options name, whose problems are
also reported together.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, Dict, List, Mapping, Optional

from torchspec.errors import AppRefusedError, did_you_mean
from torchspec.schedulers import grace, request_timeout
from torchspec.schedulers.ray.states import DEFAULT_ADDRESS, ENV_ADDRESS, META_PREFIX, STRATEGIES
from torchspec.specs import CfgVal, runopts

#: A remote working_dir or runtime_env package: Ray downloads these itself.
_URI = re.compile(r"^[a-z][a-z0-9+.-]*://", re.IGNORECASE)
_ADDRESS = re.compile(r"^(?:http://)?(?P<hostport>[A-Za-z0-9_.\-]+:\d+|\[[0-9a-fA-F:]+\]:\d+)/?$")


def ray_run_opts() -> runopts:
    """The run options of ``ray``; declared once, here."""
    opts = runopts()
    opts.add("dashboard_address", type_=str, default=None,
             help=f"the Ray dashboard (Job Submission API) as host:port (default: ${ENV_ADDRESS}, else {DEFAULT_ADDRESS})")
    opts.add("working_dir", type_=str, default=None,
             help="a folder (or a remote zip URI) Ray uploads and runs every replica in (runtime_env working_dir)")
    opts.add("requirements", type_=str, default=None,
             help="a requirements.txt whose packages Ray pip-installs for the job (runtime_env pip)")
    opts.add("runtime_env", type_=str, default=None,
             help="a YAML or JSON file holding a Ray runtime_env for the job (working_dir and requirements win)")
    opts.add("placement_strategy", type_=str, default="PACK",
             help=f"how each role's placement group places its replicas: {', '.join(STRATEGIES)}")
    opts.add("placement_timeout", type_=int, default=None,
             help="seconds the app may wait for its placement groups before it fails (default: as long as the"
                  " cluster could ever hold it)")
    grace.add_option(opts, "the driver's wait before it SIGKILLs a stopped replica; 1.5 by default")
    opts.add("metadata", type_=Dict[str, str], default=None,
             help="job metadata, as KEY:VALUE;KEY2:VALUE2 (keys torchspec.* are torchspec's own)")
    request_timeout.add_option(opts)
    return opts


def dashboard_address(cfg: Mapping[str, CfgVal]) -> str:
    """The dashboard's ``host:port``: the run option, else ``$RAY_ADDRESS``, else 127.0.0.1:8265."""
    raw = str(cfg.get("dashboard_address") or os.environ.get(ENV_ADDRESS) or DEFAULT_ADDRESS).strip()
    match = _ADDRESS.match(raw)
    if match is None:
        source = "run option dashboard_address" if cfg.get("dashboard_address") else (
            f"${ENV_ADDRESS}" if os.environ.get(ENV_ADDRESS) else "the default")
        raise AppRefusedError(f"{source} {raw!r} is not the address of a Ray dashboard",
                              "give its host:port (or http://host:port), e.g. 127.0.0.1:8265")
    return match.group("hostport")


def placement_strategy(cfg: Mapping[str, CfgVal]) -> str:
    """The strategy, upper-cased; AppRefusedError with a did-you-mean for any other word."""
    raw = str(cfg.get("placement_strategy") or "PACK")
    if raw.upper() in STRATEGIES:
        return raw.upper()
    guess = did_you_mean(raw.upper(), STRATEGIES)
    mean = f" (did you mean {guess!r}?)" if guess else ""
    raise AppRefusedError(f"run option placement_strategy={raw!r} is not a Ray placement strategy{mean}",
                          f"one of {', '.join(STRATEGIES)}")


def runtime_env(cfg: Mapping[str, CfgVal], cwd: str) -> Dict[str, Any]:
    """The job's runtime_env from the options (files read now); every problem at once as an AppRefusedError."""
    problems: List[str] = []
    env: Dict[str, Any] = _read_runtime_env(cfg.get("runtime_env"), cwd, problems)
    working_dir = cfg.get("working_dir")
    if working_dir:
        env["working_dir"] = _local_or_uri("working_dir", str(working_dir), cwd, problems, folder=True)
    requirements = cfg.get("requirements")
    if requirements:
        if "pip" in env or "conda" in env or "uv" in env:
            problems.append("run options requirements and runtime_env both say what to install:"
                            " give the packages in one of them")
        path = _local_or_uri("requirements", str(requirements), cwd, problems, folder=False)
        env["pip"] = _read_requirements(path, problems)
    timeout = cfg.get("placement_timeout")
    if isinstance(timeout, int) and timeout <= 0:
        problems.append(f"run option placement_timeout={timeout} must be a number of seconds above 0")
    for key in dict(cfg.get("metadata") or {}):  # type: ignore[call-overload]
        if str(key).startswith(META_PREFIX):
            problems.append(f"run option metadata: key {key!r} starts with {META_PREFIX!r}, which torchspec keeps"
                            f" for its own keys")
    if problems:
        raise AppRefusedError(problems[0] if len(problems) == 1 else
                              f"{len(problems)} problems with the run options of ray:\n"
                              + "\n".join(f"  - {p}" for p in problems))
    return env


def _local_or_uri(what: str, value: str, cwd: str, problems: List[str], folder: bool) -> str:
    if _URI.match(value):
        return value
    path = os.path.abspath(os.path.join(cwd, os.path.expanduser(value)))
    kind = "folder" if folder else "file"
    if not (os.path.isdir(path) if folder else os.path.isfile(path)):
        problems.append(f"run option {what}={value!r}: no such {kind} ({path})")
    return path


def _read_requirements(path: str, problems: List[str]) -> List[str]:
    """The packages of a local requirements.txt (a missing one is already a problem)."""
    if _URI.match(path):
        problems.append(f"run option requirements={path!r} must be a local file (a requirements.txt)")
        return []
    if not os.path.isfile(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip() and not line.lstrip().startswith("#")]


def _read_runtime_env(value: Optional[CfgVal], cwd: str, problems: List[str]) -> Dict[str, Any]:
    """The runtime_env file's mapping (YAML or JSON); {} when not given or unreadable (a problem then)."""
    if not value:
        return {}
    path = os.path.abspath(os.path.join(cwd, os.path.expanduser(str(value))))
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        problems.append(f"run option runtime_env={value!r}: cannot read {path}: {e.strerror or e}")
        return {}
    try:
        if path.endswith(".json"):
            data = json.loads(text)
        else:
            import yaml  # YAML is a superset of JSON: any other name is read as YAML

            data = yaml.safe_load(text)
    except ValueError as e:
        problems.append(f"run option runtime_env={value!r}: {path} is not valid JSON: {e}")
        return {}
    except Exception as e:  # yaml.YAMLError, without importing yaml up front
        problems.append(f"run option runtime_env={value!r}: {path} is not valid YAML: {e}")
        return {}
    if not isinstance(data, dict):
        problems.append(f"run option runtime_env={value!r}: {path} must hold a mapping (a Ray runtime_env),"
                        f" not {type(data).__name__}")
        return {}
    return data
