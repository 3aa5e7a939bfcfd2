"""Names bound inside kernel bodies whose values involve bfloat16, against the reference.

TVM's LLVM pipeline legalizes bfloat16 in stores but not in `Bind` values: a
bfloat16 name (`t = x[i, j]` with a bfloat16 `x`) failed to compile, and a float32
name computed from a bfloat16 load (`t = T.cast(x[i, j], "float32") * 2`) read the
stored bits as an integer (0.75 became 32320.0) without any error.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilecore
import tilecore.language as T
from tilecore.testing import assert_matches_reference

DTYPES = ["bfloat16", "float32", "float16"]
NP = {"bfloat16": ml_dtypes.bfloat16, "float32": np.float32, "float16": np.float16}


# 0.3 is exact in none of the dtypes: the constant must be rounded to the name's dtype
# (see test_cpu_float16_rounding.py).
def _kernel(src: str, dst: str, name_dtype, scale: float):
    @T.prim_func
    def named(X: T.Tensor((4, 16), src), Y: T.Tensor((4, 16), dst)):
        with T.Kernel(1) as bx:
            for i, j in T.Parallel(4, 16):
                if name_dtype is None:
                    t = X[i, j]
                else:
                    t = T.cast(X[i, j], name_dtype) * scale
                u = t + t
                Y[i, j] = u

    return named


@settings(max_examples=12, deadline=None)
@given(
    src=st.sampled_from(DTYPES),
    dst=st.sampled_from(DTYPES),
    name_dtype=st.sampled_from([None, *DTYPES]),
    scale=st.sampled_from([1.0, 0.5, 4.0, 0.3]),
)
def test_named_values_with_bfloat16_match_the_reference(src, dst, name_dtype, scale):
    x = (np.random.default_rng(0).random((4, 16)) * 4 - 2).astype(NP[src])
    got = assert_matches_reference(_kernel(src, dst, name_dtype, scale), [x], backend="cpu", out_idx=[-1])
    assert np.isfinite(got.astype(np.float32)).all()


def test_a_float32_name_from_a_bfloat16_load_keeps_its_value():
    x = np.array([[0.75, -1.5, 2.0, 0.09375] * 4] * 4, dtype=ml_dtypes.bfloat16)
    y = tilecore.compile(_kernel("bfloat16", "float32", "float32", 2.0), target="cpu", out_idx=[-1])(x)
    np.testing.assert_array_equal(y, x.astype(np.float32) * 4)


@pytest.mark.parametrize("dst", ["bfloat16", "float32"])
def test_a_bfloat16_name_outside_parallel_in_a_serial_loop(dst):
    @T.prim_func
    def rows(X: T.Tensor((8,), "bfloat16"), Y: T.Tensor((8,), dst)):
        with T.Kernel(2) as bx:
            for k in T.serial(4):
                t = X[bx * 4 + k]
                w: T.float32 = T.cast(t, "float32") * 3.0
                v: T.bfloat16 = w
                Y[bx * 4 + k] = v

    x = np.linspace(-1, 1, 8).astype(ml_dtypes.bfloat16)
    assert_matches_reference(rows, [x], backend="cpu", out_idx=[-1])
