"""The GEMM epilogue through a shared staging tile and TMA stores (tile_cuda/tma_store.py, option
tma_store): the staging layout is TMA's 128-byte swizzle and free of bank conflicts (pure Python),
which epilogues qualify and why not, what the generated code does (compile tier), and on a GPU the
same bits as the plain epilogue, persistent or not, ragged shapes included."""

import dataclasses

import kernels as KN
import pytest
from gemm_gpu import check_against
from hypothesis import given, settings
from hypothesis import strategies as st

from tile_cuda import compiler, plugin, tma_store, toolchain
from tile_cuda.rules import cuda_plan
from tile_cuda.warp_specialize import WarpSpecializedPipeline
from tilecore.ir import nodes as N
from tilecore.plugin.backend import TileModule

needs_nvcc = pytest.mark.skipif(toolchain.find_nvcc() is None, reason="no nvcc here")
ON = {"tma_store": True}


def gemm(M=1024, N_=1024, K=512, bm=128, bn=256, bk=64, stages=3, threads=256, **kw):
    return KN.gemm_kernel(M, N_, K, bm=bm, bn=bn, bk=bk, stages=stages, threads=threads, **kw)


def _store(func, options=ON):
    plan = cuda_plan(func, "sm_90a", options)
    info = next(iter(plan.claims.get(WarpSpecializedPipeline.name, {}).values()), None)
    return (info.tma_store if info else None), [n for n in plan.notes if n.startswith("TMA store")]


# ------------------------------------------------------------------ the staging layout (pure Python)


