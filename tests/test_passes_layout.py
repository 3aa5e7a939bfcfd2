"""layout_inference: the fixpoint engine with backend-supplied rules."""

from __future__ import annotations

import os
import sys

import pytest

from tilecore.diagnostics import TileCompileError
from tilecore.ir import nodes as N
from tilecore.passes.layout_inference import (
    FragmentLayout,
    LayoutInferencePass,
    infer_layouts,
    layout_inference,
    merge_layouts,
)
from tilecore.passes.pipeline import PassContext

sys.path.insert(0, os.path.dirname(__file__))
from test_passes_support import SOURCE, add, c, gemm_func, kernel_func, make_backend, mul, region, span, v  # noqa: E402


def row_layout(rows, cols, replicate=1):
    """Thread i holds row i (a simple fragment layout for a (rows, cols) tile)."""
    i, j = v("i"), v("j")
    return FragmentLayout((rows, cols), (i, j), i, (j,), replicate=replicate, thread_extent=rows)


def col_layout(rows, cols):
    i, j = v("i"), v("j")
    return FragmentLayout((rows, cols), (i, j), j, (i,), thread_extent=cols)


def gemm_rule(stmt, layouts, ctx):
    m, n = stmt.c.buffer.shape
    return {stmt.c.buffer.name: row_layout(m, n)}


def copy_rule(stmt, layouts, ctx):
    # a copy between two fragments propagates the known layout either way
    s, d = stmt.src.buffer, stmt.dst.buffer
    if s.scope == d.scope == "fragment":
        if s.name in layouts:
            return {d.name: layouts[s.name]}
        if d.name in layouts:
            return {s.name: layouts[d.name]}
    return {}


def test_no_rules_is_a_no_op():
    func = gemm_func()
    ctx = PassContext(backend=make_backend("reference"))
    assert layout_inference(func, ctx) is func
    result = ctx.analyses["layout"]
    assert result.layouts == {} and result.iterations == 0


def test_layouts_propagate_backwards_until_fixpoint():
    C_f = N.Buffer("C_f", (64, 64), "float32", "fragment")
    D_f = N.Buffer("D_f", (64, 64), "float32", "fragment")
    E_f = N.Buffer("E_f", (64, 64), "float32", "fragment")
    A_s = N.Buffer("A_s", (64, 32), "float16", "shared")
    B_s = N.Buffer("B_s", (32, 64), "float16", "shared")
    # E <- D comes before D <- C, and C's layout is only known from the gemm at the end:
    # a single sweep cannot reach E; the fixpoint must.
    body = [N.Alloc(b) for b in (C_f, D_f, E_f, A_s, B_s)] + [
        N.Copy(region(D_f), region(E_f)),
        N.Copy(region(C_f), region(D_f)),
        N.Gemm(region(A_s), region(B_s), region(C_f)),
    ]
    ctx = PassContext(options={"layout_rules": {"Gemm": gemm_rule, "Copy": copy_rule}})
    layout_inference(kernel_func([], body), ctx)
    result = ctx.analyses["layout"]
    assert result["E_f"] == result["D_f"] == result["C_f"] == row_layout(64, 64)
    assert result.iterations >= 2
    assert isinstance(result.decided_by["C_f"], N.Gemm)


def test_conflict_is_an_error_at_the_op():
    C_f = N.Buffer("C_f", (16, 16), "float32", "fragment")
    A_s = N.Buffer("A_s", (16, 16), "float16", "shared")

    def parallel_rule(stmt, layouts, ctx):
        return {"C_f": col_layout(16, 16)}

    body = [
        N.Alloc(C_f),
        N.Alloc(A_s),
        N.Gemm(region(A_s), region(A_s), region(C_f), span=span(13)),
        N.Parallel((v("i"), v("j")), (16, 16), (N.Store(C_f, (v("i"), v("j")), c(0.0, "float32")),), span=span(14)),
    ]
    ctx = PassContext(source=SOURCE)
    with pytest.raises(TileCompileError) as info:
        LayoutInferencePass({"Gemm": gemm_rule, "Parallel": parallel_rule})(kernel_func([], body), ctx)
    err = info.value
    assert err.span.line == 14
    assert err.message.startswith("layout conflict for C_f: this op needs")
    assert "(from Gemm at line 13)" in err.message


