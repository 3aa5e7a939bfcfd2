"""Tile IR statements -> TVM TIR (`tvm.tirx`) statements: loop nests, tile ops, predicated copies.

`TirLowering` turns one Tile IR PrimFunc into a `tvm.tirx.PrimFunc` whose
parameters are the tensor buffers (dynamic dimensions become TIR variables
that TVM binds from the arguments' shapes). It implements every statement with
portable loop nests; a backend subclasses it (or registers rules) to map the
grid and the heavier ops onto its hardware:

* `lower_Kernel` is abstract: the CPU backend makes the grid a parallel loop,
  a GPU backend binds block and thread indices.
* Rules: `rules` maps a statement class name ("Gemm", "Copy", ...) to a callable
  `(lowering, stmt) -> tvm.tirx.Stmt`; a rule replaces the built-in method. This is
  what the plugin hook `tilecore_lowering_rules` fills.
* `vector_lanes(dtype)` says how many elements of `dtype` one vector holds;
  innermost loops of element-wise nests are split by it and vectorized (TVM
  scalarizes a vectorized loop whose body cannot be vectorized, so this is
  always correct).

Predicated copies follow the bounds pass: `Copy.predicated` False means both
regions are proven in bounds and the nest is emitted unguarded; True means each
global access is guarded (reads outside give 0, writes outside are dropped),
with a fast path: one scalar test of the whole tile picks the unguarded,
vectorized nest when the tile is entirely inside.

This module imports TVM at top level: import it only from backend code.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import tvm
from tvm import tirx as tx

from ..diagnostics import TileCompileError, UnsupportedFeatureError
from ..ir import nodes as N
from ..ir.types import accum_dtype, is_float, itemsize
from ..ir.visitor import Dispatcher
from .intrinsics import IntrinsicTable, dtype_of, let_chain
from .tir_expr import (
    ExprLowerer,
    _small,
    cast_to,
    float32_as_bfloat16_bits,
    float32_round_to_odd,
    nan_max,
    nan_min,
    round_to_bfloat16,
    tir_const,
)

Rule = Callable[["TirLowering", N.Stmt], "tvm.tirx.Stmt"]

INT32_MAX = 2**31 - 1

# int32 slots of the error buffer: [0] = failing check id + 1, [1:] = its indices
ERROR_SLOTS = 10
_I32 = (-(1 << 31), (1 << 31) - 1)


def seq(stmts: Sequence) -> "tvm.tirx.Stmt":
    """A statement list as one TIR statement (flattening nested lists, dropping Nones)."""
    flat: List = []
    for s in stmts:
        if s is None:
            continue
        if isinstance(s, (list, tuple)):
            flat.extend(x for x in s if x is not None)
        else:
            flat.append(s)
    if not flat:
        return tx.Evaluate(tx.const(0, "int32"))
    if len(flat) == 1:
        return flat[0]
    return tx.SeqStmt(flat)


def lowest(dtype: str):
    if is_float(dtype):
        return tir_const(-math.inf, dtype)
    return tx.min_value(dtype)


def highest(dtype: str):
    if is_float(dtype):
        return tir_const(math.inf, dtype)
    return tx.max_value(dtype)


class TirLowering(Dispatcher):
    """Lower one Tile IR PrimFunc to a TVM PrimFunc (see the module docstring); statement class `C`
    is lowered by the backend's rule for it, else by `lower_C` (`Dispatcher`)."""

    backend_name = "tvm"
    # Hold bfloat16 in float32 (ExprLowerer.bfloat16_as_float32): block-local bfloat16
    # buffers are then float32 buffers of exactly rounded values, and every store rounds.
    bfloat16_as_float32 = False
    expr_class = ExprLowerer  # a backend may lower expressions with a subclass (e.g. lowering.fp8)

    def __init__(
        self,
        func: N.PrimFunc,
        intrinsics: IntrinsicTable,
        rules: Optional[Dict[str, Rule]] = None,
        storage_scope: str = "global",
        check_bounds: bool = False,
    ):
        self.func = func
        # element indexing checks (see `checked_load`): proven accesses cost nothing, the
        # others are guarded and report the first failure through `error_buffer`
        self.check_bounds = check_bounds
        self.checks: List[Dict] = []
        self.ranges: Dict[str, Tuple[int, int]] = {}
        self._pending: List[List] = [[]]
        self.error_buffer = tx.decl_buffer([ERROR_SLOTS], "int32", "tilecore_error", data_alignment=4, offset_factor=1)
        self.source = func.source
        self.rules = dict(rules or {})
        self.storage_scope = storage_scope
        self.dyn = {v.name: tx.Var(v.name, v.dtype) for v in func.dyn_vars}
        self.tir_buffers: Dict[str, tx.Buffer] = {}
        self.expr = self.expr_class({}, dict(self.dyn), intrinsics, backend=self.backend_name, source=self.source)
        self.expr.bfloat16_as_float32 = self.bfloat16_as_float32
        self.expr.hold = self.hold
        self._lane: Optional[Tuple[tx.Var, int]] = None  # the vector lane of the T.Parallel being lowered
        self._lane_cells: List[tx.Buffer] = []
        self._names = 0
        if check_bounds:
            self.expr.checked_load = self.checked_load
        for p in func.params:
            # callers' arrays may be views at any element offset: promise only element alignment
            buf = tx.decl_buffer(
                self.shape_of(p), p.dtype, p.name, data_alignment=max(1, itemsize(p.dtype)), offset_factor=1
            )
            self.tir_buffers[p.name] = buf
            self.expr.bind_buffer(p.name, buf)

    # ----------------------------------------------------------------- helpers
    def error(self, message: str, node) -> TileCompileError:
        return TileCompileError(message, getattr(node, "span", None), self.source)

    def unsupported(self, feature: str, node) -> UnsupportedFeatureError:
        return UnsupportedFeatureError(self.backend_name, feature, getattr(node, "span", None), self.source)

    def fresh(self, base: str, dtype: str = "int32") -> tx.Var:
        self._names += 1
        return tx.Var(f"{base}_{self._names}", dtype)

    def shape_of(self, buf: N.Buffer):
        """The TIR shape of a parameter: int64 extents when its flat offsets exceed int32."""
        out = []
        static = buf.static_shape()
        wide = static is not None and math.prod(static) > INT32_MAX
        for k, s in enumerate(buf.shape):
            if isinstance(s, N.Var):
                if s.name not in self.dyn:
                    self.dyn[s.name] = tx.Var(s.name, s.dtype)
                out.append(self.dyn[s.name])
            else:
                if int(s) > INT32_MAX:
                    raise self.error(
                        f"dimension {k} of {buf.name!r} has {int(s)} elements; the "
                        f"{self.backend_name} backend indexes dimensions with int32 "
                        f"(at most {INT32_MAX})",
                        buf,
                    )
                # int64 extents make TVM compute the flat offset in int64
                out.append(tx.const(int(s), "int64") if wide else int(s))
        return out

    def vector_lanes(self, dtype: str) -> int:
        """Elements of `dtype` per vector register (1: do not vectorize)."""
        return 1

    def buffer(self, buf: N.Buffer) -> tx.Buffer:
        tb = self.tir_buffers.get(buf.name)
        if tb is None:
            raise self.error(f"buffer {buf.name!r} used before its allocation", buf)
        return tb

    def local_buffer(self, shape, dtype: str, name: str, scope: Optional[str] = None) -> tx.Buffer:
        """A scratch buffer; emit `tx.AllocBuffer(buf)` before use."""
        self._names += 1
        return self.declare(list(shape), dtype, f"{name}_{self._names}", scope or self.storage_scope)

    def declare(self, shape, dtype: str, name: str, scope: str) -> tx.Buffer:
        """A block-local TIR buffer; bfloat16 is held in float32 where `bfloat16_as_float32`."""
        if self.bfloat16_as_float32 and dtype == "bfloat16":
            self.expr.held_bfloat16.add(name)
            dtype = "float32"
        return tx.decl_buffer(list(shape), dtype, name, scope=scope)

    def logical_dtype(self, tb: tx.Buffer) -> str:
        """The Tile IR dtype of a TIR buffer's elements (bfloat16 for a held buffer)."""
        return "bfloat16" if tb.name in self.expr.held_bfloat16 else str(tb.dtype)

    def convert(self, value, dtype: str):
        """A small lowered value converted to Tile IR `dtype` (bfloat16 may be held in float32)."""
        if self.bfloat16_as_float32 and dtype == "bfloat16":
            return self.expr.to_bfloat16(value, hold=False)
        return cast_to(value, dtype)

    def hold(self, value):
        """`value` stored into a cell before the current statement; returns the cell's reading.

        Inside a vectorized T.Parallel the cell has one element per lane (allocated around
        the loop); under `expr.guards` the value is computed only when the branches are taken
        (a lazy if_then_else: a negated condition would be rewritten by TVM into an ordered
        float comparison, false for NaN)."""
        if len(self._pending) < 2:
            return value  # not inside a statement: nowhere to put it
        lane = self._lane
        cell = self.local_buffer([lane[1]] if lane else [1], dtype_of(value), "held")
        index = [lane[0]] if lane else [0]
        zero = tir_const(0, dtype_of(value))
        for cond, when in reversed(self.expr.guards):
            value = tx.if_then_else(cond, value, zero) if when else tx.if_then_else(cond, zero, value)
        store = tx.BufferStore(cell, value, index)
        if lane:
            self._lane_cells.append(cell)
            self._pending[-1].append(store)
        else:
            self._pending[-1].extend([tx.AllocBuffer(cell), store])
        return tx.BufferLoad(cell, index)

    def lower_expr(self, e: N.Expr, dtype: Optional[str] = None):
        return self.expr(e) if dtype is None else self.expr.lower_as(e, dtype)

    def index(self, e: N.Expr):
        return self.expr.lower_as(e, "int32" if e.dtype != "int64" else "int64")

    def load(self, tb: tx.Buffer, indices):
        return self.expr.read(tx.BufferLoad(tb, list(indices)))

    def store(self, tb: tx.Buffer, value, indices, exact_bfloat16: bool = True):
        """`tb[indices] = value` converted to tb's dtype.

        Into bfloat16 the value is rounded explicitly (TVM may keep a small bfloat16
        buffer in a float32 register); `exact_bfloat16=False` skips that for large
        value expressions, which the rounding would repeat three times.
        """
        dt = self.logical_dtype(tb)
        src = dtype_of(value)
        if dt == "bfloat16" and self.bfloat16_as_float32:
            x32 = self.expr.to_bfloat16(value, hold=False)
            held = str(tb.dtype) == "float32"
            return tx.BufferStore(tb, x32 if held else float32_as_bfloat16_bits(x32), list(indices))
        if dt == "bfloat16" and exact_bfloat16 and src in ("float32", "float64", "float16"):
            x32 = (
                value
                if src == "float32"
                else float32_round_to_odd(value)
                if src == "float64"
                else tx.Cast("float32", value)
            )
            return tx.BufferStore(tb, tx.Cast("bfloat16", round_to_bfloat16(x32)), list(indices))
        return tx.BufferStore(tb, cast_to(value, dt), list(indices))

    def loop_nest(
        self, extents: Sequence, body_fn: Callable, vectorize: bool = True, dtype: Optional[str] = None, kind_outer=None
    ):
        """`for v0 in ext0: ... for vn in extn: body_fn([v0..vn])`, innermost vectorized.

        The innermost extent (an int) is split by `vector_lanes(dtype)` when it
        divides evenly; `body_fn` receives index expressions.
        """
        vars_ = [self.fresh("i") for _ in extents]
        idx = list(vars_)
        lanes = self.vector_lanes(dtype) if (vectorize and dtype) else 1
        inner_split = None
        if extents and lanes > 1 and isinstance(extents[-1], int) and extents[-1] % lanes == 0 and extents[-1] >= lanes:
            outer = self.fresh("vo")
            inner = self.fresh("vi")
            inner_split = (outer, inner, extents[-1] // lanes, lanes)
            idx[-1] = outer * lanes + inner
        body = body_fn(idx)
        if inner_split:
            outer, inner, n_outer, lanes = inner_split
            body = tx.For(inner, 0, lanes, tx.ForKind.VECTORIZED, body)
            body = tx.For(outer, 0, n_outer, tx.ForKind.SERIAL, body)
            loops = list(zip(vars_[:-1], extents[:-1]))
        else:
            loops = list(zip(vars_, extents))
        for i, (v, ext) in enumerate(reversed(loops)):
            kind = tx.ForKind.SERIAL
            if kind_outer is not None and i == len(loops) - 1:
                kind = kind_outer
            body = tx.For(v, 0, ext, kind, body)
        return body

    # ----------------------------------------------------------------- function
    def lower_function(self) -> tx.PrimFunc:
        body = self.lower_body(self.func.body)
        params = [self.tir_buffers[p.name] for p in self.func.params]
        params += [self.dyn[name] for name in self.func.scalar_names]  # passed by value, after the tensors
        if self.check_bounds:
            params.append(self.error_buffer)
        f = tx.PrimFunc(params, body)
        return f.with_attr("global_symbol", self.func.name).with_attr("tir.noalias", True)

    def no_handler(self, prefix: str, node: object, *args: Any) -> Any:
        """A statement class this lowering has no method for: unsupported on this backend."""
        raise self.unsupported(f"statement {type(node).__name__}", node)

    def lower_body(self, body: N.Body) -> tx.Stmt:
        return seq([self.lower_stmt(s) for s in body])

    def lower_stmt(self, s: N.Stmt):
        name = type(s).__name__
        rule = self.rules.get(name)
        self._pending.append([])
        try:
            out = rule(self, s) if rule is not None else self.dispatch("lower_", s)
        finally:
            checks = self._pending.pop()
        if checks:
            return seq(checks + [out])
        return out

    # ----------------------------------------------------------------- element bounds checks
    def index_range(self, e: N.Expr) -> Optional[Tuple[int, int]]:
        """An inclusive integer interval containing every value of `e`, or None if unknown."""
        r = self._range(e)
        if r is None or r[0] < _I32[0] or r[1] > _I32[1]:
            return None
        return r

    def _range(self, e):
        if isinstance(e, N.Const) and not isinstance(e.value, float):
            return int(e.value), int(e.value)
        if isinstance(e, N.Var):
            return self.ranges.get(e.name)
        if (
            isinstance(e, N.Cast)
            and e.dtype in ("int32", "int64")
            and e.value.dtype in ("int8", "int16", "int32", "int64", "uint8", "bool")
        ):
            return self._range(e.value)
        if isinstance(e, N.BinOp) and e.dtype in ("int32", "int64"):
            a, b = self._range(e.a), self._range(e.b)
            if a is None or b is None:
                return None
            if e.op == "+":
                return a[0] + b[0], a[1] + b[1]
            if e.op == "-":
                return a[0] - b[1], a[1] - b[0]
            if e.op == "*":
                p = [x * y for x in a for y in b]
                return min(p), max(p)
            if e.op == "min":
                return min(a[0], b[0]), min(a[1], b[1])
            if e.op == "max":
                return max(a[0], b[0]), max(a[1], b[1])
            if e.op in ("//", "%") and b[0] == b[1] and b[0] > 0:
                d = b[0]
                if e.op == "//":
                    return a[0] // d, a[1] // d
                if 0 <= a[0] and a[1] < d:
                    return a
                return 0, d - 1
        return None

    def set_range(self, name: str, lo, hi) -> None:
        if lo is None or hi is None or hi < lo:
            self.ranges.pop(name, None)
        else:
            self.ranges[name] = (int(lo), int(hi))

    def _in_bounds_condition(self, buf: N.Buffer, nodes, lowered):
        """None when every index is proven inside `buf`; else the run-time condition."""
        tb = self.buffer(buf)
        conds = []
        for node, idx, dim in zip(nodes, lowered, tb.shape):
            r = self.index_range(node)
            static = dim.value if isinstance(dim, tx.IntImm) else None
            if r is not None and r[0] >= 0 and static is not None and r[1] < static:
                continue
            d = dtype_of(idx)
            conds.append(tx.And(tx.GE(idx, tir_const(0, d)), tx.LT(idx, cast_to(dim, d))))
        if not conds:
            return None
        c = conds[0]
        for x in conds[1:]:
            c = tx.And(c, x)
        return c

    def _report(self, buf: N.Buffer, node, lowered):
        """The statement that records a failed check (first failure wins in practice)."""
        sp = getattr(node, "span", None) or N.NO_SPAN
        param = next((k for k, p in enumerate(self.func.params) if p.name == buf.name), None)
        self.checks.append(
            {
                "buffer": buf.name,
                "param": param,
                "shape": [s if isinstance(s, int) else None for s in buf.shape],
                "span": [sp.file, sp.line, sp.col, sp.end_line, sp.end_col],
            }
        )
        ident = len(self.checks)
        stores = [
            tx.BufferStore(self.error_buffer, cast_to(i, "int32"), [k + 1])
            for k, i in enumerate(lowered[: ERROR_SLOTS - 1])
        ]
        stores.append(tx.BufferStore(self.error_buffer, tir_const(ident, "int32"), [0]))
        return seq(stores)

    def checked_load(self, e: N.Load, lowered, speculative: bool):
        """A load that never leaves its buffer; unless speculative, a failure is reported."""
        tb = self.buffer(e.buffer)
        cond = self._in_bounds_condition(e.buffer, e.indices, lowered)
        value = self.load(tb, lowered)
        if cond is None:
            return value
        if not speculative:
            self._pending[-1].append(tx.IfThenElse(tx.Not(cond), self._report(e.buffer, e, lowered), None))
        return tx.if_then_else(cond, value, tir_const(0, dtype_of(value)))

    def checked_store(self, buf: N.Buffer, nodes, lowered, stmt, node):
        """`stmt` (a store to buf[lowered]) guarded by a bounds check when not proven."""
        if not self.check_bounds:
            return stmt
        cond = self._in_bounds_condition(buf, nodes, lowered)
        if cond is None:
            return stmt
        return tx.IfThenElse(cond, stmt, self._report(buf, node, lowered))

    # ----------------------------------------------------------------- scalar statements
    def lower_Alloc(self, s: N.Alloc):
        b = s.buffer
        if b.static_shape() is None:
            raise self.error(f"{b.scope} buffer {b.name!r} needs a static shape", s)
        tb = self.declare(list(b.shape), b.dtype, b.name, self.storage_scope)
        self.tir_buffers[b.name] = tb
        self.expr.bind_buffer(b.name, tb)
        return tx.AllocBuffer(tb)

    def lower_Store(self, s: N.Store):
        tb = self.buffer(s.buffer)
        idx = [self.index(i) for i in s.indices]
        held = self.bfloat16_as_float32 or s.buffer.dtype != "bfloat16"
        value = self.lower_expr(s.value, s.buffer.dtype if held else None)
        st = self.store(tb, value, idx, exact_bfloat16=_small(s.value))
        return self.checked_store(s.buffer, s.indices, idx, st, s)

    def lower_Let(self, s: N.Let):
        v = tx.Var(s.var.name, s.var.dtype)
        # the lets an intrinsic's expansion put at the top of the value (intrinsics.let_chain)
        # become binds of their own before the name's
        binds, value = let_chain(self.lower_expr(s.value, s.var.dtype))
        self.expr.bind_let(s, v)
        r = self.index_range(s.value) if s.var.dtype in ("int32", "int64") else None
        self.set_range(s.var.name, *(r or (None, None)))
        return [tx.Bind(var, val) for var, val in binds] + [tx.Bind(v, value)]

    def lower_For(self, s: N.For):
        v = tx.Var(s.var.name, s.var.dtype)
        self.expr.bind(s.var.name, v)
        begin = self.lower_expr(s.begin, s.var.dtype)
        extent = self.lower_expr(s.extent, s.var.dtype)
        rb, re_ = self.index_range(s.begin), self.index_range(s.extent)
        if rb is not None and re_ is not None:
            self.set_range(s.var.name, rb[0], rb[1] + re_[1] - 1)
        else:
            self.set_range(s.var.name, None, None)
        kind = tx.ForKind.SERIAL
        if s.kind == "unroll" and isinstance(s.extent, N.Const) and int(s.extent.value) <= 64:
            kind = tx.ForKind.UNROLLED
        return tx.For(v, begin, extent, kind, self.lower_body(s.body))

    def lower_If(self, s: N.If):
        cond = self.lower_expr(s.cond, "bool")
        then = self.lower_body(s.then_body)
        other = self.lower_body(s.else_body) if s.else_body else None
        return tx.IfThenElse(cond, then, other)

    def lower_Parallel(self, s: N.Parallel):
        tvars = [tx.Var(v.name, v.dtype) for v in s.vars]
        loops = list(zip(tvars, s.extents))
        lanes = self.vector_lanes(self.parallel_dtype(s))
        inner_ext = s.extents[-1]
        split = lanes > 1 and inner_ext % lanes == 0 and inner_ext >= lanes and self.vectorizable(s.body)
        for v, tv, ext in zip(s.vars, tvars, s.extents):
            self.expr.bind(v.name, tv)
            self.set_range(v.name, 0, ext - 1)
        cells: List[tx.Buffer] = []
        if split:
            vo, vi = self.fresh("vo"), self.fresh("vi")
            self.expr.bind(s.vars[-1].name, vo * lanes + vi)
            outer_lane, outer_cells = self._lane, self._lane_cells
            self._lane, self._lane_cells = (vi, lanes), cells
            try:
                body = self.lower_body(s.body)
            finally:
                self._lane, self._lane_cells = outer_lane, outer_cells
            body = tx.For(vi, 0, lanes, tx.ForKind.VECTORIZED, body)
            body = tx.For(vo, 0, inner_ext // lanes, tx.ForKind.SERIAL, body)
            loops = loops[:-1]
        else:
            outer_lane, self._lane = self._lane, None
            try:
                body = self.lower_body(s.body)
            finally:
                self._lane = outer_lane
        for v, ext in reversed(loops):
            body = tx.For(v, 0, ext, tx.ForKind.SERIAL, body)
        return seq([tx.AllocBuffer(c) for c in cells] + [body])

    def parallel_dtype(self, s: N.Parallel) -> str:
        """The narrowest-lane dtype stored in a T.Parallel body (decides the vector split)."""
        from ..ir.visitor import walk_stmts

        widest = None
        for st in walk_stmts(s.body):
            if isinstance(st, N.Store):
                d = accum_dtype(st.buffer.dtype)
                if widest is None or (d in ("float64", "int64")):
                    widest = d
        return widest or "float32"

    def vectorizable(self, body: N.Body) -> bool:
        """Whether a T.Parallel body is worth vectorizing (no nested loops, atomics, prints, ifs;
        a `while` never: a vector lane cannot leave its loop alone)."""
        from ..ir.visitor import walk_stmts

        for st in walk_stmts(body):
            if isinstance(
                st, (N.For, N.While, N.Parallel, N.Atomic, N.Print, N.If, N.Copy, N.Gemm, N.Reduce, N.Cumsum, N.Fill)
            ):
                return False
        return True

    def lower_Hint(self, s: N.Hint):
        return None  # hints never change results; the CPU lowering has no use for them

    # ----------------------------------------------------------------- regions and copies
    def region_access(self, region: N.Region, loop_idx: Sequence):
        """Indices into region.buffer for the loop indices over its squeezed shape."""
        starts = [self.index(e) for e in region.starts]
        out = []
        k = 0
        for st, ext in zip(starts, region.extents):
            if ext == 1:
                out.append(st)
            else:
                out.append(st + loop_idx[k])
                k += 1
        return out

    def matrix_access(self, region: N.Region, row_col: Sequence):
        """Indices into region.buffer for (row, column) of a T.gemm operand (its `matrix_axes`)."""
        out = [self.index(e) for e in region.starts]
        for axis, offset in zip(region.matrix_axes(), row_col):
            out[axis] = out[axis] + offset
        return out

    def in_bounds(self, region: N.Region, indices) -> Optional["tvm.tirx.Expr"]:
        """The condition that `indices` lie inside region.buffer (None when always true)."""
        tb = self.buffer(region.buffer)
        conds = []
        for idx, dim in zip(indices, tb.shape):
            conds.append(
                tx.And(
                    tx.GE(idx, tir_const(0, dtype_of(idx))),
                    tx.LT(idx, tx.Cast(dtype_of(idx), dim)) if dtype_of(dim) != dtype_of(idx) else tx.LT(idx, dim),
                )
            )
        if not conds:
            return None
        c = conds[0]
        for x in conds[1:]:
            c = tx.And(c, x)
        return c

    def tile_in_bounds(self, region: N.Region):
        """One scalar test: the whole region lies inside its buffer."""
        tb = self.buffer(region.buffer)
        conds = []
        for st_e, ext, dim in zip(region.starts, region.extents, tb.shape):
            st = self.index(st_e)
            conds.append(
                tx.And(
                    tx.GE(st, tir_const(0, dtype_of(st))),
                    tx.LE(st + tir_const(ext, dtype_of(st)), cast_to(dim, dtype_of(st))),
                )
            )
        c = conds[0] if conds else tx.const(True, "bool")
        for x in conds[1:]:
            c = tx.And(c, x)
        return c

    def lower_Copy(self, s: N.Copy):
        src, dst = s.src, s.dst
        shape = list(src.squeezed_shape())
        if list(dst.squeezed_shape()) != shape:
            raise self.error(f"copy between regions of shapes {src.squeezed_shape()} and {dst.squeezed_shape()}", s)
        tsrc, tdst = self.buffer(src.buffer), self.buffer(dst.buffer)
        dd = dst.buffer.dtype

        def nest(guarded: bool, vectorize: bool):
            def body(idx):
                si = self.region_access(src, idx)
                di = self.region_access(dst, idx)
                # converted by store() (which rounds bfloat16 exactly)
                value = self.load(tsrc, si)
                if not guarded:
                    return self.store(tdst, value, di)
                sc = self.in_bounds(src, si)
                value = tx.if_then_else(sc, value, tir_const(0, dtype_of(value)))
                return tx.IfThenElse(self.in_bounds(dst, di), self.store(tdst, value, di), None)

            return self.loop_nest(shape, body, vectorize=vectorize, dtype=dd)

        if not shape:
            shape = []
        if not s.predicated:
            return nest(False, True)
        return tx.IfThenElse(
            tx.And(self.tile_in_bounds(src), self.tile_in_bounds(dst)), nest(False, True), nest(True, False)
        )

    def lower_Fill(self, s: N.Fill):
        dst = s.dst
        tdst = self.buffer(dst.buffer)
        value = self.lower_expr(s.value, dst.buffer.dtype)
        shape = list(dst.squeezed_shape())

        def body(idx, guarded):
            di = self.region_access(dst, idx)
            st = self.store(tdst, value, di)
            return tx.IfThenElse(self.in_bounds(dst, di), st, None) if guarded else st

        if dst.buffer.scope != "global":
            return self.loop_nest(shape, lambda i: body(i, False), dtype=dst.buffer.dtype)
        return tx.IfThenElse(
            self.tile_in_bounds(dst),
            self.loop_nest(shape, lambda i: body(i, False), dtype=dst.buffer.dtype),
            self.loop_nest(shape, lambda i: body(i, True), vectorize=False),
        )

    # ----------------------------------------------------------------- reductions and scans
    def lower_Reduce(self, s: N.Reduce):
        src, dst = s.src, s.dst
        static = src.static_shape()
        if static is None:
            raise self.error("T.reduce needs a source with a static shape", s)
        shape = list(static)
        d = s.dim if s.dim >= 0 else s.dim + len(shape)
        tsrc, tdst = self.buffer(src), self.buffer(dst)
        acc_t = accum_dtype(dst.dtype)
        if s.kind in ("max", "min", "absmax") and not is_float(acc_t):
            acc_t = accum_dtype(src.dtype) if is_float(src.dtype) else acc_t
        keep = dst.ndim == src.ndim
        kind = s.kind

        def element(idx):
            v = cast_to(self.load(tsrc, idx), acc_t)
            if kind in ("abssum", "absmax"):
                v = tx.abs(v) if is_float(acc_t) else tx.Select(v < tir_const(0, acc_t), tir_const(0, acc_t) - v, v)
            return v

        def combine(a, b):
            if kind in ("sum", "abssum"):
                return a + b
            if kind in ("max", "absmax"):
                return nan_max(a, b)
            return nan_min(a, b)

        init = {
            "sum": tir_const(0, acc_t),
            "abssum": tir_const(0, acc_t),
            "max": lowest(acc_t),
            "absmax": tir_const(0, acc_t) if kind == "absmax" else None,
            "min": highest(acc_t),
        }[kind]

        def dst_index(out_idx):
            out_idx = list(out_idx)
            if keep:
                out_idx.insert(d, tir_const(0, "int32"))
            return out_idx

        def finish(out_idx, acc):
            di = dst_index(out_idx)
            if s.clear:
                return self.store(tdst, acc, di)
            old = cast_to(self.load(tdst, di), acc_t)
            return self.store(tdst, combine(old, acc), di)

        out_shape = shape[:d] + shape[d + 1 :]
        parts = (shape[d], acc_t, init, element, combine, finish)
        if d == len(shape) - 1:

            def row(out_idx):
                return self._reduce_row(list(out_idx), *parts)

            return row([]) if not out_shape else self.loop_nest(out_shape, row, vectorize=False)
        return self._reduce_outer(out_shape, d, *parts)

    def _reduce_row(self, out_idx, n, acc_t, init, element, combine, finish):
        """One output of a reduction along the contiguous axis: `lanes` partial results in a
        vector, then a tree over the lanes (reassociation is allowed: the order is unspecified)."""
        lanes = self.vector_lanes(acc_t)
        if lanes > 1 and n % lanes == 0 and n >= lanes:
            part = self.local_buffer([lanes], acc_t, "part")
            acc = self.local_buffer([1], acc_t, "acc")
            vi, vo, k = self.fresh("vi"), self.fresh("vo"), self.fresh("k")
            init_s = tx.For(vi, 0, lanes, tx.ForKind.VECTORIZED, tx.BufferStore(part, init, [vi]))
            vi2 = self.fresh("vi")
            upd = tx.For(
                vo,
                0,
                n // lanes,
                tx.ForKind.SERIAL,
                tx.For(
                    vi2,
                    0,
                    lanes,
                    tx.ForKind.VECTORIZED,
                    tx.BufferStore(
                        part, combine(tx.BufferLoad(part, [vi2]), element(out_idx + [vo * lanes + vi2])), [vi2]
                    ),
                ),
            )
            fold = [tx.BufferStore(acc, tx.BufferLoad(part, [0]), [0])]
            fold.append(
                tx.For(
                    k,
                    1,
                    lanes - 1,
                    tx.ForKind.UNROLLED,
                    tx.BufferStore(acc, combine(tx.BufferLoad(acc, [0]), tx.BufferLoad(part, [k])), [0]),
                )
            )
            return seq(
                [tx.AllocBuffer(part), tx.AllocBuffer(acc), init_s, upd, fold, finish(out_idx, tx.BufferLoad(acc, [0]))]
            )
        acc = self.local_buffer([1], acc_t, "acc")
        k = self.fresh("k")
        upd = tx.For(
            k,
            0,
            n,
            tx.ForKind.SERIAL,
            tx.BufferStore(acc, combine(tx.BufferLoad(acc, [0]), element(out_idx + [k])), [0]),
        )
        return seq([tx.AllocBuffer(acc), tx.BufferStore(acc, init, [0]), upd, finish(out_idx, tx.BufferLoad(acc, [0]))])

    def _reduce_outer(self, out_shape, d, n, acc_t, init, element, combine, finish):
        """A reduction along an outer axis: whole rows of the remaining axes accumulated at once."""
        tmp = self.local_buffer(out_shape, acc_t, "red")
        init_nest = self.loop_nest(out_shape, lambda o: tx.BufferStore(tmp, init, list(o)), dtype=acc_t)
        k = self.fresh("k")

        def upd_body(o):
            o = list(o)
            si = o[:d] + [k] + o[d:]
            return tx.BufferStore(tmp, combine(tx.BufferLoad(tmp, o), element(si)), o)

        upd = tx.For(k, 0, n, tx.ForKind.SERIAL, self.loop_nest(out_shape, upd_body, dtype=acc_t))
        fin = self.loop_nest(out_shape, lambda o: finish(o, tx.BufferLoad(tmp, list(o))), dtype=acc_t)
        return seq([tx.AllocBuffer(tmp), init_nest, upd, fin])

    def lower_Cumsum(self, s: N.Cumsum):
        src, dst = s.src, s.dst
        static = src.static_shape()
        if static is None:
            raise self.error("T.cumsum needs a source with a static shape", s)
        shape = list(static)
        d = s.dim if s.dim >= 0 else s.dim + len(shape)
        tsrc, tdst = self.buffer(src), self.buffer(dst)
        dd = dst.dtype
        wide = accum_dtype(dd)
        n = shape[d]
        k = self.fresh("k")
        pos = (tir_const(n - 1, "int32") - k) if s.reverse else k
        prev = (pos + 1) if s.reverse else (pos - 1)

        def body(rest):
            rest = list(rest)
            outer_idx, inner_idx = rest[:d], rest[d:]
            here = outer_idx + [pos] + inner_idx
            before = outer_idx + [prev] + inner_idx
            value = self.convert(self.load(tsrc, here), dd)
            running = self.convert(cast_to(self.load(tdst, before), wide) + cast_to(value, wide), dd)
            # the first element has no predecessor (if_then_else never reads index -1)
            return self.store(tdst, tx.if_then_else(tx.EQ(k, 0), value, running), here)

        outer_shape = shape[:d]
        inner_shape = shape[d + 1 :]

        def scan(outer_idx):
            def inner(ii):
                return body(list(outer_idx) + list(ii))

            if inner_shape:
                return tx.For(k, 0, n, tx.ForKind.SERIAL, self.loop_nest(inner_shape, inner, dtype=dd))
            return tx.For(k, 0, n, tx.ForKind.SERIAL, inner([]))

        if not outer_shape:
            return scan([])
        return self.loop_nest(outer_shape, scan, vectorize=False)

    # ----------------------------------------------------------------- gemm (portable)
    def gemm_operands(self, s: N.Gemm):
        """(M, N, K) and index functions a(i, k), b(k, j), c(i, j) -> buffer indices."""
        a, b, c = s.a, s.b, s.c
        # the matrix axes, not the squeezed shape: a unit extent (a 32 x 1 tile) is still an axis
        ash, bsh, csh = a.matrix_shape(), b.matrix_shape(), c.matrix_shape()
        if len(ash) != 2 or len(bsh) != 2 or len(csh) != 2:
            raise self.error(f"T.gemm needs 2-D tiles, got {ash}, {bsh}, {csh}", s)
        M, K = (ash[1], ash[0]) if s.transpose_a else ash
        Kb, Nn = (bsh[1], bsh[0]) if s.transpose_b else bsh
        if K != Kb or tuple(csh) != (M, Nn):
            raise self.error(f"T.gemm shapes do not agree: A {ash}, B {bsh}, C {csh}", s)

        def a_idx(i, k):
            return self.matrix_access(a, [k, i] if s.transpose_a else [i, k])

        def b_idx(k, j):
            return self.matrix_access(b, [j, k] if s.transpose_b else [k, j])

        def c_idx(i, j):
            return self.matrix_access(c, [i, j])

        return M, Nn, K, a_idx, b_idx, c_idx

    def lower_Gemm(self, s: N.Gemm):
        M, Nn, K, a_idx, b_idx, c_idx = self.gemm_operands(s)
        ta, tb, tc = self.buffer(s.a.buffer), self.buffer(s.b.buffer), self.buffer(s.c.buffer)
        acc_t = accum_dtype(s.c.buffer.dtype)
        i, j, k = self.fresh("i"), self.fresh("j"), self.fresh("k")
        prod = cast_to(self.load(ta, a_idx(i, k)), acc_t) * cast_to(self.load(tb, b_idx(k, j)), acc_t)
        c_old = cast_to(self.load(tc, c_idx(i, j)), acc_t)
        update = tx.For(k, 0, K, tx.ForKind.SERIAL, self.store(tc, c_old + prod, c_idx(i, j)))
        stmts = []
        if s.clear_accum:
            stmts.append(
                tx.For(
                    i,
                    0,
                    M,
                    tx.ForKind.SERIAL,
                    tx.For(j, 0, Nn, tx.ForKind.SERIAL, self.store(tc, tir_const(0, acc_t), c_idx(i, j))),
                )
            )
            i, j, k = self.fresh("i"), self.fresh("j"), self.fresh("k")
            prod = cast_to(self.load(ta, a_idx(i, k)), acc_t) * cast_to(self.load(tb, b_idx(k, j)), acc_t)
            c_old = cast_to(self.load(tc, c_idx(i, j)), acc_t)
            update = tx.For(k, 0, K, tx.ForKind.SERIAL, self.store(tc, c_old + prod, c_idx(i, j)))
        stmts.append(tx.For(i, 0, M, tx.ForKind.SERIAL, tx.For(j, 0, Nn, tx.ForKind.SERIAL, update)))
        return seq(stmts)

    def lower_Kernel(self, s: N.Kernel):
        raise NotImplementedError("a backend maps the grid (see TirLowering.lower_Kernel)")
