"""Inputs and GEMM kernels shared by the cpu GEMM tests."""
from __future__ import annotations

import ml_dtypes
import numpy as np

from tilecore.testing import gemm_kernel as shared_gemm_kernel

NP = {"float32": np.float32, "float64": np.float64, "float16": np.float16,
      "bfloat16": ml_dtypes.bfloat16, "int8": np.int8}


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
