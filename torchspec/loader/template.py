"""Rendering spec values as sandboxed Jinja templates.

Values are rendered one at a time, never the file as text, so a param cannot
break the document's structure and errors keep their positions.  The common
case, ``"{{ name }}"`` or ``"job-{{ name }}"`` with plain param names, is
substituted without Jinja at all (same result as Jinja's ``str()``), so specs
with simple params never pay for importing and compiling Jinja.

Safety: Jinja's immutable sandbox, undefined names are errors, files are only
read from the spec's folder and configured template folders (checked after
resolving symlinks), huge repetitions are refused and rendering a document
has a time limit.  Environment variables are reachable only through
``env("NAME", "default")``, and every name read is recorded.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
import re
import signal
import threading
from typing import Any, Iterator

from torchspec.errors import did_you_mean
from torchspec.loader.source import FILES, Source
from torchspec.redaction import ENV_READ, redact_text

#: The largest string or list one ``*`` may build in a template.
MAX_REPEAT = 100_000
#: The largest template file an import or include may read.
MAX_TEMPLATE_BYTES = 1024 * 1024
#: Seconds one document may spend rendering templates (main thread only).
RENDER_SECONDS = 5.0

_SIMPLE = re.compile(r"\{\{-?\s*([A-Za-z_][A-Za-z0-9_]*)\s*-?\}\}")
_SINGLE = re.compile(r"\A\s*\{\{-?(.*?)-?\}\}\s*\Z", re.S)
_UNDEFINED_NAME = re.compile(r"'([A-Za-z_][A-Za-z0-9_]*)' is undefined")
_MISSING = object()
_JINJA_GLOBALS = frozenset({"range", "dict", "lipsum", "cycler", "joiner", "namespace", "env"})


def is_template(value: str) -> bool:
    return "{{" in value or "{%" in value or "{#" in value


#: The files the renderer running in this context has read (imports, includes): see Renderer.dependencies.
_READS: contextvars.ContextVar[set[str] | None] = contextvars.ContextVar("torchspec_template_reads", default=None)


def redact_env(text: str) -> str:
    """``text`` with the value of every variable ``env()`` read in this process replaced by
    ``<value from env(NAME)>`` (see :mod:`torchspec.redaction`)."""
    return redact_text(text)


class RenderError(Exception):
    """A template failed; ``line`` is the 1-based line inside the value, where known.

    ``origin`` is ``(file, line)`` when the failure happened inside an imported
    template file (a macro's body, a syntax error in the file).
    """

    def __init__(self, code: str, message: str, hint: str | None = None, line: int = 1,
                 origin: tuple[str, int] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.hint = hint
        self.line = line
        self.origin = origin


class _EnvNotSet(Exception):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


class _Timeout(BaseException):
    """A BaseException so that no ``except Exception`` inside rendering swallows it."""


class Renderer:
    """Renders the string values of one document with one set of variables."""

    def __init__(
        self,
        variables: dict[str, Any],
        spec_dir: str,
        imports: dict[str, str] | None = None,
        template_paths: list[str] | tuple[str, ...] = (),
        source: Source = FILES,
    ) -> None:
        self.variables = variables
        self.source = source
        self.roots = [source.realpath(spec_dir)] + [source.realpath(p) for p in template_paths]
        self.imports = dict(imports or {})
        self.env_read: list[str] = []
        #: real paths of the template files Jinja loaded for this renderer (imports, includes, extends)
        self.files_read: set[str] = set()
        self._jinja: Any = None
        self._context: dict[str, Any] | None = None

    # ------------------------------------------------------------ public

    def render(self, value: str) -> Any:
        """Render one value; a value that is exactly ``{{ expr }}`` keeps the expression's type."""
        simple = self._render_simple(value)
        if simple is not _MISSING:
            return simple
        single = _SINGLE.match(value)
        reads = _READS.set(self.files_read)
        try:
            if single and not any(t in single.group(1) for t in ("{{", "}}", "{%", "%}", "{#")):
                return _plain(self._expression(single.group(1))(**self.context()))
            return self._template(value).render(self.context())
        except RenderError:
            raise
        except Exception as e:  # every Jinja failure becomes a RenderError with a code
            raise self._explain(e) from None
        finally:
            _READS.reset(reads)

    def dependencies(self) -> list[str]:
        """Real paths of the files this document's values depend on besides the spec: the files its
        ``imports`` name and every template file Jinja asked for while rendering (includes, imports),
        found or not: a missing one is where the file would have to be (in the spec's folder)."""
        declared = {self._find(path) or self.source.realpath(os.path.join(self.roots[0], path))
                    for path in self.imports.values() if not os.path.isabs(path)}
        return sorted(self.files_read | declared)

    def context(self) -> dict[str, Any]:
        """Params, the ``env()`` function and the imported macro modules."""
        if self._context is None:
            # params win over env() and imports, as on the fast path: a param named `env` hides env()
            self._context = {"env": self._env}
            for alias, path in self.imports.items():
                self._context[alias] = self._import(alias, path)
            self._context.update(self.variables)
        return self._context

    @contextlib.contextmanager
    def deadline(self, seconds: float = RENDER_SECONDS) -> Iterator[None]:
        """Stop runaway templates (nested loops) after ``seconds``.

        Uses SIGALRM, which only the main thread can receive; elsewhere the
        size limits still hold but there is no clock.
        """
        if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
            yield
            return

        def expire(signum: int, frame: Any) -> None:
            raise _Timeout()

        previous = signal.signal(signal.SIGALRM, expire)
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            yield
        except _Timeout:
            raise RenderError("TS403", f"templates took longer than {seconds:g}s to render",
                              "templates must be small: avoid large or nested loops") from None
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)

    # ------------------------------------------------------------ the fast path

    def _render_simple(self, value: str) -> Any:
        """Substitute plain ``{{ name }}`` params without Jinja; _MISSING when Jinja is needed."""
        if "{%" in value or "{#" in value:
            return _MISSING
        matches = list(_SIMPLE.finditer(value))
        if not matches or value.count("{{") != len(matches):
            return _MISSING
        for m in matches:
            name = m.group(1)
            if name not in self.variables:
                if name in _JINJA_GLOBALS or name in self.imports:
                    return _MISSING
                raise self._undefined(name)
        if len(matches) == 1 and _SINGLE.match(value) and matches[0].group(0).strip() == value.strip():
            return _copy(self.variables[matches[0].group(1)])
        return _SIMPLE.sub(lambda m: str(self.variables[m.group(1)]), value)

    def _undefined(self, name: str) -> RenderError:
        names = [n for n in list(self.variables) + list(self.imports) + ["env"]]
        guess = did_you_mean(name, names)
        if guess:
            hint = f"did you mean {guess!r}?"
        elif self.variables:
            hint = f"declared params: {', '.join(self.variables)}"
        else:
            hint = "declare it under params:, or escape literal braces with {{ '{{' }}"
        return RenderError("TS402", f"{name!r} is undefined", hint)

    # ------------------------------------------------------------ Jinja

    def jinja(self) -> Any:
        if self._jinja is None:
            self._jinja = _environment(tuple(self.roots), self.source)
        return self._jinja

    def _template(self, source: str) -> Any:
        return _compiled(self.jinja(), "t", source)

    def _expression(self, source: str) -> Any:
        return _compiled(self.jinja(), "e", source)

    def read_confined(self, path: str) -> str | None:
        """Text of ``path`` if it is a regular, small file inside an allowed folder, else None.

        Never follows a path out of the allowed folders (``..``, absolute
        paths, symlinks) and never opens devices or FIFOs, which could hang.
        """
        real = self._find(path)
        if real is None or self.source.size(real) > MAX_TEMPLATE_BYTES:
            return None
        return self.source.read(real, MAX_TEMPLATE_BYTES).decode("utf-8", errors="replace")

    def _find(self, path: str) -> str | None:
        """The real path of the regular file ``path`` names in the first allowed folder holding one, else None."""
        if os.path.isabs(path) or ".." in path.replace("\\", "/").split("/"):
            return None
        for root in self.roots:
            real = self.source.realpath(os.path.join(root, path))
            if _inside(real, self.roots) and self.source.is_file(real):
                return real
        return None

    def _env(self, name: str, default: Any = _MISSING) -> Any:
        if not isinstance(name, str):
            raise RenderError("TS404", "env() takes the variable name as a string")
        if name not in self.env_read:
            self.env_read.append(name)
        ENV_READ.add(name)
        value = os.environ.get(name)
        if value is None:
            if default is _MISSING:
                raise _EnvNotSet(name)
            return default
        return value

    def _import(self, alias: str, path: str) -> Any:
        if os.path.isabs(path) or ".." in path.replace("\\", "/").split("/"):
            raise RenderError("TS405", f"import {alias!r}: {path!r} must be a path inside the spec's folder",
                              "name the file relative to the spec, without '..'")
        try:
            template = self.jinja().get_template(path.replace("\\", "/"))
            return template.make_module(dict(self.variables, env=self._env))
        except RenderError:
            raise
        except Exception as e:
            error = self._explain(e)
            raise RenderError(error.code, f"import {alias!r} ({path}): {error.message}", error.hint,
                              origin=error.origin) from None

    def _explain(self, e: BaseException) -> RenderError:
        error = self._explained(e)
        error.origin = error.origin or _origin(e)
        return error

    def _explained(self, e: BaseException) -> RenderError:
        from jinja2 import exceptions as jx

        if isinstance(e, _EnvNotSet):
            return RenderError("TS406", f"environment variable {e.name!r} is not set",
                               f'give a default: env("{e.name}", "value"), or set it before running')
        if isinstance(e, jx.TemplateSyntaxError):
            return RenderError("TS401", e.message or str(e), _syntax_hint(e.message or ""), e.lineno or 1)
        if isinstance(e, jx.TemplateNotFound):
            return RenderError("TS405", f"template file {e.name!r} not found in the allowed folders",
                               f"allowed folders: {', '.join(self.roots)}")
        if isinstance(e, jx.SecurityError):
            return RenderError("TS403", f"not allowed in the template sandbox: {e}",
                               "templates may only use params, env(), imports and Jinja's filters")
        if isinstance(e, jx.UndefinedError):
            m = _UNDEFINED_NAME.search(str(e))
            if m:
                return self._undefined(m.group(1))
            return RenderError("TS402", str(e))
        if isinstance(e, RecursionError):
            return RenderError("TS404", "templates recurse too deeply")
        return RenderError("TS404", f"{type(e).__name__}: {e}")


