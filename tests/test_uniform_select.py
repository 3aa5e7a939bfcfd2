"""`tilecore.lowering.uniform_select`: the conditions under which a T.Parallel's select takes the
same branch for every iteration, checked against every iteration by brute force (hypothesis), and
the causal mask of the FlashAttention example lowered behind them."""

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from tilecore.ir import nodes as N
from tilecore.lowering.uniform_select import uniform_select

I32 = "int32"
OPS = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    ">=": lambda a, b: a >= b,
    ">": lambda a, b: a > b,
    "<=": lambda a, b: a <= b,
    "<": lambda a, b: a < b,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "&&": lambda a, b: a and b,
    "||": lambda a, b: a or b,
    "and": lambda a, b: a and b,
    "or": lambda a, b: a or b,
}


def evaluate(e, env):
    """A small integer evaluator for the expressions these tests build and the module returns."""
    if isinstance(e, N.Const):
        return e.value
    if isinstance(e, N.Var):
        return env[e.name]
    if isinstance(e, N.UnaryOp):
        v = evaluate(e.a, env)
        return {"neg": lambda x: -x, "not": lambda x: not x}[e.op](v)
    if isinstance(e, N.BinOp):
        return OPS[e.op](evaluate(e.a, env), evaluate(e.b, env))
    raise AssertionError(f"unexpected node {e!r}")


def linear(terms, const):
    """sum(coef * Var(name)) + const as an int32 expression."""
    e = N.Const(const, I32)
    for name, coef in terms:
        e = N.BinOp("+", e, N.BinOp("*", N.Var(name, I32), N.Const(coef, I32), I32), I32)
    return e


coef = st.integers(-3, 3)
side = st.tuples(st.tuples(coef, coef, coef, coef), st.integers(-20, 20))


@settings(max_examples=60, deadline=None)
@given(
    side,
    side,
    st.sampled_from([">=", ">", "<=", "<"]),
    st.integers(1, 4),
    st.integers(1, 5),
    st.tuples(st.integers(-6, 6), st.integers(-6, 6)),
)
def test_uniform_conditions_match_every_iteration(lhs, rhs, op, ni, nj, outside):
    """all_true holds exactly when the comparison holds at every (i, j), all_false exactly when it
    holds at none, for comparisons linear in i and j with other names (x, y) mixed in."""
    names = ("i", "j", "x", "y")
    a = linear(zip(names, lhs[0]), lhs[1])
    b = linear(zip(names, rhs[0]), rhs[1])
    store = N.Store(
        N.Buffer("s", (ni, nj), "float32", "fragment"),
        (N.Var("i", I32), N.Var("j", I32)),
        N.Select(N.BinOp(op, a, b, "bool"), N.Const(0.0, "float32"), N.Const(1.0, "float32"), "float32"),
    )
    p = N.Parallel((N.Var("i", I32), N.Var("j", I32)), (ni, nj), (store,))
    split = uniform_select(p)
    varies = any(lhs[0][k] != rhs[0][k] for k in (0, 1))
    if not varies:
        assert split is None
        return
    assert split is not None
    env = {"x": outside[0], "y": outside[1]}
    held = [evaluate(store.value.cond, {**env, "i": i, "j": j}) for i, j in itertools.product(range(ni), range(nj))]
    assert bool(evaluate(split.all_true, env)) == all(held)
    assert bool(evaluate(split.all_false, env)) == (not any(held))
    assert split.when_true.body[0].value == store.value.a and split.when_false.body[0].value == store.value.b


def test_nonlinear_and_float_conditions_are_left_alone():
    i, j = N.Var("i", I32), N.Var("j", I32)
    buf = N.Buffer("s", (4, 4), "float32", "fragment")

    def parallel(cond):
        sel = N.Select(cond, N.Const(0.0, "float32"), N.Const(1.0, "float32"), "float32")
        return N.Parallel((i, j), (4, 4), (N.Store(buf, (i, j), sel),))

    assert uniform_select(parallel(N.BinOp(">=", N.BinOp("//", i, N.Const(2, I32), I32), j, "bool"))) is None
    assert uniform_select(parallel(N.BinOp(">=", N.BinOp("*", i, j, I32), N.Const(3, I32), "bool"))) is None
    x = N.Var("x", "float32")
    assert uniform_select(parallel(N.BinOp(">=", x, N.Const(0.0, "float32"), "bool"))) is None
