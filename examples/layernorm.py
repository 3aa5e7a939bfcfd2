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


@tilecore.jit(out_idx=[-1])
def layernorm(M, N, block_M=16, eps=1e-5, dtype="float32", accum="float32"):
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), W: T.Tensor((N,), dtype), Bias: T.Tensor((N,), dtype),
             Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            x = T.alloc_fragment((block_M, N), accum)
            sq = T.alloc_fragment((block_M, N), accum)
            w = T.alloc_fragment((N,), accum)
            b = T.alloc_fragment((N,), accum)
            mean = T.alloc_fragment((block_M,), accum)
            var = T.alloc_fragment((block_M,), accum)
            T.copy(X[bx * block_M, 0], x)
            T.copy(W, w)
            T.copy(Bias, b)
            T.reduce_sum(x, mean, dim=1)
            for i in T.Parallel(block_M):
                mean[i] = mean[i] / N
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] - mean[i]
                sq[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(sq, var, dim=1)
            for i in T.Parallel(block_M):
                var[i] = T.rsqrt(var[i] / N + eps)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] * var[i] * w[j] + b[j]
            T.copy(x, Y[bx * block_M, 0])

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
    for M, N, block_M, dtype in [(256, 512, 16, "float32"), (70, 768, 16, "float32"), (64, 256, 16, "bfloat16")]:
        kernel = build(layernorm, target, M, N, block_M, dtype=dtype)
        x = random_array(rng, (M, N), dtype, -3.0, 3.0)
        w = random_array(rng, (N,), dtype, 0.5, 1.5)
        b = random_array(rng, (N,), dtype, -0.5, 0.5)
        y = kernel(x, w, b)
        results.append(compare(f"layernorm {M}x{N} block_M={block_M} {dtype}", y, reference(x, w, b),
                               tolerance_for(dtype), kernel))
    return results


if __name__ == "__main__":
    sys.exit(main(check, __doc__))
