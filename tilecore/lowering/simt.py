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
the CPU backend; its fp8 subclass `lowering.fp8.Fp8ExprLowerer`) with buffer views that
map tiles onto threads. fp8 tiles and tensors hold their bits as uint8 (`simt_memory`).

Imports TVM: use it from backend code only.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass, field
from math import prod
from typing import Any, Callable, Dict, List, Optional, Tuple

import tvm
from tvm import tirx as tx
from tvm.script.ir_builder import IRBuilder
from tvm.tirx.script.builder import ir as B

from ..diagnostics import TileCompileError, UnsupportedFeatureError
from ..ir import nodes as N
from ..ir.types import is_fp8
from ..ir.visitor import Dispatcher, walk
from ..plugin.rules import SIMT_OPS, RuleTable
from .block_order import BlockOrder, IndexOps, kernel_block_order, logical_blocks
from .fp8 import Fp8ExprLowerer
from .intrinsics import IntrinsicTable, default_table, dtype_of
from .param_aliasing import may_promise_noalias
from .simt_barriers import SimtBarriers
from .simt_intrinsics import DEVICE_INSTRUCTIONS, portable_device_table
from .simt_layout import RowLayout, StridedRowLayout
from .simt_memory import SimtMemory, _tvm_dtype
from .simt_plan import KernelPlan, choose_anchor, plan_for_target
from .simt_reduce import SimtReductions
from .simt_threads import SimtThreads, _Ctx
from .simt_tileops import SimtTileOps
from .target import TargetDescription
from .tir_expr import cast_to, involves_bfloat16
from .uniform_select import uniform_select

# the block order's arithmetic on TIR expressions (`block_order.logical_blocks`)
TIR_INDEX_OPS = IndexOps(tx.floordiv, tx.floormod, tx.Min, B.Bind)


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
    # whether the pointer parameters may be declared non-aliasing (`param_aliasing`): a code
    # generator that prints __restrict__ / noalias regardless must drop it where this is False
    noalias: bool = True


def build_intrinsics(hooked=None) -> IntrinsicTable:
    """The toolkit's table: portable math and device instructions, then the plugins' entries."""
    table = default_table()
    table.update(portable_device_table())
    table.update(hooked or {})
    return table


def _retire_nothing(lowering, stmt) -> None:
    """What retires an op lowered by a rule without `retire`: it completed when issued."""


