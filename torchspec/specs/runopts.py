"""Scheduler run options: which ``cfg`` keys a scheduler accepts, their types, defaults and help.

A scheduler declares a :class:`runopts`; users hand over a ``cfg`` either as a
mapping or as the command-line literal ``"key=value,other=v1;v2"``.  The
literal is turned into typed values by :meth:`runopts.cfg_from_str`, then
:meth:`runopts.resolve` checks types and fills in defaults.
"""

from __future__ import annotations

import json
import typing
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple, Type, Union

from torchspec.errors import UsageError
from torchspec.specs.cases import spellings

#: The values a run option may hold: primitives, a list of str, a str -> str dict, or None (unset).
CfgVal = Union[str, int, float, bool, List[str], Dict[str, str], None]

# Literals accepted for a bool option given as text; anything else is an error
# rather than a silent False, so "ture" does not quietly disable a feature.
_TRUE_LITERALS = frozenset({"true", "1", "yes", "on"})
_FALSE_LITERALS = frozenset({"false", "0", "no", "off"})

# The same two characters separate list items and key-value pairs in a cfg literal.
_DELIMITERS = (",", ";")


class InvalidRunConfigException(UsageError):
    """Raised when a cfg misses a required option or gives a value of the wrong type.

    ``str()`` is TorchX's text, with the whole cfg; ``message`` names the option alone.
    """

    def __init__(self, invalid_reason: str, cfg_key: str, cfg: Mapping[str, CfgVal]) -> None:
        given = str(cfg) if cfg else "<EMPTY>"
        super().__init__(f"invalid run option: {invalid_reason}")
        self.args = (f"{invalid_reason}. Given: {given}",)
        self.cfg_key = cfg_key


def get_type_name(tp: Type[CfgVal]) -> str:
    """``"int"`` for plain classes, ``"typing.List[str]"`` for typing generics.

    Generic aliases carry a ``__name__`` too (``"List"``), which would hide the
    parameters a user needs to see in usage text, hence the module check.
    """
    if tp.__module__ != "typing" and hasattr(tp, "__name__"):
        return tp.__name__
    return str(tp)


def _split_items(value: str) -> List[str]:
    """Items of a list literal; either delimiter works and empty items (a trailing one) vanish."""
    return [item for item in value.replace(";", ",").split(",") if item]


def to_dict(arg: str) -> Dict[str, str]:
    """Split a cfg literal into raw (still textual) values by key.

    ``"FOO=v1,v2,BAR=v3"`` -> ``{"FOO": "v1,v2", "BAR": "v3"}``.  Because list
    items and pairs share the delimiters, the LAST ``,`` or ``;`` before each
    ``=`` starts the next key.  ``''`` or ``""`` stands for an empty value, and
    ``""`` (the whole literal) is an empty map.  List values keep their
    delimiters; casting is the caller's job.
    """
    if not arg:
        return {}
    pieces = [piece.strip() for piece in arg.split("=") if piece.strip()]
    if len(pieces) < 2:
        raise ValueError(f"`{arg}` does not have at least one `key=value` pair")

    def unquote(value: str) -> str:
        return "" if value in ('""', "''") else value

    out: Dict[str, str] = {}
    key = pieces[0]
    for value_then_key in pieces[1:-1]:
        cut = max(value_then_key.rfind(d) for d in _DELIMITERS)
        if cut <= 0 or cut == len(value_then_key) - 1:
            raise ValueError(f"`{value_then_key}` cannot be split into `val<delim>key` with delims={list(_DELIMITERS)}")
        out[key] = unquote(value_then_key[:cut].strip())
        key = value_then_key[cut + 1 :].strip()
    out[key] = unquote(pieces[-1])
    return out


def _is_list_type(tp: Any) -> bool:
    return tp is list or typing.get_origin(tp) is list


def _is_dict_type(tp: Any) -> bool:
    return tp is dict or typing.get_origin(tp) is dict


