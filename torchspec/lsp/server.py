"""``torchspec lsp``: the Language Server Protocol server, over stdio, on pygls.

A thin front end, as the CLI is: the protocol in, the library's answers out.
Lint diagnostics come from :func:`torchspec.runner.check.lint_text` (the
same codes, messages, positions and hints as ``torchspec lint``, with the
scheduler check when the config names a default scheduler); the rest from
:mod:`torchspec.lsp.hover`, :mod:`~torchspec.lsp.completion`,
:mod:`~torchspec.lsp.navigation`, :mod:`~torchspec.lsp.fixes` and
:mod:`~torchspec.lsp.config_doc`.

Everything runs on the event loop's thread (the main thread, where the
template render clock works): a change is linted after ``debounce_ms`` of
quiet (initialization option, default :data:`DEBOUNCE_MS`), and only that
document and the open specs that import it are linted again.
"""

from __future__ import annotations

import asyncio
import gc
import os
import traceback
from typing import Any, Callable

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path

from torchspec.lsp import completion, config_doc, fixes, hover, navigation
from torchspec.lsp.convert import character, lsp_diagnostic
from torchspec.lsp.workspace import CONFIG, SPEC, TEMPLATE, OpenDoc, Workspace, kind_of, uri_to_path
from torchspec.version import __version__

#: Quiet time after a change before the document is linted again.
DEBOUNCE_MS = 150
#: Files whose changes on disk matter: imported macro files and config files.
WATCHED = ["**/*.j2", "**/*.jinja", "**/*.jinja2", "**/.torchspec.toml", "**/pyproject.toml"]

class Server:
    """The state behind the protocol handlers: the open documents, pending lints, what was last logged."""

    def __init__(self, ls: LanguageServer, debounce_ms: int = DEBOUNCE_MS) -> None:
        self.ls = ls
        self.ws = Workspace()
        self.debounce_s = debounce_ms / 1000
        self.pending: dict[str, asyncio.TimerHandle] = {}
        self.logged: dict[str, list[str]] = {}
        self.shown: set[str] = set()

    def units(self, text: str) -> int:
        return int(self.ls.workspace.position_codec.client_num_units(text))

    # ------------------------------------------------------------ documents

    def sync(self, uri: str) -> OpenDoc:
        """Take the document's text as pygls holds it after the change."""
        document = self.ls.workspace.get_text_document(uri)
        return self.ws.open(uri, document.source, document.version or 0)

    def changed(self, uri: str, delay: float) -> None:
        """Lint ``uri`` (a spec) and the open specs that import it after ``delay`` seconds of quiet."""
        doc = self.ws.get(uri)
        if doc is not None and doc.kind == CONFIG:
            return  # its unsaved text means nothing yet: specs are linted again when it is saved
        if doc is not None and doc.kind == SPEC:
            targets = [uri]  # specs import macro files, never other specs
        else:
            targets = self.ws.importers(doc.path if doc else uri_to_path(uri))
        for target in targets:
            self.schedule(target, delay)

    def schedule(self, uri: str, delay: float) -> None:
        handle = self.pending.pop(uri, None)
        if handle is not None:
            handle.cancel()
        self.pending[uri] = asyncio.get_running_loop().call_later(delay, self.lint, uri)

    def lint(self, uri: str) -> None:
        self.pending.pop(uri, None)
        doc = self.ws.get(uri)
        if doc is None or doc.kind != SPEC:
            return
        try:
            outcome = self.ws.lint(uri)
        except Exception:  # noqa: BLE001 - a bug must not take the editor's server down: log it, keep serving
            self.log(types.MessageType.Error, f"torchspec: linting {doc.path} failed:\n{traceback.format_exc()}")
            return
        diagnostics = [lsp_diagnostic(d, doc.lines, self.units, uri_for) for d in outcome.diagnostics
                       if d.file == doc.path]
        self.ls.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, version=doc.version, diagnostics=diagnostics))
        if outcome.notes != self.logged.get(uri):
            self.logged[uri] = outcome.notes
            for note in outcome.notes:
                self.log(types.MessageType.Info, f"torchspec: {note}")
        for problem in outcome.problems:
            if problem not in self.shown:  # once a session: the user fixes the config, or lives with it
                self.shown.add(problem)
                self.ls.window_show_message(types.ShowMessageParams(type=types.MessageType.Warning,
                                                                    message=f"torchspec: {problem}"))

    def log(self, kind: types.MessageType, message: str) -> None:
        self.ls.window_log_message(types.LogMessageParams(type=kind, message=message))

    def relint_all(self) -> None:
        for uri, doc in self.ws.docs.items():
            if doc.kind == SPEC:
                self.schedule(uri, 0)


def uri_for(path: str) -> str:
    return from_fs_path(os.path.abspath(path)) or path


def build(debounce_ms: int = DEBOUNCE_MS) -> LanguageServer:
    """The server with every feature registered; ``start_io()`` runs it."""
    ls = LanguageServer("torchspec", __version__, text_document_sync_kind=types.TextDocumentSyncKind.Incremental)
    server = Server(ls, debounce_ms)
    _register_sync(ls, server)
    _register_features(ls, server)
    return ls


