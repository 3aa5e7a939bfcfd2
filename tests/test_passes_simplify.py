"""simplify: exact constant folding and identities never change a value."""

from __future__ import annotations

import os
import sys
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tilecore.ir import nodes as N
from tilecore.passes.pipeline import PassContext
from tilecore.passes.simplify import as_int, linearize, simplify, simplify_expr

sys.path.insert(0, os.path.dirname(__file__))
from test_passes_support import add, c, kernel_func, mul, region, span, v  # noqa: E402

# ----------------------------------------------------------------------------- an independent evaluator

_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}


def wrap(x: int, dtype: str) -> int:
    b = _BITS[dtype]
    x &= (1 << b) - 1
    return x - (1 << b) if x >= 1 << (b - 1) else x


class Undefined(Exception):
    pass


def evaluate(e, env):
    """Two's-complement wrap-around integer semantics, floor // and %."""
    if isinstance(e, N.Const):
        return int(e.value) if not isinstance(e.value, float) else e.value
    if isinstance(e, N.Var):
        return env[e.name]
    if isinstance(e, N.UnaryOp):
        a = evaluate(e.a, env)
        if e.op == "neg":
            return wrap(-a, e.dtype)
        if e.op == "~":
            return wrap(~a, e.dtype)
        return not a
    if isinstance(e, N.Cast):
        x = evaluate(e.value, env)
        return bool(x) if e.dtype == "bool" else wrap(int(x), e.dtype)
    if isinstance(e, N.Select):
        a, b = evaluate(e.a, env), evaluate(e.b, env)
        return a if evaluate(e.cond, env) else b
    if isinstance(e, N.BinOp):
        a, b = evaluate(e.a, env), evaluate(e.b, env)
        op = e.op
        if op in N.COMPARE_OPS:
            return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b, "!=": a != b}[op]
        if op == "and":
            return bool(a) and bool(b)
        if op == "or":
            return bool(a) or bool(b)
        if op in ("//", "%") and b == 0:
            raise Undefined
        r = {
            "+": lambda: a + b,
            "-": lambda: a - b,
            "*": lambda: a * b,
            "//": lambda: a // b,
            "%": lambda: a % b,
            "min": lambda: min(a, b),
            "max": lambda: max(a, b),
            "&": lambda: a & b,
            "|": lambda: a | b,
            "^": lambda: a ^ b,
            "<<": lambda: a << b,
            ">>": lambda: a >> b,
        }[op]()
        return wrap(r, e.dtype)
    raise AssertionError(type(e))


EDGE = [0, 1, -1, 2, 3, 7, 8, 64, -64, 127, -128, 2**31 - 1, -(2**31), 2**30]
VARS = ["x", "y", "z"]


def int_exprs(dtype="int32"):
    lo, hi = -(1 << (_BITS[dtype] - 1)), (1 << (_BITS[dtype] - 1)) - 1
    consts = st.one_of(st.sampled_from([e for e in EDGE if lo <= e <= hi]), st.integers(lo, hi)).map(
        lambda x: N.Const(x, dtype)
    )
    leaves = st.one_of(consts, st.sampled_from([N.Var(n, dtype) for n in VARS]))

    def extend(children):
        binop = st.builds(
            lambda op, a, b: N.BinOp(op, a, b, dtype),
            st.sampled_from(["+", "-", "*", "//", "%", "min", "max", "&", "|", "^"]),
            children,
            children,
        )
        shift = st.builds(
            lambda op, a, k: N.BinOp(op, a, N.Const(k, dtype), dtype),
            st.sampled_from(["<<", ">>"]),
            children,
            st.integers(0, _BITS[dtype] - 1),
        )
        neg = st.builds(lambda a: N.UnaryOp("neg", a, dtype), children)
        cmp = st.builds(
            lambda op, a, b: N.BinOp(op, a, b, "bool"), st.sampled_from(list(N.COMPARE_OPS)), children, children
        )
        logic = st.builds(
            lambda op, a, b: N.BinOp(op, a, b, "bool"),
            st.sampled_from(["and", "or"]),
            cmp,
            st.one_of(cmp, st.sampled_from([N.Const(True, "bool"), N.Const(False, "bool")])),
        )
        select = st.builds(lambda cond, a, b: N.Select(cond, a, b, dtype), st.one_of(cmp, logic), children, children)
        narrow = st.builds(lambda a: N.Cast(N.Cast(a, "int8"), dtype), children)
        return st.one_of(binop, shift, neg, select, narrow)

    return st.recursive(leaves, extend, max_leaves=12)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    expr=int_exprs(), values=st.lists(st.sampled_from(EDGE) | st.integers(-(2**31), 2**31 - 1), min_size=3, max_size=3)
)
def test_simplify_never_changes_an_int32_value(expr, values):
    env = dict(zip(VARS, values))
    try:
        expected = evaluate(expr, env)
    except Undefined:
        assume(False)
    simplified = simplify_expr(expr)
    assert simplified.dtype == expr.dtype
    assert evaluate(simplified, env) == expected, (expr, simplified)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expr=int_exprs("int8"), values=st.lists(st.integers(-128, 127), min_size=3, max_size=3))
