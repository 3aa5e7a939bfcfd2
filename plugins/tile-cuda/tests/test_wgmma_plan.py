"""The Hopper wgmma plan (tile_cuda's WgmmaGemm rule on the toolkit's plan): which gemms take
warpgroup MMA, and that the shared-tile layout the lowering writes is the one wgmma's descriptors read."""

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tile_cuda.rules import cuda_plan
from tilecore.ir import nodes as N
from tilecore.ir.visitor import walk_stmts
from tilecore.lowering.simt_layout import MmaLayout, SharedLayout
from tilecore.testing import gemm_kernel


def _plan(func, has_wgmma=True):
    return cuda_plan(func, "sm_90a", {"wgmma": has_wgmma})


def _wgmma(plan):
    return plan.claims.get("wgmma", {})


def _gemms(func):
    return [s for s in walk_stmts(func.kernel.body) if isinstance(s, N.Gemm)]


def hardware_offset(rows, cols, eb, r, c):
    """Byte offset at which wgmma expects element (r, c) of a rows x cols tile (cols contiguous):
    the canonical layout of the PTX ISA / CUTLASS GMMA atoms -- 8-row atoms of W = min(row bytes,
    128) bytes, atoms stacked down the rows, then W-byte column blocks -- with the Swizzle<B,4,3>
    that the hardware applies to address bits: bits [4, 4+B) ^= bits [7, 7+B), W = 16 * 2**B."""
    w = min(cols * eb, 128)
    block, inner = divmod(c * eb, w)
    addr = block * rows * w + r * w + inner
    mask = w // 16 - 1
    return addr ^ (((addr >> 7) & mask) << 4)


