"""User-facing errors: `file:line:col`, the source line with a caret, a one-line cause."""

from __future__ import annotations

import functools
import linecache
import os
from typing import Any, Callable, Optional, TypeVar, cast

from .ir.span import NO_SPAN, Span

_F = TypeVar("_F", bound=Callable[..., Any])


class TileError(Exception):
    """Base of every error tilecore raises about a user's program or call."""

    internal_cause: Optional[BaseException] = None  # the cause hide_internal_frames dropped


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

    feature_key: str = ""  # the vocabulary name ("cumsum"), set by the check_features pass

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


class BackendError(TileError):
    """A backend plugin failed (missing toolchain, a crash in its codegen or launcher)."""


class PluginHookError(BackendError):
    """A plugin's hook raised: the message names the plugin (distribution, entry point) and the hook."""

    def __init__(self, message: str, plugin: str, hook: str):
        self.plugin = plugin
        self.hook = hook
        super().__init__(message)


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


def hide_internal_frames(err: TileError) -> TileError:
    """`err` ready to re-raise at a public entry point: tilecore's frames and the chained cause dropped.

    The message already names the user's line and the cause; TVM's or a plugin's
    traceback under it only buries that. The dropped cause stays available as
    `err.internal_cause`; TILECORE_TRACEBACK=1 keeps everything (for backend authors).
    """
    if err.__cause__ is not None:
        err.internal_cause = err.__cause__
    err.__cause__ = None
    err.__suppress_context__ = True
    return err.with_traceback(None)


def user_facing(func: _F) -> _F:
    """Decorate a public entry point so the TileErrors it raises show no internal traceback."""

    @functools.wraps(func)
    def entry_point(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except TileError as err:
            if os.environ.get("TILECORE_TRACEBACK"):
                raise
            raise hide_internal_frames(err) from None
        except RecursionError:  # a kernel too deeply nested for a recursive pass: never 1000 frames
            if os.environ.get("TILECORE_TRACEBACK"):
                raise
            raise TileCompileError(
                f"{func.__name__}: the kernel is nested too deeply for tilecore "
                f"(Python's recursion limit was reached); split deep expressions or "
                f"loop nests into several statements"
            ) from None

    return cast(_F, entry_point)