_WIDTHS = re.compile(r"%[-+ #0]*(\d+)|%[-+ #0]*\d*\.(\d+)|\{[^{}]*:[^{}]*?(\d+)[^{}]*\}")


def _check_widths(fmt: str) -> None:
    """Refuse format strings whose field widths would build huge strings (``%0999999999d``)."""
    from jinja2.sandbox import SecurityError

    for match in _WIDTHS.finditer(fmt):
        if any(g and int(g) > MAX_REPEAT for g in match.groups()):
            raise SecurityError(f"format widths above {MAX_REPEAT} are not allowed")


def _bounded(f: Any) -> Any:
    """A filter whose numeric arguments (widths, lengths) are capped, and whose format string is checked."""
    from jinja2.sandbox import SecurityError

    @functools.wraps(f)
    def bounded(*args: Any, **kwargs: Any) -> Any:
        for value in list(args) + list(kwargs.values()):
            if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_REPEAT:
                raise SecurityError(f"filter arguments above {MAX_REPEAT} are not allowed")
        if f.__name__ == "do_format" and args and isinstance(args[0], str):
            _check_widths(args[0])
        return f(*args, **kwargs)

    return bounded


def _origin(e: BaseException) -> tuple[str, int] | None:
    """``(file, line)`` in the template file where ``e`` happened; None for a spec's own values.

    A syntax error names its file; an error raised while a macro ran is found
    in the traceback, whose frames from template files carry Jinja's map from
    the compiled code's lines back to the template's (``debug_info``).
    """
    filename = getattr(e, "filename", None)
    if isinstance(filename, str) and getattr(e, "lineno", None):
        return filename, int(e.lineno)  # type: ignore[attr-defined]
    found = None
    tb = e.__traceback__
    while tb is not None:
        info = tb.tb_frame.f_globals.get("debug_info")
        file = tb.tb_frame.f_globals.get("__file__")
        if isinstance(info, str) and isinstance(file, str) and file == tb.tb_frame.f_code.co_filename:
            pairs = [tuple(map(int, x.split("="))) for x in info.split("&") if x]
            found = file, next((t for t, c in reversed(pairs) if c <= tb.tb_lineno), 1)
        tb = tb.tb_next
    return found


