"""A tiny affine simplifier: enough to see that `(k + 1) * 64 - k * 64` is 64.

An expression is read as a sum of integer multiples of atoms plus a constant;
atoms are Vars and any non-affine subexpression (compared structurally, so two
copies of `A[i] // 2` cancel). Used for slice extents and loop bounds.
"""

from __future__ import annotations

from typing import Dict, Optional, Tuple

from ..ir import nodes as N
from ..ir.types import is_int

Linear = Tuple[Dict[N.Expr, int], int]


def _add(x: Linear, y: Linear, sign: int = 1) -> Linear:
    terms = dict(x[0])
    for atom, coeff in y[0].items():
        terms[atom] = terms.get(atom, 0) + sign * coeff
    return {a: c for a, c in terms.items() if c}, x[1] + sign * y[1]


def _scale(x: Linear, k: int) -> Linear:
    return ({a: c * k for a, c in x[0].items() if c * k}, x[1] * k)


def linear(e: N.Expr) -> Linear:
    """`e` as ({atom: coefficient}, constant)."""
    if isinstance(e, N.Const) and is_int(e.dtype):
        return {}, int(e.value)
    if isinstance(e, N.BinOp) and is_int(e.dtype):
        if e.op in ("+", "-"):
            return _add(linear(e.a), linear(e.b), 1 if e.op == "+" else -1)
        if e.op == "*":
            la, lb = linear(e.a), linear(e.b)
            if not la[0]:
                return _scale(lb, la[1])
            if not lb[0]:
                return _scale(la, lb[1])
    if isinstance(e, N.UnaryOp) and e.op == "neg" and is_int(e.dtype):
        return _scale(linear(e.a), -1)
    if isinstance(e, N.Cast) and is_int(e.dtype) and is_int(e.value.dtype):
        return linear(e.value)
    return {e: 1}, 0


def constant_difference(b: N.Expr, a: N.Expr) -> Optional[int]:
    """`b - a` as an int when it does not depend on any variable, else None."""
    terms, value = _add(linear(b), linear(a), -1)
    return None if terms else value


def constant_value(e: N.Expr) -> Optional[int]:
    """The value of an integer expression that simplifies to a constant, else None."""
    terms, value = linear(e)
    return None if terms else value
