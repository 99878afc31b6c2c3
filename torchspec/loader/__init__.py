"""From a spec file to validated AppDefs, collecting every problem on the way.

The pipeline for each document, each step stopping the document at its first
failing step so one mistake is not reported five times:

1. parse (YAML, TOML or JSON) keeping positions;
2. when the file holds templates, check the document as written against the
   published schema (template strings allowed where editors allow them);
3. resolve params: ``-p`` values, then the values file, then defaults;
4. render every string value outside ``params``/``imports`` in the sandbox;
5. check the rendered document against the strict schema;
6. run the semantic rules (TS5xx);
7. build the ``AppDef`` (skipped by lint).

``load_app`` raises :class:`~torchspec.errors.SpecError`; ``load_file`` returns
diagnostics as values, which is what lint and the CLI use.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

from torchspec.errors import Diagnostic, SpecError
from torchspec.loader import params as params_mod
from torchspec.loader.params import SWEEP_KEY
from torchspec.loader.document import Document, Path
from torchspec.loader.parsers import parse
from torchspec.loader.source import FILES, MAX_FILE_BYTES, Source, detect_format, read_text, with_overlays
from torchspec.loader.template import Renderer, RenderError, is_template
from torchspec.loader.schema import types_at

if TYPE_CHECKING:
    from torchspec.specs import AppDef

__all__ = ["LoadOptions", "LoadedDocument", "LoadedFile", "ValuesFile", "load_file", "load_text", "load_app",
           "load_apps", "declared_params", "read_params_file", "redact", "select_documents", "Document", "Source",
           "FILES"]

_UNTEMPLATED = ("params", "imports", "$schema")


@dataclass
class LoadOptions:
    """What the caller supplies besides the file: param values and limits."""

    params: Mapping[str, str] = field(default_factory=dict)
    params_file: str | None = None
    template_paths: tuple[str, ...] = ()
    max_file_bytes: int = MAX_FILE_BYTES
    #: lint mode: stand in for missing required params and do not build AppDefs
    lint: bool = False
    #: stand in for missing required params (as lint does) but build the AppDefs: ``torchspec diff``
    stand_ins: bool = False
    #: where the spec, its params file and its templates are read from (``torchspec diff``: a git commit)
    source: Source = FILES
    #: unsaved editor buffers, path -> text: imported templates are read from here before ``source``
    overlays: Mapping[str, str] = field(default_factory=dict)


@dataclass
class LoadedDocument:
    source: Document
    rendered: dict[str, Any] | None = None
    params: dict[str, Any] = field(default_factory=dict)
    env_read: list[str] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    app: "AppDef | None" = None
    #: real paths of the other files the document was rendered from: its params file, imports, includes
    dependencies: list[str] = field(default_factory=list)
    #: required params nobody gave, rendered with stand-in values (``LoadOptions.stand_ins``)
    stand_ins: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(d.is_error for d in self.diagnostics)


@dataclass
class LoadedFile:
    path: str
    documents: list[LoadedDocument] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)  # file-level: unreadable, syntax

    def all_diagnostics(self) -> list[Diagnostic]:
        out = list(self.diagnostics)
        for d in self.documents:
            out.extend(d.diagnostics)
        return out

    @property
    def ok(self) -> bool:
        return not any(d.is_error for d in self.all_diagnostics())


def load_file(path: str, options: LoadOptions | None = None) -> LoadedFile:
    """Load every document of a spec file; problems come back as diagnostics, never raised."""
    options = options or LoadOptions()
    text, problem = read_text(path, options.max_file_bytes, options.source)
    if problem is not None:
        return LoadedFile(path, diagnostics=[problem])
    assert text is not None
    return load_text(text, path, detect_format(path), options)


def load_text(text: str, path: str = "<string>", fmt: str = "yaml", options: LoadOptions | None = None) -> LoadedFile:
    """Like :func:`load_file` for text already in memory (``path`` names it in messages)."""
    options = options or LoadOptions()
    result = LoadedFile(path)
    docs, problems = parse(text, path, fmt)
    result.diagnostics.extend(problems)
    if not docs and not problems:
        result.diagnostics.append(Diagnostic("TS003", "the file holds no spec", file=path,
                                             hint="write an AppDef: name and roles"))
    if any(d.is_error for d in problems):
        return result  # documents after a syntax error are not trustworthy
    values_file = read_params_file(options.params_file, options.source) if options.params_file else None
    has_templates = _has_markers(text)  # once: per document, a file of many documents took quadratic time
    for doc in docs:
        result.documents.append(_load_document(doc, options, values_file, has_templates=has_templates))
    return result


def load_apps(path: str, params: Mapping[str, str] | None = None, params_file: str | None = None,
              template_paths: tuple[str, ...] = ()) -> list["AppDef"]:
    """Every AppDef in the file, or :class:`SpecError` with every problem found."""
    loaded = load_file(path, LoadOptions(params=params or {}, params_file=params_file,
                                         template_paths=template_paths))
    if not loaded.ok:
        raise SpecError.from_diagnostics([d for d in loaded.all_diagnostics() if d.is_error])
    return [d.app for d in loaded.documents if d.app is not None]


def load_app(path: str, params: Mapping[str, str] | None = None, params_file: str | None = None,
             template_paths: tuple[str, ...] = (), app: str | None = None) -> "AppDef":
    """The one AppDef in a file, or the one named ``app`` in a file of several (``--app NAME``).

    With ``app``, only that document has to load: a broken neighbour in the
    same file does not stop it.  Several documents and no ``app`` is a TS003
    error that lists the names to choose from.
    """
    loaded = load_file(path, LoadOptions(params=params or {}, params_file=params_file,
                                         template_paths=template_paths))
    docs = select_documents(loaded, app)
    errors = [d for d in loaded.diagnostics if d.is_error] + [d for doc in docs for d in doc.diagnostics if d.is_error]
    if errors:
        raise SpecError.from_diagnostics(errors)
    apps = [doc.app for doc in docs if doc.app is not None]
    if len(apps) != 1:
        names = ", ".join(a.name for a in apps)
        example = f" (e.g. --app {apps[0].name})" if apps else ""
        raise SpecError([Diagnostic("TS003", f"the file holds {len(apps)} specs ({names}); which one?", file=path,
                                    hint=f"name one with --app NAME{example}, or split the file")])
    return apps[0]


def select_documents(loaded: LoadedFile, app: str | None) -> list[LoadedDocument]:
    """The documents of ``loaded`` whose app is named ``app`` (all of them when ``app`` is None).

    A name no document has is a :class:`UsageError` with a did-you-mean; when
    documents failed to load (and so have no name), they are all returned,
    so that their errors are reported rather than a misleading "no such app".
    """
    if app is None:
        return list(loaded.documents)
    chosen = [doc for doc in loaded.documents if doc.app is not None and doc.app.name == app]
    if chosen:
        return chosen
    if not loaded.ok:
        return list(loaded.documents)
    from torchspec.errors import UsageError, did_you_mean_hint

    names = [doc.app.name for doc in loaded.documents if doc.app is not None]
    raise UsageError(f"{loaded.path} has no app named {app!r}", did_you_mean_hint(app, names, "its apps"))


# ---------------------------------------------------------------- one document


def _has_markers(text: str) -> bool:
    return "{{" in text or "{%" in text or "{#" in text


@dataclass
class ValuesFile:
    """What a params file holds: its values (param name -> value), the parsed document, its problems, and its
    ``sweep:`` block (param name -> the values to sweep it over; None without one)."""

    values: dict[str, Any]
    document: Document | None
    diagnostics: list[Diagnostic]
    sweep: dict[str, list[Any]] | None = None


def read_params_file(path: str, source: Source = FILES) -> ValuesFile:
    """The values a ``--params-file`` sets, with its problems as TS307 diagnostics (never raises).

    A file that cannot be used gives no values, so callers that only want
    the names (to know which defaults it overrides) can ignore the problems:
    loading the spec reports them properly.
    """
    text, problem = read_text(path, source=source)
    if problem is not None:
        problem.code = "TS307"
        return ValuesFile({}, None, [problem])
    assert text is not None
    docs, problems = parse(text, path, detect_format(path))
    if problems:
        return ValuesFile({}, None, problems)
    if len(docs) != 1 or not isinstance(docs[0].data, dict):
        return ValuesFile({}, docs[0] if docs else None, [Diagnostic(
            "TS307", "a params file must hold one mapping of param names to values", file=path, line=1, column=1,
            hint="write one 'name: value' line per param")])
    values = dict(docs[0].data)
    if SWEEP_KEY not in values:
        return ValuesFile(values, docs[0], [])
    sweep, problems = params_mod.read_sweep(values.pop(SWEEP_KEY), docs[0])
    return ValuesFile(values, docs[0], problems, sweep)


def declared_params(path: str) -> list[str] | None:
    """The param names a one-document spec declares; None when the file cannot tell (loading reports why)."""
    text, problem = read_text(path)
    if problem is not None or text is None:
        return None
    docs, problems = parse(text, path, detect_format(path))
    if problems or len(docs) != 1 or not isinstance(docs[0].data, dict):
        return None
    params = docs[0].data.get("params") or {}
    return [str(k) for k in params] if isinstance(params, dict) else None


def _load_document(doc: Document, options: LoadOptions, values_file: ValuesFile | None,
                   has_templates: bool) -> LoadedDocument:
    from torchspec.loader.schema import validator

    out = LoadedDocument(doc)
    if doc.data is None:
        out.diagnostics.append(doc.diagnostic("TS003", "the document is empty", (), "write an AppDef: name and roles"))
        return out
    # Without templates the file is its own rendered form: check it strictly once, up front.
    # Either way the structure is sound before params are read from it.
    if _schema_problems(out, doc, validator(strict=not has_templates)):
        return out
    declared, problems = params_mod.declarations(doc) if isinstance(doc.data, dict) else ({}, [])
    out.diagnostics.extend(problems)
    if problems:
        return out
    resolved = params_mod.resolve(
        doc, declared, dict(options.params),
        values_file.values if values_file else None,
        values_file.document if values_file else None,
        fill_placeholders=options.lint or options.stand_ins,
    )
    if values_file:
        out.diagnostics.extend(values_file.diagnostics)
        if values_file.sweep and values_file.document is not None:
            out.diagnostics.extend(params_mod.check_sweep(values_file.sweep, declared, values_file.document,
                                                          given=options.params, grid_only=options.lint))
    out.diagnostics.extend(resolved.diagnostics)
    if not out.ok:
        return out
    out.params = resolved.values
    out.stand_ins = sorted(resolved.placeholders)
    renderer = Renderer(resolved.values, os.path.dirname(os.path.abspath(doc.file)),
                        doc.data.get("imports"), options.template_paths,
                        with_overlays(options.source, options.overlays))
    sources: dict[Path, str] = {}
    try:
        with renderer.deadline():
            out.rendered = _render(doc.data, (), renderer, doc, out.diagnostics, sources)
    except RenderError as e:  # only the render clock raises out of _render
        out.diagnostics.append(_related(doc.diagnostic(e.code, e.message, (), e.hint), e))
        return out
    finally:
        given_file = [options.source.realpath(options.params_file)] if options.params_file else []
        out.dependencies = sorted(set(given_file + renderer.dependencies()))
    out.env_read = renderer.env_read
    try:
        return _checked(out, doc, declared, sources, renderer, resolved, has_templates, options)
    finally:
        redact(out.diagnostics, renderer.env_read)


def redact(diagnostics: list[Diagnostic], env_read: list[str]) -> None:
    """Never show what env() read: a spec from a pull request must not print CI secrets into annotations.

    The value goes wherever the message or hint quotes it, as written or as
    Python's repr or JSON write it (see :mod:`torchspec.redaction`); so does
    the copy of the offending line that reporters draw a caret under.
    """
    from torchspec.redaction import redact_text

    for d in diagnostics:
        d.message = redact_text(d.message, env_read)
        if d.hint:
            d.hint = redact_text(d.hint, env_read)
        if d.source_line:
            d.source_line = redact_text(d.source_line, env_read)


def _checked(out: LoadedDocument, doc: Document, declared: dict[str, Any], sources: dict[Path, str],
             renderer: Renderer, resolved: Any, has_templates: bool, options: LoadOptions) -> LoadedDocument:
    """Steps 5-7: the rendered document against the strict schema, the rules, then the AppDef."""
    from torchspec.loader.schema import validator

    if not out.ok or out.rendered is None:
        return out
    doubtful = _placeholder_paths(sources, resolved.placeholders)
    _unused_params(out, doc, declared, sources, renderer)
    if has_templates and _schema_problems(out, doc, validator(strict=True), data=out.rendered, skip=doubtful):
        return out
    if doubtful and any(True for _ in validator(strict=True).issues(out.rendered)):
        return out  # lint's stand-in for a param gave a field the wrong type: the rules trust types, so they cannot run
    from torchspec.loader import rules

    rendered_doc = Document(doc.file, doc.text, out.rendered, doc.index, doc.positions, doc.key_positions, doc.format)
    out.diagnostics.extend(d for d in rules.check(rendered_doc) if not _under(d.path, doubtful))
    if out.ok and not options.lint:
        from torchspec.specs.convert import build_app

        out.app = build_app(out.rendered)
    return out


def _schema_problems(out: LoadedDocument, doc: Document, check: Any, data: Any = None,
                     skip: set[str] | None = None) -> bool:
    issues = check.issues(doc.data if data is None else data)
    found = False
    for issue in issues:
        d = doc.diagnostic(issue.code, issue.message, issue.path, issue.hint, key=issue.key)
        if skip and _under(d.path, skip):
            continue
        out.diagnostics.append(d)
        found = True
    return found


def _render(value: Any, path: Path, renderer: Renderer, doc: Document, diags: list[Diagnostic],
            sources: dict[Path, str]) -> Any:
    """Render every template string under ``value``; collect all failures."""
    if isinstance(value, str):
        if not is_template(value):
            return value
        sources[path] = value
        try:
            rendered = renderer.render(value)
        except RenderError as e:
            d = _related(doc.diagnostic(e.code, e.message, path, e.hint), e)
            if d.line is not None and e.line > 1 and not e.origin:
                d.line += e.line - 1
                d.source_line = doc.source_line(d.line)
            diags.append(d)
            return value
        if isinstance(rendered, (bool, int, float)) and types_at(path) == {"string"}:
            return str(rendered)  # where only text is allowed, a number renders as Jinja prints it
        return rendered
    if isinstance(value, list):
        return [_render(v, path + (i,), renderer, doc, diags, sources) for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {k: (v if not path and k in _UNTEMPLATED else _render(v, path + (k,), renderer, doc, diags, sources))
                for k, v in value.items()}
    return value


def _related(d: Diagnostic, e: RenderError) -> Diagnostic:
    """``d``, pointing also at the line of the imported template where ``e`` happened."""
    if e.origin is not None:
        from torchspec.errors import Related

        d.related.append(Related(e.origin[0], e.origin[1], e.message))
    return d


def _words(names: set[str] | dict[str, Any]) -> re.Pattern[str] | None:
    if not names:
        return None
    return re.compile(r"\b(" + "|".join(re.escape(n) for n in names) + r")\b")


def _placeholder_paths(sources: dict[Path, str], placeholders: set[str]) -> set[str]:
    """Paths whose values came from templates using lint's stand-in values: their checks would be guesses."""
    from torchspec.errors import format_path

    pattern = _words(placeholders)
    if pattern is None:
        return set()
    return {format_path(p) for p, src in sources.items() if pattern.search(src)}


def _under(path: str, prefixes: set[str]) -> bool:
    return any(path == p or path.startswith(p + ".") or path.startswith(p + "[") for p in prefixes)


def _unused_params(out: LoadedDocument, doc: Document, declared: dict[str, Any], sources: dict[Path, str],
                   renderer: Renderer) -> None:
    if not declared:
        return
    texts = list(sources.values()) + [_import_text(renderer, p) for p in renderer.imports.values()]
    used: set[str] = set()
    pattern = _words(declared)
    assert pattern is not None
    for text in texts:
        used.update(pattern.findall(text))
    for name in declared:
        if name not in used:
            out.diagnostics.append(doc.diagnostic(
                "TS305", f"param {name!r} is declared but never used", ("params", name),
                f"use it as {{{{ {name} }}}} in a value, or remove it", severity="warning", key=True))


def _import_text(renderer: Renderer, path: str) -> str:
    """An import file's text, read under the same rules as templates: inside an allowed folder, a regular file."""
    return renderer.read_confined(path) or ""
