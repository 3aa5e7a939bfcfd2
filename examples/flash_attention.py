"""FlashAttention forward (causal and not), written like TileLang's example_mha_fwd.

Per block of block_M queries: loop over KV blocks with T.Pipelined, S = Q K^T
(gemm with transpose_B), an online softmax in base 2 (scores scaled by
log2(e)/sqrt(dim), exp2), fragment row reductions, and O += P V (second gemm).
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


@tilecore.jit(out_idx=[3])
def flashattn(
    batch, heads, seq_len, dim, is_causal, block_M=64, block_N=64, num_stages=1, dtype="float16", threads=None
):
    # one warp per 16 query rows (4 warps per 64 rows): the layout Hopper's wgmma computes in
    threads = threads or max(128, 2 * block_M)
    scale = (1.0 / dim) ** 0.5 * 1.44269504  # log2(e): softmax through exp2
    shape = [batch, seq_len, heads, dim]
    accum_dtype = "float"
    partial_kv = seq_len % block_N != 0  # the last KV block reaches past seq_len: mask it

    @T.prim_func
    def main(
        Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype), V: T.Tensor(shape, dtype), Output: T.Tensor(shape, dtype)
    ):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=threads) as (bx, by, bz):
            Q_shared = T.alloc_shared([block_M, dim], dtype)
            K_shared = T.alloc_shared([block_N, dim], dtype)
            V_shared = T.alloc_shared([block_N, dim], dtype)
            O_shared = T.alloc_shared([block_M, dim], dtype)
            acc_s = T.alloc_fragment([block_M, block_N], accum_dtype)
            acc_s_cast = T.alloc_fragment([block_M, block_N], dtype)
            acc_o = T.alloc_fragment([block_M, dim], accum_dtype)
            scores_max = T.alloc_fragment([block_M], accum_dtype)
            scores_max_prev = T.alloc_fragment([block_M], accum_dtype)
            scores_scale = T.alloc_fragment([block_M], accum_dtype)
            scores_sum = T.alloc_fragment([block_M], accum_dtype)
            logsum = T.alloc_fragment([block_M], accum_dtype)

            T.copy(Q[bz, bx * block_M : (bx + 1) * block_M, by, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, -T.infinity(accum_dtype))

            loop_range = (
                T.min(T.ceildiv(seq_len, block_N), T.ceildiv((bx + 1) * block_M, block_N))
                if is_causal
                else T.ceildiv(seq_len, block_N)
            )

            for k in T.Pipelined(loop_range, num_stages=num_stages):
                T.copy(K[bz, k * block_N : (k + 1) * block_N, by, :], K_shared)
                if is_causal:
                    for i, j in T.Parallel(block_M, block_N):
                        acc_s[i, j] = T.if_then_else(bx * block_M + i >= k * block_N + j, 0, -T.infinity(accum_dtype))
                elif partial_kv:
                    for i, j in T.Parallel(block_M, block_N):
                        acc_s[i, j] = T.if_then_else(k * block_N + j < seq_len, 0, -T.infinity(accum_dtype))
                else:
                    T.clear(acc_s)
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(V[bz, k * block_N : (k + 1) * block_N, by, :], V_shared)
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
                T.gemm(acc_s_cast, V_shared, acc_o, policy=T.GemmWarpPolicy.FullRow)
                T.reduce_sum(acc_s, scores_sum, dim=1)
                for i in T.Parallel(block_M):
                    logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= logsum[i]
            T.copy(acc_o, O_shared)
            T.copy(O_shared, Output[bz, bx * block_M : (bx + 1) * block_M, by, :])

    return main


def reference(q, k, v, is_causal):
    """softmax(Q K^T / sqrt(dim)) V in float64, layout [batch, seq, heads, dim]."""
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    scores = np.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(q.shape[-1])
    if is_causal:
        s = q.shape[1]
        scores = np.where(np.tril(np.ones((s, s), bool)), scores, -np.inf)
    scores = scores - scores.max(axis=-1, keepdims=True)
    p = np.exp(scores)
    p /= p.sum(axis=-1, keepdims=True)
    return np.einsum("bhqk,bkhd->bqhd", p, v)


def check(target=None):
    """FlashAttention forward against numpy: B=1, H=2, S=256, D=64, causal and not, fp16 and fp32."""
    rng = np.random.default_rng()
    results = []
    cases = [
        (1, 2, 256, 64, False, "float16"),
        (1, 2, 256, 64, True, "float16"),
        (1, 2, 256, 64, False, "float32"),
        (1, 2, 256, 64, True, "float32"),
        (2, 1, 200, 32, False, "float32"),
    ]
    for batch, heads, seq_len, dim, causal, dtype in cases:
        kernel = build(flashattn, target, batch, heads, seq_len, dim, causal, dtype=dtype)
        shape = (batch, seq_len, heads, dim)
        q, k, v = (random_array(rng, shape, dtype) for _ in range(3))
        out = kernel(q, k, v)
        name = f"flash_attention B={batch} H={heads} S={seq_len} D={dim} {'causal' if causal else 'full'} {dtype}"
        results.append(compare(name, out, reference(q, k, v, causal), tolerance_for(dtype), kernel))
    return results


if __name__ == "__main__":
    sys.exit(main(check, __doc__))
