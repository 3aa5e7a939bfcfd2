"""bounds: a copy is marked proven only if every block and iteration stays inside its buffers."""

from __future__ import annotations

import itertools
import os
import sys

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tilecore.ir import nodes as N
from tilecore.ir.visitor import walk_stmts
from tilecore.passes.bounds import BoundsFact, analyze, bounds, expr_interval
from tilecore.passes.pipeline import PassContext

sys.path.insert(0, os.path.dirname(__file__))
from test_passes_support import add, c, gemm_func, kernel_func, mul, region, v  # noqa: E402


def copies(func):
    return [s for s in walk_stmts(func.body) if isinstance(s, N.Copy)]


def test_divisible_gemm_is_fully_proven():
    ctx = PassContext()
    new = bounds(gemm_func(M=256, N_=256, K=128), ctx)
    assert [cp.predicated for cp in copies(new)] == [False, False, False]
    facts = ctx.analyses["bounds"]
    assert len(facts) == 3 and all(isinstance(f, BoundsFact) and f.proven for f in facts)
    assert facts[0].span.line == 11 and "A dim 0: [0, 192] + 64 <= 256" in facts[0].reason
    assert [f.stmt for f in facts] == copies(new) and facts[0].stmt is new.kernel.body[4].body[0]


def test_partial_tiles_stay_predicated_and_say_why():
    ctx = PassContext()
    new = bounds(gemm_func(M=200, N_=256, K=128), ctx)
    assert [cp.predicated for cp in copies(new)] == [True, False, True]
    reason = ctx.analyses["bounds"][0].reason
    assert reason.startswith("predicated: dimension 0 of A") and "256 > size 200" in reason


def test_dynamic_shapes_stay_predicated():
    ctx = PassContext()
    new = bounds(gemm_func(dynamic_m=True), ctx)
    assert [cp.predicated for cp in copies(new)] == [True, False, True]
    assert "dimension 0 of A is dynamic (M)" in ctx.analyses["bounds"][0].reason


def test_let_bindings_are_inlined_so_terms_cancel():
    A = N.Buffer("A", (64,), "float32")
    S = N.Buffer("S", (16,), "float32", "shared")
    bx, base, off = v("bx"), v("base"), v("off")
    # base = bx * 48; off = base + 16 - bx * 48 (always 16); copy A[off + bx*16 : +16]
    body = [
        N.Alloc(S),
        N.Let(base, mul(bx, c(48))),
        N.Let(off, N.BinOp("-", add(base, c(16)), mul(bx, c(48)), "int32")),
        N.Copy(region(A, (add(off, mul(bx, c(16))),), (16,)), region(S)),
    ]
    new = bounds(kernel_func([A], body, grid=(3,)), PassContext())
    assert copies(new)[0].predicated is False  # 16 + [0, 32] + 16 <= 64


def test_floordiv_mod_and_min_are_bounded():
    env = {"i": (0, 99)}
    i = v("i")
    assert expr_interval(N.BinOp("//", i, c(8), "int32"), env) == (0, 12)
    assert expr_interval(N.BinOp("%", i, c(8), "int32"), env) == (0, 7)
    assert expr_interval(N.BinOp("min", i, c(50), "int32"), env) == (0, 50)
    assert expr_interval(N.BinOp("-", mul(i, c(3)), mul(i, c(3)), "int32"), env) == (0, 0)


def test_overflowing_starts_are_not_proven():
    A = N.Buffer("A", (64,), "float32")
    S = N.Buffer("S", (16,), "float32", "shared")
    bx = v("bx")
    # bx * 2**30 * 4 wraps in int32; interval reasoning must not claim anything
    start = N.BinOp("-", mul(mul(bx, c(2**30)), c(4)), mul(mul(bx, c(2**30)), c(4)), "int32")
    new = bounds(
        kernel_func([A], [N.Alloc(S), N.Copy(region(A, (start,), (16,)), region(S))], grid=(4,)), PassContext()
    )
    assert copies(new)[0].predicated is True


