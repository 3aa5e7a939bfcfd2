"""`tilecore.lowering.block_order`: which block index runs backwards (the longest blocks first)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st


def test_causal_attention_runs_its_query_blocks_backwards():
    """block_order.trip_count_growth: causal attention's trip count grows with bx (axis 0, 8 query
    blocks); non-causal's is constant and a GEMM's K loop does not depend on the block."""
    import os
    import sys

    from tilecore.lowering.block_order import trip_count_growth

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
    import flash_attention

    def kernel(causal):
        return flash_attention.flashattn.prim_func(1, 2, 512, 64, causal, block_M=64, block_N=64).kernel

    assert trip_count_growth(kernel(True)) == (0, 8)
    assert trip_count_growth(kernel(False)) is None


def _launch_order(grid):
    """Every launch index of `grid` in the order the hardware hands blocks out (axis 0 fastest)."""
    import itertools

    return [list(reversed(r)) for r in itertools.product(*[range(n) for n in reversed(grid)])]


GRIDS = st.lists(st.integers(1, 6), min_size=2, max_size=3)


@settings(max_examples=150, deadline=None)
@given(grid=GRIDS, data=st.data())
def test_longest_first_in_groups_is_a_permutation_of_the_grid(grid, data):
    """logical_blocks with reverse_group > 1 gives every block of the grid exactly once, for any
    reversed axis and group size (the last group may hold fewer tuples of the other indices)."""
    import itertools

    from tilecore.lowering.block_order import BlockOrder, logical_blocks

    axis = data.draw(st.integers(0, len(grid) - 1))
    group = data.draw(st.integers(2, 8))
    order = BlockOrder(reverse_axis=axis, reverse_size=grid[axis], reverse_group=group)
    seen = [tuple(logical_blocks(order, raw, grid)) for raw in _launch_order(grid)]
    assert sorted(seen) == sorted(itertools.product(*[range(n) for n in grid]))


@settings(max_examples=100, deadline=None)
@given(grid=GRIDS, data=st.data())
def test_longest_first_in_groups_starts_every_group_with_its_longest_blocks(grid, data):
    """Within each group of `group` tuples of the other indices, the launch order hands out the
    reversed index from its largest value down, each value for every tuple of the group before the
    next smaller one; the groups take the tuples in order."""
    from tilecore.lowering.block_order import BlockOrder, logical_blocks

    axis = data.draw(st.integers(0, len(grid) - 1))
    group = data.draw(st.integers(2, 8))
    size = grid[axis]
    order = BlockOrder(reverse_axis=axis, reverse_size=size, reverse_group=group)
    blocks = [logical_blocks(order, raw, grid) for raw in _launch_order(grid)]
    others = [a for a in range(len(grid)) if a != axis]

    def tuple_id(b):
        flat, stride = 0, 1
        for a in others:
            flat, stride = flat + b[a] * stride, stride * grid[a]
        return flat

    tuples = len(blocks) // size
    at = 0
    for first in range(0, tuples, group):
        count = min(group, tuples - first)
        chunk = blocks[at : at + count * size]
        assert [b[axis] for b in chunk] == [size - 1 - i // count for i in range(count * size)]
        assert [tuple_id(b) for b in chunk] == [first + i % count for i in range(count * size)]
        at += count * size


def test_causal_attention_groups_its_longest_blocks_by_the_target():
    """kernel_block_order: with heavy_first_group_blocks = 64 the 8 query blocks of the example's
    causal attention are interleaved over groups of 8 (head, batch) tuples; 0 keeps the reversal
    within each tuple; non-causal attention keeps the launch order either way."""
    import os
    import sys

    from tilecore.lowering.block_order import BlockOrder, kernel_block_order

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
    import flash_attention

    def kernel(causal):
        return flash_attention.flashattn.prim_func(2, 4, 512, 64, causal, block_M=64, block_N=64).kernel

    assert kernel_block_order(kernel(True), 0, 64) == BlockOrder(reverse_axis=0, reverse_size=8, reverse_group=8)
    assert kernel_block_order(kernel(True), 0, 0) == BlockOrder(reverse_axis=0, reverse_size=8)
    assert kernel_block_order(kernel(False), 0, 64) == BlockOrder()


@settings(max_examples=40, deadline=None)
@given(grid=GRIDS, data=st.data())
def test_longest_first_in_groups_on_tir_matches_the_integers(grid, data):
    """The lowering computes logical_blocks on TIR expressions (TIR's floordiv / floormod, whose
    rounding is not Python's for negative operands): on constant launch indices they fold to what
    the integer form gives (min through TIR's folding min; the lowering's Min node is the same op)."""
    pytest.importorskip("tvm")
    from tvm import tirx as tx

    from tilecore.lowering.block_order import BlockOrder, IndexOps, logical_blocks

    axis = data.draw(st.integers(0, len(grid) - 1))
    group = data.draw(st.integers(2, 8))
    order = BlockOrder(reverse_axis=axis, reverse_size=grid[axis], reverse_group=group)
    ops = IndexOps(tx.floordiv, tx.floormod, tx.min, lambda e: e)
    dims = [tx.IntImm("int32", n) for n in grid]
    for raw in _launch_order(grid):
        got = logical_blocks(order, [tx.IntImm("int32", r) for r in raw], dims, ops)
        assert [int(e) for e in got] == logical_blocks(order, raw, grid)
