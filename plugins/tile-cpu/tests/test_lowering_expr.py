"""The shared expression lowering (tilecore.lowering.tir_expr / intrinsics) on hand-built Tile IR.

Each case builds Tile IR expression nodes directly, lowers them with
ExprLowerer into a tiny TIR function, runs it through LLVM and compares with
numpy's (Python's) semantics: floor division/modulo, division by zero,
casts to bool and from floats, narrow-float rounding, and the vectorizable
float32 exp family against float64 numpy.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

tvm = pytest.importorskip("tvm")
from tvm import tirx as tx  # noqa: E402

from tilecore.ir import nodes as N  # noqa: E402
from tilecore.lowering.intrinsics import default_table, vectorizable_table  # noqa: E402
from tilecore.lowering.tir_expr import ExprLowerer  # noqa: E402
from tilecore.lowering.tir_stmt import seq  # noqa: E402

N_ELEM = 64


def run_exprs(exprs, inputs, out_dtype, vectorize=False):
    """Evaluate Tile IR expressions of Load(A[i]) / Load(B[i]) for i in range(N_ELEM)."""
    bufs = {name: N.Buffer(name, (N_ELEM,), str(arr.dtype)) for name, arr in inputs.items()}
    tbufs = {name: tx.decl_buffer((N_ELEM,), str(arr.dtype), name) for name, arr in inputs.items()}
    out = tx.decl_buffer((len(exprs), N_ELEM), out_dtype, "O")
    i = tx.Var("i", "int32")
    table = default_table()
    table.update(vectorizable_table())
    low = ExprLowerer(tbufs, {"i": i}, table)
    kind = tx.ForKind.VECTORIZED if vectorize else tx.ForKind.SERIAL
    body = seq(
        [
            tx.For(i, 0, N_ELEM, kind, tx.BufferStore(out, low.lower_as(e(bufs), out_dtype), [k, i]))
            for k, e in enumerate(exprs)
        ]
    )
    f = tx.PrimFunc(list(tbufs.values()) + [out], body).with_attr("global_symbol", "f")
    lib = tvm.compile(tvm.IRModule({"f": f}), target={"kind": "llvm"})
    result = np.zeros((len(exprs), N_ELEM), out_dtype)
    lib["f"](*inputs.values(), result)
    return result


def load(name, dtype):
    return lambda b: N.Load(b[name], (N.Var("i"),), dtype)


@settings(max_examples=5, deadline=None, derandomize=True)
@given(
    st.lists(st.integers(-1000, 1000), min_size=N_ELEM, max_size=N_ELEM),
    st.lists(st.integers(-7, 7), min_size=N_ELEM, max_size=N_ELEM),
)
def test_integer_floor_division_and_modulo(a, b):
    a = np.array(a, np.int32)
    b = np.array(b, np.int32)
    A, B = load("A", "int32"), load("B", "int32")
    exprs = [
        lambda x: N.BinOp("//", A(x), B(x), "int32"),
        lambda x: N.BinOp("%", A(x), B(x), "int32"),
        lambda x: N.BinOp("//", A(x), N.Const(-3, "int32"), "int32"),
        lambda x: N.BinOp("%", A(x), N.Const(5, "int32"), "int32"),
    ]
    got = run_exprs(exprs, {"A": a, "B": b}, "int32")
    safe = np.where(b == 0, 1, b)
    np.testing.assert_array_equal(got[0], np.where(b == 0, 0, a // safe))  # no SIGFPE: 0
    np.testing.assert_array_equal(got[1], np.where(b == 0, 0, a % safe))
    np.testing.assert_array_equal(got[2], a // -3)
    np.testing.assert_array_equal(got[3], a % 5)


def test_integer_true_division_of_the_ir_truncates_toward_zero():
    """The IR's integer `/` (never written by the frontend; a pass or plugin may) is C division, as
    the interpreter defines it: it once lowered as floor division."""
    from tilecore.interp.executor import _int_truediv

    a = np.array([7, -7, 7, -7, 0, 5, -1, 9] * (N_ELEM // 8), np.int32)
    b = np.array([2, 2, -2, -2, 3, 0, 4, -4] * (N_ELEM // 8), np.int32)
    A, B = load("A", "int32"), load("B", "int32")
    got = run_exprs([lambda x: N.BinOp("/", A(x), B(x), "int32")], {"A": a, "B": b}, "int32")
    safe = np.where(b == 0, 1, b)
    np.testing.assert_array_equal(got[0], np.where(b == 0, 0, np.trunc(a / safe).astype(np.int32)))
    np.testing.assert_array_equal(got[0], np.where(b == 0, 0, _int_truediv(a, safe)))


def test_float_floor_ops_and_casts():
    a = np.linspace(-5.5, 5.5, N_ELEM).astype(np.float32)
    A = load("A", "float32")
    exprs = [
        lambda x: N.BinOp("//", A(x), N.Const(2.0, "float32"), "float32"),
        lambda x: N.BinOp("%", A(x), N.Const(2.0, "float32"), "float32"),
        lambda x: N.Cast(N.Cast(A(x), "int32"), "float32"),
        lambda x: N.Cast(N.Cast(A(x), "bool"), "float32"),
    ]
    got = run_exprs(exprs, {"A": a}, "float32")
    np.testing.assert_array_equal(got[0], a // np.float32(2))
    np.testing.assert_allclose(got[1], a % np.float32(2), atol=1e-6)
    np.testing.assert_array_equal(got[2], a.astype(np.int32).astype(np.float32))
    np.testing.assert_array_equal(got[3], a.astype(bool).astype(np.float32))


def test_float16_arithmetic_rounds_like_numpy():
    rng = np.random.default_rng(3)
    a = rng.uniform(-10, 10, N_ELEM).astype(np.float16)
    b = rng.uniform(-10, 10, N_ELEM).astype(np.float16)
    A, B = load("A", "float16"), load("B", "float16")
    exprs = [
        lambda x: N.BinOp("*", N.BinOp("+", A(x), B(x), "float16"), B(x), "float16"),
        lambda x: N.BinOp("/", A(x), B(x), "float16"),
    ]
    got = run_exprs(exprs, {"A": a, "B": b}, "float16")
    np.testing.assert_array_equal(got[0], (a + b) * b)
    np.testing.assert_array_equal(got[1], a / b)


@pytest.mark.parametrize(
    "func,ref", [("exp", np.exp), ("exp2", np.exp2), ("tanh", np.tanh), ("sigmoid", lambda v: 1 / (1 + np.exp(-v)))]
)
def test_vectorizable_float32_math_is_accurate(func, ref):
    a = np.concatenate([np.linspace(-100, 90, N_ELEM - 6), [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30]])
    a = a.astype(np.float32)
    got = run_exprs(
        [lambda x: N.Call(func, (load("A", "float32")(x),), "float32")], {"A": a}, "float32", vectorize=True
    )[0]
    with np.errstate(all="ignore"):
        want = ref(a.astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    # within 4 ulp (relative 5e-7) or the smallest normal float in absolute terms
    np.testing.assert_allclose(got[ok], want[ok], rtol=5e-7, atol=np.finfo(np.float32).tiny)
