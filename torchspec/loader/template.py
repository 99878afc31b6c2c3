"""Rendering spec values as sandboxed Jinja templates.

Values are rendered one at a time, never the file as text, so a param cannot
break the document's structure and errors keep their positions.  The common
case, ``"{{ name }}"`` or ``"job-{{ name }}"`` with plain param names, is
substituted without Jinja at all (same result as Jinja's ``str()``), so specs
with simple params never pay for importing and compiling Jinja.

Safety: Jinja's immutable sandbox with size limits (``sandbox.py``), undefined
names are errors, files are only read from the spec's folder and configured
template folders (checked after resolving symlinks), and rendering a document
has limits on its output, its time and its memory.  Environment variables are
reachable only through ``env("NAME", "default")``, and every name read is
recorded.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
import re
import signal
import threading
import time
from typing import Any, Iterator

from torchspec.errors import did_you_mean
from torchspec.loader.parsers import unholdable_in
from torchspec.loader.sandbox import (MAX_OUTPUT, MAX_REPEAT, MAX_TEMPLATE_BYTES, inside, is_too_big, make_environment,
                                      size_of)
from torchspec.loader.source import FILES, Source
from torchspec.redaction import ENV_READ, redact_text
from torchspec.version import docs_url

__all__ = ["ENV_READ", "MAX_DOCUMENT_OUTPUT", "MAX_OUTPUT", "MAX_RENDER_MEMORY", "MAX_REPEAT", "MAX_TEMPLATE_BYTES",
           "RENDER_SECONDS", "Renderer", "RenderError", "is_template", "redact_env"]

#: Seconds one document may spend rendering templates (main thread only).
RENDER_SECONDS = 5.0
#: A render may take this many times :data:`RENDER_SECONDS` of wall time: the limit is the CPU time the render
#: itself used, which a busy machine (CI's workers sharing two cores) does not stretch; the wall-time backstop
#: is for a render that waits without using CPU.
RENDER_WALL_FACTOR = 4
#: Characters all the templates of one document may produce together.
MAX_DOCUMENT_OUTPUT = 8 * MAX_OUTPUT
#: Memory one document's rendering may add to the process (main thread, where /proc/self/statm exists).
MAX_RENDER_MEMORY = 256 * 1024 * 1024
#: How often the render clock and memory watch look (seconds).
_TICK = 0.05

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


def _drops_exceptions(frame: Any) -> bool:
    """Whether an exception raised at ``frame`` would be printed and dropped, not unwind the render.

    The clock's signal handler runs wherever Python is when the alarm comes,
    and Python calls gc callbacks, the unraisable hook and ``__del__`` methods
    where nothing can catch what they raise.  The clock skips such a tick;
    one that lands elsewhere and is still dropped (a weakref callback) is
    followed by another, as the clock raises until the render is unwound.
    """
    import gc
    import sys

    def code_of(hook: Any) -> Any:
        hook = getattr(hook, "func", hook)  # functools.partial
        return getattr(getattr(hook, "__func__", hook), "__code__", None)

    hooks = {code_of(callback) for callback in gc.callbacks} | {code_of(sys.unraisablehook)}
    while frame is not None:
        if frame.f_code in hooks or frame.f_code.co_name == "__del__":
            return True
        frame = frame.f_back
    return False


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
        self.produced = 0  # characters rendered so far, against MAX_DOCUMENT_OUTPUT

    # ------------------------------------------------------------ public

    def render(self, value: str) -> Any:
        """Render one value; a value that is exactly ``{{ expr }}`` keeps the expression's type."""
        result = self._render(value)
        size = size_of(result)
        if size > MAX_OUTPUT:
            raise RenderError("TS403", f"the template produced more than {MAX_OUTPUT} characters", _SMALL_HINT)
        self.produced += size
        if self.produced > MAX_DOCUMENT_OUTPUT:
            raise RenderError("TS403", f"the templates of this document produced more than {MAX_DOCUMENT_OUTPUT} "
                              "characters", _SMALL_HINT)
        problem = unholdable_in(result)
        if problem:
            raise RenderError("TS404", f"the template produced a value that no process can take: {problem[1]}",
                              "remove the NUL or surrogate escape from the template")
        return result

    def _render(self, value: str) -> Any:
        simple = self._render_simple(value)
        if simple is not _MISSING:
            return simple
        single = _SINGLE.match(value)
        reads = _READS.set(self.files_read)
        try:
            if single and not any(t in single.group(1) for t in ("{{", "}}", "{%", "%}", "{#")):
                return _plain(self._expression(single.group(1))(**self.context()))
            return _streamed(self._template(value), self.context())
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
    def deadline(self, seconds: float | None = None) -> Iterator[None]:
        """Stop runaway templates after ``seconds``, or once they add :data:`MAX_RENDER_MEMORY` to the process.

        The size checks stop every single operation from building much; this
        stops many of them adding up (nested loops, lists of big strings).
        Uses SIGALRM, which only the main thread can receive; elsewhere the
        size limits still hold but there is no clock.
        """
        if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
            yield
            return
        seconds = RENDER_SECONDS if seconds is None else seconds  # read now: tests may lower it
        start, start_cpu = time.monotonic(), time.thread_time()  # the render runs on this (the main) thread
        watching = [True]
        base: list[int | None] = []  # memory at the first tick: a render done sooner never reads it

        def tick(signum: int, frame: Any) -> None:
            if not watching[0]:
                return
            if time.thread_time() - start_cpu >= seconds or time.monotonic() - start >= seconds * RENDER_WALL_FACTOR:
                reason = "time"
            elif not base:
                base.append(_resident_bytes())
                return
            elif base[0] is not None and (_resident_bytes() or 0) - base[0] > MAX_RENDER_MEMORY:
                reason = "memory"
            else:
                return
            if not _drops_exceptions(frame):  # then the next tick: the work that overran goes on meanwhile
                raise _Timeout(reason)  # on every tick until the render unwinds (see _drops_exceptions)

        previous = signal.signal(signal.SIGALRM, tick)
        signal.setitimer(signal.ITIMER_REAL, min(_TICK, seconds), _TICK)
        try:
            try:
                yield
            finally:
                watching[0] = False  # no raise after this; one that lands before is caught below all the same
        except _Timeout as e:
            if e.args[0] == "memory":
                raise RenderError("TS403", f"templates used more than {MAX_RENDER_MEMORY // 2**20} MiB of memory",
                                  _SMALL_HINT) from None
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
        if len(value) + sum(size_of(self.variables[m.group(1)]) for m in matches) > MAX_OUTPUT:
            raise RenderError("TS403", f"the template produced more than {MAX_OUTPUT} characters", _SMALL_HINT)
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
            if inside(real, self.roots) and self.source.is_file(real):
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
        if is_too_big(e):
            return RenderError("TS403", f"too large for the template sandbox: {e}", _SMALL_HINT)
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


_SMALL_HINT = (f"templates may build at most {MAX_OUTPUT:,} characters a value"
               f" (see Security, {docs_url('security')}); "
               "build less text, or pass big data as a file the job reads")


def _streamed(template: Any, context: dict[str, Any]) -> str:
    """``template`` rendered, stopping as soon as its output passes MAX_OUTPUT rather than after building it all."""
    parts: list[str] = []
    total = 0
    for piece in template.generate(context):
        total += len(piece)
        if total > MAX_OUTPUT:
            raise RenderError("TS403", f"the template produced more than {MAX_OUTPUT} characters", _SMALL_HINT)
        parts.append(piece)
    return "".join(parts)


def _resident_bytes() -> int | None:
    """This process's resident memory, where Linux tells (/proc/self/statm); None elsewhere."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


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
    from jinja2 import BaseLoader, TemplateNotFound
    from jinja2.loaders import split_template_path

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
                if not inside(real, roots) or not source.is_file(real) or source.size(real) > MAX_TEMPLATE_BYTES:
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

    return make_environment(ConfinedLoader())

