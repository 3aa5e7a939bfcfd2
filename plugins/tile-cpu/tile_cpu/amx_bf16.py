"""bfloat16 x bfloat16 -> float32 GEMMs on Intel AMX (TDPBF16PS).

Where the target has `amx-tile` and `amx-bf16` (Sapphire Rapids and later Xeons), a GEMM of two
bfloat16 operands with float32 sums is not converted to float32 panels for the FMA micro-kernel
(tile_cpu.gemm) but packed as bfloat16 tiles, and a micro-kernel (amx_bf16.c) keeps a 32 x 32
block of C in four 16 x 16 accumulator tiles, multiplying 32 k per step:

* A's rows in panels of 32, [kb][32 rows][32 k], k contiguous (two 16-row A tiles per step);
* B's columns in panels of 32, [kb][16][32 columns][2]: the pair (B[32q + 2p, j], B[32q + 2p + 1, j])
  at [q][p][j] (AMX's pair-interleaved layout of B; two 16-column B tiles per step);
* rows, columns and k past the edges are zeros (0 * 0 adds nothing to a sum).

On the lent H200 host's Xeon this ran 4x the FMA micro-kernel's products per cycle and per core;
AVX-512 BF16's vdpbf16ps, measured there too, ran half of them (one per two cycles) and is not used
(benchmarks/results/xeon-session13/README.md). TVM widens bfloat16 to float32 before LLVM sees
it and TIR has no tile registers, so the micro-kernel is C, compiled with the host's C compiler for
these features and linked into the kernel library (`NATIVE`); packing and blocking stay TIR.

Numerics: each product of two bfloat16 values is exact in float32 and is added to the float32
sum, rounding to nearest even, as with FMA; the order of the additions within a step of 32 k is
the instruction's, and subnormal inputs and results count as zero. So sums can differ from the FMA
path in the last bits, and a subnormal bfloat16 operand contributes 0 (docs/semantics.md, "T.gemm").
Every T.gemm of this dtype pair whose K step is a multiple of 32 takes the path on such a target,
the whole-grid GEMM (gemm_grid) and block-by-block alike, so the two still agree bit for bit. A
process that the operating system refuses the tile state (Linux's arch_prctl) gets the same sums
from a plain C loop instead: slower, never wrong.
"""

from __future__ import annotations

import os
from typing import Dict, Optional, Sequence

from tvm import tirx as tx

from tilecore.ir import nodes as N
from tilecore.lowering.tir_expr import cast_to
from tilecore.lowering.tir_stmt import accum_dtype, seq

MR = NR = KB = 32  # the micro-kernel's block of C and its k step (amx_bf16.c)
FEATURES = ("amx-tile", "amx-bf16")  # LLVM's names; the C compiler's flags are -m + these
SYMBOL = "tilecore_cpu_amx_bf16_block"
SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "amx_bf16.c")
NATIVE = (SOURCE, tuple("-m" + f for f in FEATURES))  # what build.native_object compiles and links
MODE_ACCUMULATE, MODE_FIRST, MODE_ROUND_BF16 = 0, 1, 2  # amx_bf16.c's `mode`


def applies(a_dtype: str, b_dtype: str, c_dtype: str, k_step: int, arch: str, features: Sequence[str]) -> bool:
    """Whether a GEMM of these dtypes takes the AMX path on this target. k_step: the K of one T.gemm
    (the user's bk): a multiple of 32, so that the steps are the same whether the grid is lowered as
    one whole GEMM or block by block (another bk would split a step across two T.gemm calls)."""
    return (
        arch == "x86_64"
        and k_step % KB == 0
        and all(f in features for f in FEATURES)
        and a_dtype == b_dtype == "bfloat16"
        and accum_dtype(c_dtype) == "float32"
        and c_dtype in ("float32", "bfloat16")
    )


def bits16(x32):
    """The bfloat16 bits of a float32 that holds a bfloat16 value exactly."""
    return tx.Cast("uint16", tx.shift_right(tx.reinterpret("uint32", x32), tx.const(16, "uint32")))


