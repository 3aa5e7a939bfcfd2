"""A T.Kernel grid that is one whole GEMM, lowered as one cache-blocked GEMM (BLIS's loops).

`examples/gemm.py`'s matmul, as TileLang users write it, gives every block one
bm x bn tile of C: clear a fragment, for each K step copy an A and a B tile and
T.gemm them, copy the fragment out. Lowered block by block, every block packs
its own A rows and B columns, so A is packed N/bn times and B M/bm times (with
64 x 64 tiles 32 times each: a fifth of the time went to packing B alone on
Zen 3), and the accumulators go to memory after every K step. When the grid's
blocks together compute exactly C = A B (`tilecore.lowering.whole_gemm.match`, shared with
tile-cuda's re-tiling), the cpu backend lowers the
whole kernel as one GEMM whose blocking comes from the host's caches instead:
parallel tasks of mc rows x nc columns of C; per K chunk of kc, A's mc x kc
block packed into MR-row panels (it stays in L2), B's kc x nc block packed into
NR-column panels (one panel stays in L1 while every row block of A meets it),
and the ISA's register-blocked micro-kernel (tile_cpu.gemm). Each element of C
still sums its products in ascending k from 0 in the accumulator dtype, so the
results are the ones the block-by-block lowering gives.

A C narrower than a float32 accumulator (float16, bfloat16: `examples/gemm.py`'s default)
cannot hold partial sums, so there K is one chunk: the sums stay in registers and are rounded
to C's dtype once, as the block-by-block fragment copy does (B's panels are then K deep and
live in L2 rather than L1). Partial edge tiles (M, N or K not multiples of the tiles) are part
of the match: the block-by-block copies pad them with zeros, which add only 0 * 0 products to an
in-range sum, and clip the stores; the whole GEMM sums exactly the in-range products and writes
only C (its last N mod NR columns as one narrower panel). Anything the match refuses
(transposes, an epilogue, other dtypes, dynamic shapes) lowers block by block.
bfloat16 and int8 operands on a target with AMX (int8: or AVX-512 VNNI) take tile_cpu.dot_gemm's
blocking and micro-kernels instead (lower.py chooses); bfloat16 when the user's K tile is a
multiple of 32.
"""

from __future__ import annotations

import os
from typing import Dict

from tvm import tirx as tx

from tilecore.ir.types import bits, is_float
from tilecore.lowering.tir_expr import cast_to
from tilecore.lowering.tir_stmt import seq
from tilecore.lowering.whole_gemm import WholeGemm

from .gemm import MicroKernel, MicroTile, cache_blocks, chunks, pack_a, pack_b
from .prefetch import CACHE_LINE, LOCALITY_L1, prefetch

# How the parallel loops of one GEMM synchronize: "launch" (each parallel loop is its own launch on
# TVM's pool, which joins at its end) or "barrier" (one launch for the whole GEMM; every thread runs
# the serial loops and takes its static share of each parallel loop, with a barrier after each).
SYNC = "launch"
# Each task's loop order over its rows x the B block: True = per MR-row block (A's values in L1) every
# NR panel of B (B's block streamed from L2, C walked along its rows); False = BLIS's order, per NR
# panel (in L1) every MR-row block (A's rows streamed from L2, C walked down its columns).
ROWS_OUTER = True
# Software prefetch of the operand the micro-kernel streams (B's panels in rows-outer order, A's
# panels in BLIS's order): this many k steps ahead into L1 (0: none, the hardware prefetchers only).
PREFETCH_K = 0
# Whether task t walks the packed B block from panel t * panels / tasks on (round the block), so
# that the tasks do not all read the same freshly packed panel, from the core that packed it, at once.
ROTATE_PANELS = False
# Rows of C in units of this many MR-row blocks, which the threads take from an atomic counter
# (tilecore_cpu_next_block) in each compute phase, instead of one static task of rows per core:
# a thread the host preempts, or a slower core, then holds up a phase by one unit at most.
# 0: static tasks (task_shape). Each phase is then its own launch (SYNC "barrier" is not used).
# Default 1 since session 19: on a 16-vCPU Emerald Rapids guest, 2048^3 fp32 at 16 threads ran
# 11.9 ms (median of 7) against 15.5 ms with static tasks and numpy's 14.1-14.3 ms in the same
# rounds (benchmarks/results/gpu-session19); level with static tasks on a 2-core host.
DYNAMIC_ROWS = 1
# Whether a static task's rows are rounded up to whole MR-row blocks (the last task then takes what
# is left). False: ceil(M / tasks) rows each, every task's last block partial where MR does not
# divide them: 2048 rows on 16 tasks are 16 x 128 (10 blocks of 12 and one of 8), not 15 x 132 and 68,
# which made every phase wait for 11 full blocks where the average task has 10.67.
WHOLE_BLOCK_TASKS = False


