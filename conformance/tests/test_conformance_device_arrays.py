"""Inputs and outputs of device backends travel as torch tensors (execute.call_on_device): every
dtype the grammar draws, the ml_dtypes ones (bfloat16, fp8) included, must cross bit for bit and
arrive as the torch dtype of the same name (found on the H200: fp8 programs failed to run)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tile_conformance.execute import _torch_from_numpy, _torch_to_numpy
from tilecore.interp.dtypes import np_dtype

torch = pytest.importorskip("torch")

DTYPES = ["float8_e4m3fn", "float8_e5m2", "bfloat16", "float16", "float32", "float64", "int8", "int32", "int64", "bool"]


@settings(max_examples=20, deadline=None)
@given(dtype=st.sampled_from(DTYPES), shape=st.sampled_from([(1,), (3, 5), (2, 1, 4)]), seed=st.integers(0, 2**32 - 1))
def test_arrays_cross_to_torch_and_back_bit_for_bit(dtype, shape, seed):
    npdt = np_dtype(dtype)
    raw = np.random.default_rng(seed).integers(0, 256, size=int(np.prod(shape)) * npdt.itemsize, dtype=np.uint8)
    a = raw.view(np.uint8 if dtype == "bool" else npdt).reshape(shape)
    if dtype == "bool":
        a = (a & 1).astype(bool)
    t = _torch_from_numpy(torch, a)
    assert t.dtype == getattr(torch, dtype) and tuple(t.shape) == shape
    back = _torch_to_numpy(torch, t, a.dtype)
    assert back.dtype == a.dtype and back.tobytes() == a.tobytes()
