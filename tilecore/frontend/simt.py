"""Per-thread (SIMT) code inside `T.Kernel`, written out as tile code.

`T.get_thread_binding(dim)` parses to a placeholder variable (one per thread dimension with
more than one thread). When the kernel body uses it only as the condition of thread-group
splits (`if T.get_thread_binding() < 32:`), `finish_kernel_body` resolves the splits as
before. Otherwise the body is per-thread code that runs on every thread of the block in
statement lockstep (docs/semantics.md "Per-thread code"), and it is rewritten here into tile
code that every backend already runs:

* `T.alloc_local` / `T.alloc_var` buffers (and Let-bound names whose value reads memory and
  depends on the thread) become per-thread: their buffer gains trailing thread dimensions;
* a thread-dependent statement (it reads a thread index, directly or through a name, or a
  per-thread buffer, or writes a per-thread buffer) becomes `T.Parallel` over the threads
  around it; a `for` / `if` / `while` whose header is thread-dependent is wrapped whole (each
  thread runs its own `while`, testing its own condition), one with a
  uniform header stays at block level and its body is treated statement by statement;
* uniform statements run once, at block level (element atomics excepted: every thread runs
  them, as in TileLang, since an update is not idempotent); tile operations stay collective, and act on
  the whole expanded buffer where that is the same thing (`T.clear(acc)`);
* a T.copy that is per-thread code (a thread-dependent region, or between a per-thread buffer and
  a shared or global one) becomes each thread's element loop (`element_copy`);
* an element atomic into a shared (or per-thread) buffer becomes a read-modify-write whose
  thread axes that do not index it run as a sequential loop (exactly an atomic's result).

Anything that cannot be expressed is a TileCompileError at the user's line. Runs while parsing
(before type checking), so the rest of the compiler never sees a thread index.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Dict, FrozenSet, List, Set, Tuple

from ..diagnostics import TileCompileError
from ..ir import nodes as N
from ..ir.visitor import Transformer, children, walk, walk_stmts
from . import exprs as E

AXIS_NAMES = ("tx", "ty", "tz")
BODY_FIELDS = ("body", "then_body", "else_body")
PER_THREAD_SCOPES = ("local", "var")
SYNC_HINT = "sync_threads"  # the Hint kind T.sync_threads() parses to; removed here
TILE_OP_NAMES = {
    N.Copy: "T.copy",
    N.Fill: "T.fill / T.clear",
    N.Gemm: "T.gemm",
    N.Reduce: "a T.reduce_* operation",
    N.Cumsum: "T.cumsum",
}


@dataclasses.dataclass
class ThreadBindings:
    """What the parser records about one kernel's thread indices."""

    threads: Tuple[int, ...]
    vars: Dict[int, N.Var] = dataclasses.field(default_factory=dict)  # dim -> placeholder Var
    # id(If) -> (the If, whether its branch runs, whether its else branch runs): thread-group splits
    splits: Dict[int, Tuple[N.If, bool, bool]] = dataclasses.field(default_factory=dict)


def finish_kernel_body(body: N.Body, bindings: ThreadBindings, fresh: Callable[[str], str], source: str) -> N.Body:
    """The kernel body with thread-group splits resolved, or per-thread code written as tile code."""
    names = {v.name for v in bindings.vars.values()}
    if names and _uses_outside_splits(body, names, bindings.splits):
        return _Simt(bindings, fresh, source).run(body)
    return _resolve_splits(body, bindings.splits, source, names)


def _own_children(s: N.Stmt):
    """The expressions, regions and buffers of `s` itself (not of its nested bodies)."""
    return [c for c in children(s) if not isinstance(c, N.Stmt)]


def _uses_outside_splits(body: N.Body, names: Set[str], splits) -> bool:
    """Whether a statement other than a split's condition reads a thread index, directly or
    through names bound to one (a name bound and never read does not count)."""
    dep = set(names)
    for s in walk_stmts(body):
        if isinstance(s, N.Let):
            if _var_names(s.value) & dep:
                dep.add(s.var.name)
            continue
        for c in _own_children(s):
            if id(s) in splits and isinstance(s, N.If) and c is s.cond:
                continue
            if _var_names(c) & dep:
                return True
    return False


