"""fp8 on cpu is bit-exact with ml_dtypes: conversions from every float dtype (round to nearest
even, subnormals, overflow to NaN in e4m3fn / inf in e5m2, NaN with its sign), widening back,
and T.gemm on fp8 tiles with a float32 accumulator.

TVM's own fp8 legalization on LLVM rounds wrongly (it flushed 0.0029 to 0.0078 and turned
1e9 into 0.23); tile-cpu holds fp8 in float32 with tilecore.lowering.fp8's conversions.
"""

from __future__ import annotations

import functools

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tilecore
import tilecore.language as T

FP8 = ("float8_e4m3fn", "float8_e5m2")
N = 64


@functools.lru_cache(maxsize=None)
def _converter():
    """One kernel: float32 and float64 inputs stored into e4m3fn, float32 (through T.cast) and
    bfloat16 inputs into e5m2, and the e4m3fn result (a fragment, held in float32 inside the
    kernel) widened again."""

    @T.prim_func
    def convert(
        X32: T.Tensor((N,), "float32"),
        X64: T.Tensor((N,), "float64"),
        XB: T.Tensor((N,), "bfloat16"),
        E4: T.Tensor((2, N), "float8_e4m3fn"),
        E5: T.Tensor((2, N), "float8_e5m2"),
        Back: T.Tensor((N,), "float32"),
    ):
        with T.Kernel(1) as bx:
            tile = T.alloc_fragment((N,), "float8_e4m3fn")
            T.copy(X32, tile)
            for i in T.Parallel(N):
                E4[0, i] = X32[i]
                E4[1, i] = X64[i]
                E5[0, i] = T.cast(X32[i], "float8_e5m2")
                E5[1, i] = XB[i]
                Back[i] = tile[i]

    return tilecore.compile(convert, target="cpu")


def _bits(a):
    return np.asarray(a).view(np.uint8)


def _check(x64: np.ndarray) -> None:
    x32, xb = x64.astype(np.float32), x64.astype(ml_dtypes.bfloat16)
    e4 = np.zeros((2, N), ml_dtypes.float8_e4m3fn)
    e5 = np.zeros((2, N), ml_dtypes.float8_e5m2)
    back = np.zeros(N, np.float32)
    _converter()(x32, x64, xb, e4, e5, back)
    for out, name, sources in ((e4, "float8_e4m3fn", (x32, x64)), (e5, "float8_e5m2", (x32, xb))):
        fp8 = getattr(ml_dtypes, name)
        for row, src in enumerate(sources):
            np.testing.assert_array_equal(_bits(out[row]), _bits(src.astype(fp8)), err_msg=f"{src.dtype} -> {name}")
    np.testing.assert_array_equal(back, x32.astype(ml_dtypes.float8_e4m3fn).astype(np.float32))


def _grid_and_ties(name: str) -> np.ndarray:
    """Every finite value of an fp8 dtype, the midpoints between neighbours and their float64
    neighbours (a float32 detour would round those onto the tie), and the special values."""
    codes = np.arange(256, dtype=np.uint8).view(getattr(ml_dtypes, name)).astype(np.float64)
    grid = np.unique(codes[np.isfinite(codes)])
    mids = (grid[1:] + grid[:-1]) / 2
    special = [np.nan, -np.nan, np.inf, -np.inf, 1e30, -1e30, 1e-30, -0.0, 464.0, 465.0, 61440.0, 2.0**-10, 2.0**-17]
    return np.concatenate([grid, mids, np.nextafter(mids, np.inf), np.nextafter(mids, -np.inf), special])


@pytest.mark.parametrize("name", FP8)
def test_every_fp8_value_tie_and_special_value_converts_as_ml_dtypes(name):
    values = _grid_and_ties(name)
    values = np.concatenate([values, np.zeros(-len(values) % N)])
    for chunk in values.reshape(-1, N):
        _check(chunk)


