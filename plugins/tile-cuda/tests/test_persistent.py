"""Persistent warp-specialized GEMMs (tile_cuda/persistent.py, option persistent): which kernels
qualify and why not (planning, pure Python), that every tile is run exactly once (the tile loop's
arithmetic), what the generated code does (compile tier: the tile loop, the capped grid, the ring's
counters carried across tiles, persistent=False the code of before), and on a GPU the same bits as
the non-persistent kernel and the right product for ragged shapes, tile counts below and above the
grid, fp16 / bf16, with and without T.use_swizzle, TMA and cp.async producers."""

import dataclasses
import re

import kernels as KN
import pytest
from gemm_gpu import check_against
from hypothesis import given, settings
from hypothesis import strategies as st

from tile_cuda import compiler, persistent, plugin, split_k, toolchain
from tile_cuda.rules import cuda_plan
from tile_cuda.warp_specialize import WarpSpecializedPipeline
from tilecore.ir import nodes as N
from tilecore.plugin.backend import TileModule

needs_nvcc = pytest.mark.skipif(toolchain.find_nvcc() is None, reason="no nvcc here")
ON = {"persistent": True}


def gemm(M=4096, N_=4096, K=4096, bm=128, bn=256, bk=64, stages=3, threads=256, **kw):
    """The best H200 config (128 x 256 x 64, 3 stages, two consumer warpgroups): warp-specialized."""
    return KN.gemm_kernel(M, N_, K, bm=bm, bn=bn, bk=bk, stages=stages, threads=threads, **kw)


def _claim(func, options, arch="sm_90a"):
    plan = cuda_plan(func, arch, options)
    claims = plan.claims.get(WarpSpecializedPipeline.name, {})
    return next(iter(claims.values()), None), plan.notes


def _note(notes):
    return next(n for n in notes if n.startswith("persistent:"))


# ------------------------------------------------------------------ planning (pure Python)


def test_the_plain_warp_specialized_gemm_becomes_persistent():
    info, notes = _claim(gemm(), ON)
    assert info.persistent == persistent.PersistentGrid(tiles=512, blocks=132, ktiles=64)
    assert _note(notes) == "persistent: 132 blocks over 512 tiles (option persistent=True)"
    small, notes = _claim(gemm(1000, 1000, 512, predicated=True), ON)  # 4 x 8 tiles: one block each
    assert small.persistent == persistent.PersistentGrid(tiles=32, blocks=32, ktiles=8)


def test_option_auto_and_off():
    for options in ({}, {"persistent": "auto"}):  # auto is the default
        info, notes = _claim(gemm(), options)  # 512 tiles: 3.9 waves of 132
        assert info.persistent.blocks == 132 and _note(notes).endswith("(option persistent='auto')")
    info, notes = _claim(gemm(1000, 1000, 512, predicated=True), {"persistent": "auto"})
    assert info.persistent is None and "32 tiles fit in one wave of 132 blocks" in _note(notes)
    info, notes = _claim(gemm(4096, 4224, 512, predicated=True), {})  # 32 x 17 = 544 tiles: past 4 waves (528)
    assert info.persistent is None and "544 tiles are more than 4 waves of 132 blocks" in _note(notes)
    assert _claim(gemm(4096, 4096, 512), {})[0].persistent.tiles == 512
    info, notes = _claim(gemm(), {"persistent": False})
    assert info.persistent is None and not any(n.startswith("persistent") for n in notes)
    # auto wants the TMA-store epilogue (the configuration measured); True does not
    info, notes = _claim(gemm(), {"tma_store": False})
    assert info.persistent is None and "the epilogue stores from registers" in _note(notes)
    assert _claim(gemm(), {"tma_store": False, "persistent": True})[0].persistent.tiles == 512
    with pytest.raises(ValueError, match="persistent must be"):
        persistent.persistent_mode("yes")


