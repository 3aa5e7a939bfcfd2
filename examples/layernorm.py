"""Layer normalization over the last dimension, with a learned scale and shift.

y = (x - mean) / sqrt(var + eps) * weight + bias, statistics in fp32 fragments.
"""

from __future__ import annotations

import os
import sys

import numpy as np

import tilecore
import tilecore.language as T

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import build, compare, main, random_array, tolerance_for  # noqa: E402


def _default_threads(N):
    """Threads per block: up to 256, dividing the row's 16-byte chunks evenly when possible."""
    vec = next(v for v in (8, 4, 2, 1) if N % v == 0)
    chunks = N // vec
    for t in (256, 128, 64, 32):
        if chunks % t == 0:
            return t
    return 32 if 32 % chunks == 0 else 128


@tilecore.jit(out_idx=[-1])
def layernorm(M, N, block_M=1, eps=1e-5, dtype="float32", accum="float32", threads=None, wb_early=False):
    """block_M rows per block, one row at a time over all the block's threads.

    A row lives in registers (x, in `accum`) and is read from global memory once; mean and variance
    come from two row reductions of registers (two-pass, no E[x^2] - mean^2 cancellation). With
    block_M > 1 the next row's load (kept in the input dtype, xh) is issued before this row's
    reductions, so it is in flight while they run. W and Bias are read where they are used
    (cache hits after the first rows), which keeps them out of registers during the reductions.
    wb_early=True instead loads them once, together with the first row, so that no cache round
    trip is left between the reductions and the store (more registers: use more threads).
    """
    threads = threads or _default_threads(N)

    @T.prim_func
    def main(
        X: T.Tensor((M, N), dtype), W: T.Tensor((N,), dtype), Bias: T.Tensor((N,), dtype), Y: T.Tensor((M, N), dtype)
    ):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            xh = T.alloc_fragment((1, N), dtype)
            x = T.alloc_fragment((1, N), accum)
            sq = T.alloc_fragment((1, N), accum)
            w = T.alloc_fragment((1, N), dtype)
            b = T.alloc_fragment((1, N), dtype)
            mean = T.alloc_fragment((1,), accum)
            rstd = T.alloc_fragment((1,), accum)
            T.copy(X[bx * block_M, 0], xh)
            if wb_early:
                T.copy(W, w)
                T.copy(Bias, b)
            for r in T.serial(block_M):
                for i, j in T.Parallel(1, N):
                    x[i, j] = xh[i, j]
                if r + 1 < block_M:
                    # the next row; clamped so that a partial last block stays in bounds (the rows
                    # past M are computed but never stored)
                    T.copy(X[T.min(bx * block_M + r + 1, M - 1), 0], xh)
                T.reduce_sum(x, mean, dim=1)
                for i, j in T.Parallel(1, N):
                    x[i, j] = x[i, j] - mean[i] / N
                    sq[i, j] = x[i, j] * x[i, j]
                T.reduce_sum(sq, rstd, dim=1)
                for i in T.Parallel(1):
                    rstd[i] = T.rsqrt(rstd[i] / N + eps)
                if not wb_early:
                    T.copy(W, w)
                    T.copy(Bias, b)
                for i, j in T.Parallel(1, N):
                    x[i, j] = x[i, j] * rstd[i] * w[i, j] + b[i, j]
                T.copy(x, Y[bx * block_M + r, 0])

    return main


def reference(x, w, b, eps=1e-5):
    x, w, b = (a.astype(np.float64) for a in (x, w, b))
    mean = x.mean(axis=1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w + b


def check(target=None):
    """LayerNorm against numpy on fresh random inputs (a partial last block included)."""
    rng = np.random.default_rng()
    results = []
    for M, N, block_M, dtype, wb_early in [
        (256, 512, 16, "float32", False),
        (70, 768, 16, "float32", False),
        (64, 256, 16, "bfloat16", False),
        (70, 768, 4, "float32", True),
    ]:
        kernel = build(layernorm, target, M, N, block_M, dtype=dtype, wb_early=wb_early)
        x = random_array(rng, (M, N), dtype, -3.0, 3.0)
        w = random_array(rng, (N,), dtype, 0.5, 1.5)
        b = random_array(rng, (N,), dtype, -0.5, 0.5)
        y = kernel(x, w, b)
        results.append(
            compare(
                f"layernorm {M}x{N} block_M={block_M} {dtype} wb_early={wb_early}",
                y,
                reference(x, w, b),
                tolerance_for(dtype),
                kernel,
            )
        )
    return results


if __name__ == "__main__":
    sys.exit(main(check, __doc__))