def _inside(real: str, roots: list[str]) -> bool:
    return any(real == root or real.startswith(root + os.sep) for root in roots)


def _syntax_hint(message: str) -> str | None:
    if "unexpected '}'" in message or "expected token 'end of print statement'" in message:
        return "check the {{ ... }} braces; write a literal '{{' as {{ '{{' }}"
    if "Unexpected end of template" in message:
        return "close every {% if %} / {% for %} with its {% endif %} / {% endfor %}"
    return None


def _copy(value: Any) -> Any:
    if isinstance(value, list):
        return [_copy(v) for v in value]
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    return value


def _plain(value: Any) -> Any:
    """Native template results as plain data a spec can hold."""
    from jinja2 import Undefined

    if isinstance(value, Undefined):
        str(value)  # StrictUndefined raises the UndefinedError with its name
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    raise RenderError("TS404", f"the template produced a {type(value).__name__}, which a spec cannot hold",
                      "convert it, e.g. with | list or | string")


@functools.lru_cache(maxsize=64)
def _environment(roots: tuple[str, ...], source: Source) -> Any:
    """One sandbox per set of allowed folders (and source), shared by every document that has them.

    Sharing matters for lint: a thousand specs in one folder compile each
    distinct template once, not once per file.
    """
    return _make_environment(list(roots), source)