def test_simplify_never_changes_an_int8_value(expr, values):
    env = dict(zip(VARS, values))
    try:
        expected = evaluate(expr, env)
    except Undefined:
        assume(False)
    assert evaluate(simplify_expr(expr), env) == expected


def test_simplify_agrees_with_the_interpreter_on_wrapping_int32():
    """Folded constants give what the reference interpreter computes for the original."""
    interp = pytest.importorskip("tilecore.interp")
    x = v("x")

    def B(op, a, b):
        return N.BinOp(op, a, b, "int32")

    exprs = [
        B("+", B("*", B("+", x, c(1)), c(4)), c(-4)),  # (x+1)*4-4 -> x*4
        B("-", B("+", x, c(2**31 - 1)), c(2**31 - 1)),  # cancels despite overflow
        B("//", B("*", c(-7), c(3)), c(4)),  # floor division folds
        B("%", c(-7), c(3)),
        B("min", B("*", x, c(1)), B("+", x, c(0))),
    ]
    assert simplify_expr(exprs[1]) == x and simplify_expr(exprs[2]) == c(-6) and simplify_expr(exprs[4]) == x
    inp = N.Buffer("inp", (1,), "int32")
    out = N.Buffer("out", (len(exprs),), "int32")
    for mode in ("original", "simplified"):
        body = [N.Let(x, N.Load(inp, (c(0),), "int32"))]
        for i, e in enumerate(exprs):
            body.append(N.Store(out, (c(i),), e if mode == "original" else simplify_expr(e)))
        func = kernel_func([inp, out], body)
        results = []
        for xv in (0, 5, -3, 2**31 - 1, -(2**31)):
            a = np.array([xv], dtype=np.int32)
            o = np.zeros(len(exprs), dtype=np.int32)
            with np.errstate(all="ignore"):
                interp.run(func, [a, o])
            results.append(o.copy())
        if mode == "original":
            expected = results
        else:
            for got, want in zip(results, expected):
                np.testing.assert_array_equal(got, want)


def test_affine_normalization_cancels_terms():
    x, y = v("x"), v("y")
    e = N.BinOp("-", add(mul(x, c(64)), y), mul(x, c(64)), "int32")
    assert simplify_expr(e) == y
    e2 = N.BinOp("-", mul(add(x, c(1)), c(4)), c(4), "int32")
    assert simplify_expr(e2) == N.BinOp("*", x, c(4), "int32")
    terms, const = linearize(add(mul(N.BinOp("-", x, y, "int32"), c(3)), c(5)))
    assert terms == {x: 3, y: -3} and const == 5


