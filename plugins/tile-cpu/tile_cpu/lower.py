"""CPU lowering: the shared TIR lowering plus the CPU's grid, GEMM micro-kernel, atomics and print.

* Grid: the blocks are flattened into one `parallel` loop, which TVM runs on
  its thread pool; each block's shared/fragment/local buffers are allocated
  inside the loop body, so every worker has its own.
* T.gemm: a register-blocked micro-kernel. C is processed in MR x NR tiles
  held in a small accumulator buffer that LLVM keeps in vector registers
  (i unrolled, j vectorized, one fused multiply-add per element and k); B is
  packed into a contiguous float panel when it is transposed or needs a dtype
  conversion, A into MR-interleaved panels, so the inner loop reads
  sequentially.
* Atomics: calls into support.c (compare-and-swap loops, real atomics).
* T.print: calls into support.c (printf + fflush).
"""
from __future__ import annotations

from typing import Dict, Optional

from tvm import tirx as tx

from tilecore.ir import nodes as N
from tilecore.ir.types import bits, is_float
from tilecore.lowering.intrinsics import IntrinsicTable, dtype_of
from tilecore.lowering.tir_expr import cast_to, round_to_bfloat16, tir_const
from tilecore.lowering.tir_stmt import TirLowering, accum_dtype, seq


