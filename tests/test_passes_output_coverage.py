"""Which outputs the kernel writes in full (allocated without the zero fill) and which it does not:
the examples' outputs are proven, partial, conditional, offset, accumulated and read outputs are not,
and on a family of tile copies the proof is exact (checked by running the reference interpreter
on an output poisoned with NaN)."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilecore
import tilecore.language as T
from tilecore.passes.output_coverage import writes_every_element

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "examples")
sys.path.insert(0, EXAMPLES)


def _output(func, name):
    return next(p for p in func.params if p.name == name)


def test_the_examples_write_their_outputs_in_full():
    import flash_attention
    import gemm
    import layernorm
    import softmax

    for func, out in (
        (gemm.matmul.prim_func(200, 200, 200, 64, 64, 32), "C"),
        (gemm.matmul.prim_func(4096, 4096, 4096), "C"),
        (softmax.softmax.prim_func(100, 64), "Y"),
        (layernorm.layernorm.prim_func(100, 256), "Y"),
        (flash_attention.flashattn.prim_func(1, 2, 100, 64, True), "Output"),
    ):
        assert writes_every_element(func, _output(func, out), {}), func.name


def tile_copy(M, N, bm, bn, grid_short=(0, 0), offset=0, guard=False, atomic=False, reads=False, dynamic=False):
    """Y[tile] = X[tile] over a (ceildiv(N, bn) - grid_short[0]) x (ceildiv(M, bm) - grid_short[1])
    grid, the store rows shifted by `offset`; optionally behind an `if`, as an atomic add, or
    reading Y first."""
    m = T.dynamic("m") if dynamic else M
    gx = max(1, T.ceildiv(N, bn) - grid_short[0])  # a grid dimension is at least 1
    gy = 0 if dynamic else max(1, T.ceildiv(M, bm) - grid_short[1])
    short = grid_short[1]

    @T.prim_func
    def main(X: T.Tensor((m, N), "float32"), Y: T.Tensor((m, N), "float32")):
        with T.Kernel(gx, T.ceildiv(m, bm) - short if dynamic else gy, threads=32) as (bx, by):
            t = T.alloc_fragment((bm, bn), "float32")
            T.copy(X[by * bm, bx * bn], t)
            if reads:
                T.copy(Y[by * bm, bx * bn], t)
            if atomic:
                T.atomic_add(Y[by * bm, bx * bn], t)
            elif guard:
                if bx > 0:
                    T.copy(t, Y[by * bm + offset, bx * bn])
            else:
                T.copy(t, Y[by * bm + offset, bx * bn])

    return main


def covered_by_a_run(func, M, N):
    """Whether a run on the reference interpreter overwrites every element of a NaN-poisoned Y."""
    kern = tilecore.compile(func, target="reference")
    x = np.random.default_rng(0).standard_normal((M, N)).astype(np.float32)
    y = np.full((M, N), np.nan, np.float32)
    kern(x, y)
    return not np.isnan(y).any()


@settings(max_examples=12, deadline=None)
@given(
    M=st.integers(1, 24),
    N=st.integers(1, 24),
    bm=st.sampled_from([1, 4, 8]),
    bn=st.sampled_from([4, 8]),
    short=st.sampled_from([(0, 0), (1, 0), (0, 1)]),
    offset=st.sampled_from([0, 0, 1]),
)
def test_the_proof_is_exact_for_tile_copies(M, N, bm, bn, short, offset):
    func = tile_copy(M, N, bm, bn, short, offset)
    proven = writes_every_element(func, _output(func, "Y"), {})
    assert proven == covered_by_a_run(func, M, N)


def test_dynamic_sizes_are_decided_per_call():
    func = tile_copy(0, 16, 8, 8, dynamic=True)
    assert writes_every_element(func, _output(func, "Y"), {"m": 20})
    assert writes_every_element(func, _output(func, "Y"), {"m": 0})  # nothing to write
    assert not writes_every_element(func, _output(func, "Y"), {})  # unknown size: not proven
    short = tile_copy(0, 16, 8, 8, grid_short=(0, 1), dynamic=True)
    assert not writes_every_element(short, _output(short, "Y"), {"m": 20})


@pytest.mark.parametrize("kind", ["guard", "atomic", "reads"])
def test_outputs_written_conditionally_accumulated_or_read_keep_the_zero_fill(kind):
    func = tile_copy(16, 16, 8, 8, **{kind: True})
    assert not writes_every_element(func, _output(func, "Y"), {})
    assert writes_every_element(tile_copy(16, 16, 8, 8), _output(func, "Y"), {})


def test_kernel_allocates_proven_outputs_without_the_zero_fill(monkeypatch):
    """The Kernel asks for an uninitialised output only where the proof holds; partial writes keep
    the documented zeros."""
    from tilecore.runtime import arrays

    asked = []
    real = arrays.allocator

    def recording(like, shape, dtype, space="cpu", zeroed=True):
        asked.append(zeroed)
        return real(like, shape, dtype, space, zeroed)

    monkeypatch.setattr(arrays, "allocator", recording)
    x = np.random.default_rng(1).standard_normal((16, 16)).astype(np.float32)
    full = tilecore.compile(tile_copy(16, 16, 8, 8), target="reference", out_idx=[-1])
    np.testing.assert_array_equal(full(x), x)
    half = tilecore.compile(tile_copy(16, 16, 8, 8, grid_short=(1, 0)), target="reference", out_idx=[-1])
    y = half(x)
    np.testing.assert_array_equal(y[:, :8], x[:, :8])
    np.testing.assert_array_equal(y[:, 8:], 0)
    assert asked == [False, True]
    assert full.writes_every_element(1) and not half.writes_every_element(1)
