"""The `tile` command: `tile backends`, `tile compile`, `tile trace`, `tile bench`, and plugin subcommands.

Built-in subcommands live in the modules named in COMMAND_MODULES (each has
`add_parser(subparsers)` that sets a `func(args) -> exit code` default).
Plugins add theirs through the `tilecore_cli_commands(subparsers)` hook.
Errors tilecore raises about the user's program or call are printed without a
traceback (set TILECORE_TRACEBACK=1 to see one) and exit with status 1.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import List, Optional

COMMAND_MODULES = ("backends", "compile", "trace", "cache", "new_backend", "lsp", "bench")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with built-in and plugin subcommands."""
    from .. import __version__

    parser = _Parser(prog="tile", description="tilecore: tile-level kernels with pluggable hardware backends")
    parser.add_argument("--version", action="version", version=f"tilecore {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(f".{name}", __package__).add_parser(subparsers)
    _plugin_commands(subparsers)
    return parser


class _Parser(argparse.ArgumentParser):
    """argparse, naming the plugins that failed to load when a command is unknown: such a
    plugin's commands are missing, and "invalid choice" alone does not say why."""

    def error(self, message):
        if "invalid choice" in message:
            from ..plugin.manager import get_plugin_manager

            broken = get_plugin_manager().errors
            if broken:
                message += "".join(f"\n  {e.describe()} (failed to load)" for e in broken)
                message += "\n  (their commands are missing; `tile backends` shows every plugin)"
        super().error(message)


def _plugin_commands(subparsers) -> None:
    from ..plugin.manager import get_plugin_manager

    manager = get_plugin_manager()
    for impl in manager.hook.tilecore_cli_commands.get_hookimpls():
        try:
            impl.function(**{a: subparsers for a in impl.argnames})
        except Exception as err:  # a broken plugin loses its subcommand, not the whole CLI
            print(
                f"tile: warning: plugin {impl.plugin_name!r} failed to add its commands: {type(err).__name__}: {err}",
                file=sys.stderr,
            )


def main(argv: Optional[List[str]] = None) -> int:
    """Run the `tile` command; return its exit status."""
    from ..diagnostics import TileError

    try:
        parser = build_parser()  # loads the plugins: a bad environment switch is reported here
        args = parser.parse_args(argv)
        if not getattr(args, "func", None):
            parser.print_help()
            return 2
        return int(args.func(args) or 0)
    except TileError as err:
        if os.environ.get("TILECORE_TRACEBACK"):
            raise
        text = str(err)
        first = text.split("\n", 1)[0]
        if not (first.startswith("error:") or ": error: " in first):
            text = "error: " + text
        print(text, file=sys.stderr)
        return 1
    except BrokenPipeError:  # `tile trace ... | head`
        return 0


if __name__ == "__main__":
    sys.exit(main())
