"""Hopper warpgroup MMA (wgmma) on cuda:sm_90a: compile tier here, execute tier on an H100/H200.

The matrix covers every operand layout the descriptors describe: K-major and MN-major A and B
(all four transpose combinations), 32-, 64- and 128-byte swizzled rows and 128-byte column
blocks, fp16 / bf16 / int8, N from 32 to 256, one and two warpgroups, pipelined and not, and
the register-A form (FlashAttention's P @ V).
"""

import re
import shutil
import subprocess

import kernels as K
import pytest
from cuda_source import cuda_source

from tile_cuda import compiler, plugin, toolchain
from tilecore.plugin.backend import TileModule

needs_nvcc = pytest.mark.skipif(toolchain.find_nvcc() is None, reason="no nvcc here")
DISASSEMBLER = shutil.which("cuobjdump") or shutil.which("nvdisasm")
needs_disassembler = pytest.mark.skipif(
    toolchain.find_nvcc() is None or DISASSEMBLER is None,
    reason="no nvcc or no SASS disassembler (cuobjdump / nvdisasm) here; the H200 image has both",
)
SCHEDULES = ("slack", "release")  # the overlapped main loops (tile_cuda/wgmma_pipeline.py)

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
    return K.gemm_kernel(
        M,
        N,
        Kd,
        bm=bm,
        bn=bn,
        bk=bk,
        stages=st,
        threads=th,
        dtype=dt,
        accum=accum,
        out_dtype=accum,
        ta=ta,
        tb=tb,
        predicated=predicated,
    )


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
    for func in (
        K.gemm_kernel(256, 256, 128, bm=128, bn=128, bk=32, threads=128, ta=True),
        K.gemm_kernel(128, 64, 64, bm=64, bn=8, bk=16, threads=128),
    ):
        src = cuda_source(func, "sm_90a")
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


# the configurations whose main loop both overlapped schedules take (>= 3 stages): one and two
# warpgroups, one and two m64 instructions per warpgroup, fp16 / bf16 / int8, all transposes
OVERLAP_CASES = [c for c in CASES if c[4] >= 3]


@needs_nvcc
@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("case", [OVERLAP_CASES[i] for i in (6, 8, 9)], ids=_ids)
def test_overlapped_main_loop_keeps_one_wgmma_group_in_flight(case, schedule):
    bm, bn, bk, th, st, dt, ta, tb = case
    src = cuda_source(_kernel(case, 2 * bm, 2 * bn, 12 * bk), "sm_90a", wgmma_overlap=schedule, warp_specialize=False)
    # the loop's gemm leaves its group running, the peeled last k-step retires every group
    calls = re.findall(r"tc::wgmma_ss<[^>]*, (\d)>\(", src)
    assert calls == ["1", "0"], calls
    ahead = st - 1 if schedule == "release" else st - 2  # prefetch distance
    assert f"tc::cp_async_wait<{ahead - 1}>" in src
    # barriers per k-step ("release" frees the stage of gemm k-1 with a second one), then the last step's
    loop = re.search(r"for \(int v(_\d+)? = 0;", src)  # TVM numbers the name after the block order's
    loop_and_last_step = src[loop.start() : src.index(", 0>(")]
    assert loop_and_last_step.count("__syncthreads();") == (2 if schedule == "release" else 1) + 1
    ptx = compiler.compile_ptx(src, "sm_90a")
    assert "wgmma.wait_group.sync.aligned 1;" in ptx and "wgmma.wait_group.sync.aligned 0;" in ptx
    plain = cuda_source(_kernel(case, 2 * bm, 2 * bn, 12 * bk), "sm_90a", wgmma_overlap=False, warp_specialize=False)
    assert re.findall(r"tc::wgmma_ss<[^>]*, (\d)>\(", plain) == ["0"]


