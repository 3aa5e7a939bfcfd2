"""Tile IR -> TVM TIR for SIMT GPUs (CUDA now; ROCm and Metal reuse it with their `SimtTarget`).

`lower_kernel(func, target)` builds a `tvm.tirx.PrimFunc` with TVM's IR builder:
blocks and threads as `launch_thread`, every shared tile carved out of one dynamic
shared-memory pool (so kernels may use more than 48 KB), fragments in registers
with the layouts chosen by `simt_plan`, barriers where tile operations hand data
between threads, predicated partial-tile copies, 16-byte vector copies,
`cp.async` multi-stage pipelines for `T.Pipelined`, tensor-core GEMM and warp
shuffle reductions. Target-specific pieces (MMA, async copies, device helpers)
come from `SimtTarget`; a target without them gets portable SIMT code.

Expressions are lowered by `tilecore.lowering.tir_expr.ExprLowerer` (shared with
the CPU backend) with buffer views that map tiles onto threads.

Imports TVM: use it from backend code only.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from math import prod
from typing import Dict, List, Optional, Tuple

import tvm
from tvm import tirx as tx
from tvm.tirx import op as top
from tvm.script.ir_builder import IRBuilder
from tvm.tirx.script.builder import ir as B

from ..diagnostics import TileCompileError, UnsupportedFeatureError
from ..ir import nodes as N
from ..ir.types import itemsize, is_float
from ..ir.visitor import walk, walk_stmts
from .intrinsics import default_table
from .simt_layout import MmaLayout, RowLayout, SharedLayout, StridedLayout, StridedRowLayout
from .simt_plan import KernelPlan, choose_anchor, parallel_accesses, plan_kernel
from .wgmma import SMEM_ALIGN
from .wgmma import cxx_source as wgmma_source
from .tir_expr import ExprLowerer, cast_to, nan_max, nan_min, tir_const

CPP_TYPES = {"float16": "half", "bfloat16": "__nv_bfloat16", "int8": "signed char", "float32": "float",
             "float64": "double", "int32": "int", "int64": "int64_t", "int16": "int16_t",
             "uint8": "uint8_t", "bool": "bool"}


@dataclass
class SimtTarget:
    """What the shared SIMT lowering needs to know about a GPU target."""

    kind: str = "cuda"
    arch: str = "sm_90a"
    warp_size: int = 32
    has_mma: bool = True          # mma.sync m16n8k16 (sm_80+)
    has_cp_async: bool = True     # cp.async (sm_80+)
    has_wgmma: bool = False       # warpgroup MMA wgmma.mma_async (sm_90a)
    device_lib: str = ""          # C++ helpers source passed with func_call
    fast_math: bool = True
    max_shared_memory: int = 227 * 1024
    shared_scope: str = "shared.dyn"  # "shared" (static) where the codegen has no dynamic pool (Metal)

    @property
    def tvm_target(self) -> dict:
        return {"kind": self.kind, "arch": self.arch}


@dataclass
class LoweredKernel:
    prim_func: object
    name: str
    grid: Tuple[N.Expr, ...]
    threads: int
    dyn_smem_bytes: int
    plan: KernelPlan
    notes: List[str] = field(default_factory=list)
    device_lib: str = ""  # the helper source every helper call carries (TVM emits it per call site)


def _fast_math_table(target: SimtTarget, device_lib: Optional[str] = None):
    """Intrinsics with CUDA's fast math; helper calls carry `device_lib` (the kernel's whole helper
    source, so that the module holds one copy of it) or else the target's."""
    lib = target.device_lib if device_lib is None else device_lib
    table = default_table()
    if target.kind == "cuda" and target.fast_math:
        table[("exp", "float32")] = lambda a: tx.call_pure_extern("float32", "__expf", a[0])
        table[("log", "float32")] = lambda a: tx.call_pure_extern("float32", "__logf", a[0])
        # a helper-library call (not an extern name): the call carries the library source, so a
        # kernel whose only helper is exp2 still gets the `tc` namespace emitted
        table[("exp2", "float32")] = lambda a: _func_call("tc::fast_exp2", (a[0],), lib, "float32")
    return table


class _Ctx:
    """The current thread-iteration of a Parallel loop: anchor layout and its iteration."""

    def __init__(self, layout=None, it=None, local=None):
        self.layout, self.it, self.local = layout, it, local


