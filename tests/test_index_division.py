"""Integer floor division and modulo of an index in which a loop or thread variable enters negated
(`(31 - i) // 2`): apache-tvm 0.27's iter-map simplification, which FlattenBuffer runs on every
buffer index, rewrote floordiv(c - t, d) as floordiv(t, -d) + c // d, wrong where c is not a
multiple of d; the lowering binds such an argument to a let variable, which that analysis treats
as a symbol (`tir_expr.hide_from_iter_map`). The generated CUDA and GPU runs are checked in
plugins/tile-cuda/tests/test_conformance_regressions.py."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

tvm = pytest.importorskip("tvm")

from tilecore.lowering.tir_expr import has_negated_var, hide_from_iter_map  # noqa: E402

tx = tvm.tirx
EXTENT = 32


def _iter_map_simplified(expr, t):
    from tvm.sym.iter_affine_map import iter_map_simplify

    return iter_map_simplify([expr], {t: tvm.ir.Range(0, EXTENT)}, tx.const(True))[0]


def _evaluate(e, t, value: int, lets: dict | None = None) -> int:
    """An integer TIR index expression at t = value (the analyzer leaves XOR unfolded); `lets`:
    the values of the let variables around `e`, by name."""
    lets = lets or {}
    binary = {
        "Add": lambda a, b: a + b,
        "Sub": lambda a, b: a - b,
        "Mul": lambda a, b: a * b,
        "FloorDiv": lambda a, b: a // b,
        "FloorMod": lambda a, b: a % b,
        "BitwiseXor": lambda a, b: a ^ b,
        "BitwiseAnd": lambda a, b: a & b,
        "ShiftRight": lambda a, b: a >> b,
        "Min": min,
        "Max": max,
    }
    if isinstance(e, tx.IntImm):
        return e.value
    if e.same_as(t):
        return value
    kind = type(e).__name__
    if kind == "Var":
        return lets[e.name]
    if kind == "Let":
        return _evaluate(e.body, t, value, {**lets, e.var.name: _evaluate(e.value, t, value, lets)})
    if kind == "Call":  # bitwise intrinsics where TVM keeps them as calls
        a, b = (_evaluate(x, t, value, lets) for x in e.args)
        return binary["".join(w.title() for w in e.op.name.split(".")[-1].split("_"))](a, b)
    return binary[kind](_evaluate(e.a, t, value, lets), _evaluate(e.b, t, value, lets))


@settings(max_examples=40, deadline=None)
@given(
    offset=st.integers(-70, 70),
    scale=st.integers(1, 3),
    divisor=st.integers(2, 9),
    op=st.sampled_from(["//", "%"]),
)
def test_a_negated_iterator_keeps_its_floor_division_through_iter_map_simplification(offset, scale, divisor, op):
    t = tx.Var("t", "int32")
    fn = tx.floordiv if op == "//" else tx.floormod
    hidden = _iter_map_simplified(hide_from_iter_map(offset - t * scale, lambda v: fn(v, divisor)), t)
    for value in range(EXTENT):
        want = (offset - scale * value) // divisor if op == "//" else (offset - scale * value) % divisor
        assert _evaluate(hidden, t, value) == want, (str(hidden), value)


def test_the_unprotected_form_is_what_tvm_gets_wrong():
    """If this fails, apache-tvm's iter-map simplification handles negated iterators now and
    `hide_from_iter_map` may go (keep the test above)."""
    t = tx.Var("t", "int32")
    plain = _iter_map_simplified(tx.floordiv(31 - t, 2), t)
    assert _evaluate(plain, t, 1) != 15


def test_which_arguments_have_a_negated_variable():
    t, u = tx.Var("t", "int32"), tx.Var("u", "int32")
    assert has_negated_var(31 - t)
    assert has_negated_var(u * 32 - (t + 1))
    assert has_negated_var(t * -2 + 5)
    assert has_negated_var(tx.Max(0 - t, u))
    assert not has_negated_var(t + 31)
    assert not has_negated_var(t * 2 - 5)
    assert not has_negated_var(0 - (0 - t))
    assert has_negated_var(tx.Ramp(31 - t, 1, 4))


@settings(max_examples=40, deadline=None)
@given(
    layout=st.sampled_from(
        [
            ((64, 64), False, 1),
            ((128, 64), False, 1),
            ((64, 32), False, 1),
            ((64, 16), False, 1),
            ((128, 128), True, 1),
            ((128, 64), False, 2),
            ((256, 64), False, 2),
        ]
    ),
    row=st.tuples(st.integers(0, 70), st.sampled_from([-2, -1, 1])),
    col=st.tuples(st.integers(0, 40), st.sampled_from([-1, 0, 1])),
)
def test_swizzled_offsets_of_reversed_indices_survive_iter_map_simplification(layout, row, col):
    """The shared-tile offsets the lowering builds itself (simt_memory.smem_offset) are not let-bound:
    their XOR keeps the whole index out of the iter-map rewrite that breaks `(31 - t) // d`. If this
    fails, `SharedLayout.offset2d` needs the `hide_from_iter_map` treatment too."""
    import operator

    from tilecore.lowering.simt_layout import SharedLayout

    shape, blocked, row_blocks = layout
    lay = SharedLayout(shape, 2, swizzle=True, blocked=blocked, row_blocks=row_blocks)
    t = tx.Var("t", "int32")
    (r0, rs), (c0, cs) = row, col
    offset = lay.offset2d(r0 + t * rs, c0 + t * cs, tx.floordiv, tx.floormod, tx.bitwise_xor)
    simplified = _iter_map_simplified(offset, t)
    checked = 0
    for value in range(EXTENT):
        r, c = r0 + rs * value, c0 + cs * value
        if 0 <= r < shape[0] and 0 <= c < shape[1]:
            want = lay.offset2d(r, c, operator.floordiv, operator.mod, operator.xor)
            assert _evaluate(simplified, t, value) == want, (str(simplified), value)
            checked += 1
    assume(checked > 0)