def test_constant_folding_uses_floor_semantics_and_refuses_overflow():
    assert as_int(N.BinOp("//", c(-7), c(2), "int32")) == -4
    assert as_int(N.BinOp("%", c(-7), c(2), "int32")) == 1
    big = N.BinOp("+", c(2**31 - 1), c(1), "int32")
    assert simplify_expr(big) == big  # would wrap: left to the backend
    div0 = N.BinOp("//", c(1), c(0), "int32")
    assert simplify_expr(div0) == div0
    assert as_int(v("x")) is None
    assert as_int(7) == 7


def test_float_folding_is_exact_only():
    f32 = "float32"
    third = N.BinOp("/", c(1.0, f32), c(3.0, f32), f32)
    assert simplify_expr(third) == third  # 1/3 rounds: not folded
    half = N.BinOp("/", c(1.0, f32), c(2.0, f32), f32)
    assert simplify_expr(half) == N.Const(0.5, f32)
    # 1 + 2**-30 is exact in float64 but not in float32
    tiny = 2.0**-30
    assert simplify_expr(N.BinOp("+", c(1.0, f32), c(tiny, f32), f32)) == N.BinOp("+", c(1.0, f32), c(tiny, f32), f32)
    assert simplify_expr(N.BinOp("+", c(1.0, "float64"), c(tiny, "float64"), "float64")) == N.Const(
        1.0 + tiny, "float64"
    )
    # float16 has 11 significant bits: 2049 is not representable
    assert isinstance(simplify_expr(N.BinOp("+", c(2048.0, "float16"), c(1.0, "float16"), "float16")), N.BinOp)
    assert simplify_expr(N.BinOp("+", c(2048.0, "float16"), c(2.0, "float16"), "float16")) == N.Const(2050.0, "float16")


def test_float_identities_respect_negative_zero_and_nan():
    y = v("y", "float32")
    assert simplify_expr(N.BinOp("*", y, c(1.0, "float32"), "float32")) == y
    assert simplify_expr(N.BinOp("-", y, c(0.0, "float32"), "float32")) == y
    plus_zero = N.BinOp("+", y, c(0.0, "float32"), "float32")
    assert simplify_expr(plus_zero) == plus_zero  # -0.0 + 0.0 == +0.0
    times_zero = N.BinOp("*", y, c(0.0, "float32"), "float32")
    assert simplify_expr(times_zero) == times_zero  # inf * 0 is NaN


@settings(max_examples=200, deadline=None)
@given(
    a=st.floats(width=32, allow_nan=False, allow_infinity=False),
    b=st.floats(width=32, allow_nan=False, allow_infinity=False),
    op=st.sampled_from(["+", "-", "*", "/"]),
)
def test_float32_folding_matches_ieee(a, b, op):
    e = N.BinOp(op, c(a, "float32"), c(b, "float32"), "float32")
    s = simplify_expr(e)
    if isinstance(s, N.Const):
        with np.errstate(all="ignore"):
            want = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide}[op](np.float32(a), np.float32(b))
        assert np.float32(s.value) == want and np.signbit(np.float32(s.value)) == np.signbit(want)
        x, y = Fraction(a), Fraction(b)
        exact = {"+": x + y, "-": x - y, "*": x * y, "/": x / y if y else None}[op]
        assert Fraction(s.value) == exact


def test_pass_folds_constant_if_and_keeps_spans():
    out = N.Buffer("out", (4,), "int32")
    store_a = N.Store(out, (c(0),), c(1), span=span(9))
    store_b = N.Store(out, (c(1),), c(2), span=span(11))
    cond = N.BinOp("<", N.BinOp("+", c(2), c(3), "int32"), c(4), "bool")
    idx = N.BinOp("+", mul(v("bx"), c(1)), c(0), "int32", span=span(14, 10, 3))
    store_c = N.Store(out, (idx,), c(3), span=span(14))
    func = kernel_func([out], [N.If(cond, (store_a,), (store_b,), span=span(10)), store_c], grid=(4,))
    new = simplify(func, PassContext())
    body = new.kernel.body
    assert body[0] == store_b and body[0].span == span(11)
    assert body[1].indices == (v("bx"),)
    assert new.source == func.source


