"""Regressions for the bugs the QA helper found in tile-cpu (/tmp/team/cpu_bugs.md), each against the reference."""

from __future__ import annotations

import functools
import os

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tilecore
import tilecore.language as T
from tilecore.diagnostics import TileCompileError
from tilecore.testing import assert_matches_reference


@pytest.fixture(params=["native", "tvm"])
def launch_path(request, monkeypatch):
    """Both launchers: the ctypes one (default) and TVM's (the fallback, TILE_CPU_LAUNCH=tvm)."""
    if request.param == "tvm":
        monkeypatch.setenv("TILE_CPU_LAUNCH", "tvm")
    return request.param


def test_zero_size_dynamic_dimension_reduction(launch_path):
    M = T.dynamic("M")

    @T.prim_func
    def k2(A: T.Tensor((M,), "float32"), B: T.Tensor((1,), "float32")):
        with T.Kernel(1) as bx:
            s = T.alloc_var("float32")
            s = 0.0
            for i in T.serial(M):
                s += A[i]
            B[0] = s

    got = assert_matches_reference(k2, [np.ones((0,), np.float32)], backend="cpu", out_idx=[-1])
    assert got.tolist() == [0.0]


def test_zero_size_dynamic_dimension_tile_copy_grid_of_zero_blocks(launch_path):
    M = T.dynamic("M")

    @T.prim_func
    def copy_rows(A: T.Tensor((M, 8), "float32"), B: T.Tensor((M, 8), "float32")):
        with T.Kernel(T.ceildiv(M, 4)) as bx:
            tile = T.alloc_shared((4, 8), "float32")
            T.copy(A[bx * 4, 0], tile)
            T.copy(tile, B[bx * 4, 0])

    got = assert_matches_reference(copy_rows, [np.ones((0, 8), np.float32)], backend="cpu", out_idx=[-1])
    assert got.shape == (0, 8)
    # and a non-empty call of the same kernel still works
    assert_matches_reference(copy_rows, [np.arange(48, dtype=np.float32).reshape(6, 8)], backend="cpu", out_idx=[-1])


