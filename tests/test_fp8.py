"""fp8 dtypes (float8_e4m3fn, float8_e5m2): names, promotion, the reference's conversions, arrays
from numpy (ml_dtypes) and torch, and a clear refusal on backends that do not declare fp8."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tilecore
import tilecore.language as T
from tilecore.diagnostics import UnsupportedFeatureError
from tilecore.ir import nodes as N
from tilecore.ir.types import normalize_dtype, promote
from tilecore.ir.visitor import walk

FP8 = ("float8_e4m3fn", "float8_e5m2")


def test_fp8_names_and_spellings():
    assert T.float8_e4m3fn == "float8_e4m3fn" and T.float8_e5m2 == "float8_e5m2"
    assert normalize_dtype("e4m3") == "float8_e4m3fn" and normalize_dtype("fp8_e5m2") == "float8_e5m2"
    assert T.dtype("e5m2").as_torch().__repr__() == "torch.float8_e5m2"
    from tilecore.compat.tilelang.language.fp8 import determine_fp8_type

    assert determine_fp8_type() is T.float8_e4m3fn and determine_fp8_type("e5m2") is T.float8_e5m2
    with pytest.raises(ValueError, match="unknown fp8 format"):
        determine_fp8_type("e3m4")


@pytest.mark.parametrize("name", FP8)
def test_fp8_is_computed_in_float32(name):
    """fp8 is a storage format: an fp8 operand counts as float32 in promotion, and a literal next
    to it is a float32 literal (not first rounded to fp8)."""
    assert promote(name, name) == "float32"
    assert promote(name, "float16") == "float32" and promote(name, "float64") == "float64"
    assert promote(name, "int8") == "float32"

    @T.prim_func
    def k(A: T.Tensor((4,), name), B: T.Tensor((4,), "float32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(4):
                B[i] = -A[i] * 0.1 + T.exp(A[i])

    consts = [n for n in walk(k) if isinstance(n, N.Const) and n.value == 0.1]
    assert consts and all(c.dtype == "float32" for c in consts)
    assert all(not isinstance(n, (N.BinOp, N.UnaryOp, N.Call)) or n.dtype != name for n in walk(k))
    a = np.array([1.5, -2.0, 0.0, 448.0 if name == FP8[0] else 57344.0]).astype(getattr(ml_dtypes, name))
    b = np.zeros(4, np.float32)
    tilecore.compile(k, target="reference")(a, b)
    x = a.astype(np.float32)
    np.testing.assert_allclose(b, -x * np.float32(0.1) + np.exp(x), rtol=1e-6)


@pytest.mark.parametrize("name", FP8)
def test_reference_stores_round_as_ml_dtypes(name):
    @T.prim_func
    def store(X: T.Tensor((32,), "float64"), H: T.Tensor((32,), "float16"), Y: T.Tensor((2, 32), name)):
        with T.Kernel(1) as bx:
            t = T.alloc_fragment((32,), name)
            T.copy(H, t)
            for i in T.Parallel(32):
                Y[0, i] = T.cast(X[i], name)
                Y[1, i] = t[i]

    kernel = tilecore.compile(store, target="reference")
    fp8 = getattr(ml_dtypes, name)

    @settings(max_examples=10, deadline=None)
    @given(hnp.arrays(np.float64, 32, elements=st.floats(allow_nan=True, allow_infinity=True)))
    def check(x):
        h = x.astype(np.float16)
        y = np.zeros((2, 32), fp8)
        kernel(x, h, y)
        np.testing.assert_array_equal(y[0].view(np.uint8), x.astype(fp8).view(np.uint8))
        np.testing.assert_array_equal(y[1].view(np.uint8), h.astype(fp8).view(np.uint8))

    with np.errstate(over="ignore", invalid="ignore"):
        check()


@pytest.mark.parametrize("target", ["reference", "cpu"])
def test_torch_fp8_tensors_in_and_out(target):
    torch = pytest.importorskip("torch")

    @T.prim_func
    def scale(A: T.Tensor((8,), "float8_e4m3fn"), B: T.Tensor((8,), "float8_e5m2")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(8):
                B[i] = A[i] * 2.0

    a = torch.tensor([0.5, -1.0, 3.0, 448.0, 0.001953125, -0.0, 10.0, 7.5]).to(torch.float8_e4m3fn)
    b = torch.zeros(8, dtype=torch.float8_e5m2)
    tilecore.compile(scale, target=target)(a, b)
    assert torch.equal(b.view(torch.uint8), (a.float() * 2).to(torch.float8_e5m2).view(torch.uint8))


def test_rocm_refuses_fp8_gemms_by_name():
    from tilecore.testing import gemm_kernel

    with pytest.raises(UnsupportedFeatureError, match="float8_e4m3fn") as info:
        tilecore.compile(gemm_kernel(64, 64, 64, "float8_e4m3fn", "float32"), target="rocm:gfx942")
    assert info.value.span.line > 0


def test_metal_refuses_fp8_by_name():
    """Metal does not declare fp8: the shared lowering rounds int32 / int64 into fp8 through
    float64, which Metal lacks (conformance 0.3.0, seed 28282)."""

    @T.prim_func
    def from_int(A: T.Tensor((8,), "int32"), B: T.Tensor((8,), "float8_e4m3fn")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(8):
                B[i] = A[i]

    with pytest.raises(UnsupportedFeatureError, match="float8_e4m3fn") as info:
        tilecore.compile(from_int, target="metal")
    assert info.value.span.line > 0


@pytest.mark.parametrize("target", ["rocm:gfx942", "cuda:sm_90a"])
def test_simt_backends_refuse_reductions_over_fp8_tiles_by_name(target):
    @T.prim_func
    def row_sums(A: T.Tensor((8, 16), "float8_e4m3fn"), S: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            a = T.alloc_fragment((8, 16), "float8_e4m3fn")
            s = T.alloc_fragment((8,), "float32")
            T.copy(A, a)
            T.reduce_sum(a, s, dim=1)
            T.copy(s, S)

    with pytest.raises(UnsupportedFeatureError, match="T.reduce_sum on fp8 tiles") as info:
        tilecore.compile(row_sums, target=target)
    assert info.value.span.line > 0
