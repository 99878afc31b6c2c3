"""The Jinja sandbox templates render in, and the size limits that keep it small.

Jinja's immutable sandbox stops templates from reaching Python internals,
but not from building huge values: ``'x' * 10**9``, a replace or a join that
multiplies a string, a list of a thousand references to a big string that
is then printed, an ``a ~ a`` doubled twenty times.  Single C-level
operations like these cannot be interrupted once started, so each is
checked *before* it runs, against :data:`MAX_OUTPUT` printed characters:
every filter's inputs, ``*``/``+``/``%``/``~``, the string methods that
grow text, ``str.format``, block captures and every ``{{ }}`` output.  What
many small steps add up to is bounded by the renderer (the output of a
value and of a document) and by its clock and memory watch
(``Renderer.deadline``).

Nothing here knows about specs or files: ``template.py`` builds one
environment per set of allowed folders with :func:`make_environment`,
handing it the loader that confines what templates may read.
"""

from __future__ import annotations

import functools
import itertools
import os
import re
from typing import Any, Callable, Iterable, Iterator

#: The largest string or list one ``*`` may build in a template (items), and the largest number a filter takes.
MAX_REPEAT = 100_000
#: The most characters any one value in a template may print as: a string, a list printed, one rendered spec value.
MAX_OUTPUT = 1_000_000
#: The largest template file an import or include may read (template.py's loader checks it).
MAX_TEMPLATE_BYTES = 1024 * 1024
#: Bits an integer may grow to by ``*`` and ``**``.
MAX_INT_BITS = 4096

_WIDTHS = re.compile(r"%[-+ #0]*(\d+)|%[-+ #0]*\d*\.(\d+)|\{[^{}]*:[^{}]*?(\d+)[^{}]*\}")
_SEQUENCES = (str, bytes, list, tuple)


def _refuse(message: str) -> Exception:
    """A :class:`TooBig` (a jinja2 ``SecurityError``) saying what would have grown too large."""
    return _too_big_class()(message)


@functools.lru_cache(maxsize=1)
def _too_big_class() -> type:
    from jinja2.sandbox import SecurityError

    class TooBig(SecurityError):
        """An operation would build a value past the sandbox's size limits."""

    return TooBig


def is_too_big(error: BaseException) -> bool:
    """Whether ``error`` is a size refusal of this sandbox (rather than an unsafe attribute or call)."""
    return isinstance(error, _too_big_class())


def size_of(value: Any, budget: int = MAX_OUTPUT) -> int:
    """About how many characters ``value`` prints as, counting up to just past ``budget`` (then it stops).

    A list holding one big string a thousand times counts a thousand times:
    that is what printing it costs.  Iterators are not consumed (they count
    as nothing; the filters that consume them collect them with a budget).
    """
    total = 0
    stack = [value]
    while stack and total <= budget:
        item = stack.pop()
        if isinstance(item, (str, bytes)):
            total += len(item) + 2
        elif isinstance(item, (list, tuple, set, frozenset)):
            total += 2 * len(item) + 2
            stack.extend(itertools.islice(item, budget))
        elif isinstance(item, dict):
            total += 4 * len(item) + 2
            stack.extend(itertools.islice(itertools.chain.from_iterable(item.items()), budget))
        elif isinstance(item, range):
            total += 7 * len(item)
        elif isinstance(item, int) and not isinstance(item, bool):
            total += item.bit_length() // 3 + 1
        elif type(item).__module__.startswith("jinja2"):
            total += _jinja_object_size(item, stack)
        else:
            total += 8
    return total


def _jinja_object_size(item: Any, stack: list[Any]) -> int:
    """Size of a Jinja object: a namespace() prints its attributes (pushed on ``stack``); an Undefined nothing.

    Only through isinstance: any attribute access on a StrictUndefined raises.
    """
    from jinja2 import Undefined
    from jinja2.utils import Namespace

    if isinstance(item, Namespace):
        stack.append(object.__getattribute__(item, "_Namespace__attrs"))
        return 0
    return 0 if isinstance(item, Undefined) else 8


def check_size(value: Any, what: str = "a value") -> Any:
    """``value``, after making sure it prints to at most :data:`MAX_OUTPUT` characters."""
    if size_of(value) > MAX_OUTPUT:
        raise _refuse(f"{what} would hold more than {MAX_OUTPUT} characters")
    return value


def collect(items: Iterable[Any], what: str) -> list[Any]:
    """A list of ``items`` (an iterator a filter consumes), refused once it would print past :data:`MAX_OUTPUT`."""
    out: list[Any] = []
    total = 0
    for item in items:
        total += (len(item) if type(item) is str else size_of(item)) + 2  # the common case, without a call
        if total > MAX_OUTPUT or len(out) >= MAX_REPEAT:
            raise _refuse(f"{what} would hold more than {MAX_OUTPUT} characters")
        out.append(item)
    return out