class SimtLowering(SimtMemory, SimtBarriers, SimtThreads, SimtTileOps, SimtReductions, Dispatcher):
    """Lower one Tile IR PrimFunc (one T.Kernel) to a tvm.tirx.PrimFunc.

    The concerns live in mixins, one module each (each derives from `simt_host.SimtHost`, which
    declares what they share): `simt_memory` (allocation, element
    access), `simt_barriers` (barrier placement), `simt_threads` (thread mapping),
    `simt_tileops` and `simt_reduce` (the portable lowering of the tile ops). This class
    holds the dispatch, the kernel binding and the control-flow statements.

    What rules may use: `target`, `plan`, `threads`, `thread` (threadIdx.x), `views`
    (buffer name -> TIR buffer), `param_vars` (the handles of `plan.extra_params`), `source`,
    `options`, and the methods `lower`, `access`,
    `element`, `addr`, `store`, `stage_base_addr`, `region_index`, `in_bounds`, `iterate_layout`,
    `iterate_linear`, `emit_body`, `sync`, `instruction`, `err` and `claim`.
    """

    def __init__(
        self,
        func: N.PrimFunc,
        target: TargetDescription,
        rules: Optional[RuleTable] = None,
        intrinsics=None,
        options: Optional[dict] = None,
    ):
        self.func = func
        self.target = target
        self.rules = rules if rules is not None else RuleTable()
        self.options = dict(options or {})
        self.source = func.source
        self.kernel = func.kernel
        self.threads = prod(self.kernel.threads) if self.kernel.threads else 128
        if self.threads > 1024:
            raise TileCompileError(
                f"threads={self.threads} exceeds 1024 threads per block", self.kernel.span, self.source
            )
        self.plan = plan_for_target(func, self.threads, target, self.rules.all_rules())
        # one helper source per module (TVM emits each distinct source block once)
        self.device_lib = target.device_library + "".join(self.plan.device_sources)
        table = intrinsics if isinstance(intrinsics, IntrinsicTable) else build_intrinsics(intrinsics)
        self.intrinsics = table.bound(self, always=DEVICE_INSTRUCTIONS)
        # fp8 values are float32 inside expressions; fp8 memory holds the bits (simt_memory)
        self.ex = Fp8ExprLowerer(intrinsics=self.intrinsics, backend=target.name, source=self.source)
        self.ex.hold = self.hold_in_register
        self.ex.rounds_bfloat16 = target.bfloat16_computed_in_float32
        self.ex.int64_wrap_via = target.int64_wrap_via
        self.views = {}  # name -> tirx Buffer (global / smem view / local array)
        self.param_vars: Dict[str, Any] = {}  # plan.extra_params name -> its TIR handle variable
        self.stage = {}  # smem name -> current stage index expr
        self.ctx = _Ctx()
        self.pending_r = set()
        self.pending_w = set()
        self.lib_used = False
        self.smem_bytes = 0
        self.scratch_count = 0
        self.launch_threads = self.threads  # threads per block at launch (`launch`)
        self.launch_grid = tuple(self.kernel.grid)  # the grid at launch (`launch`)

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

    def apply_rules(self, op: str, stmt) -> bool:
        """Try the rules for `op` in order; True when one of them lowered `stmt`."""
        for rule in self.rules[op]:
            if rule(self, stmt) is not NotImplemented:
                return True
        return False

    def issue_rules(self, op: str, stmt, in_flight: int) -> Callable[[], None]:
        """Start `stmt` through the first of `op`'s rules that takes it (`LoweringRule.issue`; a
        plain-callable rule or the portable lowering completes it at once) and return what
        retires it."""
        for rule in self.rules[op]:
            issue = getattr(rule, "issue", None)
            if issue is None:
                if rule(self, stmt) is not NotImplemented:
                    return lambda: None
            elif issue(self, stmt, in_flight) is not NotImplemented:
                return functools.partial(getattr(rule, "retire", _retire_nothing), self, stmt)
        self.dispatch("emit_", stmt)
        return lambda: None

    def lower(self, e: N.Expr):
        """A Tile IR expression as a PrimExpr in the current thread iteration."""
        return self.ex.lower(e)

    # ------------------------------------------------------------------ entry
    def build(self) -> LoweredKernel:
        """The lowered kernel: a TIR PrimFunc over the tensor parameters and the launch facts."""
        func = self.func
        with IRBuilder() as ib:
            with B.prim_func():
                B.func_name(func.name)
                # no __restrict__ where threads may pass values through a tensor (param_aliasing;
                # TVM's host/device split marks the device function noalias anyway: LoweredKernel.noalias)
                B.func_attr({"global_symbol": func.name, "tir.noalias": may_promise_noalias(func)})
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
                for name in self.plan.extra_params:
                    self.param_vars[name] = B.arg(name, tx.Var(name, "handle"))
                self.emit_kernel()
        prim = ib.get()
        lk = LoweredKernel(
            prim,
            func.name,
            self.launch_grid,
            self.launch_threads,
            self.smem_bytes,
            self.plan,
            list(self.plan.notes),
            self.device_lib if self.lib_used else "",
            {op: names + ["portable"] for op, names in self.rules.describe().items()},
            noalias=may_promise_noalias(func),
        )
        return lk

    def emit_kernel(self):
        """The kernel's grid and thread binding: a "Kernel" rule, else the portable one."""
        if not self.apply_rules("Kernel", self.kernel):
            self.emit_Kernel(self.kernel)

    def emit_Kernel(self, k: N.Kernel):
        """Blocks as blockIdx.x/y/z, one thread axis; then allocations and the body."""
        frames = self.launch(k, self.threads)
        self.rasterize(k)
        self.alloc_all()
        self.emit_body(k.body)
        for fr in reversed(frames):
            fr.__exit__(None, None, None)

    def launch(self, k: N.Kernel, threads: int) -> list:
        """Open the launch frames: the grid as blockIdx.x/y/z and `threads` threads per block
        (a "Kernel" rule may launch more than the kernel's own threads, e.g. a producer warp, or
        another grid, e.g. a persistent one whose blocks loop over the kernel's tiles); returns
        the frames for the caller to exit in reverse order."""
        axes = ["blockIdx.x", "blockIdx.y", "blockIdx.z"]
        if len(k.grid) > 3:
            raise self.err("T.Kernel supports at most 3 grid dimensions on GPUs", k)
        frames = []
        for g, v, ax in zip(k.grid, k.block_vars, axes):
            fr = B.launch_thread(ax, self.lower(g))
            var = fr.__enter__()
            frames.append(fr)
            self.ex.bind(v.name, var)
        fr = B.launch_thread("threadIdx.x", threads)
        self.t = fr.__enter__()
        frames.append(fr)
        self.launch_threads = threads
        self.launch_grid = tuple(k.grid)
        return frames

    def rasterize(self, k: N.Kernel):
        """Bind the kernel's block indices to the launch indices in the kernel's block order
        (`block_order.kernel_block_order`; results are unchanged): T.use_swizzle visits 2-D grid
        blocks in panels of `panel_size` block rows, so that blocks running at the same time share
        operand tiles in L2; without the hint a kernel with a gemm and a 2-D grid takes the target's
        `gemm_block_panel`; otherwise the longest blocks run first when the trip count of the
        kernel's one pipelined loop grows with a block index and depends on nothing else (causal
        attention's query blocks), so they are not left for the last wave (in groups of about the
        target's `heavy_first_group_blocks` blocks)."""
        order = kernel_block_order(k, self.target.gemm_block_panel, self.target.heavy_first_group_blocks)
        if order == BlockOrder():
            return
        names = [v.name for v in k.block_vars]
        raw = [self.ex.variables[n] for n in names]
        grid = [self.lower(g) for g in k.grid] if order.panel or order.reverse_group > 1 else list(k.grid)
        for name, index in zip(names, logical_blocks(order, raw, grid, TIR_INDEX_OPS)):
            self.ex.bind(name, index)

    # ------------------------------------------------------------------ statements
    def emit_body(self, stmts):
        """Lower a statement list in order (inside a T.Parallel iteration: `emit_iteration_stmts`)."""
        if self.in_parallel:
            self.emit_iteration_stmts(stmts)
            return
        for s in stmts:
            self.emit_stmt(s)

    def emit_stmt(self, s):
        """Lower one statement: a tile op through its rules, then the portable `emit_<op>`."""
        op = type(s).__name__
        if isinstance(s, N.For) and s.kind == "pipelined" and not self.in_parallel:
            if self.apply_rules("Pipelined", s):
                return
        elif op in SIMT_OPS:
            self.refuse_fp8_accumulation(s)
            self.before_tile_op(s)
            if self.apply_rules(op, s):
                return
        self.dispatch("emit_", s)

    def refuse_fp8_accumulation(self, s):
        """Reductions over or into fp8 tiles and scans into them are refused: their accumulators
        take the destination's dtype here (an fp8 partial result would be rounded at every step)."""
        if isinstance(s, N.Reduce) and (is_fp8(s.src.dtype) or is_fp8(s.dst.dtype)):
            raise self.unsupported(f"T.reduce_{s.kind} on fp8 tiles: copy them into a float32 tile first", s)
        if isinstance(s, N.Cumsum) and is_fp8(s.dst.dtype):
            raise self.unsupported(
                f"T.cumsum into an fp8 buffer ({s.dst.dtype}): scan into a float32 buffer and copy it", s
            )

    def no_handler(self, prefix: str, node: object, *args: Any) -> Any:
        """A statement class without a rule or an `emit_` method: unsupported on this backend."""
        raise self.unsupported(f"statement {type(node).__name__}", node)

    def before_tile_op(self, s):
        """The barrier a tile op needs before it touches shared memory (placed before any rule
        runs, so rules see the statement's operands ready). Inside a T.Parallel body copies and
        atomics are per-thread and need none."""
        if not (self.in_parallel and isinstance(s, (N.Copy, N.Atomic))):
            self.touch((s,))

    def emit_Alloc(self, s):
        """Allocations are declared up front (`alloc_all`)."""
        pass

    def emit_Hint(self, s):
        """Hints act through the plan and the grid mapping; nothing to emit."""
        pass  # use_swizzle is handled by the launcher's grid mapping; layouts by the plan

    def hold_in_register(self, value):
        """`value` computed once, before the statement being lowered, into a one-element register
        buffer; returns its reading (`ExprLowerer.hold`)."""
        cell = B.alloc_buffer((1,), dtype_of(value), scope="local")
        B.buffer_store(cell, value, [0])
        return tx.BufferLoad(cell, [0])

    def emit_Let(self, s: N.Let):
        """Bind a Tile IR variable to a value computed once.

        A value involving bfloat16 is held in a one-element float32 register buffer and
        converted back at each use: targets whose TVM pipeline legalizes bfloat16 arithmetic
        into float32 rewrite stores but neither the type nor the value of a bound name (a
        bfloat16 name failed TVM's structural type check; a bound value still read a
        bfloat16 shared tile that the legalization had replaced: "Load/Store of buffer
        occurred before its declaration")."""
        self.touch((s,))
        value = self.lower(s.value)
        if hasattr(value, "ty") and involves_bfloat16(s):  # (a whole-tile value is not an expression)
            self.ex.bind_let(s, cast_to(self.hold_in_register(tx.Cast("float32", value)), s.var.dtype))
            return
        var = B.Bind(value)
        self.ex.bind_let(s, var)

    def emit_Store(self, s: N.Store):
        """An element store; outside a thread iteration only thread 0 writes shared or global memory."""
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
        """A run-time branch; each side starts from the same pending shared accesses."""
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

    def emit_For(self, s: N.For):
        """A sequential loop (also a pipelined loop that no "Pipelined" rule took)."""
        begin = self.lower(s.begin)
        extent = self.lower(s.extent)
        if not self.in_parallel:
            r, w = self.smem_sets(s.body)
            self.touch(s.body)
            self.pending_r |= r | w
            self.pending_w |= w
        # a run-time trip count stays a serial loop even under T.unroll: unrolling is a hint, and
        # TVM's UnrollLoop refuses a non-constant extent ("Cannot unroll non-constant loop")
        constant = isinstance(extent, tx.IntImm)
        kind = (
            B.unroll
            if constant
            and (s.kind == "unroll" or self.in_parallel and isinstance(s.extent, N.Const) and s.extent.value <= 8)
            else B.serial
        )
        with kind(begin, begin + extent) as v:
            self.ex.bind(s.var.name, v)
            self.emit_body(s.body)

    def emit_While(self, s: N.While):
        """A `while` loop at block level. Every thread tests the condition, whose values
        are the same in all of them (block-level state: alloc_var registers every thread writes,
        shared or global memory), so all threads take the same number of iterations and the body's
        barriers are reached by all. The test is kept in a register, computed before the loop and
        again at the end of each iteration: whatever lowering the condition emits before its
        value (held values) then runs before every test, and a barrier goes before the re-test
        when the body wrote shared memory the condition reads, or before every test when the
        condition reads global memory (which one thread may have written: the barrier makes the
        write visible to the block, so no thread leaves the loop alone), and then also a barrier
        at the start of each iteration, after every thread has read the test and before the body
        may write what it read (without it the GPU hung: benchmarks/results/h100-session14/).
        Inside a T.Parallel body (per-thread code) each thread runs its own loop: no barrier."""
        if self.in_parallel:
            self.emit_thread_while(s)
            return
        test = (N.Let(N.Var("_"), s.cond),)
        r, w = self.smem_sets(test + tuple(s.body))
        self.touch(test + tuple(s.body))
        self.pending_r |= r | w
        self.pending_w |= w
        reads_global = any(
            isinstance(n, N.Load) and self.plan.storage.get(n.buffer.name) == "global" for n in walk(s.cond)
        )
        go = B.alloc_buffer((1,), "bool", scope="local")
        IRBuilder.name("while_test", go)
        if reads_global:
            self.sync()
        B.buffer_store(go, self.ex.lower_as(s.cond, "bool"), [0])
        skipped = (set(self.pending_r), set(self.pending_w))  # what is pending if the body never runs
        with B.While(tx.BufferLoad(go, [0])):
            if reads_global:
                # every thread has read the test before any thread's body may write what it read
                # (else a fast writer changes the value under a slow reader, which then leaves alone)
                self.sync()
            self.emit_body(s.body)
            if reads_global:
                self.sync()
            else:
                self.touch_expr_only(s.cond)
            B.buffer_store(go, self.ex.lower_as(s.cond, "bool"), [0])
        self.pending_r |= skipped[0]
        self.pending_w |= skipped[1]

    def emit_thread_while(self, s: N.While):
        """A `while` inside a T.Parallel iteration: this thread's own loop, its test in a register
        (what lowering the condition emits before its value then runs before every test). Its
        condition differs between threads, so no barrier may be inside: T.Parallel bodies hold
        none (`touch`), and the frontend refuses tile operations and T.sync_threads() there."""
        go = B.alloc_buffer((1,), "bool", scope="local")
        IRBuilder.name("thread_while_test", go)
        B.buffer_store(go, self.ex.lower_as(s.cond, "bool"), [0])
        with B.While(tx.BufferLoad(go, [0])):
            self.emit_body(s.body)
            B.buffer_store(go, self.ex.lower_as(s.cond, "bool"), [0])

    # ---------------------------------------------------------------- Parallel
    def emit_Parallel(self, p: N.Parallel):
        """A T.Parallel loop: iterations spread by the layout of the fragment it writes (or linearly).
        A store of a select that is uniform over the loop on most blocks (`uniform_select`: causal
        and edge masks) is emitted behind the conditions that make it so, with the original last."""
        self.touch((p,))
        split = None if self.in_parallel or any(self.smem_sets((p,))) else uniform_select(p)
        if split is None:
            self.emit_parallel_loop(p)
            return
        with B.If(self.lower(split.all_true)):
            with B.Then():
                self.emit_parallel_loop(split.when_true)
            with B.Else():
                with B.If(self.lower(split.all_false)):
                    with B.Then():
                        self.emit_parallel_loop(split.when_false)
                    with B.Else():
                        self.emit_parallel_loop(p)

    def emit_parallel_loop(self, p: N.Parallel):
        """The iterations of a T.Parallel loop (its barrier is placed already)."""
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

    iteration_layout: Any = None  # the anchor layout of the T.Parallel iteration being lowered

    def emit_parallel_body(self, stmts, layout):
        """The body of a T.Parallel iteration (`emit_iteration_stmts`)."""
        was = self.in_parallel, self.iteration_layout
        self.in_parallel, self.iteration_layout = True, layout
        try:
            self.emit_iteration_stmts(stmts)
        finally:
            self.in_parallel, self.iteration_layout = was

    def emit_iteration_stmts(self, stmts):
        """Statements of a T.Parallel iteration, also those nested in its `if` / `for` / `while`
        bodies: where the iteration's layout replicates row values over several threads, a store
        outside registers and an atomic run on one owner only (each replica runs the same
        iteration: an atomic on every one would add once per replica)."""
        layout = self.iteration_layout
        for st in stmts:
            if isinstance(st, N.Store) or isinstance(st, N.Atomic):
                needs_primary = isinstance(layout, (RowLayout, StridedRowLayout)) and not (
                    isinstance(st, N.Store) and self.plan.storage[st.buffer.name] == "reg"
                )
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