def _register_sync(ls: LanguageServer, server: Server) -> None:
    @ls.feature(types.INITIALIZE)
    def initialize(params: types.InitializeParams) -> None:
        options = params.initialization_options if isinstance(params.initialization_options, dict) else {}
        if isinstance(options.get("debounce_ms"), (int, float)) and options["debounce_ms"] >= 0:
            server.debounce_s = options["debounce_ms"] / 1000
        server.ws.lint_all = options.get("lint_all") is True

    @ls.feature(types.INITIALIZED)
    def initialized(params: types.InitializedParams) -> None:
        capabilities = ls.client_capabilities.workspace
        watch = capabilities.did_change_watched_files if capabilities else None
        if watch is not None and watch.dynamic_registration:
            options = types.DidChangeWatchedFilesRegistrationOptions(
                watchers=[types.FileSystemWatcher(glob_pattern=g) for g in WATCHED])
            ls.client_register_capability(types.RegistrationParams(registrations=[types.Registration(
                id="torchspec-watch", method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES, register_options=options)]))

    @ls.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(params: types.DidOpenTextDocumentParams) -> None:
        server.sync(params.text_document.uri)
        server.changed(params.text_document.uri, 0)

    @ls.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(params: types.DidChangeTextDocumentParams) -> None:
        server.sync(params.text_document.uri)
        server.changed(params.text_document.uri, server.debounce_s)

    @ls.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(params: types.DidSaveTextDocumentParams) -> None:
        doc = server.ws.get(params.text_document.uri)
        if doc is not None and doc.kind == CONFIG:
            server.relint_all()
        elif doc is not None:
            server.changed(doc.uri, 0)

    @ls.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        doc = server.ws.get(uri)
        handle = server.pending.pop(uri, None)
        if handle is not None:
            handle.cancel()
        importers = server.ws.importers(doc.path) if doc is not None and doc.kind == TEMPLATE else []
        server.ws.close(uri)
        if doc is not None and doc.kind == SPEC:
            ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))
        for importer in importers:  # the buffer is gone: they import the file on disk again
            server.schedule(importer, 0)

    @ls.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def did_change_watched(params: types.DidChangeWatchedFilesParams) -> None:
        paths = [uri_to_path(change.uri) for change in params.changes]
        if any(kind_of(p) == CONFIG for p in paths):
            server.relint_all()
            return
        for path in paths:
            for importer in server.ws.importers(path):
                server.schedule(importer, server.debounce_s)


def _register_features(ls: LanguageServer, server: Server) -> None:
    def at(params: Any) -> tuple[OpenDoc, int, int] | None:
        doc = server.ws.get(params.text_document.uri)
        if doc is None:
            return None
        line = min(params.position.line, len(doc.lines) - 1)
        return doc, line, character(doc.lines, line, params.position.character, server.units)

    def guarded(default: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def wrap(handler: Callable[..., Any]) -> Callable[..., Any]:
            def run(params: Any) -> Any:
                try:
                    return handler(params)
                except Exception:  # noqa: BLE001 - answer nothing rather than fail the request
                    server.log(types.MessageType.Error, f"torchspec: {handler.__name__} failed:\n"
                                                        f"{traceback.format_exc()}")
                    return default
            return run
        return wrap

    def by_kind(params: Any, for_spec: Callable[..., Any], for_config: Callable[..., Any]) -> Any:
        found = at(params)
        if found is None or found[0].kind == TEMPLATE:
            return None
        doc, line, char = found
        if doc.kind == CONFIG:
            return for_config(doc, line, char, server.units)
        return for_spec(server.ws, doc, line, char, server.units)

    @ls.feature(types.TEXT_DOCUMENT_HOVER)
    @guarded(None)
    def on_hover(params: types.HoverParams) -> types.Hover | None:
        return by_kind(params, hover.hover, config_doc.hover)  # type: ignore[no-any-return]

    @ls.feature(types.TEXT_DOCUMENT_COMPLETION, types.CompletionOptions(trigger_characters=completion.TRIGGERS))
    @guarded(None)
    def on_completion(params: types.CompletionParams) -> types.CompletionList | None:
        return by_kind(params, completion.complete, config_doc.complete)  # type: ignore[no-any-return]

    @ls.feature(types.TEXT_DOCUMENT_DEFINITION)
    @guarded([])
    def on_definition(params: types.DefinitionParams) -> list[types.Location]:
        found = at(params)
        if found is None or found[0].kind != SPEC:
            return []
        return navigation.definition(server.ws, *found, server.units, uri_for)

    @ls.feature(types.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
    @guarded([])
    def on_symbols(params: types.DocumentSymbolParams) -> list[types.DocumentSymbol]:
        doc = server.ws.get(params.text_document.uri)
        return navigation.symbols(server.ws, doc, server.units) if doc is not None and doc.kind == SPEC else []

    @ls.feature(types.TEXT_DOCUMENT_CODE_ACTION,
                types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix]))
    @guarded([])
    def on_code_action(params: types.CodeActionParams) -> list[types.CodeAction]:
        doc = server.ws.get(params.text_document.uri)
        if doc is None:
            return []
        return fixes.code_actions(doc.uri, doc.lines, params.context.diagnostics, server.units)


def serve(debounce_ms: int = DEBOUNCE_MS) -> None:
    """Run the server on stdin and stdout until the client says exit."""
    ls = build(debounce_ms)
    # The modules loaded so far live as long as the server: keep the collector off them, and let it run
    # less often (a lint allocates a few hundred thousand objects, nearly all freed by reference counting):
    # about a tenth off re-linting a 5,000-line spec (bench/lsp.py).
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)
    ls.start_io()