@settings(max_examples=15, deadline=None)
@given(
    hnp.arrays(
        np.float64,
        N,
        elements=st.one_of(
            st.floats(allow_nan=True, allow_infinity=True), st.floats(-600.0, 600.0), st.floats(-1e-3, 1e-3)
        ),
    )
)
def test_random_values_convert_as_ml_dtypes(x64):
    _check(x64)


def test_fp8_gemm_accumulates_exact_products_in_float32():
    name = "float8_e4m3fn"

    @T.prim_func
    def gemm(A: T.Tensor((32, 64), name), B: T.Tensor((16, 64), name), C: T.Tensor((32, 16), "float32")):
        with T.Kernel(1) as bx:
            a = T.alloc_shared((32, 64), name)
            b = T.alloc_shared((16, 64), name)
            c = T.alloc_fragment((32, 16), "float32")
            T.clear(c)
            T.copy(A, a)
            T.copy(B, b)
            T.gemm(a, b, c, transpose_B=True)
            T.copy(c, C)

    rng = np.random.default_rng(3)
    fp8 = getattr(ml_dtypes, name)
    # small integers times powers of two: every product and partial sum is exact in float32,
    # so any accumulation order gives the same answer
    a = (rng.integers(-8, 9, (32, 64)) * 0.25).astype(fp8)
    b = (rng.integers(-8, 9, (16, 64)) * 0.5).astype(fp8)
    want = a.astype(np.float64) @ b.astype(np.float64).T
    for target in ("cpu", "reference"):
        c = np.zeros((32, 16), np.float32)
        tilecore.compile(gemm, target=target)(a, b, c)
        np.testing.assert_array_equal(c, want, err_msg=target)


def test_fp8_reductions_and_fill_match_the_reference():
    name = "float8_e4m3fn"

    @T.prim_func
    def tiles(
        A: T.Tensor((8, 16), name), S: T.Tensor((8,), "float32"), M: T.Tensor((8,), name), F: T.Tensor((8,), name)
    ):
        with T.Kernel(1) as bx:
            a = T.alloc_fragment((8, 16), name)
            s = T.alloc_fragment((8,), "float32")
            m = T.alloc_fragment((8,), name)
            f = T.alloc_fragment((8,), name)
            T.copy(A, a)
            T.reduce_sum(a, s, dim=1)
            T.reduce_absmax(a, m, dim=1)
            T.fill(f, 0.3)
            T.copy(s, S)
            T.copy(m, M)
            T.copy(f, F)

    a = (np.random.default_rng(5).integers(-16, 17, (8, 16)) * 0.5).astype(ml_dtypes.float8_e4m3fn)
    got = {}
    for target in ("reference", "cpu"):
        outs = (np.zeros(8, np.float32), np.zeros(8, ml_dtypes.float8_e4m3fn), np.zeros(8, ml_dtypes.float8_e4m3fn))
        tilecore.compile(tiles, target=target)(a, *outs)
        got[target] = outs
    for ref, cpu in zip(got["reference"], got["cpu"]):  # sums of halves: exact in any order
        np.testing.assert_array_equal(_bits(cpu), _bits(ref))
    assert float(got["cpu"][2][0]) == float(np.float32(0.3).astype(ml_dtypes.float8_e4m3fn))


@pytest.mark.parametrize("op", ["T.cumsum(a, dim=1)", "T.atomic_add(A[0, 0], 1.0)"])
def test_fp8_scans_and_atomics_are_refused_on_cpu(op):
    from tilecore.diagnostics import UnsupportedFeatureError
    from tilecore.frontend import parse_source

    src = (
        "import tilecore.language as T\n"
        "@T.prim_func\n"
        "def k(A: T.Tensor((8, 16), 'float8_e4m3fn')):\n"
        "    with T.Kernel(1) as bx:\n"
        "        a = T.alloc_fragment((8, 16), 'float8_e4m3fn')\n"
        "        T.copy(A, a)\n"
        f"        {op}\n"
        "        T.copy(a, A)\n"
    )
    with pytest.raises(UnsupportedFeatureError, match="fp8") as info:
        tilecore.compile(parse_source(src), target="cpu")
    assert info.value.span.line == 7
