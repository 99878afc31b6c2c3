"""Run options (``-c``): the one place that turns what a user gave into a scheduler's cfg.

``submit``, ``dryrun``, ``lint --scheduler`` and :meth:`Runner.dryrun` all
resolve run options here, in the same order (the scheduler's defaults, then
the config file's ``[scheduler.NAME]`` table, then what was given), and every
problem is reported at once with a did-you-mean, so fixing a command line
takes one round trip rather than one per typo.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional, Union, get_origin

from torchspec.errors import did_you_mean
from torchspec.specs import CfgVal, InvalidRunConfigException, runopts
from torchspec.specs.runopts import get_type_name, to_dict

if TYPE_CHECKING:
    from torchspec.config import Config

#: What callers hand over: ``-c`` text (``"a=1,b=x"``), a mapping, or nothing.
GivenOptions = Union[str, Mapping[str, Any], None]


class RunOptionsError(InvalidRunConfigException):
    """Run options a scheduler refuses: every problem found, each naming its option.

    A :class:`~torchspec.specs.InvalidRunConfigException` (so TorchX-style
    code catches it) and so a usage error.  Each problem is one line that
    says what was expected; the hint names the command that lists every
    option, rather than the list itself, which buried the one line that
    mattered under twenty that did not.
    """

    def __init__(self, scheduler: str, opts: runopts, problems: Mapping[str, str], cfg: Mapping[str, Any]) -> None:
        self.problems = list(problems.values())
        self.scheduler = scheduler
        super().__init__("; ".join(self.problems), next(iter(problems)), cfg)
        if len(self.problems) == 1:
            self.message = self.problems[0]
        else:
            self.message = f"{len(self.problems)} problems with the run options of {scheduler}:\n" + "\n".join(
                f"  - {p}" for p in self.problems)
        guessed = all("(did you mean " in p for p in self.problems)  # the fix is said already
        self.hint = None if guessed else f"the run options of {scheduler}, with types: torchspec runopts {scheduler}"


def resolve_run_options(
    scheduler: str,
    opts: runopts,
    given: GivenOptions = None,
    config: Optional["Config"] = None,
    *,
    strict: bool = True,
    implied: Optional[Mapping[str, CfgVal]] = None,
) -> Dict[str, CfgVal]:
    """The cfg ``scheduler`` runs with: its defaults, then ``config``'s ``[scheduler.NAME]``, then what the
    name it was asked for by implies (``implied``: TorchX's ``local_cwd`` is ``local`` with ``use_cwd``),
    then ``given``.

    Every option ends up under its declared spelling, so ``-c runAs=x``
    overrides a config file's ``run_as`` (the same option given twice in one
    place with two values is an error).  A ``None`` value counts as not given.

    With ``strict`` (the CLI, lint), text values are cast to the option's
    type as ``-c`` does, a key the scheduler does not declare is an error with
    a did-you-mean, and every problem is reported at once.  Without it (the
    Python API), it behaves as TorchX's ``runopts.resolve``: unknown keys are
    kept (one cfg may serve several schedulers) and a wrong type is refused
    with TorchX's message.

    Raises:
        RunOptionsError: (strict) every unknown key, unreadable value, wrong
            type and missing required option, at once.
        InvalidRunConfigException: (not strict) the first problem, as TorchX.
    """
    problems: Dict[str, str] = {}  # option (or "" for the -c text itself) -> what is wrong with it
    cfg: Dict[str, CfgVal] = {}
    if config is not None:
        from torchspec.config import scheduler_cfg

        cfg.update(_declared(opts, scheduler_cfg(config, scheduler, opts)))
    cfg.update(_declared(opts, implied or {}))
    raw = _given(scheduler, given, problems)
    overlay: Dict[str, CfgVal] = {}
    for key, value in raw.items():
        if value is None:
            continue
        opt = opts.get(key)
        if opt is None:
            if strict:
                guess = did_you_mean(key, [name for name, _ in opts])
                mean = f" (did you mean {guess!r}?)" if guess else ""
                problems[key] = f"{scheduler} has no run option {key!r}{mean}"
            else:
                overlay[key] = value
            continue
        if strict and isinstance(value, str) and opt.opt_type is not str:
            try:
                value = opt.cast_to_type(value)
            except (TypeError, ValueError):
                problems[key] = f"run option {key}={value}: expected {_expected(opt.opt_type)}"
                continue
        name = _name_of(opts, opt)
        if name in overlay and overlay[name] != value:
            problems[name] = f"run option {name} is given twice with different values: {overlay[name]!r} and {value!r}"
        overlay[name] = value
    cfg.update(overlay)
    if strict:
        for key, problem in _type_problems(opts, cfg).items():
            problems.setdefault(key, problem)
    elif problems:  # only unreadable text can get here
        raise InvalidRunConfigException(problems[next(iter(problems))], next(iter(problems)), raw)
    if problems:
        raise RunOptionsError(scheduler, opts, problems, {**cfg, **raw})
    return opts.resolve(cfg)


def _name_of(opts: runopts, opt: Any) -> str:
    """The spelling ``opt`` was declared under."""
    return next(name for name, declared in opts if declared is opt)


def _declared(opts: runopts, cfg: Mapping[str, CfgVal]) -> Dict[str, CfgVal]:
    """``cfg`` with every key under its declared spelling (keys ``opts`` does not know stay as they are)."""
    out: Dict[str, CfgVal] = {}
    for key, value in cfg.items():
        opt = opts.get(key)
        out[_name_of(opts, opt) if opt is not None else key] = value
    return out


def _given(scheduler: str, given: GivenOptions, problems: Dict[str, str]) -> Dict[str, Any]:
    """``given`` as a mapping; unreadable ``-c`` text is a problem (and no options)."""
    if given is None:
        return {}
    if isinstance(given, str):
        try:
            return dict(to_dict(given))
        except ValueError as e:
            problems[""] = f"cannot read -c {given!r} for {scheduler}: {e}"
            return {}
    return dict(given)


def _type_problems(opts: runopts, cfg: Mapping[str, CfgVal]) -> Dict[str, str]:
    """Required options nobody set and values of the wrong type (a camelCase spelling counts as set)."""
    problems: Dict[str, str] = {}
    for key, opt in opts:
        value = next((cfg[k] for k in cfg if opts.get(k) is opt), None)
        if opt.is_required and value is None:
            problems[key] = f"run option {key} is required (type {get_type_name(opt.opt_type)}): {opt.help}"
        elif value is not None and not runopts.is_type(value, opt.opt_type):
            problems[key] = (f"run option {key}={value!r}: expected {_expected(opt.opt_type)},"
                             f" not a {type(value).__name__}")
    return problems


def _expected(opt_type: Any) -> str:
    """What a value of ``opt_type`` looks like, in words (Python's own ``int('ten')`` text means nothing to
    someone who typed ``-c kill_grace_s=ten``)."""
    if opt_type is bool:
        return "true or false (or yes/no, on/off, 1/0)"
    if opt_type is int:
        return "a whole number"
    if opt_type is float:
        return "a number"
    if opt_type is dict or get_origin(opt_type) is dict:
        return "KEY:VALUE items separated by ',' or ';'"
    if opt_type is list or get_origin(opt_type) is list:
        return "items separated by ',' or ';'"
    return f"a value of type {get_type_name(opt_type)}"


__all__ = ["GivenOptions", "RunOptionsError", "resolve_run_options"]
