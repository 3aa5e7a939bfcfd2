"""Helpers that build Tile IR by hand for the interpreter tests (no frontend needed).

Kept in a test_ module so pytest's import path finds it; it defines no tests.
"""

from __future__ import annotations

from tilecore.ir import nodes as N
from tilecore.ir.types import promote

SOURCE = "\n".join(f"line {k} of the hand-built kernel" for k in range(1, 41))
FILE = "hand_built.py"


def span(line: int, col: int = 4, end: int = 0) -> N.Span:
    return N.Span(FILE, line, col, line, end or col + 6)


def const(value, dtype=None):
    if dtype is None:
        dtype = "bool" if isinstance(value, bool) else "int32" if isinstance(value, int) else "float32"
    return N.Const(value, dtype)


def var(name, dtype="int32"):
    return N.Var(name, dtype)


def _e(x, other_dtype="int32"):
    if isinstance(x, N.Expr):
        return x
    if isinstance(x, bool):
        return const(x, "bool")
    return const(x, other_dtype)


def binop(op, a, b, dtype=None):
    a_dt = a.dtype if isinstance(a, N.Expr) else None
    b_dt = b.dtype if isinstance(b, N.Expr) else None
    a = _e(a, b_dt or "int32")
    b = _e(b, a_dt or "int32")
    if dtype is None:
        dtype = "bool" if op in N.COMPARE_OPS + N.LOGIC_OPS else promote(a.dtype, b.dtype)
    return N.BinOp(op, a, b, dtype)


def add(a, b):
    return binop("+", a, b)


def mul(a, b):
    return binop("*", a, b)


def sub(a, b):
    return binop("-", a, b)


def lt(a, b):
    return binop("<", a, b)


def load(buffer, *indices, line=0):
    return N.Load(buffer, tuple(_e(i) for i in indices), buffer.dtype, span=span(line) if line else N.NO_SPAN)


def store(buffer, indices, value, line=0):
    value = _e(value, buffer.dtype)
    return N.Store(buffer, tuple(_e(i) for i in indices), value, span=span(line) if line else N.NO_SPAN)


def buf(name, shape, dtype="float32", scope="global"):
    return N.Buffer(name, tuple(shape), dtype, scope)


def region(buffer, starts, extents=None):
    if extents is None:
        extents = tuple(buffer.shape)
    return N.Region(buffer, tuple(_e(s) for s in starts), tuple(extents))


def whole(buffer):
    return region(buffer, [0] * buffer.ndim)


def kernel(grid, names, body, threads=(128,)):
    return N.Kernel(tuple(_e(g) for g in grid), tuple(var(n) for n in names), tuple(threads), tuple(body))


def func(params, body, name="main", dyn=()):
    return N.PrimFunc(name, tuple(params), tuple(body), tuple(dyn), source=SOURCE, span=span(1))


def parallel(names, extents, body):
    return N.Parallel(tuple(var(n) for n in names), tuple(extents), tuple(body))


def serial(name, extent, body, begin=0, kind="serial"):
    return N.For(var(name), _e(begin), _e(extent), kind, tuple(body))


def ceildiv(a, b):
    return (a + b - 1) // b


def gemm_ir(M, N_, K, bm, bn, bk, dtype="float32", accum="float32", dyn=False):
    """The DESIGN.md GEMM, built by hand."""
    if dyn:
        m = var("M")
        A = buf("A", (m, K), dtype)
        C = buf("C", (m, N_), dtype)
        grid_m = binop("//", add(m, bm - 1), const(bm))
    else:
        A = buf("A", (M, K), dtype)
        C = buf("C", (M, N_), dtype)
        grid_m = ceildiv(M, bm)
    B = buf("B", (K, N_), dtype)
    A_s = buf("A_s", (bm, bk), dtype, "shared")
    B_s = buf("B_s", (bk, bn), dtype, "shared")
    C_f = buf("C_f", (bm, bn), accum, "fragment")
    bx, by, k = var("bx"), var("by"), var("k")
    body = [
        N.Alloc(A_s),
        N.Alloc(B_s),
        N.Alloc(C_f),
        N.Fill(whole(C_f), const(0.0, accum)),
        serial(
            "k",
            ceildiv(K, bk),
            [
                N.Copy(region(A, [mul(by, bm), mul(k, bk)], (bm, bk)), whole(A_s)),
                N.Copy(region(B, [mul(k, bk), mul(bx, bn)], (bk, bn)), whole(B_s)),
                N.Gemm(whole(A_s), whole(B_s), whole(C_f)),
            ],
            kind="pipelined",
        ),
        N.Copy(whole(C_f), region(C, [mul(by, bm), mul(bx, bn)], (bm, bn))),
    ]
    return func([A, B, C], [kernel([ceildiv(N_, bn), grid_m], ["bx", "by"], body)], dyn=(var("M"),) if dyn else ())