def test_tile_atomics_are_recorded():
    G = N.Buffer("G", (100,), "float32")
    F = N.Buffer("F", (32,), "float32", "fragment")
    bx = v("bx")
    ctx = PassContext()
    bounds(
        kernel_func([G], [N.Alloc(F), N.Atomic("add", region(G, (mul(bx, c(32)),), (32,)), region(F))], grid=(4,)), ctx
    )
    (fact,) = ctx.analyses["bounds"]
    assert fact.op == "Atomic" and not fact.proven
    ctx = PassContext()
    bounds(
        kernel_func([G], [N.Alloc(F), N.Atomic("add", region(G, (mul(bx, c(32)),), (32,)), region(F))], grid=(3,)), ctx
    )
    assert ctx.analyses["bounds"][0].proven


# ----------------------------------------------------------------------------- brute force


def start_exprs(affine_only):
    names = ["bx", "by", "k"]
    var_terms = st.tuples(st.sampled_from(names), st.integers(-3, 16))

    @st.composite
    def affine(draw):
        terms = draw(st.lists(var_terms, min_size=0, max_size=3, unique_by=lambda t: t[0]))
        e = c(draw(st.integers(-8, 24)))
        for name, coeff in terms:
            e = add(mul(v(name), c(coeff)), e) if draw(st.booleans()) else add(e, mul(c(coeff), v(name)))
        return e

    if affine_only:
        return affine()

    def extend(children):
        return st.one_of(
            st.builds(
                lambda op, a, b: N.BinOp(op, a, b, "int32"),
                st.sampled_from(["+", "-", "min", "max"]),
                children,
                children,
            ),
            st.builds(lambda a, k: N.BinOp("*", a, c(k), "int32"), children, st.integers(-2, 4)),
            st.builds(
                lambda op, a, k: N.BinOp(op, a, c(k), "int32"),
                st.sampled_from(["//", "%"]),
                children,
                st.integers(1, 9),
            ),
            st.builds(
                lambda cond_k, a, b: N.Select(N.BinOp("<", v("k"), c(cond_k), "bool"), a, b, "int32"),
                st.integers(0, 4),
                children,
                children,
            ),
        )

    return st.recursive(affine(), extend, max_leaves=5)


def evaluate(e, env):
    if isinstance(e, N.Const):
        return e.value
    if isinstance(e, N.Var):
        return env[e.name]
    if isinstance(e, N.Select):
        return evaluate(e.a, env) if evaluate(e.cond, env) else evaluate(e.b, env)
    if isinstance(e, N.UnaryOp):
        return not evaluate(e.a, env)
    a, b = evaluate(e.a, env), evaluate(e.b, env)
    return {
        "+": a + b,
        "-": a - b,
        "*": a * b,
        "//": a // b if b else 0,
        "%": a % b if b else 0,
        "min": min(a, b),
        "max": max(a, b),
        "<": a < b,
        "<=": a <= b,
        ">": a > b,
        ">=": a >= b,
        "==": a == b,
        "!=": a != b,
        "and": a and b,
        "or": a or b,
    }[e.op]


AFFINE_STARTS = start_exprs(True)
GENERAL_STARTS = start_exprs(False)
_COMPARISONS = st.builds(
    lambda op, a, b: N.BinOp(op, a, b, "bool"), st.sampled_from(list(N.COMPARE_OPS)), AFFINE_STARTS, AFFINE_STARTS
)
GUARDS = st.one_of(
    _COMPARISONS,
    st.builds(lambda a, b: N.BinOp("and", a, b, "bool"), _COMPARISONS, _COMPARISONS),
    st.builds(lambda a, b: N.BinOp("or", a, b, "bool"), _COMPARISONS, _COMPARISONS),
    st.builds(lambda a: N.UnaryOp("not", a, "bool"), _COMPARISONS),
)