def task_shape(tile: MicroTile, plan: WholeGemm, kc: int, caches: Dict[str, int], cores: int):
    """(mc, nc): rows of C per parallel task, columns per packed B block.

    Tasks of nearly equal rows (ceil(M / tasks) each; in whole MR-row blocks with
    WHOLE_BLOCK_TASKS), at least 4 and as many as the host has cores, none shorter than
    8 register blocks; nc the largest divisor of N's full NR panels whose kc x nc B block fills
    at most half of L2 (0 when N is narrower than one panel). At 2000^3 on Zen 3, 5-panel blocks
    (the divisor) ran 0.96x numpy and 16 panels plus a shorter last block 0.91x.
    """
    tasks = max(1, min(max(4, cores), plan.M // (8 * tile.mr)))
    rows = -(-plan.M // tasks)
    mc = -(-rows // tile.mr) * tile.mr if WHOLE_BLOCK_TASKS else rows
    cap = max(1, (caches["l2"] // 2) // (kc * tile.nr * (bits(plan.acc) // 8)))
    panels = plan.N // tile.nr
    nc_panels = max((d for d in range(1, panels + 1) if panels % d == 0 and d <= cap), default=0)
    return min(mc, plan.M), nc_panels * tile.nr


def grid_k_chunk(tile: MicroTile, M: int, K: int, acc_bytes: int, caches: Dict[str, int]) -> int:
    """The K chunk (kc) of the whole GEMM: C is read and written once per chunk."""
    kc, _ = cache_blocks(tile, M, K, acc_bytes, caches)
    return kc


def lower(low, plan: WholeGemm, tile: MicroTile, caches: Dict[str, int]):
    """The TIR of the whole GEMM, or None when the ISA has no vectors for the accumulator dtype.

    Per K chunk of kc and block of nc columns, B's kc x nc block is packed once, its NR panels
    in parallel, and every task runs its rows across it; in the chunk's first column block each
    task first packs its own rows of A (into one shared buffer: only that task reads them, so no
    join is needed between the two, and they are still in its cache when used). B is packed once
    whatever the number of tasks (each task packing all of B cost 16x B's size in copies on a
    16-core host); each parallel loop ends before the next starts (TVM's parallel launch joins, or
    a barrier with SYNC "barrier"), so a packed block is complete before any task reads it. With
    DYNAMIC_ROWS the tasks are units of rows that any thread may take: a unit's A rows are packed by
    whoever takes it in the first column block and read by whoever takes it after that join.
    """
    acc = plan.acc
    if tile.lanes < 2 or not (is_float(acc) or acc in ("int32", "int64")):
        return None
    kc = grid_k_chunk(tile, plan.M, plan.K, bits(acc) // 8, caches)
    if plan.c.dtype != acc:  # a narrow C holds no partial sums: all of K in one chunk, rounded once
        kc = plan.K
    cores = os.cpu_count() or 1
    mc, nc = task_shape(tile, plan, kc, caches, cores)
    MR, NR = min(tile.mr, plan.M), tile.nr
    if DYNAMIC_ROWS:
        mc = min(plan.M, DYNAMIC_ROWS * MR)
    ta, tb, tc = low.buffer(plan.a), low.buffer(plan.b), low.buffer(plan.c)
    task_panels = -(-mc // MR)  # A panels per task (its last one partial when MR does not divide mc)
    ap = low.local_buffer([-(-plan.M // mc) * task_panels, kc, MR], acc, "Apack")
    bp = low.local_buffer([max(1, nc // NR), kc, NR], acc, "Bpack")
    tasks, full_rows = -(-plan.M // mc), plan.M // mc
    counter = low.counter_buffer("unit_counter", min(tasks, cores))
    # units from the counter only where two or more threads share them (TVM drops a parallel loop
    # of one iteration, and with it the allocation of the thread's unit slot)
    dynamic = bool(DYNAMIC_ROWS) and min(tasks, cores) > 1
    barrier = SYNC == "barrier" and not DYNAMIC_ROWS

    def per_task(body_of):
        """A parallel loop over the tasks; body_of(task, rows) is one task's work. Task t's rows
        start at t * mc, its A panels at t * ceil(mc / MR): affine indices, which TVM's buffer-region
        analysis bounds (with a floordiv it shrank Apack using loop variables out of scope)."""
        task = low.fresh("task")
        body = body_of(task, mc)
        if plan.M > full_rows * mc:  # the last task has fewer rows
            short = body_of(task, plan.M - full_rows * mc)
            body = tx.IfThenElse(tx.LT(task, full_rows), body, short) if full_rows else short
        if not dynamic:
            return tx.For(task, 0, tasks, tx.ForKind.PARALLEL, body)
        return low.taken_from_counter(counter, task, tasks, body, min(tasks, cores))

    def a_val(panel0, row, k):
        return tx.BufferLoad(ap, [panel0 + tx.floordiv(row, MR), k, tx.floormod(row, MR)])

    def b_panel(jo, _col0, _nr):
        return lambda k, j: tx.BufferLoad(bp, [jo, k, j])

    def chunk(k0, klen: int, first: bool):
        def pack_rows(task, rows):
            a_value = lambda i, k: cast_to(low.load(ta, [task * mc + i, k0 + k]), acc)  # noqa: E731
            return pack_a(low, ap, a_value, rows, klen, panel0=task * task_panels)

        blocks = []
        for group, (start, count, width, nr) in enumerate(column_blocks(plan.N, nc, NR)):
            jb = low.fresh("jb")
            col0 = start + jb * width
            b_value = lambda k, j, col0=col0: cast_to(low.load(tb, [k0 + k, col0 + j]), acc)  # noqa: E731

            def run_rows(task, rows, col0=col0, width=width, nr=nr, jb=jb, packs_a=group == 0, count=count):
                c_idx = lambda i, j: [task * mc + i, col0 + j]  # noqa: E731
                task_a = lambda row, k: a_val(task * task_panels, row, k)  # noqa: E731
                ahead = streamed_ahead(ap, bp, task * task_panels, MR) if PREFETCH_K else None
                kernel = MicroKernel(low, acc, tc, c_idx, task_a, zero_c=first, ahead=ahead)
                start = task * (width // nr) // tasks if ROTATE_PANELS else None
                run = kernel.panels(0, rows, MR, 0, width, nr, b_panel, 0, klen, rows_outer=ROWS_OUTER, first=start)
                if not packs_a:
                    return run
                pack = pack_rows(task, rows)
                return seq([tx.IfThenElse(tx.EQ(jb, 0), pack, None) if count > 1 else pack, run])

            block = seq(
                [
                    joined(pack_b(low, bp, b_value, width // nr, klen, nr, kind=tx.ForKind.PARALLEL)),
                    joined(per_task(run_rows)),
                ]
            )
            blocks.append(tx.For(jb, 0, count, tx.ForKind.SERIAL, block))
        return seq(blocks)

    parts = []
    for start, length, count in chunks(plan.K, kc):
        if start == 0:  # the first chunk starts the accumulators at 0: C is not read before it is written
            parts.append(chunk(0, length, True))
            count -= 1
            start = length
        if count:
            kb = low.fresh("kb")
            parts.append(tx.For(kb, 0, count, tx.ForKind.SERIAL, chunk(start + kb * length, length, False)))
    if barrier:  # the packed buffers stay allocated once, outside the threads' launch
        parts = [tx.AttrStmt(tx.IntImm("int32", 0), "pragma_parallel_launch_point", tx.IntImm("int32", 1), seq(parts))]
    allocs = [tx.AllocBuffer(ap), tx.AllocBuffer(bp)] + ([tx.AllocBuffer(counter)] if dynamic else [])
    return seq(allocs + parts)


def streamed_ahead(ap, bp, panel0, MR: int):
    """ahead(jo, row0, k) for MicroKernel: prefetches of step k + PREFETCH_K of the streamed panel
    (every cache line of B's NR values, or the line holding A's MR values); past a panel's end they
    reach the next panel, and a prefetch never faults."""
    per_line = CACHE_LINE * 8 // bits(str(bp.dtype))
    if ROWS_OUTER:
        lines = range(0, int(bp.shape[2]), per_line)
        return lambda jo, row0, k: [prefetch(bp, [jo, k + PREFETCH_K, j], LOCALITY_L1) for j in lines]
    return lambda jo, row0, k: [prefetch(ap, [panel0 + tx.floordiv(row0, MR), k + PREFETCH_K, 0], LOCALITY_L1)]


def joined(loop: tx.Stmt) -> tx.Stmt:
    """A parallel loop that every thread finishes before any goes on (SYNC "barrier": inside the one
    launch of the GEMM; "launch": the loop's own launch joins)."""
    if SYNC != "barrier" or DYNAMIC_ROWS:
        return loop
    return tx.AttrStmt(tx.IntImm("int32", 0), "pragma_parallel_barrier_when_finish", tx.IntImm("int32", 1), loop)


def column_blocks(N: int, nc: int, NR: int):
    """[(first column, count, width, nr)]: `count` blocks of `width` columns in NR panels (nc wide,
    then the rest of N's full panels), then the last N mod NR columns as one narrower panel."""
    n_full = N // NR * NR
    out = []
    if nc:
        out.append((0, n_full // nc, nc, NR))
        if n_full % nc:
            out.append((n_full // nc * nc, 1, n_full % nc, NR))
    if N > n_full:
        out.append((n_full, 1, N - n_full, N - n_full))
    return out