def test_replication_merges_and_oscillation_is_caught():
    a, b = row_layout(8, 8), row_layout(8, 8, replicate=4)
    assert merge_layouts(a, b) == b and merge_layouts(b, a) == b
    assert merge_layouts(row_layout(8, 8), col_layout(8, 8)) is None
    assert merge_layouts("swizzled", "swizzled") == "swizzled"
    assert merge_layouts("swizzled", "linear") is None

    class Flip:
        def __init__(self, n):
            self.n = n

        def __eq__(self, other):
            return isinstance(other, Flip) and other.n == self.n

        def __hash__(self):
            return self.n

        def merge(self, other):
            return other  # always accepts the newcomer: never settles

    counter = iter(range(10_000))
    F = N.Buffer("F", (4,), "float32", "fragment")
    with pytest.raises(TileCompileError, match="did not converge"):
        infer_layouts(
            kernel_func([], [N.Alloc(F), N.Fill(region(F), c(0.0, "float32"))]),
            {"Fill": lambda s, l, ctx: {"F": Flip(next(counter))}},
        )


def test_fragment_layout_index_map():
    lay = row_layout(4, 8)
    assert lay.apply((2, 5)) == (2, (5,))
    assert lay.is_bijective()
    i, j = v("i"), v("j")
    # 32 threads, 4 elements each: thread = (i * 8 + j) // 4, local = j % 4
    flat = add(mul(i, c(8)), j)
    lay2 = FragmentLayout(
        (4, 8), (i, j), N.BinOp("//", flat, c(4), "int32"), (N.BinOp("%", j, c(4), "int32"),), thread_extent=8
    )
    assert lay2.apply((3, 7)) == (7, (3,)) and lay2.is_bijective()
    collide = FragmentLayout((4, 8), (i, j), c(0), (i,))
    assert not collide.is_bijective()


def test_rules_from_the_plugin_hook():
    manager_mod = pytest.importorskip("tilecore.plugin.manager")
    from tilecore.plugin import hookimpl

    class LayoutPlugin:
        @hookimpl
        def tilecore_layout_rules(self, backend, rules):
            if backend.name == "layouthw":
                rules["Gemm"] = gemm_rule

    pm = manager_mod.get_plugin_manager()
    plugin = LayoutPlugin()
    pm.register(plugin, name="test-layout-plugin")
    try:
        ctx = PassContext(backend=make_backend("layouthw"))
        layout_inference(gemm_func(), ctx)
        assert ctx.analyses["layout"]["C_f"] == row_layout(64, 64)
        ctx = PassContext(backend=make_backend("otherhw"))
        layout_inference(gemm_func(), ctx)
        assert ctx.analyses["layout"].layouts == {}
    finally:
        pm.unregister("test-layout-plugin")


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=80, deadline=None)
@given(
    edges=st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), min_size=1, max_size=14),
    seed_at=st.integers(0, 7),
    order=st.randoms(use_true_random=False),
)
def test_fixpoint_reaches_every_connected_fragment_in_any_order(edges, seed_at, order):
    """Copies between fragments in random order: everything connected to the gemm gets its layout."""
    frags = [N.Buffer(f"F{i}", (8, 8), "float32", "fragment") for i in range(8)]
    S = N.Buffer("S", (8, 8), "float16", "shared")
    stmts = [N.Copy(region(frags[a]), region(frags[b])) for a, b in edges if a != b]
    stmts.append(N.Gemm(region(S), region(S), region(frags[seed_at])))
    order.shuffle(stmts)
    func = kernel_func([], [N.Alloc(b) for b in frags] + [N.Alloc(S)] + stmts)
    result = infer_layouts(func, {"Gemm": gemm_rule, "Copy": copy_rule})
    reach, frontier = {seed_at}, [seed_at]
    while frontier:
        n = frontier.pop()
        for a, b in edges:
            for x, y in ((a, b), (b, a)):
                if x == n and y not in reach and a != b:
                    reach.add(y)
                    frontier.append(y)
    assert set(result.layouts) == {f"F{i}" for i in reach}
    assert all(lay == row_layout(8, 8) for lay in result.layouts.values())
    assert result.iterations <= len(reach) + 1
