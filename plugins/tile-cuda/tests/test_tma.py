"""TMA loads in the warp-specialized producer (tile_cuda/tma.py, option tma): the boxes write exactly
the shared layout the cp.async path writes, which copies qualify (the ordered rules), the tensor-map
description the launcher encodes, the generated code (compile tier), and results on a GPU."""

import itertools

import kernels as K
import numpy as np
import pytest
from examples_util import example
from hypothesis import given, settings
from hypothesis import strategies as st
from kernels import c, full, region

from tile_cuda import plugin, toolchain
from tile_cuda.rules import cuda_plan
from tile_cuda.target import cuda_target
from tile_cuda.tma import TMA_CLAIM, TMA_RULES, encode_arguments, smem_image, tma_copy, tma_layout
from tilecore.ir import nodes as N
from tilecore.lowering.simt_layout import SharedLayout
from tilecore.plugin.backend import TileModule

needs_nvcc = pytest.mark.skipif(toolchain.find_nvcc() is None, reason="no nvcc here")
WS = {"warp_specialize": True, "tma": True}  # explicit: the GPU tests hold TMA whatever the default


def _offset(lay, r, col):
    """Byte offset of (r, col) as the lowering addresses it (`SimtMemory.smem_offset`): swizzled tiles
    through `SharedLayout.offset2d`, the others row-major."""
    if not lay.swizzle:
        return (r * lay.shape[1] + col) * lay.elem_bytes
    return lay.offset2d(r, col, lambda a, b: a // b, lambda a, b: a % b, lambda a, b: a ^ b) * lay.elem_bytes


def _layouts():
    """Shared layouts the planner gives staged tiles: swizzled wgmma operands (32/64/128-byte rows,
    blocked when wider, rows permuted for two m64 row blocks) and plain row-major tiles."""
    eb = st.sampled_from([1, 2, 4])
    swizzled = st.builds(
        lambda rows, row_bytes, eb, rb: SharedLayout(
            (rows * rb, row_bytes // eb), eb, swizzle=True, blocked=row_bytes > 128, row_blocks=rb
        ),
        st.sampled_from([8, 16, 64, 128]),
        st.sampled_from([32, 64, 128, 256, 384]),
        eb,
        st.sampled_from([1, 2]),
    )
    plain = st.builds(
        lambda r, cb, eb: SharedLayout((r, cb * 16 // eb), eb), st.sampled_from([1, 8, 64, 512]), st.integers(1, 16), eb
    )
    return st.one_of(swizzled, plain)


@settings(max_examples=60, deadline=None)
@given(_layouts())
def test_tma_boxes_write_the_layout_the_cp_async_path_writes(lay):
    """Every element lands at the byte `SharedLayout.offset2d` gives (what the cp.async path and the
    wgmma descriptors use), or the layout is refused (and keeps cp.async)."""
    tl = tma_layout(lay)
    rows, cols = lay.shape
    if tl is None:
        wide_unblocked = lay.swizzle and cols * lay.elem_bytes > 128 and not lay.blocked
        assert wide_unblocked or lay.row_blocks > 1 and rows % (64 * lay.row_blocks) or rows > 256
        return
    assert tl.box_rows <= 256 and tl.box_cols <= 256 and tl.box_cols * lay.elem_bytes % 16 == 0
    if tl.swizzle_bytes:
        assert tl.box_cols * lay.elem_bytes == tl.swizzle_bytes  # the box row fills the swizzle span
    image = smem_image(lay, tl)
    assert len(image) == rows * cols
    for r, col in itertools.product(range(rows), range(cols)):
        assert image[(r, col)] == _offset(lay, r, col), (r, col)


def test_wide_rows_without_column_blocks_are_refused():
    assert tma_layout(SharedLayout((64, 128), 2, swizzle=True)) is None  # 256-byte rows, one XOR span
    assert tma_layout(SharedLayout((64, 128), 2, swizzle=True, blocked=True)) is not None


def _copy_kernel(shape, dtype, rows, cols, starts, tile=None):
    """A pipelined loop copying a rows x cols region of a global tensor into a shared tile (then into
    a fragment), for the copy rules; `tile` overrides the shared tile's shape."""
    X = N.Buffer("X", tuple(shape), dtype)
    Y = N.Buffer("Y", (rows, cols), dtype)
    xs = N.Buffer("X_s", tile or (rows, cols), dtype, "shared")
    yf = N.Buffer("Y_f", (rows, cols), dtype, "fragment")
    k = N.Var("k")
    extents = [1] * len(shape)
    extents[-2], extents[-1] = rows, cols
    loop = N.For(
        k,
        c(0),
        c(4),
        "pipelined",
        (N.Copy(region(X, starts, extents), full(xs), True), N.Copy(full(xs), full(yf), False)),
        num_stages=2,
    )
    body = (N.Alloc(xs), N.Alloc(yf), loop, N.Copy(full(yf), full(Y), False))
    return N.PrimFunc("copy", (X, Y), (N.Kernel((c(1),), (N.Var("bx"),), (128,), body),))


def _decide(func, options=None):
    plan = cuda_plan(func, "sm_90a", options)
    loop = next(s for s in func.kernel.body if isinstance(s, N.For))
    return tma_copy(loop.body[0], plan, cuda_target("sm_90a", dict(options or {})), "p")


@settings(max_examples=30, deadline=None)
@given(
    outer=st.lists(st.integers(1, 5), min_size=0, max_size=3),
    rows=st.sampled_from([8, 64, 128]),
    cols=st.sampled_from([16, 64, 128]),
    extra_rows=st.integers(0, 300),
    extra_cols=st.sampled_from([0, 8, 64, 200]),
    dtype=st.sampled_from(["float16", "bfloat16", "float32", "int8"]),
)
def test_tensor_map_description(outer, rows, cols, extra_rows, extra_cols, dtype):
    """dims (innermost first), byte strides of the contiguous tensor, box and element type of a
    copy's tensor map, against numpy's view of the same tensor."""
    eb = np.dtype(dtype if dtype != "bfloat16" else "float16").itemsize
    shape = (*outer, rows + extra_rows, cols + extra_cols)
    found = _decide(_copy_kernel(shape, dtype, rows, cols, [c(0)] * len(shape)))
    if shape[-1] * eb % 16:
        assert found == "a row pitch of the tensor is not a multiple of 16 bytes"
        return
    assert not isinstance(found, str), found
    spec = found.spec
    dims, strides = encode_arguments(spec, {})
    assert dims == tuple(reversed(shape))
    assert strides == tuple(reversed(np.empty(shape, dtype=f"V{eb}").strides[:-1]))
    assert spec.box[2:] == (1,) * (len(shape) - 2) and spec.box[1] == found.layout.box_rows
    assert spec.box[0] * eb in (16 * (cols * eb // 16), 32, 64, 128)  # a row, or one swizzle span
    assert spec.data_type == {"float16": 6, "bfloat16": 9, "float32": 7, "int8": 0}[dtype]
    assert found.bytes == rows * cols * eb


def test_dynamic_dims_bind_at_launch():
    M = N.Var("M")
    func = _copy_kernel((M, 64), "float16", 64, 64, [c(0), c(0)])
    spec = _decide(func).spec
    assert spec.dims == (64, "M")
    assert encode_arguments(spec, {"M": 1000}) == ((64, 1000), (128,))


def test_copies_tma_cannot_do_keep_cp_async_with_the_first_failing_rule():
    reasons = [r for r, _ in TMA_RULES]
    six_d = _copy_kernel((1, 1, 1, 1, 64, 64), "float16", 64, 64, [c(0)] * 6)
    assert _decide(six_d) == reasons[2]  # more than 5 dimensions
    bool_copy = _copy_kernel((64, 64), "bool", 64, 64, [c(0), c(0)])
    assert _decide(bool_copy) == "TMA has no element type of this dtype"
    # a column of a 3-D tensor: the tile's rows are not the tensor's innermost dimension
    X = N.Buffer("X", (64, 64, 2), "float16")
    xs = N.Buffer("X_s", (64, 64), "float16", "shared")
    strided = N.Copy(region(X, [c(0)] * 3, (64, 64, 1)), full(xs), False)
    func = _copy_kernel((64, 64), "float16", 64, 64, [c(0), c(0)])
    plan = cuda_plan(func, "sm_90a")
    plan.storage["X"] = "global"
    assert tma_copy(strided, plan, cuda_target("sm_90a", {}), "p").startswith("the tile's rows are not")
    pitch = _copy_kernel((64, 100), "float16", 64, 64, [c(0), c(0)])  # 200-byte rows
    assert _decide(pitch) == "a row pitch of the tensor is not a multiple of 16 bytes"


def test_gemm_copies_become_tma_and_the_option_turns_it_off():
    func = K.gemm_kernel(1000, 1000, 1000, bm=128, bn=256, bk=64, stages=3, threads=256, predicated=True)
    plan = cuda_plan(func, "sm_90a")
    loads = plan.claims.get(TMA_CLAIM, {}).values()
    assert sorted(t.copy.dst.buffer.name for t in loads) == ["A_s", "B_s"]
    assert sorted(len(t.layout.boxes) for t in loads) == [1, 4]  # B_s: four 128-byte column blocks
    assert not cuda_plan(func, "sm_90a", {"tma": False}).claims.get(TMA_CLAIM)
    assert not cuda_plan(func, "sm_90a", {"warp_specialize": False}).claims.get(TMA_CLAIM)


def _artifact(func, options):
    return plugin.tilecore_codegen(
        backend=plugin.make_backend(), module=TileModule(func, "cuda:sm_90a"), options=options
    )


@needs_nvcc
def test_tma_gemm_compiles_with_tensor_maps_as_grid_constants(monkeypatch):
    """TileLang's quickstart shape on one warpgroup (rows permuted: eight 16-row boxes of A, two
    column blocks of B): the source, what the launcher is told, and nvcc's PTX; also the source as
    TVM generated it, with the maps as `void*` handles, which TVM compiles itself on a GPU host."""
    from tile_cuda import tma
    from tile_cuda.compiler import compile_ptx

    generated = []
    retype = tma.retype_parameters
    monkeypatch.setattr(tma, "retype_parameters", lambda src, params: generated.append(src) or retype(src, params))
    func = K.gemm_kernel(1024, 1024, 1024, bm=128, bn=128, bk=32, stages=3, threads=128)
    art = _artifact(func, {**WS, "tma_store": False})  # the loads (test_tma_store.py: the epilogue's stores)
    assert "void* __restrict__ tc_tmap0" in generated[0]
    assert compile_ptx(generated[0], "sm_90a").count("cp.async.bulk.tensor.2d") == 10
    src = art.source
    assert art.meta["kernel_params"] == [("ptr", "C"), ("tmap", "tc_tmap0"), ("tmap", "tc_tmap1")]
    assert art.meta["tensor_maps"] == [
        ["tc_tmap0", "A", 6, 2, [1024, 1024], [32, 16], 2],  # 64-byte rows: SWIZZLE_64B
        ["tc_tmap1", "B", 6, 2, [1024, 1024], [64, 32], 3],  # 128-byte column blocks: SWIZZLE_128B
    ]
    assert src.count("tc::tma_load<2>(") == 10 and "tc::cp_async16(" not in src.split("regs_decrease")[-1]
    ptx = compile_ptx(src, "sm_90a")
    assert ptx.count("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes") == 10
    assert "mbarrier.arrive.expect_tx.shared::cta.b64" in ptx and ".param .align 64 .b8" in ptx
    off = _artifact(func, {**WS, "tma": False})
    assert "tma_load" not in off.source and off.meta["tensor_maps"] == []


# ------------------------------------------------------------------------------ GPU


def _run_gemm(M, Nn, Kk, dtype="float16", bm=128, bn=128, bk=64, stages=3, threads=256, ta=False, tb=False, **opts):
    import torch

    func = K.gemm_kernel(
        M,
        Nn,
        Kk,
        bm=bm,
        bn=bn,
        bk=bk,
        stages=stages,
        threads=threads,
        dtype=dtype,
        ta=ta,
        tb=tb,
        predicated=bool(M % bm or Nn % bn or Kk % bk),
    )
    art = _artifact(func, {**WS, **opts})
    launch = plugin.tilecore_launcher(backend=plugin.make_backend(), artifact=art)
    tdt = getattr(torch, dtype)
    a = torch.randn(*((Kk, M) if ta else (M, Kk)), device="cuda", dtype=tdt)
    b = torch.randn(*((Nn, Kk) if tb else (Kk, Nn)), device="cuda", dtype=tdt)
    out = torch.full((M, Nn), float("nan"), device="cuda", dtype=tdt)
    launch([a, b, out], {})
    torch.cuda.synchronize()
    ref = (a.float().T if ta else a.float()) @ (b.float().T if tb else b.float())
    err = ((out.float() - ref).norm() / ref.norm()).item()
    print(
        f"gemm {M}x{Nn}x{Kk} {dtype} bm{bm} bn{bn} bk{bk} s{stages} t{threads} ta{ta} tb{tb} {opts}: "
        f"rel err {err:.2e}, max abs err {(out.float() - ref).abs().max().item():.3e}, "
        f"tma {len(art.meta['tensor_maps'])}"
    )
    return art, err


@pytest.mark.gpu
def test_tma_single_tile_gemm_first():
    """One tile, one k-step: the smallest TMA kernel (a wrong tensor map shows here first). The loads
    of A and B have maps, and so does C: the TMA-store epilogue is on by default for this short K
    loop with two consumer warpgroups (option tma_store, tile_cuda/tma_store.py)."""
    art, err = _run_gemm(128, 128, 64, stages=2)
    assert [m[1] for m in art.meta["tensor_maps"]] == ["A", "B", "C"] and err < 1e-2


@pytest.mark.gpu
@pytest.mark.parametrize(
    "case",
    [
        dict(M=256, Nn=256, Kk=64 * 13),  # 13 k-tiles: every stage refilled
        dict(M=1000, Nn=1000, Kk=1000),  # partial tiles in M, N and K
        dict(M=512, Nn=512, Kk=64 * 12, dtype="bfloat16", bn=256, stages=4),
        dict(M=384, Nn=256, Kk=64 * 12, tb=True),  # B transposed (N x K, K-major)
        dict(M=256, Nn=384, Kk=64 * 12, ta=True),  # A transposed (K x M)
        dict(M=1000, Nn=1000, Kk=32 * 13, bk=32, threads=128),  # TileLang's quickstart, one warpgroup
        dict(M=200, Nn=264, Kk=64 * 13, bm=64, bn=128, threads=128),  # 16 rows per warp, partial tiles
    ],
)
def test_tma_gemm_matches_torch(case):
    art, err = _run_gemm(**case)
    assert art.meta["tensor_maps"], art.meta["notes"]
    assert err < 1e-2


@pytest.mark.gpu
def test_tma_kernel_reencodes_maps_for_new_tensors():
    """Through tilecore.compile: the remembered per-signature run encodes the maps again for
    every new address (three calls, three fresh pairs of inputs)."""
    import torch

    import tilecore

    kern = tilecore.compile(
        K.gemm_kernel(512, 512, 64 * 12, bm=128, bn=128, bk=64, stages=3, threads=256),
        target="cuda",
        out_idx=[2],
        **WS,
    )
    assert kern.artifact.meta["tensor_maps"]
    for _ in range(3):
        a, b = (
            torch.randn(512, 768, device="cuda", dtype=torch.float16),
            torch.randn(768, 512, device="cuda", dtype=torch.float16),
        )
        ref = a.float() @ b.float()
        out = kern(a, b).float()
        assert ((out - ref).norm() / ref.norm()).item() < 1e-2


@pytest.mark.gpu
@pytest.mark.parametrize("causal,seq", [(False, 512), (True, 200)])
def test_tma_attention_matches_numpy(causal, seq):
    """The FlashAttention example: K and V arrive by TMA from the 4-D (batch, seq, heads, dim) tensors."""
    import torch

    import tilecore

    fa = example("flash_attention")
    kern = tilecore.compile(
        fa.flashattn.prim_func(1, 2, seq, 128, causal, block_M=128, block_N=128, num_stages=2),
        target="cuda",
        out_idx=[3],
        tma=True,
    )
    assert [m[1] for m in kern.artifact.meta["tensor_maps"]] == ["K", "V"]
    q, k, v = (torch.randn(1, seq, 2, 128, device="cuda", dtype=torch.float16) for _ in range(3))
    out = kern(q, k, v).double().cpu().numpy()
    ref = fa.reference(*(x.cpu().numpy() for x in (q, k, v)), causal)
    print(f"attention causal={causal} seq={seq}: max abs err {np.abs(out - ref).max():.3e}")
    assert np.abs(out - ref).max() < 2e-2
