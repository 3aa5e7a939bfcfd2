"""Scalar kernel parameters (`n: T.int32`): a value passed at each call, usable wherever a
T.dynamic dimension may stand (grid extents, loop bounds, indices, arithmetic)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tilecore
import tilecore.language as T
from tilecore.diagnostics import TileCompileError, TileError, TileRuntimeError, UnsupportedFeatureError
from tilecore.ir.printer import to_source
from tilecore.ir.serialize import dumps, loads

TARGETS = ["reference", "cpu"]
BLOCK = 4
n = T.dynamic("n")


@T.prim_func
def head_scaled(A: T.Tensor((n,), "float32"), count: T.int32, B: T.Tensor((n,), "float32")):
    # the first `count` elements of A times count, the rest zero; count sizes the grid
    with T.Kernel(T.ceildiv(count, BLOCK)) as bx:
        for i in T.Parallel(BLOCK):
            if bx * BLOCK + i < count:
                B[bx * BLOCK + i] = A[bx * BLOCK + i] * count


@T.prim_func
def shifted_sum(offset: T.int32, A: T.Tensor((8, 16), "int32"), steps: T.int32, S: T.Tensor((8,), "int32")):
    # S[r] = sum over k < steps of A[r, (k + offset) % 16]: scalars as a loop bound and in an index
    with T.Kernel(1) as _:
        acc = T.alloc_fragment((8,), "int32")
        T.clear(acc)
        for k in T.serial(steps):
            for r in T.Parallel(8):
                acc[r] += A[r, (k + offset) % 16]
        T.copy(acc, S)


def _kernels(target):
    return (
        tilecore.compile(head_scaled, target=target, out_idx=[-1]),
        tilecore.compile(shifted_sum, target=target, out_idx=[-1]),
    )


@pytest.fixture(scope="module", params=TARGETS)
def kernels(request):
    if request.param == "cpu":
        pytest.importorskip("tile_cpu")
    return _kernels(request.param)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(size=st.integers(1, 40), data=st.data())
def test_scalar_sizes_the_grid_and_scales(kernels, size, data):
    count = data.draw(st.integers(0, size), label="count")  # 0: a grid of no blocks
    a = np.random.default_rng(size).standard_normal(size).astype(np.float32)
    expected = np.where(np.arange(size) < count, a * np.float32(count), 0).astype(np.float32)
    np.testing.assert_array_equal(kernels[0](a, count), expected)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(offset=st.integers(-(1 << 20), 1 << 20), steps=st.integers(0, 20))
def test_scalars_as_loop_bound_and_index(kernels, offset, steps):
    a = np.arange(8 * 16, dtype=np.int32).reshape(8, 16)
    cols = [(k + offset) % 16 for k in range(steps)]  # % takes the divisor's sign, as in Python
    expected = a[:, cols].sum(axis=1, dtype=np.int32) if cols else np.zeros(8, np.int32)
    np.testing.assert_array_equal(kernels[1](offset, a, steps), expected)


def test_arguments_by_keyword_and_numpy_integers():
    kernel = tilecore.compile(shifted_sum, target="reference", out_idx=[-1])
    a = np.ones((8, 16), np.int32)
    np.testing.assert_array_equal(kernel(A=a, steps=np.int64(3), offset=np.int32(1)), np.full(8, 3))


def test_out_idx_counts_scalar_parameters():
    # parameter 2 of head_scaled is B; -2 is the scalar `count`
    kernel = tilecore.compile(head_scaled, target="reference", out_idx=[2])
    np.testing.assert_array_equal(kernel(np.ones(4, np.float32), 2), [2, 2, 0, 0])
    with pytest.raises(TileError, match="the scalar parameter 'count'"):
        tilecore.compile(head_scaled, target="reference", out_idx=[-2])


@pytest.mark.parametrize(
    "value, message",
    [
        (2.5, "expected an integer.*got float"),
        (True, "expected an integer.*got bool"),
        (np.ones(2, np.int32), "expected an integer.*got ndarray"),
        (1 << 31, "2147483648 does not fit the scalar parameter's dtype int32"),
    ],
)
def test_bad_scalar_arguments_name_the_parameter(value, message):
    kernel = tilecore.compile(head_scaled, target="reference", out_idx=[-1])
    with pytest.raises(TileRuntimeError, match="argument 'count': " + message):
        kernel(np.ones(4, np.float32), value)


def test_missing_scalar_argument():
    kernel = tilecore.compile(head_scaled, target="reference", out_idx=[-1])
    assert repr(kernel) == "<tilecore.Kernel head_scaled(A, count) -> (B) on reference>"
    with pytest.raises(TileRuntimeError, match=r"takes 2 input\(s\) \(A, count\) but 1 were given"):
        kernel(np.ones(4, np.float32))


def test_float_scalar_parameter_is_a_located_error():
    with pytest.raises(TileCompileError, match="scalar parameter 'scale' has dtype float32") as info:

        @T.prim_func
        def scaled(A: T.Tensor((4,), "float32"), scale: T.float32):
            with T.Kernel(1) as _:
                for i in T.Parallel(4):
                    A[i] = A[i] * scale

    assert f"{__file__}:" in str(info.value)


def test_scalar_parameters_with_several_stages_are_a_clear_error():
    @T.prim_func
    def two_stages(A: T.Tensor((4,), "float32"), k: T.int32):
        with T.Kernel(1) as _:
            A[0] = k
        with T.Kernel(1) as _:
            A[1] = k

    with pytest.raises(UnsupportedFeatureError, match="scalar parameters in a prim_func with several"):
        tilecore.compile(two_stages, target="reference")


def test_printer_and_json_keep_scalar_parameters_in_place():
    text = to_source(shifted_sum)
    assert 'def shifted_sum(offset: T.int32, A: T.Tensor((8, 16), "int32"), steps: T.int32, ' in text
    assert "T.dynamic" not in text
    assert loads(dumps(shifted_sum)) == shifted_sum
    assert loads(dumps(shifted_sum)).scalar_params == shifted_sum.scalar_params


def test_npu_runs_scalar_parameters():
    pytest.importorskip("tile_npu")
    kernel = tilecore.compile(head_scaled, target="npu", out_idx=[-1])
    np.testing.assert_array_equal(kernel(np.arange(6, dtype=np.float32), 3), [0, 3, 6, 0, 0, 0])


def test_a_negative_grid_extent_is_an_error_at_the_kernel_line():
    kernel = tilecore.compile(head_scaled, target="reference", out_idx=[-1])
    with pytest.raises(TileRuntimeError, match=r"negative grid size \(-1,\)") as info:
        kernel(np.ones(4, np.float32), -5)
    assert "test_scalar_params.py:" in str(info.value)
