"""One error model for everything that can be wrong with a spec.

A :class:`Diagnostic` is a value: the loader, the schema check and the lint
rules all return lists of them, so one run can report every problem in every
file at once.  Where the library must *raise* (``load_app`` on a broken file),
it raises a :class:`SpecError` that carries those same diagnostics; the CLI
renders both the same way.  Nothing here prints or colours.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Sequence, Union

PathPart = Union[str, int]

ERROR = "error"
WARNING = "warning"


def format_path(parts: Sequence[PathPart]) -> str:
    """Render a path into a document the way users write it: ``roles[1].resource.gpu``."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif out:
            out += f".{part}"
        else:
            out = str(part)
    return out


@dataclass(frozen=True)
class Related:
    """Another place a diagnostic is about: the line of an imported template where a failure happened."""

    file: str
    line: int
    message: str


@dataclass
class Diagnostic:
    """One problem found in one place of one file.

    ``line`` and ``column`` are 1-based; ``None`` where the format cannot tell
    (TOML values give the key's line only).  ``document`` is the index of the
    YAML document in a multi-document file.  ``source_line`` is the text of the
    offending line, kept so reporters can draw a caret without re-reading files.
    ``related`` points into other files (an imported template's failing line).
    """

    code: str
    message: str
    file: str = "<string>"
    line: int | None = None
    column: int | None = None
    path: str = ""
    hint: str | None = None
    severity: str = ERROR
    document: int = 0
    source_line: str | None = None
    related: list[Related] = field(default_factory=list)

    @property
    def is_error(self) -> bool:
        return self.severity == ERROR

    def location(self) -> str:
        """``file:line:col`` with the parts that are known."""
        loc = self.file
        if self.line is not None:
            loc += f":{self.line}"
            if self.column is not None:
                loc += f":{self.column}"
        return loc

    def __str__(self) -> str:
        text = f"{self.location()}: {self.severity} {self.code}: {self.message}"
        if self.path:
            text += f" (at {self.path})"
        if self.hint:
            text += f"\n  hint: {self.hint}"
        return text

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if k != "source_line" and (k != "related" or v)}


def did_you_mean(word: str, choices: Iterable[Any]) -> str | None:
    """The choice closest to ``word`` (case-insensitively), or None when nothing is close.

    The one spelling checker of torchspec, so every "did you mean" (keys,
    schedulers, run options, roles, commands) guesses the same way.  A word
    of three letters or more that begins exactly one choice counts too:
    people shorten (``APP`` for ``APPLICATION``) as often as they misspell,
    and a short word is too far from a long one for the spelling measure.
    """
    import difflib

    names = [str(c) for c in choices]
    lowered = {c.lower(): c for c in names}
    if word.lower() in lowered:
        return lowered[word.lower()]
    match = difflib.get_close_matches(word.lower(), list(lowered), n=1, cutoff=0.6)
    if match:
        return lowered[match[0]]
    starting = [name for low, name in lowered.items() if len(word) >= 3 and low.startswith(word.lower())]
    return starting[0] if len(starting) == 1 else None


def did_you_mean_hint(word: str, choices: Iterable[Any], what: str = "choices") -> str:
    """``did you mean 'x'?`` for a near miss, else the list of ``what`` there are (or that there are none)."""
    names = [str(c) for c in choices]
    guess = did_you_mean(word, names)
    if guess is not None:
        return f"did you mean {guess!r}?"
    return f"{what}: {', '.join(names)}" if names else f"there are no {what}"


class TorchSpecError(Exception):
    """Base of every error torchspec raises on purpose; anything else is a bug."""


class UsageError(TorchSpecError):
    """The caller asked for something impossible (a missing path, a bad option value)."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class AppRefusedError(UsageError, ValueError):
    """A scheduler (or the runner) cannot run this app as it is written.

    No roles, no entrypoint, a resource or mount the backend has no way to
    provide: the user's to fix, so a usage error (exit 2).  It is also a
    ``ValueError``, which is what TorchX raises for the same refusals, so code
    written for TorchX keeps catching it.
    """

    #: the scheduler that refused, where the runner knows it (the CLI names it)
    scheduler: str | None = None

    def __init__(self, message: str, hint: str | None = None, *, code: str | None = None,
                 path: Sequence[PathPart] = (), problems: Iterable[tuple[Sequence[PathPart], str]] = ()) -> None:
        super().__init__(message, hint)
        #: the lint code ``lint --scheduler`` reports the refusal as (None: TS601 scheduler-refuses)
        self.code = code
        #: where in the spec the problem is, e.g. ``("roles", 0, "image")``, where the scheduler knows
        self.path = tuple(path)
        #: each thing refused, where there are several to name: (where in the spec, e.g.
        #: ``("roles", 0, "port_map", "c10d")``, what is wrong there); ``lint --scheduler`` reports each at its line
        self.problems = tuple((tuple(where), what) for where, what in problems)


class MissingExtraError(UsageError):
    """A feature needs a package that a plain ``pip install torchspec-cli`` leaves out: one of its extras.

    A usage error (exit 2), not a backend that cannot be reached (exit 6):
    nothing was asked of any backend, and installing the extra is the fix,
    which the hint names in the form that fits how torchspec was installed
    (``pip install 'torchspec-cli[docker]'``, ``pipx inject ...``, ``uv pip install ...``:
    :func:`torchspec.install.install_command`).
    """

    def __init__(self, message: str, extra: str, alternative: str | None = None) -> None:
        """``alternative``: another way to install it, after the extra (``or 'ray[default]'``)."""
        from torchspec.install import install_command

        super().__init__(message, install_command(extra) + (f" ({alternative})" if alternative else ""))
        self.extra = extra

    @classmethod
    def for_import(cls, error: ImportError, what: str) -> MissingExtraError | None:
        """The error for ``what`` (``the docker scheduler``) when ``error`` is a module an extra installs
        that is not there; None for any other import error (a broken install, a bug)."""
        from torchspec.install import extra_for

        extra = extra_for(error) if isinstance(error, ModuleNotFoundError) else None
        if extra is None:
            return None
        return cls(f"{what} needs the {error.name.split('.')[0] if error.name else extra} package, which is not"
                   f" installed: it comes with the {extra} extra", extra)


class UnsupportedError(UsageError):
    """The scheduler lacks what the command asks of it (following logs, a time window, a workspace...).

    A usage error (exit 2): the backend was not asked; the message names the
    scheduler and what it cannot do, rather than the command silently doing
    less (``logs -f`` printing what there is and ending)."""

    def __init__(self, message: str, hint: str | None = None, *, scheduler: str, capability: str) -> None:
        super().__init__(message, hint)
        self.scheduler = scheduler
        self.capability = capability


class NotFoundError(UsageError, ValueError):
    """What a request names (an app, a role, a replica) does not exist.

    A usage error (exit 2), and a ``ValueError`` as TorchX's schedulers raise
    for the same lookups, so code written for TorchX keeps catching it.
    """


class ComponentError(TorchSpecError):
    """A Python component's own code failed: its file does not import, its signature is not a component's, it
    raised, or it returned something other than an AppDef (the CLI exits 1, as for a spec error)."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class BackendError(TorchSpecError):
    """A scheduler's backend could not be reached or refused a request (no Docker engine, image missing).

    Not the user's spec and not a torchspec bug: the CLI prints ``message``
    and ``hint`` (how to fix the backend) and exits 6.
    """

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class UnreachableError(BackendError):
    """The backend did not answer at all (connection refused or reset, a timeout): it may be back soon.

    Commands that follow an app for a long time (``wait``, ``logs -f``) ride
    out such an outage, for up to :data:`OUTAGE_S` seconds, instead of ending;
    everything else reports it at once (exit 6), as any BackendError.
    """


