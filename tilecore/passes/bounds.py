"""Bounds analysis: prove tile copies (and atomics) inside their buffers.

Guarantee: `Copy.predicated` is set to False only when, for every block of the
grid and every iteration of the enclosing loops, both regions of the copy lie
inside their buffers; otherwise it is left True (a backend must guard it).
Regions over dynamic dimensions are never proven. The proof is an interval
analysis over exact integers:

* block indices range over [0, grid - 1], loop variables over
  [begin, begin + extent - 1], T.Parallel variables over [0, extent - 1],
  narrowed inside `if` branches by affine comparisons the branch implies;
  `Let` values are inlined so that correlated terms cancel;
* each start is bounded both by evaluating intervals bottom-up and by its
  affine form (sum of coefficient * atom, each atom bounded once), and the
  tighter bound is used; any subexpression that might overflow its dtype makes
  the whole start unknown (wrap-around would void the affine reasoning);
* a region is inside when min(start) >= 0 and max(start) + extent <= size.

`ctx.analyses["bounds"]` is a list of BoundsFact in program order, one per
Copy and Atomic, saying whether it was proven and why (or why not).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from ..ir import nodes as N
from ..ir.types import INT_DTYPES
from ..ir.visitor import substitute
from .simplify import int_range, linearize

Interval = Tuple[int, int]


@dataclass(frozen=True)
class BoundsFact:
    """Why one tile op is (or is not) proven inside its buffers."""

    op: str  # "Copy" or "Atomic"
    span: N.Span
    proven: bool
    reason: str
    # the statement as it is in the function the pass returned (match with `is`)
    stmt: Optional[N.Stmt] = field(default=None, compare=False, repr=False)


class _Overflow(Exception):
    pass


def _dtype_range(dtype: str) -> Interval:
    if dtype in INT_DTYPES or dtype == "bool":
        return int_range(dtype)
    return int_range("int64")  # floats never index; a wide range keeps callers honest


def _check(iv: Interval, dtype: str) -> Interval:
    lo, hi = _dtype_range(dtype)
    if iv[0] < lo or iv[1] > hi:
        raise _Overflow
    return iv


def _floordiv(iv: Interval, c: int) -> Interval:
    a, b = iv[0] // c, iv[1] // c
    return (min(a, b), max(a, b))


def _tree_interval(e: N.Expr, env: Dict[str, Interval]) -> Interval:
    """Interval of `e` evaluated bottom-up; raises _Overflow if any node may overflow."""
    if isinstance(e, N.Const):
        if isinstance(e.value, (bool, int)):
            v = int(e.value)
            return (v, v)
        return _dtype_range(e.dtype)
    if isinstance(e, N.Var):
        return env.get(e.name, _dtype_range(e.dtype))
    if e.dtype not in INT_DTYPES and e.dtype != "bool":
        return _dtype_range(e.dtype)
    if isinstance(e, N.BinOp):
        if e.op in N.COMPARE_OPS + N.LOGIC_OPS:
            return (0, 1)
        if e.a.dtype not in INT_DTYPES + ("bool",) or e.b.dtype not in INT_DTYPES + ("bool",):
            return _dtype_range(e.dtype)
        a = _tree_interval(e.a, env)
        b = _tree_interval(e.b, env)
        if e.op == "+":
            return _check((a[0] + b[0], a[1] + b[1]), e.dtype)
        if e.op == "-":
            return _check((a[0] - b[1], a[1] - b[0]), e.dtype)
        if e.op == "*":
            prods = [x * y for x in a for y in b]
            return _check((min(prods), max(prods)), e.dtype)
        if e.op == "min":
            return (min(a[0], b[0]), min(a[1], b[1]))
        if e.op == "max":
            return (max(a[0], b[0]), max(a[1], b[1]))
        if e.op == "//":
            if b[0] > 0 or b[1] < 0:  # divisor never zero: extremes are at the corners
                quots = [x // y for x in a for y in b]
                return _check((min(quots), max(quots)), e.dtype)
            return _dtype_range(e.dtype)
        if e.op == "%":
            if b[0] == b[1] and b[0] > 0:
                c = b[0]
                if 0 <= a[0] and a[1] < c:
                    return a
                if a[1] - a[0] + 1 < c and a[0] % c <= a[1] % c:
                    return (a[0] % c, a[1] % c)
                return (0, c - 1)
            if b[0] > 0:
                return (0, b[1] - 1)
            return _dtype_range(e.dtype)
        return _dtype_range(e.dtype)
    if isinstance(e, N.UnaryOp):
        if e.op == "neg" and e.a.dtype == e.dtype:
            a = _tree_interval(e.a, env)
            return _check((-a[1], -a[0]), e.dtype)
        return _dtype_range(e.dtype)
    if isinstance(e, N.Select):
        a = _tree_interval(e.a, env) if e.a.dtype in INT_DTYPES + ("bool",) else _dtype_range(e.dtype)
        b = _tree_interval(e.b, env) if e.b.dtype in INT_DTYPES + ("bool",) else _dtype_range(e.dtype)
        return (min(a[0], b[0]), max(a[1], b[1]))
    if isinstance(e, N.Cast):
        if e.value.dtype in INT_DTYPES + ("bool",):
            inner = _tree_interval(e.value, env)
            lo, hi = _dtype_range(e.dtype)
            if lo <= inner[0] and inner[1] <= hi:
                return inner
        return _dtype_range(e.dtype)
    if isinstance(e, N.Call) and e.func == "abs" and e.args[0].dtype == e.dtype:
        a = _tree_interval(e.args[0], env)
        if a[0] >= 0:
            return a
        if a[1] <= 0:
            return _check((-a[1], -a[0]), e.dtype)
        return _check((0, max(-a[0], a[1])), e.dtype)
    return _dtype_range(e.dtype)


def expr_interval(e: N.Expr, env: Dict[str, Interval]) -> Interval:
    """A sound [lo, hi] for integer expression `e` given variable intervals `env`."""
    try:
        tree = _tree_interval(e, env)
    except _Overflow:
        return _dtype_range(e.dtype)
    if e.dtype not in INT_DTYPES:
        return tree
    # No node overflows, so integer identities hold: the affine form is exact.
    terms, const = linearize(e)
    lo = hi = const
    try:
        for atom, coeff in terms.items():
            a = _tree_interval(atom, env)
            lo += min(coeff * a[0], coeff * a[1])
            hi += max(coeff * a[0], coeff * a[1])
    except _Overflow:
        return tree
    return (max(lo, tree[0]), min(hi, tree[1]))


_NEGATE = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}


def _conjuncts(cond: N.Expr, holds: bool):
    """Comparisons (op, lhs, rhs) that certainly hold when `cond` evaluates to `holds`."""
    if isinstance(cond, N.UnaryOp) and cond.op == "not":
        return _conjuncts(cond.a, not holds)
    if isinstance(cond, N.BinOp):
        if (cond.op == "and" and holds) or (cond.op == "or" and not holds):
            return _conjuncts(cond.a, holds) + _conjuncts(cond.b, holds)
        if cond.op in _NEGATE:
            return [(cond.op if holds else _NEGATE[cond.op], cond.a, cond.b)]
    return []


def refine(env: Dict[str, Interval], cond: N.Expr, holds: bool, lets=None) -> Dict[str, Interval]:
    """Narrow the intervals of block/loop variables knowing `cond` == `holds`.

    Handles comparisons whose sides are affine (`by * 64 + 64 <= M` bounds
    `by`; each variable is bounded using the others' intervals), joined by
    `and` (or negated `or`), and `not`. Sound because the comparison is exact
    when neither side can overflow, and variables never change inside the branch.
    """
    out = dict(env)
    for op, lhs, rhs in _conjuncts(cond, holds):
        if lhs.dtype not in INT_DTYPES or rhs.dtype not in INT_DTYPES or op == "!=":
            continue
        try:
            _tree_interval(lhs, out)
            _tree_interval(rhs, out)
        except _Overflow:
            continue
        lt, lc = linearize(lhs)
        rt, rc = linearize(rhs)
        terms = dict(lt)
        for atom, coeff in rt.items():
            terms[atom] = terms.get(atom, 0) - coeff
        terms = {a: k for a, k in terms.items() if k}
        candidates = [a for a in terms if isinstance(a, N.Var) and a.name in out and a.name not in (lets or {})]
        narrowed = {}
        for var in candidates:  # bound each variable by the others' intervals
            iv = _narrow(var, terms, lc - rc, op, out)
            if iv is not None:
                narrowed[var.name] = iv
        out.update(narrowed)
    return out


def _narrow(var: N.Var, terms: Dict[N.Expr, int], const: int, op: str, env: Dict[str, Interval]) -> Optional[Interval]:
    """The interval of `var` given  sum(terms) + const  (op)  0."""
    a = terms[var]
    rlo = rhi = const  # a * var + rest  (op)  0, with rest in [rlo, rhi]
    try:
        for atom, coeff in terms.items():
            if atom is var:
                continue
            iv = _tree_interval(atom, env)
            rlo += min(coeff * iv[0], coeff * iv[1])
            rhi += max(coeff * iv[0], coeff * iv[1])
    except _Overflow:
        return None
    if op in (">", ">="):  # flip to  (-a) * var + (-rest)  <|<=  0
        a, rlo, rhi = -a, -rhi, -rlo
        op = "<" if op == ">" else "<="
    lo, hi = env[var.name]
    if op in ("<", "<="):
        bound = -rlo - (1 if op == "<" else 0)  # a * var <= -rest - strict <= bound
        if a > 0:
            hi = min(hi, bound // a)
        else:
            lo = max(lo, -(bound // -a))
    elif op == "==":  # a * var = -rest, in [-rhi, -rlo]
        if a > 0:
            hi, lo = min(hi, (-rlo) // a), max(lo, -(rhi // a))
        else:
            hi, lo = min(hi, rhi // -a), max(lo, -((-rlo) // -a))
    return (lo, hi) if lo <= hi else (lo, lo)  # empty: the branch never runs


def _fmt(e: N.Expr) -> str:
    try:
        from ..ir.printer import expr_to_source  # optional nicety

        return expr_to_source(e)
    except Exception:
        return _plain(e)


def _plain(e) -> str:
    if isinstance(e, N.Const):
        return repr(e.value)
    if isinstance(e, N.Var):
        return e.name
    if isinstance(e, N.BinOp):
        return f"({_plain(e.a)} {e.op} {_plain(e.b)})"
    if isinstance(e, N.Load):
        return f"{e.buffer.name}[{', '.join(_plain(i) for i in e.indices)}]"
    return type(e).__name__


class _Analyzer:
    def __init__(self):
        self.facts: List[BoundsFact] = []

    def region_inside(self, r: N.Region, env, lets) -> Tuple[bool, str]:
        buf = r.buffer
        notes = []
        for d, (start, extent) in enumerate(zip(r.starts, r.extents)):
            size = buf.shape[d]
            if not isinstance(size, int):
                return False, f"dimension {d} of {buf.name} is dynamic ({getattr(size, 'name', size)})"
            start = substitute(start, lets) if lets else start
            lo, hi = expr_interval(start, env)
            if lo < 0:
                return False, (f"dimension {d} of {buf.name}: start {_fmt(start)} may be {lo} < 0")
            if hi + extent > size:
                return False, (
                    f"dimension {d} of {buf.name}: start {_fmt(start)} reaches {hi}, "
                    f"{hi} + {extent} = {hi + extent} > size {size}"
                )
            notes.append(f"{buf.name} dim {d}: [{lo}, {hi}] + {extent} <= {size}")
        return True, "; ".join(notes)

    def body(self, body, env, lets) -> Tuple[N.Stmt, ...]:
        out = []
        env = dict(env)
        lets = dict(lets)
        for s in body:
            out.append(self.stmt(s, env, lets))
        return tuple(out)

    def stmt(self, s, env, lets):
        if isinstance(s, N.Let):
            value = substitute(s.value, lets) if lets else s.value
            if s.var.dtype in INT_DTYPES:
                env[s.var.name] = expr_interval(value, env)
                lets[s.var.name] = value
            return s
        if isinstance(s, N.Kernel):
            inner = dict(env)
            for v, g in zip(s.block_vars, s.grid):
                g = substitute(g, lets) if lets else g
                hi = expr_interval(g, env)[1]
                inner[v.name] = (0, max(0, hi - 1))
            return dataclasses.replace(s, body=self.body(s.body, inner, lets))
        if isinstance(s, N.For):
            begin = expr_interval(substitute(s.begin, lets) if lets else s.begin, env)
            extent = expr_interval(substitute(s.extent, lets) if lets else s.extent, env)
            inner = dict(env)
            inner[s.var.name] = (begin[0], max(begin[0], begin[1] + extent[1] - 1))
            return dataclasses.replace(s, body=self.body(s.body, inner, lets))
        if isinstance(s, N.Parallel):
            inner = dict(env)
            for v, ext in zip(s.vars, s.extents):
                inner[v.name] = (0, max(0, ext - 1))
            return dataclasses.replace(s, body=self.body(s.body, inner, lets))
        if isinstance(s, N.If):
            cond = substitute(s.cond, lets) if lets else s.cond
            then_env = refine(env, cond, True, lets)
            else_env = refine(env, cond, False, lets)
            return dataclasses.replace(
                s, then_body=self.body(s.then_body, then_env, lets), else_body=self.body(s.else_body, else_env, lets)
            )
        if isinstance(s, N.Copy):
            ok_src, why_src = self.region_inside(s.src, env, lets)
            ok_dst, why_dst = self.region_inside(s.dst, env, lets)
            proven = ok_src and ok_dst
            if proven:
                reason = f"in bounds: {why_src}; {why_dst}"
            else:
                reason = "predicated: " + (why_src if not ok_src else why_dst)
            # Never un-prove: a copy already marked safe stays as it is.
            new = dataclasses.replace(s, predicated=False) if proven and s.predicated else s
            self.facts.append(BoundsFact("Copy", s.span, proven, reason, new))
            return new
        if isinstance(s, N.Atomic):
            ok, why = self.region_inside(s.dst, env, lets)
            if ok and isinstance(s.value, N.Region):
                ok, why2 = self.region_inside(s.value, env, lets)
                why = why + "; " + why2 if ok else why2
            self.facts.append(BoundsFact("Atomic", s.span, ok, ("in bounds: " if ok else "predicated: ") + why, s))
            return s
        return s


def analyze(func: N.PrimFunc) -> Tuple[N.PrimFunc, List[BoundsFact]]:
    """Return `func` with proven copies unpredicated, and one fact per Copy/Atomic."""
    env: Dict[str, Interval] = {}
    for v in func.dyn_vars:
        env[v.name] = (0, _dtype_range(v.dtype)[1])
    for _, v in func.scalar_params:  # an argument, not a size: any value of its dtype
        env[v.name] = _dtype_range(v.dtype)
    analyzer = _Analyzer()
    body = analyzer.body(func.body, env, {})
    new = func if body == func.body else dataclasses.replace(func, body=body)
    return new, analyzer.facts


class BoundsPass:
    """Unpredicate the tile copies proven in bounds; record every decision."""

    name = "bounds"

    def __call__(self, func: N.PrimFunc, ctx) -> N.PrimFunc:
        new, facts = analyze(func)
        if ctx is not None:
            ctx.analyses["bounds"] = facts
        return new


bounds = BoundsPass()
