"""fp8 on the npu (docs/semantics.md "fp8"): every fp8 bit pattern out, the ties and thresholds of
rounding into fp8 (the vector engine's vcvt and the DMA's conversions), and an fp8 GEMM on the
matrix engine, against the reference interpreter."""

import ml_dtypes
import numpy as np
import pytest

from tilecore.testing import assert_fp8_conversion_matches_reference, assert_matches_reference, gemm_kernel


@pytest.mark.parametrize("fp8, other", [("float8_e4m3fn", "float32"), ("float8_e5m2", "bfloat16")])
def test_fp8_conversions_match_the_interpreter(fp8, other):
    assert_fp8_conversion_matches_reference(fp8, other, "npu")
    assert_fp8_conversion_matches_reference(other, fp8, "npu")


def test_fp8_gemm_matches_the_interpreter():
    rng = np.random.default_rng(5)
    d = np.dtype(ml_dtypes.float8_e5m2)
    a, b = rng.integers(-4, 5, (48, 64)).astype(d), rng.integers(-4, 5, (40, 64)).astype(d)
    gemm = gemm_kernel(
        48, 40, 64, "float8_e5m2", "float32", transpose_B=True, block_M=32, block_N=32, out_dtype="float8_e5m2"
    )
    assert_matches_reference(gemm, [a, b], "npu", out_idx=-1, rtol=0, atol=0)
