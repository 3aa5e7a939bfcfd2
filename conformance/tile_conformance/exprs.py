"""Scalar expression trees for generated programs, rendered to DSL text with a
forward error bound.

An expression is a JSON-friendly nested list (so it can be stored in reports,
bundles and shrunk):

    ["in", k]                      element of input tile k (exact)
    ["const", v]                   a Python literal (adopts the other operand's dtype)
    ["un", f, x]                   f in MATH_FUNCS or "neg"
    ["bin", op, x, y]              op in + - * / max min (floats); + - * // % max min & | ^ (ints)
    ["pow", x, p]                  T.pow(|x| + 0.5, p)
    ["sel", k, thr, x, y]          T.if_then_else(input_k > thr, x, y)
    ["cast", dtype, x]             T.cast(x, dtype)

`render` keeps every function inside its safe domain (log of |x| + 1, exp of a
power-of-two-scaled argument, ...), keeps magnitudes below LIMIT by exact
power-of-two scaling, and returns an a-priori bound on the absolute error that
any correct implementation may have relative to exact real arithmetic (first
order forward error analysis, see README "Tolerances"). Comparisons that steer
control flow (if_then_else conditions, floor/ceil) only ever see exact input
values, so a correct backend can never take the other branch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Sequence

from tilecore.ir.nodes import MATH_FUNCS
from tilecore.ir.types import is_float, promote

LIMIT = 64.0  # magnitudes of float intermediates stay below this (exact 2^-k scaling)
FLOAT_FUNCS = MATH_FUNCS + ("neg",)  # the language's math functions, and negation
FLOAT_BINOPS = ("+", "-", "*", "/", "max", "min")
INT_BINOPS = ("+", "-", "*", "//", "%", "max", "min", "&", "|", "^")
FLOAT_CONSTS = (0.5, 1.5, 2.0, 0.25, 3.0, -1.0, -0.75)
INT_CONSTS = (1, 2, 3, 5, 7, -3)
POW_EXPONENTS = (2.0, 0.5, 1.5, -1.0, 3.0)
# Accuracy allowed to T.pow's implementation, in units of the result dtype's unit
# roundoff (pow is not in the accuracy table: it is only generated inside expressions).
FUNC_ULPS = 8.0


def func_units(f: str, dtype: str) -> float:
    """A math function's allowed error in units of the dtype's unit roundoff (one ulp is two),
    from the accuracy table (accuracy.py), at least one ulp."""
    from .accuracy import ulps

    return 2.0 * max(1.0, ulps(f, dtype))


INT_RANGES = {
    "int8": (-128, 127),
    "uint8": (0, 255),
    "int16": (-32768, 32767),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "bool": (0, 1),
}


def unit_roundoff(dtype: str) -> float:
    """Half the spacing of floats at 1.0: the relative error of one correct rounding."""
    return {
        "float16": 2.0**-11,
        "bfloat16": 2.0**-8,
        "float32": 2.0**-24,
        "float64": 2.0**-53,
        "float8_e4m3fn": 2.0**-4,
        "float8_e5m2": 2.0**-3,
    }.get(dtype, 0.0)


@dataclass
class Rendered:
    text: str
    dtype: str  # "" for a bare literal (adopts the other side)
    lo: float
    hi: float
    err: float  # bound on |computed - exact| for any correct implementation
    ops: int  # number of rounded operations

    @property
    def mag(self) -> float:
        return max(abs(self.lo), abs(self.hi))


@dataclass
class Leaf:
    """An input the expression may read: its DSL text, dtype and value interval."""

    text: str
    dtype: str
    lo: float
    hi: float
    err: float = 0.0  # a computed input (e.g. a GEMM result) carries its own error bound


def _fmt(v) -> str:
    if isinstance(v, float):
        r = repr(v)
        return r if ("." in r or "e" in r or "inf" in r) else r + ".0"
    return repr(v)


def _pow2_scale(mag: float, target: float) -> float:
    """The largest 2^-k (k >= 0) with mag * 2^-k <= target."""
    s = 1.0
    while mag * s > target:
        s *= 0.5
    return s


def _scaled(r: Rendered, s: float) -> Rendered:
    if s == 1.0:
        return r
    lo, hi = r.lo * s, r.hi * s
    return Rendered(f"({r.text}) * {_fmt(s)}", r.dtype, min(lo, hi), max(lo, hi), r.err * s, r.ops)


def _fit(r: Rendered) -> Rendered:
    return _scaled(r, _pow2_scale(r.mag, LIMIT)) if is_float(r.dtype or "float32") else r


def _round_err(dtype: str, mag: float) -> float:
    return unit_roundoff(dtype) * mag


def render_float(e, leaves: Sequence[Leaf]) -> Rendered:
    """Render a float expression tree; see the module docstring."""
    kind = e[0]
    if kind == "in":
        lf = leaves[e[1] % len(leaves)]
        return Rendered(lf.text, lf.dtype, lf.lo, lf.hi, lf.err, 0 if lf.err == 0 else 1)
    if kind == "const":
        v = float(e[1])
        return Rendered(_fmt(v), "", v, v, 0.0, 0)
    if kind == "cast":
        x = render_float(e[2], leaves)
        d = e[1]
        text = f'T.cast({x.text}, "{d}")'
        # converting an exactly known value is itself exact (round to nearest even)
        err = 0.0 if x.err == 0 else x.err + _round_err(d, x.mag)
        return Rendered(text, d, x.lo, x.hi, err, x.ops + 1)
    if kind == "un":
        return _render_unary(e[1], render_float(e[2], leaves), e[2])
    if kind == "pow":
        x = render_float(e[1], leaves)
        p = float(e[2])
        d = x.dtype or "float32"
        amin = 0.0 if x.lo <= 0 <= x.hi else min(abs(x.lo), abs(x.hi))
        b_lo, b_hi = amin + 0.5, x.mag + 0.5
        vals = [b_lo**p, b_hi**p]
        lo, hi = min(vals), max(vals)
        deriv = max(abs(p) * b_lo ** (p - 1), abs(p) * b_hi ** (p - 1))
        base_err = x.err + _round_err(d, b_hi)
        err = base_err * deriv + FUNC_ULPS * unit_roundoff(d) * max(hi, 1.0)
        r = Rendered(f"T.pow(T.abs({x.text}) + 0.5, {_fmt(p)})", d, lo, hi, err, x.ops + 2)
        return _fit(r)
    if kind == "sel":
        cond_leaf = leaves[e[1] % len(leaves)]
        thr = e[2]
        a = render_float(e[3], leaves)
        b = render_float(e[4], leaves)
        if cond_leaf.err > 0:
            # a condition on an inexact value could go either way on a correct backend
            exact = [lf for lf in leaves if lf.err == 0]
            if not exact:
                return a
            cond_leaf = exact[0]
        d = _promote_opt(a.dtype, b.dtype)
        if cond_leaf.dtype == "bool":
            cond = cond_leaf.text
        else:
            thr_v = float(thr) if is_float(cond_leaf.dtype) else int(round(float(thr)))
            cond = f"{cond_leaf.text} > {_fmt(thr_v)}"
        err = max(a.err, b.err)
        if a.dtype != b.dtype and d:
            # the narrower side is converted to the wider: exact for float widening
            pass
        return Rendered(
            f"T.if_then_else({cond}, {a.text}, {b.text})", d, min(a.lo, b.lo), max(a.hi, b.hi), err, max(a.ops, b.ops)
        )
    if kind == "bin":
        return _render_binary(e[1], render_float(e[2], leaves), render_float(e[3], leaves))
    raise ValueError(f"unknown expression node {e!r}")


def _promote_opt(a: str, b: str) -> str:
    if not a:
        return b
    if not b:
        return a
    return promote(a, b)


def _render_unary(f: str, x: Rendered, x_tree) -> Rendered:
    d = x.dtype or "float32"
    u = unit_roundoff(d)
    if f == "neg":
        return Rendered(f"-({x.text})", x.dtype, -x.hi, -x.lo, x.err, x.ops)
    if f == "abs":
        lo = 0.0 if x.lo <= 0 <= x.hi else min(abs(x.lo), abs(x.hi))
        return Rendered(f"T.abs({x.text})", x.dtype, lo, x.mag, x.err, x.ops)
    if f in ("floor", "ceil"):
        if x.err > 0 or x.ops > 0 or not x.dtype:
            return x  # only exact values may meet a discontinuity; leave the function out
        fn = math.floor if f == "floor" else math.ceil
        return Rendered(f"T.{f}({x.text})", d, float(fn(x.lo)), float(fn(x.hi)), 0.0, x.ops)
    if f in ("exp", "exp2"):
        s = _pow2_scale(x.mag, 4.0)
        arg = _scaled(x, s)
        base = math.e if f == "exp" else 2.0
        lo, hi = base**arg.lo, base**arg.hi
        deriv = math.log(base) * hi
        err = (arg.err + _round_err(d, arg.mag) * (1 if s != 1.0 else 0)) * deriv + func_units(f, d) * u * max(hi, 1.0)
        return Rendered(f"T.{f}({arg.text})", x.dtype, lo, hi, err, x.ops + 2)
    if f in ("log", "log2"):
        amin = 0.0 if x.lo <= 0 <= x.hi else min(abs(x.lo), abs(x.hi))
        k = 1.0 if f == "log" else 1.0 / math.log(2.0)
        lo, hi = k * math.log1p(amin), k * math.log1p(x.mag)
        arg_err = x.err + _round_err(d, x.mag + 1.0)
        err = arg_err * k / (1.0 + amin) + func_units(f, d) * u * max(hi, 1.0)
        return Rendered(f"T.{f}(T.abs({x.text}) + 1.0)", x.dtype, lo, hi, err, x.ops + 2)
    if f in ("sqrt", "rsqrt"):
        amin = 0.0 if x.lo <= 0 <= x.hi else min(abs(x.lo), abs(x.hi))
        a, b = math.sqrt(amin + 1.0), math.sqrt(x.mag + 1.0)
        lo, hi = (a, b) if f == "sqrt" else (1.0 / b, 1.0 / a)
        arg_err = x.err + _round_err(d, x.mag + 1.0)
        err = arg_err * 0.5 + func_units(f, d) * u * max(hi, 1.0)
        return Rendered(f"T.{f}(T.abs({x.text}) + 1.0)", x.dtype, lo, hi, err, x.ops + 2)
    if f in ("tanh", "sigmoid"):
        if f == "tanh":
            lo, hi, deriv = math.tanh(x.lo), math.tanh(x.hi), 1.0
        else:
            sg = lambda v: 1.0 / (1.0 + math.exp(-v))  # noqa: E731
            lo, hi, deriv = sg(x.lo), sg(x.hi), 0.25
        err = x.err * deriv + func_units(f, d) * u
        return Rendered(f"T.{f}({x.text})", x.dtype, lo, hi, err, x.ops + 1)
    if f in ("sin", "cos"):
        s = _pow2_scale(x.mag, 4.0)
        arg = _scaled(x, s)
        err = arg.err + func_units(f, d) * u * max(arg.mag, 1.0)
        return Rendered(f"T.{f}({arg.text})", x.dtype, -1.0, 1.0, err, x.ops + 1)
    raise ValueError(f"unknown function {f}")


def _render_binary(op: str, a: Rendered, b: Rendered) -> Rendered:
    d = _promote_opt(a.dtype, b.dtype)
    dd = d or "float32"
    # operands of a lower precision are converted exactly (float widening)
    if op in ("+", "-"):
        if op == "+":
            lo, hi = a.lo + b.lo, a.hi + b.hi
        else:
            lo, hi = a.lo - b.hi, a.hi - b.lo
        mag = max(abs(lo), abs(hi))
        err = a.err + b.err + _round_err(dd, mag)
        r = Rendered(f"({a.text} {op} {b.text})", d, lo, hi, err, a.ops + b.ops + 1)
        return _fit(r)
    if op == "*":
        cands = [a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi]
        lo, hi = min(cands), max(cands)
        mag = max(abs(lo), abs(hi))
        err = a.err * b.mag + b.err * a.mag + a.err * b.err + _round_err(dd, mag)
        return _fit(Rendered(f"({a.text} * {b.text})", d, lo, hi, err, a.ops + b.ops + 1))
    if op == "/":
        # denominator |b| + 1 >= 1: no division by (nearly) zero
        bmin = 0.0 if b.lo <= 0 <= b.hi else min(abs(b.lo), abs(b.hi))
        den_lo, den_hi = bmin + 1.0, b.mag + 1.0
        cands = [a.lo / den_lo, a.lo / den_hi, a.hi / den_lo, a.hi / den_hi]
        lo, hi = min(cands), max(cands)
        # |b| + 1.0 is computed in b's own dtype (the literal adopts it), before the promotion
        den_err = b.err + _round_err(b.dtype or dd, den_hi)
        err = a.err / den_lo + a.mag * den_err / (den_lo * den_lo) + _round_err(dd, max(abs(lo), abs(hi)))
        return Rendered(f"({a.text} / (T.abs({b.text}) + 1.0))", d, lo, hi, err, a.ops + b.ops + 2)
    if op in ("max", "min"):
        fn = max if op == "max" else min
        lo, hi = fn(a.lo, b.lo), fn(a.hi, b.hi)
        return Rendered(f"T.{op}({a.text}, {b.text})", d, lo, hi, max(a.err, b.err), max(a.ops, b.ops))
    raise ValueError(f"unknown float operator {op}")


# ----------------------------------------------------------------------------- integers


def render_int(e, leaves: Sequence[Leaf]) -> Rendered:
    """Render an integer expression; intervals are exact and no step may overflow.

    A step whose result would leave its dtype's range is computed in int32
    instead (the operands are cast first), so results are always exactly
    defined and must match bit for bit.
    """
    kind = e[0]
    if kind == "in":
        lf = leaves[e[1] % len(leaves)]
        return Rendered(lf.text, lf.dtype, lf.lo, lf.hi, 0.0, 0)
    if kind == "const":
        v = int(e[1])
        return Rendered(repr(v), "", v, v, 0.0, 0)
    if kind == "un":
        x = render_int(e[2], leaves)
        if e[1] == "neg" and x.dtype != "uint8":
            return _int_checked(f"-({x.text})", x.dtype, -x.hi, -x.lo, x)
        if e[1] == "abs" and x.dtype != "uint8":
            lo = 0 if x.lo <= 0 <= x.hi else min(abs(x.lo), abs(x.hi))
            return _int_checked(f"T.abs({x.text})", x.dtype, lo, x.mag, x)
        return x
    if kind == "bin":
        return _render_int_binary(e[1], render_int(e[2], leaves), render_int(e[3], leaves))
    if kind == "sel":
        cond_leaf = leaves[e[1] % len(leaves)]
        a, b = render_int(e[3], leaves), render_int(e[4], leaves)
        d = _promote_opt(a.dtype, b.dtype)
        if d.startswith("uint"):  # a literal adopts the unsigned dtype: -3 would not fit (frontend error)
            a, b = _non_negative_literal(a), _non_negative_literal(b)
        cond = cond_leaf.text if cond_leaf.dtype == "bool" else f"{cond_leaf.text} > {int(round(float(e[2])))}"
        return Rendered(
            f"T.if_then_else({cond}, {a.text}, {b.text})", d, min(a.lo, b.lo), max(a.hi, b.hi), 0.0, max(a.ops, b.ops)
        )
    # pow / cast / float-only nodes: use the first operand
    for child in e[1:]:
        if isinstance(child, list):
            return render_int(child, leaves)
    return render_int(["in", 0], leaves)


def _non_negative_literal(r: Rendered) -> Rendered:
    """A negative integer literal as its magnitude (for an unsigned context); anything else as is."""
    if r.dtype or r.lo >= 0:
        return r
    v = -int(r.lo)
    return Rendered(repr(v), "", v, v, 0.0, 0)


def _int_checked(text: str, dtype: str, lo: float, hi: float, *operands: Rendered) -> Rendered:
    d = dtype or "int32"
    rlo, rhi = INT_RANGES[d]
    ops = sum(o.ops for o in operands) + 1
    if rlo <= lo and hi <= rhi:
        return Rendered(text, dtype, lo, hi, 0.0, ops)
    raise _Overflow()


class _Overflow(Exception):
    pass


def _render_int_binary(op: str, a: Rendered, b: Rendered) -> Rendered:
    d = _promote_opt(a.dtype, b.dtype)
    try:
        written = (a,) if op in ("//", "%") else (a, b)  # (a division writes its own positive divisor)
        if d.startswith("uint") and any(not x.dtype and x.lo < 0 for x in written):
            # a negative literal would adopt the unsigned dtype (a frontend error): compute in int32
            raise _Overflow()
        return _int_binary_in(op, a, b, d)
    except _Overflow:
        # widen: compute in int32 (both operands cast), still exact
        a2 = Rendered(f'T.cast({a.text}, "int32")', "int32", a.lo, a.hi, 0.0, a.ops)
        b2 = b if not b.dtype else Rendered(f'T.cast({b.text}, "int32")', "int32", b.lo, b.hi, 0.0, b.ops)
        try:
            return _int_binary_in(op, a2, b2, "int32")
        except _Overflow:
            return a  # still too large: drop the operation


def _int_binary_in(op: str, a: Rendered, b: Rendered, d: str) -> Rendered:
    if op in ("+", "-", "*"):
        if op == "+":
            lo, hi = a.lo + b.lo, a.hi + b.hi
        elif op == "-":
            lo, hi = a.lo - b.hi, a.hi - b.lo
        else:
            corners = [a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi]
            lo, hi = min(corners), max(corners)
        return _int_checked(f"({a.text} {op} {b.text})", d, lo, hi, a, b)
    if op in ("//", "%"):
        # divisor: a positive constant (floor division semantics, Python's)
        c = int(b.hi) if (not b.dtype and b.lo == b.hi and b.hi > 0) else 3
        if op == "//":
            return _int_checked(f"({a.text} // {c})", d, math.floor(a.lo / c), math.floor(a.hi / c), a)
        return _int_checked(f"({a.text} % {c})", d, 0, c - 1, a)
    if op in ("max", "min"):
        fn = max if op == "max" else min
        return _int_checked(f"T.{op}({a.text}, {b.text})", d, fn(a.lo, b.lo), fn(a.hi, b.hi), a, b)
    if op in ("&", "|", "^"):
        m = max(abs(a.lo), abs(a.hi), abs(b.lo), abs(b.hi), 1)
        p = 1
        while p <= m:
            p *= 2
        lo = 0 if (a.lo >= 0 and b.lo >= 0) else -p
        return _int_checked(f"({a.text} {op} {b.text})", d, lo, p - 1, a, b)
    raise ValueError(f"unknown int operator {op}")


def expr_size(e) -> int:
    """Number of nodes (used by the shrinker to prefer smaller trees)."""
    if not isinstance(e, list):
        return 0
    return 1 + sum(expr_size(c) for c in e[1:] if isinstance(c, list))


def subtrees(e) -> List:
    """Direct child expressions of `e` (shrink candidates: replace e by one of them)."""
    return [c for c in e[1:] if isinstance(c, list)]


def uses_funcs(e) -> bool:
    """Whether rendering `e` calls a math intrinsic (T.abs counts; "/" renders |y| + 1)."""
    if not isinstance(e, list):
        return False
    if (e[0] == "un" and e[1] != "neg") or e[0] == "pow" or (e[0] == "bin" and e[1] == "/"):
        return True
    return any(uses_funcs(c) for c in e[1:] if isinstance(c, list))


def uses_select(e) -> bool:
    return isinstance(e, list) and (e[0] == "sel" or any(uses_select(c) for c in e[1:] if isinstance(c, list)))


def cast_dtypes(e) -> List[str]:
    out: List[str] = []
    if isinstance(e, list):
        if e[0] == "cast":
            out.append(e[1])
        for c in e[1:]:
            out.extend(cast_dtypes(c))
    return out
