"""Benchmark-only LayerNorm variants for the tile-cuda bandwidth sweep (benchmarks/cuda_bench.py).

examples/layernorm.py loads a row into registers and only then reduces, so a block has no HBM
traffic in flight between its load and its store (and, unless wb_early, waits on a cache round trip
for W and Bias after the reductions). Here each block instead streams `rows_per_block` consecutive
rows through a cp.async ring of `num_stages` shared-memory row buffers (T.Pipelined): while one
row is reduced, normalized and stored, the next num_stages - 1 rows are already being read, so the
bytes in flight per SM no longer depend on how long the arithmetic takes. W and Bias are read
once per block into registers and reused for every row.
"""
from __future__ import annotations

import tilecore
import tilecore.language as T


@tilecore.jit(out_idx=[-1])
def layernorm_pipelined(M, N, rows_per_block=16, num_stages=3, eps=1e-5, dtype="float16", accum="float32",
                        threads=256):
    """LayerNorm over the last dimension, rows_per_block rows per block through a cp.async ring.

    Rows past M in a partial last block are clamped to row M - 1 (loaded and stored again).
    """

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), W: T.Tensor((N,), dtype), Bias: T.Tensor((N,), dtype),
             Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, rows_per_block), threads=threads) as bx:
            xs = T.alloc_shared((1, N), dtype)
            xh = T.alloc_fragment((1, N), dtype)
            x = T.alloc_fragment((1, N), accum)
            sq = T.alloc_fragment((1, N), accum)
            w = T.alloc_fragment((1, N), dtype)
            b = T.alloc_fragment((1, N), dtype)
            mean = T.alloc_fragment((1,), accum)
            rstd = T.alloc_fragment((1,), accum)
            T.copy(W, w)
            T.copy(Bias, b)
            for r in T.Pipelined(rows_per_block, num_stages=num_stages):
                T.copy(X[T.min(bx * rows_per_block + r, M - 1), 0], xs)
                T.copy(xs, xh)  # 16-byte shared loads (an element-wise read would be 2-byte ones)
                for i, j in T.Parallel(1, N):
                    x[i, j] = xh[i, j]
                T.reduce_sum(x, mean, dim=1)
                for i, j in T.Parallel(1, N):
                    x[i, j] = x[i, j] - mean[i] / N
                    sq[i, j] = x[i, j] * x[i, j]
                T.reduce_sum(sq, rstd, dim=1)
                for i in T.Parallel(1):
                    rstd[i] = T.rsqrt(rstd[i] / N + eps)
                for i, j in T.Parallel(1, N):
                    x[i, j] = x[i, j] * rstd[i] * w[i, j] + b[i, j]
                # unguarded: a clamped row past M holds row M - 1's result and rewrites it unchanged
                # (the same block owns row M - 1), and a store under `if` is not vectorized
                T.copy(x, Y[T.min(bx * rows_per_block + r, M - 1), 0])

    return main


def check(target=None):
    """Each variant against numpy (examples/layernorm.py's reference), a partial last block included."""
    import os
    import sys

    import numpy as np

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
    from common import build, compare, random_array, tolerance_for
    from layernorm import reference

    rng = np.random.default_rng()
    results = []
    for M, N, rows, stages, dtype, threads in [(70, 768, 16, 3, "float32", 64), (64, 256, 8, 2, "bfloat16", 32)]:
        kernel = build(layernorm_pipelined, target, M, N, rows, stages, dtype=dtype, threads=threads)
        x = random_array(rng, (M, N), dtype, -3.0, 3.0)
        w = random_array(rng, (N,), dtype, 0.5, 1.5)
        b = random_array(rng, (N,), dtype, -0.5, 0.5)
        results.append(compare(f"layernorm_pipelined {M}x{N} rows={rows} stages={stages} {dtype}",
                               kernel(x, w, b), reference(x, w, b), tolerance_for(dtype), kernel))
    return results


if __name__ == "__main__":
    import sys

    results = check(sys.argv[1] if len(sys.argv) > 1 else None)
    for r in results:
        print(r.line())
    sys.exit(0 if all(r.passed for r in results) else 1)
