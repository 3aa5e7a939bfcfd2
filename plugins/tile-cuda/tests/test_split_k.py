"""Split-K for small grids (tile_cuda/split_k.py): when the rule fires, what the rewrite does, that
the generated CUDA compiles, that off is the code of before; on a GPU, correct and deterministic
sums for ragged shapes, split counts that do not divide the k-tiles, fp16 and bf16, and repeated
calls that reuse the tile counters (Python launch path first, then the C FastCall)."""

import dataclasses

import kernels as KN
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tile_cuda import compiler, plugin, split_k, toolchain
from tile_cuda.rules import add_cuda_rules
from tile_cuda.target import cuda_target
from tilecore.ir import nodes as N
from tilecore.plugin.backend import TileModule
from tilecore.plugin.rules import RuleTable

needs_compiler = pytest.mark.skipif(
    toolchain.find_nvcc() is None and toolchain.find_nvrtc() is None, reason="no nvcc / NVRTC here"
)


def codegen(func, arch, **options):
    be = plugin.make_backend()
    return plugin.tilecore_codegen(backend=be, module=TileModule(func, f"cuda:{arch}"), options=options)


def decode(M=16, N=1024, K=2048, **kw):
    """A decode-shaped GEMM: 16 blocks of 64 x 64 with 32 k-tiles (auto splits it in 4)."""
    cfg = dict(bm=64, bn=64, bk=64, stages=4, threads=128)
    cfg.update(kw)
    return KN.gemm_kernel(M, N, K, **cfg)


# ------------------------------------------------------------------ the rule (pure Python)


@settings(max_examples=60, deadline=None)
@given(blocks=st.integers(1, 400), ktiles=st.integers(1, 300), option=st.sampled_from([None, 0, 1, 2, 3, 7, 64]))
def test_split_counts_are_bounded_and_follow_the_option(blocks, ktiles, option):
    splits, why = split_k.choose_splits(blocks, ktiles, 90, option)
    assert why
    if option is not None:
        assert splits == (1 if option <= 1 else min(option, ktiles))
    elif 2 * blocks > split_k.SM_COUNT[90] or ktiles < split_k.MIN_KTILES_TO_SPLIT:
        assert splits == 1
    else:  # never past two waves of blocks, at least 8 k-tiles per split
        assert 2 <= splits <= split_k.MAX_SPLITS and ktiles // splits >= split_k.MIN_KTILES_PER_SPLIT
        assert blocks * splits <= split_k.TARGET_WAVES * split_k.SM_COUNT[90]


def test_rewrite_adds_the_split_dimension_and_offsets_the_k_tiles():
    func, notes = split_k.split_k_rewrite(decode(K=1000, bk=64), 90, 3)  # 16 k-tiles in splits of 6, 6, 4
    k = func.kernel
    assert [g.value for g in k.grid] == [16, 1, 3] and k.block_vars[-1].name == split_k.SPLIT_VAR
    loop = next(s for s in k.body if isinstance(s, N.For))
    assert loop.extent.value == 6 and notes == ["split-K: 3 splits of 6 k-tiles (option split_k=3)"]
    # 3 x 6 > 16: the last split's copies past K read zeros (predicated)
    assert all(s.predicated for s in loop.body if isinstance(s, N.Copy))
    hint = k.body[k.body.index(loop) + 1]
    assert isinstance(hint, N.Hint) and hint.kind == split_k.HINT and dict(hint.params) == {"splits": 3, "chunk": 6}


def test_kernels_of_other_forms_keep_their_code_and_say_why():
    base = decode()
    k = base.kernel
    loop_at = next(i for i, s in enumerate(k.body) if isinstance(s, N.For))
    no_clear = dataclasses.replace(k, body=tuple(s for s in k.body if not isinstance(s, N.Fill)))
    three_d = dataclasses.replace(k, grid=k.grid + (N.Const(2, "int32"),), block_vars=k.block_vars + (N.Var("bz"),))
    loop = k.body[loop_at]
    dynamic = dataclasses.replace(k, body=k.body[:loop_at] + (dataclasses.replace(loop, extent=N.Var("n")),))
    a_s = next(s.buffer for s in k.body if isinstance(s, N.Alloc) and s.buffer.name == "A_s")
    reads_stage = dataclasses.replace(k, body=k.body + (N.Fill(KN.full(a_s), N.Const(0, "float16")),))
    for kernel, reason in (
        (no_clear, "not cleared"),
        (reads_stage, "use a tile the loop fills"),
        (three_d, "three dimensions"),
        (dynamic, "not a compile-time constant"),
    ):
        func = dataclasses.replace(base, body=(kernel,))
        out, notes = split_k.split_k_rewrite(func, 90, 4)
        assert out is func and reason in notes[0], notes
    big = KN.gemm_kernel(4096, 4096, 4096, bm=128, bn=128, bk=64)
    out, notes = split_k.split_k_rewrite(big, 90, None)
    assert out is big and "fills more than half of the 132 SMs" in notes[0]
    # the loop that warp specialization takes (here forced on one warpgroup) keeps that schedule
    quick = KN.gemm_kernel(1024, 1024, 1024, bm=128, bn=128, bk=32, stages=3, threads=128)
    rules = RuleTable()
    add_cuda_rules(rules)
    for options, note in (({"warp_specialize": True}, "no: the kernel keeps the warp-specialized"), ({}, "4 splits")):
        out, notes = split_k.rewrite_for_target(quick, cuda_target("sm_90a", options), rules)
        assert note in notes[0] and (out is quick) == ("no:" in note)


