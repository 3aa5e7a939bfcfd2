"""GEMM on the simulated NPU: cycles and engine utilization for num_stages = 1, 2, 3.

    python plugins/tile-npu/examples/gemm_cycles.py [M N K]

Checks the result against numpy first, then prints the simulator's report per
launch. With num_stages=1 every k-step waits for its DMA before the matrix
engine starts; with 2 or more the DMA of step k+1 runs while step k computes.
"""

import sys

import numpy as np

import tile_npu
import tilecore
import tilecore.language as T


def matmul(M, N, K, bM=128, bN=128, bK=32, stages=2, dtype="float16", accum="float32"):
    @T.prim_func
    def gemm(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=128) as (bx, by):
            A_s = T.alloc_shared((bM, bK), dtype)
            B_s = T.alloc_shared((bK, bN), dtype)
            C_f = T.alloc_fragment((bM, bN), accum)
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, bK), num_stages=stages):
                T.copy(A[by * bM, k * bK], A_s)
                T.copy(B[k * bK, bx * bN], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C[by * bM, bx * bN])

    return gemm


def main(argv):
    M, N, K = (int(x) for x in argv[:3]) if len(argv) >= 3 else (512, 512, 512)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    want = a.astype(np.float32) @ b.astype(np.float32)
    base = None
    for stages in (1, 2, 3):
        kernel = tilecore.compile(matmul(M, N, K, stages=stages), target="npu", out_idx=[-1])
        c = kernel(a, b)
        err = float(np.max(np.abs(c.astype(np.float32) - want)) / np.max(np.abs(want)))
        assert err < 1e-2, err
        rep = tile_npu.report(kernel)
        base = base or rep.cycles
        print(f"num_stages={stages}: {rep}  ({base / rep.cycles:.2f}x vs num_stages=1, max rel err {err:.1e})")


if __name__ == "__main__":
    main(sys.argv[1:])
