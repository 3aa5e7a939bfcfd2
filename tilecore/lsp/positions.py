"""Converting tilecore spans to positions in the document.

A `Span` has a 1-based line and a 0-based column counted the way Python's `ast` counts
(UTF-8 bytes of the line). The analysis model uses 0-based lines and columns in code
points (indices into the line's `str`); the server converts those to the client's
position encoding (UTF-16 by default) when it sends them (pygls's position codec).
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Tuple

_WORD = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")


def byte_to_index(line: str, byte_col: int) -> int:
    """The str index of the character that starts at UTF-8 byte `byte_col` of `line`."""
    return len(line.encode("utf-8")[: max(byte_col, 0)].decode("utf-8", errors="ignore"))


def lsp_range(lines: List[str], line: int, col: int, end_line: int = 0, end_col: int = 0) -> Dict:
    """A range (plain dict, code-point columns) for a span's fields; a span without an end
    (end_line 0, or an end before the start) covers the rest of its line's text from `col`."""
    row = max(line - 1, 0)
    text = lines[row] if row < len(lines) else ""
    start = byte_to_index(text, col)
    if end_line < line or (end_line == line and end_col < col):
        end_row, end = row, max(len(text.rstrip()), start + 1)
    else:
        end_row = end_line - 1
        end = byte_to_index(lines[end_row] if end_row < len(lines) else "", end_col)
    return {"start": {"line": row, "character": start}, "end": {"line": end_row, "character": end}}


def span_range(lines: List[str], span) -> Dict:
    """The range of a `tilecore.ir.Span` in a document of `lines`."""
    return lsp_range(lines, span.line, span.col, span.end_line, span.end_col)


def word_at(line: str, index: int) -> Tuple[str, int, int]:
    """(identifier, start, end) under the cursor at str index `index`, or ("", index, index)."""
    for match in _WORD.finditer(line):
        if match.start() <= index <= match.end():
            return match.group(), match.start(), match.end()
    return "", index, index


def qualifier_of(line: str, word_start: int) -> Optional[str]:
    """`T` when the word starting at `word_start` is written `T.word`, else None."""
    match = re.search(r"([A-Za-z_][A-Za-z_0-9]*)\s*\.\s*$", line[:word_start])
    return match.group(1) if match else None


def contains(rng: Dict, line: int, character: int) -> bool:
    """Whether position (line, character) lies inside `rng` (end inclusive)."""
    start, end = rng["start"], rng["end"]
    return (start["line"], start["character"]) <= (line, character) <= (end["line"], end["character"])
