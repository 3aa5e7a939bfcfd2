"""Hand-built Tile IR for the pass tests (no frontend needed), with real spans and source text.

Not a test module itself; the pass tests load it with `load_support()`.
"""

from __future__ import annotations

from tilecore.ir import nodes as N

FILE = "kernel.py"

# A source file whose lines the spans below point into, so diagnostics render a caret.
SOURCE_LINES = [
    "import tilecore.language as T",  # 1
    "",  # 2
    "@T.prim_func",  # 3
    "def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):",  # 4
    "    with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):",  # 5
    "        A_s = T.alloc_shared((bm, bk), dtype)",  # 6
    "        B_s = T.alloc_shared((bk, bn), dtype)",  # 7
    "        C_f = T.alloc_fragment((bm, bn), accum)",  # 8
    "        T.clear(C_f)",  # 9
    "        for k in T.Pipelined(T.ceildiv(K, bk), num_stages=3):",  # 10
    "            T.copy(A[by * bm, k * bk], A_s)",  # 11
    "            T.copy(B[k * bk, bx * bn], B_s)",  # 12
    "            T.gemm(A_s, B_s, C_f)",  # 13
    "        T.copy(C_f, C[by * bm, bx * bn])",  # 14
]
SOURCE = "\n".join(SOURCE_LINES) + "\n"


def span(line, col=None, width=None):
    text = SOURCE_LINES[line - 1] if 0 < line <= len(SOURCE_LINES) else ""
    if col is None:
        col = len(text) - len(text.lstrip())
    end = col + (width if width is not None else max(1, len(text.rstrip()) - col))
    return N.Span(FILE, line, col, line, end)


def c(v, dtype="int32"):
    return N.Const(v, dtype)


def v(name, dtype="int32"):
    return N.Var(name, dtype)


def add(a, b):
    return N.BinOp("+", a, b, a.dtype)


def mul(a, b):
    return N.BinOp("*", a, b, a.dtype)


def region(buf, starts=None, extents=None, sp=N.NO_SPAN):
    starts = tuple(starts) if starts is not None else tuple(c(0) for _ in buf.shape)
    extents = tuple(extents) if extents is not None else tuple(buf.shape)
    starts = tuple(s if isinstance(s, N.Expr) else c(s) for s in starts)
    return N.Region(buf, starts, extents, span=sp)


def gemm_func(
    M=256,
    N_=256,
    K=128,
    bm=64,
    bn=64,
    bk=32,
    dtype="float16",
    accum="float32",
    dynamic_m=False,
    b_dtype=None,
    c_dtype=None,
    gemm_kwargs=None,
    shared_dtype=None,
):
    """The DESIGN.md GEMM, built by hand with spans into SOURCE."""
    m_dim = N.Var("M", "int32", span=span(4, 23, 1)) if dynamic_m else M
    A = N.Buffer("A", (m_dim, K), dtype, "global", span=span(4, 9, 27))
    B = N.Buffer("B", (K, N_), b_dtype or dtype, "global", span=span(4, 38, 27))
    C = N.Buffer("C", (m_dim, N_), c_dtype or dtype, "global", span=span(4, 67, 27))
    bx, by, k = v("bx"), v("by"), v("k")
    A_s = N.Buffer("A_s", (bm, bk), shared_dtype or dtype, "shared", span=span(6))
    B_s = N.Buffer("B_s", (bk, bn), b_dtype or shared_dtype or dtype, "shared", span=span(7))
    C_f = N.Buffer("C_f", (bm, bn), accum, "fragment", span=span(8))
    m_expr = m_dim if dynamic_m else c(M)
    grid = (c(-(-N_ // bn)), N.BinOp("//", add(m_expr, c(bm - 1)), c(bm), "int32") if dynamic_m else c(-(-M // bm)))
    body = (
        N.Alloc(A_s, span=span(6)),
        N.Alloc(B_s, span=span(7)),
        N.Alloc(C_f, span=span(8)),
        N.Fill(region(C_f), c(0.0 if accum.startswith(("float", "bfloat")) else 0, accum), span=span(9)),
        N.For(
            k,
            c(0),
            c(-(-K // bk)),
            "pipelined",
            (
                N.Copy(
                    region(A, (mul(by, c(bm)), mul(k, c(bk))), (bm, bk), sp=span(11, 19, 20)),
                    region(A_s),
                    span=span(11),
                ),
                N.Copy(
                    region(B, (mul(k, c(bk)), mul(bx, c(bn))), (bk, bn), sp=span(12, 19, 20)),
                    region(B_s),
                    span=span(12),
                ),
                N.Gemm(
                    region(A_s, sp=span(13, 19, 3)),
                    region(B_s, sp=span(13, 24, 3)),
                    region(C_f, sp=span(13, 29, 3)),
                    span=span(13),
                    **(gemm_kwargs or {}),
                ),
            ),
            num_stages=3,
            span=span(10),
        ),
        N.Copy(region(C_f), region(C, (mul(by, c(bm)), mul(bx, c(bn))), (bm, bn), sp=span(14, 22, 22)), span=span(14)),
    )
    kernel = N.Kernel(grid, (bx, by), (128,), body, span=span(5))
    return N.PrimFunc("main", (A, B, C), (kernel,), dyn_vars=(m_dim,) if dynamic_m else (), source=SOURCE, span=span(4))


def kernel_func(params, body, grid=(1,), threads=(128,), dyn_vars=(), block_names=("bx", "by", "bz")):
    """Wrap `body` in a T.Kernel over `grid` (ints or Exprs)."""
    grid = tuple(g if isinstance(g, N.Expr) else c(g) for g in grid)
    block_vars = tuple(v(block_names[i]) for i in range(len(grid)))
    kernel = N.Kernel(grid, block_vars, tuple(threads), tuple(body), span=span(5))
    return N.PrimFunc("main", tuple(params), (kernel,), dyn_vars=tuple(dyn_vars), source=SOURCE, span=span(4))


def make_backend(
    name="testhw",
    features=None,
    dtypes=None,
    gemm_dtypes=frozenset(),
    max_shared=None,
    max_fragment=None,
    max_threads=None,
):
    from tilecore.ir.types import DTYPES
    from tilecore.language.features import ALL_FEATURES
    from tilecore.plugin.backend import Backend, Capabilities, ToolchainStatus

    caps = Capabilities(
        features=frozenset(ALL_FEATURES if features is None else features),
        dtypes=frozenset(DTYPES if dtypes is None else dtypes),
        gemm_dtypes=gemm_dtypes,
        max_shared_memory=max_shared,
        max_fragment_memory=max_fragment,
        max_threads=max_threads,
    )
    return Backend(
        name=name,
        targets=(name,),
        ir_versions=("1.0",),
        capabilities=caps,
        toolchain_status=lambda: ToolchainStatus(True, "ok"),
    )
