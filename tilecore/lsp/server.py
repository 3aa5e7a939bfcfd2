"""`tile lsp`: the language server (pygls), over stdio or TCP.

The server process only keeps documents and answers the editor; every analysis runs in
a worker process under a time budget, newest edit first (tilecore.lsp.scheduling), so
typing is never blocked and a runaway analysis is stopped. Hovers, inlay hints and code
actions read the latest analysis; completion, signature help and go-to-definition come
from the language itself (tilecore.lsp.language_help).

Settings (initializationOptions, or `workspace/didChangeConfiguration` under "tile"):
  target      backend whose passes, layout rules and limits to check against
              (e.g. "cuda", "metal"); default: none, the core passes only
  timeBudget  seconds one analysis may take (default 5)
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
from typing import Any, Dict, Optional

from lsprotocol import types as L
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path

from .. import __version__
from . import features, language_help
from .positions import qualifier_of, word_at
from .scheduling import DEFAULT_TIME_BUDGET, Scheduler

log = logging.getLogger("tilecore.lsp")


class TileLanguageServer(LanguageServer):
    """The pygls server with tilecore's settings and analysis scheduler."""

    def __init__(self, target: Optional[str] = None, time_budget: float = DEFAULT_TIME_BUDGET):
        super().__init__("tile-lsp", __version__)
        self.settings: Dict[str, Any] = {"target": target, "timeBudget": time_budget}
        self.scheduler = Scheduler(self)

    def time_budget(self) -> float:
        """Seconds one analysis may take (setting `timeBudget`)."""
        return float(self.settings.get("timeBudget") or DEFAULT_TIME_BUDGET)

    def update_settings(self, options: Any) -> None:
        """Take `target` / `timeBudget` from initializationOptions or configuration settings."""
        if isinstance(options, dict):
            options = options.get("tile", options)
            for key in ("target", "timeBudget"):
                if key in options:
                    self.settings[key] = options[key]

    def client_range(self, uri: str, rng: Dict) -> L.Range:
        """A model range (code-point columns) in the client's position encoding."""
        doc = self.workspace.get_text_document(uri)
        lines = doc.lines

        def position(p: Dict) -> L.Position:
            text = lines[p["line"]] if p["line"] < len(lines) else ""
            return L.Position(p["line"], doc.position_codec.client_num_units(text[: p["character"]]))

        return L.Range(position(rng["start"]), position(rng["end"]))

    def publish(self, uri: str, model: Dict) -> None:
        """Send the model's diagnostics for `uri`."""
        diagnostics = [
            L.Diagnostic(
                range=self.client_range(uri, d["range"]),
                message=d["message"],
                severity=L.DiagnosticSeverity(d["severity"]),
                source=d["source"],
                code=d["code"] or None,
                data=d["data"],
            )
            for d in model["diagnostics"]
        ]
        self.text_document_publish_diagnostics(
            L.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics, version=model.get("version"))
        )

    def cursor(self, uri: str, position: L.Position):
        """(document lines, line, code-point column) of a client position."""
        doc = self.workspace.get_text_document(uri)
        server = doc.position_from_client_units(position)
        return [l.rstrip("\r\n") for l in doc.lines], server.line, server.character


def make_server(target: Optional[str] = None, time_budget: float = DEFAULT_TIME_BUDGET) -> TileLanguageServer:
    """A server with every feature registered."""
    server = TileLanguageServer(target, time_budget)
    _register_document_sync(server)
    _register_analysis_features(server)
    _register_language_features(server)
    return server