def _compiled(env: Any, kind: str, source: str) -> Any:
    """A compiled template ("t") or expression ("e"), cached on its environment."""
    cache: dict[tuple[str, str], Any] = env.compiled_cache
    key = (kind, source)
    found = cache.get(key)
    if found is None:
        if len(cache) > 4096:
            cache.clear()
        found = cache[key] = (env.from_string(source) if kind == "t"
                              else env.compile_expression(source, undefined_to_none=False))
    return found


def _note_read(path: str) -> None:
    reads = _READS.get()
    if reads is not None:
        reads.add(path)


def _make_environment(roots: list[str], source: Source) -> Any:
    from jinja2 import BaseLoader, StrictUndefined, TemplateNotFound
    from jinja2.loaders import split_template_path
    from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError

    class ConfinedLoader(BaseLoader):
        """Reads templates from ``source``, only from the allowed folders, after resolving symlinks.

        Each template Jinja asks for is noted as a read of the renderer at
        work: on first load here, and on every cache hit in ``uptodate``
        (Jinja asks it each time, as ``auto_reload`` is on).
        """

        def get_source(self, environment: Any, template: str) -> Any:
            pieces = split_template_path(template.replace("\\", "/"))  # refuses '..' as FileSystemLoader does
            for root in roots:  # check before opening: a FIFO or a device would hang or flood the read
                real = source.realpath(os.path.join(root, *pieces))
                if not source.exists(real):
                    continue
                if not _inside(real, roots) or not source.is_file(real) or source.size(real) > MAX_TEMPLATE_BYTES:
                    raise TemplateNotFound(template)
                text = source.read(real, MAX_TEMPLATE_BYTES).decode("utf-8")
                stamp = source.stamp(real)
                _note_read(real)

                def uptodate(real: str = real, stamp: object = stamp) -> bool:
                    _note_read(real)
                    return source.stamp(real) == stamp

                return text, real, uptodate
            _note_read(source.realpath(os.path.join(roots[0], *pieces)))  # missing: still what the spec uses
            raise TemplateNotFound(template)

    class Sandbox(ImmutableSandboxedEnvironment):
        intercepted_binops = frozenset(["*", "**", "%"])

        def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
            if operator == "**" and isinstance(right, (int, float)):
                size = abs(left).bit_length() if isinstance(left, int) else 64
                if abs(right) > 64 or size * abs(right) > 4096:
                    raise SecurityError("powers larger than 4096 bits are not allowed")
            if operator == "%" and isinstance(left, str):
                _check_widths(left)
            if operator == "*":
                for seq, n in ((left, right), (right, left)):
                    if isinstance(seq, (str, list, tuple)) and isinstance(n, int) and len(seq) * n > MAX_REPEAT:
                        raise SecurityError(f"repetition would build more than {MAX_REPEAT} items")
            return super().call_binop(context, operator, left, right)

        def getattr(self, obj: Any, attribute: str) -> Any:
            if isinstance(obj, str) and attribute in ("format", "format_map"):
                _check_widths(obj)  # "{:>999999999}".format(1)
            return super().getattr(obj, attribute)

    env = Sandbox(loader=ConfinedLoader(), undefined=StrictUndefined, autoescape=False)
    for name in ("center", "indent", "wordwrap", "truncate", "format"):
        env.filters[name] = _bounded(env.filters[name])
    env.compiled_cache = {}  # see _compiled: it lives and dies with its environment
    return env
