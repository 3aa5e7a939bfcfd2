"""User-facing errors: `file:line:col`, the source line with a caret, a one-line cause."""
from __future__ import annotations

import linecache
from typing import Optional

from .ir.nodes import NO_SPAN, Span


class TileError(Exception):
    """Base of every error tilecore raises about a user's program or call."""


class TileCompileError(TileError):
    """An error in the user's kernel, found while parsing, checking or lowering it.

    `span` points at the culprit; `str(err)` is the full report.
    """

    def __init__(self, message: str, span: Optional[Span] = None, source: str = ""):
        self.message = message
        self.span = span or NO_SPAN
        self.source = source
        super().__init__(format_diagnostic(message, self.span, source))


class UnsupportedFeatureError(TileCompileError):
    """The chosen backend does not support a feature the kernel uses."""

    def __init__(self, backend: str, feature: str, span: Optional[Span] = None, source: str = ""):
        self.backend = backend
        self.feature = feature
        super().__init__(f"backend {backend} does not support {feature}", span, source)


class TileRuntimeError(TileError):
    """An error while running a kernel (bad arguments, out-of-bounds indexing, launch failure)."""

    def __init__(self, message: str, span: Optional[Span] = None, source: str = ""):
        self.message = message
        self.span = span or NO_SPAN
        super().__init__(format_diagnostic(message, self.span, source) if span and span.line else message)


def source_line(span: Span, source: str = "") -> str:
    """The text of the line `span` points at, from `source` or the file itself."""
    if span.line <= 0:
        return ""
    if source:
        lines = source.splitlines()
        if span.line <= len(lines):
            return lines[span.line - 1]
    return linecache.getline(span.file, span.line).rstrip("\n")


def format_diagnostic(message: str, span: Span, source: str = "") -> str:
    """Render `file:line:col: error: message`, the line, and a caret under the culprit."""
    if span is None or span.line <= 0:
        return f"error: {message}"
    head = f"{span.file}:{span.line}:{span.col + 1}: error: {message}"
    text = source_line(span, source)
    if not text:
        return head
    width = 1
    if span.end_line == span.line and span.end_col > span.col:
        width = span.end_col - span.col
    caret = " " * span.col + "^" + "~" * (width - 1)
    return f"{head}\n    {text}\n    {caret}"