@settings(max_examples=20, deadline=None)
@given(
    rows=st.sampled_from([8, 64, 128, 256]), blocks=st.integers(1, 4), dtype=st.sampled_from(["float16", "bfloat16"])
)
def test_staging_layout_is_tma_128b_swizzle_and_conflict_free(rows, blocks, dtype):
    bc = 64  # 2-byte elements per 128-byte column block
    store = tma_store.TmaStore(None, None, rows, blocks * bc, dtype)
    xor = lambda a, b: a ^ b  # noqa: E731
    seen = set()
    for i in range(rows):
        for j in range(blocks * bc):
            # where TMA (SWIZZLE_128B, box of bc x rows per column block) reads element (i, j):
            # the box is dense, then address bits [4, 7) are XORed with bits [7, 10)
            dense = ((j // bc) * rows * bc + i * bc + j % bc) * 2
            tma_addr = dense ^ (((dense >> 7) & 7) << 4)
            assert tma_store.staging_element(store, i, j, xor) * 2 == tma_addr
            seen.add(tma_addr)
    assert len(seen) == rows * blocks * bc  # a permutation
    # a warp's store instruction in the MMA layout: rows r0..r0+7, 4 lanes x a 4-byte pair each
    for r0 in range(0, rows, 8):
        for c0 in range(0, blocks * bc, 8):
            banks = {
                tma_store.staging_element(store, r0 + lane // 4, c0 + 2 * (lane % 4), xor) * 2 // 4 % 32
                for lane in range(32)
            }
            assert len(banks) == 32


# ------------------------------------------------------------------ which epilogues


def test_plain_gemm_epilogue_takes_tma_stores():
    store, notes = _store(gemm())
    assert store is not None and (store.rows, store.cols, store.dtype) == (128, 256, "float16")
    assert store.spec.box == (64, 128) and store.spec.swizzle == 3 and store.spec.array == "C"
    assert store.spec.dims == (1024, 1024) and notes == ["TMA store: the epilogue through a 65536-byte staging tile"]
    user, _ = _store(KN.user_gemm(1000, 1000, 512, 128, 256, 64, 3, 256, "bfloat16"))  # examples/gemm.py
    assert user is not None and user.dtype == "bfloat16"
    assert _store(gemm(), {"tma_store": False}) == (None, [])


def test_auto_takes_k_loops_of_any_length():
    assert _store(gemm(K=512), {})[0] is not None  # 8 k-tiles of 64
    assert _store(gemm(K=4096, bk=32), {})[0] is not None  # 128 k-tiles of 32
    assert _store(gemm(K=4000), {})[0] is not None  # 63 k-tiles of 64 (the last one partial)
    assert _store(gemm(K=8192), {})[0] is not None  # 128 k-tiles of 64 (measured faster on the H100)
    assert _store(gemm(K=8192, ta=True), {})[0] is not None  # A transposed
    # one consumer warpgroup (warp specialization asked for): not measured, so only when asked
    quick = gemm(bn=128, bk=32, threads=128)
    store, notes = _store(quick, {"warp_specialize": True})
    assert store is None and notes == [
        "TMA store: no: 128 consumer threads (auto: at least 256; option tma_store=True forces it)"
    ]
    assert _store(quick, {"warp_specialize": True, "tma_store": True})[0] is not None
    assert _store(gemm(K=8192), ON)[0] is not None
    # auto says nothing about kernels of other forms, or where option tma is off
    assert _store(gemm(bn=128, bk=32, threads=128), {}) == (None, [])
    assert _store(gemm(), {"tma": False}) == (None, [])


def _wider_output(func, cols):
    """`func` storing into a C of `cols` columns (the loads unchanged)."""
    k = func.kernel
    old = func.params[-1]
    wide = dataclasses.replace(old, shape=(old.shape[0], cols))
    copy = k.body[-1]
    copy = dataclasses.replace(copy, dst=dataclasses.replace(copy.dst, buffer=wide))
    kernel = dataclasses.replace(k, body=k.body[:-1] + (copy,))
    return dataclasses.replace(func, params=func.params[:-1] + (wide,), body=(kernel,))


def test_other_epilogues_keep_their_global_stores_and_say_why():
    k = gemm().kernel
    c_f = next(s.buffer for s in k.body if isinstance(s, N.Alloc) and s.buffer.name == "C_f")
    twice = dataclasses.replace(k, body=k.body + (k.body[-1],))
    scaled = dataclasses.replace(k, body=k.body[:-1] + (N.Fill(KN.full(c_f), N.Const(1.0, "float32")), k.body[-1]))
    for kernel, reason in ((twice, "not one copy"), (scaled, "not one copy")):
        store, notes = _store(dataclasses.replace(gemm(), body=(kernel,)))
        assert store is None and reason in notes[0], notes
    for func, reason in (
        (gemm(out_dtype="float32"), "not a float16 or bfloat16"),
        (_wider_output(gemm(), 1028), "row pitch"),  # 1028 halves: 2056-byte rows
        (gemm(bm=128, bn=32, threads=256), "column blocks"),  # 64-byte rows
    ):
        store, notes = _store(func)
        assert store is None and notes and reason in notes[0], notes
    _, notes = _store(gemm(), {"tma_store": True, "tma": False})
    assert notes == ["TMA store: no: option tma is off"]
    _, notes = _store(gemm(bn=128, bk=32, threads=128))  # one warpgroup: not warp-specialized by default
    assert notes == ["TMA store: no: the kernel does not run warp-specialized"]


# ------------------------------------------------------------------ compile tier


def _codegen(func, **options):
    return plugin.tilecore_codegen(
        backend=plugin.make_backend(), module=TileModule(func, "cuda:sm_90a"), options=options
    )


def test_off_has_the_plain_epilogue():
    off = compiler.generate_source(gemm(), "sm_90a", {"tma_store": False})[0]
    default = compiler.generate_source(gemm(), "sm_90a", {})[0]
    assert "tc::tma_store_2d(" not in off and "*(half2*)(C_ptr" in off
    assert "tc::tma_store_2d(" in default and default == compiler.generate_source(gemm(), "sm_90a", ON)[0]


@pytest.mark.parametrize("persistent", [False, True])
def test_source_stages_the_tile_and_stores_it_with_tma(persistent):
    src, _, params, lk = compiler.generate_source(
        gemm(2000, 3000, 1000, predicated=True), "sm_90a", dict(ON, persistent=persistent)
    )
    body = src[src.index("__global__") :]
    assert body.count("tc::tma_store_2d(tc_tmap2,") == 4 and body.count("tc::bulk_commit()") == 1
    assert body.count("tc::st_shared_pair(") == 64  # 128 accumulator registers in pairs
    # waits: before writing the staging tile (each tile) and once at the end
    assert body.count("tc::bulk_wait_read()") == 2
    assert ("tmap", "tc_tmap2") in params and "C_ptr" not in body.split("{")[0]
    # the staging tile: after the tiles and mbarriers, 1024-byte aligned (half elements)
    assert "(half*)smem_pool_ptr)[74240]" in body and lk.dyn_smem_bytes == 148480 + 65536


def test_no_room_for_the_staging_tile_keeps_the_plain_epilogue():
    src, _, _, lk = compiler.generate_source(gemm(stages=4), "sm_90a", ON)  # 192 KB of stages
    assert "TMA store: no: no room for the 65536-byte staging tile" in lk.notes
    assert "tc::tma_store_2d(" not in src[src.index("__global__") :] and "*(half2*)(C_ptr" in src


@needs_nvcc
@pytest.mark.parametrize("dtype,persistent", [("float16", True), ("bfloat16", False)], ids=str)
def test_tma_store_kernel_compiles_with_the_store_map(dtype, persistent):
    art = _codegen(gemm(2000, 3000, 1000, dtype=dtype, predicated=True), persistent=persistent, **ON)
    assert art.blobs["cubin"][:4] == b"\x7fELF"
    maps = {m[0]: m for m in art.meta["tensor_maps"]}
    assert maps["tc_tmap2"][1:] == ["C", 9 if dtype == "bfloat16" else 6, 2, [3000, 2000], [64, 128], 3]


# ------------------------------------------------------------------ GPU


GPU_CASES = [
    # M, N, K, bn, stages, dtype, persistent, swizzle panel
    (1000, 1000, 512, 256, 3, "float16", True, 0),  # ragged, fewer tiles than SMs
    (4096, 4096, 512, 256, 3, "bfloat16", True, 8),  # 512 tiles, each block's stores drain under the next tile
    (2000, 3000, 1000, 256, 3, "float16", False, 4),  # one block per tile
    (1536, 2048, 256, 128, 4, "bfloat16", True, 0),  # 128-wide tiles (2 column blocks), 4 stages
]


@pytest.mark.gpu
@pytest.mark.parametrize("case", GPU_CASES, ids=lambda c: "x".join(map(str, c[:3])) + f"-{c[5]}-p{int(c[6])}")
def test_tma_store_gemm_matches_torch_and_the_plain_epilogue(case):
    M, N_, K, bn, stages, dtype, persistent, swizzle = case
    func = gemm(M, N_, K, bn=bn, stages=stages, dtype=dtype, predicated=True, swizzle_panel=swizzle)
    art = _codegen(func, persistent=persistent, **ON)
    assert "tc::tma_store_2d(" in art.source, art.meta["notes"]
    base = _codegen(func, tma_store=False)
    check_against(art, base, M, N_, K, dtype)  # the same rounding, every element written once, none past C


@pytest.mark.gpu
def test_tma_store_through_compile_with_an_out_idx_output():
    """A fresh output per call: the C FastCall replaces the store map's address every call."""
    import torch

    import tilecore

    opts = dict(ON, persistent=True)
    kern = tilecore.compile(KN.user_gemm(1000, 1000, 512, 128, 256, 64, 3, 256), target="cuda", out_idx=[-1], **opts)
    assert "tc::tma_store_2d(" in kern.artifact.source
    for _ in range(3):
        a = torch.randn(1000, 512, device="cuda", dtype=torch.float16)
        b = torch.randn(512, 1000, device="cuda", dtype=torch.float16)
        c = kern(a, b)
        ref = a.double() @ b.double()
        assert ((c.double() - ref).norm() / ref.norm()).item() < 2e-3
