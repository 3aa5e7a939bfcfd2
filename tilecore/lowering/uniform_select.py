"""Selects that are uniform over a T.Parallel: FlashAttention's causal mask, partial-tile masks.

`for i, j in T.Parallel(M, N): s[i, j] = T.if_then_else(c, a, b)` where `c` compares two
expressions linear in the loop variables (`bx * 128 + i >= k * 128 + j`) takes the same branch for
every (i, j) on most blocks and iterations: the whole tile lies on one side of the diagonal or of
the edge. `uniform_select` finds, for such a loop, the condition under which `c` holds for every
iteration and the one under which it holds for none, both over the names outside the loop; the
lowering then emits the loop three times behind those conditions (`a` stored everywhere, `b`
everywhere, the original), so the common blocks skip the per-element compare and select.

Exact for integer expressions: the extreme of `sum(coef * var) + rest` over the box
`0 <= var < extent` is reached at a corner. Pure Python.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

from ..ir import nodes as N
from ..ir.visitor import walk
from ..passes.simplify import linearize, simplify_expr

_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}


class UniformSelect(NamedTuple):
    """The store's value is `a` for every iteration when `all_true`, `b` when `all_false`."""

    all_true: N.Expr
    all_false: N.Expr
    when_true: N.Parallel
    when_false: N.Parallel


def uniform_select(p: N.Parallel) -> Optional[UniformSelect]:
    """The uniform cases of a T.Parallel whose body is one store of a select on a comparison of
    integer expressions linear in the loop variables (see the module docstring), else None."""
    if len(p.body) != 1 or not isinstance(p.body[0], N.Store) or not isinstance(p.body[0].value, N.Select):
        return None
    store = p.body[0]
    sel = store.value
    assert isinstance(sel, N.Select)
    cond = sel.cond
    if not (isinstance(cond, N.BinOp) and cond.op in _FLIP):
        return None
    if not (cond.a.dtype.startswith("int") and cond.a.dtype == cond.b.dtype):
        return None  # signed integers only: the corner bound assumes no wrap-around
    extents = {v.name: int(e) for v, e in zip(p.vars, p.extents)}
    # normalize to `d >= 0` / `d > 0` with d = lhs - rhs (operands swapped for < and <=)
    lhs, rhs, op = (cond.a, cond.b, cond.op) if cond.op in (">", ">=") else (cond.b, cond.a, _FLIP[cond.op])
    terms, const = linearize(N.BinOp("-", lhs, rhs, lhs.dtype))
    low = high = const
    rest: N.Expr = N.Const(0, lhs.dtype)
    for atom, coef in terms.items():
        if isinstance(atom, N.Var) and atom.name in extents:
            low += min(0, coef * (extents[atom.name] - 1))
            high += max(0, coef * (extents[atom.name] - 1))
        elif any(isinstance(n, N.Var) and n.name in extents for n in walk(atom)):
            return None  # not linear in the loop variables
        else:
            rest = N.BinOp("+", rest, N.BinOp("*", atom, N.Const(coef, lhs.dtype), lhs.dtype), lhs.dtype)
    if not any(isinstance(a, N.Var) and a.name in extents for a in terms):
        return None  # the condition does not vary over the loop: the select is uniform as written
    # every iteration holds: rest + low >= 0 (> 0 when strict); none does: rest + high < 0 (<= 0)
    strict, zero = op == ">", N.Const(0, lhs.dtype)
    all_true = simplify_expr(N.BinOp(">" if strict else ">=", _plus(rest, low), zero, "bool", cond.span))
    all_false = simplify_expr(N.BinOp("<=" if strict else "<", _plus(rest, high), zero, "bool", cond.span))

    def with_value(value):
        body = type(p.body)([N.Store(store.buffer, store.indices, value, store.span)])
        return N.Parallel(p.vars, p.extents, body, p.span)

    return UniformSelect(all_true, all_false, with_value(sel.a), with_value(sel.b))


def _plus(e: N.Expr, k: int) -> N.Expr:
    return N.BinOp("+", e, N.Const(k, e.dtype), e.dtype)
