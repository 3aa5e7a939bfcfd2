"""Which T.Kernel grids compute one whole GEMM: `examples/gemm.py`'s matmul, as TileLang users write it.

Every block of such a grid computes one bm x bn tile of C: it clears a fragment, for each K step
copies an A and a B tile and T.gemm's them into the fragment, and copies the fragment out. The
blocks together compute exactly C = A @ B, so how the work is tiled is not observable in the
result: every element of C sums its products in ascending k from 0 in the accumulator dtype
whatever bm, bn and bk are. Backends use `match` to lower such a kernel with their own blocking
(tile-cpu: one cache-blocked GEMM; tile-cuda: the tiles its tensor cores run fastest).

Partial edge tiles (M, N or K not multiples of the tiles) are part of the match: the block-by-block
copies pad them with zeros, which add only 0 * 0 products to an in-range sum (the sums start at
+0, so they are never -0), and out-of-range sums are never stored. The match is strict otherwise;
anything else (transposes, an epilogue, other dtypes, dynamic shapes) is not one whole GEMM.

Pure Python: importing this does not import TVM.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Tuple

from tilecore.ir import nodes as N
from tilecore.ir.types import accum_dtype
from tilecore.lowering.simt_plan import whole_region

# C dtypes narrower than a float32 accumulator: the sums are rounded to them once, at the end
NARROW_C = ("float16", "bfloat16")
# hints that only order the blocks (which the result does not depend on): allowed in the body
ORDER_HINTS = ("use_swizzle",)


@dataclass(frozen=True)
class WholeGemm:
    """C (M x N) = A (M x K) @ B (K x N), accumulated in `acc` (C's dtype, or wider: NARROW_C),
    as the kernel tiles it: blocks of bm x bn, K steps of bk; `row` / `col` name the block
    index over C's rows / columns."""

    a: N.Buffer
    b: N.Buffer
    c: N.Buffer
    M: int
    N: int
    K: int
    acc: str
    bk: int = 0  # the K of one T.gemm (the user's K tile)
    bm: int = 0
    bn: int = 0
    row: str = ""
    col: str = ""


def affine(e: N.Expr) -> Optional[Dict[str, int]]:
    """{var name: coefficient, "": constant} of an integer expression built from + and *, else None."""
    if isinstance(e, N.Const) and isinstance(e.value, int) and not isinstance(e.value, bool):
        return {"": int(e.value)}
    if isinstance(e, N.Var):
        return {e.name: 1}
    if isinstance(e, N.BinOp) and e.op in ("+", "*"):
        a, b = affine(e.a), affine(e.b)
        if a is None or b is None:
            return None
        if e.op == "+":
            return {k: a.get(k, 0) + b.get(k, 0) for k in set(a) | set(b)}
        for const, other in ((a, b), (b, a)):
            if set(const) == {""}:
                return {k: const[""] * v for k, v in other.items()}
    return None


def _is(e: N.Expr, var: str, coef: int) -> bool:
    """Whether `e` is exactly var * coef."""
    form = affine(e)
    return form is not None and {k: v for k, v in form.items() if v} == {var: coef}


def loop_parts(loop: N.Stmt) -> Optional[Tuple[N.Copy, N.Copy, N.Gemm]]:
    """(copy of A, copy of B, gemm) of a K loop `for k: copy A tile; copy B tile; gemm`, else None."""
    if not isinstance(loop, N.For) or affine(loop.begin) != {"": 0} or affine(loop.extent) is None:
        return None
    if len(loop.body) != 3 or not isinstance(loop.body[2], N.Gemm):
        return None
    gemm = loop.body[2]
    copies = {st.dst.buffer.name: st for st in loop.body[:2] if isinstance(st, N.Copy)}
    ca, cb = copies.get(gemm.a.buffer.name), copies.get(gemm.b.buffer.name)
    if ca is None or cb is None or ca is cb:
        return None
    return ca, cb, gemm


def match(kernel: N.Kernel) -> Optional[WholeGemm]:
    """The whole GEMM a kernel computes, when its grid is exactly `examples/gemm.py`'s matmul.

    Body: allocations of the A/B stage tiles and the accumulator, T.clear of the
    accumulator, one K loop from 0 of {copy A tile, copy B tile, T.gemm}, the accumulator
    copied to C (block-order hints such as T.use_swizzle may stand anywhere at the top level);
    tile origins (by*bm, k*bk), (k*bk, bx*bn), (by*bm, bx*bn) over a grid of ceil(M/bm) x
    ceil(N/bn) blocks and ceil(K/bk) K steps.
    """
    if len(kernel.block_vars) != 2 or not all(isinstance(g, N.Const) for g in kernel.grid):
        return None
    body = [st for st in kernel.body if not (isinstance(st, N.Hint) and st.kind in ORDER_HINTS)]
    allocs = [st for st in body if isinstance(st, N.Alloc)]
    rest = [st for st in body if not isinstance(st, N.Alloc)]
    if len(allocs) != 3 or len(rest) != 3:
        return None
    clear, loop, out = rest
    parts = loop_parts(loop)
    if parts is None or not isinstance(clear, N.Fill) or not isinstance(out, N.Copy) or not isinstance(loop, N.For):
        return None
    ca, cb, gemm = parts
    acc_buf = gemm.c.buffer
    if (
        gemm.transpose_a
        or gemm.transpose_b
        or gemm.clear_accum
        or {a.buffer.name for a in allocs} != {ca.dst.buffer.name, cb.dst.buffer.name, acc_buf.name}
    ):
        return None
    if not (
        all(whole_region(r, 2) for r in (gemm.a, gemm.b, gemm.c, ca.dst, cb.dst, clear.dst, out.src))
        and clear.dst.buffer.name == acc_buf.name
        and out.src.buffer.name == acc_buf.name
        and isinstance(clear.value, N.Const)
        and clear.value.value == 0
    ):
        return None
    A, B, C = ca.src.buffer, cb.src.buffer, out.dst.buffer
    shapes = [sh for sh in (buf.static_shape() for buf in (A, B, C)) if sh is not None and len(sh) == 2]
    acc = accum_dtype(acc_buf.dtype)
    if (
        len(shapes) != 3
        or len({A.name, B.name, C.name}) != 3
        or A.dtype != ca.dst.buffer.dtype
        or B.dtype != cb.dst.buffer.dtype
        or acc_buf.dtype != acc
        or not (C.dtype == acc or (acc == "float32" and C.dtype in NARROW_C))
    ):
        return None
    (M, K), (Kb, Nn), (Mc, Nc) = shapes
    (bm, bk), (bk2, bn) = ca.dst.buffer.static_dims(), cb.dst.buffer.static_dims()
    if (Kb, Mc, Nc) != (K, M, Nn) or bk2 != bk or acc_buf.static_shape() != (bm, bn) or min(M, Nn, K) <= 0:
        return None
    if (tuple(ca.src.extents), tuple(cb.src.extents), tuple(out.dst.extents)) != ((bm, bk), (bk, bn), (bm, bn)):
        return None
    grid = {v.name: int(g.value) for v, g in zip(kernel.block_vars, kernel.grid) if isinstance(g, N.Const)}
    k = loop.var.name
    for row, col in (tuple(grid), tuple(grid)[::-1]):
        if (
            _is(ca.src.starts[0], row, bm)
            and _is(ca.src.starts[1], k, bk)
            and _is(cb.src.starts[0], k, bk)
            and _is(cb.src.starts[1], col, bn)
            and _is(out.dst.starts[0], row, bm)
            and _is(out.dst.starts[1], col, bn)
            and grid[row] == -(-M // bm)
            and grid[col] == -(-Nn // bn)
            and affine(loop.extent) == {"": -(-K // bk)}
        ):
            return WholeGemm(A, B, C, M, Nn, K, acc, bk, bm, bn, row, col)
    return None
