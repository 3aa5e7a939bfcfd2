"""`tile lsp [--tcp] [--host H] [--port P] [--target T]`: the language server (tilecore.lsp)."""

from __future__ import annotations

import sys

from ..diagnostics import TileError


def add_parser(subparsers) -> None:
    """Register `tile lsp`."""
    p = subparsers.add_parser(
        "lsp",
        help="run the language server (diagnostics, hovers, inlay hints for kernels)",
        description="Language Server Protocol server for tilecore kernels, over stdio (default) or "
        "TCP. Needs the lsp extra: pip install 'tilecore[lsp]'. Editor set-up: "
        "docs/editor.md.",
    )
    p.add_argument("--tcp", action="store_true", help="listen on TCP instead of stdio")
    p.add_argument("--host", default="127.0.0.1", help="TCP address to listen on (default 127.0.0.1)")
    p.add_argument(
        "--port", type=int, default=2087, help="TCP port (default 2087; 0 picks a free one, printed on stderr)"
    )
    p.add_argument(
        "--target",
        default=None,
        help="backend to check kernels against (its limits, features and layouts); "
        "the editor's tile.target setting overrides it",
    )
    p.add_argument(
        "--time-budget",
        type=float,
        default=None,
        metavar="SECONDS",
        help="longest one analysis may run before it is stopped (default 5)",
    )
    p.set_defaults(func=run)


def run(args) -> int:
    """Serve until the editor disconnects (stdio) or the TCP client leaves."""
    try:
        from ..lsp.server import DEFAULT_TIME_BUDGET, make_server, serve_tcp
    except ImportError as err:
        raise TileError(f"tile lsp needs pygls ({err.name or err} is missing): pip install 'tilecore[lsp]'") from None
    server = make_server(args.target, args.time_budget or DEFAULT_TIME_BUDGET)
    if not args.tcp:
        server.start_io()
        return 0

    def announce(host, port):
        print(f"tile lsp: listening on {host}:{port}", file=sys.stderr, flush=True)

    serve_tcp(server, args.host, args.port, announce)
    return 0