def test_fill_value_copy_regions_are_simplified():
    A = N.Buffer("A", (64,), "float32")
    S = N.Buffer("S", (16,), "float32", "shared")
    start = N.BinOp("-", add(mul(v("bx"), c(16)), c(8)), c(8), "int32")
    func = kernel_func([A], [N.Alloc(S), N.Copy(region(A, (start,), (16,)), region(S))], grid=(4,))
    new = simplify(func, PassContext())
    assert new.kernel.body[1].src.starts == (N.BinOp("*", v("bx"), c(16), "int32"),)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expr=int_exprs(), xs=st.lists(st.sampled_from(EDGE) | st.integers(-(2**31), 2**31 - 1), min_size=2, max_size=2))
def test_whole_programs_compute_the_same_on_the_interpreter(expr, xs):
    """Program-level check: T.Parallel over y, z; x from an input; original vs simplified on the interpreter."""
    interp = pytest.importorskip("tilecore.interp")
    inp = N.Buffer("inp", (2,), "int32")
    out = N.Buffer("out", (4, 3), "int32")
    y, z, x = v("y"), v("z"), v("x")
    par = N.Parallel((y, z), (4, 3), (N.Store(out, (y, z), expr),))
    func = kernel_func([inp, out], [N.Let(x, N.Load(inp, (c(1),), "int32")), par], grid=(1,))
    simplified = simplify(func, PassContext())
    results = []
    for f in (func, simplified):
        o = np.zeros((4, 3), dtype=np.int32)
        try:
            with np.errstate(all="ignore"):
                interp.run(f, [np.array(xs, dtype=np.int32), o])
        except Exception as err:  # e.g. integer division by zero: must then fail the same way
            results.append(type(err).__name__)
            continue
        results.append(o.tolist())
    assert results[0] == results[1], simplified


def test_float_constants_are_folded_at_their_own_precision():
    # a float32 constant written as 0.1 holds float32(0.1), not the double 0.1
    widened = simplify_expr(N.Cast(c(0.1, "float32"), "float64"))
    assert isinstance(widened, N.Const) and widened.value == float(np.float32(0.1))
    total = simplify_expr(N.BinOp("+", c(0.1, "float32"), c(0.1, "float32"), "float32"))
    if isinstance(total, N.Const):
        assert np.float32(total.value) == np.float32(0.1) + np.float32(0.1)
    # 0.1 and 0.1 + 1e-12 are the same float32: equal, although the doubles differ
    same = simplify_expr(N.BinOp("==", c(0.1, "float32"), c(0.1 + 1e-12, "float32"), "bool"))
    assert same == N.Const(True, "bool")
    # floor of a float16 constant that rounds up to 1.0
    assert simplify_expr(N.Call("floor", (c(0.99999, "float16"),), "float16")) == N.Const(1.0, "float16")


@settings(max_examples=300, deadline=None)
@given(
    a=st.floats(-1e5, 1e5),
    b=st.floats(-1e5, 1e5),
    op=st.sampled_from(["+", "-", "*", "/", "min", "max"]),
    dtype=st.sampled_from(["float16", "bfloat16", "float32"]),
)
def test_folding_matches_numpy_in_the_dtype(a, b, op, dtype):
    import ml_dtypes

    np_t = {"float16": np.float16, "float32": np.float32, "bfloat16": ml_dtypes.bfloat16}[dtype]
    s = simplify_expr(N.BinOp(op, c(a, dtype), c(b, dtype), dtype))
    if not isinstance(s, N.Const):
        return
    x, y = np.array(a).astype(np_t), np.array(b).astype(np_t)
    with np.errstate(all="ignore"):
        want = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide, "min": np.minimum, "max": np.maximum}[
            op
        ](x, y)
    got = np.array(s.value).astype(np_t)
    assert got == want.astype(np_t) and np.signbit(got) == np.signbit(want.astype(np_t)), (a, b, s.value)
