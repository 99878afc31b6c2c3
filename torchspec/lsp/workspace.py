"""The open documents, what each one imports, and linting one of them as ``torchspec lint`` would.

No LSP library here: the server (:mod:`torchspec.lsp.server`) feeds it text
and turns its answers into protocol messages.  Three kinds of documents:

- specs (``.yaml``, ``.yml``, ``.toml``, ``.json``): linted, and what hover,
  completion and the rest work on;
- torchspec config files (``.torchspec.toml``, ``pyproject.toml``, the user
  file): completion and hover of schedulers, run options and components;
- anything else (``.j2`` macro files): imported by specs.  Their unsaved text
  is what the specs importing them are linted against.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from torchspec.errors import BackendError, Diagnostic, UsageError
from torchspec.loader.source import FORMATS, MAX_FILE_BYTES, detect_format, read_text
from torchspec.lsp.model import SpecModel, imports_of, resolve_import

if TYPE_CHECKING:
    from torchspec.config import Config
    from torchspec.lint import LintOptions

SPEC = "spec"
CONFIG = "config"
TEMPLATE = "template"
_CONFIG_NAMES = (".torchspec.toml", "pyproject.toml")


def uri_to_path(uri: str) -> str:
    parsed = urlparse(uri)
    if parsed.scheme not in ("file", ""):
        return uri
    return os.path.normpath(unquote(parsed.path))


def kind_of(path: str) -> str:
    from torchspec.config import user_config_path

    name = os.path.basename(path).lower()
    if name in _CONFIG_NAMES or os.path.abspath(path) == os.path.abspath(user_config_path()):
        return CONFIG
    return SPEC if os.path.splitext(name)[1] in FORMATS else TEMPLATE


@dataclass
class OpenDoc:
    uri: str
    path: str
    text: str
    version: int = 0
    kind: str = SPEC
    _lines: list[str] | None = field(default=None, repr=False)

    @property
    def fmt(self) -> str:
        return detect_format(self.path)

    @property
    def lines(self) -> list[str]:
        if self._lines is None:
            self._lines = [line.rstrip("\r") for line in self.text.split("\n")]
        return self._lines


@dataclass
class LintOutcome:
    """What linting one document found: its diagnostics, notes for the log (what was not checked), and
    problems to show the user (a config that cannot be used, a scheduler check that cannot run)."""

    diagnostics: list[Diagnostic]
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


class Workspace:
    def __init__(self, lint_all: bool = False) -> None:
        self.docs: dict[str, OpenDoc] = {}
        #: lint every file, not only those that look like specs (or did once while open)
        self.lint_all = lint_all
        self._specs: set[str] = set()
        self._models: dict[str, tuple[int, SpecModel]] = {}
        self._good: dict[str, SpecModel] = {}

    # ------------------------------------------------------------ documents

    def open(self, uri: str, text: str, version: int = 0) -> OpenDoc:
        path = uri_to_path(uri)
        doc = self.docs[uri] = OpenDoc(uri, path, text, version, kind_of(path))
        return doc

    def close(self, uri: str) -> None:
        self.docs.pop(uri, None)
        self._specs.discard(uri)
        self._models.pop(uri, None)
        self._good.pop(uri, None)

    def get(self, uri: str) -> OpenDoc | None:
        return self.docs.get(uri)

    def read(self, path: str) -> str | None:
        """A file's text: the open buffer when there is one, else the disk."""
        real = os.path.realpath(path)
        for doc in self.docs.values():
            if os.path.realpath(doc.path) == real:
                return doc.text
        text, _ = read_text(path)
        return text

    def model(self, uri: str) -> SpecModel | None:
        """The parsed spec, or the last one that parsed while the text does not (None for other kinds)."""
        doc = self.docs.get(uri)
        if doc is None or doc.kind != SPEC:
            return None
        cached = self._models.get(uri)
        if cached is None or cached[0] != doc.version:
            model = SpecModel.build(doc.text, doc.path, doc.fmt)
            if not model.ok:
                model = SpecModel.recovered(doc.text, doc.path, doc.fmt) or self._good.get(uri, model)
            self._models[uri] = (doc.version, model)
            if model.ok:
                self._good[uri] = model
            cached = self._models[uri]
        return cached[1]

    def imports(self, uri: str) -> set[str]:
        """The real paths of the files the spec ``uri`` imports (from its last model that parsed)."""
        doc, model = self.docs.get(uri), self.model(uri)
        if doc is None or model is None:
            return set()
        template_paths = self.settings(doc.path).template_paths
        return {resolve_import(doc.path, rel, template_paths)
                for d in model.documents for rel in imports_of(d).values()}

    def importers(self, path: str) -> list[str]:
        """The open specs that import the file at ``path``."""
        real = os.path.realpath(path)
        return [uri for uri, doc in self.docs.items() if doc.kind == SPEC and real in self.imports(uri)]

    def overlays(self) -> dict[str, str]:
        """Every open non-spec buffer (macro files), for imports to read before the disk."""
        return {doc.path: doc.text for doc in self.docs.values() if doc.kind == TEMPLATE}

    # ------------------------------------------------------------ lint

    def settings(self, path: str) -> "Settings":
        return Settings.near(path)

    def lint(self, uri: str) -> LintOutcome:
        """Lint an open spec as ``torchspec lint`` lints the file, with the scheduler check when the
        config names a default scheduler (``default_scheduler``)."""
        from torchspec.runner.check import lint_text

        from torchspec.lint import looks_like_spec

        doc = self.docs[uri]
        if not (self.lint_all or uri in self._specs or looks_like_spec(doc.text)):
            return LintOutcome([])  # a YAML file of another tool: say nothing (lint --only-specs)
        self._specs.add(uri)
        settings = self.settings(doc.path)
        problems = list(settings.problems)
        options = settings.options(self.overlays())
        if settings.scheduler:
            import dataclasses

            checked = dataclasses.replace(options, scheduler=settings.scheduler, config=settings.config)
            try:
                result = lint_text(doc.text, doc.path, checked)
                return LintOutcome(result.diagnostics, result.notes, problems)
            except (UsageError, BackendError) as e:  # e.g. a config's server_dry_run, and no cluster answers
                problems.append(f"the {settings.scheduler} scheduler check is off: {e.message}"
                                + (f" ({e.hint})" if e.hint else ""))
        result = lint_text(doc.text, doc.path, options)
        return LintOutcome(result.diagnostics, result.notes, problems)


