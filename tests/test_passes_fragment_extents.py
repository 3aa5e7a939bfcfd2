"""fragment_extents: a fragment indexed only by its T.Parallel loop's variables holds the loop's extent."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilecore
import tilecore.language as T
from tilecore.diagnostics import TileRuntimeError
from tilecore.ir import nodes as N
from tilecore.ir.visitor import walk
from tilecore.passes.fragment_extents import fragment_extents


def broadcast_through_fragment(declared: int, width: int):
    """Each block writes its A value into `width` slots of a fragment declared with `declared`."""

    @T.prim_func
    def broadcast(A: T.Tensor((3,), "float32"), O: T.Tensor((3, width), "float32")):
        with T.Kernel(3) as bx:
            f = T.alloc_fragment((declared,), "float32")
            for i in T.Parallel(width):
                f[i] = A[bx] + i
            for i in T.Parallel(width):
                O[bx, i] = f[i] * 2

    return broadcast


def fragment_shapes(func: N.PrimFunc) -> dict:
    return {n.buffer.name: n.buffer.shape for n in walk(func) if isinstance(n, N.Alloc)}


@settings(max_examples=3, deadline=None)
@given(declared=st.integers(1, 8), width=st.sampled_from([4, 8, 16]))
def test_a_loop_indexed_fragment_keeps_one_value_per_iteration(declared, width):
    kernel = tilecore.compile(broadcast_through_fragment(declared, width), target="reference")
    a = np.array([1.0, -2.0, 5.5], np.float32)
    out = np.zeros((3, width), np.float32)
    kernel(a, out)
    np.testing.assert_array_equal(out, 2 * (a[:, None] + np.arange(width, dtype=np.float32)))


def test_the_pass_widens_only_where_the_loop_is_larger():
    widened = fragment_extents(broadcast_through_fragment(2, 8), None)
    assert fragment_shapes(widened) == {"f": (8,)}
    wide = broadcast_through_fragment(16, 8)
    assert fragment_extents(wide, None) is wide  # already large enough: unchanged


def test_a_fragment_with_a_tile_operation_keeps_its_shape_and_the_bounds_error():
    @T.prim_func
    def filled(A: T.Tensor((3,), "float32"), O: T.Tensor((3, 8), "float32")):
        with T.Kernel(3) as bx:
            f = T.alloc_fragment((2,), "float32")
            T.fill(f, 0)
            for i in T.Parallel(8):
                f[i] = A[bx]
            for i in T.Parallel(8):
                O[bx, i] = f[i]

    assert fragment_shapes(fragment_extents(filled, None)) == {"f": (2,)}
    kernel = tilecore.compile(filled, target="reference")
    with pytest.raises(TileRuntimeError, match="index out of bounds: f"):
        kernel(np.ones(3, np.float32), np.zeros((3, 8), np.float32))


def test_other_index_expressions_keep_the_declared_shape():
    @T.prim_func
    def reversed_read(A: T.Tensor((3,), "float32"), O: T.Tensor((3, 8), "float32")):
        with T.Kernel(3) as bx:
            f = T.alloc_fragment((2,), "float32")
            for i in T.Parallel(8):
                f[i] = A[bx]
            for i in T.Parallel(8):
                O[bx, i] = f[7 - i]

    assert fragment_shapes(fragment_extents(reversed_read, None)) == {"f": (2,)}
