"""Row softmax: each block loads block_M full rows into a fragment, reduces, exponentiates, normalizes.

exp(x - max) is computed as exp2((x - max) * log2(e)), as GPU kernels do.
"""

from __future__ import annotations

import math
import os
import sys

import numpy as np

import tilecore
import tilecore.language as T

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import build, compare, main, random_array, tolerance_for  # noqa: E402

LOG2E = 1.0 / math.log(2.0)


@tilecore.jit(out_idx=[-1])
def softmax(M, N, block_M=32, dtype="float32", accum="float32"):
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            x = T.alloc_fragment((block_M, N), accum)
            row_max = T.alloc_fragment((block_M,), accum)
            row_sum = T.alloc_fragment((block_M,), accum)
            T.copy(X[bx * block_M, 0], x)
            T.reduce_max(x, row_max, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = T.exp2((x[i, j] - row_max[i]) * LOG2E)
            T.reduce_sum(x, row_sum, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] / row_sum[i]
            T.copy(x, Y[bx * block_M, 0])

    return main


def reference(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def check(target=None):
    """Softmax over rows against numpy, on fresh random inputs (a partial last block included)."""
    rng = np.random.default_rng()
    results = []
    for M, N, block_M, dtype in [(256, 512, 32, "float32"), (100, 384, 32, "float32"), (128, 256, 16, "float16")]:
        kernel = build(softmax, target, M, N, block_M, dtype=dtype)
        x = random_array(rng, (M, N), dtype, -4.0, 4.0)
        y = kernel(x)
        results.append(
            compare(f"softmax {M}x{N} block_M={block_M} {dtype}", y, reference(x), tolerance_for(dtype), kernel)
        )
    return results


if __name__ == "__main__":
    sys.exit(main(check, __doc__))
