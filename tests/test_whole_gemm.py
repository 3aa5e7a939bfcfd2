"""Which kernel grids compute one whole GEMM (tilecore.lowering.whole_gemm.match): examples/gemm.py's
matmul at any tile sizes, block-order hints allowed, anything more refused."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilecore.language as T
from tilecore.ir import nodes as N
from tilecore.lowering.whole_gemm import match


def matmul(M, N_, K, bm, bn, bk, acc="float32", swizzle=False, epilogue=False, rows_on_x=False, dtype="float16"):
    """examples/gemm.py's matmul, optionally with T.use_swizzle before the clear or an epilogue after the loop."""

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N_), dtype), C: T.Tensor((M, N_), dtype)):  # type: ignore[valid-type]
        with T.Kernel(T.ceildiv(N_, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), dtype)
            B_s = T.alloc_shared((bk, bn), dtype)
            C_f = T.alloc_fragment((bm, bn), acc)
            if swizzle:
                T.use_swizzle(panel_size=4)
            T.clear(C_f)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_f)
            if epilogue:
                for i, j in T.Parallel(bm, bn):
                    C_f[i, j] = C_f[i, j] * 2.0
            T.copy(C_f, C[by * bm, bx * bn])

    k = main.kernel
    if rows_on_x:
        k = dataclasses.replace(k, grid=k.grid[::-1], block_vars=k.block_vars[::-1])
        return dataclasses.replace(main, body=(k,))
    return main


@settings(max_examples=30, deadline=None)
@given(
    M=st.integers(1, 700),
    N_=st.integers(1, 700),
    K=st.integers(1, 300),
    bm=st.sampled_from([16, 64, 128]),
    bn=st.sampled_from([16, 64, 256]),
    bk=st.sampled_from([16, 32, 64]),
    swizzle=st.booleans(),
    rows_on_x=st.booleans(),
)
def test_examples_matmul_is_one_whole_gemm_at_any_tiles(M, N_, K, bm, bn, bk, swizzle, rows_on_x):
    found = match(matmul(M, N_, K, bm, bn, bk, swizzle=swizzle, rows_on_x=rows_on_x).kernel)
    assert found is not None
    assert (found.M, found.N, found.K, found.acc, found.c.dtype) == (M, N_, K, "float32", "float16")
    assert (found.bm, found.bn, found.bk, found.row, found.col) == (bm, bn, bk, "by", "bx")


@pytest.mark.parametrize(
    "func,why",
    [
        (matmul(256, 256, 64, 64, 64, 32, epilogue=True), "an epilogue on the accumulator"),
        (matmul(256, 256, 64, 64, 64, 32, acc="float16"), "float16 sums: the tiling would change them"),
    ],
)
def test_more_than_a_gemm_is_refused(func, why):
    assert match(func.kernel) is None, why


def test_a_grid_with_a_spare_block_is_refused():
    func = matmul(256, 256, 64, 64, 64, 32)
    k = func.kernel
    bigger = dataclasses.replace(k, grid=(k.grid[0], N.Const(5, "int32")))  # 5 row blocks of 64 for 256 rows
    assert match(bigger) is None
