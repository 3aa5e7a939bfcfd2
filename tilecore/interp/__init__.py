"""The reference interpreter: the executable definition of the tile language's semantics.

`run(func, args, bindings)` executes a Tile IR PrimFunc on numpy arrays in
place (one array per parameter, outputs included). It is also the backend
"reference" (see tilecore.interp.plugin), registered like every other backend.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Dict, Optional, Sequence

import numpy as np

from ..ir.nodes import PrimFunc
from .dtypes import NUMPY_DTYPES, convert, np_dtype  # noqa: F401
from .executor import Program

__all__ = ["run", "compile_program", "Program", "np_dtype"]

_CACHE_SIZE = 64
_cache: "OrderedDict[int, tuple]" = OrderedDict()
_lock = threading.Lock()


def compile_program(func: PrimFunc) -> Program:
    """The compiled closures for `func`, cached per function object (the spans matter)."""
    key = id(func)
    with _lock:
        hit = _cache.get(key)
        if hit is not None and hit[0] is func:
            _cache.move_to_end(key)
            return hit[1]
    program = Program(func)
    with _lock:
        _cache[key] = (func, program)  # holding `func` keeps its id from being reused
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return program


def run(func: PrimFunc, args: Sequence[np.ndarray], bindings: Optional[Dict[str, int]] = None) -> None:
    """Execute `func` on `args` (numpy arrays, one per parameter) in place.

    Dynamic dimensions are bound from the arguments' shapes and checked
    against `bindings` when given. Raises tilecore.diagnostics.TileRuntimeError
    (with the source line) for out-of-bounds element indexing and bad arguments.
    """
    compile_program(func).run(list(args), bindings)
