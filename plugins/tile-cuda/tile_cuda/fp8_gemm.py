"""fp8 `T.gemm` on the tensor cores: a Tile IR rewrite before the SIMT lowering.

The tensor-core paths (`gemm_rules.py`: wgmma, mma.sync) take float16 operands. Every
float8_e4m3fn / float8_e5m2 value is exact in float16, and products of float16 values are exact
in the float32 accumulator, so an fp8 gemm whose operands are shared tiles becomes

    T.copy(A_s, A_s_f16); T.copy(B_s, B_s_f16); T.gemm(A_s_f16, B_s_f16, C)

with float16 shared tiles of the operand regions' shapes (one per fp8 tile, converted at every
gemm that reads it): the same result as the dot product over the fp8 values, on the tensor cores.
Gemms with an operand in a fragment, or another accumulator than float32, are left to the
portable dot product over decoded fp8 operands. Pure Python (no TVM).
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List

from tilecore.ir import nodes as N
from tilecore.ir.types import is_fp8
from tilecore.ir.visitor import Transformer, walk_stmts


def _widens(g: N.Gemm) -> bool:
    """Whether gemm `g` is one this rewrite moves onto float16 operands."""
    a, b = g.a.buffer, g.b.buffer
    return (
        is_fp8(a.dtype)
        and a.dtype == b.dtype
        and a.scope == b.scope == "shared"
        and g.c.buffer.dtype == "float32"
        and all(isinstance(e, int) for e in g.a.extents + g.b.extents)
    )


class _Widen(Transformer):
    """Rewrites each qualifying Gemm (see the module docstring); the new tiles' Allocs go first in
    the kernel's body."""

    def __init__(self, func: N.PrimFunc):
        self.func = func
        self.wide: Dict[str, N.Buffer] = {}  # fp8 tile name -> its float16 tile
        self.allocs: List[N.Alloc] = []

    def _widened(self, r: N.Region) -> N.Region:
        name = f"{r.buffer.name}_f16"
        buf = self.wide.get(r.buffer.name)
        if buf is None or buf.shape != tuple(r.extents):
            taken = {b.name for b in self.wide.values()}
            while name in taken:
                name += "_"
            buf = N.Buffer(name, tuple(r.extents), "float16", "shared", r.buffer.span)
            self.wide[r.buffer.name] = buf
            self.allocs.append(N.Alloc(buf, r.span))
        return N.Region(buf, tuple(N.Const(0, "int32") for _ in r.extents), tuple(r.extents), r.span)

    def visit_Gemm(self, g: N.Gemm):
        if not _widens(g):
            return g
        a, b = self._widened(g.a), self._widened(g.b)
        return (
            N.Copy(g.a, a, predicated=False, span=g.span),
            N.Copy(g.b, b, predicated=False, span=g.span),
            dataclasses.replace(g, a=a, b=b),
        )

    def visit_Kernel(self, k: N.Kernel):
        if not self.allocs:
            return k
        return dataclasses.replace(k, body=tuple(self.allocs) + tuple(k.body))


def widen_fp8_gemm_operands(func: N.PrimFunc) -> N.PrimFunc:
    """`func` with its fp8 gemms over shared tiles on float16 copies of their operands (module doc);
    `func` itself when it has none."""
    if not any(isinstance(s, N.Gemm) and _widens(s) for s in walk_stmts(func.body)):
        return func
    return _Widen(func).visit(func)
