"""Scheduler run options: what a scheduler accepts, how strings become typed values, and usage text."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterator, List, Mapping, Optional, Tuple, Type, Union

#: The values a run option may take.
CfgVal = Union[str, int, float, bool, List[str], Dict[str, str], None]


class InvalidRunConfigException(Exception):
    """The cfg does not satisfy the runopts: a required option is missing or a value has the wrong type."""

    def __init__(self, invalid_reason: str, cfg_key: str, cfg: Mapping[str, CfgVal]) -> None:
        given = str(cfg) if cfg else "<EMPTY>"
        super().__init__(f"{invalid_reason}. Given: {given}")
        self.cfg_key = cfg_key


def get_type_name(tp: Type[CfgVal]) -> str:
    """``int`` for plain classes, ``typing.List[str]`` for generic aliases."""
    if tp.__module__ != "typing" and hasattr(tp, "__name__"):
        return tp.__name__
    return str(tp)


def to_dict(arg: str) -> Dict[str, str]:
    """Split ``"FOO=v1,v2;BAR=v3"`` into ``{"FOO": "v1,v2", "BAR": "v3"}``.

    The same delimiters (``,`` and ``;``) separate list items and key-value
    pairs, so the last delimiter before each ``=`` starts the next key; a
    trailing delimiter is dropped.  ``''`` or ``""`` stands for the empty string.
    """
    out: Dict[str, str] = {}
    if not arg:
        return out
    parts = [p.strip() for p in arg.split("=")]
    if len(parts) < 2 or not parts[0]:
        raise ValueError(f"{arg} cannot be parsed as a key-value pair")
    key = parts[0]
    for middle in parts[1:-1]:
        idx = max(middle.rfind(","), middle.rfind(";"))
        if idx == -1:
            raise ValueError(f"{middle} cannot be parsed as ``val-delim-key``")
        out[key] = _to_val(middle[:idx])
        key = middle[idx + 1 :].strip()
    out[key] = _to_val(parts[-1].rstrip(",;"))
    return out


def _to_val(value: str) -> str:
    value = value.strip()
    return "" if value in ("''", '""') else value


@dataclass
class runopt:
    """Metadata about one run option."""

    default: CfgVal
    opt_type: Type[CfgVal]
    is_required: bool
    help: str


class runopts:
    """The run options a scheduler accepts: keys, types, defaults and help.

    Required options have no default.  ``print(opts)`` shows the usage.
    """

    def __init__(self) -> None:
        self._opts: Dict[str, runopt] = {}

    def __iter__(self) -> Iterator[Tuple[str, runopt]]:
        return self._opts.items().__iter__()

    def __len__(self) -> int:
        return len(self._opts)

    @staticmethod
    def is_type(obj: CfgVal, tp: Type[CfgVal]) -> bool:
        """``isinstance`` that also understands ``List[str]`` and ``Dict[str, str]``."""
        try:
            return isinstance(obj, tp)
        except TypeError:
            if isinstance(obj, list):
                return all(isinstance(e, str) for e in obj)
            if isinstance(obj, dict):
                return all(isinstance(k, str) and isinstance(v, str) for k, v in obj.items())
            return False

    def get(self, name: str) -> Optional[runopt]:
        return self._opts.get(name, None)

    def resolve(self, cfg: Mapping[str, CfgVal]) -> Dict[str, CfgVal]:
        """Check ``cfg`` and fill in defaults; keys this runopts does not know are kept as they are."""
        resolved: Dict[str, CfgVal] = {**cfg}
        for key, opt in self._opts.items():
            val = resolved.get(key)
            if opt.is_required and val is None:
                raise InvalidRunConfigException(
                    f"Required run option: {key}, must be provided and not `None`", key, cfg)
            if val is not None and not runopts.is_type(val, opt.opt_type):
                raise InvalidRunConfigException(
                    f"Run option: {key}, must be of type: {get_type_name(opt.opt_type)},"
                    f" but was: {val} ({type(val).__name__})", key, cfg)
            if val is None:
                resolved[key] = opt.default
        return resolved

    def cfg_from_str(self, cfg_str: str) -> Dict[str, CfgVal]:
        """Parse ``"K=a,b;J=c"`` into typed values; unknown keys are ignored, defaults not applied."""

        def cast(value: str, opt_type: Type[CfgVal]) -> CfgVal:
            if opt_type == bool:
                return value.lower() == "true"
            if opt_type == List[str]:
                return [v for v in value.replace(";", ",").split(",") if v]
            if opt_type == Dict[str, str]:
                return {s.split(":", 1)[0]: s.split(":", 1)[1]
                        for s in value.replace(";", ",").split(",") if s}
            return opt_type(value)  # type: ignore[call-arg,misc]

        cfg: Dict[str, CfgVal] = {}
        for key, val in to_dict(cfg_str).items():
            opt = self.get(key)
            if opt:
                cfg[key] = cast(val, opt.opt_type)
        return cfg

    def cfg_from_json_repr(self, json_repr: str) -> Dict[str, CfgVal]:
        """Parse a JSON object of options, keeping only known keys (lists and dicts as they are)."""
        import json

        cfg: Dict[str, CfgVal] = {}
        for key, val in json.loads(json_repr).items():
            opt = self.get(key)
            if opt:
                cfg[key] = val
        return cfg

    def add(self, cfg_key: str, type_: Type[CfgVal], help: str, default: CfgVal = None,
            required: bool = False) -> None:
        """Declare an option; a required option must not have a default."""
        if required and default is not None:
            raise ValueError(f"Required option: {cfg_key} must not specify default value. Given: {default}")
        if default is not None and not runopts.is_type(default, type_):
            raise TypeError(f"Option: {cfg_key}, must be of type: {type_}. Given: {default} ({type(default).__name__})")
        self._opts[cfg_key] = runopt(default, type_, required, help)

    def update(self, other: "runopts") -> None:
        self._opts.update(other._opts)

    def __repr__(self) -> str:
        required = [(k, o) for k, o in self._opts.items() if o.is_required]
        optional = [(k, o) for k, o in self._opts.items() if not o.is_required]
        out = "    usage:\n        "
        for i, (key, opt) in enumerate(required + optional):
            contents = f"{key}={key.upper()}"
            if not opt.is_required:
                contents = f"[{contents}]"
            if i > 0:
                contents = "," + contents
            out += contents
        for section, opts in (("required", required), ("optional", optional)):
            if not opts:
                continue
            out += f"\n\n    {section} arguments:"
            for key, opt in opts:
                default = "" if opt.is_required else f", {opt.default}"
                out += f"\n        {key}={key.upper()} ({get_type_name(opt.opt_type)}{default})"
                out += f"\n            {opt.help}"
        return out