@st.composite
def copy_programs(draw, affine_only=False):
    ndim = draw(st.integers(1, 2))
    shape = tuple(draw(st.integers(1, 40)) for _ in range(ndim))
    extents = tuple(draw(st.integers(1, 16)) for _ in range(ndim))
    grid = (draw(st.integers(1, 5)), draw(st.integers(1, 4)))
    begin = draw(st.integers(0, 3))
    extent = draw(st.integers(1 if affine_only else 0, 4))
    starts = tuple(draw(AFFINE_STARTS if affine_only else GENERAL_STARTS) for _ in range(ndim))
    src_is_global = draw(st.booleans())
    guard = None
    if not affine_only and draw(st.booleans()):
        guard = (draw(GUARDS), draw(st.booleans()))  # (condition, copy in the then-branch?)
    return shape, extents, grid, begin, extent, starts, src_is_global, guard


def build(shape, extents, grid, begin, extent, starts, src_is_global, guard=None):
    G = N.Buffer("G", shape, "float32")
    S = N.Buffer("S", extents, "float32", "shared")
    g_region = region(G, starts, extents)
    cp = N.Copy(g_region, region(S)) if src_is_global else N.Copy(region(S), g_region)
    if guard is not None:
        cond, in_then = guard
        cp = N.If(cond, (cp,), ()) if in_then else N.If(cond, (), (cp,))
    loop = N.For(v("k"), c(begin), c(extent), "serial", (cp,))
    return kernel_func([G], [N.Alloc(S), loop], grid=grid)


def brute_force_inside(shape, extents, grid, begin, extent, starts, guard=None):
    for bx, by, k in itertools.product(range(grid[0]), range(grid[1]), range(begin, begin + extent)):
        env = {"bx": bx, "by": by, "k": k}
        if guard is not None and bool(evaluate(guard[0], env)) != guard[1]:
            continue  # the copy does not run here
        for s, e, size in zip(starts, extents, shape):
            lo = evaluate(s, env)
            if lo < 0 or lo + e > size:
                return False
    return True


@settings(max_examples=700, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(prog=copy_programs())
def test_never_proves_an_out_of_bounds_copy(prog):
    shape, extents, grid, begin, extent, starts, src_is_global, guard = prog
    new, facts = analyze(build(*prog))
    proven = not copies(new)[0].predicated
    assert proven == facts[0].proven
    if proven:
        assert brute_force_inside(shape, extents, grid, begin, extent, starts, guard), facts[0].reason


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(prog=copy_programs(affine_only=True))
def test_affine_starts_over_independent_indices_are_decided_exactly(prog):
    shape, extents, grid, begin, extent, starts, _, _ = prog
    new, _ = analyze(build(*prog))
    assert (not copies(new)[0].predicated) == brute_force_inside(shape, extents, grid, begin, extent, starts)


def test_guards_refine_block_indices():
    A = N.Buffer("A", (200,), "float32")
    S = N.Buffer("S", (64,), "float32", "shared")
    bx = v("bx")
    start = mul(bx, c(64))
    fits = N.BinOp("<=", add(start, c(64)), c(200), "bool")  # full tiles only
    full = N.Copy(region(A, (start,), (64,)), region(S))
    edge = N.Copy(region(A, (start,), (64,)), region(S))
    func = kernel_func([A], [N.Alloc(S), N.If(fits, (full,), (edge,))], grid=(4,))
    new, facts = analyze(func)
    assert [f.proven for f in facts] == [True, False]
    assert "[0, 128] + 64 <= 200" in facts[0].reason
    # the negation of `bx * 64 + 64 > 200` is the same guard
    func = kernel_func(
        [A],
        [N.Alloc(S), N.If(N.UnaryOp("not", N.BinOp(">", add(start, c(64)), c(200), "bool"), "bool"), (full,))],
        grid=(4,),
    )
    assert analyze(func)[1][0].proven
