"""Hopper warpgroup MMA (wgmma) on cuda:sm_90a: compile tier here, execute tier on an H100/H200.

The matrix covers every operand layout the descriptors describe: K-major and MN-major A and B
(all four transpose combinations), 32-, 64- and 128-byte swizzled rows and 128-byte column
blocks, fp16 / bf16 / int8, N from 32 to 256, one and two warpgroups, pipelined and not, and
the register-A form (FlashAttention's P @ V).
"""
import numpy as np
import pytest

import kernels as K
from tilecore.plugin.backend import TileModule
from tile_cuda import compiler, plugin, toolchain

needs_nvcc = pytest.mark.skipif(toolchain.find_nvcc() is None, reason="no nvcc here")

# (bm, bn, bk, threads, stages, dtype, ta, tb)
CASES = [
    (64, 64, 32, 128, 2, "float16", False, False),
    (64, 64, 32, 128, 2, "float16", False, True),
    (64, 64, 32, 128, 2, "float16", True, False),
    (64, 64, 32, 128, 2, "float16", True, True),
    (128, 128, 64, 256, 3, "float16", False, False),
    (128, 128, 64, 256, 3, "float16", False, True),
    (128, 128, 64, 256, 3, "float16", True, False),
    (128, 128, 64, 256, 3, "float16", True, True),
    (128, 256, 64, 256, 3, "float16", False, False),
    (128, 256, 32, 256, 4, "float16", False, True),
    (128, 128, 64, 256, 4, "float16", False, False),
    (128, 128, 32, 256, 6, "float16", True, False),
    (64, 32, 16, 128, 2, "float16", False, False),
    (64, 32, 16, 128, 2, "float16", True, True),
    (128, 128, 128, 256, 2, "bfloat16", False, False),
    (128, 128, 128, 256, 2, "bfloat16", False, True),
    (64, 96, 64, 128, 1, "bfloat16", True, True),
    (128, 64, 64, 256, 2, "int8", False, True),
    (64, 128, 128, 128, 3, "int8", False, True),
    # 32 rows per warp (TileLang's quickstart shape): two m64 instructions per warpgroup, A rows permuted
    (128, 128, 32, 128, 3, "float16", False, False),
    (128, 128, 64, 128, 3, "bfloat16", False, True),
    (256, 128, 64, 256, 3, "float16", False, False),
    (128, 64, 64, 128, 2, "int8", False, True),
]


def _ids(c):
    bm, bn, bk, th, st, dt, ta, tb = c
    return f"{dt}-{bm}x{bn}x{bk}-t{th}-s{st}-{'T' if ta else 'N'}{'T' if tb else 'N'}"


def _kernel(case, M, N, Kd, predicated=False):
    bm, bn, bk, th, st, dt, ta, tb = case
    accum = "int32" if dt == "int8" else "float32"
    return K.gemm_kernel(M, N, Kd, bm=bm, bn=bn, bk=bk, stages=st, threads=th, dtype=dt, accum=accum,
                         out_dtype=accum, ta=ta, tb=tb, predicated=predicated)


def _codegen(func, target, options=None):
    be = plugin.make_backend()
    return plugin.tilecore_codegen(backend=be, module=TileModule(func, target), options=options or {})


@needs_nvcc
@pytest.mark.parametrize("case", CASES[:9:4] + CASES[11:16:2] + CASES[19:20], ids=_ids)
def test_sm90a_gemm_compiles_to_wgmma(case):
    bm, bn, bk, th, st, dt, ta, tb = case
    art = _codegen(_kernel(case, 2 * bm, 2 * bn, 4 * bk), "cuda:sm_90a")
    ptx = compiler.compile_ptx(art.source, "sm_90a")
    k = 32 if dt == "int8" else 16
    assert f"wgmma.mma_async.sync.aligned.m64n{bn}k{k}" in ptx
    assert "mma.sync.aligned" not in ptx and "ldmatrix" not in ptx
    assert "fence.proxy.async.shared::cta" in ptx
    assert "__align__(1024) uchar smem_pool_ptr" in art.source
    assert art.blobs["cubin"][:4] == b"\x7fELF"


@needs_nvcc
def test_sm80_and_wgmma_off_keep_mma_sync():
    case = CASES[4]
    func = _kernel(case, 256, 256, 256)
    for target, options in (("cuda:sm_80", {}), ("cuda:sm_90a", {"wgmma": False})):
        ptx = compiler.compile_ptx(_codegen(func, target, options).source, target.split(":")[1])
        assert "wgmma" not in ptx and "mma.sync.aligned.m16n8k16" in ptx


@needs_nvcc
def test_shapes_outside_wgmma_fall_back_to_mma_sync():
    # 128 rows on 4 warps with A column-major (32 rows per warp need a row-major A) and N = 8
    # (8-element rows of B are 16 bytes)
    for func in (K.gemm_kernel(256, 256, 128, bm=128, bn=128, bk=32, threads=128, ta=True),
                 K.gemm_kernel(128, 64, 64, bm=64, bn=8, bk=16, threads=128)):
        src = _codegen(func, "cuda:sm_90a").source
        assert "tc::wgmma_ss<" not in src and "tc::gemm_ss<" in src


@needs_nvcc
def test_flash_attention_uses_register_a_wgmma():
    from examples_util import example

    fa = example("flash_attention")
    for bm, bn in ((64, 64), (128, 128)):
        func = fa.flashattn.prim_func(1, 2, 512, 128, True, block_M=bm, block_N=bn, num_stages=2)
        art = _codegen(func, "cuda:sm_90a")
        assert "tc::wgmma_ss<" in art.source and "tc::wgmma_rs<" in art.source
        ptx = compiler.compile_ptx(art.source, "sm_90a")
        assert f"wgmma.mma_async.sync.aligned.m64n{bn}k16" in ptx


# ------------------------------------------------------------------------------ execute tier

@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_wgmma_gemm_matches_torch(case):
    import torch

    bm, bn, bk, th, st, dt, ta, tb = case
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("wgmma needs an sm_90 GPU (H100/H200)")
    # 12 k-tiles: every pipeline stage is refilled while others are read (a racy schedule shows)
    for M, N, Kd, pred in ((2 * bm, 2 * bn, 12 * bk, False), (2 * bm - 24, 2 * bn - 8, 11 * bk + 16, True)):
        art = _codegen(_kernel(case, M, N, Kd, pred), "cuda")
        assert "tc::wgmma_ss<" in art.source
        launch = plugin.tilecore_launcher(backend=plugin.make_backend(), artifact=art)
        tdt = {"float16": torch.float16, "bfloat16": torch.bfloat16, "int8": torch.int8}[dt]
        if dt == "int8":
            a = torch.randint(-8, 8, (Kd, M) if ta else (M, Kd), device="cuda", dtype=tdt)
            b = torch.randint(-8, 8, (N, Kd) if tb else (Kd, N), device="cuda", dtype=tdt)
            c = torch.full((M, N), -12345, device="cuda", dtype=torch.int32)
        else:
            a = torch.randn((Kd, M) if ta else (M, Kd), device="cuda", dtype=tdt)
            b = torch.randn((N, Kd) if tb else (Kd, N), device="cuda", dtype=tdt)
            c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float32)
        launch([a, b, c], {})
        torch.cuda.synchronize()
        ref = (a.T if ta else a).double() @ (b.T if tb else b).double()
        if dt == "int8":
            assert torch.equal(c.double(), ref), (c.double() - ref).abs().max()
        else:
            err = ((c.double() - ref).norm() / ref.norm()).item()
            assert err < 1e-5, err
