"""Source spans: where in the user's file a node or an error comes from.

Its own module so that diagnostics (and through them the plugin registry and launchers) can
name spans without importing the IR node classes.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Span:
    """A place in user source: 1-based line, 0-based column."""

    file: str = "<unknown>"
    line: int = 0
    col: int = 0
    end_line: int = 0
    end_col: int = 0

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col + 1}"


NO_SPAN = Span()
