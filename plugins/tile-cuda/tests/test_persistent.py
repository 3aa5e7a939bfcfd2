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
    assert "outside the loop uses a tile the loop fills" in persistent.choose_persistent(
        reads_stage, loop, False, 90, "on"
    )
    # warp-specialized, not the plain GEMM: the general form with persistent=True; with "auto" only
    # for per-tile loads (option tile_loads), and this one has a single wave of tiles anyway
    info, notes = _claim(dataclasses.replace(base, body=(no_clear,)), {"tile_loads": False})
    assert info is not None and info.persistent is None and "not cleared" in _note(notes)
    assert "auto: another loop only when its trip count grows" in _note(notes)
    info, notes = _claim(dataclasses.replace(base, body=(no_clear,)), {})
    assert info.persistent is None and "32 tiles fit in one wave" in _note(notes)
    info, notes = _claim(dataclasses.replace(base, body=(no_clear,)), ON)
    assert info.persistent == persistent.PersistentGrid(32, 32, None, snake=False)
    # not warp-specialized: off, another architecture, one warpgroup (the overlapped wgmma loop)
    for func, options, arch in (
        (base, {"warp_specialize": False}, "sm_90a"),
        (base, {}, "sm_80"),
        (gemm(1024, 1024, 1024, bn=128, bk=32, threads=128), {}, "sm_90a"),
    ):
        info, notes = _claim(func, dict(options, **ON), arch)
        assert info is None and _note(notes) == "persistent: no: the kernel does not run warp-specialized"
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


def _attention(causal, batch=1, heads=2, seq=512, **kw):
    from examples_util import example

    fa = example("flash_attention").flashattn
    return fa.prim_func(batch, heads, seq, 128, causal, block_M=128, block_N=128, num_stages=2, **kw)


def test_attention_takes_the_general_form():
    """Causal attention (trip counts grow with the query block) is persistent by default once its
    tiles fill more than a wave, its rounds in snake order; non-causal too, with the producer's
    per-tile Q loads (option tile_loads "auto"; without them measured no faster,
    benchmarks/results/gpu-session21, with them faster, gpu-session22); one wave stays one block
    per tile."""
    info, notes = _claim(_attention(True, batch=4, heads=32, seq=4096), {})
    assert info.persistent == persistent.PersistentGrid(4096, 132, None, snake=True) and info.pingpong
    assert info.deferred is not None  # the deferred second gemm runs under the tile loop too
    info, notes = _claim(_attention(False, batch=4, heads=32, seq=4096), {})
    assert info.persistent == persistent.PersistentGrid(4096, 132, None, snake=False) and info.tile_loads
    info, notes = _claim(_attention(False, batch=4, heads=32, seq=4096), {"tile_loads": False})
    assert info.persistent is None and "auto: another loop only when" in _note(notes)
    # a cp.async producer loads no tiles: "auto" keeps one block per tile and says why
    info, notes = _claim(_attention(False, batch=4, heads=32, seq=4096), {"tma": False})
    assert info.persistent is None and "no per-tile loads" in _note(notes)
    info, notes = _claim(_attention(False, batch=4, heads=32, seq=4096), ON)
    assert info.persistent == persistent.PersistentGrid(4096, 132, None, snake=False)
    info, notes = _claim(_attention(True), {})  # 8 tiles
    assert info.persistent is None and "8 tiles fit in one wave of 132 blocks" in _note(notes)
    assert _claim(_attention(True), ON)[0].persistent == persistent.PersistentGrid(8, 8, None, snake=True)
    assert _claim(_attention(True, batch=4, heads=32, seq=4096), {"persistent": False})[0].persistent is None


