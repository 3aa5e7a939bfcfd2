"""GEMM with shared-memory tiles, a pipelined K loop and a fragment accumulator.

Partial tiles are handled by the language: tile copies that reach past the
matrix read zeros and drop writes, so M = N = K = 200 with 64x64x32 tiles works
without any bounds code in the kernel.
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
def matmul(M, N, K, block_M=128, block_N=128, block_K=32, dtype="float16", accum="float32", num_stages=3, threads=128):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), dtype)
            B_s = T.alloc_shared((block_K, block_N), dtype)
            C_f = T.alloc_fragment((block_M, block_N), accum)
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C[by * block_M, bx * block_N])

    return main


def check(target=None):
    """GEMM against numpy on fresh random inputs: fp32 (partial tiles) and fp16 with fp32 accumulation."""
    rng = np.random.default_rng()
    results = []
    cases = [
        (200, 200, 200, 64, 64, 32, "float32"),
        (256, 192, 160, 64, 64, 32, "float32"),
        (200, 200, 200, 64, 64, 32, "float16"),
        (128, 128, 128, 64, 64, 32, "bfloat16"),
    ]
    for M, N, K, bm, bn, bk, dtype in cases:
        kernel = build(matmul, target, M, N, K, bm, bn, bk, dtype=dtype, accum="float32")
        a = random_array(rng, (M, K), dtype)
        b = random_array(rng, (K, N), dtype)
        c = kernel(a, b)
        ref = a.astype(np.float64) @ b.astype(np.float64)
        results.append(compare(f"gemm {M}x{N}x{K} tiles {bm}x{bn}x{bk} {dtype}", c, ref, tolerance_for(dtype), kernel))
    return results


if __name__ == "__main__":
    sys.exit(main(check, __doc__))