@dataclass
class runopt:
    """One declared option; ``default`` is None for required options."""

    default: CfgVal
    opt_type: Type[CfgVal]
    is_required: bool
    help: str

    def cast_to_type(self, value: str) -> CfgVal:
        """The typed value of ``value`` as written on a command line.

        Lists take ``,`` or ``;`` between items; dicts take ``k:v`` items the
        same way; bools take true/false, 1/0, yes/no, on/off in any case.
        """
        if self.opt_type is bool:
            lowered = value.strip().lower()
            if lowered in _TRUE_LITERALS:
                return True
            if lowered in _FALSE_LITERALS:
                return False
            raise ValueError(f"`{value}` is not a bool; use one of {sorted(_TRUE_LITERALS | _FALSE_LITERALS)}")
        if _is_list_type(self.opt_type):
            return _split_items(value)
        if _is_dict_type(self.opt_type):
            pairs: Dict[str, str] = {}
            for item in _split_items(value):
                key, sep, val = item.partition(":")
                if not sep:
                    raise ValueError(f"`{item}` is not a `key:value` item of a dict option")
                pairs[key] = val
            return pairs
        cast: Callable[[str], CfgVal] = self.opt_type  # type: ignore[assignment]
        return cast(value)


class runopts:
    """The run options a scheduler accepts, and the usage text ``print(opts)`` shows.

    Required options must not have a default; ``None`` is an allowed default
    for optional ones.  Options are kept in declaration order, which is the
    order the usage text lists them in.
    """

    def __init__(self) -> None:
        self._opts: Dict[str, runopt] = {}

    def __iter__(self) -> Iterator[Tuple[str, runopt]]:
        return iter(self._opts.items())

    def __len__(self) -> int:
        return len(self._opts)

    def __or__(self, other: "runopts") -> "runopts":
        """A new runopts with both sets; ``other`` wins for a key declared in both."""
        merged = runopts()
        merged.update(self)
        merged.update(other)
        return merged

    @staticmethod
    def is_type(obj: CfgVal, tp: Type[CfgVal]) -> bool:
        """``isinstance`` that also accepts the ``List[str]`` and ``Dict[str, str]`` generics.

        ``isinstance`` refuses generic aliases, so for those any list of str or
        any str -> str dict passes (an empty one included).
        """
        try:
            return isinstance(obj, tp)
        except TypeError:
            if isinstance(obj, list):
                return all(isinstance(item, str) for item in obj)
            if isinstance(obj, dict):
                return all(isinstance(k, str) and isinstance(v, str) for k, v in obj.items())
            return False

    def get(self, name: str) -> Optional[runopt]:
        """The option declared as ``name`` or as its other spelling (``runAs`` for ``run_as``), or None."""
        key = self._declared_key(name)
        return None if key is None else self._opts[key]

    def _declared_key(self, name: str) -> Optional[str]:
        """The spelling ``name``'s option was declared under; an exact match wins over an alias."""
        for spelling in spellings(name):
            if spelling in self._opts:
                return spelling
        return None

    def _canonicalize(self, cfg: Mapping[str, CfgVal]) -> Dict[str, CfgVal]:
        """``cfg`` with every declared option under its declared spelling; unknown keys stay as given.

        The same option given under both spellings is fine when the values
        agree (they collapse into one) and an error when they differ: silently
        preferring one would make the result depend on the order of the keys.
        """
        out: Dict[str, CfgVal] = {}
        given_as: Dict[str, str] = {}
        for key, val in cfg.items():
            declared = self._declared_key(key) or key
            if declared in out:
                if out[declared] != val:
                    raise InvalidRunConfigException(
                        f"Run option: {declared}, was given under two spellings with different values:"
                        f" `{given_as[declared]}={out[declared]}` and `{key}={val}`",
                        declared,
                        cfg,
                    )
                continue
            out[declared] = val
            given_as[declared] = key
        return out

    def resolve(self, cfg: Mapping[str, CfgVal]) -> Dict[str, CfgVal]:
        """A new cfg with defaults filled in, after checking required options and types.

        ``cfg`` itself is left untouched.  Keys this runopts does not declare
        are kept as they are, because one cfg is often shared by several
        schedulers.  ``None`` counts as "not given" and matches any type.
        A declared option may be given in camelCase (``runAs``); the result
        holds it under its declared spelling only.
        """
        resolved: Dict[str, CfgVal] = self._canonicalize(cfg)
        for key, opt in self._opts.items():
            val = resolved.get(key)
            if opt.is_required and val is None:
                raise InvalidRunConfigException(
                    f"Required run option: {key}, must be provided and not `None`", key, cfg
                )
            if val is not None and not runopts.is_type(val, opt.opt_type):
                raise InvalidRunConfigException(
                    f"Run option: {key}, must be of type: {get_type_name(opt.opt_type)},"
                    f" but was: {val} ({type(val).__name__})",
                    key,
                    cfg,
                )
            if val is None:
                resolved[key] = opt.default
        return resolved

    def cfg_from_str(self, cfg_str: str) -> Dict[str, CfgVal]:
        """Typed values from a cfg literal such as ``"FOO=v1;v2,BAR=v3"``.

        Unknown keys are dropped (with a log warning): their type is unknown,
        so they cannot be cast.  Defaults and required options are NOT
        handled here; call ``opts.resolve(opts.cfg_from_str(literal))``.
        Keys come back under their declared spelling, as in :meth:`resolve`.
        """
        cfg: Dict[str, CfgVal] = {}
        for key, val in to_dict(cfg_str).items():
            opt = self.get(key)
            if opt is None:
                # logging is imported only here: it is the one thing in this module that needs it
                import logging

                logging.getLogger(__name__).warning("Unknown run option passed to scheduler: %s=%s", key, val)
                continue
            cfg[key] = opt.cast_to_type(val)
        return self._canonicalize(cfg)

    def cfg_from_json_repr(self, json_repr: str) -> Dict[str, CfgVal]:
        """Typed values from a JSON object; unknown keys are dropped, ``null`` stays None.

        JSON lists and objects may hold numbers; the ``List[str]`` and
        ``Dict[str, str]`` options get them as strings so that :meth:`resolve`
        accepts them.
        """
        cfg: Dict[str, CfgVal] = {}
        for key, val in json.loads(json_repr).items():
            opt = self.get(key)
            if opt is None:
                continue
            if val is None:
                cfg[key] = None
            elif _is_list_type(opt.opt_type):
                cfg[key] = [str(item) for item in val]
            elif _is_dict_type(opt.opt_type):
                cfg[key] = {str(k): str(v) for k, v in val.items()}
            else:
                cfg[key] = val
        return self._canonicalize(cfg)

    def add(
        self,
        cfg_key: str,
        type_: Type[CfgVal],
        help: str,
        default: CfgVal = None,
        required: bool = False,
    ) -> None:
        """Declare (or redeclare) an option; a required option must not have a default."""
        if required and default is not None:
            raise ValueError(f"Required option: {cfg_key} must not specify default value. Given: {default}")
        if default is not None and not runopts.is_type(default, type_):
            raise TypeError(
                f"Option: {cfg_key}, must be of type: {type_}. Given: {default} ({type(default).__name__})"
            )
        self._opts[cfg_key] = runopt(default, type_, required, help)

    def update(self, other: "runopts") -> None:
        """Add every option of ``other``, replacing same-named ones."""
        self._opts.update(other._opts)

    def __repr__(self) -> str:
        required = [(key, opt) for key, opt in self._opts.items() if opt.is_required]
        optional = [(key, opt) for key, opt in self._opts.items() if not opt.is_required]

        synopsis = []
        for key, opt in required + optional:
            item = f"{key}={key.upper()}"
            synopsis.append(item if opt.is_required else f"[{item}]")
        out = "    usage:\n        " + ",".join(synopsis)

        for section, opts in (("required", required), ("optional", optional)):
            if not opts:
                continue
            out += f"\n\n    {section} arguments:"
            for key, opt in opts:
                default = "" if opt.is_required else f", {opt.default}"
                out += f"\n        {key}={key.upper()} ({get_type_name(opt.opt_type)}{default})"
                out += f"\n            {opt.help}"
        return out


__all__ = [
    "CfgVal",
    "InvalidRunConfigException",
    "get_type_name",
    "runopt",
    "runopts",
    "to_dict",
]
