"""TMA multicast in clusters of two blocks (tile_cuda/cluster.py, option tma_multicast): which block
indices the two blocks of a cluster share under each block order, which copies multicast, the
half boxes cover the tile exactly, the generated code (compile tier), and results on a GPU that
are bit for bit those of the build without clusters."""

import itertools

import kernels as K
import numpy as np
import pytest
from examples_util import example
from hypothesis import given, settings
from hypothesis import strategies as st

from tile_cuda import cluster as CL
from tile_cuda import plugin, toolchain
from tile_cuda.rules import cuda_plan
from tile_cuda.tma import TMA_CLAIM, Box, TmaLayout, smem_image, tma_layout
from tilecore.lowering.block_order import BlockOrder, logical_blocks
from tilecore.lowering.simt_layout import SharedLayout
from tilecore.plugin.backend import TileModule

needs_nvcc = pytest.mark.skipif(toolchain.find_nvcc() is None, reason="no nvcc here")
MC = {"warp_specialize": True, "tma": True, "tma_multicast": True}


def _multicast(func, **options):
    """(the warp-specialized loop's plan, the plan's notes) with option tma_multicast."""
    plan = cuda_plan(func, "sm_90a", {**MC, **options})
    (info,) = plan.claims["warp_specialized"].values()
    return info, plan


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 12),
    st.integers(1, 12),
    st.sampled_from([BlockOrder(), BlockOrder(panel=2), BlockOrder(panel=3), BlockOrder(panel=4, col=True)]),
)
def test_every_block_order_visits_each_tile_once(gx, gy, order):
    """`logical_blocks` on ints (what the cluster check evaluates) is a permutation of the grid, as
    the lowering's block order must be."""
    seen = {tuple(logical_blocks(order, [x, y], [gx, gy])) for x in range(gx) for y in range(gy)}
    assert seen == set(itertools.product(range(gx), range(gy)))


def test_the_default_panel_order_pairs_blocks_of_one_column():
    """A 1024x1024 GEMM of 128x128 tiles (8x8 blocks, the default panel of 8 block rows): the two
    blocks of a cluster compute tiles in one column of C, so they share B's tile; in launch order
    (gemm_block_panel=0) they share a row, so A's."""
    func = K.gemm_kernel(1024, 1024, 1024, bm=128, bn=128, bk=32, stages=3, threads=128)
    assert CL.shared_block_indices(func.kernel, 8) == {"bx"}
    assert CL.shared_block_indices(func.kernel, 0) == {"by"}
    info, plan = _multicast(func)
    assert [info.copies[i].dst.buffer.name for i in info.multicast.copies] == ["B_s"]
    assert "TMA multicast: clusters of 2 blocks share the loads of B_s" in plan.notes
    info, _ = _multicast(func, gemm_block_panel=0)
    assert [info.copies[i].dst.buffer.name for i in info.multicast.copies] == ["A_s"]


def test_kernels_that_do_not_fit_clusters_say_why():
    odd = K.gemm_kernel(1024, 1152, 512, bm=128, bn=128, threads=128)  # 9 blocks along x
    info, plan = _multicast(odd)
    assert info.multicast is None and "TMA multicast: no: the grid's x extent 9 is odd" in plan.notes
    # 8 x 9 blocks in panels of 8 rows: the last panel has one row, its neighbours differ in both indices
    straddles = K.gemm_kernel(1152, 1024, 512, bm=128, bn=128, threads=128)
    assert CL.shared_block_indices(straddles.kernel, 8) == set()
    info, plan = _multicast(straddles)
    assert info.multicast is None
    assert "TMA multicast: no: no TMA stage copy reads the same tile in both blocks of a cluster" in plan.notes
    info, plan = _multicast(odd, tma_multicast=False)
    assert info.multicast is None and not any("multicast" in n for n in plan.notes)


