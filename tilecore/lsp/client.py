"""A small blocking LSP client for `tile lsp` (pygls's LanguageClient on a background loop).

Used by the tests and benchmarks/lsp_latency.py to drive the real server over stdio or
TCP, and handy for scripting the server. Every call waits for the server's answer.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from lsprotocol import types as L
from pygls.lsp.client import LanguageClient
from pygls.uris import from_fs_path


class TileLspClient:
    """Start (stdio) or connect to (TCP) a server, initialize it, and talk to it synchronously."""

    def __init__(
        self,
        command: Optional[Sequence[str]] = None,
        tcp: Optional[Tuple[str, int]] = None,
        options: Optional[Dict[str, Any]] = None,
        timeout: float = 120.0,
    ):
        self.timeout = timeout
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        self.client = LanguageClient("tile-lsp-client", "1")
        self.published: Dict[str, List[Tuple[Optional[int], List[L.Diagnostic], float]]] = {}
        self._changed = threading.Condition()
        self.versions: Dict[str, int] = {}

        @self.client.feature(L.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def on_diagnostics(params: L.PublishDiagnosticsParams):
            with self._changed:
                self.published.setdefault(params.uri, []).append(
                    (params.version, list(params.diagnostics), time.perf_counter())
                )
                self._changed.notify_all()

        if tcp is not None:
            self._run(self.client.start_tcp(*tcp))
        else:
            command = list(command or [sys.executable, "-m", "tilecore.cli.main", "lsp"])
            self._run(self.client.start_io(*command))
        self.initialize_result = self._run(
            self.client.initialize_async(
                L.InitializeParams(
                    process_id=None,
                    root_uri=None,
                    initialization_options=options or {},
                    capabilities=L.ClientCapabilities(
                        text_document=L.TextDocumentClientCapabilities(
                            hover=L.HoverClientCapabilities(content_format=[L.MarkupKind.Markdown])
                        )
                    ),
                )
            )
        )
        self.client.initialized(L.InitializedParams())

    def _run(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(self.timeout)

    # ------------------------------------------------------------------ documents

    def open(self, path: str, text: str) -> str:
        """Open `text` as the document at `path`; returns its uri (version 1)."""
        uri = from_fs_path(path)
        self.versions[uri] = 1
        self.client.text_document_did_open(
            L.DidOpenTextDocumentParams(L.TextDocumentItem(uri=uri, language_id="python", version=1, text=text))
        )
        return uri

    def change(self, uri: str, text: str) -> int:
        """Replace the whole text of the document; returns its new version."""
        self.versions[uri] += 1
        self.client.text_document_did_change(
            L.DidChangeTextDocumentParams(
                L.VersionedTextDocumentIdentifier(uri=uri, version=self.versions[uri]),
                [L.TextDocumentContentChangeWholeDocument(text=text)],
            )
        )
        return self.versions[uri]

    def close_document(self, uri: str) -> None:
        """Close the document (the server clears its diagnostics)."""
        self.client.text_document_did_close(L.DidCloseTextDocumentParams(L.TextDocumentIdentifier(uri)))

    def configure(self, settings: Dict[str, Any]) -> None:
        """Send `workspace/didChangeConfiguration` with {"tile": settings}."""
        self.client.workspace_did_change_configuration(L.DidChangeConfigurationParams({"tile": settings}))

    def diagnostics(
        self, uri: str, version: Optional[int] = None, timeout: Optional[float] = None, after: float = 0.0
    ) -> Tuple[List[L.Diagnostic], float]:
        """(diagnostics, arrival time) of the first publication for `version` (default: the
        current one) that arrived after `after` (a time.perf_counter() value)."""
        version = self.versions.get(uri) if version is None else version
        deadline = time.monotonic() + (timeout or self.timeout)
        with self._changed:
            while True:
                for v, diagnostics, at in self.published.get(uri, ()):
                    if v == version and at >= after:
                        return diagnostics, at
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no diagnostics for {uri} version {version}")
                self._changed.wait(left)

    # ------------------------------------------------------------------ requests

    def hover(self, uri: str, line: int, character: int) -> Optional[L.Hover]:
        """textDocument/hover at a position."""
        return self._run(
            self.client.text_document_hover_async(
                L.HoverParams(L.TextDocumentIdentifier(uri), L.Position(line, character))
            )
        )

    def inlay_hints(self, uri: str, first_line: int, last_line: int) -> List[L.InlayHint]:
        """textDocument/inlayHint for a range of lines."""
        return self._run(
            self.client.text_document_inlay_hint_async(
                L.InlayHintParams(
                    L.TextDocumentIdentifier(uri), L.Range(L.Position(first_line, 0), L.Position(last_line, 0))
                )
            )
        )

    def code_actions(self, uri: str, diagnostics: List[L.Diagnostic]) -> List[L.CodeAction]:
        """textDocument/codeAction for published diagnostics (the fixes they carry)."""
        rng = diagnostics[0].range if diagnostics else L.Range(L.Position(0, 0), L.Position(0, 0))
        return (
            self._run(
                self.client.text_document_code_action_async(
                    L.CodeActionParams(L.TextDocumentIdentifier(uri), rng, L.CodeActionContext(diagnostics=diagnostics))
                )
            )
            or []
        )

    def completion(self, uri: str, line: int, character: int):
        """textDocument/completion at a position."""
        return self._run(
            self.client.text_document_completion_async(
                L.CompletionParams(L.TextDocumentIdentifier(uri), L.Position(line, character))
            )
        )

    def signature_help(self, uri: str, line: int, character: int) -> Optional[L.SignatureHelp]:
        """textDocument/signatureHelp at a position."""
        return self._run(
            self.client.text_document_signature_help_async(
                L.SignatureHelpParams(L.TextDocumentIdentifier(uri), L.Position(line, character))
            )
        )

    def definition(self, uri: str, line: int, character: int):
        """textDocument/definition at a position."""
        return self._run(
            self.client.text_document_definition_async(
                L.DefinitionParams(L.TextDocumentIdentifier(uri), L.Position(line, character))
            )
        )

    def status(self) -> Dict[str, Any]:
        """The server's `tile/status`: whether TVM is loaded in the server and the worker."""

        async def request():
            return await self.client.protocol.send_request_async("tile/status", None)

        result = self._run(request())
        return _plain(result)

    def stop(self) -> None:
        """Shut the server down (shutdown + exit) and stop the loop."""
        try:
            self._run(self.client.shutdown_async(None))
            self.client.exit(None)
            self._run(asyncio.wait_for(self.client.stop(), 30))
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)


def _plain(value):
    """pygls's answer objects (named tuples) for an untyped request as dicts and lists."""
    if hasattr(value, "_asdict"):
        return {k: _plain(v) for k, v in value._asdict().items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def apply_edits(text: str, edits: List[L.TextEdit]) -> str:
    """`text` after a list of non-overlapping TextEdits (UTF-16 positions, as the LSP default)."""
    lines = text.splitlines(keepends=True)

    def offset(position: L.Position) -> int:
        before = sum(len(line) for line in lines[: position.line])
        line = lines[position.line] if position.line < len(lines) else ""
        units, index = 0, 0
        while index < len(line) and units < position.character:
            units += 2 if ord(line[index]) > 0xFFFF else 1
            index += 1
        return before + index

    for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        text = text[: offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end) :]
        lines = text.splitlines(keepends=True)
    return text