def test_read_only_numpy_input(launch_path):
    @T.prim_func
    def main(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(16):
                B[i] = A[i] * 2.0

    a = np.ones(16, np.float32)
    a.setflags(write=False)
    got = tilecore.compile(main, target="cpu", out_idx=[-1])(a)
    np.testing.assert_array_equal(got, np.full(16, 2.0, np.float32))
    assert_matches_reference(main, [a], backend="cpu", out_idx=[-1])


def test_xor_of_two_bools():
    @T.prim_func
    def main(A: T.Tensor((8,), "float32"), O: T.Tensor((8,), "int32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(8):
                O[i] = T.cast((A[i] > 0) ^ (A[i] > 0.5), "int32")

    got = assert_matches_reference(main, [np.linspace(-2, 2, 8).astype(np.float32)], backend="cpu", out_idx=[-1])
    assert got.tolist() == [0, 0, 0, 0, 1, 0, 0, 0]


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_times_zero_is_nan_for_inf_and_nan(dtype):
    @T.prim_func
    def main(A: T.Tensor((4,), dtype), B: T.Tensor((4,), dtype)):
        with T.Kernel(1) as bx:
            for i in T.Parallel(4):
                B[i] = A[i] * 0.0

    got = assert_matches_reference(main, [np.array([np.inf, np.nan, 2, -np.inf], dtype)], backend="cpu", out_idx=[-1])
    assert np.isnan(got[[0, 1, 3]]).all() and got[2] == 0


def test_min_of_minus_inf_times_zero_is_nan():
    @T.prim_func
    def main(A: T.Tensor((2,), "float32"), B: T.Tensor((2,), "float32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(2):
                B[i] = T.min(A[i], 0.0) * 0.0

    got = assert_matches_reference(main, [np.array([-np.inf, 1.0], np.float32)], backend="cpu", out_idx=[-1])
    assert np.isnan(got[0]) and got[1] == 0


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_nan_propagates_through_elementwise_max_and_min(dtype):
    @T.prim_func
    def main(
        A: T.Tensor((64,), dtype), B: T.Tensor((64,), dtype), C: T.Tensor((64,), dtype), D: T.Tensor((64,), dtype)
    ):
        with T.Kernel(1) as bx:
            for i in T.Parallel(64):
                C[i] = T.max(A[i], B[i])
                D[i] = T.min(A[i], B[i])

    rng = np.random.default_rng(5)
    a = rng.standard_normal(64).astype(dtype)
    b = rng.standard_normal(64).astype(dtype)
    a[::5] = np.nan
    b[::7] = np.nan
    a[3] = np.inf
    b[4] = -np.inf
    c, d = assert_matches_reference(main, [a, b], backend="cpu", out_idx=[-2, -1])
    assert np.isnan(c[0]) and np.isnan(d[7]) and np.isnan(c[14])


@pytest.mark.parametrize("reduce", ["max", "min", "absmax"])
def test_nan_propagates_through_reductions(reduce):
    op = {"max": T.reduce_max, "min": T.reduce_min, "absmax": T.reduce_absmax}[reduce]

    @T.prim_func
    def main(A: T.Tensor((4, 32), "float32"), B: T.Tensor((4,), "float32")):
        with T.Kernel(1) as bx:
            tile = T.alloc_fragment((4, 32), "float32")
            out = T.alloc_fragment((4,), "float32")
            T.copy(A, tile)
            op(tile, out, dim=1)
            T.copy(out, B)

    a = np.random.default_rng(2).standard_normal((4, 32)).astype(np.float32)
    a[0, 1] = np.nan
    a[2, 31] = np.nan
    a[3, 0] = np.nan
    got = assert_matches_reference(main, [a], backend="cpu", out_idx=[-1])
    assert np.isnan(got[[0, 2, 3]]).all() and not np.isnan(got[1])


def test_scalar_max_of_nan_and_zero():
    @T.prim_func
    def main(A: T.Tensor((4,), "float32"), B: T.Tensor((4,), "float32")):
        with T.Kernel(1) as bx:
            B[0] = T.max(A[0], 0.0)
            B[1] = T.min(A[1], 0.0)
            B[2] = T.max(0.0, A[2])
            B[3] = T.min(0.0, A[3])

    got = assert_matches_reference(main, [np.full(4, np.nan, np.float32)], backend="cpu", out_idx=[-1])
    assert np.isnan(got).all()


def test_bool_max_and_min_still_work():
    @T.prim_func
    def main(A: T.Tensor((8,), "float32"), O: T.Tensor((8,), "int32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(8):
                O[i] = T.cast(T.max(A[i] > 0, A[i] > 0.5), "int32") + T.cast(T.min(A[i] > 0, A[i] < 1), "int32")

    assert_matches_reference(main, [np.linspace(-2, 2, 8).astype(np.float32)], backend="cpu", out_idx=[-1])


def test_int_max_and_min_unchanged():
    @T.prim_func
    def main(A: T.Tensor((16,), "int32"), B: T.Tensor((16,), "int32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(16):
                B[i] = T.max(A[i], 3) - T.min(A[i], -2)

    assert_matches_reference(main, [np.arange(-8, 8, dtype=np.int32)], backend="cpu", out_idx=[-1])


def test_extent_of_2_pow_31_is_a_clear_error_at_the_users_line():
    n = 2**31

    @T.prim_func
    def main(A: T.Tensor((n, 4), "float32"), C: T.Tensor((n, 4), "float32")):
        with T.Kernel(1) as bx:
            for i, j in T.Parallel(n, 4):
                C[i, j] = A[i, j] * 2.0

    # one dimension beyond int32 is not supported (loop variables are int32): a clear message, no TVM error
    with pytest.raises(TileCompileError, match=r"dimension 0 of 'A' has 2147483648 elements") as info:
        tilecore.compile(main, target="cpu")
    assert "test_cpu_regressions.py" in str(info.value)


def test_int8_flat_offset_beyond_int32_compiles():
    n = 70000

    @T.prim_func
    def main(A: T.Tensor((n, n), "int8"), C: T.Tensor((n, n), "int8")):
        with T.Kernel(T.ceildiv(n, 64)) as bx:
            for i, j in T.Parallel(64, n):
                C[bx * 64 + i, j] = A[bx * 64 + i, j] + 1

    tilecore.compile(main, target="cpu")  # 4.9e9 elements per tensor: compile only


@pytest.mark.skipif(not os.environ.get("TILECORE_SLOW"), reason="needs 4.3 GB of memory; TILECORE_SLOW=1 runs it")
def test_flat_offsets_beyond_int32_run_correctly():
    rows, cols = 2**15 + 2, 2**16  # 2**31 + 2**17 elements: the last rows' flat offsets exceed int32

    @T.prim_func
    def main(A: T.Tensor((rows, cols), "int8"), C: T.Tensor((rows, cols), "int8")):
        with T.Kernel(rows) as bx:
            for j in T.Parallel(cols):
                C[bx, j] = A[bx, j] + 1

    a = np.zeros((rows, cols), np.int8)
    a[-1, -1] = 5
    a[-1, 7] = 9
    got = tilecore.compile(main, target="cpu", out_idx=[-1])(a)
    assert got[-1, -1] == 6 and got[-1, 7] == 10 and got[0, 0] == 1
    assert (got == 1).sum() == got.size - 2


PRINT_CASES = [
    ((4,), "float32", [0, 1, 2, 3]),
    ((4,), "float32", [0.5, 1, 2, 3]),
    ((2, 3), "float32", [0, 1, 2, 3, 4, 5]),
    ((2, 4), "float64", [0.5, -1, np.nan, np.inf, 1 / 3, 2, 10, 0.25]),
    ((5,), "float32", [1e-5, 1, 2, 3, 1e4]),
    ((3,), "float32", [1e-5, 1e7, 1 / 3]),
    ((3,), "float16", [0.1, 1e-5, 1000]),
    ((2, 3), "int32", [1, -20, 300, 4, 5, 6]),
    ((2,), "bfloat16", [0.1, 6]),
]


@pytest.mark.parametrize("shape,dtype,values", PRINT_CASES)
def test_print_formats_like_the_reference(capfd, shape, dtype, values):
    rank = len(shape)

    @T.prim_func
    def main(A: T.Tensor(shape, dtype), B: T.Tensor(shape, dtype)):
        with T.Kernel(1) as bx:
            s = T.alloc_fragment(shape, dtype)
            T.copy(A, s)
            T.print(s, msg="tile")
            T.print(A[0] * 3 if rank == 1 else A[0, 0] * 3, msg="three times")
            T.copy(s, B)

    np_dtype = ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype
    a = np.array(values, np_dtype).reshape(shape)
    tilecore.compile(main, target="reference", out_idx=[-1])(a)
    want = capfd.readouterr()
    tilecore.compile(main, target="cpu", out_idx=[-1])(a)
    got = capfd.readouterr()
    assert got.out == want.out


def test_print_formats_floats_like_the_reference(capfd):
    @T.prim_func
    def main(A: T.Tensor((4,), "float32"), B: T.Tensor((4,), "float32")):
        with T.Kernel(1) as bx:
            s = T.alloc_fragment((4,), "float32")
            T.copy(A, s)
            T.print(A[3] * 2, msg="twice A[3]")
            T.print(s)
            T.copy(s, B)

    a = np.array([0, 1, 2, 3], np.float32)
    tilecore.compile(main, target="reference", out_idx=[-1])(a)
    want = capfd.readouterr()
    tilecore.compile(main, target="cpu", out_idx=[-1])(a)
    got = capfd.readouterr()
    assert (got.out + got.err).strip().splitlines() == (want.out + want.err).strip().splitlines()


# ----------------------------------------------------------------------------- found by the conformance edge values


def _cpu_run(kernel, *arrays):
    out = [a.copy() for a in arrays]
    tilecore.compile(kernel, target="cpu")(*out)
    return out


def test_nan_converts_to_true():
    """bool(x) is x != 0, and NaN != 0 (an ordered compare said False)."""

    @T.prim_func
    def k(A: T.Tensor((4,), "float64"), B: T.Tensor((4,), "bool")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(4):
                B[i] = T.cast(A[i], "bool")

    a = np.array([np.nan, 0.0, -0.0, 1e-300])
    _, b = _cpu_run(k, a, np.zeros(4, bool))
    assert b.tolist() == [True, False, False, True]


def test_float64_to_bfloat16_rounds_once():
    """float64 -> bfloat16 is one correct rounding: through float32 it rounded twice (86.50000012 -> 86)."""

    @T.prim_func
    def k(A: T.Tensor((3,), "float64"), B: T.Tensor((3,), "bfloat16")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(3):
                B[i] = A[i]

    a = np.array([float.fromhex("-0x1.5900008000000p+6"), float.fromhex("0x1.3d00008000000p-45"), 86.25])
    _, b = _cpu_run(k, a, np.zeros(3, ml_dtypes.bfloat16))
    from tilecore.interp.dtypes import convert

    assert b.view(np.uint16).tolist() == convert(a, "bfloat16").view(np.uint16).tolist()
    assert b.astype(np.float64)[[0, 2]].tolist() == [-86.5, 86.0]


@pytest.mark.parametrize("dtype", ["float64", "bfloat16", "float16"])
def test_tanh_keeps_relative_accuracy_near_zero(dtype):
    """TVM's tanh, (1 - e^-2x) / (1 + e^-2x), cancelled near 0 (tanh(1e-8) was 0 in bfloat16)."""

    @T.prim_func
    def k(A: T.Tensor((4,), dtype), B: T.Tensor((4,), dtype)):
        with T.Kernel(1) as bx:
            for i in T.Parallel(4):
                B[i] = T.tanh(A[i])

    npd = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
    a = np.array([1e-8, -3e-5, 0.0024, 0.5]).astype(npd)
    _, b = _cpu_run(k, a, np.zeros(4, npd))
    want = np.tanh(a.astype(np.float64))
    assert np.all(
        np.abs(b.astype(np.float64) - want) <= 2 * np.abs(want) * (2.0**-52 if dtype == "float64" else 2.0**-7)
    ), (b, want)


def test_signed_overflow_wraps_inside_expressions():
    """int8 / int16 + - * wrap (two's complement) even where LLVM could exploit `nsw` (TVM marks signed
    arithmetic so); int64: test_int64_arithmetic_on_data_wraps."""

    @T.prim_func
    def k(A: T.Tensor((4,), "int16"), O: T.Tensor((4,), "int16"), P: T.Tensor((4,), "int8"), Z: T.Tensor((4,), "int8")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(4):
                O[i] = T.min(A[i] + A[i], 100)
                P[i] = T.cast(A[i], "int8") * T.cast(A[i], "int8") - T.cast(A[i], "int8")
                Z[i] = T.cast(A[i], "int8") - T.cast(A[i], "int8")  # folds to 0: no reinterpret of a constant

    a = np.array([20000, 32767, -3, 100], np.int16)
    _, o, p, z = _cpu_run(k, a, np.zeros(4, np.int16), np.zeros(4, np.int8), np.ones(4, np.int8))
    assert z.tolist() == [0, 0, 0, 0]
    from tilecore import interp

    ro, rp = np.zeros(4, np.int16), np.zeros(4, np.int8)
    interp.run(k, [a.copy(), ro, rp, np.ones(4, np.int8)])
    assert o.tolist() == ro.tolist() and p.tolist() == rp.tolist()
    assert o[0] < 0


@T.prim_func
def _int32_data_wraps(
    A: T.Tensor((64,), "uint8"), B: T.Tensor((64,), "int32"), C: T.Tensor((64,), "int8"), O: T.Tensor((6, 64), "int32")
):
    with T.Kernel(1, threads=64) as bx:
        for i in T.Parallel(64):
            O[0, i] = T.cast(not ((B[i] + A[i]) > B[i]), "int32")  # LLVM folded this to A[i] == 0
            x = B[i] * 2  # a name bound to data: its arithmetic wraps too
            O[1, i] = T.cast(x + 1 > x, "int32")
            O[2, i] = T.cast(-B[i] < 0, "int32")
            O[3, i] = T.min(B[i] + B[i], 100)
            O[4, i] = T.cast(-C[i] > 0, "int32")  # narrow dtypes: uint8(0) - uint8(c) folded to 0
            O[5, i] = T.cast(C[i] + C[i] < C[i], "int32")


@functools.lru_cache(maxsize=1)
def _int32_data_wraps_kernel():
    return tilecore.compile(_int32_data_wraps, target="cpu")


int32s = st.one_of(st.integers(-(2**31), 2**31 - 1), st.sampled_from([2**31 - 1, -(2**31), 2**30, -(2**30) - 1]))


@settings(max_examples=15, deadline=None)
@given(
    b=st.lists(int32s, min_size=64, max_size=64),
    a=st.lists(st.integers(0, 255), min_size=64, max_size=64),
    c=st.lists(st.integers(-128, 127), min_size=64, max_size=64),
)
def test_integer_arithmetic_on_data_wraps(a, b, c):
    """int32 + - * of values read from memory wrap like the reference (conformance seed 5151, program
    163: TVM marks signed arithmetic `nsw`, and LLVM folded `not (B + A > B)` to `A == 0`); int32 index
    arithmetic of loop variables stays plain (tilecore/lowering/tir_expr.py, _WRAP_WIDE_DATA)."""
    a, b, c = np.array(a, np.uint8), np.array(b, np.int32), np.array(c, np.int8)
    _assert_same_as_interpreter(_int32_data_wraps_kernel(), _int32_data_wraps, [a, b, c], np.zeros((6, 64), np.int32))


def _assert_same_as_interpreter(kernel, func, inputs, out):
    """The compiled kernel and the reference interpreter write the same `out` from `inputs`."""
    from tilecore import interp

    got, want = out.copy(), out.copy()
    kernel(*inputs, got)
    interp.run(func, [*inputs, want])
    np.testing.assert_array_equal(got, want)


@T.prim_func
def _int64_data_wraps(
    A: T.Tensor((64,), "uint8"),
    B: T.Tensor((64,), "int64"),
    C: T.Tensor((64,), "int64"),
    O: T.Tensor((11, 64), "int64"),
):
    with T.Kernel(1, threads=64) as bx:
        for i in T.Parallel(64):
            O[0, i] = T.cast(not ((B[i] + A[i]) > B[i]), "int64")  # LLVM folded this (TVM marks int64 `nsw`)
            x = B[i] * 2
            O[1, i] = T.cast(x + 1 > x, "int64")
            O[2, i] = T.cast(-B[i] < 0, "int64")
            O[3, i] = T.min(B[i] + B[i], 100)
            O[4, i] = T.cast(B[i] - C[i] < B[i], "int64")
            O[5, i] = B[i] * C[i] - C[i]
            O[6, i] = B[i] - B[i]  # folds to 0 (no reinterpreted constant reaches TVM's LLVM codegen)
            # TVM's bound analysis knows B >= 0 / A > 3 here; the wrapped value's bound must not follow
            O[7, i] = T.if_then_else(B[i] >= 0, T.cast(B[i] + 1 >= 1, "int64"), 7)
            O[8, i] = T.if_then_else(A[i] > 3, T.cast((T.cast(A[i], "int64") << 62) >= 0, "int64"), 7)
            O[9, i] = B[i] ** 3
        for i in T.serial(64):
            if B[i] >= 0:
                O[10, i] = T.cast(B[i] * B[i] >= 0, "int64")


@functools.lru_cache(maxsize=1)
def _int64_data_wraps_kernel():
    return tilecore.compile(_int64_data_wraps, target="cpu")


int64s = st.one_of(
    st.integers(-(2**63), 2**63 - 1), st.sampled_from([2**63 - 1, -(2**63), 2**62, -(2**62) - 1, 2**32 + 1, 3])
)


@settings(max_examples=12, deadline=None)
@given(
    b=st.lists(int64s, min_size=64, max_size=64),
    c=st.lists(int64s, min_size=64, max_size=64),
    a=st.lists(st.integers(0, 255), min_size=64, max_size=64),
)
def test_int64_arithmetic_on_data_wraps(a, b, c):
    """int64 + - * << ** of values read from memory wrap like the reference: TVM marks int64 arithmetic
    `nsw` and uint64 arithmetic `nuw`, so they are computed in int128 and truncated behind an XOR that
    TVM's bound analysis does not follow (tilecore/lowering/tir_expr.py, wrapping_int64)."""
    a, b, c = np.array(a, np.uint8), np.array(b, np.int64), np.array(c, np.int64)
    _assert_same_as_interpreter(_int64_data_wraps_kernel(), _int64_data_wraps, [a, b, c], np.zeros((11, 64), np.int64))


@T.prim_func
def _float_identities(
    A: T.Tensor((64,), "float32"),
    B: T.Tensor((64,), "float32"),
    H: T.Tensor((64,), "bfloat16"),
    G: T.Tensor((64,), "bfloat16"),
    O: T.Tensor((8, 64), "int32"),
    F: T.Tensor((8, 64), "float32"),
    P: T.Tensor((4, 64), "bfloat16"),
):
    with T.Kernel(1, threads=64) as bx:
        for i in T.Parallel(64):
            O[0, i] = T.cast(A[i] != A[i], "int32")  # TVM folded x != x to false, x == x to true
            O[1, i] = T.cast(A[i] == A[i], "int32")
            O[2, i] = T.cast(A[i] != B[i], "int32")  # TVM's LLVM codegen emits != ordered: false for NaN
            x = A[i] * 2.0
            O[3, i] = T.cast(x != x, "int32")
            O[4, i] = T.cast(H[i] != G[i], "int32")
            O[5, i] = T.cast(H[i] == H[i], "int32")
            O[6, i] = T.cast(T.if_then_else(A[i] != A[i], 1.0, 0.0), "int32")
            O[7, i] = T.cast(A[i] <= A[i], "int32")
            F[0, i] = (A[i] + B[i]) - B[i]  # folded to A: wrong for rounding, inf and NaN
            F[1, i] = A[i] - (A[i] + B[i])
            F[2, i] = x - x
            F[3, i] = -A[i]  # was 0.0 - A: +0.0 for A = +0.0
            F[4, i] = 0.0 + A[i]  # folded to A: -0.0 + 0.0 is +0.0
            F[5, i] = A[i] - (-0.0)
            F[6, i] = T.if_then_else(A[i] > 1.0, A[i], B[i]) - B[i]
            F[7, i] = (A[i] + 1.0) - 1.0
            P[0, i] = (H[i] + G[i]) - G[i]
            P[1, i] = H[i] - H[i]
            P[2, i] = -H[i]
            P[3, i] = H[i] + 0.0


@functools.lru_cache(maxsize=1)
def _float_identities_kernel():
    return tilecore.compile(_float_identities, target="cpu")


ieee_floats = st.one_of(
    st.sampled_from([float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1e-30, 3e38, -1.0, 1.0]),
    st.floats(width=32, allow_nan=True, allow_infinity=True),
)


@settings(max_examples=10, deadline=None)
@given(values=st.lists(ieee_floats, min_size=256, max_size=256))
def test_float_identities_keep_ieee_semantics(values):
    """Float x != x, x == x, x - x, (x + y) - y, x - (x + y), x + 0.0, -x and a NaN operand of != follow
    IEEE like the reference: TVM folds float cancellations on purpose and emits != ordered
    (tilecore/lowering/tir_expr.py, ieee_add_sub and float_compare; found by the cpu-wrap mutation
    sweep, where T.max / reduce_max NaN bugs planted with x != x were folded away)."""
    from tilecore import interp

    v = np.array(values, np.float32).reshape(4, 64)
    a, b = v[0], v[1]
    h, g = v[2].astype(ml_dtypes.bfloat16), v[3].astype(ml_dtypes.bfloat16)
    got = [np.zeros((8, 64), np.int32), np.zeros((8, 64), np.float32), np.zeros((4, 64), ml_dtypes.bfloat16)]
    want = [x.copy() for x in got]
    _float_identities_kernel()(a, b, h, g, *got)
    interp.run(_float_identities, [a, b, h, g, *want])
    np.testing.assert_array_equal(got[0], want[0])
    for x, y in zip(got[1:], want[1:]):
        x, y = x.astype(np.float64), y.astype(np.float64)
        same = (x == y) & (np.signbit(x) == np.signbit(y)) | (np.isnan(x) & np.isnan(y))
        assert same.all(), (np.argwhere(~same)[:5], x[~same][:5], y[~same][:5])


def test_int64_accumulator_update_under_runtime_if():
    """O = O - int64(a) * 2 in the else branch of a run-time if (conformance control family)."""

    @T.prim_func
    def k(A: T.Tensor((1, 2), "int32"), Out: T.Tensor((1,), "int64")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((1, 2), "int32")
            T.copy(A[0, 0], A_s)
            O_t = T.alloc_fragment((1,), "int64")
            for i in T.serial(1):
                O_t[i] = 0
                for j in T.serial(2):
                    if A_s[i, j] > -1:
                        O_t[i] = O_t[i] + T.cast(A_s[i, j], "int64")
                    else:
                        O_t[i] = O_t[i] - T.cast(A_s[i, j], "int64") * 2
            T.copy(O_t, Out[0])

    _, out = _cpu_run(k, np.array([[37, -8]], np.int32), np.zeros(1, np.int64))
    assert out.tolist() == [53]


def test_int64_to_int32_narrowing_of_a_folded_constant_wraps():
    """int64 -> int32 wraps, also where TVM folds the value to a constant (bx of a 1-block grid):
    TVM aborted in its IntImm check ("Literal value 4294967312 exceeds range of int32", found by
    the mutation sweep's offset32 bug, whose 32-bit offsets narrow such a constant)."""

    @T.prim_func
    def k(A: T.Tensor((64, 32), "int8"), Out: T.Tensor((16, 32), "int32")):
        with T.Kernel(1, threads=32) as bx:
            S = T.alloc_shared((16, 32), "int8")
            T.copy(A[T.cast(T.cast(bx, "int64") + 4294967312, "int32"), 0], S)  # row 16
            for i, j in T.Parallel(16, 32):
                Out[i, j] = S[i, j] + T.cast(T.cast(bx, "int64") + 3000000000, "int32")

    a = np.arange(64 * 32).reshape(64, 32).astype(np.int8)
    _, out = _cpu_run(k, a, np.zeros((16, 32), np.int32))
    np.testing.assert_array_equal(out, a[16:32].astype(np.int64) + 3000000000 - 2**32)


@settings(max_examples=3, deadline=None)
@given(stages=st.integers(0, 3), first=st.integers(0, 3), steps=st.integers(1, 4), seed=st.integers(0, 99))
def test_pipelined_copy_from_a_tile_chosen_by_a_name_bound_in_the_loop(stages, first, steps, seed):
    """A T.Pipelined loop whose copy starts at a name bound inside the loop (TileLang's block-causal
    backward): the prefetch of the next tile ran before the name was bound ('t used before definition')."""
    rows = 8 * (first + steps)

    @T.prim_func
    def pick(A: T.Tensor((rows, 8), "float32"), B: T.Tensor((8, 8), "float32")):
        with T.Kernel(1) as bx:
            s = T.alloc_shared((8, 8), "float32")
            acc = T.alloc_fragment((8, 8), "float32")
            T.clear(acc)
            for step in T.Pipelined(steps, num_stages=stages):
                t = T.if_then_else(bx < 1, first + step, step)
                T.copy(A[t * 8 : (t + 1) * 8, :], s)
                late = t >= first + 1
                for i, j in T.Parallel(8, 8):
                    acc[i, j] += T.if_then_else(late, s[i, j] * 2, s[i, j])
            T.copy(acc, B)

    a = np.random.default_rng(seed).random((rows, 8)).astype(np.float32)
    want = sum(a[(first + k) * 8 : (first + k + 1) * 8] * (2 if k >= 1 else 1) for k in range(steps))
    out = tilecore.compile(pick, target="cpu", out_idx=[-1])(a)
    np.testing.assert_allclose(out, want, rtol=1e-5)
    assert_matches_reference(pick, [a], backend="cpu", out_idx=[-1])


@pytest.mark.parametrize("func", ["exp", "exp2", "sigmoid", "tanh"])
def test_a_named_vectorizable_math_value_inside_a_loop_compiles(func):
    """`last = g[15]; e = T.exp(last)` inside a loop, used in a T.Parallel loop: the name's value carried the
    vectorizable expansion's lets, and TVM's simplifier refused to bind one of them twice
    ("Binding of variable xc ... conflicts with previous binding"; TileLang's
    gdn/example_chunk_delta_bwd.py). The lets are now binds of their own (intrinsics.let_chain)."""
    fn = getattr(T, func)

    @T.prim_func
    def k(G: T.Tensor((2, 16), "float32"), X: T.Tensor((2, 16, 16), "float32")):
        with T.Kernel(2) as bx:
            g = T.alloc_shared((16,), "float32")
            x = T.alloc_fragment((16, 16), "float32")
            T.copy(X[bx, 0, 0], x)
            for s in T.serial(2):
                T.copy(G[bx, 0], g)
                last = g[15]
                e = fn(last)
                for i, j in T.Parallel(16, 16):
                    x[i, j] = x[i, j] * e
            T.copy(x, X[bx, 0, 0])

    rng = np.random.default_rng(0)
    assert_matches_reference(
        k, [rng.random((2, 16), dtype=np.float32), np.ones((2, 16, 16), np.float32)], backend="cpu"
    )
