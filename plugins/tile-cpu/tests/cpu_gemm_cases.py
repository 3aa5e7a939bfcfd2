"""Inputs and GEMM kernels shared by the cpu GEMM tests."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from tilecore.testing import gemm_kernel as shared_gemm_kernel

NP = {
    "float32": np.float32,
    "float64": np.float64,
    "float16": np.float16,
    "bfloat16": ml_dtypes.bfloat16,
    "int8": np.int8,
}


def operand_maker(rng):
    """rand(shape, dtype) drawing from `rng` (each test module its own, so inputs do not depend on the
    order tests run in): uniform in [-1, 1) for floats, [-100, 100) for int8."""

    def rand(shape, dtype):
        if dtype == "int8":
            return rng.integers(-100, 100, size=shape).astype(np.int8)
        return rng.uniform(-1, 1, size=shape).astype(NP[dtype])

    return rand


def gemm(M, N, K, bm, bn, bk, dtype="float32", accum="float32", ta=False, tb=False):
    """tilecore.testing's tiled GEMM with bm x bn x bk tiles."""
    return shared_gemm_kernel(M, N, K, dtype, accum, ta, tb, block_M=bm, block_N=bn, block_K=bk)


def gemm_with_epilogue(M, N, K, bm, bn, bk, in_loop: bool):
    """The tiled float32 GEMM plus an epilogue: in the K loop, C_f += the first row of B_s (which
    reads the staging tile again); after it, a ReLU on C_f before it is stored."""
    import tilecore.language as T

    @T.prim_func
    def main(A: T.Tensor((M, K), "float32"), B: T.Tensor((K, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm)) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float32")
            B_s = T.alloc_shared((bk, bn), "float32")
            C_f = T.alloc_fragment((bm, bn), "float32")
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_f)
                if in_loop:
                    for i, j in T.Parallel(bm, bn):
                        C_f[i, j] = C_f[i, j] + B_s[0, j]
            if not in_loop:
                for i, j in T.Parallel(bm, bn):
                    C_f[i, j] = T.max(C_f[i, j], 0.0)
            T.copy(C_f, C[by * bm, bx * bn])

    return main


def matmul_rows_first(M, N, K, bm, bn, bk, dtype="float32", c_dtype="float32", spare_row=False):
    """examples/gemm.py's matmul (C in `c_dtype`, accumulated in float32 or int32) with the grid's
    axes the other way round (rows first) and the copies in the other order. spare_row: one more
    row of blocks, wholly past C (their copies read zeros and write nothing), so the same results
    come from a grid the whole-GEMM match refuses: the block-by-block lowering."""
    accum = "int32" if dtype == "int8" else "float32"

    import tilecore.language as T

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), c_dtype)):
        with T.Kernel(T.ceildiv(M, bm) + int(spare_row), T.ceildiv(N, bn)) as (by, bx):
            A_s = T.alloc_shared((bm, bk), dtype)
            B_s = T.alloc_shared((bk, bn), dtype)
            C_f = T.alloc_fragment((bm, bn), accum)
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=3):
                T.copy(B[k * bk, bx * bn], B_s)
                T.copy(A[by * bm, k * bk], A_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C[by * bm, bx * bn])

    return main
