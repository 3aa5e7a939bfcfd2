"""Constant folding and algebraic simplification of expressions.

Guarantee: the simplified program computes exactly what the original computes,
under the interpreter's semantics (arithmetic in the node's dtype, `//` and `%`
with floor semantics):

* integer constants are folded only when the exact result fits the dtype (an
  overflowing or dividing-by-zero expression is left as written, so whatever
  the backend does with it is unchanged);
* float constants are folded only when the exact (rational) result is
  representable in the dtype, so no rounding is ever introduced;
* identities are applied only where they are exact: `x + 0`, `x * 1`, `x * 0`
  for integers; `x * 1`, `x / 1`, `x - 0.0` for floats (`x + 0.0` is not
  exact for -0.0, `x * 0.0` is not exact for inf/NaN);
* same-dtype integer sums of products by constants are rewritten into a
  canonical affine form (`(i + 1) * 4 - 4` -> `i * 4`); +, - and * are exact
  in wrap-around arithmetic too, so this never changes a result;
* `if` and `T.if_then_else` with a constant condition keep only the taken side.

Helpers for other passes: `simplify_expr`, `as_int`, `linearize`, `eval_int_binop`.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Callable, Dict, Optional, Tuple, TypeGuard

from ..ir import nodes as N
from ..ir.types import FLOAT_DTYPES, INT_DTYPES, bits
from ..ir.visitor import Transformer

# ----------------------------------------------------------------------------- integer semantics


def int_range(dtype: str) -> Tuple[int, int]:
    """The inclusive value range of an integer (or bool) dtype."""
    if dtype == "bool":
        return 0, 1
    if dtype == "uint8":
        return 0, 255
    b = bits(dtype)
    return -(1 << (b - 1)), (1 << (b - 1)) - 1


def fits(value: int, dtype: str) -> bool:
    lo, hi = int_range(dtype)
    return lo <= value <= hi


def eval_int_binop(op: str, a: int, b: int, dtype: str) -> Optional[int]:
    """`a op b` in integer `dtype`, or None where folding would not be exact.

    None for division by zero, shifts out of [0, bits), negative powers, `/`
    (true division of ints is left to the backend), and results that do not
    fit the dtype (wrap-around is the backend's business, not the folder's).
    """
    if op == "+":
        r = a + b
    elif op == "-":
        r = a - b
    elif op == "*":
        r = a * b
    elif op == "//":
        if b == 0:
            return None
        r = a // b
    elif op == "%":
        if b == 0:
            return None
        r = a % b
    elif op == "min":
        r = min(a, b)
    elif op == "max":
        r = max(a, b)
    elif op == "pow":
        if b < 0 or (b > 64 and abs(a) > 1):
            return None
        r = a**b
    elif op == "&":
        r = a & b
    elif op == "|":
        r = a | b
    elif op == "^":
        r = a ^ b
    elif op in ("<<", ">>"):
        if not 0 <= b < bits(dtype):
            return None
        r = a << b if op == "<<" else a >> b
    else:
        return None
    return r if fits(r, dtype) else None


def _compare(op: str, a, b) -> bool:
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b, "!=": a != b}[op]


def _exact_float(value: Fraction, dtype: str) -> Optional[float]:
    """`value` as a Python float if it is exactly representable in float `dtype`."""
    try:
        as_double = float(value)
    except OverflowError:
        return None
    if Fraction(as_double) != value:
        return None
    if dtype == "float64":
        return as_double
    import numpy as np

    with np.errstate(over="ignore"):  # an overflow shows up as inf below and is refused
        if dtype == "float32":
            narrow = np.float32(as_double)
        elif dtype == "float16":
            narrow = np.float16(as_double)
        else:
            import ml_dtypes

            narrow = np.array(as_double).astype(ml_dtypes.bfloat16)
    back = float(narrow)
    if back != as_double or back in (float("inf"), float("-inf")):
        return None
    return back


def _rounded(value, dtype: str) -> float:
    """The value a float constant of `dtype` really has (a float32 0.1 is not the double 0.1)."""
    if dtype == "float64":
        return float(value)
    import numpy as np

    with np.errstate(over="ignore"):
        if dtype == "float32":
            return float(np.float32(value))
        if dtype == "float16":
            return float(np.float16(value))
        import ml_dtypes

        return float(np.array(float(value)).astype(ml_dtypes.bfloat16))


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and x == x and x not in (float("inf"), float("-inf"))


# ----------------------------------------------------------------------------- affine form


def _is_int_dtype(dtype: str) -> bool:
    return dtype in INT_DTYPES


def linearize(expr: N.Expr) -> Tuple[Dict[N.Expr, int], int]:
    """Write an integer expression as `sum(coeff * atom) + const` (exact integers).

    Only +, -, negation and multiplication by a constant are opened up, and
    only through nodes of the root's dtype; anything else (a Var, a Load, a
    floor division, a cast, ...) is an atom. Atoms are compared structurally.
    """
    dtype = expr.dtype
    terms: Dict[N.Expr, int] = {}
    const = 0

    def add(e: N.Expr, scale: int) -> None:
        nonlocal const
        if scale == 0:
            return
        if isinstance(e, N.Const) and e.dtype == dtype and isinstance(e.value, int):
            const += scale * int(e.value)
            return
        if isinstance(e, N.BinOp) and e.dtype == dtype:
            if e.op == "+" and e.a.dtype == dtype and e.b.dtype == dtype:
                add(e.a, scale)
                add(e.b, scale)
                return
            if e.op == "-" and e.a.dtype == dtype and e.b.dtype == dtype:
                add(e.a, scale)
                add(e.b, -scale)
                return
            if e.op == "*" and e.a.dtype == dtype and e.b.dtype == dtype:
                if isinstance(e.b, N.Const) and isinstance(e.b.value, int):
                    add(e.a, scale * int(e.b.value))
                    return
                if isinstance(e.a, N.Const) and isinstance(e.a.value, int):
                    add(e.b, scale * int(e.a.value))
                    return
        if isinstance(e, N.UnaryOp) and e.op == "neg" and e.dtype == dtype and e.a.dtype == dtype:
            add(e.a, -scale)
            return
        terms[e] = terms.get(e, 0) + scale

    add(expr, 1)
    return {k: v for k, v in terms.items() if v != 0}, const


def _affine_size(e: N.Expr) -> int:
    """Number of nodes of the +,-,*,neg skeleton (how much rebuilding would save)."""
    if isinstance(e, N.BinOp) and e.op in ("+", "-", "*"):
        return 1 + _affine_size(e.a) + _affine_size(e.b)
    if isinstance(e, N.UnaryOp) and e.op == "neg":
        return 1 + _affine_size(e.a)
    return 1


def _rebuild_affine(terms: Dict[N.Expr, int], const: int, dtype: str, span: N.Span) -> Optional[N.Expr]:
    if not fits(const, dtype) or not all(fits(c, dtype) and fits(-c, dtype) for c in terms.values()):
        return None
    out: Optional[N.Expr] = None
    for atom, coeff in terms.items():
        if out is None:
            if coeff == 1:
                out = atom
            elif coeff == -1:
                out = N.UnaryOp("neg", atom, dtype, span=span)
            else:
                out = N.BinOp("*", atom, N.Const(coeff, dtype), dtype, span=span)
            continue
        mag = abs(coeff)
        term = atom if mag == 1 else N.BinOp("*", atom, N.Const(mag, dtype), dtype, span=span)
        out = N.BinOp("+" if coeff > 0 else "-", out, term, dtype, span=span)
    if out is None:
        return N.Const(const, dtype, span=span)
    if const > 0:
        out = N.BinOp("+", out, N.Const(const, dtype), dtype, span=span)
    elif const < 0:
        out = N.BinOp("-", out, N.Const(-const, dtype), dtype, span=span)
    return out


# ----------------------------------------------------------------------------- expression simplifier


def _has_load(e: N.Expr) -> bool:
    from ..ir.visitor import walk

    return any(isinstance(n, N.Load) for n in walk(e))


def _const(value, dtype: str, span: N.Span) -> N.Const:
    if dtype == "bool":
        value = bool(value)
    elif _is_int_dtype(dtype):
        value = int(value)
    return N.Const(value, dtype, span=span)


def _is_const(e: N.Expr, value: object = None) -> TypeGuard[N.Const]:
    if not isinstance(e, N.Const):
        return False
    if value is None:
        return True
    if isinstance(e.value, bool) and not isinstance(value, bool):
        return False
    return e.value == value


def _fold_binop(e: N.BinOp) -> N.Expr:
    a, b, op, dt, span = e.a, e.b, e.op, e.dtype, e.span
    if isinstance(a, N.Const) and isinstance(b, N.Const):
        folded = _fold_const_binop(op, a, b, dt, span)
        if folded is not None:
            return folded
    same = a.dtype == dt and b.dtype == dt
    if op in ("and", "or") and dt == "bool" and same:
        for x, y in ((a, b), (b, a)):
            if not _is_const(x):
                continue
            neutral = op == "and"  # True is neutral for `and`, False for `or`
            if bool(x.value) == neutral:
                return y
            if not _has_load(y):  # the absorbing constant decides; dropping y is exact
                return _const(not neutral, "bool", span)
        return e
    if _is_int_dtype(dt) and same:
        if op == "*":
            if (_is_const(b, 0) and not _has_load(a)) or (_is_const(a, 0) and not _has_load(b)):
                return _const(0, dt, span)
        if op in ("//",) and _is_const(b, 1):
            return a
        if op == "%" and _is_const(b, 1) and not _has_load(a):
            return _const(0, dt, span)
        if op in ("min", "max") and a == b:
            return a
        if op in ("+", "-", "*"):
            terms, const = linearize(e)
            rebuilt = _rebuild_affine(terms, const, dt, span)
            if rebuilt is not None and _affine_size(rebuilt) <= _affine_size(e) and rebuilt != e:
                dropped_loads = _has_load(e) and not any(_has_load(t) for t in terms)
                if not dropped_loads:
                    return rebuilt
        return e
    if dt in FLOAT_DTYPES and same:
        if op == "*":
            if _is_const(b) and float(b.value) == 1.0:
                return a
            if _is_const(a) and float(a.value) == 1.0:
                return b
        if op == "/" and _is_const(b) and float(b.value) == 1.0:
            return a
        if op == "-" and _is_const(b) and float(b.value) == 0.0 and str(float(b.value)) == "0.0":
            return a
        if op == "+":
            if _is_const(b) and str(float(b.value)) == "-0.0":
                return a
            if _is_const(a) and str(float(a.value)) == "-0.0":
                return b
    return e


def _fold_const_binop(op: str, a: N.Const, b: N.Const, dt: str, span: N.Span) -> Optional[N.Expr]:
    if op in N.COMPARE_OPS:
        if a.dtype != b.dtype:
            return None
        if a.dtype in FLOAT_DTYPES and not (
            _finite(_rounded(a.value, a.dtype)) and _finite(_rounded(b.value, b.dtype))
        ):
            return None
        if a.dtype == b.dtype and (_is_int_dtype(a.dtype) or a.dtype == "bool"):
            return _const(_compare(op, int(a.value), int(b.value)), "bool", span)
        if a.dtype == b.dtype and a.dtype in FLOAT_DTYPES:
            return _const(_compare(op, _rounded(a.value, a.dtype), _rounded(b.value, b.dtype)), "bool", span)
        return None
    if op in ("and", "or"):
        if a.dtype == b.dtype == dt == "bool":
            both = bool(a.value) and bool(b.value) if op == "and" else bool(a.value) or bool(b.value)
            return _const(both, "bool", span)
        return None
    if a.dtype != dt or b.dtype != dt:
        return None
    if _is_int_dtype(dt):
        folded = eval_int_binop(op, int(a.value), int(b.value), dt)
        return None if folded is None else _const(folded, dt, span)
    if dt in FLOAT_DTYPES and _finite(_rounded(a.value, dt)) and _finite(_rounded(b.value, dt)):
        x, y = Fraction(_rounded(a.value, dt)), Fraction(_rounded(b.value, dt))
        if op == "+":
            exact = x + y
        elif op == "-":
            exact = x - y
        elif op == "*":
            exact = x * y
        elif op == "/" and y != 0:
            exact = x / y
        elif op in ("min", "max"):
            exact = min(x, y) if op == "min" else max(x, y)
        else:
            return None
        if exact == 0:
            return None  # the sign of a zero result (-0.0 or +0.0) is not in the rational value
        rounded = _exact_float(exact, dt)
        return None if rounded is None else _const(rounded, dt, span)
    return None


def _fold_unary(e: N.UnaryOp) -> N.Expr:
    a = e.a
    if (
        isinstance(a, N.UnaryOp)
        and a.op == e.op
        and e.op in ("neg", "not", "~")
        and a.a.dtype == e.dtype
        and a.dtype == e.dtype
    ):
        return a.a  # double negation is exact (wraps back for ints too)
    if not isinstance(a, N.Const) or a.dtype != e.dtype:
        return e
    if e.op == "not" and e.dtype == "bool":
        return _const(not bool(a.value), "bool", e.span)
    if e.op == "neg":
        if _is_int_dtype(e.dtype):
            r = -int(a.value)
            return _const(r, e.dtype, e.span) if fits(r, e.dtype) else e
        if e.dtype in FLOAT_DTYPES:
            return _const(-float(a.value), e.dtype, e.span)
    if e.op == "~" and _is_int_dtype(e.dtype):
        r = ~int(a.value)
        if e.dtype == "uint8":
            r &= 0xFF
        return _const(r, e.dtype, e.span) if fits(r, e.dtype) else e
    return e


def _fold_cast(e: N.Cast) -> N.Expr:
    v = e.value
    if v.dtype == e.dtype:
        return v
    if not isinstance(v, N.Const):
        return e
    src, dst = v.dtype, e.dtype
    if (_is_int_dtype(src) or src == "bool") and _is_int_dtype(dst):
        return _const(int(v.value), dst, e.span) if fits(int(v.value), dst) else e
    if (_is_int_dtype(src) or src == "bool") and dst in FLOAT_DTYPES:
        r = _exact_float(Fraction(int(v.value)), dst)
        return e if r is None else _const(r, dst, e.span)
    if (_is_int_dtype(src) or src == "bool") and dst == "bool":
        return _const(int(v.value) != 0, "bool", e.span)
    if src in FLOAT_DTYPES and dst in FLOAT_DTYPES and _finite(_rounded(v.value, src)):
        r = _exact_float(Fraction(_rounded(v.value, src)), dst)
        return e if r is None else _const(r, dst, e.span)
    return e


def _fold_call(e: N.Call) -> N.Expr:
    if len(e.args) != 1 or not isinstance(e.args[0], N.Const) or e.args[0].dtype != e.dtype:
        return e
    x = e.args[0].value
    if e.dtype in FLOAT_DTYPES:
        x = _rounded(x, e.dtype)
    if not _finite(x):
        return e
    import math

    if e.func == "abs":
        if _is_int_dtype(e.dtype):
            r = abs(int(x))
            return _const(r, e.dtype, e.span) if fits(r, e.dtype) else e
        return _const(abs(float(x)), e.dtype, e.span)
    if e.func in ("floor", "ceil") and e.dtype in FLOAT_DTYPES:
        whole = float(math.floor(x) if e.func == "floor" else math.ceil(x))
        if whole == 0.0 and (x < 0 or str(float(x)) == "-0.0"):
            return e  # -0.0 results: leave to the backend
        exact = _exact_float(Fraction(whole), e.dtype)
        return e if exact is None else _const(exact, e.dtype, e.span)
    return e


def _fold_select(e: N.Select) -> N.Expr:
    if isinstance(e.cond, N.Const):
        chosen = e.a if bool(e.cond.value) else e.b
        if chosen.dtype == e.dtype:
            return chosen
    if e.a == e.b and e.a.dtype == e.dtype and not _has_load(e.cond):
        return e.a
    return e


_FOLDERS: Dict[type, Callable[[Any], Optional[N.Expr]]] = {
    N.BinOp: _fold_binop,
    N.UnaryOp: _fold_unary,
    N.Cast: _fold_cast,
    N.Call: _fold_call,
    N.Select: _fold_select,
}


class _ExprSimplifier(Transformer):
    def visit(self, node):
        node = super().visit(node)
        folder = _FOLDERS.get(type(node))
        return folder(node) if folder else node


def simplify_expr(expr: N.Expr) -> N.Expr:
    """Simplify one expression (bottom-up folding, exact identities, affine form)."""
    return _ExprSimplifier().visit(expr)


def as_int(expr) -> Optional[int]:
    """The value of `expr` if it simplifies to an integer constant, else None."""
    if isinstance(expr, bool):
        return None
    if isinstance(expr, int):
        return expr
    if not isinstance(expr, N.Expr):
        return None
    e = simplify_expr(expr)
    if isinstance(e, N.Const) and isinstance(e.value, int) and not isinstance(e.value, bool):
        return int(e.value)
    return None


# ----------------------------------------------------------------------------- the pass


class _ProgramSimplifier(_ExprSimplifier):
    def visit_If(self, s: N.If):
        if isinstance(s.cond, N.Const):
            return tuple(s.then_body if bool(s.cond.value) else s.else_body)
        return s


class SimplifyPass:
    """Constant folding and exact algebraic simplification of every expression."""

    name = "simplify"

    def __call__(self, func: N.PrimFunc, ctx) -> N.PrimFunc:
        import dataclasses

        body = _ProgramSimplifier().visit_body(func.body)
        return func if body == func.body else dataclasses.replace(func, body=body)


simplify = SimplifyPass()