def _map_bodies(s: N.Stmt, fn) -> N.Stmt:
    changes = {f: fn(getattr(s, f)) for f in BODY_FIELDS if isinstance(getattr(s, f, None), tuple)}
    return dataclasses.replace(s, **changes) if changes else s  # type: ignore[type-var]


def _shared_atomic_error(s: N.Atomic, source: str, where: str) -> TileCompileError:
    return TileCompileError(
        f"T.atomic_{s.kind} updates global memory, but {s.dst.buffer.name} is a {s.dst.buffer.scope} "
        f"buffer{where} (an element atomic into shared memory is per-thread code: its index or value "
        "must depend on T.get_thread_binding())",
        s.span,
        source,
    )


def _resolve_splits(body: N.Body, splits, source: str, names: Set[str], in_parallel: bool = False) -> N.Body:
    """Thread-group splits as their groups' branches one after the other (docs/semantics.md);
    names bound to a thread index and never read are dropped."""
    out: List[N.Stmt] = []
    for s in body:
        if id(s) in splits and isinstance(s, N.If):
            _, then_runs, else_runs = splits[id(s)]
            out += _resolve_splits(s.then_body, splits, source, names) if then_runs else ()
            out += _resolve_splits(s.else_body, splits, source, names) if else_runs else ()
            continue
        if isinstance(s, N.Let) and _var_names(s.value) & names:
            names = names | {s.var.name}  # unread (else the body would be per-thread code)
            continue
        if isinstance(s, N.Hint) and s.kind == SYNC_HINT:
            if in_parallel:
                raise TileCompileError("T.sync_threads() cannot be inside T.Parallel", s.span, source)
            continue  # a block-level barrier: tile statements already finish in order
        if isinstance(s, N.Atomic) and s.dst.buffer.scope != "global":
            raise _shared_atomic_error(s, source, "")
        inner = in_parallel or isinstance(s, N.Parallel)
        out.append(_map_bodies(s, lambda b, inner=inner, names=names: _resolve_splits(b, splits, source, names, inner)))
    return tuple(out)


def _var_names(e) -> Set[str]:
    return {n.name for n in walk(e) if isinstance(n, N.Var)}


