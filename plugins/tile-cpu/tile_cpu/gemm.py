"""T.gemm on the CPU: packed panels and a register-blocked micro-kernel chosen for the ISA.

The user's shared/fragment tiles decide the outer blocking (one T.gemm per block
and K step); inside one T.gemm the speed comes from here, as in BLIS/OpenBLAS:

* B is packed into column panels `[N/NR][K][NR]` in the accumulator dtype, so the
  micro-kernel streams one contiguous panel (transposes and conversions done once:
  float16/bfloat16 -> float32, int8 -> int32), unless it is a small block-local tile
  in the accumulator dtype whose panel rows do not collide in L1 (`b_reads_in_place`);
* A is read in place when it is already in the accumulator dtype (MR broadcasts
  per k from MR rows), else packed into converted row panels `[M/MR][K][MR]`;
* the micro-kernel keeps an MR x NR block of C in vector registers (MR rows of
  NR/lanes vectors, one fused multiply-add per vector and k). MR and NR follow
  the ISA's vector width and register count (`micro_tile`): 6 x 16 float32 for
  AVX2/FMA (12 of 16 ymm), 12 x 32 for AVX-512 (24 of 32 zmm), 8 x 12 for NEON
  (24 of 32 q registers);
* cache blocking: K is split so that one B panel (kc x NR) stays in L1, and M so
  that the A rows one panel meets (mc x kc) stay in half of L2.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, Optional

from tvm import tirx as tx

from tilecore.ir import nodes as N
from tilecore.ir.types import bits, is_float
from tilecore.lowering.tir_expr import cast_to, tir_const
from tilecore.lowering.tir_stmt import accum_dtype, seq

from .prefetch import CACHE_LINE, LOCALITY_L1, prefetch


@dataclass(frozen=True)
class MicroTile:
    """An MR x NR register block: MR rows of `nr_vec` vectors of `lanes` accumulators."""

    mr: int
    nr_vec: int
    lanes: int

    @property
    def nr(self) -> int:
        return self.nr_vec * self.lanes


def micro_tile(vector_bits: int, vector_regs: int, acc_dtype: str) -> MicroTile:
    """The register block for an ISA: three quarters of the vector registers hold C.

    The rest hold the B vectors of one k and the broadcast A values. 128-bit
    units with 32 registers (NEON) take 3 vectors per row (8 x 12 float32);
    wider units 2 (AVX2 6 x 16, AVX-512 12 x 32).
    """
    lanes = max(1, vector_bits // bits(acc_dtype))
    nr_vec = 3 if vector_bits <= 128 and vector_regs >= 32 else 2
    mr = max(1, min(12, (vector_regs * 3 // 4) // nr_vec))
    return MicroTile(mr, nr_vec, lanes)


def cache_blocks(tile: MicroTile, M: int, K: int, acc_bytes: int, caches: Dict[str, int]):
    """(kc, mc): K chunk whose B panel fills at most half of L1; M chunk whose A rows fill half of L2."""
    kc_cap = max(tile.lanes, (caches["l1"] // 2) // (tile.nr * acc_bytes))
    kc = K if K <= kc_cap else kc_cap
    mc_cap = max(tile.mr, ((caches["l2"] // 2) // (kc * acc_bytes)) // tile.mr * tile.mr)
    mc = M if M <= mc_cap else mc_cap
    return kc, mc


def lower_gemm(low, s: N.Gemm, tile_of, caches: Dict[str, int]):
    """The TIR of `s` (C += A B) on the packed path, or None when it does not apply.

    low: the CpuLowering (buffers, loads, stores, names); tile_of(acc dtype) the
    MicroTile for this ISA.
    """
    M, Nn, K, a_idx, b_idx, c_idx = low.gemm_operands(s)
    ta, tb, tc = low.buffer(s.a.buffer), low.buffer(s.b.buffer), low.buffer(s.c.buffer)
    acc_t = accum_dtype(s.c.buffer.dtype)
    tile = tile_of(acc_t)
    if tile.lanes < 2 or Nn < tile.lanes or not (is_float(acc_t) or acc_t in ("int32", "int64")):
        return None
    nr_vec = tile.nr_vec if Nn >= tile.nr else max(1, Nn // tile.lanes)
    NR = nr_vec * tile.lanes
    MR = min(M, tile.mr)
    kc, mc = cache_blocks(MicroTile(MR, nr_vec, tile.lanes), M, K, bits(acc_t) // 8, caches)
    n_full = (Nn // NR) * NR
    stmts = []
    if s.clear_accum:
        stmts.append(
            low.loop_nest([M, Nn], lambda ij: low.store(tc, tir_const(0, acc_t), c_idx(*ij)), dtype=str(tc.dtype))
        )
    # B's full column panels [n_full/NR][K][NR] in the accumulator dtype, unless B can be read in place
    in_place = b_reads_in_place(s, str(tb.dtype), acc_t, NR, K, caches)
    bp = None
    if not in_place:
        bp = low.local_buffer([max(1, n_full // NR), K, NR], acc_t, "Bpack")
        stmts.append(tx.AllocBuffer(bp))
        stmts.append(pack_b(low, bp, lambda k_, j_: cast_to(low.load(tb, b_idx(k_, j_)), acc_t), n_full // NR, K))
    # A packed (converted) into [ceil(M/MR)][K][MR] only when its dtype is not the accumulator's
    ap = None
    if str(ta.dtype) != acc_t:
        ap = low.local_buffer([-(-M // MR), K, MR], acc_t, "Apack")
        stmts.append(tx.AllocBuffer(ap))
        stmts.append(pack_a(low, ap, lambda i_, k_: cast_to(low.load(ta, a_idx(i_, k_)), acc_t), M, K))

    def a_val(row, k_):
        if ap is not None:
            return tx.BufferLoad(ap, [tx.floordiv(row, MR), k_, tx.floormod(row, MR)])
        return cast_to(low.load(ta, a_idx(row, k_)), acc_t)

    def b_panel(jo_, col0, nr):
        def value(k_, j_):
            return tx.BufferLoad(bp, [jo_, k_, j_])

        return value

    def b_direct(jo_, col0, nr):
        def value(k_, j_):
            return cast_to(low.load(tb, b_idx(k_, col0 + jo_ * nr + j_)), acc_t)

        return value

    kernel = MicroKernel(low, acc_t, tc, c_idx, a_val)
    body = []
    if n_full:
        body.append(kernel.sweep(M, mc, MR, 0, n_full, NR, b_direct if in_place else b_panel, K, kc))
    rest = Nn - n_full
    n_vec = (rest // tile.lanes) * tile.lanes
    if n_vec:  # a narrower column strip: B read in place
        body.append(kernel.sweep(M, mc, MR, n_full, n_vec, tile.lanes, b_direct, K, kc))
    if Nn > n_full + n_vec:
        body.append(_scalar_columns(low, acc_t, tc, ta, tb, a_idx, b_idx, c_idx, M, n_full + n_vec, Nn, K))
    return seq(stmts + body)


def pack_b(low, bp, b_value, panels: int, K: int, width: Optional[int] = None, kind=tx.ForKind.SERIAL):
    """bp[jo, k, j] = b_value(k, jo * width + j) for `panels` column panels of `width` (at most,
    and by default, NR = bp's last extent); `kind` is the panel loop's (PARALLEL: one panel per
    task)."""
    NR = int(bp.shape[2]) if width is None else width
    jo, k = low.fresh("jo"), low.fresh("k")
    return tx.For(
        jo,
        0,
        panels,
        kind,
        tx.For(
            k,
            0,
            K,
            tx.ForKind.SERIAL,
            low.loop_nest(
                [NR], lambda j: tx.BufferStore(bp, b_value(k, jo * NR + j[0]), [jo, k, j[0]]), dtype=str(bp.dtype)
            ),
        ),
    )


def pack_a(low, ap, a_value, M: int, K: int, panel0=0):
    """ap[panel0 + io, k, i] = a_value(io * MR + i, k) for M rows, MR = ap's last extent (the last
    block partial)."""
    MR = int(ap.shape[2])
    full = M // MR
    stmts = []
    if full:  # i innermost: contiguous stores of MR values
        io, k, i = low.fresh("io"), low.fresh("k"), low.fresh("i")
        stmts.append(
            tx.For(
                io,
                0,
                full,
                tx.ForKind.SERIAL,
                tx.For(
                    k,
                    0,
                    K,
                    tx.ForKind.SERIAL,
                    tx.For(
                        i, 0, MR, tx.ForKind.UNROLLED, tx.BufferStore(ap, a_value(io * MR + i, k), [panel0 + io, k, i])
                    ),
                ),
            )
        )
    if M > full * MR:
        k, i = low.fresh("k"), low.fresh("i")
        stmts.append(
            tx.For(
                k,
                0,
                K,
                tx.ForKind.SERIAL,
                tx.For(
                    i,
                    0,
                    M - full * MR,
                    tx.ForKind.UNROLLED,
                    tx.BufferStore(ap, a_value(full * MR + i, k), [panel0 + full, k, i]),
                ),
            )
        )
    return seq(stmts)


def b_reads_in_place(s: N.Gemm, b_dtype: str, acc_t: str, NR: int, K: int, caches: Dict[str, int]) -> bool:
    """Whether the micro-kernel may read B where it is instead of a packed copy.

    Only a block-local B (shared/fragment tile) that is already in the accumulator dtype,
    not transposed, and whose K rows of one NR-wide panel share L1 without evicting each
    other: a VIPT L1 has 64 sets of 64-byte lines per way (4 KiB), so rows `stride` bytes
    apart fall into 64 / gcd(stride / 64, 64) sets; the panel may take half of those ways.
    Packing then would only add a copy (small user tiles repeat it for every K step).
    """
    buf = s.b.buffer
    if s.transpose_b or b_dtype != acc_t or buf.scope == "global" or buf.static_shape() is None:
        return False
    elem = bits(acc_t) // 8
    stride = buf.static_dims()[-1] * elem
    ways = max(1, caches["l1"] // 4096)
    sets = 64 // math.gcd(stride // 64, 64) if stride % 64 == 0 else 64
    lines_per_row = max(1, NR * elem // 64)
    return K * lines_per_row <= sets * ways // 2


class MicroKernel:
    """Emits the register-blocked update of C's rows/columns by A and a B value function."""

    def __init__(self, low, acc_t, tc, c_idx, a_val, zero_c: bool = False, ahead=None):
        self.low, self.acc_t, self.tc, self.c_idx, self.a_val = low, acc_t, tc, c_idx, a_val
        self.zero_c = zero_c  # accumulators start at 0 instead of C's values (C not yet written)
        # ahead(jo, row0, k): statements (prefetches of the streamed operand) issued with step k
        # of the block of B panel jo and rows from row0
        self.ahead = ahead

    def sweep(self, M, mc, MR, col0, cols, nr, b_of, K, kc):
        """C[:, col0:col0+cols] += A B: K chunks of kc, M chunks of mc, B panels, MR-row blocks."""
        low = self.low
        parts = []
        for k0, klen, kcount in chunks(K, kc):
            kb = low.fresh("kb")
            row_parts = []
            for m0, mlen, mcount in chunks(M, mc):
                ib = low.fresh("ib")
                inner = self.panels(m0 + ib * mlen, mlen, MR, col0, cols, nr, b_of, k0 + kb * klen, klen)
                row_parts.append(tx.For(ib, 0, mcount, tx.ForKind.SERIAL, inner))
            parts.append(tx.For(kb, 0, kcount, tx.ForKind.SERIAL, seq(row_parts)))
        return seq(parts)

    def panels(self, row_base, rows, MR, col0, cols, nr, b_of, kstart, klen, rows_outer: bool = False, first=None):
        """For each B panel (kept in L1), every MR-row block of the rows, then the leftover rows.

        rows_outer: for each MR-row block (its A values kept in L1), every B panel (B in L2),
        so that C is walked along its rows. first: the panel to start from (then round the
        panels), so that parallel tasks reading one packed block start at different panels.
        """
        low = self.low
        jo = low.fresh("jo")
        count = cols // nr
        panel = jo if first is None else tx.floormod(jo + first, count)
        b_val = b_of(panel, col0, nr)
        blocks = []
        full = (rows // MR) * MR

        def across(row0, mr):
            pf = (lambda r0, k: self.ahead(panel, r0, k)) if self.ahead else None
            stmt = self.block(row0, mr, col0 + panel * nr, nr, b_val, kstart, klen, rows_outer, pf)
            return tx.For(jo, 0, count, tx.ForKind.SERIAL, stmt) if rows_outer else stmt

        if full:
            io = low.fresh("io")
            blocks.append(tx.For(io, 0, rows // MR, tx.ForKind.SERIAL, across(row_base + io * MR, MR)))
        if rows > full:
            blocks.append(across(row_base + full, rows - full))
        return seq(blocks) if rows_outer else tx.For(jo, 0, count, tx.ForKind.SERIAL, seq(blocks))

    K_UNROLL = 4

    def k_loop(self, body_of, klen: int):
        """The k loop over body_of(k), unrolled K_UNROLL times (fewer loop instructions per FMA),
        then the klen mod K_UNROLL last steps."""
        low, u = self.low, self.K_UNROLL
        if not isinstance(klen, int):
            k = low.fresh("k")
            return [tx.For(k, 0, klen, tx.ForKind.SERIAL, body_of(k))]
        stmts = []
        if klen // u:
            ko = low.fresh("ko")
            stmts.append(tx.For(ko, 0, klen // u, tx.ForKind.SERIAL, seq([body_of(ko * u + r) for r in range(u)])))
        if klen % u:
            k = low.fresh("k")
            stmts.append(tx.For(k, 0, klen % u, tx.ForKind.SERIAL, body_of(klen // u * u + k)))
        return stmts

    def block(self, row0, mr, col0, nr, b_val, kstart, klen, along_rows: bool = False, with_step=None):
        """C[row0:row0+mr, col0:col0+nr] += A[rows, kstart:kstart+klen] B[same k, cols] in registers;
        with_step(row0, k): statements issued with step k (prefetches)."""
        low, acc_t, tc, c_idx = self.low, self.acc_t, self.tc, self.c_idx
        # one small accumulator per row: stack arrays LLVM promotes to vector registers
        accs = [low.local_buffer([nr], acc_t, f"acc{i}") for i in range(mr)]
        load_c, store_c = [], []

        def fma(kk):
            """acc_i += A[row0 + i, kk] * B[kk, :] for every row i."""
            out = list(with_step(row0, kstart + kk)) if with_step else []
            for i, acc in enumerate(accs):
                j = low.fresh("j")
                a = self.a_val(row0 + i, kstart + kk)
                update = tx.BufferStore(acc, tx.BufferLoad(acc, [j]) + a * b_val(kstart + kk, j), [j])
                out.append(tx.For(j, 0, nr, tx.ForKind.VECTORIZED, update))
            return seq(out)

        for i, acc in enumerate(accs):
            j1, j3 = low.fresh("j"), low.fresh("j")
            start = tir_const(0, acc_t) if self.zero_c else cast_to(low.load(tc, c_idx(row0 + i, col0 + j1)), acc_t)
            load_c.append(tx.For(j1, 0, nr, tx.ForKind.VECTORIZED, tx.BufferStore(acc, start, [j1])))
            store_c.append(
                tx.For(
                    j3,
                    0,
                    nr,
                    tx.ForKind.VECTORIZED,
                    low.store(tc, tx.BufferLoad(acc, [j3]), c_idx(row0 + i, col0 + j3)),
                )
            )
        # the next block's C lines (below, or to the right along_rows) while this one computes:
        # a large C tile (256 x 512 fp32 is all of Zen 3's L2) otherwise waits on L3 every block
        per_line = max(1, CACHE_LINE * 8 // bits(acc_t))
        r1, c1 = (row0, col0 + nr) if along_rows else (row0 + mr, col0)
        ahead = [
            prefetch(tc, c_idx(r1 + i, c1 + j * per_line), LOCALITY_L1)
            for i in range(mr)
            for j in range(-(-nr // per_line))
        ]
        return seq([tx.AllocBuffer(a) for a in accs] + load_c + ahead + self.k_loop(fma, klen) + store_c)


def chunks(total: int, size: int):
    """[(start, length, count)]: `count` chunks of `length` from `start`, covering [0, total)."""
    full = total // size
    out = [(0, size, full)] if full else []
    if total > full * size:
        out.append((full * size, total - full * size, 1))
    return out


def _scalar_columns(low, acc_t, tc, ta, tb, a_idx, b_idx, c_idx, M, c0, Nn, K):
    """The last columns (fewer than a vector): one dot product per element."""
    i, j, k = low.fresh("i"), low.fresh("j"), low.fresh("k")
    jj = j + c0
    cell = low.local_buffer([1], acc_t, "cell")
    body = seq(
        [
            tx.AllocBuffer(cell),
            tx.BufferStore(cell, cast_to(low.load(tc, c_idx(i, jj)), acc_t), [0]),
            tx.For(
                k,
                0,
                K,
                tx.ForKind.SERIAL,
                tx.BufferStore(
                    cell,
                    tx.BufferLoad(cell, [0])
                    + cast_to(low.load(ta, a_idx(i, k)), acc_t) * cast_to(low.load(tb, b_idx(k, jj)), acc_t),
                    [0],
                ),
            ),
            low.store(tc, tx.BufferLoad(cell, [0]), c_idx(i, jj)),
        ]
    )
    return tx.For(i, 0, M, tx.ForKind.SERIAL, tx.For(j, 0, Nn - c0, tx.ForKind.SERIAL, body))