@dataclass
class Settings:
    """The ``[lint]`` settings and default scheduler that apply to a file, from the config found near it."""

    select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    template_paths: tuple[str, ...] = ()
    max_file_bytes: int = MAX_FILE_BYTES
    scheduler: str | None = None
    config: "Config | None" = None
    problems: list[str] = field(default_factory=list)

    @classmethod
    def near(cls, path: str) -> "Settings":
        from torchspec.config import default_scheduler, load_config
        from torchspec.lint import check_codes

        try:
            config = load_config(os.path.dirname(os.path.abspath(path)))
            section = config.section("lint")
            folder = os.path.dirname(config.sources.get("lint.template_paths", path))
            return cls(select=check_codes(_strings(section.get("select"))),
                       ignore=check_codes(_strings(section.get("ignore"))),
                       template_paths=tuple(os.path.join(folder, p) for p in _strings(section.get("template_paths"))),
                       max_file_bytes=int(section.get("max_file_size") or MAX_FILE_BYTES),
                       scheduler=default_scheduler(config), config=config)
        except (UsageError, ValueError, TypeError) as e:
            return cls(problems=[f"the torchspec config is not used: {getattr(e, 'message', e)}"])

    def options(self, overlays: dict[str, str]) -> "LintOptions":
        from torchspec.lint import LintOptions

        return LintOptions(select=self.select, ignore=self.ignore, template_paths=self.template_paths,
                           max_file_bytes=self.max_file_bytes, overlays=overlays)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value] if isinstance(value, list) else []
