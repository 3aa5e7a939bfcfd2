"""Tile IR: nodes, dtypes, traversal; printer and JSON form in their own modules.

The node classes, dtypes and traversal helpers are re-exported here, loaded on first use: code
that only needs the IR version or spans (the plugin registry, launchers of cached kernels) does
not pay for building the node classes.
"""

import importlib
from typing import Any, List

from .span import NO_SPAN, Span  # noqa: F401
from .version import TILE_IR_VERSION  # noqa: F401

_FROM = {
    "DTYPES": "types",
    "normalize_dtype": "types",
    "promote": "types",
    "Transformer": "visitor",
    "children": "visitor",
    "substitute": "visitor",
    "walk": "visitor",
    "walk_stmts": "visitor",
}
_SUBMODULES = ("nodes", "types", "visitor", "printer", "serialize", "version", "span")


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module("." + name, __name__)
    module = importlib.import_module("." + _FROM.get(name, "nodes"), __name__)
    try:
        return getattr(module, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(_FROM) | set(dir(importlib.import_module(".nodes", __name__))))
