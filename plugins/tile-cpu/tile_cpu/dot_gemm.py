"""GEMMs on x86 matrix and dot-product instructions: AMX tiles for bfloat16 x bfloat16 -> float32
(TDPBF16PS) and int8 x int8 -> int32 (TDPBSSD), AVX-512 VNNI for int8 x int8 -> int32 (VPDPBUSD)
where there is no AMX.

On a target with the features of a kind (`KINDS`, first match wins), a GEMM of its operand and sum
dtypes is not converted to float32 / int32 panels for the FMA micro-kernel (tile_cpu.gemm) but
packed as the instruction reads it, and a C micro-kernel (dot_gemm.c) keeps a block of C in
registers over the packed k:

* A's rows in panels of MR (32 for AMX: two 16-row tiles; 12 for VNNI: 24 zmm of sums),
  [kb][MR rows][k step], k contiguous (the k step is 64 bytes of a tile row: 32 bfloat16, 64 int8);
  for VNNI with 128 added (unsigned bytes; the kernel subtracts 128 times B's column sums);
* B's columns in panels of 32, [kb][16][32 columns][g]: g = 2 (bfloat16) or 4 (int8) consecutive k
  of one column together (AMX's and VNNI's interleaved layout of B);
* rows, columns and k past the edges are zeros (0 * 0 adds nothing to a sum).

On the Xeon of session 13, AMX ran 4x the FMA micro-kernel's products per cycle and per core
(bfloat16); AVX-512 BF16's vdpbf16ps ran half of them and is not used
(benchmarks/results/xeon-session13/README.md). TVM widens bfloat16 to float32 before LLVM sees it
and TIR has no tile registers, so the micro-kernels are C, compiled with the host's C compiler for
these features and linked into the kernel library (`NATIVE`); packing and blocking stay TIR.

Numerics: int8 sums are exact (every order gives the FMA path's bits). Each product of two bfloat16
values is exact in float32 and is added to the float32 sum, rounding to nearest even, as with FMA;
the order of the additions within a step of 32 k is the instruction's, and subnormal inputs and
results count as zero. So bfloat16 sums can differ from the FMA path in the last bits, and a
subnormal bfloat16 operand contributes 0 (docs/semantics.md, "T.gemm"). Every T.gemm of these
dtypes whose K step (the user's bk) is a multiple of the kind's k step takes the path on such a
target (int8: any K step, its sums being exact), the whole-grid GEMM (gemm_grid) and block-by-block
alike, so the two still agree bit for bit. A process that the operating system refuses the AMX
tile state (Linux's arch_prctl) gets the same sums from a plain C loop instead: slower, never wrong.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Dict, Optional, Sequence

from tvm import tirx as tx

from tilecore.ir import nodes as N
from tilecore.lowering.tir_expr import cast_to
from tilecore.lowering.tir_stmt import accum_dtype, seq

NR = 32  # the micro-kernels' columns of C (dot_gemm.c)
SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dot_gemm.c")
# what build.native_object compiles and links: every micro-kernel (the VNNI one carries its own
# target attribute; each runs only where its kind's features are)
NATIVE = (SOURCE, ("-mamx-tile", "-mamx-bf16", "-mamx-int8"))
MODE_ACCUMULATE, MODE_FIRST, MODE_ROUND_BF16 = 0, 1, 2  # amx.c's `mode`


@dataclass(frozen=True)
class TileGemm:
    """One kind of multiply: its operand and sum dtypes, k per packed step (64 bytes), k per group of
    B, the packed storage dtype (A's, when it differs: `a_storage`), the C symbol, the LLVM features
    it needs, its rows of C per call (MR) and whether its sums are exact in any order."""

    operand: str
    acc: str
    kstep: int
    group: int
    storage: str
    symbol: str
    features: tuple
    mr: int = 32
    a_storage: str = ""
    exact: bool = False


BF16 = TileGemm("bfloat16", "float32", 32, 2, "uint16", "tilecore_cpu_amx_bf16_block", ("amx-tile", "amx-bf16"))
INT8 = TileGemm("int8", "int32", 64, 4, "int8", "tilecore_cpu_amx_s8_block", ("amx-tile", "amx-int8"), exact=True)
VNNI_INT8 = TileGemm(
    "int8", "int32", 64, 4, "int8", "tilecore_cpu_vnni_s8_block", ("avx512bw", "avx512vnni"), 12, "uint8", True
)
KINDS = (BF16, INT8, VNNI_INT8)  # the first whose features a target has


def kind_of(a_dtype: str, b_dtype: str, c_dtype: str, k_step: int, arch: str, features: Sequence[str]):
    """The multiply a GEMM of these dtypes takes on this target, or None. k_step: the K of one T.gemm
    (the user's bk): for sums that are not exact, a multiple of the kind's k step, so that the steps
    are the same whether the grid is lowered as one whole GEMM or block by block (another bk would
    split a step across two T.gemm calls)."""
    if arch != "x86_64" or a_dtype != b_dtype:
        return None
    for kind in KINDS:
        if (
            a_dtype == kind.operand
            and accum_dtype(c_dtype) == kind.acc
            and c_dtype in ((kind.acc, "bfloat16") if kind is BF16 else (kind.acc,))
            and (kind.exact or k_step % kind.kstep == 0)
            and all(f in features for f in kind.features)
        ):
            return kind
    return None


def bits16(x32):
    """The bfloat16 bits of a float32 that holds a bfloat16 value exactly."""
    return tx.Cast("uint16", tx.shift_right(tx.reinterpret("uint32", x32), tx.const(16, "uint32")))


def packed_value(kind: TileGemm, value, a_side: bool):
    """A loaded operand element as the packed buffer stores it (VNNI's A: plus 128, unsigned)."""
    if kind is BF16:
        return bits16(cast_to(value, "float32"))
    if a_side and kind.a_storage == "uint8":
        return tx.Cast("uint8", cast_to(value, "int32") + tx.const(128, "int32"))
    return cast_to(value, kind.storage)


def pack_tiles(low, kind, buf, panel, first, count, klen: int, load, limit: int, a_side: bool, kind_loop=None):
    """Panels panel .. panel + count of `buf` from lines (first + q) * W + w (rows of A, W = MR;
    columns of B, W = 32) and k < klen: A's layout [q][kb][w][k % S] (a_side) or B's [q][kb * 16 + p][w][t] with
    k = S kb + g p + t (S the kind's k step, g its group). Lines from `limit` on and k from klen on
    are zeros; only the panel that crosses `limit` and the last, partial k step test their indices
    (the others' loops vectorize)."""
    S, g = kind.kstep, kind.group
    W = kind.mr if a_side else NR
    steps, partial = -(-klen // S), klen % S
    q = low.fresh("q")
    zero = packed_value(kind, tx.const(0, kind.operand), a_side)

    def fill(step0, nsteps, line_ok, k_ok):
        kb, w, kk = low.fresh("kb"), low.fresh("w"), low.fresh("kk")
        line, k = (first + q) * W + w, (step0 + kb) * S + kk
        value = packed_value(kind, load(line, k), a_side)
        conds = [c for c in (line_ok(line) if line_ok else None, k_ok(k) if k_ok else None) if c is not None]
        if conds:
            value = tx.if_then_else(conds[0] if len(conds) == 1 else tx.And(*conds), value, zero)
        if a_side:  # k innermost: A[i, k] at [kb][w][kk]
            store = tx.BufferStore(buf, value, [panel + q, step0 + kb, w, kk])
            inner = tx.For(w, 0, W, tx.ForKind.SERIAL, tx.For(kk, 0, S, tx.ForKind.SERIAL, store))
        else:  # groups of k around the columns: B[k, j] at [kb * 16 + kk // g][w][kk % g]
            store = tx.BufferStore(
                buf, value, [panel + q, (step0 + kb) * 16 + tx.floordiv(kk, g), w, tx.floormod(kk, g)]
            )
            inner = tx.For(kk, 0, S, tx.ForKind.SERIAL, tx.For(w, 0, W, tx.ForKind.SERIAL, store))
        return tx.For(kb, 0, nsteps, tx.ForKind.SERIAL, inner)

    def panel_fill(line_ok):
        full = steps - (1 if partial else 0)
        parts = [fill(0, full, line_ok, None)] if full else []
        if partial:
            parts.append(fill(steps - 1, 1, line_ok, lambda k: tx.LT(k, klen)))
        return seq(parts)

    whole = tx.LE((first + q + 1) * W, limit)
    body = tx.IfThenElse(whole, panel_fill(None), panel_fill(lambda line: tx.LT(line, limit)))
    return tx.For(q, 0, count, kind_loop or tx.ForKind.SERIAL, body)


def a_panels(low, kind, panels: int, klen: int):
    """A buffer of `panels` A panels of klen (rounded up to the k step) k."""
    return low.local_buffer(
        [panels, -(-klen // kind.kstep), kind.mr, kind.kstep], kind.a_storage or kind.storage, "Apack"
    )


def b_panels(low, kind, panels: int, klen: int):
    """A buffer of `panels` B panels of klen (rounded up to the k step) k."""
    return low.local_buffer([panels, -(-klen // kind.kstep) * 16, 32, kind.group], kind.storage, "Bpack")


def call_block(kind, ap, a_panel, bp, b_panel, c_addr, ldc, steps: int, rows, cols, mode: int):
    """One micro-kernel call: C's MR x 32 block (rows x cols of it stored) of A panel a_panel times
    B panel b_panel over `steps` k steps."""
    return tx.Evaluate(
        tx.call_extern(
            "int32",
            kind.symbol,
            tx.address_of(tx.BufferLoad(ap, [a_panel, 0, 0, 0])),
            tx.address_of(tx.BufferLoad(bp, [b_panel, 0, 0, 0])),
            c_addr,
            tx.Cast("int64", ldc),
            tx.IntImm("int32", steps),
            tx.Cast("int32", rows),
            tx.Cast("int32", cols),
            tx.IntImm("int32", mode),
        )
    )


def _k_chunk(kind, K: int, narrow_c: bool, caches: Dict[str, int]) -> int:
    """K per chunk (a multiple of the k step): all of K for a narrow C (no partial sums in it); else
    as many k as keep one A panel and one B panel in half of L1, at least 8 steps (a call's fixed
    cost, the tile configuration and C's block through memory, is then small)."""
    if narrow_c:
        return K
    step_bytes = 2 * 32 * 64  # one step of an A panel and of a B panel
    cap = max(8, (caches["l1"] // 2) // step_bytes) * kind.kstep
    return K if K <= cap else cap


def _edge(size: int, limit: int, start):
    """min(size, limit - start): the rows or columns of a block that are inside C."""
    return tx.min(tx.IntImm("int32", size), tx.IntImm("int32", limit) - start)


def lower_whole(low, kind: TileGemm, plan, caches: Dict[str, int], cores: int):
    """The TIR of gemm_grid's whole GEMM `plan` on this path (tile_cpu.gemm_grid.lower's blocking:
    parallel tasks of rows, with gemm_grid.DYNAMIC_ROWS units of MR-row blocks taken from an atomic
    counter; per K chunk, B's block of columns packed once, in parallel, and each task's A rows
    packed by whoever runs the task in the first column block)."""
    from .gemm import chunks
    from .gemm_grid import DYNAMIC_ROWS

    M, Nn, K = plan.M, plan.N, plan.K
    ta, tb, tc = low.buffer(plan.a), low.buffer(plan.b), low.buffer(plan.c)
    narrow = plan.c.dtype != kind.acc  # a bfloat16 C: rounded once, at the end
    kc = _k_chunk(kind, K, narrow, caches)
    MR = kind.mr
    tasks = max(1, min(max(4, cores), M // (4 * MR)))  # as gemm_grid.task_shape, >= 4 blocks each
    rows_per_task = -(-M // tasks)
    mc = DYNAMIC_ROWS * MR if DYNAMIC_ROWS else -(-rows_per_task // MR) * MR
    tasks = -(-M // mc)
    workers = min(tasks, cores)
    counter = low.counter_buffer("unit_counter", workers) if DYNAMIC_ROWS and workers > 1 else None
    panels_n = -(-Nn // NR)
    panel_bytes = -(-kc // kind.kstep) * 16 * 32 * 64 // 16  # one B panel: 64 bytes per column and step
    nb = min(panels_n, max(1, (caches["l2"] // 2) // panel_bytes))  # B's block: half of L2
    ap = a_panels(low, kind, -(-M // MR), kc)
    bp = b_panels(low, kind, nb, kc)

    def chunk(k0, klen: int, first: bool):
        steps = -(-klen // kind.kstep)
        mode = MODE_ROUND_BF16 if narrow else (MODE_FIRST if first else MODE_ACCUMULATE)
        jb, task, io, jo = low.fresh("jb"), low.fresh("task"), low.fresh("io"), low.fresh("jo")
        count = -(-panels_n // nb)
        here = tx.min(tx.IntImm("int32", nb), tx.IntImm("int32", panels_n) - jb * nb)
        b_load = lambda col, k: low.load(tb, [k0 + k, col])  # noqa: E731
        pack_b = pack_tiles(low, kind, bp, 0, jb * nb, here, klen, b_load, Nn, False, tx.ForKind.PARALLEL)
        row0, col0 = task * mc, jb * (nb * NR)
        blocks_here = (tx.min(tx.IntImm("int32", mc), tx.IntImm("int32", M) - row0) + MR - 1) // MR
        a_load = lambda row, k: low.load(ta, [row, k0 + k])  # noqa: E731
        first_panel = task * (mc // MR)
        pack_a = pack_tiles(low, kind, ap, first_panel, first_panel, blocks_here, klen, a_load, M, True)
        r, c = row0 + io * MR, col0 + jo * NR
        c_addr = tx.address_of(tx.BufferLoad(tc, [r, c]))
        call = call_block(
            kind, ap, first_panel + io, bp, jo, c_addr, Nn, steps, _edge(MR, M, r), _edge(NR, Nn, c), mode
        )
        run = tx.For(io, 0, blocks_here, tx.ForKind.SERIAL, tx.For(jo, 0, here, tx.ForKind.SERIAL, call))
        per_task = seq([tx.IfThenElse(tx.EQ(jb, 0), pack_a, None) if count > 1 else pack_a, run])
        if counter is None:
            rows = tx.For(task, 0, tasks, tx.ForKind.PARALLEL, per_task)
        else:
            rows = low.taken_from_counter(counter, task, tasks, per_task, workers)
        block = seq([pack_b, rows])
        return tx.For(jb, 0, count, tx.ForKind.SERIAL, block)

    parts = []
    for start, length, count in chunks(K, kc):
        if start == 0:
            parts.append(chunk(0, length, True))
            count, start = count - 1, length
        if count:
            kb = low.fresh("kb")
            parts.append(tx.For(kb, 0, count, tx.ForKind.SERIAL, chunk(start + kb * length, length, False)))
    low.native.add(NATIVE)
    allocs = [tx.AllocBuffer(ap), tx.AllocBuffer(bp)] + ([tx.AllocBuffer(counter)] if counter is not None else [])
    return seq(allocs + parts)


def _row_major(tc, c_idx) -> bool:
    """Whether C's tile is rows of a 2-D buffer of static shape, in order (C[i, j] at
    [r0 + i, c0 + j]), so that its rows are the buffer's row stride apart."""
    from tvm.sym.analyzer import Analyzer

    if len(tc.shape) != 2 or not all(isinstance(d, tx.IntImm) for d in tc.shape):
        return False
    simplify = Analyzer().simplify
    origin, down, right = c_idx(0, 0), c_idx(1, 0), c_idx(0, 1)
    steps = [simplify(x - o) for pair in ((down, origin), (right, origin)) for x, o in zip(*pair)]
    return all(isinstance(v, tx.IntImm) for v in steps) and [int(v) for v in steps] == [1, 0, 0, 1]


def lower_block(low, kind: TileGemm, s: N.Gemm) -> Optional[tx.Stmt]:
    """One T.gemm (C += A B, block-local or not) on this path, or None when C is not a plain 2-D
    row-major tile (its rows must be a fixed stride apart for the micro-kernel)."""
    M, Nn, K, a_idx, b_idx, c_idx = low.gemm_operands(s)
    ta, tb, tc = low.buffer(s.a.buffer), low.buffer(s.b.buffer), low.buffer(s.c.buffer)
    if not _row_major(tc, c_idx):
        return None
    MR = kind.mr
    ap, bp = a_panels(low, kind, -(-M // MR), K), b_panels(low, kind, -(-Nn // NR), K)
    stmts = [tx.AllocBuffer(ap), tx.AllocBuffer(bp)]
    stmts.append(pack_tiles(low, kind, ap, 0, 0, -(-M // MR), K, lambda i, k: low.load(ta, a_idx(i, k)), M, True))
    stmts.append(pack_tiles(low, kind, bp, 0, 0, -(-Nn // NR), K, lambda j, k: low.load(tb, b_idx(k, j)), Nn, False))
    io, jo = low.fresh("io"), low.fresh("jo")
    r, c = io * MR, jo * NR
    mode = MODE_FIRST if s.clear_accum else MODE_ACCUMULATE
    c_addr = tx.address_of(tx.BufferLoad(tc, c_idx(r, c)))
    steps = -(-K // kind.kstep)
    call = call_block(kind, ap, io, bp, jo, c_addr, int(tc.shape[1]), steps, _edge(MR, M, r), _edge(NR, Nn, c), mode)
    stmts.append(tx.For(io, 0, -(-M // MR), tx.ForKind.SERIAL, tx.For(jo, 0, -(-Nn // NR), tx.ForKind.SERIAL, call)))
    low.native.add(NATIVE)
    return seq(stmts)
