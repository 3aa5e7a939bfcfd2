"""Property tests of the interpreter against per-element Python oracles (hypothesis)."""

from __future__ import annotations

import math
import os
import sys

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tilecore.interp import np_dtype, run
from tilecore.ir import nodes as N
from tilecore.ir.types import promote

sys.path.insert(0, os.path.dirname(__file__))
from test_interp_support import add, binop, buf, const, func, kernel, load, lt, parallel, region, store, var, whole  # noqa: E402

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def one_block(params, body):
    return func(params, [kernel([1], ["bx"], body)])


# ----------------------------------------------------------------------------- tile copies


@st.composite
def copy_case(draw):
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(1, 6)) for _ in range(ndim))
    extents = tuple(draw(st.integers(1, 6)) for _ in range(ndim))
    starts = tuple(draw(st.integers(-7, 8)) for _ in range(ndim))
    dst_starts = tuple(draw(st.integers(-7, 8)) for _ in range(ndim))
    return shape, extents, starts, dst_starts


@SETTINGS
@given(copy_case())
def test_tile_copy_matches_elementwise_oracle(case):
    shape, extents, starts, dst_starts = case
    A, B = buf("A", shape), buf("B", shape)
    S = buf("S", extents, scope="shared")
    body = [N.Alloc(S), N.Copy(region(A, starts, extents), whole(S)), N.Copy(whole(S), region(B, dst_starts, extents))]
    a = np.arange(1, np.prod(shape) + 1, dtype=np.float32).reshape(shape)
    b = np.full(shape, -1.0, np.float32)
    run(one_block([A, B], body), [a, b])
    expect = np.full(shape, -1.0, np.float32)
    for t in np.ndindex(*extents):
        src = tuple(s + k for s, k in zip(starts, t))
        dst = tuple(s + k for s, k in zip(dst_starts, t))
        value = a[src] if all(0 <= i < n for i, n in zip(src, shape)) else 0.0
        if all(0 <= i < n for i, n in zip(dst, shape)):
            expect[dst] = value
    np.testing.assert_array_equal(b, expect)


# ----------------------------------------------------------------------------- integer arithmetic


INT_TYPES = ["int8", "int16", "int32", "int64", "uint8"]


def wrap(value: int, dtype: str) -> int:
    bits = np.iinfo(np_dtype(dtype)).bits
    value &= (1 << bits) - 1
    if dtype != "uint8" and value >= 1 << (bits - 1):
        value -= 1 << bits
    return value


def python_int_op(op, a, b):
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "//":
        return a // b
    if op == "%":
        return a % b
    if op == "min":
        return min(a, b)
    if op == "max":
        return max(a, b)
    if op == "/":
        q = abs(a) // abs(b)
        return q if (a < 0) == (b < 0) else -q
    raise AssertionError(op)


@SETTINGS
@given(
    st.sampled_from(INT_TYPES),
    st.sampled_from(INT_TYPES),
    st.sampled_from(["+", "-", "*", "//", "%", "min", "max", "/"]),
    st.data(),
)
def test_integer_binops_follow_promotion_wrap_and_floor_rules(dt_a, dt_b, op, data):
    n = 16
    info_a, info_b = np.iinfo(np_dtype(dt_a)), np.iinfo(np_dtype(dt_b))
    a = np.array(
        data.draw(st.lists(st.integers(int(info_a.min), int(info_a.max)), min_size=n, max_size=n)), np_dtype(dt_a)
    )
    b_vals = data.draw(st.lists(st.integers(int(info_b.min), int(info_b.max)), min_size=n, max_size=n))
    if op in ("//", "%", "/"):
        b_vals = [v if v != 0 else 1 for v in b_vals]
    b = np.array(b_vals, np_dtype(dt_b))
    work = promote(dt_a, dt_b)
    A, B, O = buf("A", (n,), dt_a), buf("B", (n,), dt_b), buf("O", (n,), work)
    i = var("i")
    expr = N.BinOp(op, load(A, i), load(B, i), work)
    out = np.zeros(n, np_dtype(work))
    run(one_block([A, B, O], [parallel(["i"], [n], [store(O, [i], expr)])]), [a, b, out])
    for k in range(n):
        x, y = int(a[k]), int(b[k])
        if op in ("//", "%", "/") and y == -1 and x == int(np.iinfo(np_dtype(work)).min):
            continue  # MIN // -1 overflows: undefined, as in C
        assert int(out[k]) == wrap(python_int_op(op, x, y), work), (op, x, y, work)