# ---------------------------------------------------------------------- utilities


def lower_kernel(
    func: N.PrimFunc,
    target: TargetDescription,
    rules: Optional[RuleTable] = None,
    intrinsics=None,
    options: Optional[dict] = None,
) -> LoweredKernel:
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

    with _THREAD_SYNC_SWAP:
        if PIPELINE_NAME not in cp.PIPELINE_MAP:
            cp.register_tir_pipeline(PIPELINE_NAME, _pipeline_factory(tvm, s_tir, sp, cp))
    return PIPELINE_NAME


# The pipeline swaps TVM's module attribute s_tir.transform.ThreadSync while it runs: process-wide
# state, so every such run (and the registration) holds this lock; compiles on other threads wait.
_THREAD_SYNC_SWAP = threading.RLock()


def _pipeline_factory(tvm, s_tir, sp, cp):
    """The factory `register_simt_pipeline` registers (see there)."""
    original = s_tir.transform.ThreadSync

    def factory(**kwargs):
        base, host, device = (
            sp.default_s_tir_pipeline() if hasattr(sp, "default_s_tir_pipeline") else cp.get_tir_pipeline("default")
        )

        @tvm.transform.module_pass(opt_level=0)
        def _pipeline(mod, ctx):
            def thread_sync(scope):
                if scope in ("shared", "shared.dyn"):
                    return tvm.transform.Sequential([])
                return original(scope)

            with _THREAD_SYNC_SWAP:
                s_tir.transform.ThreadSync = thread_sync
                try:
                    return base(mod)
                finally:
                    s_tir.transform.ThreadSync = original

        return _pipeline, host, device

    return factory