@pytest.mark.parametrize(
    "rows,cols,eb",
    [(64, 16, 2), (64, 32, 2), (64, 64, 2), (128, 128, 2), (16, 256, 2), (64, 64, 1), (128, 128, 1), (32, 512, 1)],
)
def test_shared_layout_is_wgmma_canonical(rows, cols, eb):
    lay = SharedLayout((rows, cols), eb, swizzle=True, blocked=cols * eb > 128)
    seen = set()
    for r, c in itertools.product(range(rows), range(cols)):
        ours = lay.offset2d(r, c, lambda a, b: a // b, lambda a, b: a % b, lambda a, b: a ^ b) * eb
        assert ours == hardware_offset(rows, cols, eb, r, c), (r, c)
        seen.add(ours)
    assert len(seen) == rows * cols  # a permutation of the tile


@settings(max_examples=40, deadline=None)
@given(
    bm=st.sampled_from([64, 128]),
    bn=st.sampled_from([16, 32, 64, 128, 256]),
    bk=st.sampled_from([16, 32, 64, 128]),
    ta=st.booleans(),
    tb=st.booleans(),
    dtype=st.sampled_from(["float16", "bfloat16"]),
)
def test_gemm_tiles_take_wgmma_with_canonical_operands(bm, bn, bk, ta, tb, dtype):
    func = gemm_kernel(
        M=2 * bm,
        N=2 * bn,
        K=2 * bk,
        dtype=dtype,
        transpose_A=ta,
        transpose_B=tb,
        block_M=bm,
        block_N=bn,
        block_K=bk,
        threads=2 * bm,
    )
    plan = _plan(func)
    (g,) = _gemms(func)
    assert _wgmma(plan) == {id(g): (dtype, bn)}
    assert plan.mma_gemms[id(g)] == MmaLayout(bm, bn, bm // 16, 1)
    for name in ("A_s", "B_s"):
        lay = plan.layout[name]
        assert lay.swizzle and lay.blocked == (lay.shape[1] * 2 > 128)


@pytest.mark.parametrize("rows,cols,eb", [(128, 32, 2), (128, 64, 2), (256, 128, 2), (128, 128, 1)])
def test_row_blocks_give_each_m64_instruction_sixteen_rows_of_every_warp(rows, cols, eb):
    """With 32 rows per warp (row_blocks = 2), tile row 32w + 16i + k of a 128-row warpgroup slab is
    stored at the canonical place of row 64i + 16w + k: instruction i (rows 64i.. of the slab) gives
    warp w its rows 16i.. -- the MmaLayout(M, N, warps, 1) accumulator rows -- and the layout stays
    a permutation of the tile."""
    lay = SharedLayout((rows, cols), eb, swizzle=True, blocked=cols * eb > 128, row_blocks=2)
    ops = (lambda a, b: a // b, lambda a, b: a % b, lambda a, b: a ^ b)
    seen = set()
    for r, c in itertools.product(range(rows), range(cols)):
        slab, w, i, k = r // 128, (r % 128) // 32, (r % 32) // 16, r % 16
        physical = slab * 128 + 64 * i + 16 * w + k
        ours = lay.offset2d(r, c, *ops) * eb
        assert ours == hardware_offset(rows, cols, eb, physical, c), (r, c)
        seen.add(ours)
    assert len(seen) == rows * cols


@settings(max_examples=20, deadline=None)
@given(
    bn=st.sampled_from([32, 64, 128, 256]),
    bk=st.sampled_from([16, 32, 64]),
    tb=st.booleans(),
    dtype=st.sampled_from(["float16", "bfloat16"]),
    warpgroups=st.sampled_from([1, 2]),
)
def test_thirty_two_rows_per_warp_take_wgmma_with_row_blocks(bn, bk, tb, dtype, warpgroups):
    """TileLang's quickstart shape (128 x N on 128 threads; 256 x N on 256): two m64 instructions per
    warpgroup, A stored with row_blocks = 2, B as for 16 rows per warp."""
    bm, threads = 128 * warpgroups, 128 * warpgroups
    func = gemm_kernel(
        M=2 * bm, N=2 * bn, K=2 * bk, dtype=dtype, transpose_B=tb, block_M=bm, block_N=bn, block_K=bk, threads=threads
    )
    plan = _plan(func)
    (g,) = _gemms(func)
    assert _wgmma(plan) == {id(g): (dtype, bn)}
    assert plan.mma_gemms[id(g)] == MmaLayout(bm, bn, threads // 32, 1)
    assert plan.layout["A_s"].row_blocks == 2 and plan.layout["B_s"].row_blocks == 1


def test_wgmma_needs_sm90a_sixteen_or_thirty_two_rows_per_warp_and_k_major_int8():
    f = gemm_kernel(M=256, N=256, K=128, block_M=128, block_N=128, block_K=32, threads=256)
    assert not _wgmma(_plan(f, has_wgmma=False))
    # 64 rows per warp, or 32 with a transposed (column-major) A: mma.sync
    f = gemm_kernel(M=512, N=256, K=128, block_M=256, block_N=128, block_K=32, threads=128)
    assert not _wgmma(_plan(f))
    f = gemm_kernel(M=256, N=256, K=128, block_M=128, block_N=128, block_K=32, threads=128, transpose_A=True)
    assert not _wgmma(_plan(f))
    # int8 reads operands K-major only: A row-major and B transposed
    for ta, tb, ok in ((False, True, True), (False, False, False), (True, True, False)):
        f = gemm_kernel(
            M=128,
            N=128,
            K=128,
            dtype="int8",
            accum="int32",
            transpose_A=ta,
            transpose_B=tb,
            block_M=64,
            block_N=64,
            block_K=64,
            threads=128,
        )
        assert bool(_wgmma(_plan(f))) == ok, (ta, tb)
    # N = 8 gives 16-byte rows of B, which no descriptor swizzle describes
    f = gemm_kernel(M=128, N=16, K=64, block_M=64, block_N=8, block_K=16, threads=128)
    assert not _wgmma(_plan(f))


def test_flash_attention_takes_register_a_wgmma():
    import os
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples"))
    import flash_attention as fa

    func = fa.flashattn.prim_func(1, 2, 256, 128, False, block_M=64, block_N=64, num_stages=2)
    plan = _plan(func)
    gemms = _gemms(func)
    assert set(_wgmma(plan)) == {id(g) for g in gemms}
    pv = [g for g in gemms if plan.storage[g.a.buffer.name] == "reg"]
    assert len(pv) == 1 and plan.layout["V_shared"].blocked


OVERLAP = "wgmma_overlap_pipeline"


@settings(max_examples=20, deadline=None)
@given(
    stages=st.integers(1, 6),
    bk=st.sampled_from([32, 64]),
    warpgroups=st.sampled_from([1, 2]),
    rows_per_warp=st.sampled_from([16, 32]),
    option=st.sampled_from([False, True, "slack", "release"]),
)
def test_overlapped_main_loop_takes_shared_a_wgmma_loops_with_enough_stages(
    stages, bk, warpgroups, rows_per_warp, option
):
    """Option wgmma_overlap: a pipelined loop of stage copies + one wgmma gemm keeps a group in
    flight when it has >= 3 stages ("slack"/True: one stage of slack for the group in flight) or
    >= 2 ("release": a second barrier frees the stage instead); its staged tiles are multi-buffered
    exactly as for the plain async-copy pipeline."""
    threads = 128 * warpgroups
    bm = threads // 32 * rows_per_warp
    func = gemm_kernel(
        M=2 * bm, N=256, K=8 * bk, block_M=bm, block_N=128, block_K=bk, threads=threads, num_stages=stages
    )
    plan = cuda_plan(func, "sm_90a", {"wgmma_overlap": option})
    (loop,) = [s for s in walk_stmts(func.kernel.body) if isinstance(s, N.For) and s.kind == "pipelined"]
    assert _wgmma(plan)
    claimed = id(loop) in plan.claims.get(OVERLAP, {})
    assert claimed == (bool(option) and stages >= (2 if option == "release" else 3))
    plain = cuda_plan(func, "sm_90a", {"wgmma_overlap": False})
    assert OVERLAP not in plain.claims or not plain.claims[OVERLAP]
    default = cuda_plan(func, "sm_90a", {})  # no option: schedule "release"
    assert (id(loop) in default.claims.get(OVERLAP, {})) == (stages >= 2)
    for name in ("A_s", "B_s"):
        assert plan.layout[name].stages == plain.layout[name].stages == (stages if stages >= 2 else 1)


def test_overlapped_main_loop_needs_wgmma_and_a_loop_of_copies_and_one_gemm():
    func = gemm_kernel(M=256, N=256, K=256, block_M=128, block_N=128, block_K=64, threads=256, num_stages=4)
    on = {"wgmma_overlap": True}
    assert cuda_plan(func, "sm_90a", on).claims[OVERLAP]
    for arch, options in (("sm_80", on), ("sm_90a", {**on, "wgmma": False})):
        assert not cuda_plan(func, arch, options).claims.get(OVERLAP)
    with pytest.raises(ValueError, match="wgmma_overlap must be True, False or one of"):
        cuda_plan(func, "sm_90a", {"wgmma_overlap": "fast"})
    # FlashAttention's loop holds two gemms and the softmax: the plain pipeline keeps it
    import os
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples"))
    import flash_attention as fa

    fa_func = fa.flashattn.prim_func(1, 2, 256, 128, False, block_M=128, block_N=64, num_stages=3)
    plan = cuda_plan(fa_func, "sm_90a", on)
    assert _wgmma(plan) and not plan.claims.get(OVERLAP)
    assert plan.claims.get("async_copy_pipeline")


def test_overlapped_main_loop_needs_a_static_trip_count():
    """With a dynamic K the peeled last k-step would sit under an `if` (ptxas then serializes every
    wgmma): such a loop keeps the plain pipeline; the same kernel with a static K overlaps."""
    import tilecore.language as T

    # A transposed: its rows (k) are 256 elements whatever K is, so both copies stay asynchronous
    def kernel(k_dim):
        return gemm_kernel(
            M=256, N=256, K=k_dim, transpose_A=True, block_M=128, block_N=128, block_K=64, threads=256, num_stages=4
        )

    for k_dim, overlapped in ((T.dynamic("K"), False), (512, True)):
        plan = cuda_plan(kernel(k_dim), "sm_90a", {"wgmma_overlap": True})
        assert _wgmma(plan) and plan.claims.get("async_copy_pipeline")
        assert bool(plan.claims.get(OVERLAP)) == overlapped, k_dim
