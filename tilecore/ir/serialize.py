"""Tile IR <-> JSON: deterministic text, exact round trip (spans and source included).

Layout: {"format": "tilecore-ir", "version": TILE_IR_VERSION, "files": [...],
"func": <node>}. A node is {"_": class name, field: value, ...}; tuples are
lists; a span is [file index, line, col, end_line, end_col] into "files";
non-finite floats are {"float": "inf" | "-inf" | "nan"}. Keys are sorted and
there is no whitespace, so equal IR gives byte-equal text (it feeds the cache key).
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any, Dict, List

from . import nodes as N
from .version import TILE_IR_VERSION

FORMAT = "tilecore-ir"
_CLASSES = {cls.__name__: cls for cls in N.EXPR_TYPES + N.STMT_TYPES + (N.Buffer, N.Region, N.PrimFunc)}


class IRFormatError(ValueError):
    """Text that is not Tile IR JSON of a version this tilecore reads."""


def dumps(func: N.PrimFunc) -> str:
    """`func` as JSON text."""
    encoder = _Encoder()
    doc = {"format": FORMAT, "version": TILE_IR_VERSION, "func": encoder.value(func), "files": encoder.files}
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), allow_nan=False)


def loads(text: str) -> N.PrimFunc:
    """The PrimFunc that `dumps` wrote (equal, with equal spans and source)."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise IRFormatError(f"not Tile IR JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise IRFormatError('not Tile IR JSON (no "format": "tilecore-ir")')
    version = str(doc.get("version"))
    if version.split(".")[0] != TILE_IR_VERSION.split(".")[0]:
        raise IRFormatError(f"Tile IR version {version} cannot be read by this tilecore (IR version {TILE_IR_VERSION})")
    func = _Decoder(doc.get("files", [])).value(doc["func"])
    if not isinstance(func, N.PrimFunc):
        raise IRFormatError('the "func" entry is not a PrimFunc')
    return func


class _Encoder:
    """IR -> JSON-ready values, collecting span file names into a table."""

    def __init__(self) -> None:
        self.files: List[str] = []
        self._file_index: Dict[str, int] = {}

    def span(self, span: N.Span) -> List[Any]:
        index = self._file_index.get(span.file)
        if index is None:
            index = self._file_index[span.file] = len(self.files)
            self.files.append(span.file)
        return [index, span.line, span.col, span.end_line, span.end_col]

    def value(self, x: Any) -> Any:
        if isinstance(x, N.Span):
            return self.span(x)
        if dataclasses.is_dataclass(x):
            out: Dict[str, Any] = {"_": type(x).__name__}
            for f in dataclasses.fields(x):
                out[f.name] = self.value(getattr(x, f.name))
            return out
        if isinstance(x, tuple):
            return [self.value(v) for v in x]
        if isinstance(x, float) and not math.isfinite(x):
            return {"float": repr(x)}
        if x is None or isinstance(x, (bool, int, float, str)):
            return x
        raise TypeError(f"cannot serialize {type(x).__name__} in Tile IR")


class _Decoder:
    """JSON values -> IR, resolving span file indices through `files`."""

    def __init__(self, files: List[str]) -> None:
        self.files = files

    def value(self, x: Any, key: str = "") -> Any:
        if key == "span":
            file_index, line, col, end_line, end_col = x
            return N.Span(self.files[file_index], line, col, end_line, end_col)
        if isinstance(x, dict):
            if "float" in x and len(x) == 1:
                return float(x["float"])
            cls = _CLASSES.get(str(x.get("_")))
            if cls is None:
                raise IRFormatError(f"unknown Tile IR node {x.get('_')!r}")
            fields = {f.name: self.value(x[f.name], f.name) for f in dataclasses.fields(cls) if f.name in x}
            return cls(**fields)
        if isinstance(x, list):
            return tuple(self.value(v) for v in x)
        return x