#: How long ``wait`` and ``logs -f`` keep trying a backend that stopped answering: a restarted API server, a
#: control plane being upgraded, an engine restarting on a loaded machine (seen in CI: over 120 s) all come back.
OUTAGE_S = 300.0


class RequestTimeoutError(UnreachableError):
    """The backend took a request (the connection was accepted) and gave no answer within the request timeout.

    A hung or overloaded engine, not a missing one: without a bound, ``status``
    would wait for it for ever.  The message names the engine and its address;
    an :class:`UnreachableError`, so ``wait`` and ``logs -f`` ride it out as an
    outage.  Built by :func:`torchspec.schedulers.request_timeout.timed_out`.
    """

    def __init__(self, message: str, hint: str | None = None, *, engine: str, address: str,
                 seconds: float) -> None:
        super().__init__(message, hint)
        #: what did not answer (``the Ray dashboard``) and where it is (``http://10.0.0.5:8265``)
        self.engine = engine
        self.address = address
        #: the limit that passed
        self.seconds = seconds


class StateError(BackendError):
    """What a scheduler keeps on this machine cannot be read: a damaged ``local`` app folder.

    A ``state.json`` that is not JSON (truncated, empty, garbage), a folder
    where a file belongs, a file a newer torchspec wrote.  The message names
    the file and what is wrong with it; the CLI exits 6, like any backend
    that cannot answer.  ``list`` skips such an app with a warning instead.
    """


class SpecError(TorchSpecError):
    """A spec file could not be turned into an AppDef.

    Carries every diagnostic found (at least one error).  ``file``, ``line``,
    ``column``, ``path`` and ``hint`` describe the first error, which is what
    ``str()`` shows first.
    """

    def __init__(self, diagnostics: Iterable[Diagnostic]) -> None:
        self.diagnostics = list(diagnostics)
        if not self.diagnostics:
            raise ValueError("SpecError needs at least one diagnostic")
        errors = [d for d in self.diagnostics if d.is_error] or self.diagnostics
        self.first = errors[0]
        super().__init__("\n".join(str(d) for d in errors))

    @property
    def file(self) -> str:
        return self.first.file

    @property
    def line(self) -> int | None:
        return self.first.line

    @property
    def column(self) -> int | None:
        return self.first.column

    @property
    def path(self) -> str:
        return self.first.path

    @property
    def hint(self) -> str | None:
        return self.first.hint

    @property
    def code(self) -> str:
        return self.first.code

    @staticmethod
    def from_diagnostics(diagnostics: Iterable[Diagnostic]) -> "SpecError":
        """Build the subclass that fits the first error's code family."""
        diagnostics = list(diagnostics)
        first = next((d for d in diagnostics if d.is_error), diagnostics[0])
        cls = _FAMILIES.get(first.code[:3], SpecError)
        return cls(diagnostics)


class SpecSyntaxError(SpecError):
    """The file is not readable YAML, TOML or JSON (TS0xx and TS1xx codes)."""


class SchemaError(SpecError):
    """The document does not match the AppDef JSON Schema (TS2xx)."""


class ParamError(SpecError):
    """Params are unknown, missing, or of the wrong type (TS3xx)."""


class TemplateError(SpecError):
    """A Jinja template failed to compile or render, or broke the sandbox (TS4xx)."""


class SemanticError(SpecError):
    """The document is well-formed but cannot mean what it says (TS5xx)."""


_FAMILIES: dict[str, type[SpecError]] = {
    "TS0": SpecSyntaxError,
    "TS1": SpecSyntaxError,
    "TS2": SchemaError,
    "TS3": ParamError,
    "TS4": TemplateError,
    "TS5": SemanticError,
}