def check_widths(fmt: str) -> None:
    """Refuse format strings whose field widths would build huge strings (``%0999999999d``)."""
    for match in _WIDTHS.finditer(fmt):
        if any(g and int(g) > MAX_REPEAT for g in match.groups()):
            raise _refuse(f"format widths above {MAX_REPEAT} are not allowed")


def check_format(fmt: Any, args: Iterable[Any], fields: int) -> None:
    """``fmt`` formatted with ``args`` (by ``%`` or ``str.format``) stays small: widths, and each field's value."""
    if not isinstance(fmt, str):
        return
    check_widths(fmt)
    values = list(args)
    if any(isinstance(v, int) and abs(v) > MAX_REPEAT for v in values) and ("*" in fmt or ":{" in fmt):
        raise _refuse(f"format widths above {MAX_REPEAT} are not allowed")
    largest = max((size_of(v) for v in values), default=0)
    if len(fmt) + fields * largest > MAX_OUTPUT:
        raise _refuse(f"the formatted text would hold more than {MAX_OUTPUT} characters")


def _predicted_by_method(owner: Any, name: str, args: tuple[Any, ...]) -> int:
    """The length a string (or bytes) method that grows its text would return; 0 for the others."""
    numbers = [a for a in args if isinstance(a, int) and not isinstance(a, bool)]
    if name in ("center", "ljust", "rjust", "zfill") and numbers:
        return max(len(owner), numbers[0])
    if name == "expandtabs":
        return len(owner) + owner.count("\t" if isinstance(owner, str) else b"\t") * (numbers[0] if numbers else 8)
    if name == "replace" and len(args) >= 2 and isinstance(args[0], type(owner)):
        old, new = args[0], args[1]
        hits = owner.count(old) if old else len(owner) + 1
        if len(args) > 2 and isinstance(args[2], int) and args[2] >= 0:
            hits = min(hits, args[2])
        return len(owner) + hits * max(size_of(new) - 2 - len(old), 0)
    if name == "translate" and args and isinstance(args[0], dict):
        return len(owner) * max((size_of(v) for v in args[0].values()), default=1)
    return 0


def _bounded_join(sep: Any, items: Iterable[Any], what: str) -> list[Any]:
    parts = collect(items, what)
    if size_of(parts) + len(sep) * len(parts) > MAX_OUTPUT:
        raise _refuse(f"{what} would hold more than {MAX_OUTPUT} characters")
    return parts


def _bounded_filter(name: str, f: Callable[..., Any]) -> Callable[..., Any]:
    """Filter ``f`` with its inputs checked: no input prints past MAX_OUTPUT, no number past MAX_REPEAT.

    An iterator (``map``, ``select``) is collected first, with a budget, so a
    consuming filter never holds more than the limit either; the filters
    whose output can outgrow their input get their own prediction.
    """
    skip = 1 if getattr(f, "jinja_pass_arg", None) is not None else 0  # the environment or context comes first

    @functools.wraps(f)
    def bounded(*args: Any, **kwargs: Any) -> Any:
        args = list(args)
        if len(args) > skip and isinstance(args[skip], Iterator):  # (hasattr would trip a StrictUndefined)
            args[skip] = collect(args[skip], f"the input of |{name}")
        for value in itertools.chain(args[skip:], kwargs.values()):
            if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_REPEAT:
                raise _refuse(f"filter arguments above {MAX_REPEAT} are not allowed")
            check_size(value, f"the input of |{name}")
        if len(args) > skip:
            special = _grown_by_filter(name, args[skip], args[skip + 1:], kwargs)
            if special is not None:
                return special
        return f(*args, **kwargs)

    return bounded


def _grown_by_filter(name: str, value: Any, rest: list[Any], kwargs: dict[str, Any]) -> list[Any] | None:
    """Refuse the filters whose output can outgrow their input, before they run; a list for ``|sum`` of lists."""
    def arg(index: int, key: str, default: Any) -> Any:
        return kwargs.get(key, rest[index] if len(rest) > index else default)

    grown = 0
    if name == "format":
        check_format(value, list(rest) + list(kwargs.values()), str(value).count("%"))
    elif name == "replace" and len(rest) >= 2:
        grown = _predicted_by_method(str(value), "replace", (str(rest[0]), str(rest[1]), *rest[2:]))
    elif name == "indent":
        width = arg(0, "width", 4)
        grown = len(str(value)) + str(value).count("\n") * (width if isinstance(width, int) else len(str(width)))
    elif name == "join":
        _bounded_join(str(arg(0, "d", "")), value, "|join")
    elif name == "wordwrap" and len(str(value)) > MAX_REPEAT:  # textwrap is superlinear in C: 1M spaces took 10 s
        raise _refuse(f"|wordwrap takes at most {MAX_REPEAT} characters")
    elif name == "sum" and isinstance(arg(1, "start", 0), list) and arg(0, "attribute", None) is None:
        items = list(value)
        if all(isinstance(x, list) for x in items):
            return list(arg(1, "start", 0)) + [y for x in items for y in x]  # linear: sum() of lists is quadratic
    if grown > MAX_OUTPUT:
        raise _refuse(f"|{name} would build more than {MAX_OUTPUT} characters")
    return None