def accumulator_reads_before_last_wait(sass: str):
    """SASS instructions other than warpgroup MMAs that touch an MMA accumulator register between
    the first warpgroup MMA and the last wait for every group (`WARPGROUP.DEPBAR.LE gsb0, 0x0`):
    reads of registers an MMA may still be writing."""
    ins = [
        ln.split("*/", 1)[1].split(";")[0].strip() for ln in sass.splitlines() if re.match(r"\s*/\*[0-9a-f]{4,}\*/", ln)
    ]
    mma = re.compile(r"^[HIQ]GMMA\.64x(\d+)x\d+[.\w]* R(\d+)")
    acc = set()
    for i in ins:
        m = mma.match(i)
        if m:
            acc |= set(range(int(m.group(2)), int(m.group(2)) + int(m.group(1)) // 2))
    first = next(n for n, i in enumerate(ins) if mma.match(i))
    last = max(n for n, i in enumerate(ins) if i.startswith("WARPGROUP.DEPBAR.LE gsb0, 0x0"))
    return [i for i in ins[first:last] if not mma.match(i) and any(int(r) in acc for r in re.findall(r"\bR(\d+)\b", i))]


@needs_disassembler
@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("case", [OVERLAP_CASES[i] for i in (6, 7, 9)], ids=_ids)
def test_overlapped_loop_reads_accumulators_after_the_last_wait(case, schedule, tmp_path):
    """The cause of the overlapped loop's wrong sums (2026-11-29): with the final wgmma.wait_group
    after the loop, ptxas (CUDA 13.0) scheduled the epilogue's conversions of the accumulators above
    it. The machine code must not touch an accumulator before the last wait, partial tiles too."""
    bm, bn, bk, th, st, dt, ta, tb = case
    for pred in (False, True):
        art = _codegen(
            _kernel(case, 2 * bm - 24 * pred, 2 * bn, 12 * bk, pred),
            "cuda:sm_90a",
            {"wgmma_overlap": schedule, "warp_specialize": False},
        )
        cubin = tmp_path / "kernel.cubin"
        cubin.write_bytes(art.blobs["cubin"])
        args = ["-sass"] if DISASSEMBLER.endswith("cuobjdump") else ["-c"]
        sass = subprocess.run([DISASSEMBLER, *args, str(cubin)], capture_output=True, text=True, check=True).stdout
        assert "WARPGROUP.DEPBAR.LE gsb0, 0x1" in sass  # a group stays in flight in the loop
        assert accumulator_reads_before_last_wait(sass) == []


# ------------------------------------------------------------------------------ execute tier


@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_wgmma_gemm_matches_torch(case):
    """The plain wgmma loop (each k-step waits for its group); the default schedule runs below."""
    _check_against_torch(case, {"wgmma_overlap": False, "warp_specialize": False})


# every other pipelined case (1-stage loops have no stages to fill)
WS_CASES = [c for c in CASES if c[4] >= 2][::2]


@pytest.mark.gpu
@pytest.mark.parametrize("case", WS_CASES, ids=_ids)
def test_warp_specialized_wgmma_gemm_matches_torch(case):
    """The producer-warpgroup pipeline (tile_cuda/warp_specialize.py), one-warpgroup blocks included
    (option True), every dtype and transpose, partial tiles and 12 k-tiles as below."""
    _check_against_torch(case, {"warp_specialize": True})


# "release" also takes 2-stage loops: two of them (bf16, int8 on 32 rows per warp) besides the others
OVERLAP_RUNS = (
    [(c, "slack") for c in OVERLAP_CASES]
    + [(c, "release") for c in OVERLAP_CASES + [CASES[14], CASES[22]]]
    + [(c, None) for c in OVERLAP_CASES[:2]]
)  # None: wgmma_overlap's default ("release")


@pytest.mark.gpu
@pytest.mark.parametrize("case,schedule", OVERLAP_RUNS, ids=[f"{_ids(c)}-{s}" for c, s in OVERLAP_RUNS])
def test_overlapped_wgmma_gemm_matches_torch(case, schedule):
    _check_against_torch(
        case, {"warp_specialize": False} if schedule is None else {"wgmma_overlap": schedule, "warp_specialize": False}
    )


def _check_against_torch(case, options):
    import torch

    bm, bn, bk, th, st, dt, ta, tb = case
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("wgmma needs an sm_90 GPU (H100/H200)")
    # 12 k-tiles: every pipeline stage is refilled while others are read (a racy schedule shows)
    for M, N, Kd, pred in ((2 * bm, 2 * bn, 12 * bk, False), (2 * bm - 24, 2 * bn - 8, 11 * bk + 16, True)):
        art = _codegen(_kernel(case, M, N, Kd, pred), "cuda", options)
        assert "tc::wgmma_ss<" in art.source
        if options.get("warp_specialize"):
            assert "tc::mbar_wait" in art.source
        elif options.get("wgmma_overlap", True):
            assert re.findall(r"tc::wgmma_ss<[^>]*, (\d)>\(", art.source) == ["1", "0"]
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
