"""Tile IR -> TVM TIR for SIMT GPUs: the portable lowering and the rule dispatch.

`lower_kernel(func, target, rules, intrinsics)` builds a `tvm.tirx.PrimFunc` with
TVM's IR builder: blocks and threads as `launch_thread`, shared tiles (one pool of
typed views, or one allocation each, as the `TargetDescription` says), fragments
in registers with the layouts chosen by `simt_plan`, barriers where tile
operations hand data between threads, predicated partial-tile copies, vector
copies and shuffle reductions.

Every tile op (`SIMT_OPS`: Gemm, Copy, Fill, Reduce, Cumsum, Atomic, Print, the
pipelined loop, the kernel's grid binding) is lowered by trying the backend's
rules for it in order (`tilecore.plugin.rules.RuleTable`) and then the portable
method `emit_<op>` of this class. Device instructions the portable code needs
(shuffles, barriers, vector and async copies, atomics) come from the intrinsic
table (`simt_intrinsics`), which the plugins fill through `tilecore_intrinsics`.
Nothing here names a vendor's instruction.

Expressions are lowered by `tilecore.lowering.tir_expr.ExprLowerer` (shared with
the CPU backend) with buffer views that map tiles onto threads.

Imports TVM: use it from backend code only.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from math import prod
from typing import Dict, List, Optional, Tuple

import tvm
from tvm import tirx as tx
from tvm.script.ir_builder import IRBuilder
from tvm.tirx.script.builder import ir as B

from ..diagnostics import TileCompileError, UnsupportedFeatureError
from ..ir import nodes as N
from ..ir.types import itemsize, is_float
from ..ir.visitor import walk, walk_stmts
from ..plugin.rules import SIMT_OPS, RuleTable
from .intrinsics import IntrinsicTable, default_table
from .simt_copy import contiguous_run, vector_width
from .simt_intrinsics import DEVICE_INSTRUCTIONS, portable_device_table
from .simt_layout import MmaLayout, RowLayout, StridedLayout, StridedRowLayout
from .simt_plan import KernelPlan, choose_anchor, plan_for_target
from .target import TargetDescription
from .tir_expr import ExprLowerer, cast_to, nan_max, nan_min, tir_const

# Lanes one shuffle reduction spans; a wider warp (a 64-lane wave) reduces as groups of 32 (taking
# the target's warp_size here would change ROCm code that no AMD GPU here can check).
REDUCE_LANES = 32
MMA_WARP = 32  # lanes of the warp that owns an m16n8 `MmaLayout` tile (the layout's definition)


@dataclass
class LoweredKernel:
    """A lowered kernel: the TIR PrimFunc and what the launcher and artifact need."""

    prim_func: object
    name: str
    grid: Tuple[N.Expr, ...]
    threads: int
    dyn_smem_bytes: int
    plan: KernelPlan
    notes: List[str] = field(default_factory=list)
    device_lib: str = ""  # the helper source every helper call carries (TVM emits it per call site)
    rules: Dict[str, List[str]] = field(default_factory=dict)  # op -> rules tried, in order


def build_intrinsics(hooked=None) -> IntrinsicTable:
    """The toolkit's table: portable math and device instructions, then the plugins' entries."""
    table = default_table()
    table.update(portable_device_table())
    table.update(hooked or {})
    return table


class _Ctx:
    """The current thread-iteration of a Parallel loop: anchor layout and its iteration."""

    def __init__(self, layout=None, it=None, local=None):
        self.layout, self.it, self.local = layout, it, local


class SimtLowering:
    """Lower one Tile IR PrimFunc (one T.Kernel) to a tvm.tirx.PrimFunc.

    What rules may use: `target`, `plan`, `threads`, `thread` (threadIdx.x), `views`
    (buffer name -> TIR buffer), `source`, `options`, and the methods `lower`, `access`,
    `address`, `store`, `stage_base_addr`, `region_index`, `in_bounds`, `iterate_layout`,
    `iterate_linear`, `emit_body`, `sync`, `instruction`, `err` and `claim`.
    """

    def __init__(self, func: N.PrimFunc, target: TargetDescription, rules: Optional[RuleTable] = None,
                 intrinsics=None, options: Optional[dict] = None):
        self.func = func
        self.target = target
        self.rules = rules if rules is not None else RuleTable()
        self.options = dict(options or {})
        self.source = func.source
        self.kernel = func.kernel
        self.threads = prod(self.kernel.threads) if self.kernel.threads else 128
        if self.threads > 1024:
            raise TileCompileError(f"threads={self.threads} exceeds 1024 threads per block",
                                   self.kernel.span, self.source)
        self.plan = plan_for_target(func, self.threads, target, self.rules.all_rules())
        # one helper source per module (TVM emits each distinct source block once)
        self.device_lib = target.device_library + "".join(self.plan.device_sources)
        table = intrinsics if isinstance(intrinsics, IntrinsicTable) else build_intrinsics(intrinsics)
        self.intrinsics = table.bound(self, always=DEVICE_INSTRUCTIONS)
        self.ex = ExprLowerer(intrinsics=self.intrinsics, backend=target.name, source=self.source)
        self.views: Dict[str, object] = {}      # name -> tirx Buffer (global / smem view / local array)
        self.stage: Dict[str, object] = {}      # smem name -> current stage index expr
        self.ctx = _Ctx()
        self.pending_r: set = set()
        self.pending_w: set = set()
        self.lib_used = False
        self.smem_bytes = 0
        self.scratch_count = 0

    # ------------------------------------------------------------------ helpers
    @property
    def thread(self):
        """threadIdx.x of the block (a TIR variable)."""
        return self.t

    def err(self, msg, node):
        """A TileCompileError at `node`'s line of the user's source."""
        return TileCompileError(msg, getattr(node, "span", None), self.source)

    def unsupported(self, feature: str, node=None):
        """An UnsupportedFeatureError naming this backend, at `node`'s line."""
        return UnsupportedFeatureError(self.target.name, feature, getattr(node, "span", None), self.source)

    def claim(self, rule_name: str, stmt):
        """What rule `rule_name` recorded for `stmt` while planning, or None (not claimed)."""
        return self.plan.claims.get(rule_name, {}).get(id(stmt))

    def instruction(self, name: str, dtype=None, *args):
        """Apply device instruction (`name`, `dtype`) of the intrinsic table to `args`.

        Instructions that emit statements (barriers, copies, atomics) return None; the others
        return a PrimExpr. A missing entry is an UnsupportedFeatureError naming the instruction.
        """
        impl = self.intrinsics.get((name, dtype))
        if impl is None:
            what = f"{name} on {dtype}" if dtype else name
            raise self.unsupported(f"device instruction {what} (no entry in the intrinsic table)")
        return impl(list(args))

    def shuffle_xor(self, value, mask):
        """`value` of lane (lane ^ mask) within the warp."""
        from .intrinsics import dtype_of

        return self.instruction("shuffle_xor", dtype_of(value), value, mask)

    def sync(self):
        """A block-wide barrier (after the instructions a rule asked for before every barrier)."""
        for name in self.plan.before_barrier:
            self.instruction(name)
        self.instruction("barrier")
        self.pending_r.clear()
        self.pending_w.clear()

    def dispatch(self, op: str, stmt) -> bool:
        """Try the rules for `op` in order; True when one of them lowered `stmt`."""
        for rule in self.rules[op]:
            if rule(self, stmt) is not NotImplemented:
                return True
        return False

    def smem_sets(self, stmts) -> Tuple[set, set]:
        """Shared buffers read and written by statements (tile operands and elements)."""
        reads, writes = set(), set()
        sm = {n for n, s in self.plan.storage.items() if s == "smem"}

        def region_rw(r, is_w):
            if r.buffer.name in sm:
                (writes if is_w else reads).add(r.buffer.name)

        for s in walk_stmts(stmts):
            if isinstance(s, N.Copy):
                region_rw(s.src, False)
                region_rw(s.dst, True)
            elif isinstance(s, N.Fill):
                region_rw(s.dst, True)
            elif isinstance(s, N.Gemm):
                region_rw(s.a, False)
                region_rw(s.b, False)
                region_rw(s.c, True)
                region_rw(s.c, False)
            elif isinstance(s, (N.Reduce, N.Cumsum)):
                if s.src.name in sm:
                    reads.add(s.src.name)
                if s.dst.name in sm:
                    writes.add(s.dst.name)
                    reads.add(s.dst.name)
            elif isinstance(s, N.Atomic):
                if isinstance(s.value, N.Region):
                    region_rw(s.value, False)
            elif isinstance(s, N.Print) and isinstance(s.value, N.Buffer) and s.value.name in sm:
                reads.add(s.value.name)
            if isinstance(s, N.Store) and s.buffer.name in sm:
                writes.add(s.buffer.name)
            for e in _exprs_of(s):
                for n in walk(e):
                    if isinstance(n, N.Load) and n.buffer.name in sm:
                        reads.add(n.buffer.name)
        return reads, writes

    def touch(self, stmts):
        """Insert a barrier before `stmts` if they conflict with unsynchronized shared accesses."""
        r, w = self.smem_sets(stmts)
        # Inside a T.Parallel body no barrier: emit_Parallel synchronized the whole loop up front
        # (its iterations are independent), and a barrier here would sit in per-thread code (a
        # primary-replica guard, a partial-row guard) where it deadlocks the block.
        if not self.in_parallel and ((r | w) & self.pending_w or w & self.pending_r):
            self.sync()
        self.pending_r |= r
        self.pending_w |= w

    # ------------------------------------------------------------------ buffer access
    def smem_offset(self, name, indices):
        lay: SharedLayout = self.plan.layout[name]
        idx = list(indices)
        if lay.swizzle and len(idx) == 2:
            off = lay.offset2d(idx[0], idx[1], tx.floordiv, tx.floormod, tx.bitwise_xor)
        else:
            off = tir_const(0, "int32")
            stride = 1
            for d in reversed(range(len(idx))):
                off = off + idx[d] * stride
                stride *= lay.shape[d]
        st = self.stage.get(name)
        if st is not None:
            off = off + st * lay.numel
        return off

    def reg_index(self, name):
        lay = self.plan.layout[name]
        ctx = self.ctx
        if ctx.layout is None:
            raise AssertionError(f"register fragment {name} accessed outside its thread iteration")
        if lay == ctx.layout:
            return ctx.local
        if isinstance(lay, RowLayout) and isinstance(ctx.layout, MmaLayout):
            return ctx.layout.row_local(ctx.it)
        if isinstance(lay, StridedRowLayout) and isinstance(ctx.layout, StridedLayout):
            return tx.floordiv(ctx.it[0], lay.q) if lay.q > 1 else ctx.it[0]
        raise AssertionError(f"fragment {name}: incompatible layout in this loop")

    def rep_index(self, buf: N.Buffer, indices):
        off = tir_const(0, "int32")
        stride = 1
        shape = buf.static_shape() or (1,)
        for d in reversed(range(len(indices))):
            off = off + indices[d] * stride
            stride *= shape[d]
        return off

    def access(self, buf: N.Buffer, indices):
        """(tirx Buffer, [flat or nd index]) for element `indices` (already lowered) of `buf`."""
        st = self.plan.storage[buf.name]
        view = self.views[buf.name]
        if st == "global":
            return view, list(indices)
        if st == "smem":
            return view, [self.smem_offset(buf.name, indices)]
        if st == "reg":
            return view, [self.reg_index(buf.name)]
        if st == "owned":
            owner = self.plan.owners[buf.name]
            raise AssertionError(f"buffer {buf.name} is held by the rule {getattr(owner, 'name', owner)!r}, "
                                 "which must lower every statement that touches it")
        return view, [self.rep_index(buf, indices)]

    def make_view_fn(self, buf: N.Buffer):
        """The expression lowerer's view of `buf`: element loads through `access` (bool tiles
        stored as another dtype read back as bool)."""
        def load(indices):
            view, idx = self.access(buf, indices)
            v = tx.BufferLoad(view, idx)
            return cast_to(v, "bool") if buf.dtype == "bool" and view.dtype != "bool" else v
        return load

    def lower(self, e: N.Expr):
        """A Tile IR expression as a PrimExpr in the current thread iteration."""
        return self.ex.lower(e)

    def store(self, buf: N.Buffer, indices, value):
        """Store `value` (converted to the buffer's dtype, then its storage dtype) at `indices`."""
        view, idx = self.access(buf, indices)
        v = cast_to(value, buf.dtype)
        B.buffer_store(view, cast_to(v, str(view.dtype)) if str(view.dtype) != buf.dtype else v, idx)

    def addr(self, buf: N.Buffer, indices):
        """The address of element `indices` of `buf` (a PrimExpr)."""
        view, idx = self.access(buf, indices)
        return tx.address_of(tx.BufferLoad(view, idx))

    def element(self, buf: N.Buffer, indices):
        """The BufferLoad of element `indices` of `buf` in its storage (what device copies take)."""
        view, idx = self.access(buf, indices)
        return tx.BufferLoad(view, idx)

    # ------------------------------------------------------------------ entry
    def build(self) -> LoweredKernel:
        func = self.func
        with IRBuilder() as ib:
            with B.prim_func():
                B.func_name(func.name)
                B.func_attr({"global_symbol": func.name, "tir.noalias": True})
                dyn = {}
                for v in func.dyn_vars:
                    var = B.arg(v.name, tx.Var(v.name, "int32"))
                    dyn[v.name] = var
                    self.ex.bind(v.name, var)
                for b in func.params:
                    h = B.arg(b.name, tx.Var(b.name, "handle"))
                    shape = [dyn[s.name] if isinstance(s, N.Var) else s for s in b.shape]
                    buf = B.match_buffer(h, shape, _tvm_dtype(b.dtype))
                    IRBuilder.name(b.name, buf)
                    self.views[b.name] = buf
                    self.ex.bind_buffer(b.name, self.make_view_fn(b))
                self.emit_kernel()
        prim = ib.get()
        lk = LoweredKernel(prim, func.name, tuple(self.kernel.grid), self.threads, self.smem_bytes,
                           self.plan, list(self.plan.notes), self.device_lib if self.lib_used else "",
                           {op: names + ["portable"] for op, names in self.rules.describe().items()})
        return lk

    def emit_kernel(self):
        """The kernel's grid and thread binding: a "Kernel" rule, else the portable one."""
        if not self.dispatch("Kernel", self.kernel):
            self.emit_Kernel(self.kernel)

    def emit_Kernel(self, k: N.Kernel):
        """Blocks as blockIdx.x/y/z, one thread axis; then allocations and the body."""
        axes = ["blockIdx.x", "blockIdx.y", "blockIdx.z"]
        if len(k.grid) > 3:
            raise self.err("T.Kernel supports at most 3 grid dimensions on GPUs", k)
        frames = []
        for g, v, ax in zip(k.grid, k.block_vars, axes):
            fr = B.launch_thread(ax, self.lower(g))
            var = fr.__enter__()
            frames.append(fr)
            self.ex.bind(v.name, var)
        fr = B.launch_thread("threadIdx.x", self.threads)
        self.t = fr.__enter__()
        frames.append(fr)
        self.rasterize(k)
        self.alloc_all()
        self.emit_body(k.body)
        for fr in reversed(frames):
            fr.__exit__(None, None, None)

    def rasterize(self, k: N.Kernel):
        """T.use_swizzle: visit 2-D grid blocks in panels of `panel_size` block rows, so that
        blocks running at the same time share operand tiles in L2 (results are unchanged)."""
        hints = [s for s in k.body if isinstance(s, N.Hint) and s.kind == "use_swizzle"]
        if not hints or len(k.grid) < 2:
            return
        params = dict(hints[0].params)
        if not params.get("enable", True):
            return
        panel = int(params.get("panel_size", 8))
        gx, gy = self.lower(k.grid[0]), self.lower(k.grid[1])
        bx, by = self.ex.variables[k.block_vars[0].name], self.ex.variables[k.block_vars[1].name]
        if params.get("order", "row") == "col":
            gx, gy, bx, by = gy, gx, by, bx
        linear = B.Bind(by * gx + bx)
        group = B.Bind(tx.floordiv(linear, panel * gx))
        within = B.Bind(tx.floormod(linear, panel * gx))
        rows = B.Bind(tx.Min(gy - group * panel, panel))
        new_by = B.Bind(group * panel + tx.floormod(within, rows))
        new_bx = B.Bind(tx.floordiv(within, rows))
        names = [k.block_vars[0].name, k.block_vars[1].name]
        if params.get("order", "row") == "col":
            new_bx, new_by = new_by, new_bx
        self.ex.bind(names[0], new_bx)
        self.ex.bind(names[1], new_by)

    def alloc_all(self):
        """Declare register and replicated arrays, then the shared tiles (see `alloc_shared`)."""
        smem = []
        for name, st in self.plan.storage.items():
            b = self.plan.buffers[name]
            if st == "smem":
                smem.append((name, b, self.plan.layout[name]))
            elif st in ("reg", "rep"):
                size = self.plan.layout[name].local_size if st == "reg" else max(1, prod(b.static_shape() or (1,)))
                arr = B.alloc_buffer((size,), self.storage_dtype(b.dtype), scope="local")
                IRBuilder.name(name, arr)
                self.views[name] = arr
                self.ex.bind_buffer(name, self.make_view_fn(b))
            elif st == "owned":
                self.plan.owners[name].allocate(self, b)
        self.alloc_shared(smem)

    def storage_dtype(self, dtype: str) -> str:
        """The dtype that holds a `dtype` tile on this target (bool may live in int8)."""
        return self.target.bool_storage if dtype == "bool" else dtype

    def alloc_shared(self, smem):
        """Shared tiles: typed views of one byte pool (`target.shared_pool`), or one static
        allocation each; plus the cross-warp reduction scratch when the kernel reduces."""
        pool = self.target.shared_pool
        align = (self.plan.shared_alignment or self.target.shared_alignment) if pool else 1
        total, offsets = 0, {}
        for name, b, lay in smem:
            total = _align(total, align)
            offsets[name] = total
            total += lay.numel * lay.stages * lay.elem_bytes
        needs_scratch = any(isinstance(s, N.Reduce) for s in walk_stmts(self.kernel.body))
        if needs_scratch:
            total = _align(total, 128) if pool else total
            self.scratch_off = total
            total += self._scratch_size()
        if total > self.target.max_shared_memory:
            span = smem[0][1].span if smem else self.kernel.span
            raise TileCompileError(
                f"the kernel needs {total} bytes of shared memory; {self.target.name}:{self.target.arch} "
                f"allows {self.target.max_shared_memory} per block", span, self.source)
        self.smem_bytes = total
        if not total:
            return
        scope = self.target.shared_scope
        data = None
        if pool:
            self.pool = B.alloc_buffer((total,), "uint8", scope=scope)
            IRBuilder.name("smem_pool", self.pool)
            data = self.pool.data
        for name, b, lay in smem:
            dtype = self.storage_dtype(b.dtype)
            if pool:
                eb = lay.elem_bytes
                view = B.decl_buffer((lay.numel * lay.stages,), dtype, data=data,
                                     elem_offset=offsets[name] // eb, scope=scope)
            else:
                view = B.alloc_buffer((lay.numel * lay.stages,), dtype, scope=scope)
            IRBuilder.name(name, view)
            self.views[name] = view
            self.ex.bind_buffer(name, self.make_view_fn(b))
        if needs_scratch:
            n = self._scratch_size() // 4
            self.scratch = (B.decl_buffer((n,), "float32", data=data, elem_offset=self.scratch_off // 4, scope=scope)
                            if pool else B.alloc_buffer((n,), "float32", scope=scope))
            IRBuilder.name("reduce_scratch", self.scratch)

    def _scratch_size(self):
        """Bytes of the cross-warp reduction scratch: (warps of REDUCE_LANES, rows) float32 partials."""
        rows = 1
        for s in walk_stmts(self.kernel.body):
            if isinstance(s, N.Reduce):
                rows = max(rows, prod(s.dst.shape))
        return 4 * max(1, self.threads // REDUCE_LANES) * rows

    # ------------------------------------------------------------------ statements
    def emit_body(self, stmts):
        for s in stmts:
            self.emit_stmt(s)

    def emit_stmt(self, s):
        """Lower one statement: a tile op through its rules, then the portable `emit_<op>`."""
        op = type(s).__name__
        if isinstance(s, N.For) and s.kind == "pipelined" and not self.in_parallel:
            if self.dispatch("Pipelined", s):
                return
        elif op in SIMT_OPS:
            self.before_tile_op(s)
            if self.dispatch(op, s):
                return
        m = getattr(self, "emit_" + op, None)
        if m is None:
            raise self.unsupported(f"statement {op}", s)
        m(s)

    def before_tile_op(self, s):
        """The barrier a tile op needs before it touches shared memory (placed before any rule
        runs, so rules see the statement's operands ready). Inside a T.Parallel body copies and
        atomics are per-thread and need none."""
        if not (self.in_parallel and isinstance(s, (N.Copy, N.Atomic))):
            self.touch((s,))

    def emit_Alloc(self, s):
        pass

    def emit_Hint(self, s):
        pass  # use_swizzle is handled by the launcher's grid mapping; layouts by the plan

    def emit_Let(self, s: N.Let):
        self.touch((s,))
        var = B.Bind(self.lower(s.value))
        self.ex.bind(s.var.name, var)

    def emit_Store(self, s: N.Store):
        st = self.plan.storage[s.buffer.name]
        self.touch((s,))
        if st in ("global", "smem") and self.ctx.layout is None and not self.in_parallel:
            with B.If(self.t == 0):
                with B.Then():
                    self.store(s.buffer, [self.lower(i) for i in s.indices], self.lower(s.value))
        else:
            self.store(s.buffer, [self.lower(i) for i in s.indices], self.lower(s.value))

    in_parallel = False

    def emit_If(self, s: N.If):
        if not self.in_parallel:
            self.touch_expr_only(s.cond)
        with B.If(self.ex.lower_as(s.cond, "bool")):
            with B.Then():
                saved = (set(self.pending_r), set(self.pending_w))
                self.emit_body(s.then_body)
                after_then = (set(self.pending_r), set(self.pending_w))
            if s.else_body:
                self.pending_r, self.pending_w = saved
                with B.Else():
                    self.emit_body(s.else_body)
                self.pending_r |= after_then[0]
                self.pending_w |= after_then[1]

    def touch_expr_only(self, e):
        class _S:
            pass
        self.touch((N.Let(N.Var("_"), e),))

    def emit_For(self, s: N.For):
        """A sequential loop (also a pipelined loop that no "Pipelined" rule took)."""
        begin = self.lower(s.begin)
        extent = self.lower(s.extent)
        if not self.in_parallel:
            r, w = self.smem_sets(s.body)
            self.touch(s.body)
            self.pending_r |= r | w
            self.pending_w |= w
        kind = B.unroll if (s.kind == "unroll" or self.in_parallel and isinstance(s.extent, N.Const)
                            and s.extent.value <= 8) else B.serial
        with kind(begin, begin + extent) as v:
            self.ex.bind(s.var.name, v)
            self.emit_body(s.body)

    # ---------------------------------------------------------------- Parallel
    def emit_Parallel(self, p: N.Parallel):
        self.touch((p,))
        live = {n for n, st in self.plan.storage.items() if st == "reg"}
        anchor = choose_anchor(p, self.plan.layout, live)
        if anchor is not None:
            buf, idx = anchor
            lay = self.plan.layout[buf.name]

            def body(index_exprs):
                for v, e in zip(p.vars, index_exprs):
                    self.ex.bind(v.name, e)
                self.emit_parallel_body(p.body, lay)
            if len(idx) < len(p.vars):
                raise self.err("internal: anchor rank", p)
            self.iterate_layout(lay, body)
        else:
            def body(index_exprs):
                for v, e in zip(p.vars, index_exprs):
                    self.ex.bind(v.name, e)
                self.emit_parallel_body(p.body, None)
            self.iterate_linear(tuple(p.extents), 1, body)

    def emit_parallel_body(self, stmts, layout):
        was = self.in_parallel
        self.in_parallel = True
        try:
            for st in stmts:
                if isinstance(st, N.Store) or isinstance(st, N.Atomic):
                    needs_primary = (isinstance(layout, (RowLayout, StridedRowLayout))
                                     and not (isinstance(st, N.Store) and self.plan.storage[st.buffer.name] == "reg"))
                    if needs_primary:
                        if isinstance(layout, RowLayout):
                            q, w = layout.primary(self.t)
                            cond = tx.And(q, w)
                        else:
                            cond = (self.t == 0) if layout.G >= layout.threads else (tx.floormod(self.t, layout.G) == 0)
                        with B.If(cond):
                            with B.Then():
                                self.emit_stmt(st)
                        continue
                self.emit_stmt(st)
        finally:
            self.in_parallel = was

    def iterate_layout(self, lay, body, vectorize=False):
        """Run `body(index_exprs)` for every element of a register layout this thread owns."""
        saved = self.ctx
        if isinstance(lay, (MmaLayout, RowLayout)):
            ext = lay.iter_space()
            frames = [B.unroll(0, e) for e in ext]
            its = [f.__enter__() for f in frames]
            idx, local = lay.coords(self.t, its)
            self.ctx = _Ctx(lay, its, local)
            body(list(idx))
            for f in reversed(frames):
                f.__exit__(None, None, None)
        elif isinstance(lay, StridedRowLayout):
            with B.unroll(0, lay.local_size) as rl:
                row = lay.row_of(self.t, rl)
                self.ctx = _Ctx(lay, (rl,), rl)
                idx = [row] if lay.ndim == 1 else [row, tir_const(0, "int32")]
                if lay.G < lay.threads and (lay.rows * lay.G) % lay.threads:
                    with B.If(row < lay.rows):
                        with B.Then():
                            body(idx)
                else:
                    body(idx)
        else:
            assert isinstance(lay, StridedLayout)

            def inner(idx, local, k=None):
                self.ctx = _Ctx(lay, (k,), local)
                body(idx)
            self._strided(lay.shape, lay.vec, inner, exact=lay.exact, unroll=True, pass_k=True,
                          vectorize=vectorize)
        self.ctx = saved

    def _strided(self, shape, vec, body, exact, unroll, per_chunk=False, pass_k=False, vectorize=False):
        P = self.threads
        chunks = prod(shape) // vec
        per = -(-chunks // P)
        kf = (B.unroll if unroll or per <= 8 else B.serial)(0, per)
        k = kf.__enter__()
        c = k * P + self.t
        uf = (B.vectorized if vectorize else B.unroll)(0, vec) if vec > 1 and not per_chunk else None
        u = uf.__enter__() if uf else 0
        e = c * vec + u
        idx = unflatten(e, shape)
        local = k * vec + u
        call = (lambda: body(idx, local, k)) if pass_k else (lambda: body(idx, local))
        if not exact and chunks % P:
            with B.If(c < chunks):
                with B.Then():
                    call()
        else:
            call()
        if uf:
            uf.__exit__(None, None, None)
        kf.__exit__(None, None, None)

    def iterate_linear(self, shape, vec, body):
        """Spread an index space over the threads (no register fragment involved).

        With vec > 1, `body` runs once per chunk of `vec` contiguous elements (a 16-byte access).
        """
        saved = self.ctx
        self.ctx = _Ctx()

        def inner(idx, local):
            body(idx)
        P = self.threads
        self._strided(shape, vec, inner, exact=(prod(shape) // vec) % P == 0,
                      unroll=(prod(shape) // vec) <= 16 * P, per_chunk=vec > 1)
        self.ctx = saved

    # ---------------------------------------------------------------- tile ops
    def region_index(self, r: N.Region, it_idx):
        """Full buffer indices of region `r` for squeezed iteration indices `it_idx`."""
        out, k = [], 0
        for st, ext in zip(r.starts, r.extents):
            base = self.lower(st)
            if ext != 1:
                out.append(base + it_idx[k])
                k += 1
            else:
                out.append(base)
        return out

    def in_bounds(self, r: N.Region, full_idx, vec=1):
        b = r.buffer
        conds = []
        for d, (i, s) in enumerate(zip(full_idx, b.shape)):
            lim = self.lower(s) if isinstance(s, N.Var) else tir_const(s, "int32")
            conds.append(tx.And(i >= 0, i < lim))
        c = conds[0]
        for x in conds[1:]:
            c = tx.And(c, x)
        return c

    def emit_Copy(self, c: N.Copy, async_copy=False):
        """Portable tile copy: per-element or vector accesses spread over the threads, predicated
        where the bounds pass could not prove the regions inside their tensors. With `async_copy`
        (a pipeline rule's copies) every vector is an "async_copy" device instruction."""
        src, dst = c.src, c.dst
        ss, ds = self.plan.storage[src.buffer.name], self.plan.storage[dst.buffer.name]
        shape = dst.squeezed_shape() or (1,)
        pred_src = c.predicated and ss == "global"
        pred_dst = c.predicated and ds == "global"

        def element(it_idx):
            si = self.region_index(src, it_idx)
            di = self.region_index(dst, it_idx)
            view, idx = self.access(src.buffer, si)
            val = tx.BufferLoad(view, idx)
            if pred_src:
                val = tx.if_then_else(self.in_bounds(src, si), val, tir_const(0, src.buffer.dtype))
            if pred_dst:
                with B.If(self.in_bounds(dst, di)):
                    with B.Then():
                        self.store(dst.buffer, di, val)
            else:
                self.store(dst.buffer, di, val)

        if ds == "rep":
            # a per-thread copy: every thread fills all of it (kept identical in every thread)
            with B.serial(0, prod(shape)) as e:
                element(unflatten(e, tuple(shape)))
            return
        if ds == "reg" or ss == "reg":
            anchor = dst.buffer if ds == "reg" else src.buffer
            other = src if ds == "reg" else dst
            lay = self.plan.layout[anchor.name]
            vec_ok = (isinstance(lay, StridedLayout) and lay.vec > 1 and not (pred_src or pred_dst)
                      and "bool" not in (src.buffer.dtype, dst.buffer.dtype)
                      and lay.vec * max(itemsize(src.buffer.dtype), itemsize(dst.buffer.dtype)) <= 32
                      and ss != ds and self._contiguous_run(other, lay.vec))
            self.iterate_layout(lay, lambda idx: element(_squeeze(idx, anchor.shape)), vectorize=vec_ok)
            return
        vec = self.vector_width(c)
        if vec > 1:
            def vector(it_idx):
                si = self.region_index(src, it_idx)
                di = self.region_index(dst, it_idx)
                s_el = self.element(src.buffer, si)
                d_el = self.element(dst.buffer, di)
                if async_copy:
                    if pred_src:
                        # out of bounds: zero-fill from a clamped, valid address
                        safe = self.element(src.buffer, self.clamp(src, si))
                        self.instruction("async_copy", None, d_el, safe, self.in_bounds(src, si), vec)
                    else:
                        self.instruction("async_copy", None, d_el, s_el, tx.const(True, "bool"), vec)
                    return
                if pred_src or pred_dst:
                    ok = tx.And(self.in_bounds(src, si), self.in_bounds(dst, di)) if pred_src and pred_dst else \
                        (self.in_bounds(src, si) if pred_src else self.in_bounds(dst, di))
                    with B.If(ok):
                        with B.Then():
                            self.instruction("vector_copy", None, d_el, s_el, vec)
                        if pred_src and not pred_dst:
                            with B.Else():
                                self.instruction("vector_copy", None, d_el, None, vec)
                else:
                    self.instruction("vector_copy", None, d_el, s_el, vec)
            self.iterate_linear(tuple(shape), vec, vector)
            return
        if async_copy:
            raise AssertionError("async copy requires 16-byte vectors")
        self.iterate_linear(tuple(shape), 1, element)

    def clamp(self, r: N.Region, full_idx):
        out = []
        for i, s in zip(full_idx, r.buffer.shape):
            lim = self.lower(s) if isinstance(s, N.Var) else tir_const(s, "int32")
            out.append(tx.Max(tx.Min(i, lim - 1), tir_const(0, "int32")))
        return out

    def _contiguous_run(self, r: N.Region, vec: int) -> bool:
        """Whether `vec` consecutive elements along the region's last dim are contiguous and aligned."""
        return contiguous_run(r, vec, self.plan)

    def vector_width(self, c: N.Copy) -> int:
        """Elements per vector access of copy `c` (see `simt_copy.vector_width`)."""
        return vector_width(c, self.plan, self.target)

    def emit_Fill(self, f: N.Fill):
        """Portable fill: every element of the region, spread over its owners."""
        r = f.dst
        shape = r.squeezed_shape() or (1,)

        def element(it_idx):
            di = self.region_index(r, it_idx)
            val = self.lower(f.value)
            if self.plan.storage[r.buffer.name] == "global":
                with B.If(self.in_bounds(r, di)):
                    with B.Then():
                        self.store(r.buffer, di, val)
            else:
                self.store(r.buffer, di, val)

        if self.plan.storage[r.buffer.name] == "reg":
            self.iterate_layout(self.plan.layout[r.buffer.name], lambda idx: element(_squeeze(idx, r.buffer.shape)))
        elif self.plan.storage[r.buffer.name] == "rep":
            with B.serial(0, prod(shape)) as e:
                element(unflatten(e, shape))
        else:
            self.iterate_linear(tuple(shape), 1, element)

    def emit_Gemm(self, g: N.Gemm):
        """Portable gemm (matrix units come from the backend's Gemm rules)."""
        return self.emit_simt_gemm(g)

    def stage_base_addr(self, buf):
        """Address of the first element of `buf`'s current pipeline stage."""
        view = self.views[buf.name]
        lay = self.plan.layout[buf.name]
        st = self.stage.get(buf.name)
        off = st * lay.numel if st is not None else tir_const(0, "int32")
        return tx.address_of(tx.BufferLoad(view, [off]))

    def emit_simt_gemm(self, g: N.Gemm):
        """Portable gemm: each owner of C[i, j] runs the dot product over K (shared operands)."""
        a, b, c = g.a, g.b, g.c
        M, Nn = c.squeezed_shape()
        K = a.squeezed_shape()[0] if g.transpose_a else a.squeezed_shape()[1]
        acc_dt = c.buffer.dtype
        wide = "float32" if acc_dt in ("float16", "bfloat16") else acc_dt

        def element(idx):
            i, j = idx[0], idx[1]
            ci = self.region_index(c, [i, j])
            tmp = B.alloc_buffer((1,), wide, scope="local")
            view, cidx = self.access(c.buffer, ci)
            init = tir_const(0, wide) if g.clear_accum else cast_to(tx.BufferLoad(view, cidx), wide)
            B.buffer_store(tmp, init, [0])
            with B.serial(0, K) as k:
                ai = self.region_index(a, [k, i] if g.transpose_a else [i, k])
                bi = self.region_index(b, [j, k] if g.transpose_b else [k, j])
                va, ia = self.access(a.buffer, ai)
                vb, ib = self.access(b.buffer, bi)
                prod_ = cast_to(tx.BufferLoad(va, ia), wide) * cast_to(tx.BufferLoad(vb, ib), wide)
                B.buffer_store(tmp, tmp[0] + prod_, [0])
            self.store(c.buffer, ci, tmp[0])

        if self.plan.storage[c.buffer.name] == "reg":
            self.iterate_layout(self.plan.layout[c.buffer.name], lambda idx: element(_squeeze(idx, c.buffer.shape)))
        elif self.plan.storage[c.buffer.name] == "rep":
            with B.serial(0, M * Nn) as e:
                element(unflatten(e, (M, Nn)))
        else:
            self.iterate_linear((M, Nn), 1, element)

    def _identity(self, kind, dtype):
        if kind in ("sum", "abssum", "absmax"):
            return tir_const(0, dtype)
        big = float("inf") if is_float(dtype) else None
        if big is None:
            info = {"int8": 127, "int16": 32767, "int32": 2**31 - 1, "int64": 2**63 - 1, "uint8": 255}[dtype]
            lo = {"int8": -128, "int16": -32768, "int32": -2**31, "int64": -2**63, "uint8": 0}[dtype]
            return tir_const(lo if kind == "max" else info, dtype)
        return tir_const(-big if kind == "max" else big, dtype)

    def _combine(self, kind, a, b):
        if kind in ("sum", "abssum"):
            return a + b
        if kind in ("max", "absmax"):
            return nan_max(a, b)  # NaN propagates (docs/semantics.md)
        return nan_min(a, b)

    def emit_Reduce(self, r: N.Reduce):
        """Portable reduction: thread-local rows of register layouts, shuffles within lane
        groups, shared memory across warps; else one owner per output element."""
        src_l = self.plan.layout.get(r.src.name)
        dst_l = self.plan.layout.get(r.dst.name)
        wide = "float32" if r.dst.dtype in ("float16", "bfloat16") else r.dst.dtype
        if isinstance(src_l, MmaLayout) and isinstance(dst_l, RowLayout) and r.dim == 1 \
                and self.plan.storage[r.src.name] == "reg":
            return self.emit_mma_row_reduce(r, src_l, dst_l, wide)
        if isinstance(src_l, StridedLayout) and isinstance(dst_l, StridedRowLayout) and r.dim == 1 \
                and self.plan.storage[r.src.name] == "reg" and self.plan.storage[r.dst.name] == "reg":
            return self.emit_strided_row_reduce(r, src_l, dst_l, wide)
        src = r.src
        keep = len(r.dst.shape) == len(src.shape)
        dshape = tuple(r.dst.shape)

        def element(idx):
            tmp = B.alloc_buffer((1,), wide, scope="local")
            B.buffer_store(tmp, self._identity(r.kind, wide), [0])
            with B.serial(0, src.shape[r.dim]) as k:
                si = list(idx)
                if keep:
                    si[r.dim] = k
                else:
                    si.insert(r.dim, k)
                view, sidx = self.access(src, si)
                v = cast_to(tx.BufferLoad(view, sidx), wide)
                if r.kind in ("abssum", "absmax"):
                    v = tx.abs(v) if is_float(wide) else tx.Select(v < tir_const(0, wide), tir_const(0, wide) - v, v)
                B.buffer_store(tmp, self._combine(r.kind, tmp[0], v), [0])
            res = tmp[0]
            if not r.clear:
                view, didx = self.access(r.dst, idx)
                res = self._combine(r.kind, cast_to(tx.BufferLoad(view, didx), wide), res)
            self.store(r.dst, idx, res)

        st = self.plan.storage[r.dst.name]
        rows = prod(dshape)
        group = 1
        while group * 2 <= min(REDUCE_LANES, self.threads // max(rows, 1)) and group * 2 <= src.shape[r.dim]:
            group *= 2
        if st == "smem" and self.plan.storage[src.name] == "smem" and group > 1 and self.threads % REDUCE_LANES == 0:
            return self.emit_group_reduce(r, dshape, keep, wide, group)
        if st == "reg":
            self.iterate_layout(dst_l, lambda idx: element(list(idx)))
        elif st == "rep":
            with B.serial(0, prod(dshape)) as e:
                element(unflatten(e, dshape))
        else:
            self.iterate_linear(dshape, 1, element)

    def emit_group_reduce(self, r, dshape, keep, wide, group):
        """Shared-memory source: `group` adjacent lanes reduce one output, then butterfly shuffles."""
        src = r.src
        rows = prod(dshape)
        per_pass = self.threads // group
        L = src.shape[r.dim]
        part = B.alloc_buffer((1,), wide, scope="local")
        lane = tx.floormod(self.t, group)
        with B.serial(0, -(-rows // per_pass)) as rr:
            row = rr * per_pass + tx.floordiv(self.t, group)
            idx = unflatten(tx.Min(row, rows - 1), dshape)
            B.buffer_store(part, self._identity(r.kind, wide), [0])
            with B.If(row < rows):
                with B.Then():
                    with B.serial(0, -(-L // group)) as kk:
                        k = kk * group + lane
                        with B.If(k < L):
                            with B.Then():
                                si = list(idx)
                                if keep:
                                    si[r.dim] = k
                                else:
                                    si.insert(r.dim, k)
                                view, sidx = self.access(src, si)
                                v = cast_to(tx.BufferLoad(view, sidx), wide)
                                if r.kind in ("abssum", "absmax"):
                                    v = tx.abs(v)
                                B.buffer_store(part, self._combine(r.kind, part[0], v), [0])
            m = group // 2
            while m >= 1:
                sh = B.Bind(self.shuffle_xor(part[0], tir_const(m, "int32")))  # once: _combine repeats operands
                B.buffer_store(part, self._combine(r.kind, part[0], sh), [0])
                m //= 2
            with B.If(tx.And(row < rows, lane == 0)):
                with B.Then():
                    res = part[0]
                    if not r.clear:
                        view, didx = self.access(r.dst, idx)
                        res = self._combine(r.kind, cast_to(tx.BufferLoad(view, didx), wide), res)
                    self.store(r.dst, idx, res)

    def emit_strided_row_reduce(self, r, src_l: StridedLayout, dst_l: StridedRowLayout, wide):
        """Row reduction of a strided register tile: in-thread, shuffles in the row's thread group,
        then shared memory across the group's warps."""
        src_v, dst_v = self.views[r.src.name], self.views[r.dst.name]
        L, v, q, P = dst_l.local_size, src_l.vec, dst_l.q, self.threads
        part = B.alloc_buffer((L,), wide, scope="local")
        # pairwise partials of one chunk: its v elements combine as a balanced tree, a dependency
        # chain of log2(v) + per_thread operations instead of v * per_thread
        tree = B.alloc_buffer((max(v // 2, 1),), wide, scope="local")
        with B.unroll(0, L) as i:
            B.buffer_store(part, self._identity(r.kind, wide), [i])
        with B.unroll(0, src_l.per_thread) as k:
            def elem(u):
                x = cast_to(src_v[k * v + u], wide)
                return tx.abs(x) if r.kind in ("abssum", "absmax") else x

            def acc():
                n = v
                for i in range(n // 2):
                    B.buffer_store(tree, self._combine(r.kind, elem(2 * i), elem(2 * i + 1)), [i])
                if n % 2 and n > 1:
                    B.buffer_store(tree, self._combine(r.kind, tree[n // 2 - 1], elem(n - 1)), [n // 2 - 1])
                n //= 2
                while n > 1:
                    for i in range(n // 2):
                        B.buffer_store(tree, self._combine(r.kind, tree[2 * i], tree[2 * i + 1]), [i])
                    if n % 2:
                        B.buffer_store(tree, self._combine(r.kind, tree[n // 2 - 1], tree[n - 1]), [n // 2 - 1])
                    n //= 2
                chunk = tree[0] if v > 1 else elem(0)
                slot = tx.floordiv(k, q) if q > 1 else k
                B.buffer_store(part, self._combine(r.kind, part[slot], chunk), [slot])
            if not src_l.exact:
                with B.If(k * P + self.t < src_l.chunks):
                    with B.Then():
                        acc()
            else:
                acc()
        g = dst_l.group
        with B.unroll(0, L) as i:
            m = min(g, REDUCE_LANES) // 2
            while m >= 1:
                sh = B.Bind(self.shuffle_xor(part[i], tir_const(m, "int32")))  # once: _combine repeats operands
                B.buffer_store(part, self._combine(r.kind, part[i], sh), [i])
                m //= 2
        if g > REDUCE_LANES:
            if wide != "float32":
                raise self.unsupported(f"cross-warp reduction in {wide}", r)
            gw = g // REDUCE_LANES
            warp = tx.floordiv(self.t, REDUCE_LANES)
            self.sync()
            with B.If(tx.floormod(self.t, REDUCE_LANES) == 0):
                with B.Then():
                    with B.unroll(0, L) as i:
                        B.buffer_store(self.scratch, part[i], [warp * L + i])
            self.sync()
            first = tx.floordiv(warp, gw) * gw
            with B.unroll(0, L) as i:
                B.buffer_store(part, self.scratch[first * L + i], [i])
                with B.unroll(1, gw) as w:
                    B.buffer_store(part, self._combine(r.kind, part[i], self.scratch[(first + w) * L + i]), [i])
            self.sync()
        with B.unroll(0, L) as i:
            res = part[i]
            if not r.clear:
                res = self._combine(r.kind, cast_to(dst_v[i], wide), res)
            B.buffer_store(dst_v, cast_to(res, r.dst.dtype), [i])

    def emit_mma_row_reduce(self, r, src_l: MmaLayout, dst_l: RowLayout, wide):
        """Row reduction of an MMA-layout tile: in-thread, then the 4-lane quad, then across warps."""
        src_v, dst_v = self.views[r.src.name], self.views[r.dst.name]
        part = B.alloc_buffer((src_l.MI * 2,), wide, scope="local")
        with B.unroll(0, src_l.MI) as mi:
            with B.unroll(0, 2) as h:
                B.buffer_store(part, self._identity(r.kind, wide), [mi * 2 + h])
                with B.unroll(0, src_l.NI) as ni:
                    with B.unroll(0, 2) as cc:
                        v = cast_to(src_v[((mi * src_l.NI + ni) * 2 + h) * 2 + cc], wide)
                        if r.kind in ("abssum", "absmax"):
                            v = tx.abs(v)
                        B.buffer_store(part, self._combine(r.kind, part[mi * 2 + h], v), [mi * 2 + h])
                for m in (1, 2):
                    sh = B.Bind(self.shuffle_xor(part[mi * 2 + h], tir_const(m, "int32")))  # once: _combine repeats
                    B.buffer_store(part, self._combine(r.kind, part[mi * 2 + h], sh), [mi * 2 + h])
        if src_l.wn > 1:
            if wide != "float32":
                raise self.unsupported(f"cross-warp reduction in {wide}", r)
            # partials of each warp column -> scratch[warp_n, row]; then every owner combines them
            self.sync()
            lane, warp = self.t % MMA_WARP, self.t // MMA_WARP
            wn_i = warp % src_l.wn
            with B.unroll(0, src_l.MI) as mi:
                with B.unroll(0, 2) as h:
                    row = (warp // src_l.wn) * (src_l.M // src_l.wm) + mi * 16 + lane // 4 + h * 8
                    with B.If(lane % 4 == 0):
                        with B.Then():
                            B.buffer_store(self.scratch, part[mi * 2 + h], [wn_i * src_l.M + row])
            self.sync()
            with B.unroll(0, src_l.MI) as mi:
                with B.unroll(0, 2) as h:
                    row = (warp // src_l.wn) * (src_l.M // src_l.wm) + mi * 16 + lane // 4 + h * 8
                    B.buffer_store(part, self.scratch[row], [mi * 2 + h])
                    with B.unroll(1, src_l.wn) as w:
                        B.buffer_store(part, self._combine(r.kind, part[mi * 2 + h],
                                                           self.scratch[w * src_l.M + row]), [mi * 2 + h])
            self.sync()
        with B.unroll(0, src_l.MI * 2) as i:
            res = part[i]
            if not r.clear:
                res = self._combine(r.kind, cast_to(dst_v[i], wide), res)
            B.buffer_store(dst_v, cast_to(res, r.dst.dtype), [i])

    def emit_Cumsum(self, s: N.Cumsum):
        """Portable scan: one thread per line, sequential along `dim`."""
        shape = tuple(s.src.shape)
        other = tuple(e for d, e in enumerate(shape) if d != s.dim) or (1,)
        wide = "float32" if s.dst.dtype in ("float16", "bfloat16") else s.dst.dtype
        n = shape[s.dim]

        def line(idx):
            tmp = B.alloc_buffer((1,), wide, scope="local")
            B.buffer_store(tmp, tir_const(0, wide), [0])
            with B.serial(0, n) as k:
                pos = (n - 1 - k) if s.reverse else k
                full = list(idx[:s.dim]) + [pos] + list(idx[s.dim:]) if len(shape) > 1 else [pos]
                view, si = self.access(s.src, full)
                B.buffer_store(tmp, tmp[0] + cast_to(tx.BufferLoad(view, si), wide), [0])
                self.store(s.dst, full, tmp[0])

        if self.plan.storage[s.dst.name] == "rep":
            with B.serial(0, prod(other)) as e:
                line(unflatten(e, other) if len(shape) > 1 else [])
        else:
            self.iterate_linear(other, 1, lambda idx: line(idx if len(shape) > 1 else []))

    def atomic_one(self, kind, buf: N.Buffer, idx, value):
        """One element's atomic read-modify-write: device instruction ("atomic_<kind>", dtype)."""
        if (f"atomic_{kind}", buf.dtype) not in self.intrinsics:
            raise self.unsupported(f"T.atomic_{kind} on {buf.dtype}")
        self.instruction(f"atomic_{kind}", buf.dtype, buf, idx, cast_to(value, buf.dtype))

    def emit_Atomic(self, a: N.Atomic):
        """Portable atomics: one instruction per element, by its owner (or thread 0)."""
        if isinstance(a.value, N.Expr):
            idx = [self.lower(i) for i in a.dst.starts]
            if self.in_parallel:
                self.atomic_one(a.kind, a.dst.buffer, idx, self.lower(a.value))
            else:
                with B.If(self.t == 0):
                    with B.Then():
                        self.atomic_one(a.kind, a.dst.buffer, idx, self.lower(a.value))
            return
        src, dst = a.value, a.dst
        pred = self.plan.storage[dst.buffer.name] == "global"

        def element(it_idx):
            si = self.region_index(src, it_idx)
            di = self.region_index(dst, it_idx)
            view, sidx = self.access(src.buffer, si)
            val = tx.BufferLoad(view, sidx)
            if pred:
                with B.If(self.in_bounds(dst, di)):
                    with B.Then():
                        self.atomic_one(a.kind, dst.buffer, di, val)
            else:
                self.atomic_one(a.kind, dst.buffer, di, val)

        shape = dst.squeezed_shape() or (1,)
        if self.plan.storage[src.buffer.name] == "reg":
            self.iterate_layout(self.plan.layout[src.buffer.name], lambda idx: element(_squeeze(idx, src.buffer.shape)))
        else:
            self.iterate_linear(tuple(shape), 1, element)

    def emit_Print(self, p: N.Print):
        """No portable device printf: a backend that has one contributes a "Print" rule."""
        raise self.unsupported("T.print (no device printf on this target)", p)

    def emit_copy_async(self, c: N.Copy):
        """Copy `c` as async vector copies (for a pipeline rule), outside the barrier bookkeeping."""
        saved = (self.pending_r, self.pending_w)
        self.pending_r, self.pending_w = set(), set()
        self.emit_Copy(c, async_copy=True)
        self.pending_r, self.pending_w = saved


# ---------------------------------------------------------------------- utilities

def _align(x, a):
    return (x + a - 1) // a * a


def _tvm_dtype(d: str) -> str:
    return d


def unflatten(e, shape):
    """Row-major indices of flat position `e` (a PrimExpr) in `shape`."""
    idx = []
    for d in reversed(range(len(shape))):
        if d == 0:
            idx.append(e if len(shape) == 1 else tx.floordiv(e, prod(shape[1:])))
        else:
            idx.append(tx.floormod(tx.floordiv(e, prod(shape[d + 1:])) if d + 1 < len(shape) else e, shape[d]))
    return list(reversed(idx))



def _squeeze(idx, shape):
    return [i for i, s in zip(idx, shape) if s != 1] or [idx[0]]


def _exprs_of(s):
    from .simt_plan import _stmt_exprs
    return _stmt_exprs(s)


def lower_kernel(func: N.PrimFunc, target: TargetDescription, rules: Optional[RuleTable] = None,
                 intrinsics=None, options: Optional[dict] = None) -> LoweredKernel:
    """Lower `func` for `target` with the backend's `rules` (a RuleTable) and `intrinsics` (the
    entries the plugins contributed); raises TileCompileError with the user's line on bad input."""
    return SimtLowering(func, target, rules, intrinsics, options).build()


PIPELINE_NAME = "tilecore_simt"


def register_simt_pipeline() -> str:
    """Register (once) TVM's default s_tir pipeline minus its shared-memory ThreadSync passes.

    The SIMT lowering places every barrier itself (it knows which thread owns which
    element; TVM's analysis does not, and refuses loops whose accesses it cannot prove
    thread-private). Returns the pipeline name for `tvm.compile(..., tir_pipeline=)`.
    """
    from tvm import s_tir
    from tvm.s_tir import pipeline as sp
    from tvm.tirx import compilation_pipeline as cp

    if PIPELINE_NAME in cp.PIPELINE_MAP:
        return PIPELINE_NAME
    original = s_tir.transform.ThreadSync

    def factory(**kwargs):
        base, host, device = sp.default_s_tir_pipeline() if hasattr(sp, "default_s_tir_pipeline") \
            else cp.get_tir_pipeline("default")

        @tvm.transform.module_pass(opt_level=0)
        def _pipeline(mod, ctx):
            def thread_sync(scope):
                if scope in ("shared", "shared.dyn"):
                    return tvm.transform.Sequential([])
                return original(scope)
            s_tir.transform.ThreadSync = thread_sync
            try:
                return base(mod)
            finally:
                s_tir.transform.ThreadSync = original
        return _pipeline, host, device

    cp.register_tir_pipeline(PIPELINE_NAME, factory)
    return PIPELINE_NAME
