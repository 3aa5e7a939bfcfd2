"""Realistic TileLang-style kernels, written as a kernel author would, checked on the
reference backend against numpy formulas (float64) on fresh random inputs.

Each kernel uses a different corner of the language: broadcasting, transposes
through shared memory, row/column reductions, GEMMs with transposes in bf16 and
int8->int32, split-K with atomics, scans, masked softmax, dynamic shapes,
alloc_var counters, T.print, serial loops inside Parallel, 3-D and 1-block grids,
partial tiles in every dimension, and Python meta-programming.
"""

from __future__ import annotations

import math
import os

import ml_dtypes
import numpy as np
import pytest

import tilecore
import tilecore.language as T

# The reference defines the language; TILECORE_ZOO_TARGET=cpu (or any target) runs the same
# checks on a backend by hand.
TARGET = os.environ.get("TILECORE_ZOO_TARGET", "reference")


@pytest.fixture
def rng():
    return np.random.default_rng(20261129)


def run(func, inputs, out_idx=-1):
    return tilecore.compile(
        func, target=TARGET, out_idx=out_idx if out_idx is None or isinstance(out_idx, list) else [out_idx]
    )(*inputs)


def close(got, want, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(np.asarray(got).astype(np.float64), np.asarray(want, np.float64), rtol=rtol, atol=atol)


# ----------------------------------------------------------------------------- elementwise


def bias_add(M, N, bm, bn):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), b: T.Tensor((N,), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            for i, j in T.Parallel(bm, bn):
                if by * bm + i < M and bx * bn + j < N:
                    C[by * bm + i, bx * bn + j] = A[by * bm + i, bx * bn + j] + b[bx * bn + j]

    return main


def test_bias_broadcast_with_guard(rng):
    a, b = rng.standard_normal((70, 50)).astype(np.float32), rng.standard_normal(50).astype(np.float32)
    close(run(bias_add(70, 50, 32, 16), [a, b]), a.astype(np.float64) + b)


def test_row_broadcast_of_a_fragment_vector(rng):
    @T.prim_func
    def main(A: T.Tensor((5, 7), "float32"), r: T.Tensor((5,), "float32"), B: T.Tensor((5, 7), "float32")):
        with T.Kernel(1) as bx:
            f = T.alloc_fragment((5, 7), "float32")
            rf = T.alloc_fragment((5,), "float32")
            T.copy(A, f)
            T.copy(r, rf)
            for i, j in T.Parallel(5, 7):
                f[i, j] = f[i, j] * rf[i] - T.max(rf[i], 0.0)
            T.copy(f, B)

    a, r = rng.standard_normal((5, 7)).astype(np.float32), rng.standard_normal(5).astype(np.float32)
    close(run(main, [a, r]), a * r[:, None] - np.maximum(r, 0)[:, None])


def test_transpose_through_shared_with_partial_tiles(rng):
    def transpose(M, N, t):
        @T.prim_func
        def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((N, M), "float32")):
            with T.Kernel(T.ceildiv(N, t), T.ceildiv(M, t)) as (bx, by):
                s = T.alloc_shared((t, t), "float32")
                u = T.alloc_shared((t, t), "float32")
                T.copy(A[by * t, bx * t], s)
                for i, j in T.Parallel(t, t):
                    u[j, i] = s[i, j]
                T.copy(u, B[bx * t, by * t])

        return main

    a = rng.standard_normal((100, 70)).astype(np.float32)
    np.testing.assert_array_equal(run(transpose(100, 70, 32), [a]), a.T)


def test_partial_tiles_in_all_three_dims_with_slices(rng):
    def sqrt_abs(D0, D1, D2, t0, t1, t2):
        @T.prim_func
        def main(A: T.Tensor((D0, D1, D2), "float32"), B: T.Tensor((D0, D1, D2), "float32")):
            with T.Kernel(T.ceildiv(D2, t2), T.ceildiv(D1, t1), T.ceildiv(D0, t0)) as (bx, by, bz):
                s = T.alloc_shared((t0, t1, t2), "float32")
                T.copy(A[bz * t0 : (bz + 1) * t0, by * t1 : (by + 1) * t1, bx * t2 : (bx + 1) * t2], s)
                for i, j, k in T.Parallel(t0, t1, t2):
                    s[i, j, k] = T.sqrt(T.abs(s[i, j, k]))
                T.copy(s, B[bz * t0, by * t1, bx * t2])

        return main

    a = rng.standard_normal((5, 7, 9)).astype(np.float32)
    close(run(sqrt_abs(5, 7, 9, 2, 4, 4), [a]), np.sqrt(np.abs(a)))