def _bounded_lipsum(f: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(f)
    def bounded(n: int = 5, html: bool = True, min: int = 20, max: int = 100) -> Any:
        if n * max > MAX_REPEAT:
            raise _refuse(f"lipsum() of more than {MAX_REPEAT} words is not allowed")
        return f(n, html, min, max)

    return bounded


def inside(real: str, roots: list[str]) -> bool:
    """Whether the resolved path ``real`` is one of ``roots`` or below one."""
    return any(real == root or real.startswith(root + os.sep) for root in roots)


def make_environment(loader: Any) -> Any:
    """A new bounded sandbox reading templates through ``loader`` (which confines them: ``template.py``)."""
    from jinja2 import StrictUndefined

    env = _sandbox_class()(loader=loader, undefined=StrictUndefined, autoescape=False)
    for name in list(env.filters):
        env.filters[name] = _bounded_filter(name, env.filters[name])
    env.globals["lipsum"] = _bounded_lipsum(env.globals["lipsum"])
    env.compiled_cache = {}  # see template._compiled: it lives and dies with its environment
    return env


@functools.lru_cache(maxsize=1)
def _sandbox_class() -> type:
    from jinja2.compiler import CodeGenerator
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class BoundedCodeGenerator(CodeGenerator):
        """Compiles ``a ~ b`` to a checked join: Jinja's own turns each operand into text unchecked."""

        def visit_Concat(self, node: Any, frame: Any) -> None:
            self.write("environment.bounded_concat((")
            for arg in node.nodes:
                self.visit(arg, frame)
                self.write(", ")
            self.write("))")

    class Sandbox(ImmutableSandboxedEnvironment):
        code_generator_class = BoundedCodeGenerator
        intercepted_binops = frozenset(["*", "**", "%", "+"])

        def __init__(self, **options: Any) -> None:
            super().__init__(finalize=lambda value: check_size(value, "a {{ }} output"), **options)
            self.concat = self.bounded_concat  # block captures, macro bodies, call blocks

        def bounded_concat(self, parts: Iterable[Any]) -> str:
            parts = _bounded_join("", parts, "the joined text")
            return "".join(map(str, parts))

        def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
            _check_binop(operator, left, right)
            return super().call_binop(context, operator, left, right)

        def getattr(self, obj: Any, attribute: str) -> Any:
            if isinstance(obj, str) and attribute in ("format", "format_map"):
                check_widths(obj)  # "{:>999999999}".format(1)
            return super().getattr(obj, attribute)

        def wrap_str_format(self, value: Any) -> Any:
            wrapper = super().wrap_str_format(value)
            if wrapper is None:
                return None
            fmt = value.__self__

            @functools.wraps(wrapper)
            def checked(*args: Any, **kwargs: Any) -> Any:
                values = list(args) + list(kwargs.values())
                if value.__name__ == "format_map" and args and isinstance(args[0], dict):
                    values = list(args[0].values())
                check_format(fmt, values, fmt.count("{"))
                return wrapper(*args, **kwargs)

            return checked

        def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
            owner = getattr(__obj, "__self__", None)
            if isinstance(owner, (str, bytes)):
                name = getattr(__obj, "__name__", "")
                if name == "join" and args:
                    args = (_bounded_join(owner, args[0], "the joined text"),) + args[1:]
                elif _predicted_by_method(owner, name, args) > MAX_OUTPUT:
                    raise _refuse(f"{name}() would build more than {MAX_OUTPUT} characters")
            return super().call(__context, __obj, *args, **kwargs)

    return Sandbox


def _check_binop(operator: str, left: Any, right: Any) -> None:
    """``*``, ``**``, ``+`` and ``%`` must not build a huge number, string or list."""
    ints = isinstance(left, int) and isinstance(right, int)
    if operator == "**" and isinstance(right, (int, float)):
        size = abs(left).bit_length() if isinstance(left, int) else 64
        if abs(right) > 64 or size * abs(right) > MAX_INT_BITS:
            raise _refuse(f"powers larger than {MAX_INT_BITS} bits are not allowed")
    elif operator == "*" and ints:
        if abs(left).bit_length() + abs(right).bit_length() > MAX_INT_BITS:
            raise _refuse(f"products larger than {MAX_INT_BITS} bits are not allowed")
    elif operator == "*":
        for seq, n in ((left, right), (right, left)):
            if isinstance(seq, _SEQUENCES) and isinstance(n, int):
                if len(seq) * n > MAX_REPEAT or size_of(seq) * n > MAX_OUTPUT:
                    raise _refuse(f"repetition would build more than {MAX_REPEAT} items")
    elif operator == "+" and isinstance(left, _SEQUENCES) and isinstance(right, _SEQUENCES):
        if size_of(left) + size_of(right) > MAX_OUTPUT:
            raise _refuse(f"'+' would build more than {MAX_OUTPUT} characters")
    elif operator == "%" and isinstance(left, str):
        check_format(left, right if isinstance(right, tuple) else [right], left.count("%"))