class CpuLowering(TirLowering):
    """Tile IR -> TIR for the LLVM CPU target."""

    backend_name = "cpu"

    def __init__(self, func: N.PrimFunc, intrinsics: IntrinsicTable, vector_bits: int = 128,
                 rules: Optional[Dict] = None):
        super().__init__(func, intrinsics, rules, check_bounds=True)
        self.vector_bits = vector_bits
        self.block_vars = []  # lowered block indices, for T.print
        self.needs_support = False  # calls into support.c (atomics, print): link it in
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
        is kept as its exactly rounded float32 value, and each use converts back.
        """
        if not _involves_bfloat16(s):
            return super().lower_Let(s)
        dtype = "float32" if s.var.dtype == "bfloat16" else s.var.dtype
        cell = self.local_buffer([1], dtype, s.var.name)
        value = self.lower_expr(s.value, dtype)
        if s.var.dtype == "bfloat16":
            value = round_to_bfloat16(value)
        self.expr.bind(s.var.name, tx.BufferLoad(cell, [0]))
        self.set_range(s.var.name, None, None)
        return seq([tx.AllocBuffer(cell), tx.BufferStore(cell, value, [0])])

    def vectorizable(self, body) -> bool:
        """The shared rule, and no names in a body that touches bfloat16.

        TVM's vectorizer loses a `Bind` name when the vector body stores to a
        bfloat16 buffer (`variables (t,) are used, but are not passed in`), and
        the one-element buffers of lower_Let stay scalar anyway.
        """
        from tilecore.ir.visitor import walk, walk_stmts

        stmts = list(walk_stmts(body))
        if any(isinstance(st, N.Let) for st in stmts) and any(
                getattr(n, "dtype", None) == "bfloat16" or
                getattr(getattr(n, "buffer", None), "dtype", None) == "bfloat16"
                for st in stmts for n in walk(st)):
            return False
        return super().vectorizable(body)

    # ----------------------------------------------------------------- grid
    def lower_Kernel(self, s: N.Kernel):
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
            return tx.For(blk, 0, total, tx.ForKind.PARALLEL, block_body(blk))
        # Dynamic schedule: a few parallel tasks, each taking block numbers from a shared
        # atomic counter until the grid is done (TVM's pool splits a loop statically).
        self.needs_support = True
        counter = self.local_buffer([1], "int32", "block_counter")
        current = self.local_buffer([1], "int32", "block_id")
        task = tx.Var("task", "int32")
        blk = tx.Var("block", "int32")

        def take():
            return tx.BufferStore(current, tx.call_extern(
                "int32", "tilecore_cpu_next_block", tx.address_of(tx.BufferLoad(counter, [0]))), [0])

        loop = tx.While(tx.LT(tx.BufferLoad(current, [0]), total),
                        seq([tx.Bind(blk, tx.BufferLoad(current, [0])), block_body(blk), take()]))
        tasks = tx.Min(total, tir_const(self.max_tasks, "int32"))
        return seq([tx.AllocBuffer(counter), tx.BufferStore(counter, tir_const(0, "int32"), [0]),
                    tx.For(task, 0, tasks, tx.ForKind.PARALLEL,
                           seq([tx.AllocBuffer(current), take(), loop]))])

    # ----------------------------------------------------------------- gemm
    def lower_Gemm(self, s: N.Gemm):
        M, Nn, K, a_idx, b_idx, c_idx = self.gemm_operands(s)
        ta, tb, tc = self.buffer(s.a.buffer), self.buffer(s.b.buffer), self.buffer(s.c.buffer)
        acc_t = accum_dtype(s.c.buffer.dtype)
        lanes = self.vector_lanes(acc_t)
        if lanes < 2 or Nn < lanes or not (is_float(acc_t) or acc_t in ("int32", "int64")):
            return super().lower_Gemm(s)
        # vector registers: 32 with AVX-512, SVE and NEON; 16 with AVX2 / SSE
        regs = 32 if self.vector_bits >= 512 or self.vector_bits == 128 else 16
        nr_vec = 2 if Nn >= 2 * lanes else 1
        NR = nr_vec * lanes
        mr_cap = max(1, min(M, (regs - 6) // nr_vec, 12))
        # the largest register-friendly MR that divides M; otherwise the cap plus a remainder pass
        MR = next((m for m in range(mr_cap, 3, -1) if M % m == 0), mr_cap)
        m_full = (M // MR) * MR
        n_full = (Nn // NR) * NR
        stmts = []
        if s.clear_accum:
            stmts.append(self.loop_nest([M, Nn], lambda ij: self.store(tc, tir_const(0, acc_t), c_idx(*ij)),
                                        dtype=str(tc.dtype)))

        # Pack B's full column panels as [n_full/NR][K][NR] in the accumulator dtype: the
        # micro-kernel then streams one contiguous panel (transposes and conversions done once).
        bp = self.local_buffer([max(1, n_full // NR), K, NR], acc_t, "Bpack")
        jo, k = self.fresh("jo"), self.fresh("k")
        stmts.append(tx.AllocBuffer(bp))
        stmts.append(tx.For(jo, 0, n_full // NR, tx.ForKind.SERIAL, tx.For(k, 0, K, tx.ForKind.SERIAL,
                     self.loop_nest([NR], lambda j: tx.BufferStore(
                         bp, cast_to(self.load(tb, b_idx(k, jo * NR + j[0])), acc_t), [jo, k, j[0]]),
                         dtype=acc_t))))

        # Pack A's full row panels as [m_full/MR][K][MR] when it pays (several column
        # panels reuse each): the micro-kernel then reads A as one contiguous stream.
        # Only when the unpacked A rows and the B panel would not share L1 (about 32 KiB of
        # the 48 KiB): packing costs strided reads, which short K does not repay.
        l1_bytes = (MR + NR) * K * 4
        pack_a = bool(m_full) and n_full >= 2 * NR and (l1_bytes > 32 * 1024 or acc_t != s.a.buffer.dtype)
        if pack_a:
            ap = self.local_buffer([m_full // MR, K, MR], acc_t, "Apack")
            io, k, i = self.fresh("io"), self.fresh("k"), self.fresh("i")
            stmts.append(tx.AllocBuffer(ap))
            # i innermost: contiguous stores of MR values (k innermost would scatter)
            stmts.append(tx.For(io, 0, m_full // MR, tx.ForKind.SERIAL, tx.For(k, 0, K, tx.ForKind.SERIAL,
                         tx.For(i, 0, MR, tx.ForKind.UNROLLED, tx.BufferStore(
                             ap, cast_to(self.load(ta, a_idx(io * MR + i, k)), acc_t), [io, k, i])))))

        def micro(row0, rows, mr, col0, cols, nr, b_panel, a_panel=False):
            """C[row0:row0+rows, col0:col0+cols] += A B with mr x nr register tiles."""
            # one small accumulator per row (a few vector registers each): small stack
            # arrays that LLVM promotes to registers, unlike one big buffer
            accs = [self.local_buffer([nr], acc_t, f"acc{i}") for i in range(mr)]
            io, jo, k = self.fresh("io"), self.fresh("jo"), self.fresh("k")
            r = lambda io_, i_: row0 + io_ * mr + i_  # noqa: E731
            c = lambda jo_, j_: col0 + jo_ * nr + j_  # noqa: E731
            if b_panel:
                b_val = lambda k_, j_: tx.BufferLoad(bp, [jo, k_, j_])  # noqa: E731
            else:
                b_val = lambda k_, j_: cast_to(self.load(tb, b_idx(k_, c(jo, j_))), acc_t)  # noqa: E731
            load_c, fma, store_c = [], [], []
            for i, acc in enumerate(accs):
                j1, j2, j3 = self.fresh("j"), self.fresh("j"), self.fresh("j")
                load_c.append(tx.For(j1, 0, nr, tx.ForKind.VECTORIZED, tx.BufferStore(
                    acc, cast_to(self.load(tc, c_idx(r(io, i), c(jo, j1))), acc_t), [j1])))
                if a_panel:
                    a_val = tx.BufferLoad(ap, [io, k, i])
                else:
                    a_val = cast_to(self.load(ta, a_idx(r(io, i), k)), acc_t)
                fma.append(tx.For(j2, 0, nr, tx.ForKind.VECTORIZED, tx.BufferStore(
                    acc, tx.BufferLoad(acc, [j2]) + a_val * b_val(k, j2), [j2])))
                store_c.append(tx.For(j3, 0, nr, tx.ForKind.VECTORIZED, self.store(
                    tc, tx.BufferLoad(acc, [j3]), c_idx(r(io, i), c(jo, j3)))))
            body = seq([tx.AllocBuffer(a) for a in accs] + load_c
                       + [tx.For(k, 0, K, tx.ForKind.SERIAL, seq(fma))] + store_c)
            # jo outer: one B panel (K x nr) stays in L1 while the A rows stream past it
            return tx.For(jo, 0, cols // nr, tx.ForKind.SERIAL,
                          tx.For(io, 0, rows // mr, tx.ForKind.SERIAL, body))

        if n_full:
            if m_full:
                stmts.append(micro(0, m_full, MR, 0, n_full, NR, True, pack_a))
            if M > m_full:
                stmts.append(micro(m_full, M - m_full, M - m_full, 0, n_full, NR, True))
        rest = Nn - n_full
        n_vec = (rest // lanes) * lanes
        if n_vec:
            mr2 = next((m for m in range(min(M, regs - 6), 0, -1) if M % m == 0), 1)
            stmts.append(micro(0, M, mr2, n_full, n_vec, lanes, False))
        if Nn > n_full + n_vec:
            c0 = n_full + n_vec
            i, j, k = self.fresh("i"), self.fresh("j"), self.fresh("k")
            jj = j + c0
            cell = self.local_buffer([1], acc_t, "cell")
            body = seq([
                tx.AllocBuffer(cell),
                tx.BufferStore(cell, cast_to(self.load(tc, c_idx(i, jj)), acc_t), [0]),
                tx.For(k, 0, K, tx.ForKind.SERIAL, tx.BufferStore(
                    cell, tx.BufferLoad(cell, [0]) + cast_to(self.load(ta, a_idx(i, k)), acc_t)
                    * cast_to(self.load(tb, b_idx(k, jj)), acc_t), [0])),
                self.store(tc, tx.BufferLoad(cell, [0]), c_idx(i, jj)),
            ])
            stmts.append(tx.For(i, 0, M, tx.ForKind.SERIAL, tx.For(j, 0, Nn - c0, tx.ForKind.SERIAL, body)))
        return seq(stmts)

    # ----------------------------------------------------------------- atomics
    def atomic_call(self, kind: str, tb, indices, value, node):
        dt = str(tb.dtype)
        if dt == "bool":
            raise self.unsupported("atomics on bool tensors", node)
        self.needs_support = True
        if dt in ("float16", "bfloat16"):
            v = cast_to(value, "float32")
        else:
            v = cast_to(value, dt)
        return tx.Evaluate(tx.call_extern("int32", f"tilecore_cpu_atomic_{kind}_{dt}",
                                          tx.address_of(tx.BufferLoad(tb, list(indices))), v))

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
            head = tx.Evaluate(tx.call_extern("int32", "tilecore_cpu_print_buffer_head", msg,
                                              *self._block_args(), b.name))
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
                    return tx.Evaluate(tx.call_extern("int32", "tilecore_cpu_print_elem_float",
                                                      cast_to(v, "float64"), _float_kind(b.dtype),
                                                      opened, closed, rank))
                return tx.Evaluate(tx.call_extern("int32", "tilecore_cpu_print_elem_int",
                                                  cast_to(v, "int64"), opened, closed, rank))
            return seq([head, self.loop_nest(shape, elem, vectorize=False)])
        v = self.lower_expr(s.value)
        dt = dtype_of(v)
        if dt == "bool":
            fn, arg = "tilecore_cpu_print_bool", tx.Cast("int32", v)
        elif is_float(dt):
            if dt == "bfloat16":  # TVM may hold a bfloat16 value unrounded in float32
                v = round_to_bfloat16(cast_to(v, "float32"))
            return tx.Evaluate(tx.call_extern("int32", "tilecore_cpu_print_float", msg, *self._block_args(),
                                              cast_to(v, "float64"), _float_kind(dt)))
        else:
            fn, arg = "tilecore_cpu_print_int", cast_to(v, "int64")
        return tx.Evaluate(tx.call_extern("int32", fn, msg, *self._block_args(), arg))


def _involves_bfloat16(let: N.Let) -> bool:
    """Whether a Let's name or any node of its value is bfloat16."""
    from tilecore.ir.visitor import walk

    return let.var.dtype == "bfloat16" or any(
        getattr(n, "dtype", None) == "bfloat16" for n in walk(let.value))


def _float_kind(dtype: str):
    """support.c's float format selector: numpy's str() differs per dtype (bfloat16 -> 0)."""
    return tir_const({"float16": 16, "float32": 32, "float64": 64}.get(dtype, 0), "int32")