class _Simt:
    """The per-thread rewrite of one kernel body (see the module docstring)."""

    def __init__(self, bindings: ThreadBindings, fresh: Callable[[str], str], source: str):
        self.threads = bindings.threads
        self.thread_vars = bindings.vars
        self.fresh = fresh
        self.source = source
        # thread dimensions that have placeholders, outermost first (z, y, x: x varies fastest)
        self.axes = sorted(bindings.vars, reverse=True)
        self.dep: Set[str] = {v.name for v in bindings.vars.values()}  # names whose value depends on the thread
        # names that stand for an expression of a thread index (not for a per-thread value in memory)
        self.index_names: Set[str] = set(self.dep)
        self.lets: Dict[str, N.Expr] = {}  # thread-dependent Let names -> their value (untranslated)
        self.per_thread: Dict[str, Tuple[N.Buffer, N.Buffer]] = {}  # name -> (as declared, expanded)
        self.rmw_stores: Set[int] = set()  # ids of the Stores made from atomics (no race check)
        # per-thread scalars (shape (1,), only ever indexed by the constant 0) become one element per
        # thread, indexed by the thread loops' variables alone: backends keep those in registers
        self.scalars: Set[str] = set()
        # the loops over a thread axis are named after the user's name for it (`tn = T.get_thread_binding(0)`)
        self.axis_names = {d: AXIS_NAMES[d] for d in self.axes}

    # ------------------------------------------------------------------ entry

    def run(self, body: N.Body) -> N.Body:
        dims = {v.name: d for d, v in self.thread_vars.items()}
        self.scalars = _scalar_buffers(body)
        for s in reversed(list(walk_stmts(body))):
            if isinstance(s, N.Alloc) and s.buffer.scope in PER_THREAD_SCOPES:
                self.add_per_thread(s.buffer)
            if isinstance(s, N.Let) and isinstance(s.value, N.Var) and s.value.name in dims:
                self.axis_names[dims[s.value.name]] = s.var.name
        out = self.block(body)
        self.check_leftovers(out)
        return out

    def error(self, message: str, s) -> TileCompileError:
        return TileCompileError(message, s.span, self.source)

    def add_per_thread(self, buf: N.Buffer) -> N.Buffer:
        extents = tuple(self.threads[d] for d in self.axes)
        shape = () if buf.name in self.scalars else tuple(buf.shape)
        # the thread dimensions last: where a backend keeps the buffer in memory, neighbouring
        # threads then touch neighbouring addresses
        expanded = N.Buffer(buf.name, shape + extents, buf.dtype, "local", buf.span)
        self.per_thread[buf.name] = (buf, expanded)
        return expanded

    def is_per_thread(self, buf: N.Buffer) -> bool:
        return buf.name in self.per_thread

    def depends(self, node) -> bool:
        """Whether `node` reads a thread index (or a name bound to one) or touches a per-thread buffer."""
        for n in walk(node):
            if isinstance(n, N.Var) and n.name in self.dep:
                return True
            if isinstance(n, N.Buffer) and n.name in self.per_thread:
                return True
        return False

    def stmt_depends(self, s: N.Stmt) -> bool:
        return any(self.depends(c) for c in _own_children(s))

    # ------------------------------------------------------------------ block level

    def block(self, body: N.Body) -> N.Body:
        out: List[N.Stmt] = []
        for s in body:
            out.extend(self.block_stmt(s))
        return tuple(out)

    def block_stmt(self, s: N.Stmt) -> List[N.Stmt]:
        if isinstance(s, N.Let):
            return self.block_let(s)
        if isinstance(s, N.Alloc):
            return [N.Alloc(self.per_thread[s.buffer.name][1], s.span) if self.is_per_thread(s.buffer) else s]
        if isinstance(s, N.Hint):
            if s.kind == SYNC_HINT:
                return []  # statement lockstep already orders every statement
            if any(self.is_per_thread(b) for b in s.buffers):
                return []  # a layout hint on a per-thread buffer: hints never change results
            return [s]
        if isinstance(s, N.For):
            if self.depends(s.begin) or self.depends(s.extent):
                return self.wrap(s)
            return [dataclasses.replace(s, body=self.block(s.body))]
        if isinstance(s, N.If):
            if self.depends(s.cond):
                return self.wrap(s)
            return [dataclasses.replace(s, then_body=self.block(s.then_body), else_body=self.block(s.else_body))]
        if isinstance(s, N.While):
            if self.depends(s.cond):
                return self.wrap(s)  # each thread runs its own loop, testing its own condition
            return [dataclasses.replace(s, body=self.block(s.body))]
        if isinstance(s, N.Parallel):
            return [self.block_parallel(s)]
        if isinstance(s, (N.Store, N.Print)) and not isinstance(getattr(s, "value", None), N.Buffer):
            return self.wrap(s) if self.stmt_depends(s) else [s]
        if isinstance(s, N.Print) and isinstance(s.value, N.Buffer):  # a whole buffer
            return [dataclasses.replace(s, value=self.expanded(s.value))]
        if isinstance(s, N.Atomic):
            return self.block_atomic(s)
        if isinstance(s, N.Copy) and self.stmt_depends(s) and not self.collective_copy(s):
            return self.wrap(self.element_copy(s))
        return [self.tile_op(s)]

    def collective_copy(self, s: N.Copy) -> bool:
        """A copy between two per-thread buffers at thread-independent places: the collective copy
        of the expanded buffers (tile_op) is every thread's copy."""
        both = self.is_per_thread(s.src.buffer) and self.is_per_thread(s.dst.buffer)
        return both and not any(self.depends(e) for r in (s.src, s.dst) for e in r.starts)

    def element_copy(self, s: N.Copy) -> N.Stmt:
        """A T.copy that is per-thread code (its regions start at places that depend on the thread,
        or it moves data between a per-thread buffer and a shared one) as each thread's element
        loop: `for i..: dst[d + i] = src[s + i]`, the regions' non-unit extents paired in order.
        As a tile copy does, an element outside a global tensor reads as 0 and is not written."""
        src, dst = s.src, s.dst
        src_dims = [d for d, e in enumerate(src.extents) if e != 1]
        dst_dims = [d for d, e in enumerate(dst.extents) if e != 1]
        if [src.extents[d] for d in src_dims] != [dst.extents[d] for d in dst_dims]:
            raise self.error(f"T.copy between regions of shapes {src.extents} and {dst.extents}", s)
        loop = [N.Var(self.fresh("i"), "int32", s.span) for _ in dst_dims]

        def at(region: N.Region, dims) -> Tuple[N.Expr, ...]:
            starts = list(region.starts)
            for v, d in zip(loop, dims):
                starts[d] = E.binary("+", starts[d], v, s.span)
            return tuple(starts)

        def inside(buf: N.Buffer, index) -> N.Expr:
            conds = [E.binary("<", i, E.index_expr(n, s.span), s.span) for i, n in zip(index, buf.shape)]
            conds += [E.binary(">=", i, 0, s.span) for i in index]
            out = conds[0]
            for c in conds[1:]:
                out = E.binary("and", out, c, s.span)
            return out

        si, di = at(src, src_dims), at(dst, dst_dims)
        body: N.Stmt = N.Store(dst.buffer, di, N.Load(src.buffer, si, src.buffer.dtype, s.span), s.span)
        if src.buffer.scope == "global":
            zero = N.Store(dst.buffer, di, E.const(0, dst.buffer.dtype, s.span), s.span)
            body = N.If(inside(src.buffer, si), (body,), (zero,), s.span)
        if dst.buffer.scope == "global":
            body = N.If(inside(dst.buffer, di), (body,), (), s.span)
        for v, d in reversed(list(zip(loop, dst_dims))):
            zero_i, extent = E.const(0, "int32", s.span), E.const(dst.extents[d], "int32", s.span)
            body = N.For(v, zero_i, extent, "serial", (body,), 0, s.span)
        return body

    def block_let(self, s: N.Let) -> List[N.Stmt]:
        if not self.depends(s.value):
            return [s]
        self.dep.add(s.var.name)
        if not any(isinstance(n, N.Load) for n in walk(s.value)):
            self.lets[s.var.name] = s.value  # pure: written in place of the name wherever it is read
            if _var_names(s.value) & self.index_names:
                self.index_names.add(s.var.name)
            return []
        # it reads memory: its value is fixed at this statement, so each thread keeps it in a cell
        cell = N.Buffer(self.fresh(s.var.name), (1,), s.var.dtype, "var", s.span)
        self.scalars.add(cell.name)
        expanded = self.add_per_thread(cell)
        zero = E.const(0, "int32", s.span)
        self.lets[s.var.name] = N.Load(cell, (zero,), cell.dtype, s.span)
        return [N.Alloc(expanded, s.span)] + self.wrap(N.Store(cell, (zero,), s.value, s.span))

    def block_atomic(self, s: N.Atomic) -> List[N.Stmt]:
        if isinstance(s.value, N.Region):
            if self.stmt_depends(s):
                raise self.error(
                    f"a tile T.atomic_{s.kind} cannot depend on the thread (T.get_thread_binding() or a "
                    "per-thread buffer): tile operations are collective over the block; use the element "
                    "form T.atomic_add(C[i], value)",
                    s,
                )
            return [s]
        # every thread runs an element atomic, as in TileLang, even one that does not depend on the
        # thread: updates are not idempotent (T.atomic_add(n[0], 1) adds the thread count)
        return self.wrap(s)

    def block_parallel(self, s: N.Parallel) -> N.Stmt:
        """A T.Parallel loop: kept when uniform; over a per-thread buffer, every thread runs it on its
        own copy (the thread axes join the loop's); reading a thread index is an error."""
        for inner in walk_stmts(s.body):
            for c in _own_children(inner):
                if _var_names(c) & self.index_names:
                    raise self.error(
                        "a T.Parallel loop cannot read a thread index (T.get_thread_binding() or a name "
                        "bound to one): its iterations are already spread over the block's threads; "
                        "write the per-thread part with T.serial loops outside T.Parallel",
                        inner,
                    )
        if not any(self.depends(c) for inner in walk_stmts(s.body) for c in _own_children(inner)):
            return s
        env, loop_vars = self.axis_vars(s)
        body = self.translate(s.body, env)
        extents = tuple(self.threads[d] for d in self.axes)
        merged = N.Parallel(tuple(loop_vars[d] for d in self.axes) + s.vars, extents + s.extents, body, s.span)
        self.check_value_races(merged.body, {v.name: d for d, v in loop_vars.items()}, frozenset())
        return merged

    def tile_op(self, s: N.Stmt) -> N.Stmt:
        """A collective tile operation: on per-thread buffers only where acting on the expanded
        buffer is the same thing as every thread acting on its own copy."""
        what = TILE_OP_NAMES.get(type(s), type(s).__name__)
        regions = [c for c in _own_children(s) if isinstance(c, N.Region)]
        buffers = [c for c in _own_children(s) if isinstance(c, N.Buffer)] + [r.buffer for r in regions]
        reads_thread = any(
            isinstance(n, N.Var) and n.name in self.dep for c in _own_children(s) for n in walk(c)
        ) or any(self.depends(e) for r in regions for e in r.starts)
        if isinstance(s, N.Fill):
            reads_thread = reads_thread or self.depends(s.value)
        if reads_thread:
            raise self.error(
                f"{what} is a tile operation, collective over the block, so its operands cannot depend "
                "on the thread (T.get_thread_binding(), a name bound to it, or a per-thread value): "
                "write the per-thread part as element loads and stores in T.serial loops",
                s,
            )
        per_thread = [b for b in buffers if self.is_per_thread(b)]
        if not per_thread:
            return s
        if isinstance(s, N.Fill):
            return dataclasses.replace(s, dst=self.expanded_region(s.dst))
        if isinstance(s, N.Copy) and len(per_thread) == 2:
            return dataclasses.replace(s, src=self.expanded_region(s.src), dst=self.expanded_region(s.dst))
        raise self.error(
            f"{what} on the per-thread buffer {per_thread[0].name} is not supported (only T.fill / T.clear, "
            "and T.copy between two per-thread buffers, act on every thread's copy): write it as "
            "element loads and stores in T.serial loops",
            s,
        )

    def expanded(self, buf: N.Buffer) -> N.Buffer:
        return self.per_thread[buf.name][1] if self.is_per_thread(buf) else buf

    def expanded_region(self, r: N.Region) -> N.Region:
        if not self.is_per_thread(r.buffer):
            return r
        zeros = tuple(E.const(0, "int32", r.span) for _ in self.axes)
        extents = tuple(self.threads[d] for d in self.axes)
        if r.buffer.name in self.scalars:
            return N.Region(self.expanded(r.buffer), zeros, extents, r.span)
        return N.Region(self.expanded(r.buffer), r.starts + zeros, r.extents + extents, r.span)

    # ------------------------------------------------------------------ per-thread statements

    def axis_vars(self, s: N.Stmt) -> Tuple[Dict[str, N.Expr], Dict[int, N.Var]]:
        loop_vars = {d: N.Var(self.fresh(self.axis_names[d]), "int32", s.span) for d in self.axes}
        env: Dict[str, N.Expr] = {self.thread_vars[d].name: loop_vars[d] for d in self.axes}
        return env, loop_vars

    def translate(self, body: N.Body, env: Dict[str, N.Expr]) -> N.Body:
        return _Translate(self, env).visit_body(body)

    def wrap(self, s: N.Stmt) -> List[N.Stmt]:
        """`s` run by every thread: T.Parallel over the thread axes around it (the axes that do not
        index an element atomic into shared memory run as sequential loops outside)."""
        env, loop_vars = self.axis_vars(s)
        serial = self.serial_axes(s)
        tr = _Translate(self, env)
        body = tr.visit_body((s,))
        self.check_value_races(body, {v.name: d for d, v in loop_vars.items()}, frozenset())
        parallel = [d for d in self.axes if d not in serial]
        if parallel:
            extents = tuple(self.threads[d] for d in parallel)
            body = (N.Parallel(tuple(loop_vars[d] for d in parallel), extents, body, s.span),)
        for d in reversed([d for d in self.axes if d in serial]):
            zero, extent = E.const(0, "int32", s.span), E.const(self.threads[d], "int32", s.span)
            body = (N.For(loop_vars[d], zero, extent, "serial", body, 0, s.span),)
        return tr.allocs + list(body)

    def serial_axes(self, s: N.Stmt) -> Set[int]:
        """Thread axes that some element atomic into a block-shared buffer in `s` does not index by
        the bare thread index: those threads take turns (an atomic's result in any order)."""
        identity: Dict[str, N.Expr] = {v.name: v for v in self.thread_vars.values()}
        serial: Set[int] = set()
        for inner in walk_stmts((s,)):
            if not (isinstance(inner, N.Atomic) and isinstance(inner.value, N.Expr)):
                continue
            dst = inner.dst.buffer
            if dst.scope == "global" or self.is_per_thread(dst):
                continue
            starts = [_Translate(self, identity).visit(e) for e in inner.dst.starts]
            bare = {v.name for v in starts if isinstance(v, N.Var)}
            serial |= {d for d in self.axes if self.thread_vars[d].name not in bare}
        return serial

    def check_value_races(self, body: N.Body, axis: Dict[str, int], pinned: FrozenSet[str], lets=None) -> None:
        """Two threads storing different values to one element in one statement is a race: a store
        outside the per-thread buffers whose value depends on a thread axis that its index does not
        (unless an enclosing `if t == c` pins that axis)."""
        lets = dict(lets or {})

        def names(e) -> Set[str]:
            out: Set[str] = set()
            for n in _var_names(e):
                out |= {n} | lets.get(n, set())
            return out

        for s in body:
            if isinstance(s, N.Let):
                lets[s.var.name] = names(s.value)
            elif isinstance(s, N.Store) and id(s) not in self.rmw_stores and not self.is_per_thread(s.buffer):
                index: Set[str] = set()
                for i in s.indices:
                    index |= names(i)
                missing = (names(s.value) & set(axis)) - index - pinned
                if missing:
                    dims = ", ".join(f"T.get_thread_binding({axis[n]})" for n in sorted(missing, key=lambda n: axis[n]))
                    raise self.error(
                        f"several threads store different values to one element of {s.buffer.name} in this "
                        f"statement (its value depends on {dims}, its index does not): that is a race; "
                        "index by the thread, guard the store with `if t == 0:`, or use T.atomic_add",
                        s,
                    )
            elif isinstance(s, N.If):
                self.check_value_races(s.then_body, axis, pinned | _pins(s.cond, set(axis)), lets)
                self.check_value_races(s.else_body, axis, pinned, lets)
            elif isinstance(s, (N.For, N.While, N.Parallel)):
                self.check_value_races(s.body, axis, pinned, lets)

    def check_leftovers(self, body: N.Body) -> None:
        names = {v.name for v in self.thread_vars.values()}
        for s in walk_stmts(body):
            if isinstance(s, N.Atomic) and s.dst.buffer.scope != "global":
                raise _shared_atomic_error(s, self.source, " inside T.Parallel")
            if isinstance(s, N.Hint) and s.kind == SYNC_HINT:
                raise self.error("T.sync_threads() cannot be inside T.Parallel", s)
            for c in _own_children(s):
                if any(isinstance(n, N.Var) and n.name in names for n in walk(c)):
                    raise self.error("internal error: a thread index was left in the per-thread rewrite", s)


