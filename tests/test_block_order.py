"""`tilecore.lowering.block_order`: which block index runs backwards (the longest blocks first)."""


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