def _register_document_sync(server: TileLanguageServer) -> None:
    @server.feature(L.INITIALIZE)
    def initialize(ls: TileLanguageServer, params: L.InitializeParams):
        """Settings from initializationOptions."""
        ls.update_settings(params.initialization_options)

    @server.feature(L.WORKSPACE_DID_CHANGE_CONFIGURATION)
    def configuration(ls: TileLanguageServer, params: L.DidChangeConfigurationParams):
        """New settings: check every open document again."""
        ls.update_settings(params.settings)
        ls.scheduler.invalidate()

    @server.feature(L.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: TileLanguageServer, params: L.DidOpenTextDocumentParams):
        """Check a newly opened document."""
        ls.scheduler.submit(params.text_document.uri)

    @server.feature(L.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: TileLanguageServer, params: L.DidChangeTextDocumentParams):
        """Check the edited text (queued; older queued text is dropped)."""
        ls.scheduler.submit(params.text_document.uri)

    @server.feature(L.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: TileLanguageServer, params: L.DidSaveTextDocumentParams):
        """Check the saved text."""
        ls.scheduler.submit(params.text_document.uri)

    @server.feature(L.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: TileLanguageServer, params: L.DidCloseTextDocumentParams):
        """Forget the document and clear its diagnostics."""
        uri = params.text_document.uri
        ls.scheduler.forget(uri)
        ls.text_document_publish_diagnostics(L.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    @server.feature(L.SHUTDOWN)
    async def shutdown(ls: TileLanguageServer, *args):
        """Stop the workers."""
        await ls.scheduler.stop()

    @server.feature("tile/status")
    async def status(ls: TileLanguageServer, *args):
        """Whether TVM is loaded in the server and in the workers (it never should be)."""
        return {
            "server_tvm_loaded": "tvm" in sys.modules,
            "workers": await ls.scheduler.status(),
            "settings": ls.settings,
        }


def _register_analysis_features(server: TileLanguageServer) -> None:
    @server.feature(L.TEXT_DOCUMENT_HOVER)
    async def hover(ls: TileLanguageServer, params: L.HoverParams):
        """Facts about the buffer, tile op or kernel under the cursor."""
        uri = params.text_document.uri
        model = await ls.scheduler.model(uri, ls.time_budget())
        lines, line, char = ls.cursor(uri, params.position)
        found = features.hover(model or {}, lines, line, char, language_help.aliases_in("\n".join(lines)))
        if found is None:
            return None
        text, rng = found
        return L.Hover(
            contents=L.MarkupContent(kind=L.MarkupKind.Markdown, value=text), range=ls.client_range(uri, rng)
        )

    @server.feature(L.TEXT_DOCUMENT_INLAY_HINT)
    async def inlay_hint(ls: TileLanguageServer, params: L.InlayHintParams):
        """Region shapes in T.copy / T.gemm calls."""
        uri = params.text_document.uri
        model = await ls.scheduler.model(uri, ls.time_budget())
        hints = features.inlay_hints(model or {}, params.range.start.line, params.range.end.line)
        return [
            L.InlayHint(
                position=ls.client_range(uri, {"start": h["position"], "end": h["position"]}).start,
                label=h["label"],
                kind=L.InlayHintKind.Type,
                padding_left=True,
                tooltip=h["tooltip"],
            )
            for h in hints
        ]

    @server.feature(L.TEXT_DOCUMENT_CODE_ACTION, L.CodeActionOptions(code_action_kinds=[L.CodeActionKind.QuickFix]))
    def code_action(ls: TileLanguageServer, params: L.CodeActionParams):
        """The fixes the diagnostics in the request carry."""
        uri = params.text_document.uri
        actions = []
        for diagnostic in params.context.diagnostics:
            for fix in features.fixes(diagnostic.data):
                edits = [
                    L.TextEdit(range=ls.client_range(uri, e["range"]), new_text=e["newText"]) for e in fix["edits"]
                ]
                actions.append(
                    L.CodeAction(
                        title=fix["title"],
                        kind=L.CodeActionKind.QuickFix,
                        diagnostics=[diagnostic],
                        is_preferred=True,
                        edit=L.WorkspaceEdit(changes={uri: edits}),
                    )
                )
        return actions


def _register_language_features(server: TileLanguageServer) -> None:
    kinds = {
        "function": L.CompletionItemKind.Function,
        "class": L.CompletionItemKind.Class,
        "constant": L.CompletionItemKind.Constant,
    }

    @server.feature(L.TEXT_DOCUMENT_COMPLETION, L.CompletionOptions(trigger_characters=["."]))
    def completion(ls: TileLanguageServer, params: L.CompletionParams):
        """The language's names after `T.`."""
        lines, line, char = ls.cursor(params.text_document.uri, params.position)
        text = lines[line][:char] if line < len(lines) else ""
        word, start, _ = word_at(text, char)
        prefix = word if start < char or word else ""
        qualifier = qualifier_of(text, char - len(prefix))
        if qualifier not in language_help.aliases_in("\n".join(lines)):
            return None
        items = [
            L.CompletionItem(
                label=c["name"],
                kind=kinds[c["kind"]],
                detail=c["detail"],
                documentation=L.MarkupContent(kind=L.MarkupKind.Markdown, value=c["doc"]),
            )
            for c in language_help.completions(prefix)
        ]
        return L.CompletionList(is_incomplete=False, items=items)

    @server.feature(
        L.TEXT_DOCUMENT_SIGNATURE_HELP,
        L.SignatureHelpOptions(trigger_characters=["(", ","], retrigger_characters=[","]),
    )
    def signature_help(ls: TileLanguageServer, params: L.SignatureHelpParams):
        """The signature of the `T.op(` call around the cursor."""
        lines, line, char = ls.cursor(params.text_document.uri, params.position)
        before = "\n".join(lines[:line] + [lines[line][:char] if line < len(lines) else ""])
        found = language_help.open_call(before, language_help.aliases_in("\n".join(lines)))
        if found is None:
            return None
        name, index, keyword = found
        obj = language_help.language_names()[name]
        signature = L.SignatureInformation(
            label=language_help.signature_text(name, obj),
            documentation=L.MarkupContent(kind=L.MarkupKind.Markdown, value=language_help.doc_text(obj)),
            parameters=[L.ParameterInformation(label=p) for p in language_help.parameters(name)],
        )
        return L.SignatureHelp(
            signatures=[signature],
            active_signature=0,
            active_parameter=language_help.active_parameter(name, index, keyword),
        )

    @server.feature(L.TEXT_DOCUMENT_DEFINITION)
    def definition(ls: TileLanguageServer, params: L.DefinitionParams):
        """Where `T.op` is documented."""
        lines, line, char = ls.cursor(params.text_document.uri, params.position)
        word, start, _ = word_at(lines[line] if line < len(lines) else "", char)
        if not word or qualifier_of(lines[line], start) not in language_help.aliases_in("\n".join(lines)):
            return None
        return [
            L.Location(uri=from_fs_path(path), range=L.Range(L.Position(row, 0), L.Position(row, 0)))
            for path, row in language_help.documentation_locations(word)
        ] or None


def serve_tcp(server: TileLanguageServer, host: str, port: int, announce=None) -> None:
    """Serve one client over TCP; `announce(host, port)` is called once the socket listens."""
    from pygls.io_ import run_async

    stop = threading.Event()
    tcp: Optional[asyncio.Server] = None  # the listening socket, once main() opened it

    async def connection(reader, writer):
        server.protocol.set_writer(writer)
        await run_async(
            stop_event=stop,
            reader=reader,
            protocol=server.protocol,
            logger=log,
            error_handler=server.report_server_error,
        )
        if tcp is not None:
            tcp.close()

    async def main():
        nonlocal tcp
        listening = tcp = await asyncio.start_server(connection, host, port)
        bound = listening.sockets[0].getsockname()
        if announce is not None:
            announce(bound[0], bound[1])
        async with listening:
            try:
                await listening.serve_forever()
            except asyncio.CancelledError:
                pass
        await server.scheduler.stop()

    try:
        asyncio.run(main())
    except (KeyboardInterrupt, SystemExit):
        pass