def test_3d_grid_uses_every_block_index(rng):
    def add_batch(Bt, M, N, bm, bn):
        @T.prim_func
        def main(A: T.Tensor((Bt, M, N), "float32"), C: T.Tensor((Bt, M, N), "float32")):
            with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), Bt) as (bx, by, bz):
                s = T.alloc_shared((bm, bn), "float32")
                T.copy(A[bz, by * bm, bx * bn], s)
                for i, j in T.Parallel(bm, bn):
                    s[i, j] = s[i, j] + bz * 10 + by + bx * 0.5
                T.copy(s, C[bz, by * bm, bx * bn])

        return main

    a = rng.standard_normal((3, 20, 30)).astype(np.float32)
    want = a.astype(np.float64).copy()
    for z in range(3):
        for y in range(3):
            for x in range(2):
                want[z, y * 8 : (y + 1) * 8, x * 16 : (x + 1) * 16] += z * 10 + y + x * 0.5
    close(run(add_batch(3, 20, 30, 8, 16), [a]), want)


def test_one_block_float16_with_casts(rng):
    @T.prim_func
    def main(A: T.Tensor((10,), "float16"), B: T.Tensor((10,), "float16")):
        with T.Kernel(1, threads=32) as bx:
            f = T.alloc_fragment((10,), "float16")
            T.copy(A, f)
            for i in T.Parallel(10):
                f[i] = T.abs(f[i]) * T.cast(2, "float16")
            T.copy(f, B)

    a = rng.standard_normal(10).astype(np.float16)
    np.testing.assert_array_equal(run(main, [a]), np.abs(a) * np.float16(2))


