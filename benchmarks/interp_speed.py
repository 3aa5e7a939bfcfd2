"""Interpreter speed figures: `python -m tilecore.interp.bench`.

Times tilecore.interp.run on the issue's two bars: GEMM 512x512x512 fp32 with
64x64x32 tiles, and FlashAttention forward with S=1024, D=64 (B=1, H=1, fp16
inputs, fp32 accumulation; causal and not). Each figure is the best of a few
runs on fresh random inputs, after one warm-up run that also builds the
interpreter's closures (reported separately); results are checked against numpy
before timing.
"""
from __future__ import annotations

import argparse
import math
import os
import platform
import time

import numpy as np

import tilecore.language as T

from . import compile_program, np_dtype, run


def gemm_func(M, N, K, block_M=64, block_N=64, block_K=32, dtype="float32", accum="float32"):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), dtype)
            B_s = T.alloc_shared((block_K, block_N), dtype)
            C_f = T.alloc_fragment((block_M, block_N), accum)
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C[by * block_M, bx * block_N])
    return main


def flash_func(batch, heads, seq_len, dim, is_causal, block_M=64, block_N=64, dtype="float16"):
    scale = (1.0 / dim) ** 0.5 * 1.44269504
    shape = [batch, seq_len, heads, dim]
    accum = "float32"

    @T.prim_func
    def main(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype),
             Output: T.Tensor(shape, dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=128) as (bx, by, bz):
            Q_shared = T.alloc_shared([block_M, dim], dtype)
            K_shared = T.alloc_shared([block_N, dim], dtype)
            V_shared = T.alloc_shared([block_N, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum)
            scores_max = T.alloc_fragment([block_M], accum)
            scores_max_prev = T.alloc_fragment([block_M], accum)
            scores_scale = T.alloc_fragment([block_M], accum)
            scores_sum = T.alloc_fragment([block_M], accum)
            logsum = T.alloc_fragment([block_M], accum)
            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, -T.infinity(accum))
            loop_range = (T.min(T.ceildiv(seq_len, block_N), T.ceildiv((bx + 1) * block_M, block_N))
                          if is_causal else T.ceildiv(seq_len, block_N))
            for k in T.Pipelined(loop_range, num_stages=2):
                T.copy(K[bz, k * block_N:(k + 1) * block_N, by, :], K_shared)
                if is_causal:
                    for i, j in T.Parallel(block_M, block_N):
                        acc_s[i, j] = T.if_then_else(bx * block_M + i >= k * block_N + j, 0, -T.infinity(accum))
                else:
                    T.clear(acc_s)
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True)
                T.copy(V[bz, k * block_N:(k + 1) * block_N, by, :], V_shared)
                T.copy(scores_max, scores_max_prev)
                T.reduce_max(acc_s, scores_max, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    scores_max[i] = T.max(scores_max[i], scores_max_prev[i])
                for i in T.Parallel(block_M):
                    scores_scale[i] = T.exp2(scores_max_prev[i] * scale - scores_max[i] * scale)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= scores_scale[i]
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - scores_max[i] * scale)
                T.copy(acc_s, acc_s_cast)
                T.gemm(acc_s_cast, V_shared, acc_o)
                T.reduce_sum(acc_s, scores_sum, dim=1)
                for i in T.Parallel(block_M):
                    logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= logsum[i]
            T.copy(acc_o, Output[bz, bx * block_M:(bx + 1) * block_M, by, :])
    return main


def attention_reference(q, k, v, is_causal):
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    s = np.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(q.shape[-1])
    if is_causal:
        n = q.shape[1]
        s = np.where(np.tril(np.ones((n, n), bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return np.einsum("bhqk,bkhd->bqhd", p, v)


def _time(func, make_args, repeats):
    """(seconds of the first run incl. closure building, best of `repeats` later runs, last args)."""
    args = make_args()
    start = time.perf_counter()
    compile_program(func)
    run(func, args)
    first = time.perf_counter() - start
    best = float("inf")
    for _ in range(repeats):
        args = make_args()
        start = time.perf_counter()
        run(func, args)
        best = min(best, time.perf_counter() - start)
    return first, best, args


def measure(repeats: int = 3):
    """[(label, first-run seconds, best seconds, max relative error)] for the issue's bars."""
    rng = np.random.default_rng()
    rows = []
    f = gemm_func(512, 512, 512)

    def gemm_args():
        return [rng.uniform(-1, 1, (512, 512)).astype(np.float32) for _ in range(2)] + \
            [np.zeros((512, 512), np.float32)]
    first, best, (a, b, c) = _time(f, gemm_args, repeats)
    ref = a.astype(np.float64) @ b
    rows.append(("GEMM 512x512x512 fp32, tiles 64x64x32", first, best,
                 float(np.abs(c - ref).max() / np.abs(ref).max())))
    for causal in (False, True):
        f = flash_func(1, 1, 1024, 64, causal)
        shape = (1, 1024, 1, 64)

        def fa_args():
            return [rng.uniform(-1, 1, shape).astype(np_dtype("float16")) for _ in range(3)] + \
                [np.zeros(shape, np.float16)]
        first, best, (q, k, v, o) = _time(f, fa_args, repeats)
        ref = attention_reference(q, k, v, causal)
        rows.append((f"FlashAttention fwd B=1 H=1 S=1024 D=64 fp16 {'causal' if causal else 'full'}",
                     first, best, float(np.abs(o.astype(np.float64) - ref).max() / np.abs(ref).max())))
    return rows


def report(rows) -> str:
    lines = [f"tilecore reference interpreter speed ({platform.processor() or platform.machine()}, "
             f"{os.cpu_count()} CPUs, numpy {np.__version__}, Python {platform.python_version()})",
             "command: python -m tilecore.interp.bench",
             f"{'kernel':<58} {'first run':>10} {'best run':>10} {'max rel err':>12}"]
    for label, first, best, err in rows:
        lines.append(f"{label:<58} {first:>9.3f}s {best:>9.3f}s {err:>12.2e}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Time the reference interpreter on the issue's bars.")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=None, help="also write the figures to this file")
    args = parser.parse_args(argv)
    text = report(measure(args.repeats))
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
