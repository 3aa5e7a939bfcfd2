"""Hand-built Tile IR kernels for the tests and benchmarks (independent of the DSL frontend), and
`user_gemm`, the GEMM as a user writes it in the DSL."""

from __future__ import annotations

from tilecore.ir import nodes as N


def c(v, dt="int32"):
    return N.Const(v, dt)


def b(op, x, y, dt="int32"):
    return N.BinOp(op, x, y, dt)


def region(buf, starts, extents):
    return N.Region(buf, tuple(starts), tuple(extents))


def full(buf):
    return region(buf, [c(0)] * len(buf.shape), buf.shape)


def gemm_kernel(
    M,
    Nn,
    K,
    bm=128,
    bn=128,
    bk=32,
    stages=3,
    threads=128,
    dtype="float16",
    accum="float32",
    out_dtype=None,
    ta=False,
    tb=False,
    predicated=False,
    name="gemm",
    swizzle_panel=0,
):
    out_dtype = out_dtype or dtype
    A = N.Buffer("A", (K, M) if ta else (M, K), dtype)
    Bb = N.Buffer("B", (Nn, K) if tb else (K, Nn), dtype)
    C = N.Buffer("C", (M, Nn), out_dtype)
    bx, by, k = N.Var("bx"), N.Var("by"), N.Var("k")
    As = N.Buffer("A_s", (bk, bm) if ta else (bm, bk), dtype, "shared")
    Bs = N.Buffer("B_s", (bn, bk) if tb else (bk, bn), dtype, "shared")
    Cf = N.Buffer("C_f", (bm, bn), accum, "fragment")
    row0, col0, k0 = b("*", by, c(bm)), b("*", bx, c(bn)), b("*", k, c(bk))
    a_start = [k0, row0] if ta else [row0, k0]
    b_start = [col0, k0] if tb else [k0, col0]
    loop = N.For(
        k,
        c(0),
        c(-(-K // bk)),
        "pipelined",
        (
            N.Copy(region(A, a_start, As.shape), full(As), predicated),
            N.Copy(region(Bb, b_start, Bs.shape), full(Bs), predicated),
            N.Gemm(full(As), full(Bs), full(Cf), ta, tb),
        ),
        num_stages=stages,
    )
    hint = (N.Hint("use_swizzle", (), (("panel_size", swizzle_panel), ("enable", True))),) if swizzle_panel else ()
    body = hint + (
        N.Alloc(As),
        N.Alloc(Bs),
        N.Alloc(Cf),
        N.Fill(full(Cf), c(0, accum)),
        loop,
        N.Copy(full(Cf), region(C, [row0, col0], (bm, bn)), predicated),
    )
    kern = N.Kernel((c(-(-Nn // bn)), c(-(-M // bm))), (bx, by), (threads,), body)
    return N.PrimFunc(name, (A, Bb, C), (kern,))


def softmax_kernel(M, Nn, threads=256, dtype="float16", rows=1, name="softmax", frag_dtype="float32"):
    """Row softmax: each block loads `rows` rows, max-reduces, exponentiates, sum-reduces, scales."""
    X = N.Buffer("X", (M, Nn), dtype)
    Y = N.Buffer("Y", (M, Nn), dtype)
    bx = N.Var("bx")
    xs = N.Buffer("x_f", (rows, Nn), frag_dtype, "fragment")
    mx = N.Buffer("m_f", (rows,), "float32", "fragment")
    sm = N.Buffer("s_f", (rows,), "float32", "fragment")
    i, j = N.Var("i"), N.Var("j")
    r0 = b("*", bx, c(rows))
    ld = lambda buf, *ix: N.Load(buf, tuple(ix), buf.dtype)
    body = (
        N.Alloc(xs),
        N.Alloc(mx),
        N.Alloc(sm),
        N.Copy(region(X, [r0, c(0)], (rows, Nn)), full(xs), False),
        N.Reduce("max", xs, mx, 1, True),
        N.Parallel(
            (i, j),
            (rows, Nn),
            (
                N.Store(
                    xs,
                    (i, j),
                    N.Call("exp", (b("-", N.Cast(ld(xs, i, j), "float32"), ld(mx, i), "float32"),), "float32"),
                ),
            ),
        ),
        N.Reduce("sum", xs, sm, 1, True),
        N.Parallel(
            (i, j), (rows, Nn), (N.Store(xs, (i, j), b("/", N.Cast(ld(xs, i, j), "float32"), ld(sm, i), "float32")),)
        ),
        N.Copy(full(xs), region(Y, [r0, c(0)], (rows, Nn)), False),
    )
    kern = N.Kernel((c(M // rows),), (bx,), (threads,), body)
    return N.PrimFunc(name, (X, Y), (kern,))


def elementwise_kernel(n, block=1024, threads=256, dtype="float32", name="axpb", dynamic=False):
    """y = 2 * x + 1 over 1-D tiles with a partial last tile (predicated copies)."""
    nv = N.Var("n") if dynamic else n
    X = N.Buffer("X", (nv,), dtype)
    Y = N.Buffer("Y", (nv,), dtype)
    bx, i = N.Var("bx"), N.Var("i")
    t = N.Buffer("t_s", (block,), dtype, "shared")
    grid = b("//", b("+", nv, c(block - 1)), c(block)) if dynamic else c(-(-n // block))
    body = (
        N.Alloc(t),
        N.Copy(region(X, [b("*", bx, c(block))], (block,)), full(t), True),
        N.Parallel(
            (i,),
            (block,),
            (N.Store(t, (i,), b("+", b("*", N.Load(t, (i,), dtype), c(2.0, dtype), dtype), c(1.0, dtype), dtype)),),
        ),
        N.Copy(full(t), region(Y, [b("*", bx, c(block))], (block,)), True),
    )
    kern = N.Kernel((grid,), (bx,), (threads,), body)
    return N.PrimFunc(name, (X, Y), (kern,), dyn_vars=(nv,) if dynamic else ())


def user_gemm(M, Nn, K, block_M, block_N, block_K, stages, threads, dtype="float16"):
    """The GEMM as a user writes it in TileLang style: examples/gemm.py's matmul (threads chosen)."""
    from examples_util import example

    return example("gemm").matmul.prim_func(
        M, Nn, K, block_M, block_N, block_K, dtype=dtype, accum="float32", num_stages=stages, threads=threads
    )


def row_sum_counts(m=64, n=64, k=32, threads=128):
    """Per row of A @ B (a gemm accumulator's row sums: row values replicated over the threads that
    share a row), counted into Out with element atomics nested in an `if` and in a `while` inside
    T.Parallel: 1 if the sum is positive, plus one per halving of the sum down to 1 or less."""
    import tilecore.language as T

    @T.prim_func
    def row_sum_counts(
        A: T.Tensor((m, k), "float16"),  # type: ignore[valid-type]
        B: T.Tensor((k, n), "float16"),  # type: ignore[valid-type]
        Out: T.Tensor((m,), "int32"),  # type: ignore[valid-type]
    ):
        with T.Kernel(1, threads=threads) as bx:
            a = T.alloc_shared((m, k), "float16")
            b = T.alloc_shared((k, n), "float16")
            acc = T.alloc_fragment((m, n), "float32")
            rows = T.alloc_fragment((m,), "float32")
            T.copy(A, a)
            T.copy(B, b)
            T.gemm(a, b, acc, clear_accum=True)
            T.reduce_sum(acc, rows, dim=1)
            for i in T.Parallel(m):
                if rows[i] > 0:
                    T.atomic_add(Out[i], 1)
                while rows[i] > 1:
                    rows[i] = rows[i] * 0.5
                    T.atomic_add(Out[i], 1)

    return row_sum_counts