def test_stencil_with_if_then_else_guarding_out_of_range_neighbours(rng):
    @T.prim_func
    def main(A: T.Tensor((12,), "float32"), B: T.Tensor((12,), "float32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(12):
                B[i] = A[i] + T.if_then_else(i > 0, A[i - 1], 0.0) + T.if_then_else(i < 11, A[i + 1], 0.0)

    a = rng.standard_normal(12).astype(np.float32)
    want = a.astype(np.float64).copy()
    want[1:] += a[:-1]
    want[:-1] += a[1:]
    close(run(main, [a]), want)


# ----------------------------------------------------------------------------- reductions and scans


def test_row_sum_and_column_max_in_one_kernel(rng):
    @T.prim_func
    def main(A: T.Tensor((33, 17), "float32"), R: T.Tensor((33,), "float32"), Cm: T.Tensor((17,), "float32")):
        with T.Kernel(1) as bx:
            f = T.alloc_fragment((33, 17), "float32")
            r = T.alloc_fragment((33,), "float32")
            c = T.alloc_fragment((17,), "float32")
            T.copy(A, f)
            T.reduce_sum(f, r, dim=1)
            T.reduce_max(f, c, dim=0)
            T.copy(r, R)
            T.copy(c, Cm)

    a = rng.standard_normal((33, 17)).astype(np.float32)
    r, c = run(main, [a], out_idx=[1, 2])
    close(r, a.astype(np.float64).sum(1))
    np.testing.assert_array_equal(c, a.max(0))


def test_abssum_absmax_and_min_without_clear(rng):
    @T.prim_func
    def main(A: T.Tensor((6, 11), "float32"), O: T.Tensor((3, 6), "float32")):
        with T.Kernel(1) as bx:
            f = T.alloc_fragment((6, 11), "float32")
            a = T.alloc_fragment((6,), "float32")
            b = T.alloc_fragment((6,), "float32")
            c = T.alloc_fragment((6,), "float32")
            T.copy(A, f)
            T.reduce_abssum(f, a, dim=1)
            T.reduce_absmax(f, b, dim=1)
            T.fill(c, 0.5)
            T.reduce_min(f, c, dim=1, clear=False)
            T.copy(a, O[0, 0])
            T.copy(b, O[1, 0])
            T.copy(c, O[2, 0])

    x = rng.standard_normal((6, 11)).astype(np.float32)
    close(run(main, [x]), np.stack([np.abs(x).astype(np.float64).sum(1), np.abs(x).max(1), np.minimum(x.min(1), 0.5)]))


def test_online_max_over_partial_column_tiles(rng):
    @T.prim_func
    def main(A: T.Tensor((6, 37), "float32"), O: T.Tensor((6,), "float32")):
        with T.Kernel(1) as bx:
            f = T.alloc_fragment((6, 16), "float32")
            m = T.alloc_fragment((6,), "float32")
            T.fill(m, -T.infinity("float32"))
            for k in T.serial(T.ceildiv(37, 16)):
                T.copy(A[0, k * 16], f)
                for i, j in T.Parallel(6, 16):
                    f[i, j] = T.if_then_else(k * 16 + j < 37, f[i, j], -T.infinity("float32"))
                T.reduce_max(f, m, dim=1, clear=False)
            T.copy(m, O)

    a = -np.abs(rng.standard_normal((6, 37)).astype(np.float32)) - 1  # the zero padding must not win
    np.testing.assert_array_equal(run(main, [a]), a.max(1))


@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("reverse", [False, True])
def test_cumsum_in_place_on_shared(rng, dim, reverse):
    @T.prim_func
    def main(A: T.Tensor((16, 24), "float32"), B: T.Tensor((16, 24), "float32")):
        with T.Kernel(1) as bx:
            s = T.alloc_shared((16, 24), "float32")
            T.copy(A, s)
            T.cumsum(s, dim=dim, reverse=reverse)
            T.copy(s, B)

    a = rng.standard_normal((16, 24)).astype(np.float32)
    x = a.astype(np.float64)
    want = np.flip(np.cumsum(np.flip(x, dim), axis=dim), dim) if reverse else np.cumsum(x, axis=dim)
    close(run(main, [a]), want, rtol=1e-5, atol=1e-5)


def test_masked_softmax_with_if_then_else(rng):
    @T.prim_func
    def main(X: T.Tensor((16, 16), "float32"), Y: T.Tensor((16, 16), "float32")):
        with T.Kernel(1) as bx:
            x = T.alloc_fragment((16, 16), "float32")
            mx = T.alloc_fragment((16,), "float32")
            sm = T.alloc_fragment((16,), "float32")
            T.copy(X, x)
            for i, j in T.Parallel(16, 16):
                x[i, j] = T.if_then_else(j <= i, x[i, j], -T.infinity("float32"))
            T.reduce_max(x, mx, dim=1)
            for i, j in T.Parallel(16, 16):
                x[i, j] = T.exp(x[i, j] - mx[i])
            T.reduce_sum(x, sm, dim=1)
            for i, j in T.Parallel(16, 16):
                x[i, j] = x[i, j] / sm[i]
            T.copy(x, Y)

    a = rng.standard_normal((16, 16)).astype(np.float32)
    masked = np.where(np.tril(np.ones((16, 16), bool)), a.astype(np.float64), -np.inf)
    e = np.exp(masked - masked.max(1, keepdims=True))
    close(run(main, [a]), e / e.sum(1, keepdims=True))


def test_layernorm_with_rsqrt_and_partial_row_blocks(rng):
    def layernorm(M, N, bm, eps=1e-5):
        @T.prim_func
        def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
            with T.Kernel(T.ceildiv(M, bm)) as bx:
                x = T.alloc_fragment((bm, N), "float32")
                sq = T.alloc_fragment((bm, N), "float32")
                s = T.alloc_fragment((bm,), "float32")
                ss = T.alloc_fragment((bm,), "float32")
                T.copy(X[bx * bm, 0], x)
                T.reduce_sum(x, s)
                for i, j in T.Parallel(bm, N):
                    sq[i, j] = x[i, j] * x[i, j]
                T.reduce_sum(sq, ss)
                for i, j in T.Parallel(bm, N):
                    x[i, j] = (x[i, j] - s[i] / N) * T.rsqrt(ss[i] / N - (s[i] / N) * (s[i] / N) + eps)
                T.copy(x, Y[bx * bm, 0])

        return main

    x = rng.standard_normal((37, 64)).astype(np.float32)
    xd = x.astype(np.float64)
    close(
        run(layernorm(37, 64, 8), [x]),
        (xd - xd.mean(1, keepdims=True)) / np.sqrt(xd.var(1, keepdims=True) + 1e-5),
        rtol=1e-4,
        atol=1e-5,
    )


# ----------------------------------------------------------------------------- GEMM


def gemm(M, N, K, bm, bn, bk, ta, tb, dtype, accum, stages=2):
    a_shape = (K, M) if ta else (M, K)
    b_shape = (N, K) if tb else (K, N)

    @T.prim_func
    def main(A: T.Tensor(a_shape, dtype), B: T.Tensor(b_shape, dtype), C: T.Tensor((M, N), accum)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            As = T.alloc_shared((bk, bm) if ta else (bm, bk), dtype)
            Bs = T.alloc_shared((bn, bk) if tb else (bk, bn), dtype)
            Cf = T.alloc_fragment((bm, bn), accum)
            T.clear(Cf)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                if ta:
                    T.copy(A[k * bk, by * bm], As)
                else:
                    T.copy(A[by * bm, k * bk], As)
                if tb:
                    T.copy(B[bx * bn, k * bk], Bs)
                else:
                    T.copy(B[k * bk, bx * bn], Bs)
                T.gemm(As, Bs, Cf, transpose_A=ta, transpose_B=tb)
            T.copy(Cf, C[by * bm, bx * bn])

    return main


@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_bf16_gemm_with_transposes_and_partial_tiles(rng, ta, tb):
    M, N, K = 70, 45, 50
    a = rng.uniform(-1, 1, (K, M) if ta else (M, K)).astype(ml_dtypes.bfloat16)
    b = rng.uniform(-1, 1, (N, K) if tb else (K, N)).astype(ml_dtypes.bfloat16)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    want = (a64.T if ta else a64) @ (b64.T if tb else b64)
    close(run(gemm(M, N, K, 32, 32, 16, ta, tb, "bfloat16", "float32"), [a, b]), want, rtol=1e-5, atol=1e-5)


def test_int8_gemm_accumulates_exactly_in_int32(rng):
    a = rng.integers(-128, 128, (64, 96)).astype(np.int8)
    b = rng.integers(-128, 128, (96, 40)).astype(np.int8)
    got = run(gemm(64, 40, 96, 32, 32, 32, False, False, "int8", "int32"), [a, b])
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, a.astype(np.int64) @ b.astype(np.int64))


def test_pipelined_with_more_stages_than_iterations_and_layout_hints(rng):
    @T.prim_func
    def main(A: T.Tensor((16, 40), "float16"), B: T.Tensor((40, 16), "float16"), C: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, 1) as (bx, by):
            As = T.alloc_shared((16, 16), "float16")
            Bs = T.alloc_shared((16, 16), "float16")
            Cf = T.alloc_fragment((16, 16), "float32")
            T.annotate_layout({As: T.make_swizzled_layout(As)})
            T.use_swizzle(panel_size=10)
            T.clear(Cf)
            for k in T.Pipelined(T.ceildiv(40, 16), num_stages=4):
                T.copy(A[0, k * 16], As)
                T.copy(B[k * 16, 0], Bs)
                T.gemm(As, Bs, Cf)
            T.copy(Cf, C)

    a = rng.uniform(-1, 1, (16, 40)).astype(np.float16)
    b = rng.uniform(-1, 1, (40, 16)).astype(np.float16)
    close(run(main, [a, b]), a.astype(np.float64) @ b.astype(np.float64), rtol=1e-5, atol=1e-5)


def test_split_k_gemm_with_element_atomics(rng):
    M, N, K, bm, bn, bk, splits = 50, 30, 64, 32, 16, 16, 4
    per_split = K // splits

    @T.prim_func
    def main(A: T.Tensor((M, K), "float32"), B: T.Tensor((K, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), splits) as (bx, by, bz):
            As = T.alloc_shared((bm, bk), "float32")
            Bs = T.alloc_shared((bk, bn), "float32")
            Cf = T.alloc_fragment((bm, bn), "float32")
            T.clear(Cf)
            for k in T.serial(T.ceildiv(per_split, bk)):
                T.copy(A[by * bm, bz * per_split + k * bk], As)
                T.copy(B[bz * per_split + k * bk, bx * bn], Bs)
                T.gemm(As, Bs, Cf)
            for i, j in T.Parallel(bm, bn):
                if by * bm + i < M and bx * bn + j < N:
                    T.atomic_add(C[by * bm + i, bx * bn + j], Cf[i, j])

    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    c = np.zeros((M, N), np.float32)
    assert run(main, [a, b, c], out_idx=None) is None
    close(c, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-4)


def test_tile_atomic_add_folds_blocks_together(rng):
    @T.prim_func
    def main(A: T.Tensor((40, 8), "float32"), S: T.Tensor((16, 8), "float32")):
        with T.Kernel(T.ceildiv(40, 16)) as bx:
            f = T.alloc_fragment((16, 8), "float32")
            T.copy(A[bx * 16, 0], f)
            T.atomic_add(S[0, 0], f)

    a = rng.standard_normal((40, 8)).astype(np.float32)
    s = np.zeros((16, 8), np.float32)
    run(main, [a, s], out_idx=None)
    close(s, np.concatenate([a, np.zeros((8, 8), np.float32)]).reshape(3, 16, 8).astype(np.float64).sum(0))


def test_atomic_max_and_min_across_blocks(rng):
    @T.prim_func
    def main(A: T.Tensor((7, 5), "float32"), mx: T.Tensor((5,), "float32"), mn: T.Tensor((5,), "float32")):
        with T.Kernel(7) as bx:
            for j in T.Parallel(5):
                T.atomic_max(mx[j], A[bx, j])
                T.atomic_min(mn[j], A[bx, j])

    a = rng.standard_normal((7, 5)).astype(np.float32)
    mx, mn = np.full(5, -np.inf, np.float32), np.full(5, np.inf, np.float32)
    run(main, [a, mx, mn], out_idx=None)
    np.testing.assert_array_equal(mx, a.max(0))
    np.testing.assert_array_equal(mn, a.min(0))


def test_flash_attention_forward_with_partial_kv_tiles(rng):
    S, D, bm, bn = 100, 32, 32, 32
    scale = 1.0 / math.sqrt(D) * 1.44269504

    @T.prim_func
    def main(
        Q: T.Tensor((S, D), "float16"),
        K: T.Tensor((S, D), "float16"),
        V: T.Tensor((S, D), "float16"),
        O: T.Tensor((S, D), "float16"),
    ):
        with T.Kernel(T.ceildiv(S, bm), threads=128) as bx:
            Qs = T.alloc_shared((bm, D), "float16")
            Ks = T.alloc_shared((bn, D), "float16")
            Vs = T.alloc_shared((bn, D), "float16")
            acc_s = T.alloc_fragment((bm, bn), "float32")
            acc_s_cast = T.alloc_fragment((bm, bn), "float16")
            acc_o = T.alloc_fragment((bm, D), "float32")
            m = T.alloc_fragment((bm,), "float32")
            m_prev = T.alloc_fragment((bm,), "float32")
            sc = T.alloc_fragment((bm,), "float32")
            lse = T.alloc_fragment((bm,), "float32")
            ls = T.alloc_fragment((bm,), "float32")
            T.copy(Q[bx * bm, 0], Qs)
            T.fill(acc_o, 0)
            T.fill(lse, 0)
            T.fill(m, -T.infinity("float32"))
            for k in T.Pipelined(T.ceildiv(S, bn), num_stages=2):
                T.copy(K[k * bn, 0], Ks)
                T.clear(acc_s)
                T.gemm(Qs, Ks, acc_s, transpose_B=True)
                for i, j in T.Parallel(bm, bn):
                    acc_s[i, j] = T.if_then_else(k * bn + j < S, acc_s[i, j], -T.infinity("float32"))
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(bm):
                    sc[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                for i, j in T.Parallel(bm, D):
                    acc_o[i, j] *= sc[i]
                for i, j in T.Parallel(bm, bn):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m[i] * scale)
                T.reduce_sum(acc_s, ls, dim=1)
                for i in T.Parallel(bm):
                    lse[i] = lse[i] * sc[i] + ls[i]
                T.copy(acc_s, acc_s_cast)
                T.copy(V[k * bn, 0], Vs)
                T.gemm(acc_s_cast, Vs, acc_o)
            for i, j in T.Parallel(bm, D):
                acc_o[i, j] /= lse[i]
            T.copy(acc_o, O[bx * bm, 0])

    q, k, v = (rng.standard_normal((S, D)).astype(np.float16) for _ in range(3))
    s = q.astype(np.float64) @ k.astype(np.float64).T / math.sqrt(D)
    p = np.exp(s - s.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    close(run(main, [q, k, v]), p @ v.astype(np.float64), rtol=2e-2, atol=2e-3)


# ----------------------------------------------------------------------------- control flow, scalars


def test_dynamic_m_including_a_single_row_and_zero_rows(rng):
    M = T.dynamic("M")

    @T.prim_func
    def main(A: T.Tensor((M, 24), "float32"), B: T.Tensor((M, 24), "float32")):
        with T.Kernel(T.ceildiv(M, 16)) as bx:
            f = T.alloc_fragment((16, 24), "float32")
            T.copy(A[bx * 16, 0], f)
            for i, j in T.Parallel(16, 24):
                f[i, j] = f[i, j] * 2.0 + 1.0
            T.copy(f, B[bx * 16, 0])

    kernel = tilecore.compile(main, target=TARGET, out_idx=[-1])
    for rows in (0, 1, 37, 64):
        a = rng.standard_normal((rows, 24)).astype(np.float32)
        out = kernel(a)
        assert out.shape == (rows, 24)
        close(out, a.astype(np.float64) * 2 + 1)


def test_dynamic_transpose_in_two_dynamic_dims(rng):
    M, N = T.dynamic("M"), T.dynamic("N")

    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((N, M), "float32")):
        with T.Kernel(T.ceildiv(N, 8), T.ceildiv(M, 8)) as (bx, by):
            s = T.alloc_shared((8, 8), "float32")
            u = T.alloc_shared((8, 8), "float32")
            T.copy(A[by * 8, bx * 8], s)
            for i, j in T.Parallel(8, 8):
                u[j, i] = s[i, j]
            T.copy(u, B[bx * 8, by * 8])

    kernel = tilecore.compile(main, target=TARGET, out_idx=[-1])
    for shape in ((5, 13), (16, 8), (1, 1)):
        a = rng.standard_normal(shape).astype(np.float32)
        np.testing.assert_array_equal(kernel(a), a.T)


def test_alloc_var_counter_and_running_value(rng):
    @T.prim_func
    def main(A: T.Tensor((9, 13), "float32"), C: T.Tensor((9,), "int32"), D: T.Tensor((9,), "float32")):
        with T.Kernel(9) as bx:
            count = T.alloc_var("int32")
            acc = T.alloc_var("float32", init=1.0)
            count = 0
            for j in T.serial(13):
                if A[bx, j] > 0:
                    count = count + 1
                acc = acc * 0.5 + A[bx, j]
            C[bx] = count
            D[bx] = acc

    a = rng.standard_normal((9, 13)).astype(np.float32)
    count, acc = run(main, [a], out_idx=[1, 2])
    np.testing.assert_array_equal(count, (a > 0).sum(1))
    want = np.ones(9)
    for j in range(13):
        want = want * 0.5 + a[:, j]
    close(acc, want)


def test_serial_loop_nested_inside_parallel(rng):
    @T.prim_func
    def main(A: T.Tensor((8, 5), "float32"), B: T.Tensor((8, 6), "float32")):
        with T.Kernel(1) as bx:
            f = T.alloc_fragment((8, 6), "float32")
            for i, j in T.Parallel(8, 6):
                f[i, j] = 0.0
                for k in T.serial(5):
                    f[i, j] = f[i, j] + A[i, k] * (j + 1)
            T.copy(f, B)

    a = rng.standard_normal((8, 5)).astype(np.float32)
    close(run(main, [a]), a.astype(np.float64).sum(1, keepdims=True) * np.arange(1, 7))


def test_loops_with_start_and_stop_and_unroll(rng):
    @T.prim_func
    def main(A: T.Tensor((10,), "float32"), B: T.Tensor((3,), "float32")):
        with T.Kernel(1) as bx:
            s = T.alloc_var("float32")
            s = 0.0
            for i in T.serial(2, 10):
                s = s + A[i]
            B[0] = s
            s = 0.0
            for i in T.unroll(4):
                s = s + A[i]
            B[1] = s
            s = 0.0
            for i in T.Pipelined(1, 9, num_stages=2):
                s = s + A[i]
            B[2] = s

    a = rng.standard_normal(10).astype(np.float32)
    close(run(main, [a]), [a[2:].sum(), a[:4].sum(), a[1:9].sum()])


def test_run_time_elif_chain_over_math_functions(rng):
    @T.prim_func
    def main(A: T.Tensor((16,), "float32"), B: T.Tensor((8, 16), "float32")):
        with T.Kernel(8) as bx:
            for i in T.Parallel(16):
                if bx == 0:
                    B[bx, i] = T.exp2(A[i])
                elif bx == 1:
                    B[bx, i] = T.log2(T.abs(A[i]) + 1.0)
                elif bx == 2:
                    B[bx, i] = T.tanh(A[i])
                elif bx == 3:
                    B[bx, i] = T.sigmoid(A[i])
                elif bx == 4:
                    B[bx, i] = T.pow(T.abs(A[i]), 1.5)
                elif bx == 5:
                    B[bx, i] = T.floor(A[i] * 3.0)
                elif bx == 6:
                    B[bx, i] = T.ceil(A[i] * 3.0)
                else:
                    B[bx, i] = T.max(T.min(A[i], 0.5), -0.5) + T.sin(A[i]) * T.cos(A[i]) + T.log(T.abs(A[i]) + 1.0)

    a = rng.standard_normal(16).astype(np.float32)
    x = a.astype(np.float64)
    want = np.stack(
        [
            2**x,
            np.log2(np.abs(x) + 1),
            np.tanh(x),
            1 / (1 + np.exp(-x)),
            np.abs(x) ** 1.5,
            np.floor(a * np.float32(3)),
            np.ceil(a * np.float32(3)),
            np.clip(x, -0.5, 0.5) + np.sin(x) * np.cos(x) + np.log(np.abs(x) + 1),
        ]
    )
    close(run(main, [a]), want, rtol=1e-5, atol=1e-5)


def test_integer_floor_division_modulo_and_bool_logic(rng):
    @T.prim_func
    def main(
        A: T.Tensor((16,), "int32"),
        B: T.Tensor((16,), "int32"),
        Q: T.Tensor((16,), "int32"),
        R: T.Tensor((16,), "int32"),
        M: T.Tensor((16,), "bool"),
    ):
        with T.Kernel(1) as bx:
            for i in T.Parallel(16):
                Q[i] = A[i] // B[i]
                R[i] = A[i] % B[i]
                M[i] = (A[i] > 0) & (A[i] < 10) | (A[i] < -15)

    a = rng.integers(-20, 20, 16).astype(np.int32)
    b = rng.choice([-7, -3, 2, 5], 16).astype(np.int32)
    q, r, m = run(main, [a, b], out_idx=[2, 3, 4])
    np.testing.assert_array_equal(q, a // b)
    np.testing.assert_array_equal(r, a % b)
    np.testing.assert_array_equal(m, ((a > 0) & (a < 10)) | (a < -15))


def test_python_meta_programming_unrolls_at_parse_time(rng):
    def shifted_squares(N, offsets):
        @T.prim_func
        def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
            with T.Kernel(1) as bx:
                for i in T.Parallel(N):
                    B[i] = 0.0
                    for o in offsets:  # a Python loop: one statement per offset
                        if 0 <= i + o < N:
                            B[i] = B[i] + A[i + o] ** 2

        return main

    a = rng.standard_normal(10).astype(np.float32)
    want = np.zeros(10)
    for o in (-1, 0, 2):
        for i in range(10):
            if 0 <= i + o < 10:
                want[i] += float(a[i + o]) ** 2
    close(run(shifted_squares(10, (-1, 0, 2)), [a]), want)


def test_print_shows_block_value_and_message(rng, capfd):
    @T.prim_func
    def main(A: T.Tensor((4,), "float32"), B: T.Tensor((4,), "float32")):
        with T.Kernel(2) as bx:
            s = T.alloc_shared((4,), "float32")
            T.copy(A, s)
            if bx == 1:
                T.print(s, msg="tile")
                T.print(A[3] * 2, msg="twice A[3]")
            T.copy(s, B)

    a = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(run(main, [a]), a)
    out = capfd.readouterr().out  # capfd: compiled backends print from native code
    assert "[block (1,)] tile" in out and "[block (1,)] twice A[3]: 6" in out
    assert "[block (0,)]" not in out
