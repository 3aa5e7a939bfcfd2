"""@T.macro and Python helpers called with kernel values are inlined where they are called."""

from __future__ import annotations

import numpy as np
import pytest

import tilecore
import tilecore.language as T
from tilecore.diagnostics import TileCompileError


def same_band(i, j, width):
    """A plain helper: Python at parse time, inlined when given kernel values."""
    band_i = i // width
    return band_i == j // width


@T.macro
def scale_tile(tile, factor, rows, cols):
    for i, j in T.Parallel(rows, cols):
        tile[i, j] = tile[i, j] * factor


@T.macro
def first_row_sum(tile, out):
    T.reduce_sum(tile, out, dim=1)
    return out[0] * 2.0


@T.prim_func
def banded(A: T.Tensor((4, 8), "float32"), B: T.Tensor((4, 8), "float32"), S: T.Tensor((1,), "float32")):
    with T.Kernel(1) as bx:
        t = T.alloc_fragment((4, 8), "float32")
        sums = T.alloc_fragment((4,), "float32")
        T.copy(A, t)
        scale_tile(t, 3.0, 4, 8)
        for i, j in T.Parallel(4, 8):
            t[i, j] = T.if_then_else(same_band(i, j, 2), t[i, j], -1.0)
        S[0] = first_row_sum(t, sums)
        T.copy(t, B)


@pytest.mark.parametrize("backend", ["reference", "cpu", "npu"])
def test_macros_and_helpers_inline_on_every_backend(backend):
    pytest.importorskip({"reference": "tilecore", "cpu": "tile_cpu", "npu": "tile_npu"}[backend])
    a = np.arange(32, dtype=np.float32).reshape(4, 8)
    band = (np.arange(4)[:, None] // 2) == (np.arange(8)[None, :] // 2)
    want = np.where(band, a * 3, -1.0).astype(np.float32)
    b, s = tilecore.compile(banded, target=backend, out_idx=[1, 2])(a)
    np.testing.assert_array_equal(b, want)
    np.testing.assert_allclose(s, [want[0].sum() * 2])


def test_helpers_still_run_in_python_on_python_values():
    assert same_band(1, 0, 2) is np.True_ or same_band(1, 0, 2) is True


def test_an_early_return_is_a_clear_error():
    def pick(x):
        if x > 0:
            return x
        return -x

    with pytest.raises(TileCompileError, match="only a final `return` can be inlined"):

        @T.prim_func
        def k(A: T.Tensor((4,), "float32")):
            with T.Kernel(1) as bx:
                for i in T.Parallel(4):
                    A[i] = pick(A[i])


def test_recursion_is_a_clear_error():
    def forever(x):
        return forever(x + 1)

    with pytest.raises(TileCompileError, match="recursion cannot be inlined"):

        @T.prim_func
        def k(A: T.Tensor((4,), "float32")):
            with T.Kernel(1) as bx:
                for i in T.Parallel(4):
                    A[i] = forever(A[i])


def permuted_rows(buf):
    """A helper that only reads a buffer's shape: it runs in Python (building a layout)."""
    return T.Layout(buf.shape, lambda i, j: [j % 2, i, j // 2])


@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_custom_layouts_are_checked_hints_that_never_change_results(backend):
    pytest.importorskip({"reference": "tilecore", "cpu": "tile_cpu"}[backend])

    @T.prim_func
    def with_layouts(A: T.Tensor((4, 8), "float32"), B: T.Tensor((4, 8), "float32")):
        with T.Kernel(1) as bx:
            s = T.alloc_shared((4, 8), "float32")
            f = T.alloc_fragment((4, 8), "float32")
            T.annotate_layout(
                {
                    A: permuted_rows(A),
                    s: T.make_swizzled_layout(s),
                    f: T.Fragment((4, 8), forward_thread_fn=lambda i, j: i * 8 + j),
                }
            )
            T.copy(A, s)
            T.copy(s, f)
            T.copy(f, B)

    a = np.arange(32, dtype=np.float32).reshape(4, 8)
    np.testing.assert_array_equal(tilecore.compile(with_layouts, target=backend, out_idx=[1])(a), a)


def test_a_layout_of_another_shape_is_an_error():
    with pytest.raises(TileCompileError, match=r"the layout's shape \(8, 4\) is not the shape of A"):

        @T.prim_func
        def bad(A: T.Tensor((4, 8), "float32")):
            with T.Kernel(1) as bx:
                T.annotate_layout({A: T.Layout((8, 4), lambda i, j: [j, i])})