class SimtLowering:
    """Lower one Tile IR PrimFunc (one T.Kernel) to a tvm.tirx.PrimFunc."""

    def __init__(self, func: N.PrimFunc, target: SimtTarget, options: Optional[dict] = None,
                 intrinsics=None):
        self.func = func
        self.target = target
        self.options = dict(options or {})
        self.source = func.source
        self.kernel = func.kernel
        self.threads = prod(self.kernel.threads) if self.kernel.threads else 128
        if self.threads > 1024:
            raise TileCompileError(f"threads={self.threads} exceeds 1024 threads per block",
                                   self.kernel.span, self.source)
        self.plan = plan_kernel(func, self.threads, target.has_mma, has_wgmma=target.has_wgmma)
        # one helper source per module (TVM emits each distinct source block once)
        self.device_lib = target.device_lib + (
            wgmma_source(self.plan.wgmma_gemms.values()) if self.plan.wgmma_gemms else "")
        self.ex = ExprLowerer(intrinsics=intrinsics or _fast_math_table(target, self.device_lib),
                              backend=target.kind, source=self.source)
        self.views: Dict[str, object] = {}      # name -> tirx Buffer (global / smem view / local array)
        self.stage: Dict[str, object] = {}      # smem name -> current stage index expr
        self.ctx = _Ctx()
        self.pending_r: set = set()
        self.pending_w: set = set()
        self.lib_used = False
        self.smem_bytes = 0
        self.scratch_count = 0

    # ------------------------------------------------------------------ helpers
    def err(self, msg, node):
        return TileCompileError(msg, getattr(node, "span", None), self.source)

    def call(self, name, *args, ret="void"):
        """A call into the device helper library (tc::...)."""
        self.lib_used = True
        return tx.cuda_func_call(name, *args, source_code=self.device_lib, return_type=ret) \
            if hasattr(tx, "cuda_func_call") else _func_call(name, args, self.device_lib, ret)

    def sync(self):
        if self.plan.wgmma_gemms:  # shared writes must reach wgmma's async proxy before the barrier
            B.evaluate(self.call("tc::fence_async_smem"))
        B.evaluate(top.tvm_storage_sync("shared"))
        self.pending_r.clear()
        self.pending_w.clear()

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
        return view, [self.rep_index(buf, indices)]

    def make_view_fn(self, buf: N.Buffer):
        def load(indices):
            view, idx = self.access(buf, indices)
            return tx.BufferLoad(view, idx)
        return load

    def lower(self, e: N.Expr):
        return self.ex.lower(e)

    def store(self, buf: N.Buffer, indices, value):
        view, idx = self.access(buf, indices)
        B.buffer_store(view, cast_to(value, buf.dtype), idx)

    def addr(self, buf: N.Buffer, indices):
        view, idx = self.access(buf, indices)
        return tx.address_of(tx.BufferLoad(view, idx))

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
                           self.plan, list(self.plan.notes), self.device_lib if self.lib_used else "")
        return lk

    def emit_kernel(self):
        k = self.kernel
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
        """Carve shared tiles out of one dynamic pool; declare register and replicated arrays."""
        smem = []
        stages = self.pipeline_stages()
        for name, st in self.plan.storage.items():
            b = self.plan.buffers[name]
            if st == "smem":
                lay = self.plan.layout[name]
                s = stages.get(name, 1)
                if s > 1:
                    lay = dataclasses.replace(lay, stages=s)
                    self.plan.layout[name] = lay
                smem.append((name, b, lay))
            elif st == "reg":
                lay = self.plan.layout[name]
                arr = B.alloc_buffer((lay.local_size,), _tvm_dtype(b.dtype), scope="local")
                IRBuilder.name(name, arr)
                self.views[name] = arr
                self.ex.bind_buffer(name, self.make_view_fn(b))
            elif st == "rep":
                shape = b.static_shape() or (1,)
                arr = B.alloc_buffer((max(1, prod(shape)),), _tvm_dtype(b.dtype), scope="local")
                IRBuilder.name(name, arr)
                self.views[name] = arr
                self.ex.bind_buffer(name, self.make_view_fn(b))
        self.scratch_bytes = 32 * 4 * 32  # cross-warp reduction scratch (up to 32 warps x 32 rows f32)
        total = 0
        offsets = {}
        align = SMEM_ALIGN if self.plan.wgmma_gemms else 128
        for name, b, lay in smem:
            total = _align(total, align)
            offsets[name] = total
            total += lay.numel * lay.stages * lay.elem_bytes
        needs_scratch = any(isinstance(s, N.Reduce) for s in walk_stmts(self.kernel.body))
        if needs_scratch:
            total = _align(total, 128)
            self.scratch_off = total
            total += self._scratch_size()
        if total > self.target.max_shared_memory:
            span = smem[0][1].span if smem else self.kernel.span
            raise TileCompileError(
                f"the kernel needs {total} bytes of shared memory; {self.target.kind}:{self.target.arch} "
                f"allows {self.target.max_shared_memory} per block", span, self.source)
        self.smem_bytes = total
        if total:
            pool = B.alloc_buffer((total,), "uint8", scope=self.target.shared_scope)
            IRBuilder.name("smem_pool", pool)
            self.pool = pool
            for name, b, lay in smem:
                eb = lay.elem_bytes
                view = B.decl_buffer((lay.numel * lay.stages,), _tvm_dtype(b.dtype), data=pool.data,
                                     elem_offset=offsets[name] // eb, scope=self.target.shared_scope)
                IRBuilder.name(name, view)
                self.views[name] = view
                self.ex.bind_buffer(name, self.make_view_fn(b))
            if needs_scratch:
                self.scratch = B.decl_buffer((self._scratch_size() // 4,), "float32", data=pool.data,
                                             elem_offset=self.scratch_off // 4, scope=self.target.shared_scope)
                IRBuilder.name("reduce_scratch", self.scratch)

    def _scratch_size(self):
        # (warps, rows) float32 partials for cross-warp row reductions
        rows = 1
        for s in walk_stmts(self.kernel.body):
            if isinstance(s, N.Reduce):
                rows = max(rows, prod(s.dst.shape))
        return 4 * max(1, self.threads // 32) * rows

    # ------------------------------------------------------------------ statements
    def emit_body(self, stmts):
        for s in stmts:
            self.emit_stmt(s)

    def emit_stmt(self, s):
        m = getattr(self, "emit_" + type(s).__name__, None)
        if m is None:
            raise UnsupportedFeatureError(self.target.kind, f"statement {type(s).__name__}", s.span, self.source)
        m(s)

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
        if s.kind == "pipelined" and not self.in_parallel and self.try_pipeline(s):
            return
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
        idx = _unflatten(e, shape)
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
        if not self.in_parallel:
            self.touch((c,))
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
                element(_unflatten(e, tuple(shape)))
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
                s_addr = self.addr(src.buffer, si)
                d_addr = self.addr(dst.buffer, di)
                if async_copy:
                    if pred_src:
                        # out of bounds: zero-fill (src-size 0) from a clamped, valid address
                        ok = self.in_bounds(src, si)
                        safe = self.addr(src.buffer, self.clamp(src, si))
                        B.evaluate(self.call("tc::cp_async16", d_addr, safe, ok))
                    else:
                        B.evaluate(self.call("tc::cp_async16", d_addr, s_addr, tx.const(True, "bool")))
                    return
                if pred_src or pred_dst:
                    ok = tx.And(self.in_bounds(src, si), self.in_bounds(dst, di)) if pred_src and pred_dst else \
                        (self.in_bounds(src, si) if pred_src else self.in_bounds(dst, di))
                    with B.If(ok):
                        with B.Then():
                            B.evaluate(self.call("tc::copy16", d_addr, s_addr))
                        if pred_src and not pred_dst:
                            with B.Else():
                                B.evaluate(self.call("tc::zero16", d_addr))
                else:
                    B.evaluate(self.call("tc::copy16", d_addr, s_addr))
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
        st = self.plan.storage[r.buffer.name]
        if st == "smem":
            lay = self.plan.layout[r.buffer.name]
            return not lay.swizzle and r.extents[-1] % vec == 0 and _divisible(r.starts[-1], vec) \
                and lay.row_elems % vec == 0
        if st != "global":
            return False
        last = r.buffer.shape[-1]
        return (r.extents[-1] > 1 and r.extents[-1] % vec == 0 and isinstance(last, int) and last % vec == 0
                and _divisible(r.starts[-1], vec))

    def base_addr(self, buf):
        view = self.views[buf.name]
        return tx.address_of(tx.BufferLoad(view, [tir_const(0, "int32")] * len(view.shape)))

    def vector_width(self, c: N.Copy) -> int:
        """Elements per 16-byte access when both sides allow it (contiguity, alignment), else 1."""
        src, dst = c.src, c.dst
        if src.buffer.dtype != dst.buffer.dtype:
            return 1
        eb = itemsize(src.buffer.dtype)
        v = 16 // eb
        if eb > 16 or v < 2:
            return 1
        for r in (src, dst):
            st = self.plan.storage[r.buffer.name]
            if st not in ("global", "smem"):
                return 1
            if r.extents[-1] % v or r.extents[-1] == 1:
                return 1
            last = r.buffer.shape[-1]
            if not isinstance(last, int) or last % v:
                return 1
            if not _divisible(r.starts[-1], v):
                return 1
            if st == "smem":
                lay = self.plan.layout[r.buffer.name]
                if lay.numel % v:
                    return 1
        if src.squeezed_shape()[-1:] != dst.squeezed_shape()[-1:]:
            return 1
        return v

    def emit_Fill(self, f: N.Fill):
        self.touch((f,))
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
                element(_unflatten(e, shape))
        else:
            self.iterate_linear(tuple(shape), 1, element)

    def emit_Gemm(self, g: N.Gemm):
        self.touch((g,))
        lay = self.plan.mma_gemms.get(id(g))
        if id(g) in self.plan.wgmma_gemms:
            return self.emit_wgmma_gemm(g, lay)
        if lay is not None and self.plan.storage[g.a.buffer.name] == "reg" \
                and self.plan.storage[g.b.buffer.name] == "smem" and _full_2d(g.b):
            return self.emit_mma_gemm_rs(g, lay)
        if lay is not None and self.plan.storage[g.a.buffer.name] == "smem" \
                and self.plan.storage[g.b.buffer.name] == "smem" and _full_2d(g.a) and _full_2d(g.b):
            return self.emit_mma_gemm(g, lay)
        return self.emit_simt_gemm(g)

    def emit_mma_gemm(self, g: N.Gemm, lay: MmaLayout):
        a, b, c = g.a.buffer, g.b.buffer, g.c.buffer
        la, lb = self.plan.layout[a.name], self.plan.layout[b.name]
        K = g.a.extents[0] if g.transpose_a else g.a.extents[1]
        acc = self.views[c.name]
        if g.clear_accum:
            with B.unroll(0, lay.local_size) as i:
                B.buffer_store(acc, tir_const(0, c.dtype), [i])
        T = CPP_TYPES[a.dtype]
        tmpl = (f"tc::gemm_ss<{lay.M}, {lay.N}, {K}, {lay.wm}, {lay.wn}, {_b(g.transpose_a)}, "
                f"{_b(g.transpose_b)}, {T}, {la.row_elems}, {lb.row_elems}, {_b(la.swizzle)}, {_b(lb.swizzle)}>")
        zero = tir_const(0, "int32")
        pa = self.stage_base_addr(a)
        pb = self.stage_base_addr(b)
        B.evaluate(self.call(tmpl, pa, pb, tx.address_of(tx.BufferLoad(acc, [zero]))))

    def emit_mma_gemm_rs(self, g: N.Gemm, lay: MmaLayout):
        a, b, c = g.a.buffer, g.b.buffer, g.c.buffer
        lb = self.plan.layout[b.name]
        K = g.a.extents[1]
        acc = self.views[c.name]
        zero = tir_const(0, "int32")
        if g.clear_accum:
            with B.unroll(0, lay.local_size) as i:
                B.buffer_store(acc, tir_const(0, c.dtype), [i])
        tmpl = (f"tc::gemm_rs<{lay.M}, {lay.N}, {K}, {lay.wm}, {_b(g.transpose_b)}, {CPP_TYPES[a.dtype]}, "
                f"{lb.row_elems}, {_b(lb.swizzle)}>")
        B.evaluate(self.call(tmpl, tx.address_of(tx.BufferLoad(self.views[a.name], [zero])),
                             self.stage_base_addr(b), tx.address_of(tx.BufferLoad(acc, [zero]))))

    def emit_wgmma_gemm(self, g: N.Gemm, lay: MmaLayout):
        """Warpgroup MMA (sm_90a): operands by shared-memory descriptor, A optionally in registers."""
        a, b, c = g.a.buffer, g.b.buffer, g.c.buffer
        lb = self.plan.layout[b.name]
        K = g.a.extents[0] if g.transpose_a else g.a.extents[1]
        acc = self.views[c.name]
        zero = tir_const(0, "int32")
        if g.clear_accum:
            with B.unroll(0, lay.local_size) as i:
                B.buffer_store(acc, tir_const(0, c.dtype), [i])
        T = CPP_TYPES[a.dtype]
        acc_ptr = tx.address_of(tx.BufferLoad(acc, [zero]))
        if self.plan.storage[a.name] == "reg":
            tmpl = f"tc::wgmma_rs<{lay.N}, {K}, {_b(g.transpose_b)}, {T}, {lb.shape[0]}, {lb.shape[1]}>"
            a_ptr = tx.address_of(tx.BufferLoad(self.views[a.name], [zero]))
        else:
            la = self.plan.layout[a.name]
            tmpl = (f"tc::wgmma_ss<{lay.N}, {K}, {_b(g.transpose_a)}, {_b(g.transpose_b)}, {T}, "
                    f"{la.shape[0]}, {la.shape[1]}, {lb.shape[0]}, {lb.shape[1]}, {lay.MI}>")
            a_ptr = self.stage_base_addr(a)
        B.evaluate(self.call(tmpl, a_ptr, self.stage_base_addr(b), acc_ptr))

    def stage_base_addr(self, buf):
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
                element(_unflatten(e, (M, Nn)))
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
        self.touch((r,))
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
        while group * 2 <= min(32, self.threads // max(rows, 1)) and group * 2 <= src.shape[r.dim]:
            group *= 2
        if st == "smem" and self.plan.storage[src.name] == "smem" and group > 1 and self.threads % 32 == 0:
            return self.emit_group_reduce(r, dshape, keep, wide, group)
        if st == "reg":
            self.iterate_layout(dst_l, lambda idx: element(list(idx)))
        elif st == "rep":
            with B.serial(0, prod(dshape)) as e:
                element(_unflatten(e, dshape))
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
            idx = _unflatten(tx.Min(row, rows - 1), dshape)
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
                sh = B.Bind(self.call("tc::shfl_xor<%s>" % CPP_TYPES[wide], part[0], tir_const(m, "int32"), ret=wide))  # once: _combine repeats operands
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
            m = min(g, 32) // 2
            while m >= 1:
                sh = B.Bind(self.call("tc::shfl_xor<%s>" % CPP_TYPES[wide], part[i], tir_const(m, "int32"), ret=wide))  # once: _combine repeats operands
                B.buffer_store(part, self._combine(r.kind, part[i], sh), [i])
                m //= 2
        if g > 32:
            if wide != "float32":
                raise UnsupportedFeatureError(self.target.kind, f"cross-warp reduction in {wide}", r.span, self.source)
            gw = g // 32
            warp = tx.floordiv(self.t, 32)
            self.sync()
            with B.If(tx.floormod(self.t, 32) == 0):
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
                    sh = B.Bind(self.call("tc::shfl_xor<%s>" % CPP_TYPES[wide], part[mi * 2 + h],
                                          tir_const(m, "int32"), ret=wide))  # once: _combine repeats operands
                    B.buffer_store(part, self._combine(r.kind, part[mi * 2 + h], sh), [mi * 2 + h])
        if src_l.wn > 1:
            if wide != "float32":
                raise UnsupportedFeatureError(self.target.kind, f"cross-warp reduction in {wide}", r.span, self.source)
            # partials of each warp column -> scratch[warp_n, row]; then every owner combines them
            self.sync()
            lane, warp = self.t % 32, self.t // 32
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
        self.touch((s,))
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
                line(_unflatten(e, other) if len(shape) > 1 else [])
        else:
            self.iterate_linear(other, 1, lambda idx: line(idx if len(shape) > 1 else []))

    def atomic_one(self, kind, buf: N.Buffer, idx, value):
        op = {"add": 0, "max": 1, "min": 2}[kind]
        T = CPP_TYPES[buf.dtype]
        B.evaluate(self.call(f"tc::atomic<{op}, {T}>", self.addr(buf, idx), cast_to(value, buf.dtype)))

    def emit_Atomic(self, a: N.Atomic):
        if not self.in_parallel:
            self.touch((a,))
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
        self.touch((p,))
        prefix = (p.msg + ": ") if p.msg else ""
        blk = [self.ex.variables[v.name] for v in self.kernel.block_vars]
        bfmt = "[" + ",".join(["%d"] * len(blk)) + "] " if blk else ""

        def fmt_val(e, dtype):
            if is_float(dtype):
                return "%g", cast_to(e, "float64")
            if dtype == "int64":
                return "%lld", e
            return "%d", cast_to(e, "int32")

        with B.If(self.t == 0):
            with B.Then():
                if isinstance(p.value, N.Expr):
                    f, v = fmt_val(self.lower(p.value), p.value.dtype)
                    B.evaluate(tx.cuda_printf(bfmt + prefix + f + "\n", *blk, v) if hasattr(tx, "cuda_printf")
                               else _printf(bfmt + prefix + f + "\n", *blk, v))
                else:
                    buf = p.value
                    shape = buf.static_shape() or (1,)
                    with B.serial(0, prod(shape)) as e:
                        idx = _unflatten(e, shape)
                        view, ii = self.access(buf, idx)
                        f, v = fmt_val(tx.BufferLoad(view, ii), buf.dtype)
                        B.evaluate(_printf(bfmt + prefix + buf.name + "[%d] = " + f + "\n", *blk, e, v))

    # ---------------------------------------------------------------- software pipeline
    def pipeline_stages(self) -> Dict[str, int]:
        """Shared buffers that a cp.async pipeline multi-buffers, with their stage counts."""
        out: Dict[str, int] = {}
        for s in walk_stmts(self.kernel.body):
            if isinstance(s, N.For) and s.kind == "pipelined":
                info = self.pipeline_info(s)
                if info:
                    for c in info[0]:
                        out[c.dst.buffer.name] = max(out.get(c.dst.buffer.name, 1), info[1])
        return out

    def pipeline_info(self, loop: N.For):
        """(async copies, stages) when `loop` can run as a cp.async pipeline, else None."""
        if not self.target.has_cp_async or loop.num_stages < 2:
            return None
        stages = loop.num_stages
        copies = []
        written_later = set()
        body_vars = {s.var.name for s in walk_stmts(loop.body) if isinstance(s, (N.Let, N.For))}
        for s in loop.body:
            if isinstance(s, N.Copy) and self.plan.storage.get(s.src.buffer.name) == "global" \
                    and self.plan.storage.get(s.dst.buffer.name) == "smem" \
                    and self.vector_width(s) > 1 and not _region_uses(s.src, body_vars):
                copies.append(s)
        if not copies:
            return None
        names = {c.dst.buffer.name for c in copies}
        # each staged buffer must be written only by its copy and used only inside this loop
        for s in walk_stmts(self.kernel.body):
            for n in names:
                if s in copies:
                    continue
                if _writes(s, n):
                    return None
        if len(names) != len(copies):
            return None
        for s in walk_stmts(self.kernel.body):
            if s is loop:
                continue
        outside = [s for s in self.kernel.body if s is not loop]
        if any(_reads_any(st, names) for st in _flatten_except(self.kernel.body, loop)):
            return None
        return copies, stages

    def try_pipeline(self, loop: N.For) -> bool:
        info = self.pipeline_info(loop)
        if not info:
            return False
        copies, S = info
        names = {c.dst.buffer.name for c in copies}
        begin = self.lower(loop.begin)
        n = self.lower(loop.extent)
        self.touch((loop,))
        self.sync()

        def issue(k_rel):
            stage = tx.floormod(k_rel, S)
            for c in copies:
                self.stage[c.dst.buffer.name] = stage
            self.ex.bind(loop.var.name, begin + k_rel)
            with B.If(k_rel < n):
                with B.Then():
                    for c in copies:
                        self.emit_Copy_async(c)
            B.evaluate(self.call("tc::cp_async_commit"))

        # (An overlapped schedule that keeps wgmma group k in flight while the copies for k+S-2 are
        # issued gave wrong sums on the H200 whenever ptxas did not serialize it, 2026-11-29: the
        # main loop waits for each gemm; benchmarks/results/cuda_README.md has the measurements.)
        with B.unroll(0, S - 1) as s0:
            issue(s0)
        with B.serial(0, n) as k:
            B.evaluate(self.call(f"tc::cp_async_wait<{S - 2}>"))
            self.sync()
            issue(k + (S - 1))
            for c in copies:
                self.stage[c.dst.buffer.name] = tx.floormod(k, S)
            self.ex.bind(loop.var.name, begin + k)
            self.pending_r, self.pending_w = set(), set()
            rest = [s for s in loop.body if s not in copies]
            self.emit_body(rest)
        B.evaluate(self.call("tc::cp_async_wait<0>"))
        for c in copies:
            self.stage.pop(c.dst.buffer.name, None)
        self.sync()
        return True

    def emit_Copy_async(self, c: N.Copy):
        saved = (self.pending_r, self.pending_w)
        self.pending_r, self.pending_w = set(), set()
        self.emit_Copy(c, async_copy=True)
        self.pending_r, self.pending_w = saved


# ---------------------------------------------------------------------- utilities

def _align(x, a):
    return (x + a - 1) // a * a


def _b(x: bool) -> str:
    return "true" if x else "false"


def _tvm_dtype(d: str) -> str:
    return d


def _unflatten(e, shape):
    idx = []
    for d in reversed(range(len(shape))):
        if d == 0:
            idx.append(e if len(shape) == 1 else tx.floordiv(e, prod(shape[1:])))
        else:
            idx.append(tx.floormod(tx.floordiv(e, prod(shape[d + 1:])) if d + 1 < len(shape) else e, shape[d]))
    return list(reversed(idx))


def _squeeze(idx, shape):
    return [i for i, s in zip(idx, shape) if s != 1] or [idx[0]]


def _full_2d(r: N.Region) -> bool:
    shape = r.buffer.static_shape()
    return (shape is not None and len(shape) == 2 and tuple(r.extents) == shape
            and all(isinstance(s, N.Const) and s.value == 0 for s in r.starts))


def _divisible(e: N.Expr, v: int) -> bool:
    """Conservative proof that integer expression `e` is a multiple of `v`."""
    if isinstance(e, N.Const):
        return int(e.value) % v == 0
    if isinstance(e, N.BinOp):
        if e.op in ("+", "-"):
            return _divisible(e.a, v) and _divisible(e.b, v)
        if e.op == "*":
            for x, y in ((e.a, e.b), (e.b, e.a)):
                if isinstance(x, N.Const) and int(x.value) % v == 0:
                    return True
                if isinstance(x, N.Const) and int(x.value) != 0 and _divisible(y, v // _gcd(v, int(x.value))):
                    return True
            return _divisible(e.a, v) or _divisible(e.b, v)
    return v == 1


def _gcd(a, b):
    from math import gcd
    return gcd(a, b)


def _exprs_of(s):
    from .simt_plan import _stmt_exprs
    return _stmt_exprs(s)


def _region_uses(r: N.Region, names) -> bool:
    return any(isinstance(n, N.Var) and n.name in names for st in r.starts for n in walk(st))


def _writes(s, name) -> bool:
    if isinstance(s, N.Copy):
        return s.dst.buffer.name == name
    if isinstance(s, N.Fill):
        return s.dst.buffer.name == name
    if isinstance(s, N.Store):
        return s.buffer.name == name
    if isinstance(s, (N.Reduce, N.Cumsum)):
        return s.dst.name == name
    if isinstance(s, N.Gemm):
        return s.c.buffer.name == name
    return False


def _reads_any(s, names) -> bool:
    if isinstance(s, N.Copy) and s.src.buffer.name in names:
        return True
    if isinstance(s, N.Gemm) and (s.a.buffer.name in names or s.b.buffer.name in names):
        return True
    if isinstance(s, (N.Reduce, N.Cumsum)) and s.src.name in names:
        return True
    for e in _exprs_of(s):
        for n in walk(e):
            if isinstance(n, N.Load) and n.buffer.name in names:
                return True
    return False


def _flatten_except(body, skip):
    for s in body:
        if s is skip:
            continue
        yield s
        for name in ("body", "then_body", "else_body"):
            sub = getattr(s, name, None)
            if isinstance(sub, tuple):
                yield from _flatten_except(sub, skip)


def _func_call(name, args, source, ret):
    from tvm.backend.cuda import op as cop
    return cop.cuda_func_call(name, *args, source_code=source, return_type=ret)


def _printf(fmt, *args):
    from tvm.backend.cuda import op as cop
    return cop.cuda_printf(fmt, *args)


def lower_kernel(func: N.PrimFunc, target: SimtTarget, options: Optional[dict] = None,
                 intrinsics=None) -> LoweredKernel:
    """Lower `func` for `target`; raises TileCompileError with the user's line on bad input."""
    return SimtLowering(func, target, options, intrinsics).build()


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