def test_kernels_that_do_not_qualify_keep_one_block_per_tile_and_say_why():
    base = gemm(1024, 1024, 1024)
    k = base.kernel
    a_s = next(s.buffer for s in k.body if isinstance(s, N.Alloc) and s.buffer.name == "A_s")
    reads_stage = dataclasses.replace(k, body=k.body + (N.Fill(KN.full(a_s), N.Const(0, "float16")),))
    no_clear = dataclasses.replace(k, body=tuple(s for s in k.body if not isinstance(s, N.Fill)))
    loop = next(s for s in k.body if isinstance(s, N.For))
    assert "use a tile the loop fills" in persistent.choose_persistent(reads_stage, loop, False, 90, "on")
    info, notes = _claim(dataclasses.replace(base, body=(no_clear,)), ON)  # warp-specialized, not plain
    assert info is not None and info.persistent is None and "not cleared" in _note(notes)
    # not warp-specialized: off, another architecture, one warpgroup (the overlapped wgmma loop)
    for func, options, arch in (
        (base, {"warp_specialize": False}, "sm_90a"),
        (base, {}, "sm_80"),
        (gemm(1024, 1024, 1024, bn=128, bk=32, threads=128), {}, "sm_90a"),
    ):
        info, notes = _claim(func, dict(options, **ON), arch)
        assert info is None and _note(notes) == "persistent: no: the kernel does not run warp-specialized"
    # attention: a warp-specialized loop that is not the plain GEMM's
    from examples_util import example

    fa = example("flash_attention").flashattn.prim_func(1, 2, 512, 128, False, block_M=128, block_N=128, num_stages=2)
    info, notes = _claim(fa, ON)
    assert info is not None and info.persistent is None and "no:" in _note(notes)
    # a kernel that split-K split (the plain form with the split hint) keeps its grid
    split, _ = split_k.split_k_rewrite(KN.gemm_kernel(16, 1024, 2048, bm=64, bn=64, bk=64, threads=256), 90, 4)
    loop = next(s for s in split.kernel.body if isinstance(s, N.For))
    assert persistent.choose_persistent(split.kernel, loop, False, 90, "on") == "split-K splits the kernel"


def test_dynamic_shapes_keep_one_block_per_tile():
    import tilecore.language as T

    m = T.dynamic("m")

    @T.prim_func
    def dyn(A: T.Tensor((m, 512), "float16"), B: T.Tensor((512, 512), "float16"), C: T.Tensor((m, 512), "float16")):
        with T.Kernel(2, T.ceildiv(m, 128), threads=256) as (bx, by):
            A_s = T.alloc_shared((128, 64), "float16")
            B_s = T.alloc_shared((64, 256), "float16")
            C_f = T.alloc_fragment((128, 256), "float32")
            T.clear(C_f)
            for k in T.Pipelined(8, num_stages=3):
                T.copy(A[by * 128, k * 64], A_s)
                T.copy(B[k * 64, bx * 256], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C[by * 128, bx * 256])

    info, notes = _claim(dyn, ON)
    assert info is not None and info.persistent is None
    assert "not known at compile time" in _note(notes)


@settings(max_examples=60, deadline=None)
@given(dims=st.lists(st.integers(1, 40), min_size=1, max_size=3), sms=st.integers(1, 200))
def test_every_tile_runs_exactly_once(dims, sms):
    """The tile loop's arithmetic (`tile_count`, `block_indices`, the same functions that build
    the TIR) visits each tile of the grid once, over min(tiles, SMs) blocks."""
    from math import prod

    tiles = prod(dims)
    grid = persistent.PersistentGrid(tiles, min(tiles, sms), 5)
    seen = []
    for b in range(grid.blocks):
        count = persistent.tile_count(b, grid)
        assert count >= 1
        for i in range(count):
            idx = persistent.block_indices(b + i * grid.blocks, dims)
            assert all(0 <= x < d for x, d in zip(idx, dims))
            seen.append(tuple(idx))
    assert len(seen) == tiles == len(set(seen))


# ------------------------------------------------------------------ compile tier


def _codegen(func, **options):
    return plugin.tilecore_codegen(
        backend=plugin.make_backend(), module=TileModule(func, "cuda:sm_90a"), options=options
    )


def test_off_is_the_code_of_before():
    for func in (gemm(8192, 8192, 512), gemm(1000, 1000, 512, predicated=True, swizzle_panel=4)):
        default = compiler.generate_source(func, "sm_90a", {})  # auto: 2048 / 32 tiles stay one per block
        off = compiler.generate_source(func, "sm_90a", {"persistent": False})
        assert default[0] == off[0] and default[2] == off[2]
        assert [g.value for g in off[3].grid] == [g.value for g in func.kernel.grid]
    # a kernel that does not qualify is unchanged by the option
    quick = gemm(1024, 1024, 1024, bn=128, bk=32, threads=128)
    assert compiler.generate_source(quick, "sm_90a", ON)[0] == compiler.generate_source(quick, "sm_90a", {})[0]


def _ring_indices(src):
    """The ring iteration expressions of the stage waits: `((i * KT) + k)` (the tile loop's
    counter times the k-tiles per tile, plus the k-step), as TVM prints them."""
    ring = r"mbar_wait\(\(&\(\(\(uint64_t\*\)smem_pool_ptr\)\[\(\(\(\((\w+) \* (\d+)\) \+ (\w+)\) % (\d)\)"
    return re.findall(ring, src)