def test_workspace_sizes_follow_the_grid():
    meta = {"splits": 4, "block_floats": 4096}
    assert split_k.workspace_bytes(meta, (16, 2, 4)) == (32 * 4 * 4096 * 4, 32 * 4)


# ------------------------------------------------------------------ compile tier (nvcc)


@needs_compiler
@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_split_kernel_compiles_with_its_workspace_parameters(arch):
    # sm_90a: auto (16 blocks, 32 k-tiles; wgmma); sm_80: forced, 5 splits that do not divide 32
    options = {} if arch == "sm_90a" else {"split_k": 5}
    art = codegen(decode(), arch, **options)
    assert art.meta["split_k"]["splits"] == (4 if arch == "sm_90a" else 5)
    assert art.meta["split_k"]["block_floats"] == 64 * 64
    kinds = dict((name, kind) for kind, name in art.meta["kernel_params"])
    assert kinds[split_k.PARTIALS_PARAM] == kinds[split_k.COUNTERS_PARAM] == "workspace"
    assert art.meta["grid_py"][-1] == str(art.meta["split_k"]["splits"])
    assert "tc::splitk_arrive" in art.source and art.blobs["cubin"][:4] == b"\x7fELF"
    if arch == "sm_90a":
        assert "tc::wgmma_ss<" in art.source


def test_option_off_is_the_code_of_before():
    func = decode()
    on, _, params_on, _ = compiler.generate_source(func, "sm_90a", {})
    off = [compiler.generate_source(func, "sm_90a", {"split_k": v}) for v in (0, 1)]
    assert "splitk" in on and all("splitk" not in src for src, *_ in off)
    assert off[0][0] == off[1][0] and off[0][2] == [kp for kp in params_on if kp[0] != "workspace"]
    big = KN.gemm_kernel(2048, 2048, 512, bm=128, bn=128, bk=64)  # 256 blocks: auto does not split
    assert compiler.generate_source(big, "sm_90a", {})[0] == compiler.generate_source(big, "sm_90a", {"split_k": 0})[0]


# ------------------------------------------------------------------ GPU


GPU_CASES = [
    # M, N, K, bm, bn, bk, stages, threads, dtype, split_k (None = auto)
    (16, 1024, 4096, 64, 64, 64, 4, 128, "float16", None),  # decode, wgmma on sm_90a
    (16, 512, 8192, 16, 64, 128, 4, 128, "float16", None),  # 16-row blocks (mma.sync)
    (33, 520, 1000, 64, 64, 64, 3, 128, "bfloat16", 3),  # ragged M, N, K; 3 x 6 > 16 k-tiles
    (64, 640, 3000, 64, 128, 64, 3, 128, "float16", 7),  # 47 k-tiles in 7 splits
    (1, 96, 520, 32, 32, 32, 3, 256, "bfloat16", 4),  # one row, K not a multiple of the tile
]


@pytest.mark.gpu
@pytest.mark.parametrize("case", GPU_CASES, ids=lambda c: "x".join(map(str, c[:3])) + f"-{c[8]}-split{c[9]}")
def test_split_k_gemm_is_right_and_deterministic_on_the_gpu(case):
    import torch

    import tilecore

    M, N, K_, bm, bn, bk, stages, threads, dtype, split = case
    kern = tilecore.compile(
        KN.user_gemm(M, N, K_, bm, bn, bk, stages, threads, dtype), target="cuda", out_idx=[-1], split_k=split
    )
    assert kern.artifact.meta.get("split_k", {}).get("splits", 1) > 1, kern.artifact.meta["notes"]
    tdt = getattr(torch, dtype)
    tol = 1e-2 if dtype == "bfloat16" else 2e-3  # the output's rounding
    for _ in range(4):  # fresh data; calls 2.. reuse the counters (and take the C FastCall)
        a = torch.randn(M, K_, device="cuda", dtype=tdt)
        b = torch.randn(K_, N, device="cuda", dtype=tdt)
        ref = a.double() @ b.double()
        c = kern(a, b)
        again = kern(a, b)
        torch.cuda.synchronize()
        err = ((c.double() - ref).norm() / ref.norm()).item()
        assert err < tol, err
        assert torch.equal(c, again)  # the splits are summed in a fixed order
    # the launcher's own Python path (its own workspaces), called directly, gives the same bits
    launch = plugin.tilecore_launcher(backend=plugin.make_backend(), artifact=kern.artifact)
    out = torch.full_like(c, float("nan"))
    for _ in range(2):
        launch([a, b, out], {})
        torch.cuda.synchronize()
        assert torch.equal(out, c)
    off = tilecore.compile(
        KN.user_gemm(M, N, K_, bm, bn, bk, stages, threads, dtype), target="cuda", out_idx=[-1], split_k=0
    )
    assert "split_k" not in off.artifact.meta
    assert ((off(a, b).double() - ref).norm() / ref.norm()).item() < tol
