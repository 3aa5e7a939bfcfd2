"""Kernels on the NPU (compiler + simulator) against the reference interpreter."""

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tile_npu
import tilecore
import tilecore.language as T
from tilecore.testing import assert_matches_reference


def rand(rng, shape, dtype, lo=-2.0, hi=2.0):
    if dtype.startswith("int") or dtype == "uint8":
        return rng.integers(-8 if dtype != "uint8" else 0, 8, size=shape).astype(dtype)
    x = rng.uniform(lo, hi, size=shape)
    import ml_dtypes

    return x.astype(ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype)


def gemm_func(M, N, K, bM=64, bN=64, bK=32, stages=2, dtype="float16", accum="float32", ta=False, tb=False):
    a_shape = (K, M) if ta else (M, K)
    b_shape = (N, K) if tb else (K, N)
    as_shape = (bK, bM) if ta else (bM, bK)
    bs_shape = (bN, bK) if tb else (bK, bN)

    @T.prim_func
    def gemm(A: T.Tensor(a_shape, dtype), B: T.Tensor(b_shape, dtype), C: T.Tensor((M, N), accum)):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=128) as (bx, by):
            A_s = T.alloc_shared(as_shape, dtype)
            B_s = T.alloc_shared(bs_shape, dtype)
            C_f = T.alloc_fragment((bM, bN), accum)
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, bK), num_stages=stages):
                if ta:
                    T.copy(A[k * bK, by * bM], A_s)
                else:
                    T.copy(A[by * bM, k * bK], A_s)
                if tb:
                    T.copy(B[bx * bN, k * bK], B_s)
                else:
                    T.copy(B[k * bK, bx * bN], B_s)
                T.gemm(A_s, B_s, C_f, transpose_A=ta, transpose_B=tb)
            T.copy(C_f, C[by * bM, bx * bN])

    return gemm


@pytest.mark.parametrize(
    "dtype,accum", [("float16", "float32"), ("bfloat16", "float32"), ("int8", "int32"), ("float32", "float32")]
)
@pytest.mark.parametrize("stages", [1, 2, 3])
def test_gemm_matches_reference(dtype, accum, stages):
    rng = np.random.default_rng(stages)
    M, N, K = 96, 80, 112  # partial tiles in every dimension
    f = gemm_func(M, N, K, stages=stages, dtype=dtype, accum=accum)
    assert_matches_reference(f, [rand(rng, (M, K), dtype), rand(rng, (K, N), dtype)], backend="npu", out_idx=[-1])


@pytest.mark.parametrize("ta,tb", [(True, False), (False, True), (True, True)])
def test_gemm_transposes(ta, tb):
    rng = np.random.default_rng(7)
    M, N, K = 64, 128, 96
    f = gemm_func(M, N, K, bM=64, bN=128, bK=32, ta=ta, tb=tb)
    a = rand(rng, (K, M) if ta else (M, K), "float16")
    b = rand(rng, (N, K) if tb else (K, N), "float16")
    assert_matches_reference(f, [a, b], backend="npu", out_idx=[-1])


def test_big_gemm_tiles_into_many_mma_instructions():
    # one 128x128x320 block gemm: 2x2 output tiles of 64x64, K split 256 + 64
    rng = np.random.default_rng(3)
    f = gemm_func(128, 128, 320, bM=128, bN=128, bK=320, stages=1)
    k = tilecore.compile(f, target="npu", out_idx=[-1])
    assert len(re.findall(r"^\s+\d+: mma d", k.source, re.M)) == 2 * 2 * 2
    assert_matches_reference(
        f, [rand(rng, (128, 320), "float16"), rand(rng, (320, 128), "float16")], backend="npu", out_idx=[-1]
    )


