"""The frontend's affine simplifier: slice extents like `(k + 1) * 64 - k * 64`."""
from hypothesis import given, settings
from hypothesis import strategies as st

from tilecore.frontend import exprs as E
from tilecore.frontend.affine import constant_difference, constant_value, linear
from tilecore.ir import nodes as N

VARS = [N.Var("i"), N.Var("j"), N.Var("k")]


def evaluate(e, env):
    if isinstance(e, N.Const):
        return e.value
    if isinstance(e, N.Var):
        return env[e.name]
    if isinstance(e, N.UnaryOp):
        return -evaluate(e.a, env)
    a, b = evaluate(e.a, env), evaluate(e.b, env)
    return {"+": a + b, "-": a - b, "*": a * b, "//": a // b if b else 0}[e.op]


def affine_exprs(depth=3):
    leaf = st.one_of(st.sampled_from(VARS), st.integers(-9, 9).map(lambda v: E.const(v, "int32")))
    if depth == 0:
        return leaf
    sub = affine_exprs(depth - 1)
    return st.one_of(
        leaf,
        st.tuples(st.sampled_from(["+", "-", "//"]), sub, sub).map(lambda t: E.binary(*t)),
        st.tuples(sub, st.integers(-4, 4)).map(lambda t: E.binary("*", t[0], t[1])),
        sub.map(lambda e: E.unary("neg", e)),
    )


def evaluate_linear(form, env):
    terms, const = form
    return const + sum(c * evaluate(atom, env) for atom, c in terms.items())


@settings(max_examples=300, deadline=None)
@given(affine_exprs(), st.fixed_dictionaries({v.name: st.integers(-20, 20) for v in VARS}))
def test_linear_form_has_the_same_value(e, env):
    assert evaluate_linear(linear(e), env) == evaluate(e, env)


@settings(max_examples=200, deadline=None)
@given(affine_exprs(), st.integers(1, 128))
def test_difference_of_a_shifted_expression_is_the_shift(e, extent):
    assert constant_difference(E.binary("+", e, extent), e) == extent


def test_slice_extent_pattern():
    k = N.Var("k")
    stop = E.binary("*", E.binary("+", k, 1), 64)
    start = E.binary("*", k, 64)
    assert constant_difference(stop, start) == 64
    assert constant_difference(stop, k) is None
    assert constant_value(E.binary("-", k, k)) == 0
