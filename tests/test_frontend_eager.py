"""The eager style: @jit on a function whose own body is the kernel (T.const, declared tensors, T.empty)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilecore
import tilecore.language as T
from tilecore.diagnostics import TileCompileError, TileError


@tilecore.jit(target="reference")
def scaled_sum(X, Y, block: int, scale=2.0):
    R, C = T.const("R, C")
    X: T.Tensor((R, C), "float32")
    Y: T.Tensor((R, C), "float32")
    Out = T.empty((R, C), "float32")
    RowSum = T.empty((R,), "float32")
    with T.Kernel(T.ceildiv(R, block)) as bx:
        tile = T.alloc_fragment((block, C), "float32")
        other = T.alloc_fragment((block, C), "float32")
        sums = T.alloc_fragment((block,), "float32")
        T.copy(X[bx * block, 0], tile)  # rows past R read zeros (partial last tile)
        T.copy(Y[bx * block, 0], other)
        for i, j in T.Parallel(block, C):
            tile[i, j] = tile[i, j] * scale + other[i, j]
        T.reduce_sum(tile, sums, dim=1)
        T.copy(tile, Out[bx * block, 0])
        T.copy(sums, RowSum[bx * block])
    return RowSum, Out


@settings(max_examples=6, deadline=None)
@given(
    rows=st.integers(1, 20),
    cols=st.sampled_from([4, 8]),
    block=st.sampled_from([4, 8]),
    scale=st.sampled_from([1.0, 0.5, 3.0]),
)
def test_a_call_reads_the_sizes_from_the_arrays_and_returns_the_outputs_in_return_order(rows, cols, block, scale):
    rng = np.random.default_rng(rows)
    x = rng.random((rows, cols), dtype=np.float32)
    y = rng.random((rows, cols), dtype=np.float32)
    row_sum, out = scaled_sum(x, y, block, scale=scale)
    np.testing.assert_allclose(out, x * np.float32(scale) + y, rtol=1e-6)
    np.testing.assert_allclose(row_sum, (x * np.float32(scale) + y).sum(axis=1), rtol=1e-5)


def test_compile_takes_python_arguments_and_const_sizes_and_the_kernel_takes_the_tensors():
    kernel = scaled_sum.compile(R=6, C=8, block=4)
    assert [p.name for p in kernel.ir.params] == ["X", "Y", "Out", "RowSum"][:2] + ["RowSum", "Out"]
    x = np.ones((6, 8), np.float32)
    row_sum, out = kernel(x, x)
    np.testing.assert_array_equal(out, np.full((6, 8), 3.0, np.float32))
    np.testing.assert_array_equal(row_sum, np.full(6, 24.0, np.float32))
    assert scaled_sum.compile(R=6, C=8, block=4) is kernel  # memoized


def test_inconsistent_sizes_and_missing_tensors_are_clear_errors():
    with pytest.raises(TileError, match="T.const 'C' is 8 from one argument and 4 from 'Y'"):
        scaled_sum(np.ones((4, 8), np.float32), np.ones((4, 4), np.float32), 4)
    with pytest.raises(TileError, match="the tensor parameter 'Y' needs an array"):
        scaled_sum(np.ones((4, 8), np.float32), 3, 4)


def test_an_undeclared_parameter_without_a_value_is_named():
    @tilecore.jit(target="reference")
    def forgot(A, B):
        N = T.const("N")
        A: T.Tensor((N,), "float32")
        Out = T.empty((N,), "float32")
        with T.Kernel(1) as bx:
            for i in T.Parallel(N):
                Out[i] = A[i]
        return Out

    with pytest.raises(TileCompileError, match="the parameter 'B' got no Python value"):
        forgot.compile(N=4)


def test_a_const_not_in_any_input_shape_must_be_given_to_compile():
    @tilecore.jit(target="reference")
    def widen(A):
        N, W = T.const("N, W")
        A: T.Tensor((N,), "float32")
        Out = T.empty((N, W), "float32")
        with T.Kernel(N) as bx:
            for j in T.Parallel(W):
                Out[bx, j] = A[bx]
        return Out

    with pytest.raises(TileError, match=r"T.const W cannot be read.*widen.compile\(W=...\)"):
        widen(np.ones(3, np.float32))
    out = widen.compile(N=3, W=2)(np.arange(3, dtype=np.float32))
    np.testing.assert_array_equal(out, [[0, 0], [1, 1], [2, 2]])


def test_factories_returning_prim_funcs_are_unchanged():
    @tilecore.jit(out_idx=[-1], target="reference")
    def copy_factory(n):
        @T.prim_func
        def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
            with T.Kernel(1) as bx:
                T.copy(A, B)

        return main

    np.testing.assert_array_equal(copy_factory(4)(np.arange(4, dtype=np.float32)), np.arange(4))


def test_get_kernel_source_takes_the_call_arguments():
    x = np.ones((4, 8), np.float32)
    source = scaled_sum.get_kernel_source(x, x, 4)
    assert source == scaled_sum.compile(R=4, C=8, block=4).source and "scaled_sum" in source


def test_chained_python_assignments_and_get_kernel_source_by_compile_arguments():
    @tilecore.jit(target="reference")
    def tiles(A, width=4):
        N = T.const("N")
        lo = hi = width  # a chained assignment of a Python value
        A: T.Tensor((N,), "float32")
        Out = T.empty((N,), "float32")
        with T.Kernel(T.ceildiv(N, lo)) as bx:
            t = T.alloc_fragment((hi,), "float32")
            T.copy(A[bx * lo], t)
            T.copy(t, Out[bx * lo])
        return Out

    x = np.arange(10, dtype=np.float32)
    np.testing.assert_array_equal(tiles(x), x)
    assert tiles.get_kernel_source(N=10, width=4) == tiles.compile(N=10, width=4).source


def test_chained_assignment_of_a_kernel_value_is_an_error():
    with pytest.raises(TileCompileError, match="chained assignment"):

        @T.prim_func
        def k(A: T.Tensor((4,), "float32")):
            with T.Kernel(1) as bx:
                a = b = A[0]
                A[1] = a + b


def test_sizes_are_read_from_tensors_whose_other_dims_are_computed():
    @tilecore.jit(target="reference")
    def grouped(Q, K, groups=2):
        heads, seq = T.const("heads, seq")
        kv_heads = heads // groups  # computed from a T.const: known only once heads is
        Q: T.Tensor((heads,), "float32")
        K: T.Tensor((seq, kv_heads), "float32")
        Out = T.empty((seq, kv_heads), "float32")
        with T.Kernel(1) as bx:
            for s, h in T.Parallel(seq, kv_heads):
                Out[s, h] = K[s, h] + Q[h * groups]
        return Out

    q = np.arange(4, dtype=np.float32)
    k = np.ones((3, 2), np.float32)
    np.testing.assert_array_equal(grouped(q, k), k + q[::2])