def elementwise_func(M, N, block=32, dtype="float32"):
    @T.prim_func
    def ew(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype), Z: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block)) as (bx, by):
            xs = T.alloc_shared((block, block), dtype)
            yf = T.alloc_fragment((block, block), dtype)
            T.copy(X[by * block, bx * block], xs)
            T.copy(Y[by * block, bx * block], yf)
            for i, j in T.Parallel(block, block):
                if xs[i, j] > 0:
                    yf[i, j] = T.exp(xs[i, j] * 0.5) + T.if_then_else(j % 2 == 0, yf[i, j], -yf[i, j])
                else:
                    yf[i, j] = T.tanh(xs[i, j]) * T.max(yf[i, j], 0.25) + xs[j, i]
            T.copy(yf, Z[by * block, bx * block])

    return ew


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_elementwise_masks_selects_math_and_partial_tiles(dtype):
    rng = np.random.default_rng(1)
    M, N = 70, 45
    f = elementwise_func(M, N, dtype=dtype)
    assert_matches_reference(f, [rand(rng, (M, N), dtype), rand(rng, (M, N), dtype)], backend="npu", out_idx=[-1])


def test_large_parallel_is_strip_mined():
    rng = np.random.default_rng(2)
    M, N = 128, 96  # 12288 elements per tile: 12 chunks of 1024

    @T.prim_func
    def scale(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((M, N), "float32")
            T.copy(X[0, 0], x)
            for i, j in T.Parallel(M, N):
                x[i, j] = x[i, j] * 2.0 + i - j
            T.copy(x, Y[0, 0])

    assert_matches_reference(scale, [rand(rng, (M, N), "float32")], backend="npu", out_idx=[-1])


@pytest.mark.parametrize("kind", ["sum", "max", "min", "abssum", "absmax"])
@pytest.mark.parametrize("dim", [0, 1])
def test_reductions(kind, dim):
    rng = np.random.default_rng(4)
    M, N = 48, 40
    out_n = N if dim == 0 else M
    red = getattr(T, f"reduce_{kind}")

    @T.prim_func
    def r(X: T.Tensor((M, N), "float32"), Y: T.Tensor((out_n,), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((M, N), "float32")
            y = T.alloc_fragment((out_n,), "float32")
            T.copy(X[0, 0], x)
            T.fill(y, 1.5)
            red(x, y, dim=dim, clear=False)
            red(x, y, dim=dim, clear=False)
            T.copy(y, Y[0])

    assert_matches_reference(r, [rand(rng, (M, N), "float32")], backend="npu", out_idx=[-1])


@pytest.mark.parametrize("reverse", [False, True])
def test_cumsum(reverse):
    rng = np.random.default_rng(5)

    @T.prim_func
    def cs(X: T.Tensor((16, 50), "float32"), Y: T.Tensor((16, 50), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_shared((16, 50), "float32")
            T.copy(X[0, 0], x)
            T.cumsum(x, dim=1, reverse=reverse)
            T.copy(x, Y[0, 0])

    assert_matches_reference(cs, [rand(rng, (16, 50), "float32")], backend="npu", out_idx=[-1])


def test_atomics_tile_and_element_forms():
    rng = np.random.default_rng(6)

    @T.prim_func
    def hist(
        X: T.Tensor((64, 32), "float32"),
        Idx: T.Tensor((64,), "int32"),
        S: T.Tensor((32,), "float32"),
        H: T.Tensor((8,), "int32"),
        Mx: T.Tensor((8,), "float32"),
    ):
        with T.Kernel(4) as bx:
            x = T.alloc_fragment((16, 32), "float32")
            s = T.alloc_fragment((32,), "float32")
            T.copy(X[bx * 16, 0], x)
            T.reduce_sum(x, s, dim=0)
            T.atomic_add(S[0:32], s)
            for i in T.Parallel(16):
                T.atomic_add(H[Idx[bx * 16 + i]], 1)
                T.atomic_max(Mx[Idx[bx * 16 + i]], x[i, 0])

    s0 = np.zeros(32, np.float32)
    h0 = np.zeros(8, np.int32)
    m0 = np.full(8, -100.0, np.float32)
    assert_matches_reference(
        hist, [rand(rng, (64, 32), "float32"), rng.integers(0, 8, 64).astype(np.int32), s0, h0, m0], backend="npu"
    )


def test_runtime_control_flow_alloc_var_and_dynamic_shapes():
    rng = np.random.default_rng(8)
    n = T.dynamic("n")

    @T.prim_func
    def f(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32"), Cnt: T.Tensor((1,), "int32")):
        with T.Kernel(T.ceildiv(n, 64)) as bx:
            x = T.alloc_fragment((64,), "float32")
            c = T.alloc_var("int32")
            c = 0
            T.copy(X[bx * 64], x)
            for i in T.serial(64):
                if bx * 64 + i < n:
                    if x[i] > 0:
                        c = c + 1
                    else:
                        x[i] = x[i] * 3.0
            T.copy(x, Y[bx * 64])
            T.atomic_add(Cnt[0], c)

    for size in (100, 64, 7):
        assert_matches_reference(f, [rand(rng, (size,), "float32"), np.zeros(1, np.int32)], backend="npu", out_idx=[1])


def test_while_loops():
    """A counter walk that may stop early, and a loop whose test reads a tile its body rescales."""
    from tilecore.testing import while_loops_arguments, while_loops_kernel

    assert_matches_reference(while_loops_kernel(), while_loops_arguments(), backend="npu")


def test_per_thread_while_loops():
    """`while` loops whose condition differs between lanes: each lane loops until its own test
    fails (160 threads: three vector strips, the last one partial)."""
    from tilecore.testing import per_thread_while_arguments, per_thread_while_kernel

    args = per_thread_while_arguments(threads=160)
    assert_matches_reference(per_thread_while_kernel(threads=160), args, backend="npu")


def per_thread_for_kernel(threads: int):
    """`for` loops whose bounds differ between threads (per-thread code) and between T.Parallel
    lanes: a sum over tx % 4 passes, a loop from a thread-dependent start holding an `if` and a
    store at a per-thread index, a nested loop bounded by the outer one's variable, one under a
    thread-dependent `if`, and one inside T.Parallel bounded by its index."""

    @T.prim_func
    def per_thread_for(
        A: T.Tensor((threads,), "float32"),
        Sum: T.Tensor((threads,), "float32"),
        C: T.Tensor((threads, 8), "float32"),
        Cnt: T.Tensor((threads,), "int32"),
        H: T.Tensor((16,), "float32"),
    ):
        with T.Kernel(1, threads=threads):
            tx = T.get_thread_binding()
            acc = T.alloc_var("float32")
            n = T.alloc_var("int32")
            acc = 0.0
            for i in range(tx % 4):
                acc += A[tx]
            Sum[tx] = acc
            for j in range(tx % 3, tx % 5 + 3):
                if A[(tx + j) % threads] > 0:
                    C[tx, j] = A[(tx + j) % threads]
            n = 0
            for a in range(tx % 3):
                for b in range(a + tx % 2):
                    n += b + 1
            if tx % 2 == 0:
                for k in T.serial(tx % 5):
                    n += 10
            Cnt[tx] = n
            h = T.alloc_fragment((16,), "float32")
            for i in T.Parallel(16):
                h[i] = 0.0
                for j in range(i % 4, i % 7):
                    h[i] = h[i] + A[j]
                H[i] = h[i]

    return per_thread_for


def test_per_thread_for_loops():
    """`for` loops with lane-dependent bounds run as masked loops, each lane its own passes (80
    threads: two vector strips, the second partial); exact against the reference."""
    rng = np.random.default_rng(13)
    threads = 80
    args = [
        rand(rng, (threads,), "float32"),
        np.full(threads, -1, np.float32),
        np.full((threads, 8), -1, np.float32),
        np.full(threads, -1, np.int32),
        np.full(16, -1, np.float32),
    ]
    assert_matches_reference(per_thread_for_kernel(threads), args, backend="npu", rtol=0, atol=0)


def test_gathers_with_non_affine_indices_and_int_math():
    rng = np.random.default_rng(9)

    @T.prim_func
    def g(X: T.Tensor((32, 32), "int32"), Y: T.Tensor((32, 32), "int32")):
        with T.Kernel(1) as bx:
            x = T.alloc_shared((32, 32), "int32")
            y = T.alloc_fragment((32, 32), "int32")
            T.copy(X[0, 0], x)
            for i, j in T.Parallel(32, 32):
                y[i, j] = x[(i * 7) % 32, j // 2] // 3 + x[i, j] % 5 - (x[j, i] << 1) + X[i, 31 - j] // 2
            T.copy(y, Y[0, 0])

    assert_matches_reference(g, [rng.integers(-100, 100, (32, 32)).astype(np.int32)], backend="npu", out_idx=[-1])


def test_cycle_report_shows_pipelining_overlap():
    """num_stages=2 overlaps the DMA of tile k+1 with the matrix work on tile k."""
    rng = np.random.default_rng(0)
    M = N = K = 256
    a, b = rand(rng, (M, K), "float16"), rand(rng, (K, N), "float16")
    cycles = {}
    for stages in (1, 2):
        k = tilecore.compile(gemm_func(M, N, K, bM=64, bN=64, bK=64, stages=stages), target="npu", out_idx=[-1])
        k(a, b)
        rep = tile_npu.report(k)
        cycles[stages] = rep.cycles
        assert rep.utilization["dma"] > 0 and rep.utilization["matrix"] > 0
        assert rep.blocks == 16 and len(rep.per_core_cycles) == rep.cores
    assert cycles[2] < 0.8 * cycles[1], cycles


def test_compile_error_when_scratchpad_overflows_points_at_alloc():
    # shared and fragment each fit the declared limits; together they overflow the one scratchpad
    @T.prim_func
    def big(X: T.Tensor((1024, 1024), "float32"), Y: T.Tensor((1024, 1024), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_shared((256, 512), "float32")
            y = T.alloc_fragment((384, 512), "float32")
            T.copy(X[0, 0], x)
            T.copy(X[0, 0], y)
            for i, j in T.Parallel(256, 512):
                y[i, j] = y[i, j] + x[i, j]
            T.copy(y, Y[0, 0])

    with pytest.raises(tilecore.diagnostics.TileCompileError) as ei:
        tilecore.compile(big, target="npu", out_idx=[-1])
    assert "scratchpad overflow on npu: y needs 786432 bytes" in str(ei.value)
    assert 'y = T.alloc_fragment((384, 512), "float32")' in str(ei.value)


def test_pipeline_stages_count_against_the_scratchpad():
    f = gemm_func(256, 256, 1024, bM=256, bN=256, bK=256, stages=3, dtype="float32", accum="float32")
    with pytest.raises(tilecore.diagnostics.TileCompileError) as ei:
        tilecore.compile(f, target="npu", out_idx=[-1])
    assert "x3 stages for T.Pipelined" in str(ei.value)
    tilecore.compile(
        gemm_func(256, 256, 1024, bM=256, bN=256, bK=128, stages=2, dtype="float32", accum="float32"),
        target="npu",
        out_idx=[-1],
    )


def test_dead_buffer_sharing_bytes_with_a_later_dma_target():
    # A_t is never read, so B_t may get its bytes; the DMA into A_t must still finish first
    @T.prim_func
    def f(A: T.Tensor((1, 1), "float32"), B: T.Tensor((1, 1), "int16"), Out: T.Tensor((1, 1), "float32")):
        with T.Kernel(1, 1) as (bx, by):
            A_t = T.alloc_fragment((1, 1), "float32")
            T.copy(A[by, bx], A_t)
            B_t = T.alloc_fragment((1, 1), "int16")
            T.copy(B[by, bx], B_t)
            for i, j in T.Parallel(1, 1):
                Out[by + i, bx + j] = B_t[i, j]

    assert_matches_reference(
        f, [np.ones((1, 1), np.float32), np.full((1, 1), 3, np.int16)], backend="npu", out_idx=[-1]
    )


def test_cumsum_into_another_buffer_multi_block():
    rng = np.random.default_rng(11)

    @T.prim_func
    def f(A: T.Tensor((8, 4), "float32"), Out: T.Tensor((8, 4), "float32")):
        with T.Kernel(2, 4) as (bx, by):
            a = T.alloc_fragment((2, 2), "float32")
            c = T.alloc_fragment((2, 2), "float32")
            T.copy(A[by * 2, bx * 2], a)
            T.cumsum(a, c, dim=0)
            T.copy(c, Out[by * 2, bx * 2])

    assert_matches_reference(f, [rand(rng, (8, 4), "float32")], backend="npu", out_idx=[-1])


def test_print_scalars_tiles_and_per_element_values(capfd):
    @T.prim_func
    def p(X: T.Tensor((4,), "float32"), Y: T.Tensor((4,), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((4,), "float32")
            T.copy(X[0], x)
            T.print(x, msg="tile")
            T.print(bx + 41, msg="scalar")
            for i in T.Parallel(4):
                if x[i] > 1.5:
                    T.print(x[i] * 2.0, msg="lanes")
            T.copy(x, Y[0])

    x = np.arange(4, dtype=np.float32)
    tilecore.compile(p, target="npu", out_idx=[-1])(x)
    npu_out = capfd.readouterr().out
    tilecore.compile(p, target="reference", out_idx=[-1])(x)
    ref_out = capfd.readouterr().out
    assert npu_out == ref_out
    assert "[block (0,)] lanes: [4. 6.]" in npu_out and "scalar: 41" in npu_out


def test_pipelined_loops_that_must_not_be_prefetched():
    rng = np.random.default_rng(12)

    @T.prim_func
    def f(A: T.Tensor((8, 16), "float32"), Acc: T.Tensor((16,), "float32"), Out: T.Tensor((16,), "float32")):
        with T.Kernel(1) as bx:
            a = T.alloc_fragment((16,), "float32")
            s = T.alloc_fragment((16,), "float32")
            T.clear(s)
            T.clear(a)
            for k in T.Pipelined(8, num_stages=2):
                for i in T.Parallel(16):  # reads `a` before this iteration's copy refills it
                    s[i] = s[i] + a[i]
                T.copy(A[k, 0], a)
            for k in T.Pipelined(4, num_stages=2):
                T.copy(Acc[0], a)  # the loop also writes Acc: no prefetch allowed
                for i in T.Parallel(16):
                    a[i] = a[i] * 2.0
                T.copy(a, Acc[0])
            T.copy(s, Out[0])

    k = tilecore.compile(f, target="npu", out_idx=[-1])
    from tile_npu.isa import Program

    segments = [seg.name for seg in Program.from_bytes(k.artifact.blobs["program"]).segments]
    assert not [n for n in segments if "@stage" in n], segments  # neither loop was multi-buffered
    assert_matches_reference(
        f, [rand(rng, (8, 16), "float32"), rand(rng, (16,), "float32")], backend="npu", out_idx=[-1]
    )


def test_bank_conflicts_make_column_access_slower():
    """Reading a tile column-wise hits one bank per row pair; row-wise spreads over all banks."""

    def kernel(transposed):
        @T.prim_func
        def f(X: T.Tensor((64, 64), "float32"), Y: T.Tensor((64, 64), "float32")):
            with T.Kernel(1) as bx:
                x = T.alloc_shared((64, 64), "float32")
                y = T.alloc_fragment((64, 64), "float32")
                T.copy(X[0, 0], x)
                for i, j in T.Parallel(64, 64):
                    if transposed:
                        y[i, j] = x[j, i]
                    else:
                        y[i, j] = x[i, j]
                T.copy(y, Y[0, 0])

        return tilecore.compile(f, target="npu", out_idx=[-1])

    x = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    rows, cols = kernel(False), kernel(True)
    np.testing.assert_array_equal(rows(x), x)
    np.testing.assert_array_equal(cols(x), x.T)
    r, c = tile_npu.report(rows), tile_npu.report(cols)
    assert c.engine_busy["vector"] > 4 * r.engine_busy["vector"], (r.engine_busy, c.engine_busy)


@settings(max_examples=15, deadline=None)
@given(
    M=st.integers(1, 70),
    N=st.integers(1, 70),
    bm=st.sampled_from([8, 16, 32]),
    bn=st.sampled_from([8, 16, 64]),
    dtype=st.sampled_from(["float32", "float16", "int32", "int8"]),
    offset=st.integers(-3, 3),
)
def test_partial_tile_copies_and_shifted_reads(M, N, bm, bn, dtype, offset):
    """Tiles of any size over tensors of any size, read with a shifted (possibly out-of-bounds) window."""

    @T.prim_func
    def f(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            t = T.alloc_shared((bm, bn), dtype)
            u = T.alloc_shared((bm, bn), dtype)  # a second tile: reading t[bm-1-i] while writing t races
            T.copy(X[by * bm + offset, bx * bn - offset], t)
            for i, j in T.Parallel(bm, bn):
                u[i, j] = t[i, j] + t[bm - 1 - i, j]
            T.copy(u, Y[by * bm, bx * bn])

    rng = np.random.default_rng(M * 100 + N)
    assert_matches_reference(f, [rand(rng, (M, N), dtype)], backend="npu", out_idx=[-1])
