"""A real ``python -m torchspec lsp`` subprocess, driven over stdio by pygls' LanguageClient.

The client's event loop runs on a thread of its own so that tests read as
plain calls (``session.hover(uri, 3, 4)``); notifications the server sends
(diagnostics, log messages) are collected in thread-safe queues.  Nothing
here reaches into the server: every question is a protocol message.
"""

from __future__ import annotations

import asyncio
import os
import pathlib
import queue
import sys
import threading
import time
from typing import Any, Callable, Coroutine

from lsprotocol import types as T
from pygls.lsp.client import LanguageClient

REPO = pathlib.Path(__file__).resolve().parents[2]
TIMEOUT = 120.0  # a generous deadline, not a measure: a server starting beside a cold Go build took longer than 30 s


class Session:
    """One server process and one client, initialized; ``close()`` shuts it down and returns its exit code."""

    def __init__(self, cwd: pathlib.Path, init_options: dict[str, Any] | None = None,
                 capabilities: T.ClientCapabilities | None = None, env: dict[str, str] | None = None) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.client = LanguageClient("torchspec-tests", "1")
        self.diagnostics: "queue.Queue[T.PublishDiagnosticsParams]" = queue.Queue()
        self.logs: "queue.Queue[str]" = queue.Queue()
        self.registrations: "queue.Queue[T.RegistrationParams]" = queue.Queue()
        self.client.feature(T.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)(lambda params: self.diagnostics.put(params))
        self.client.feature(T.WINDOW_LOG_MESSAGE)(lambda params: self.logs.put(params.message))
        self.messages: "queue.Queue[T.ShowMessageParams]" = queue.Queue()
        self.client.feature(T.WINDOW_SHOW_MESSAGE)(lambda params: self.messages.put(params))
        self.client.feature(T.CLIENT_REGISTER_CAPABILITY)(lambda params: self.registrations.put(params))
        self.versions: dict[str, int] = {}
        self.closed = False
        environment = {**os.environ, "PYTHONPATH": str(REPO), "TORCHSPEC_HOME": str(cwd / ".state"),
                       "XDG_CONFIG_HOME": str(cwd / ".config"), **(env or {})}
        self.run(self.client.start_io(sys.executable, "-m", "torchspec", "lsp", cwd=str(cwd), env=environment))
        self.stderr = bytearray()  # drained as it comes: a full pipe would block the server
        self.run(self._drain_stderr())
        self.result = self.run(self.client.initialize_async(T.InitializeParams(
            capabilities=capabilities or T.ClientCapabilities(), root_uri=cwd.as_uri(),
            initialization_options=init_options or {"debounce_ms": 50})))
        self.client.initialized(T.InitializedParams())

    async def _drain_stderr(self) -> None:
        async def drain() -> None:
            stream = self.client._server.stderr  # the subprocess pygls started for us
            while chunk := await stream.read(65536):
                self.stderr.extend(chunk)

        asyncio.ensure_future(drain())

    def run(self, coroutine: Coroutine[Any, Any, Any], timeout: float = TIMEOUT) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    # ------------------------------------------------------------ documents

    def open(self, path: pathlib.Path, text: str | None = None, language: str = "yaml") -> str:
        uri = path.as_uri()
        self.versions[uri] = 1
        self.client.text_document_did_open(T.DidOpenTextDocumentParams(
            T.TextDocumentItem(uri=uri, language_id=language, version=1,
                               text=path.read_text() if text is None else text)))
        return uri

    def change(self, uri: str, text: str) -> int:
        self.versions[uri] += 1
        self.client.text_document_did_change(T.DidChangeTextDocumentParams(
            text_document=T.VersionedTextDocumentIdentifier(uri=uri, version=self.versions[uri]),
            content_changes=[T.TextDocumentContentChangeWholeDocument(text=text)]))
        return self.versions[uri]

    def edit(self, uri: str, line: int, start: int, end: int, text: str) -> int:
        """An incremental change: replace characters ``start`` to ``end`` of ``line`` with ``text``."""
        self.versions[uri] += 1
        change = T.TextDocumentContentChangePartial(range=T.Range(start=T.Position(line=line, character=start),
                                                                  end=T.Position(line=line, character=end)), text=text)
        self.client.text_document_did_change(T.DidChangeTextDocumentParams(
            text_document=T.VersionedTextDocumentIdentifier(uri=uri, version=self.versions[uri]),
            content_changes=[change]))
        return self.versions[uri]

    def save(self, uri: str) -> None:
        self.client.text_document_did_save(T.DidSaveTextDocumentParams(T.TextDocumentIdentifier(uri=uri)))

    def close_document(self, uri: str) -> None:
        self.client.text_document_did_close(T.DidCloseTextDocumentParams(T.TextDocumentIdentifier(uri=uri)))

    def wait_diagnostics(self, uri: str, until: Callable[[list[T.Diagnostic]], bool] = lambda d: True,
                         timeout: float = TIMEOUT) -> list[T.Diagnostic]:
        """The diagnostics of the next publication for ``uri`` that satisfies ``until``."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no matching diagnostics for {uri} within {timeout} s")
            params = self.diagnostics.get(timeout=left)
            if params.uri == uri and until(list(params.diagnostics)):
                return list(params.diagnostics)

    # ------------------------------------------------------------ requests

    def hover(self, uri: str, line: int, character: int) -> T.Hover | None:
        return self.run(self.client.text_document_hover_async(
            T.HoverParams(T.TextDocumentIdentifier(uri=uri), T.Position(line=line, character=character))))

    def complete(self, uri: str, line: int, character: int) -> list[T.CompletionItem]:
        found = self.run(self.client.text_document_completion_async(
            T.CompletionParams(T.TextDocumentIdentifier(uri=uri), T.Position(line=line, character=character))))
        return list(found.items) if isinstance(found, T.CompletionList) else list(found or [])

    def definition(self, uri: str, line: int, character: int) -> list[T.Location]:
        found = self.run(self.client.text_document_definition_async(
            T.DefinitionParams(T.TextDocumentIdentifier(uri=uri), T.Position(line=line, character=character))))
        return list(found or [])

    def symbols(self, uri: str) -> list[T.DocumentSymbol]:
        return list(self.run(self.client.text_document_document_symbol_async(
            T.DocumentSymbolParams(T.TextDocumentIdentifier(uri=uri)))) or [])

    def code_actions(self, uri: str, diagnostics: list[T.Diagnostic]) -> list[T.CodeAction]:
        return list(self.run(self.client.text_document_code_action_async(T.CodeActionParams(
            T.TextDocumentIdentifier(uri=uri), diagnostics[0].range, T.CodeActionContext(diagnostics=diagnostics))))
            or [])

    def close(self) -> int | None:
        """shutdown, then exit: the server's exit code (0 when it shut down cleanly).  Once only."""
        if self.closed:
            return None
        self.closed = True
        try:
            self.run(self.client.shutdown_async(None))
            self.client.exit(None)
            server = self.client._server  # the subprocess pygls started for us
            self.run(asyncio.wait_for(server.wait(), TIMEOUT)) if server is not None else None
            return server.returncode if server is not None else None
        finally:
            self.run(self.client.stop())
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(5)


def position_of(text: str, needle: str, offset: int = 0, occurrence: int = 0) -> tuple[int, int]:
    """0-based (line, character) of the ``occurrence``-th ``needle`` in ``text``, plus ``offset`` characters."""
    at = -1
    for _ in range(occurrence + 1):
        at = text.index(needle, at + 1)
    line = text.count("\n", 0, at)
    return line, at - (text.rfind("\n", 0, at) + 1) + offset