def pack_tiles(low, buf, panel, first, count, klen: int, load, limit: int, a_side: bool, kind=tx.ForKind.SERIAL):
    """Panels panel .. panel + count of `buf` from lines (first + q) * 32 + w (rows of A, columns of
    B) and k < klen: A's layout [q][kb][w][k % 32] (a_side) or B's [q][kb * 16 + p][w][t] with
    k = 32 kb + 2 p + t. Lines from `limit` on and k from klen on are zeros; only the panel that
    crosses `limit` and the last, partial k step test their indices (the others' loops vectorize)."""
    steps, partial = -(-klen // KB), klen % KB
    q = low.fresh("q")
    zero = tx.const(0, "uint16")

    def fill(step0, nsteps, line_ok, k_ok):
        kb, w, kk = low.fresh("kb"), low.fresh("w"), low.fresh("kk")
        line, k = (first + q) * 32 + w, (step0 + kb) * KB + kk
        value = bits16(cast_to(load(line, k), "float32"))
        conds = [c for c in (line_ok(line) if line_ok else None, k_ok(k) if k_ok else None) if c is not None]
        if conds:
            value = tx.if_then_else(conds[0] if len(conds) == 1 else tx.And(*conds), value, zero)
        if a_side:  # k innermost: A[i, k] at [kb][w][kk]
            store = tx.BufferStore(buf, value, [panel + q, step0 + kb, w, kk])
            inner = tx.For(w, 0, 32, tx.ForKind.SERIAL, tx.For(kk, 0, KB, tx.ForKind.SERIAL, store))
        else:  # pairs of k around the columns: B[k, j] at [kb * 16 + kk // 2][w][kk % 2]
            store = tx.BufferStore(
                buf, value, [panel + q, (step0 + kb) * 16 + tx.floordiv(kk, 2), w, tx.floormod(kk, 2)]
            )
            inner = tx.For(kk, 0, KB, tx.ForKind.SERIAL, tx.For(w, 0, 32, tx.ForKind.SERIAL, store))
        return tx.For(kb, 0, nsteps, tx.ForKind.SERIAL, inner)

    def panel_fill(line_ok):
        full = steps - (1 if partial else 0)
        parts = [fill(0, full, line_ok, None)] if full else []
        if partial:
            parts.append(fill(steps - 1, 1, line_ok, lambda k: tx.LT(k, klen)))
        return seq(parts)

    whole = tx.LE((first + q + 1) * 32, limit)
    body = tx.IfThenElse(whole, panel_fill(None), panel_fill(lambda line: tx.LT(line, limit)))
    return tx.For(q, 0, count, kind, body)


def a_panels(low, panels: int, klen: int):
    """A buffer of `panels` A panels of klen (rounded up to 32) k."""
    return low.local_buffer([panels, -(-klen // KB), 32, KB], "uint16", "Atiles")


def b_panels(low, panels: int, klen: int):
    """A buffer of `panels` B panels of klen (rounded up to 32) k."""
    return low.local_buffer([panels, -(-klen // KB) * 16, 32, 2], "uint16", "Btiles")


def call_block(ap, a_panel, bp, b_panel, c_addr, ldc, steps: int, rows, cols, mode: int):
    """One micro-kernel call: C's 32 x 32 block (rows x cols of it stored) of A panel a_panel times
    B panel b_panel over `steps` steps of 32 k."""
    return tx.Evaluate(
        tx.call_extern(
            "int32",
            SYMBOL,
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


def _k_chunk(K: int, narrow_c: bool, caches: Dict[str, int]) -> int:
    """K per chunk (a multiple of 32): all of K for a narrow C (no partial sums in it); else as many
    k as keep one A panel and one B panel in half of L1... at least 256 (a call's fixed cost, the
    tile configuration and C's block through memory, is then small)."""
    if narrow_c:
        return K
    cap = max(256, (caches["l1"] // 2) // (2 * 32 * 2) // KB * KB)
    return K if K <= cap else cap


def _edge(limit: int, start):
    """min(32, limit - start): the rows or columns of a block that are inside C."""
    return tx.min(tx.IntImm("int32", 32), tx.IntImm("int32", limit) - start)


def lower_whole(low, plan, caches: Dict[str, int], cores: int):
    """The TIR of gemm_grid's whole GEMM `plan` on this path (tile_cpu.gemm_grid.lower's blocking:
    parallel tasks of rows; per K chunk, B's block of columns packed once, in parallel, and each
    task's A rows packed by the task in the first column block)."""
    from .gemm import chunks

    M, Nn, K = plan.M, plan.N, plan.K
    ta, tb, tc = low.buffer(plan.a), low.buffer(plan.b), low.buffer(plan.c)
    narrow = plan.c.dtype == "bfloat16"
    kc = _k_chunk(K, narrow, caches)
    tasks = max(1, min(max(4, cores), M // (4 * MR)))  # as gemm_grid.task_shape, >= 4 blocks each
    rows_per_task = -(-M // tasks)
    mc = -(-rows_per_task // MR) * MR
    tasks = -(-M // mc)
    panels_n = -(-Nn // NR)
    nb = min(panels_n, max(1, (caches["l2"] // 2) // (-(-kc // KB) * KB * NR * 2)))  # B's block: half of L2
    ap = a_panels(low, -(-M // MR), kc)
    bp = b_panels(low, nb, kc)

    def chunk(k0, klen: int, first: bool):
        steps = -(-klen // KB)
        mode = MODE_ROUND_BF16 if narrow else (MODE_FIRST if first else MODE_ACCUMULATE)
        jb, task, io, jo = low.fresh("jb"), low.fresh("task"), low.fresh("io"), low.fresh("jo")
        count = -(-panels_n // nb)
        here = tx.min(tx.IntImm("int32", nb), tx.IntImm("int32", panels_n) - jb * nb)
        b_load = lambda col, k: low.load(tb, [k0 + k, col])  # noqa: E731
        pack_b = pack_tiles(low, bp, 0, jb * nb, here, klen, b_load, Nn, a_side=False, kind=tx.ForKind.PARALLEL)
        row0, col0 = task * mc, jb * (nb * NR)
        blocks_here = (tx.min(tx.IntImm("int32", mc), tx.IntImm("int32", M) - row0) + MR - 1) // MR
        a_load = lambda row, k: low.load(ta, [row, k0 + k])  # noqa: E731
        pack_a = pack_tiles(low, ap, task * (mc // MR), task * (mc // MR), blocks_here, klen, a_load, M, a_side=True)
        r, c = row0 + io * MR, col0 + jo * NR
        c_addr = tx.address_of(tx.BufferLoad(tc, [r, c]))
        call = call_block(ap, task * (mc // MR) + io, bp, jo, c_addr, Nn, steps, _edge(M, r), _edge(Nn, c), mode)
        run = tx.For(io, 0, blocks_here, tx.ForKind.SERIAL, tx.For(jo, 0, here, tx.ForKind.SERIAL, call))
        per_task = seq([tx.IfThenElse(tx.EQ(jb, 0), pack_a, None) if count > 1 else pack_a, run])
        block = seq([pack_b, tx.For(task, 0, tasks, tx.ForKind.PARALLEL, per_task)])
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
    return seq([tx.AllocBuffer(ap), tx.AllocBuffer(bp)] + parts)


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


def lower_block(low, s: N.Gemm) -> Optional[tx.Stmt]:
    """One T.gemm (C += A B, block-local or not) on this path, or None when C is not a plain 2-D
    row-major tile (its rows must be a fixed stride apart for the micro-kernel)."""
    M, Nn, K, a_idx, b_idx, c_idx = low.gemm_operands(s)
    ta, tb, tc = low.buffer(s.a.buffer), low.buffer(s.b.buffer), low.buffer(s.c.buffer)
    if not _row_major(tc, c_idx):
        return None
    ap, bp = a_panels(low, -(-M // MR), K), b_panels(low, -(-Nn // NR), K)
    stmts = [tx.AllocBuffer(ap), tx.AllocBuffer(bp)]
    stmts.append(pack_tiles(low, ap, 0, 0, -(-M // MR), K, lambda i, k: low.load(ta, a_idx(i, k)), M, a_side=True))
    stmts.append(pack_tiles(low, bp, 0, 0, -(-Nn // NR), K, lambda j, k: low.load(tb, b_idx(k, j)), Nn, a_side=False))
    io, jo = low.fresh("io"), low.fresh("jo")
    r, c = io * MR, jo * NR
    mode = MODE_FIRST if s.clear_accum else MODE_ACCUMULATE
    c_addr = tx.address_of(tx.BufferLoad(tc, c_idx(r, c)))
    call = call_block(ap, io, bp, jo, c_addr, int(tc.shape[1]), -(-K // KB), _edge(M, r), _edge(Nn, c), mode)
    stmts.append(tx.For(io, 0, -(-M // MR), tx.ForKind.SERIAL, tx.For(jo, 0, -(-Nn // NR), tx.ForKind.SERIAL, call)))
    low.native.add(NATIVE)
    return seq(stmts)