def test_causal_attention_blocks_of_a_cluster_run_different_trip_counts():
    """Non-causal attention's clusters share K and V. Causal attention's do not: under the default
    block order (the longest query blocks first, in groups of heads) the two blocks of a cluster are
    one query block of two heads, reading different K and V; with the query blocks reversed within
    each head alone (heavy_first_group_blocks=0) they are two query blocks of different trip counts."""
    fa = example("flash_attention")
    for causal, multicast in ((False, ["K_shared", "V_shared"]), (True, None)):
        info, plan = _multicast(fa.flashattn.prim_func(1, 2, 512, 128, causal, block_M=128, block_N=128, num_stages=2))
        names = info.multicast and [info.copies[i].dst.buffer.name for i in info.multicast.copies]
        assert names == multicast, plan.notes
    assert "TMA multicast: no: no TMA stage copy reads the same tile in both blocks of a cluster" in plan.notes
    causal = fa.flashattn.prim_func(1, 2, 512, 128, True, block_M=128, block_N=128, num_stages=2)
    info, plan = _multicast(causal, heavy_first_group_blocks=0)
    assert info.multicast is None
    assert "TMA multicast: no: the trip count differs between the blocks of a cluster" in plan.notes


def _split_layouts():
    """Staged shared layouts whose TMA boxes split into row halves (the planner's rule)."""
    return st.builds(
        lambda rows, row_bytes, eb, rb: SharedLayout(
            (rows * rb, row_bytes // eb), eb, swizzle=True, blocked=row_bytes > 128, row_blocks=rb
        ),
        st.sampled_from([16, 32, 64, 128]),
        st.sampled_from([32, 64, 128, 256]),
        st.sampled_from([1, 2, 4]),
        st.sampled_from([1, 2]),
    )


@settings(max_examples=40, deadline=None)
@given(_split_layouts())
def test_the_two_half_boxes_write_the_whole_tile(lay):
    """Block 0's and block 1's halves of every box (`rank_box`) together put every element where
    the whole box puts it, once: each block's consumers read the layout the wgmma descriptors expect."""
    tl = tma_layout(lay)
    if tl is None or tl.box_rows % 2 or (tl.box_rows // 2) % CL.SWIZZLE_ROWS:
        return
    half = tl.box_rows // 2
    boxes = []
    for b in tl.boxes:
        for rank in range(CL.CLUSTER):
            row, elem = CL.rank_box(b, rank, half, tl.box_cols)
            boxes.append(Box(row, b.col, elem))
    halves = smem_image(lay, TmaLayout(half, tl.box_cols, tl.swizzle_bytes, tuple(boxes)))
    assert halves == smem_image(lay, tl)


def test_multicast_maps_carry_half_boxes():
    func = K.gemm_kernel(1024, 1024, 1024, bm=128, bn=128, bk=32, stages=3, threads=128)
    loads = {t.copy.dst.buffer.name: t for t in _multicast(func)[1].claims[TMA_CLAIM].values()}
    assert loads["B_s"].spec.box == (64, 16) and loads["B_s"].bytes == 32 * 128 * 2  # half the rows, whole bytes
    assert loads["A_s"].spec.box == (32, 16)  # A keeps its own loads


def _artifact(func, options):
    return plugin.tilecore_codegen(
        backend=plugin.make_backend(), module=TileModule(func, "cuda:sm_90a"), options=options
    )


@needs_nvcc
def test_multicast_gemm_compiles_to_cluster_code():
    """TileLang's quickstart GEMM: the kernel is launched in clusters of two; B's two column
    blocks are loaded as four half boxes, two per block, each into both blocks; the consumer
    warps release B's stages in both blocks; nvcc assembles all of it."""
    from tile_cuda.compiler import compile_ptx

    func = K.gemm_kernel(1024, 1024, 1024, bm=128, bn=128, bk=32, stages=3, threads=128)
    art = _artifact(func, {**MC, "tma_store": False})
    src = art.source
    assert 'extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__' in src
    assert art.meta["kernel_params"] == [("ptr", "C"), ("tmap", "tc_tmap0"), ("tmap", "tc_tmap1")]
    assert art.meta["tensor_maps"][1] == ["tc_tmap1", "B", 6, 2, [1024, 1024], [64, 16], 3]
    assert src.count("tc::tma_load_multicast<2>((&") == 2 and src.count("tc::tma_load<2>((&") == 8
    assert src.count("tc::mbar_arrive_warp_cluster((&") == 1 and src.count("tc::cluster_sync();") == 1
    # the producer's tail: it waits for the last releases of the multicast stages instead of a
    # cluster barrier before the exit
    tail = src[src.rindex("tc::tma_load_multicast<2>((&") :]
    assert "for (int" in tail and "tc::mbar_wait((&" in tail and "cluster_sync" not in tail
    ptx = compile_ptx(src, "sm_90a")
    assert ptx.count("mbarrier::complete_tx::bytes.multicast::cluster") == 2
    assert ptx.count("barrier.cluster.arrive.release") == 1 and "mapa.shared::cluster.u32" in ptx
    # CTA-scope remote arrivals and waits: cluster scope compiles to a MEMBAR.ALL.GPU per arrival and
    # an L1 invalidation per wait (SASS, session 16): session 15's 3-6x slowdown, gone in session 17
    assert "mbarrier.arrive.shared::cluster.b64" in ptx and ".release.cluster.shared::cluster" not in ptx
    assert ".acquire.cluster" not in ptx
    plain = _artifact(func, {**MC, "tma_store": False, "tma_multicast": False}).source
    assert "__cluster_dims__" not in plain and "cluster_sync" not in plain


# ------------------------------------------------------------------------------ GPU


@pytest.mark.gpu
@pytest.mark.parametrize(
    "case",
    [
        dict(M=1024, Nn=1024, Kk=32 * 13, bk=32, threads=128),  # quickstart: B shared, every stage refilled
        dict(M=1024, Nn=1024, Kk=32 * 13, bk=32, threads=128, gemm_block_panel=0),  # A shared
        dict(M=1000, Nn=1000, Kk=1000, bk=32, threads=128),  # partial tiles in M, N and K
        dict(M=512, Nn=1024, Kk=64 * 12, bn=256, bk=64, threads=256, dtype="bfloat16", stages=4),
    ],
)
def test_multicast_gemm_matches_the_build_without_clusters(case):
    from gemm_gpu import check_against

    opts = {k: case.pop(k) for k in ("gemm_block_panel",) if k in case}
    dtype = case.pop("dtype", "float16")
    bm, bn, stages = 128, case.pop("bn", 128), case.pop("stages", 3)
    M, Nn, Kk = case.pop("M"), case.pop("Nn"), case.pop("Kk")
    func = K.gemm_kernel(
        M,
        Nn,
        Kk,
        bm=bm,
        bn=bn,
        stages=stages,
        dtype=dtype,
        predicated=bool(M % bm or Nn % bn or Kk % case["bk"]),
        **case,
    )
    art = _artifact(func, {**MC, **opts})
    assert "__cluster_dims__" in art.source, art.meta["notes"]
    base = _artifact(func, {**MC, **opts, "tma_multicast": False})
    check_against(art, base, M, Nn, Kk, dtype, calls=3)


@pytest.mark.gpu
def test_multicast_attention_matches_numpy():
    """Non-causal attention: the query blocks of a cluster share K and V (ping-pong consumers)."""
    import torch

    import tilecore

    fa = example("flash_attention")
    kern = tilecore.compile(
        fa.flashattn.prim_func(1, 2, 512, 128, False, block_M=128, block_N=128, num_stages=2),
        target="cuda",
        out_idx=[3],
        **MC,
    )
    assert "__cluster_dims__" in kern.artifact.source
    q, k, v = (torch.randn(1, 512, 2, 128, device="cuda", dtype=torch.float16) for _ in range(3))
    out = kern(q, k, v).double().cpu().numpy()
    ref = fa.reference(*(x.cpu().numpy() for x in (q, k, v)), False)
    assert np.abs(out - ref).max() < 2e-2
