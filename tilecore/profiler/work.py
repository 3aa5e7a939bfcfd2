"""The work a kernel does, derived from its Tile IR: GEMM flops and compulsory global bytes.

flops: 2*m*n*k for every `T.gemm`, times the trip counts of the loops around it
and the size of the grid. Only GEMM arithmetic counts (it is what a device's
peak FLOP/s measures); a kernel without `T.gemm` has no flop count. Under a
run-time `if`, the larger branch counts (an upper bound).

bytes: every global parameter read or written once (its size times its dtype's
width): the traffic no schedule can avoid, so GB/s against the device's peak
bandwidth is a lower bound on how close the kernel runs to the memory roofline.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Callable, Dict, Optional

from ..ir import nodes as N
from ..ir.types import is_int4
from ..runtime.arrays import numpy_dtype

_INT_OPS: Dict[str, Callable[[int, int], int]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "//": operator.floordiv,
    "%": operator.mod,
    "min": min,
    "max": max,
}


@dataclass(frozen=True)
class Work:
    """What one launch computes and moves; None where the IR does not determine it."""

    flops: Optional[int]
    bytes: Optional[int]
    dtype: str  # the dtype whose peak applies: the GEMM inputs', else the first parameter's


def _value(expr, bindings: Dict[str, int]) -> Optional[int]:
    """`expr` as an int when it is a constant expression of the bindings, else None."""
    if isinstance(expr, int):
        return expr
    if isinstance(expr, N.Const) and isinstance(expr.value, int) and not isinstance(expr.value, bool):
        return expr.value
    if isinstance(expr, N.Var):
        return bindings.get(expr.name)
    if isinstance(expr, N.BinOp) and expr.op in _INT_OPS:
        a, b = _value(expr.a, bindings), _value(expr.b, bindings)
        if a is None or b is None or (expr.op in ("//", "%") and b == 0):
            return None
        return _INT_OPS[expr.op](a, b)
    return None


def _gemm_flops(gemm: N.Gemm) -> int:
    m, n = gemm.c.extents[-2], gemm.c.extents[-1]
    a = gemm.a.extents
    k = a[-2] if gemm.transpose_a else a[-1]
    return 2 * m * n * k


def _body_flops(body, bindings: Dict[str, int]) -> Optional[int]:
    """GEMM flops of a statement list (None: a trip count is not known)."""
    total = 0
    for stmt in body:
        if isinstance(stmt, N.Gemm):
            total += _gemm_flops(stmt)
            continue
        if isinstance(stmt, N.If):
            then_flops, else_flops = _body_flops(stmt.then_body, bindings), _body_flops(stmt.else_body, bindings)
            if then_flops is None or else_flops is None:
                return None
            total += max(then_flops, else_flops)
            continue
        body_of = getattr(stmt, "body", None)
        if not isinstance(body_of, tuple):
            continue
        inner = _body_flops(body_of, bindings)
        if inner is None:
            return None
        if inner == 0:
            continue
        trips = _trip_count(stmt, bindings)
        if trips is None:
            return None
        total += trips * inner
    return total


def _trip_count(stmt, bindings: Dict[str, int]) -> Optional[int]:
    if isinstance(stmt, N.For):
        return _value(stmt.extent, bindings)
    if isinstance(stmt, N.Parallel):
        count = 1
        for extent in stmt.extents:
            count *= extent
        return count
    if isinstance(stmt, N.Kernel):
        count = 1
        for grid_extent in stmt.grid:
            value = _value(grid_extent, bindings)
            if value is None:
                return None
            count *= value
        return count
    return 1  # Let and other single-pass bodies


def _gemm_dtype(func: N.PrimFunc) -> Optional[str]:
    from ..ir.visitor import walk_stmts

    for stmt in walk_stmts(func.body):
        if isinstance(stmt, N.Gemm):
            return stmt.a.buffer.dtype
    return None


def work_of(func: N.PrimFunc, bindings: Optional[Dict[str, int]] = None) -> Work:
    """The Work of one launch of `func`, with dynamic dimensions bound by `bindings`."""
    bindings = dict(bindings or {})
    flops = _body_flops(func.body, bindings)
    gemm_dtype = _gemm_dtype(func)
    nbytes: Optional[int] = 0
    for param in func.params:
        size = 1
        for dim in param.shape:
            value = _value(dim, bindings)
            if value is None:
                nbytes = None
                break
            size *= value
        if nbytes is None:
            break
        nbytes += size // 2 if is_int4(param.dtype) else size * numpy_dtype(param.dtype).itemsize  # int4: packed
    dtype = gemm_dtype or (func.params[0].dtype if func.params else "float32")
    return Work(flops if gemm_dtype else None, nbytes, dtype)