def _scalar_buffers(body: N.Body) -> Set[str]:
    """Names of the (1,)-shaped T.alloc_local / T.alloc_var buffers whose every element access
    (load, store, element atomic) uses the constant index 0."""
    out = {
        s.buffer.name
        for s in walk_stmts(body)
        if isinstance(s, N.Alloc) and s.buffer.scope in PER_THREAD_SCOPES and tuple(s.buffer.shape) == (1,)
    }
    zero = (N.Const(0, "int32"),)
    for s in walk_stmts(body):
        accesses = [(n.buffer, n.indices) for c in _own_children(s) for n in walk(c) if isinstance(n, N.Load)]
        if isinstance(s, N.Store):
            accesses.append((s.buffer, s.indices))
        if isinstance(s, N.Atomic) and isinstance(s.value, N.Expr):
            accesses.append((s.dst.buffer, s.dst.starts))
        out -= {b.name for b, idx in accesses if idx != zero}
    return out


def _pins(cond: N.Expr, axis: Set[str]) -> FrozenSet[str]:
    """The thread axes that a condition's `t == e` conjuncts (e free of thread axes) fix."""
    if isinstance(cond, N.BinOp) and cond.op == "and":
        return _pins(cond.a, axis) | _pins(cond.b, axis)
    if isinstance(cond, N.BinOp) and cond.op == "==":
        for v, other in ((cond.a, cond.b), (cond.b, cond.a)):
            if isinstance(v, N.Var) and v.name in axis and not (_var_names(other) & axis):
                return frozenset((v.name,))
    return frozenset()