@pytest.mark.parametrize("tma", [True, False])
def test_persistent_source_loops_over_tiles_with_the_ring_carried(tma):
    src, _, _, lk = compiler.generate_source(gemm(swizzle_panel=8), "sm_90a", dict(ON, tma=tma))
    assert [g.value for g in lk.grid] == [132]
    # consumers and producer: one tile loop each, over this block's tiles
    tile_loop = r"for \(int \w+ = 0; \w+ < \(\(\(511 - \(\(int\)blockIdx.x\)\) / 132\) \+ 1\); \+\+\w+\)"
    assert len(re.findall(tile_loop, src)) == 2
    waits = _ring_indices(src)
    # the full waits (consumers) and the empty waits (producer) index the ring by i * 64 + k, mod 3 stages
    assert len(waits) >= 3 and {(w[1], w[3]) for w in waits} == {("64", "3")}
    assert len({w[0] for w in waits}) == 2  # the consumers' tile counter and the producer's
    # the mbarriers are initialized once, before any loop
    first_loop = src.index("for (int", src.index("__global__"))
    assert src.count("tc::mbar_init(") == 12 and src.rindex("tc::mbar_init(") < first_loop
    assert "blockIdx.y" not in src[src.index("__global__") :]


@needs_nvcc
@pytest.mark.parametrize(
    "dtype,tma,swizzle", [("float16", True, 8), ("bfloat16", True, 0), ("float16", False, 4)], ids=str
)
def test_persistent_kernel_compiles(dtype, tma, swizzle):
    art = _codegen(gemm(2000, 3000, 1000, dtype=dtype, predicated=True, swizzle_panel=swizzle), tma=tma, **ON)
    assert art.meta["grid_py"] == ["132"] and art.blobs["cubin"][:4] == b"\x7fELF"
    assert "persistent: 132 blocks over 192 tiles (option persistent=True)" in art.meta["notes"]
    assert ("tc::tma_load<" in art.source) == tma


# ------------------------------------------------------------------ GPU


GPU_CASES = [
    # M, N, K, bm, bn, bk, stages, dtype, swizzle panel, tma
    (1000, 1000, 512, 128, 256, 64, 3, "float16", 0, True),  # ragged, 32 tiles < 132 blocks
    (4096, 4096, 512, 128, 256, 64, 3, "float16", 8, True),  # 512 tiles, T.use_swizzle(8)
    (2000, 3000, 1000, 128, 256, 64, 3, "bfloat16", 4, True),  # ragged M, N, K; 192 tiles
    (4096, 2048, 256, 128, 128, 64, 4, "float16", 0, False),  # cp.async producer; k-tiles = stages
    (1536, 4608, 192, 128, 256, 64, 3, "bfloat16", 8, True),  # 3 k-tiles = stages, 216 tiles
    (4096, 4096, 64, 128, 256, 64, 3, "float16", 0, True),  # one k-tile per tile: the ring turns across tiles
    (4000, 2000, 1000, 128, 256, 64, 3, "float16", 2, True),  # 4000-like ragged M, N, K; 256 tiles
]


@pytest.mark.gpu
@pytest.mark.parametrize("case", GPU_CASES, ids=lambda c: "x".join(map(str, c[:3])) + f"-{c[7]}-sw{c[8]}-tma{c[9]}")
def test_persistent_gemm_matches_torch_and_the_one_block_per_tile_kernel(case):
    M, N_, K, bm, bn, bk, stages, dtype, swizzle, tma = case
    func = gemm(M, N_, K, bm=bm, bn=bn, bk=bk, stages=stages, dtype=dtype, predicated=True, swizzle_panel=swizzle)
    # the plain epilogue (test_tma_store.py checks persistent blocks with the TMA-store one)
    art = _codegen(func, tma=tma, tma_store=False, **ON)
    base = _codegen(func, tma=tma, tma_store=False)
    tiles = -(-M // bm) * -(-N_ // bn)
    assert art.meta["grid_py"] == [str(min(tiles, 132))], art.meta["notes"]
    # each tile's sums are the same instructions in the same order: the same bits
    check_against(art, base, M, N_, K, dtype)


@pytest.mark.gpu
def test_persistent_user_gemm_through_compile():
    """examples/gemm.py's matmul (no T.use_swizzle: the target's block panel) through
    tilecore.compile with an out_idx output and the C FastCall on repeated calls."""
    import torch

    import tilecore

    kern = tilecore.compile(KN.user_gemm(2048, 2560, 768, 128, 256, 64, 3, 256), target="cuda", out_idx=[-1], **ON)
    assert kern.artifact.meta["grid_py"] == ["132"], kern.artifact.meta["notes"]  # 160 tiles
    for _ in range(3):
        a = torch.randn(2048, 768, device="cuda", dtype=torch.float16)
        b = torch.randn(768, 2560, device="cuda", dtype=torch.float16)
        c = kern(a, b)
        ref = a.double() @ b.double()
        assert ((c.double() - ref).norm() / ref.norm()).item() < 2e-3