# ----------------------------------------------------------------------------- masked parallel stores


@SETTINGS
@given(
    st.integers(1, 12), st.integers(1, 12), st.integers(-3, 3), st.integers(-3, 3), st.integers(0, 12), st.booleans()
)
def test_parallel_store_with_offsets_and_mask(rows, cols, dr, dc, limit, transpose):
    # for i, j in T.Parallel(rows, cols): if i + j < limit and <in bounds>: O[.., ..] = A[i, j] + 1
    A = buf("A", (rows, cols))
    out_shape = (cols + 6, rows + 6) if transpose else (rows + 6, cols + 6)
    O = buf("O", out_shape)
    i, j = var("i"), var("j")
    r, c = (add(j, dc + 3), add(i, dr + 3)) if transpose else (add(i, dr + 3), add(j, dc + 3))
    inside = binop("and", lt(add(i, j), limit), const(True))
    body = [parallel(["i", "j"], [rows, cols], [N.If(inside, (store(O, [r, c], add(load(A, i, j), const(1.0))),))])]
    a = np.random.default_rng(0).uniform(-1, 1, (rows, cols)).astype(np.float32)
    o = np.zeros(out_shape, np.float32)
    run(one_block([A, O], body), [a, o])
    expect = np.zeros(out_shape, np.float32)
    for x in range(rows):
        for y in range(cols):
            if x + y < limit:
                rr, cc = (y + dc + 3, x + dr + 3) if transpose else (x + dr + 3, y + dc + 3)
                expect[rr, cc] = a[x, y] + np.float32(1)
    np.testing.assert_array_equal(o, expect)


# ----------------------------------------------------------------------------- gemm and reduce


@SETTINGS
@given(
    st.integers(1, 9),
    st.integers(1, 9),
    st.integers(1, 9),
    st.booleans(),
    st.booleans(),
    st.booleans(),
    st.sampled_from(
        [
            ("float32", "float32"),
            ("float16", "float32"),
            ("bfloat16", "float32"),
            ("float64", "float64"),
            ("int8", "int32"),
        ]
    ),
)
def test_gemm_matches_float64_oracle(m, n, k, ta, tb, clear, dtypes):
    in_dt, acc_dt = dtypes
    A = buf("A", (k, m) if ta else (m, k), in_dt)
    B = buf("B", (n, k) if tb else (k, n), in_dt)
    C = buf("C", (m, n), acc_dt)
    rng = np.random.default_rng(m * 100 + n * 10 + k)
    if in_dt == "int8":
        a = rng.integers(-128, 128, A.shape).astype(np.int8)
        b = rng.integers(-128, 128, B.shape).astype(np.int8)
        c = rng.integers(-1000, 1000, (m, n)).astype(np.int32)
    else:
        a = rng.uniform(-1, 1, A.shape).astype(np_dtype(in_dt))
        b = rng.uniform(-1, 1, B.shape).astype(np_dtype(in_dt))
        c = rng.uniform(-1, 1, (m, n)).astype(np_dtype(acc_dt))
    c0 = c.copy()
    body = [N.Gemm(whole(A), whole(B), whole(C), transpose_a=ta, transpose_b=tb, clear_accum=clear)]
    run(one_block([A, B, C], body), [a, b, c])
    wide = np.int64 if in_dt == "int8" else np.float64
    ref = (a.T if ta else a).astype(wide) @ (b.T if tb else b).astype(wide)
    if not clear:
        ref = ref + c0.astype(wide)
    if in_dt == "int8":
        np.testing.assert_array_equal(c, ref)
    else:
        # one rounding of the exact result into C's dtype
        np.testing.assert_array_equal(c, ref.astype(np_dtype(acc_dt)))