class _Translate(Transformer):
    """Statements of per-thread code, inside the loops over the thread axes: thread indices become
    the loops' variables (`env`), per-thread buffers gain the thread indices in front, element
    atomics into block or per-thread buffers become read-modify-writes, and allocations are
    hoisted (`allocs`). Anything that cannot run per element is an error at its line."""

    def __init__(self, simt: _Simt, env: Dict[str, N.Expr]):
        self.simt = simt
        self.env = env
        self.allocs: List[N.Stmt] = []

    def prefix(self) -> Tuple[N.Expr, ...]:
        return tuple(self.env[self.simt.thread_vars[d].name] for d in self.simt.axes)

    def indices(self, buf: N.Buffer, indices: Tuple[N.Expr, ...]) -> Tuple[N.Expr, ...]:
        """A per-thread buffer's element: the thread loops' variables after its own indices (alone
        for a scalar)."""
        return (() if buf.name in self.simt.scalars else indices) + self.prefix()

    def visit_Var(self, v: N.Var):  # noqa: N802
        if v.name in self.env:
            return self.env[v.name]
        if v.name in self.simt.lets:
            return self.visit(self.simt.lets[v.name])
        return v

    def visit_Load(self, e: N.Load):  # noqa: N802
        if self.simt.is_per_thread(e.buffer) and e.buffer != self.simt.expanded(e.buffer):
            return N.Load(self.simt.expanded(e.buffer), self.indices(e.buffer, e.indices), e.dtype, e.span)
        return e

    def visit_Store(self, s: N.Store):  # noqa: N802
        if self.simt.is_per_thread(s.buffer):
            return N.Store(self.simt.expanded(s.buffer), self.indices(s.buffer, s.indices), s.value, s.span)
        return s

    def visit_Atomic(self, s: N.Atomic):  # noqa: N802
        if isinstance(s.value, N.Region):
            raise self.simt.error(f"a tile T.atomic_{s.kind} cannot be in per-thread code", s)
        dst = s.dst.buffer
        if dst.scope == "global" and not self.simt.is_per_thread(dst):
            return s
        buf = self.simt.expanded(dst)
        indices = self.indices(dst, s.dst.starts) if self.simt.is_per_thread(dst) else s.dst.starts
        old = N.Load(buf, indices, buf.dtype, s.span)
        op = {"add": "+", "max": "max", "min": "min"}[s.kind]
        store = N.Store(buf, indices, E.binary(op, old, E.cast_to(s.value, buf.dtype), s.span), s.span)
        self.simt.rmw_stores.add(id(store))
        return store

    def visit_Alloc(self, s: N.Alloc):  # noqa: N802
        self.allocs.append(N.Alloc(self.simt.expanded(s.buffer), s.span))
        return ()

    def visit_Hint(self, s: N.Hint):  # noqa: N802
        if s.kind == SYNC_HINT:
            raise self.simt.error(
                "T.sync_threads() inside per-thread code that only some threads run (a thread-dependent "
                "`if`, or a loop whose trip count depends on the thread) is not supported: move the "
                "barrier to where every thread reaches it",
                s,
            )
        return ()

    def visit_Parallel(self, s: N.Parallel):  # noqa: N802
        raise self.simt.error(
            "a T.Parallel loop inside a thread-dependent `if`, `for` or `while` is not supported: T.Parallel is "
            "collective over the block, and only some threads reach it",
            s,
        )

    def generic(self, node):
        if type(node) in TILE_OP_NAMES:
            raise self.simt.error(
                f"{TILE_OP_NAMES[type(node)]} inside a thread-dependent `if`, `for` or `while` is not supported: "
                "a tile operation is collective over the block (it needs every thread, and a barrier), "
                "and only some threads reach it here",
                node,
            )
        return super().generic(node)
