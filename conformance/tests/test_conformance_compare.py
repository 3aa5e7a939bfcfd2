"""Comparison rules and the soundness of the tolerances' error bounds."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tile_conformance import exprs as X
from tile_conformance.compare import compare
from tile_conformance.gen import as_hypothesis
from tile_conformance.programs import Tolerance
from tile_conformance.strategies import Caps, float_expr

EXACT = Tolerance()


def test_integers_are_exact():
    ref = np.arange(12, dtype=np.int32).reshape(3, 4)
    got = ref.copy()
    assert compare("Out", "int32", ref, got, Tolerance(10.0, 1.0)) is None  # tolerance ignored for ints
    got[2, 1] += 1
    m = compare("Out", "int32", ref, got, Tolerance(10.0, 1.0))
    assert m is not None and m.index == (2, 1) and m.max_error == 1 and m.count == 1


def test_nan_and_inf_compared_by_position():
    ref = np.array([1.0, np.nan, np.inf, -np.inf], dtype=np.float32)
    assert compare("Out", "float32", ref, ref.copy(), EXACT) is None
    got = ref.copy()
    got[0] = np.nan
    assert compare("Out", "float32", ref, got, Tolerance(1e9, 0)).reason.startswith("NaN")
    got = ref.copy()
    got[2] = -np.inf
    assert "infinity" in compare("Out", "float32", ref, got, Tolerance(1e9, 0)).reason
    got = ref.copy()
    got[3] = -1e30
    assert "infinity" in compare("Out", "float32", ref, got, Tolerance(1e9, 0)).reason


def test_float_tolerance_and_where():
    ref = np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32)
    got = ref + np.float32(1e-3)
    assert compare("C", "float32", ref, got, Tolerance(2e-3, 0)) is None
    got[1, 0] = 3.5
    m = compare("C", "float32", ref, got, Tolerance(2e-3, 0))
    assert m.index == (1, 0) and abs(m.max_error - 0.5) < 1e-6 and m.expected == "3.0"
    assert compare("C", "float32", ref, ref, EXACT) is None
    assert compare("C", "float32", ref, np.nextafter(ref, 9), EXACT) is not None  # exact means exact


def test_shape_mismatch_reported():
    m = compare("C", "float32", np.zeros((2, 3)), np.zeros((3, 2)), EXACT)
    assert "shape" in m.reason


# --------------------------------------------------------------------- error bounds are sound

NP = {"float16": np.float16, "float32": np.float32, "float64": np.float64}
LOW_CAPS = Caps(
    features=frozenset({"math", "select", "dtype:float16", "dtype:float32"}), dtypes=frozenset({"float16", "float32"})
)


def _numpy_T(dtype_override=None):
    """numpy versions of the DSL functions the expressions use (evaluated per dtype)."""

    class T:
        pass

    def same(f):
        def g(x):
            if dtype_override is None and isinstance(x, np.ndarray):
                return f(x).astype(x.dtype)  # numpy's float16 functions round to float16
            return f(x)

        return g

    for name, f in {
        "exp": np.exp,
        "exp2": np.exp2,
        "log": np.log,
        "log2": np.log2,
        "sqrt": np.sqrt,
        "rsqrt": lambda x: 1 / np.sqrt(x),
        "tanh": np.tanh,
        "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
        "sin": np.sin,
        "cos": np.cos,
        "floor": np.floor,
        "ceil": np.ceil,
        "abs": np.abs,
    }.items():
        setattr(T, name, staticmethod(same(f)))
    T.max = staticmethod(np.maximum)
    T.min = staticmethod(np.minimum)
    T.pow = staticmethod(lambda x, p: np.power(x, x.dtype.type(p)) if isinstance(x, np.ndarray) else x**p)
    T.if_then_else = staticmethod(lambda c, a, b: np.where(c, a, b))
    # a cast's rounding is part of the program's meaning: the float64 evaluation rounds there too
    T.cast = staticmethod(lambda x, d: np.asarray(x).astype(NP[d]).astype(NP[dtype_override or d]))
    return T


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(as_hypothesis(float_expr(2, LOW_CAPS)), st.integers(0, 2**31 - 1))
# float32 / (|float16| + 1.0): the denominator rounds in float16 (its bound once used float32's)
@example(["bin", "/", ["in", 1], ["in", 0]], 0)
def test_expression_error_bound_holds(expr, seed):
    """float16/float32 evaluation stays within the rendered bound of a float64 evaluation.

    numpy evaluates the rendered DSL text once in the declared dtypes (rounding
    after every step, numpy's float16 functions) and once entirely in float64;
    the difference must stay within `err` (the tolerance uses 2 * err plus the
    output rounding, because both sides may err).
    """
    rng = np.random.default_rng(seed)
    a = rng.uniform(-2, 2, 64).astype(np.float16)
    b = rng.uniform(-2, 2, 64).astype(np.float32)
    leaves = [X.Leaf("A", "float16", -2, 2), X.Leaf("B", "float32", -2, 2)]
    r = X.render_float(expr, leaves)
    with np.errstate(all="ignore"):
        low = np.asarray(eval(r.text, {"T": _numpy_T(), "A": a, "B": b}), dtype=np.float64)
        high = np.asarray(
            eval(r.text, {"T": _numpy_T("float64"), "A": a.astype(np.float64), "B": b.astype(np.float64)}),
            dtype=np.float64,
        )
    assert np.all(np.isfinite(high)) and np.all(np.abs(high) <= max(abs(r.lo), abs(r.hi)) * (1 + 1e-6) + 1e-6)
    assert np.all(np.abs(low - high) <= r.err + 1e-12), (r.text, float(np.max(np.abs(low - high))), r.err)