@SETTINGS
@given(
    st.integers(1, 3),
    st.data(),
    st.sampled_from(["sum", "max", "min", "abssum", "absmax"]),
    st.booleans(),
    st.sampled_from(["float32", "float16", "int32"]),
)
def test_reduce_matches_numpy_for_any_dim(ndim, data, kind, clear, dtype):
    shape = tuple(data.draw(st.integers(1, 5)) for _ in range(ndim))
    dim = data.draw(st.integers(0, ndim - 1))
    out_shape = shape[:dim] + shape[dim + 1 :] or (1,)
    S, D = buf("S", shape, dtype), buf("D", out_shape, dtype)
    rng = np.random.default_rng(sum(shape) + dim)
    if dtype == "int32":
        s = rng.integers(-50, 50, shape).astype(np.int32)
        d = rng.integers(-50, 50, out_shape).astype(np.int32)
    else:
        s = rng.uniform(-2, 2, shape).astype(np_dtype(dtype))
        d = rng.uniform(-2, 2, out_shape).astype(np_dtype(dtype))
    d0 = d.copy()
    run(one_block([S, D], [N.Reduce(kind, S, D, dim, clear)]), [s, d])
    x = s.astype(np.float64)
    if kind.startswith("abs"):
        x = np.abs(x)
    r = x.sum(dim) if kind.endswith("sum") else x.max(dim) if kind.endswith("max") else x.min(dim)
    r = np.asarray(r).reshape(out_shape)
    if not clear:
        prev = d0.astype(np.float64)
        r = r + prev if kind.endswith("sum") else np.maximum(r, prev) if kind.endswith("max") else np.minimum(r, prev)
    np.testing.assert_array_equal(d, r.astype(np_dtype(dtype)))


# ----------------------------------------------------------------------------- float arithmetic


SIGNIFICANT_BITS = {"float16": 11, "bfloat16": 8, "float32": 24}


def round_to(value: float, dtype: str) -> float:
    """`value` rounded to nearest even with the dtype's significand (normal range only)."""
    if value == 0 or not math.isfinite(value):
        return value
    m, e = math.frexp(value)  # value = m * 2**e, 0.5 <= |m| < 1
    bits = SIGNIFICANT_BITS[dtype]
    return math.ldexp(round(m * 2**bits), e - bits)  # round(): exact, half to even


FLOAT_OPS = {
    "+": lambda x, y: x + y,
    "-": lambda x, y: x - y,
    "*": lambda x, y: x * y,
    "/": lambda x, y: x / y,
    "min": min,
    "max": max,
}


@SETTINGS
@given(st.sampled_from(sorted(SIGNIFICANT_BITS)), st.sampled_from(sorted(FLOAT_OPS)), st.data())
def test_float_binops_round_once_in_their_dtype(dtype, op, data):
    n = 12
    values = st.floats(0.25, 64.0).flatmap(lambda v: st.sampled_from([v, -v]))
    a = np.array(data.draw(st.lists(values, min_size=n, max_size=n)), np_dtype(dtype))
    b = np.array(data.draw(st.lists(values, min_size=n, max_size=n)), np_dtype(dtype))
    A, B, O = buf("A", (n,), dtype), buf("B", (n,), dtype), buf("O", (n,), dtype)
    i = var("i")
    out = np.zeros(n, np_dtype(dtype))
    expr = N.BinOp(op, load(A, i), load(B, i), dtype)
    run(one_block([A, B, O], [parallel(["i"], [n], [store(O, [i], expr)])]), [a, b, out])
    for k in range(n):
        x, y = float(a[k]), float(b[k])
        # the exact result (or, for /, its double rounding, which is safe for these widths) rounded once
        assert float(out[k]) == round_to(FLOAT_OPS[op](x, y), dtype), (dtype, op, x, y)


@SETTINGS
@given(st.floats(-1e4, 1e4, allow_nan=False), st.sampled_from(["float16", "bfloat16"]))
def test_float64_store_into_half_types_rounds_once(value, dtype):
    A, O = buf("A", (1,), "float64"), buf("O", (1,), dtype)
    out = np.zeros(1, np_dtype(dtype))
    run(one_block([A, O], [store(O, [0], load(A, 0))]), [np.array([value]), out])
    if abs(value) >= 2.0**-14:  # normal range of both types
        assert float(out[0]) == round_to(value, dtype)
