"""fp8 on cuda (docs/semantics.md "fp8"): the generated CUDA text at the compile tier here, and on a
GPU host every fp8 bit pattern's conversions, the ties and thresholds of rounding into fp8, and fp8
GEMMs against the reference interpreter (run there by benchmarks/h200_fp8.sh)."""

import ml_dtypes
import numpy as np
import pytest

from tile_cuda.compiler import generate_source
from tilecore.testing import (
    assert_fp8_conversion_matches_reference,
    assert_matches_reference,
    fp8_conversion_kernel,
    gemm_kernel,
    to_device,
)

FP8 = ("float8_e4m3fn", "float8_e5m2")
FLOATS = ("float16", "bfloat16", "float32", "float64")


def test_fp8_is_held_as_bytes_and_converted_by_our_own_code():
    # (nvcc compiles fp8 programs in the compile-tier conformance run, test_cuda_conformance_ci.py)
    src = generate_source(fp8_conversion_kernel(2, "float32", "float8_e4m3fn"), "sm_90a", {})[0]
    assert "__nv_fp8" not in src and "cuda_fp8" not in src  # no library conversion
    assert "uchar* __restrict__ Out1_ptr" in src


@pytest.mark.parametrize("arch, instruction", [("sm_90a", "tc::wgmma_ss<"), ("sm_80", "tc::gemm_ss<")])
def test_fp8_gemm_runs_on_the_float16_tensor_core_paths(arch, instruction):
    src = generate_source(gemm_kernel(64, 64, 64, "float8_e5m2", "float32"), arch, {})[0]
    body = src[src.index('extern "C" __global__') :]
    assert instruction in body and ", half, " in body and "__nv_fp8" not in src


def test_fp8_gemm_operands_are_widened_into_float16_shared_tiles():
    from tile_cuda.fp8_gemm import widen_fp8_gemm_operands
    from tilecore.ir import nodes as N
    from tilecore.ir.visitor import walk_stmts

    func = widen_fp8_gemm_operands(gemm_kernel(64, 64, 64, "float8_e4m3fn", "float32"))
    stmts = list(walk_stmts(func.body))
    (gemm,) = [s for s in stmts if isinstance(s, N.Gemm)]
    assert (gemm.a.buffer.name, gemm.b.buffer.name) == ("A_s_f16", "B_s_f16")
    assert {gemm.a.buffer.dtype, gemm.b.buffer.dtype, gemm.a.buffer.scope} == {"float16", "shared"}
    copies = [(s.src.buffer.name, s.dst.buffer.name) for s in stmts if isinstance(s, N.Copy)]
    assert copies[-3:-1] == [("A_s", "A_s_f16"), ("B_s", "B_s_f16")]  # right before the gemm, in the loop
    # a float64 accumulator keeps the portable dot product over decoded fp8 operands
    f64 = gemm_kernel(64, 64, 64, "float8_e4m3fn", "float64")
    assert widen_fp8_gemm_operands(f64) is f64


# ---- execute tier: the values against the reference interpreter


@pytest.mark.gpu
@pytest.mark.parametrize("fp8", FP8)
@pytest.mark.parametrize("other", FLOATS + ("other fp8",))
def test_fp8_conversions_match_the_interpreter_on_the_gpu(fp8, other):
    if other == "other fp8":
        other = [d for d in FP8 if d != fp8][0]
    assert_fp8_conversion_matches_reference(fp8, other, "cuda")  # every fp8 bit pattern out
    assert_fp8_conversion_matches_reference(other, fp8, "cuda")  # ties and thresholds in


@pytest.mark.gpu
@pytest.mark.parametrize("fp8", FP8)
def test_fp8_gemm_matches_the_interpreter_on_the_gpu(fp8):
    rng = np.random.default_rng(83)
    M, N, K = 128, 96, 160
    np_fp8 = np.dtype(getattr(ml_dtypes, fp8))
    a = rng.uniform(-3, 3, (M, K)).astype(np_fp8)
    b = rng.uniform(-3, 3, (K, N)).astype(np_fp8)
    gemm = gemm_kernel(M, N, K, fp8, "float32")
    # products are exact; the float32 sums differ by order (the conformance bound, (K+1)u * sum|a*b|)
    atol = 2 * (K + 1) * 2.0**-24 * K * 9
    assert_matches_reference(gemm, [to_device(x, "cuda", "torch") for x in (a, b)], "cuda", out_idx=-1, atol=atol)
    # small integers: every partial sum is exact, so the final rounding into fp8 is exact too
    a = rng.integers(-4, 5, (M, K)).astype(np_fp8)
    b = rng.integers(-4, 5, (N, K)).astype(np_fp8)
    gemm = gemm_kernel(M, N, K, fp8, "float32", transpose_B=True, out_dtype=fp8)
    assert_matches_reference(gemm, [to_device(x, "cuda", "torch") for x in (a, b)], "cuda", out_idx=-1, rtol=0, atol=0)
