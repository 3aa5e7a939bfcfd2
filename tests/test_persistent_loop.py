"""`T.Persistent`: TileLang's persistent tile loop (docs/semantics.md). Every tile of the domain is
visited exactly once over the blocks of a wave, in the grouped order TileLang defines."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilecore
import tilecore.language as T
from tilecore.diagnostics import TileCompileError


def visit_counts(d0: int, d1: int, wave: int, group: int):
    """counts[x, y] += 1 and order[x, y] = the wave that visits (x, y), for each tile."""

    @T.prim_func
    def visits(counts: T.Tensor((d0, d1), "int32"), order: T.Tensor((d0, d1), "int32")):
        with T.Kernel(wave, threads=32) as block_id:
            for bx, by in T.Persistent([d0, d1], wave, block_id, group):
                T.atomic_add(counts[bx, by], 1)
                order[bx, by] = block_id

    return visits


def expected_blocks(d0: int, d1: int, wave: int, group: int) -> np.ndarray:
    """TileLang's mapping, written out: tile t = w * wave + block in the grouped domain."""
    g = max(1, min(group, d1))
    padded = -(-d1 // g) * d0 * g
    owner = np.full((d0, d1), -1, np.int32)
    for t in range(padded):
        x, y = (t // g) % d0, (t // g) // d0 * g + t % g
        if y < d1:
            owner[x, y] = t % wave
    return owner


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 5), st.integers(1, 9), st.integers(1, 7), st.integers(1, 10))
def test_every_tile_once_in_tilelangs_order(d0, d1, wave, group):
    kernel = tilecore.compile(visit_counts(d0, d1, wave, group), target="reference")
    counts, order = np.zeros((d0, d1), np.int32), np.full((d0, d1), -1, np.int32)
    kernel(counts, order)
    assert (counts == 1).all()
    np.testing.assert_array_equal(order, expected_blocks(d0, d1, wave, group))


def test_persistent_gemm_on_cpu_matches_numpy():
    """The TileLang persistent GEMM form (a 1-D grid of `wave` blocks looping over 2-D tiles)."""
    M, N, K, bm, bn, bk, wave = 96, 80, 64, 32, 16, 32, 4

    @T.prim_func
    def gemm(A: T.Tensor((M, K), "float32"), B: T.Tensor((K, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(wave, threads=128) as block_id:
            A_s = T.alloc_shared((bm, bk), "float32")
            B_s = T.alloc_shared((bk, bn), "float32")
            C_f = T.alloc_fragment((bm, bn), "float32")
            for bx, by in T.Persistent([T.ceildiv(M, bm), T.ceildiv(N, bn)], wave, block_id):
                T.clear(C_f)
                for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                    T.copy(A[bx * bm, k * bk], A_s)
                    T.copy(B[k * bk, by * bn], B_s)
                    T.gemm(A_s, B_s, C_f)
                T.copy(C_f, C[bx * bm, by * bn])

    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((M, K), np.float32), rng.standard_normal((K, N), np.float32)
    for target in ("reference", "cpu"):
        c = np.zeros((M, N), np.float32)
        tilecore.compile(gemm, target=target)(a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_names_must_match_the_domain():
    with pytest.raises(TileCompileError, match="needs 2 loop variable"):

        @T.prim_func
        def bad(C: T.Tensor((4, 4), "int32")):
            with T.Kernel(2) as block_id:
                for bx in T.Persistent([2, 2], 2, block_id):
                    C[bx, 0] = 1

        tilecore.compile(bad, target="reference")
