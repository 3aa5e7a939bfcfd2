"""CPU lowering: the shared TIR lowering plus the CPU's grid, GEMM micro-kernel, atomics and print.

* Grid: the blocks are flattened into one `parallel` loop, which TVM runs on
  its thread pool; each block's shared/fragment/local buffers are allocated
  inside the loop body, so every worker has its own.
* T.gemm: packed panels and a register-blocked micro-kernel sized for the
  target's ISA (tile_cpu.gemm); operands staged by a T.copy from a global
  tensor only for that gemm are read from the tensor (tile_cpu.fuse); a
  T.Pipelined loop prefetches its next tiles (tile_cpu.prefetch).
* Atomics: calls into support.c (compare-and-swap loops, real atomics).
* T.print: calls into support.c (printf + fflush).
* fp8: held in float32 with exact conversions (tilecore.lowering.fp8); TVM's own fp8
  legalization on LLVM rounds wrongly.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

import tvm
from tvm import tirx as tx

from tilecore.ir import nodes as N
from tilecore.ir.types import bits, is_float, is_fp8
from tilecore.lowering import whole_gemm
from tilecore.lowering.fp8 import Fp8Lowering
from tilecore.lowering.intrinsics import IntrinsicTable, dtype_of
from tilecore.lowering.tir_expr import cast_to, involves_bfloat16, round_to_bfloat16, tir_const
from tilecore.lowering.tir_stmt import TirLowering, seq

from . import dot_gemm, gemm_grid
from .fuse import buffer_mentions, fuse_operand_copies
from .gemm import lower_gemm, micro_tile
from .prefetch import global_copies, prefetch_next


class CpuLowering(Fp8Lowering, TirLowering):
    """Tile IR -> TIR for the LLVM CPU target."""

    backend_name = "cpu"
    # TVM's LLVM pipeline legalizes bfloat16 and drops every intermediate rounding
    # (a chain of bfloat16 operations kept float32 precision): hold it in float32,
    # rounded explicitly after each operation (see ExprLowerer.bfloat16_as_float32)
    bfloat16_as_float32 = True

    def __init__(
        self,
        func: N.PrimFunc,
        intrinsics: IntrinsicTable,
        vector_bits: int = 128,
        rules: Optional[Dict] = None,
        vector_regs: int = 16,
        caches: Optional[Dict[str, int]] = None,
        arch: str = "",
        features: Sequence[str] = (),
    ):
        super().__init__(func, intrinsics, rules, check_bounds=True)
        self.vector_bits = vector_bits
        self.vector_regs = vector_regs
        self.caches = caches or {"l1": 32 * 1024, "l2": 512 * 1024, "l3": 8 * 1024 * 1024}
        self.mentions = buffer_mentions(func.body)  # for fuse_operand_copies
        self.block_vars: List[Any] = []  # lowered block indices, for T.print
        self.needs_support = False  # calls into support.c (atomics, print): link it in
        self.arch, self.features = arch, tuple(features)
        self.native: Set[Tuple[str, Tuple[str, ...]]] = set()  # (C source, flags) linked in (dot_gemm)
        self.dynamic_schedule = True  # blocks taken from an atomic counter (see lower_Kernel)
        self.max_tasks = 64

    def vector_lanes(self, dtype: str) -> int:
        if dtype == "bool":
            return 1
        return max(1, self.vector_bits // max(8, bits(dtype)))

    # ----------------------------------------------------------------- names
    def lower_Let(self, s: N.Let):
        """A name whose value involves bfloat16 is held in a one-element local buffer.

        TVM's LLVM pipeline legalizes bfloat16 (computed in float32, stored as
        16-bit words) in stores but not in `Bind` values: a bfloat16 name failed to
        compile and a float32 name computed from a bfloat16 load read the stored
        bits as an integer. A buffer store is legalized correctly; a bfloat16 name
        is kept as its exactly rounded float32 value (a held cell, see
        `bfloat16_as_float32`).
        """
        if not involves_bfloat16(s):
            return super().lower_Let(s)
        cell = self.local_buffer([1], s.var.dtype, s.var.name)
        value = self.lower_expr(s.value, s.var.dtype)
        self.expr.bind_let(s, tx.BufferLoad(cell, [0]))
        self.set_range(s.var.name, None, None)
        return seq([tx.AllocBuffer(cell), self.store(cell, value, [0])])

    def vectorizable(self, body) -> bool:
        """The shared rule, and no names bound in the body.

        TVM's vectorizer turns a `Bind` into a vector variable, but when some
        later statement of the body cannot be vectorized (a NaN-propagating
        min/max, a store to bfloat16) it falls back to a scalar loop that still
        uses the old scalar variable, which is then unbound (`variables (a_v,)
        are used, but are not passed in`). A bool name fails outright (`IntImm
        can only take scalar, but boolx8`). LLVM still vectorizes the scalar
        loop where it can.
        """
        from tilecore.ir.visitor import walk_stmts

        if any(isinstance(st, N.Let) for st in walk_stmts(body)):
            return False
        return super().vectorizable(body)

    # ----------------------------------------------------------------- grid
    def lower_Kernel(self, s: N.Kernel):
        plan = whole_gemm.match(s)  # a grid that is one whole GEMM: one cache-blocked GEMM
        whole = None
        tiles = self.tile_gemm(plan.a.dtype, plan.b.dtype, plan.c.dtype, plan.bk) if plan is not None else None
        if tiles is not None:
            whole = dot_gemm.lower_whole(self, tiles, plan, self.caches, os.cpu_count() or 1)
        elif plan is not None:
            whole = gemm_grid.lower(self, plan, self.micro_tile(plan.acc), self.caches)
        if whole is not None:
            return whole
        grid = [self.index(g) for g in s.grid]
        tvars = [tx.Var(v.name, "int32") for v in s.block_vars]
        for v, tv, g in zip(s.block_vars, tvars, s.grid):
            self.expr.bind(v.name, tv)
            r = self.index_range(g)
            self.set_range(v.name, 0, r[1] - 1 if r is not None else None)
        self.block_vars = tvars
        body = self.lower_body(s.body)
        if all(isinstance(g, N.Const) and int(g.value) == 1 for g in s.grid):
            binds = [tx.Bind(tv, tir_const(0, "int32")) for tv in tvars]
            return seq(binds + [body])
        total = grid[0]
        for g in grid[1:]:
            total = total * g
        guard = self.grid_guard(s, grid)

        def block_body(blk):
            binds = []
            stride = None
            # block index 0 varies fastest, as in a GPU grid (bx is the column of blocks)
            for tv, g in zip(tvars, grid):
                idx = blk if stride is None else tx.floordiv(blk, stride)
                binds.append(tx.Bind(tv, tx.floormod(idx, g)))
                stride = g if stride is None else stride * g
            return seq(binds + [body])

        # Dynamic scheduling pays for long blocks (GEMM main loops), where one preempted
        # worker would stall the grid; streaming kernels keep TVM's static split, whose
        # contiguous halves stream (and first-touch pages) better.
        from tilecore.ir.visitor import walk_stmts

        long_blocks = any(isinstance(st, (N.Gemm, N.For)) for st in walk_stmts(s.body))
        if not (self.dynamic_schedule and long_blocks):
            blk = tx.Var("block", "int32")
            return seq(guard + [tx.For(blk, 0, total, tx.ForKind.PARALLEL, block_body(blk))])
        # Dynamic schedule: a few parallel tasks, each taking block numbers from a shared
        # atomic counter until the grid is done (TVM's pool splits a loop statically).
        counter = self.counter_buffer("block_counter", self.max_tasks)
        blk = tx.Var("block", "int32")
        workers = tx.Min(total, tir_const(self.max_tasks, "int32"))
        return seq(
            guard + [tx.AllocBuffer(counter), self.taken_from_counter(counter, blk, total, block_body(blk), workers)]
        )

    SLOT_STRIDE = 16  # int32 elements: each worker's unit slot on its own 64-byte line

    def counter_buffer(self, name: str, workers: int):
        """The int32 buffer `taken_from_counter` needs: the counter, then one slot per worker (the
        unit it holds). The slots live outside the parallel loop: a slot allocated inside its body
        was lost by TVM's passes in some whole-grid GEMMs ("used before its definition")."""
        return self.local_buffer([(1 + workers) * self.SLOT_STRIDE], "int32", name)

    def taken_from_counter(self, counter, unit: tx.Var, units, body: tx.Stmt, workers) -> tx.Stmt:
        """`body` for unit = 0 .. units - 1, each run by whichever of `workers` parallel tasks takes
        it first from the atomic `counter` (from `counter_buffer`: element 0 counts, reset to 0 here
        by the launching thread; worker w keeps its unit at element (1 + w) * SLOT_STRIDE)."""
        self.needs_support = True
        task = tx.Var("task", "int32")
        slot = (task + 1) * self.SLOT_STRIDE
        current = tx.BufferLoad(counter, [slot])
        take = tx.BufferStore(
            counter,
            tx.call_extern("int32", "tilecore_cpu_next_block", tx.address_of(tx.BufferLoad(counter, [0]))),
            [slot],
        )
        loop = tx.While(tx.LT(current, units), seq([tx.Bind(unit, current), body, take]))
        return seq(
            [
                tx.BufferStore(counter, tir_const(0, "int32"), [0]),
                tx.For(task, 0, workers, tx.ForKind.PARALLEL, seq([take, loop])),
            ]
        )

    def grid_guard(self, s: N.Kernel, grid) -> list:
        """The blocks of a launch are numbered with one int32 (the flattened grid): a static grid
        with more blocks is a compile error at its line; a dynamic one is checked at launch
        (every dimension >= 0, the product <= 2^31 - 1), never wrapped into a short grid."""
        limit = (1 << 31) - 1
        consts = [g for g in s.grid if isinstance(g, N.Const)]
        if len(consts) == len(s.grid):
            count = 1
            for g in consts:
                count *= int(g.value)
            if count > limit:
                raise self.error(
                    f"the grid {tuple(int(g.value) for g in consts)} has {count} blocks, more than "
                    f"backend cpu can number ({limit}, 32-bit block indices): give each block more "
                    f"work",
                    s,
                )
            return []
        total = tir_const(1, "int64")
        fits = tir_const(True, "bool")
        for g in grid:
            wide = tx.Cast("int64", g)
            fits = tx.And(fits, tx.GE(wide, tir_const(0, "int64")))
            total = total * wide
        fits = tx.And(fits, tx.LE(total, tir_const(limit, "int64")))
        where = f"{s.span}: " if s.span is not None and s.span.line > 0 else ""
        return [
            tx.AssertStmt(
                fits,
                tvm.ir.StringImm("RuntimeError"),
                [
                    tvm.ir.StringImm(
                        f"{where}the grid of this T.Kernel has more than {limit} blocks for these dynamic dimensions, "
                        f"more than backend cpu can number (32-bit block indices): split the work into smaller calls"
                    )
                ],
            )
        ]

    def lower_body(self, body: N.Body) -> tx.Stmt:
        """Statements as the shared lowering does, GEMM operands taken from global where staged."""
        return super().lower_body(fuse_operand_copies(body, self.mentions))

    # ----------------------------------------------------------------- while loops
    def lower_While(self, s: N.While):
        """`while cond: body` as a TIR while loop. What lowering the condition puts before its
        statement (bounds checks, held values) must run before every test, so then the loop is
        `while (true) { <that>; if (!cond) break; body }`."""
        self._pending.append([])
        try:
            cond = self.lower_expr(s.cond, "bool")
        finally:
            before = self._pending.pop()
        body = self.lower_body(s.body)
        if not before:
            return tx.While(cond, body)
        leave = tx.IfThenElse(tx.Not(cond), tx.Break(), None)
        return tx.While(tir_const(True, "bool"), seq(before + [leave, body]))

    # ----------------------------------------------------------------- pipelined loops
    def lower_For(self, s: N.For):
        """Loops as the shared lowering does; a T.Pipelined loop also prefetches its next tiles."""
        loop = super().lower_For(s)
        if s.kind != "pipelined" or not isinstance(loop, tx.For):
            return loop
        copies = global_copies(s.body)
        if not copies:
            return loop
        fetch = prefetch_next(self, s, loop.loop_var, copies, self.caches["l2"] // 2)
        if fetch is None:
            return loop
        return tx.For(loop.loop_var, loop.min, loop.extent, loop.kind, seq([fetch, loop.body]))

    # ----------------------------------------------------------------- gemm
    def micro_tile(self, acc_dtype: str):
        """The register block of the GEMM micro-kernel for this ISA and accumulator dtype."""
        return micro_tile(self.vector_bits, self.vector_regs, acc_dtype)

    def tile_gemm(self, a_dtype: str, b_dtype: str, c_dtype: str, k_step: int):
        """The matrix / dot-product multiply a GEMM takes (tile_cpu.dot_gemm), or None."""
        return dot_gemm.kind_of(a_dtype, b_dtype, c_dtype, k_step, self.arch, self.features)

    def lower_Gemm(self, s: N.Gemm):
        """Packed panels + the ISA's register-blocked micro-kernel (tile_cpu.gemm; bfloat16 pairs on
        AMX / VNNI: tile_cpu.dot_gemm), else the portable loop."""
        out = None
        k_step = s.b.matrix_shape()[1 if s.transpose_b else 0]
        c_dtype = s.c.buffer.dtype
        tiles = (
            self.tile_gemm(s.a.buffer.dtype, s.b.buffer.dtype, c_dtype, k_step)
            if c_dtype in ("float32", "int32")
            else None
        )
        if tiles is not None:  # (a sum tile of the accumulator dtype: the micro-kernel reads and writes it)
            out = dot_gemm.lower_block(self, tiles, s)
        if out is None:
            out = lower_gemm(self, s, self.micro_tile, self.caches)
        return out if out is not None else super().lower_Gemm(s)

    # ----------------------------------------------------------------- atomics
    def atomic_call(self, kind: str, tb, indices, value, node):
        dt = str(tb.dtype)
        if dt == "bool":
            raise self.unsupported("atomics on bool tensors", node)
        if is_fp8(dt):
            raise self.unsupported(f"atomics on fp8 tensors ({dt}): accumulate in float32", node)
        self.needs_support = True
        if dt in ("float16", "bfloat16"):
            v = cast_to(value, "float32")
        else:
            v = cast_to(value, dt)
        return tx.Evaluate(
            tx.call_extern(
                "int32", f"tilecore_cpu_atomic_{kind}_{dt}", tx.address_of(tx.BufferLoad(tb, list(indices))), v
            )
        )

    def lower_Atomic(self, s: N.Atomic):
        dst = s.dst
        tdst = self.buffer(dst.buffer)
        if isinstance(s.value, N.Region):
            src = s.value
            tsrc = self.buffer(src.buffer)
            shape = list(dst.squeezed_shape())

            def body(idx):
                di = self.region_access(dst, idx)
                si = self.region_access(src, idx)
                sc = self.in_bounds(src, si)
                v = self.load(tsrc, si)
                if sc is not None:
                    v = tx.if_then_else(sc, v, tir_const(0, dtype_of(v)))
                call = self.atomic_call(s.kind, tdst, di, v, s)
                dc = self.in_bounds(dst, di)
                return tx.IfThenElse(dc, call, None) if dc is not None else call

            return self.loop_nest(shape, body, vectorize=False)
        di = [self.index(e) for e in dst.starts]
        value = self.lower_expr(s.value)
        call = self.atomic_call(s.kind, tdst, di, value, s)
        # an element atomic outside the tensor is an indexing error (reported, never performed)
        return self.checked_store(dst.buffer, dst.starts, di, call, s)

    # ----------------------------------------------------------------- print
    def _block_args(self):
        bv = list(self.block_vars) + [tir_const(0, "int32")] * 3
        return [tir_const(max(1, len(self.block_vars)), "int32")] + [cast_to(b, "int32") for b in bv[:3]]

    def lower_Print(self, s: N.Print):
        self.needs_support = True
        msg = s.msg or ""
        if isinstance(s.value, N.Buffer):
            b = s.value
            tb = self.buffer(b)
            if b.static_shape() is None:
                shape = [cast_to(x, "int32") for x in tb.shape]
            else:
                shape = list(b.shape)
            head = tx.Evaluate(
                tx.call_extern("int32", "tilecore_cpu_print_buffer_head", msg, *self._block_args(), b.name)
            )
            ndim = max(1, len(shape))

            def edge_count(idx, at_edge):
                # how many trailing axes are at their first (or last) index: brackets to open (close)
                count = tir_const(0, "int32")
                for k in range(len(shape)):
                    inner = tx.const(1, "bool")
                    for m in range(k, len(shape)):
                        inner = tx.And(inner, at_edge(idx[m], shape[m]))
                    count = count + tx.Cast("int32", inner)
                return count if shape else tir_const(1, "int32")

            def elem(idx):
                v = self.load(tb, idx)
                opened = edge_count(idx, lambda i, n: tx.EQ(i, 0))
                closed = edge_count(idx, lambda i, n: tx.EQ(i, n - 1))
                rank = tir_const(ndim, "int32")
                if is_float(b.dtype):
                    return tx.Evaluate(
                        tx.call_extern(
                            "int32",
                            "tilecore_cpu_print_elem_float",
                            cast_to(v, "float64"),
                            _float_kind(b.dtype),
                            opened,
                            closed,
                            rank,
                        )
                    )
                return tx.Evaluate(
                    tx.call_extern("int32", "tilecore_cpu_print_elem_int", cast_to(v, "int64"), opened, closed, rank)
                )

            return seq([head, self.loop_nest(shape, elem, vectorize=False)])
        v = self.lower_expr(s.value)
        dt = s.value.dtype  # a bfloat16 value is held in float32 (bfloat16_as_float32)
        if dt == "bool":
            fn, arg = "tilecore_cpu_print_bool", tx.Cast("int32", v)
        elif is_float(dt):
            if dt == "bfloat16":  # TVM may hold a bfloat16 value unrounded in float32
                v = round_to_bfloat16(cast_to(v, "float32"))
            return tx.Evaluate(
                tx.call_extern(
                    "int32",
                    "tilecore_cpu_print_float",
                    msg,
                    *self._block_args(),
                    cast_to(v, "float64"),
                    _float_kind(dt),
                )
            )
        else:
            fn, arg = "tilecore_cpu_print_int", cast_to(v, "int64")
        return tx.Evaluate(tx.call_extern("int32", fn, msg, *self._block_args(), arg))


def _float_kind(dtype: str):
    """support.c's float format selector: numpy's str() differs per dtype (bfloat16 -> 0)."""
    return tir_const({"float16": 16, "float32": 32, "float64": 64}.get(dtype, 0), "int32")