@settings(max_examples=80, deadline=None)
@given(tiles=st.integers(1, 3000), sms=st.integers(1, 200), snake=st.booleans())
def test_rounds_run_every_tile_once(tiles, sms, snake):
    """The general form's rounds (`tile_of`, the function that builds the TIR): each tile once;
    in snake order a block's tiles alternate between the front and the back of its rounds."""
    grid = persistent.PersistentGrid(tiles, min(tiles, sms), None, snake=snake)
    rounds = -(-tiles // grid.blocks)
    runs = {b: [t for i in range(rounds) if (t := persistent.tile_of(b, i, grid)) < tiles] for b in range(grid.blocks)}
    seen = sorted(t for ts in runs.values() for t in ts)
    assert seen == list(range(tiles))
    if snake and rounds >= 2 and grid.blocks > 1:
        # block 0 runs the first tile of round 0 and the last of round 1
        assert runs[0][:2] == [0, 2 * grid.blocks - 1][: len(runs[0][:2])]


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


@pytest.mark.parametrize("defer", [True, False])
def test_causal_attention_source_runs_rounds_with_a_ring_counter(defer):
    """Consumers and producer each loop over 32 rounds of 132 tiles (snake order: odd rounds take
    tile 131 - blockIdx.x), skip tiles past the grid, carry the ring's position in a counter that
    each tile's loop advances by its own trip count, and the consumers meet at their barrier first."""
    src, _, _, lk = compiler.generate_source(
        _attention(True, batch=4, heads=32, seq=4096), "sm_90a", {"defer_gemm": defer}
    )
    assert [g.value for g in lk.grid] == [132]
    body = src[src.index("__global__") :]
    assert len(re.findall(r"for \(int (\w+) = 0; \1 < 32; \+\+\1\) \{", body)) == 2  # the rounds
    assert body.count("(131 - ((int)blockIdx.x))") >= 2  # snake order
    counters = re.findall(r"(tile_ring\w*)\[0\] = 0;", body)
    assert len(counters) == 2
    for ring in counters:  # advanced by 32 - (query block): the causal trip count of the tile
        assert re.search(ring + r"\[0\] = \(\(" + ring + r"\[0\] \+ 32\) - ", body), ring
    first_tile = body.index("< 4096) {") if "< 4096) {" in body else body.index("< 1024) {")
    assert body[first_tile : first_tile + 3000].count("tc::named_sync(1, 256);") >= 1


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


# causal, batch, heads, seq, options: more tiles than blocks in every case (2-4 per block)
ATTN_GPU_CASES = [
    (True, 4, 8, 2048, {}),  # 512 tiles, by default: snake rounds, the deferred second gemm
    (True, 2, 8, 2000, {"defer_gemm": False}),  # a partial last query / key block; the plain ping-pong loop
    (False, 2, 8, 2048, ON),  # non-causal: equal tiles, round-robin
    (True, 4, 8, 1024, {"tma": False, "persistent": True}),  # the cp.async producer; 256 tiles
    (True, 4, 8, 2048, {"tile_loads": True}),  # Q loaded per tile by the producer (ws_tile_loads.py)
    (False, 2, 8, 2000, {"persistent": True, "tile_loads": True}),  # ... with a partial last Q tile
]


@pytest.mark.gpu
@pytest.mark.parametrize("case", ATTN_GPU_CASES, ids=lambda c: f"causal{c[0]}-b{c[1]}h{c[2]}s{c[3]}-{len(c[4])}")
def test_persistent_attention_matches_torch_and_the_one_block_per_tile_kernel(case):
    """Each tile runs the same instructions as its own block would: the same bits; and the result
    is attention's (float32 SDPA in torch)."""
    causal, batch, heads, seq, options = case
    func = _attention(causal, batch=batch, heads=heads, seq=seq)
    art = _codegen(func, **options)
    base = _codegen(func, **dict(options, persistent=False))
    assert art.meta["grid_py"] == ["132"], art.meta["notes"]
    assert base.meta["grid_py"] != ["132"]
    same, err = run_attention_pair(case, art, base)
    assert same
    assert err < ATTN_TOLERANCE


ATTN_TOLERANCE = 2e-2  # max |error| against torch's float32 SDPA for fp16 inputs


def run_attention_pair(case, art, base):
    """(same bits, max |error| of `art` against torch's float32 SDPA): `art` and `base` run on
    the same fresh random inputs of attention case `case` (also benchmarks/persistent_attention_check.py)."""
    import torch
    import torch.nn.functional as F

    causal, batch, heads, seq, _ = case
    q, k, v = (torch.randn(batch, seq, heads, 128, device="cuda", dtype=torch.float16) for _ in range(3))
    outs = []
    for a in (art, base):
        out = torch.full_like(q, float("nan"))
        plugin.tilecore_launcher(backend=plugin.make_backend(), artifact=a)([q, k, v, out], {})
        outs.append(out)
    torch.cuda.synchronize()
    ref = F.scaled_dot_product_attention(*(x.transpose(1, 2).float() for x in (q, k, v)), is_causal=causal)
    return torch.equal(outs[0], outs[1]), (outs[0].float() - ref.transpose(1, 2)).abs().max().item()
