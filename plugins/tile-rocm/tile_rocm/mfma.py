"""AMD matrix cores (MFMA) for the SIMT lowering toolkit: `T.gemm` on `v_mfma_*`.

The toolkit's plan (`simt_plan`) gives no gemm accumulator a matrix layout on ROCm
(no Gemm rule answers `accumulator_layout`); the `MfmaGemm` rule's planning hook
then gives every eligible gemm accumulator -- and every fragment sharing its layout,
so T.Parallel loops over them stay thread-local -- the MFMA 16x16 accumulator
layout `MfmaLayout`. `T.gemm` with both operands in LDS then runs one MFMA per
16x16 output tile and K step, through LLVM AMDGPU intrinsics (`llvm.amdgcn.mfma.*`,
TVM's call_llvm_pure_intrin); `MfmaRowReduce` reduces rows of such tiles.

MFMA 16x16 on a wave of 64 lanes (CDNA2 gfx90a, CDNA3 gfx942, CDNA4 gfx950):
  A operand: lane L supplies A[L % 16][k0 + (L // 16) * kw + e], e < kw
  B operand: lane L supplies B[k0 + (L // 16) * kw + e][L % 16]
  D result:  lane L holds D[(L // 16) * 4 + r][L % 16], r < 4
with kw = 4 (f16, bf16, int8 on gfx90a) or 8 (int8 16x16x32 on gfx942/gfx950).

Planning is pure Python; lowering imports TVM when a rule runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from tilecore.ir import nodes as N
from tilecore.ir.visitor import walk_stmts
from tilecore.lowering.simt_layout import MmaLayout, RowLayout, StridedLayout, StridedRowLayout
from tilecore.lowering.simt_plan import parallel_accesses, unreachable_fragments, whole_region
from tilecore.plugin.rules import LoweringRule

WAVE = 64


@dataclass(frozen=True)
class MfmaLayout(MmaLayout):
    """Accumulator layout of 16x16 MFMA tiles, waves tiled `wm x wn` over an (M, N) tile.

    Subclasses MmaLayout only for the shared lowering's iteration protocol
    (`iter_space`, `coords`, `local_size`); its thread mapping is MFMA's.
    """

    @property
    def MI(self) -> int:
        return self.M // self.wm // 16

    @property
    def NI(self) -> int:
        return self.N // self.wn // 16

    @property
    def local_size(self) -> int:
        return self.MI * self.NI * 4

    def iter_space(self):
        return (self.MI, self.NI, 4)

    def coords(self, t, it):
        mi, ni, r = it
        lane, wave = t % WAVE, t // WAVE
        i = (wave // self.wn) * (self.M // self.wm) + mi * 16 + (lane // 16) * 4 + r
        j = (wave % self.wn) * (self.N // self.wn) + ni * 16 + lane % 16
        return (i, j), (mi * self.NI + ni) * 4 + r

    def row_local(self, it):
        """Register of the MfmaRowLayout value that belongs to iteration `it`."""
        mi, _ni, r = it
        return mi * 4 + r

    @staticmethod
    def choose_waves(M: int, N: int, waves: int, whole_rows: bool = False) -> Optional["MfmaLayout"]:
        """The most square wave grid whose tiles are multiples of 16x16 (with `whole_rows`, only
        grids where one wave owns whole rows: wn == 1), or None."""
        options = [
            (wm, waves // wm)
            for wm in range(1, waves + 1)
            if waves % wm == 0
            and M % (16 * wm) == 0
            and N % (16 * (waves // wm)) == 0
            and (not whole_rows or waves // wm == 1)
        ]
        if not options:
            return None
        wm, wn = min(options, key=lambda o: (abs(M // o[0] - N // o[1]), -o[0]))
        return MfmaLayout(M, N, wm, wn)


@dataclass(frozen=True)
class MfmaRowLayout(RowLayout):
    """A length-M vector over the rows of MfmaLayout(M, *, wm, wn): lane L of wave w holds rows
    (w // wn) * (M // wm) + mi * 16 + (L // 16) * 4 + r, replicated over the 16 lanes L % 16."""

    @property
    def local_size(self) -> int:
        return self.MI * 4

    def iter_space(self):
        return (self.MI, 4)

    def coords(self, t, it):
        mi, r = it
        lane, wave = t % WAVE, t // WAVE
        i = (wave // self.wn) * (self.M // self.wm) + mi * 16 + (lane // 16) * 4 + r
        return ((i,) if self.ndim == 1 else (i, 0)), mi * 4 + r

    def matches(self, mma) -> bool:
        return isinstance(mma, MfmaLayout) and (self.M, self.wm, self.wn) == (mma.M, mma.wm, mma.wn)

    def primary(self, t):
        lane, wave = t % WAVE, t // WAVE
        return (lane % 16 == 0), (wave % self.wn == 0)


# (input dtype, accumulator dtype) -> {arch family: (intrinsic, k per instruction, operand vector dtype)}
MFMA_OPS = {
    ("float16", "float32"): ("llvm.amdgcn.mfma.f32.16x16x16f16", 16, "float16x4"),
    ("bfloat16", "float32"): ("llvm.amdgcn.mfma.f32.16x16x16bf16.1k", 16, "int16x4"),
    ("int8", "int32"): ("llvm.amdgcn.mfma.i32.16x16x16i8", 16, "int32"),
}
MFMA_OPS_GFX94X = dict(MFMA_OPS)
# gfx940+ dropped the 16x16x16 int8 form for the 16x16x32 one (8 int8 per lane, packed in an i64)
MFMA_OPS_GFX94X[("int8", "int32")] = ("llvm.amdgcn.mfma.i32.16x16x32.i8", 32, "int64")

MFMA_ARCHS = ("gfx908", "gfx90a", "gfx940", "gfx941", "gfx942", "gfx950")


def mfma_op(arch: str, in_dtype: str, acc_dtype: str) -> Optional[Tuple[str, int, str]]:
    """(intrinsic, K step, operand dtype) of the MFMA for these dtypes on `arch`, or None."""
    if arch not in MFMA_ARCHS:
        return None
    table = MFMA_OPS_GFX94X if arch.startswith("gfx94") or arch.startswith("gfx95") else MFMA_OPS
    if arch == "gfx908" and in_dtype == "bfloat16":
        return None
    return table.get((in_dtype, acc_dtype))


class MfmaGemm(LoweringRule):
    """`T.gemm` on MFMA for wave64 targets with a matrix core (see the module docstring)."""

    name = "mfma"

    def plan(self, ctx) -> None:
        """Give eligible gemm accumulators (and fragments sharing their layout) MfmaLayout."""
        plan = ctx.plan
        if ctx.target.warp_size != WAVE or ctx.threads % WAVE:
            return
        waves = ctx.threads // WAVE
        for s in ctx.stmts(N.Gemm):
            a, b, c = s.a.buffer, s.b.buffer, s.c.buffer
            op = mfma_op(ctx.target.arch, a.dtype, c.dtype) if a.dtype == b.dtype else None
            if op is None or plan.storage.get(c.name) != "reg" or not whole_region(s.c, 2):
                continue
            if plan.storage.get(a.name) != "smem" or plan.storage.get(b.name) != "smem":
                continue
            if not (whole_region(s.a, 2) and whole_region(s.b, 2)):
                continue
            K = s.a.extents[0] if s.transpose_a else s.a.extents[1]
            if K % op[1]:
                continue
            old = plan.layout[c.name]
            if isinstance(old, MfmaLayout):
                plan.mma_gemms[id(s)] = old
                continue
            if not isinstance(old, StridedLayout):
                continue
            M, Nn = c.shape
            lay = MfmaLayout.choose_waves(M, Nn, waves)
            trial = None
            if lay is not None:
                trial = {n: lay for n in layout_component(ctx, c.name, old)}
                if not relayout_is_consistent(ctx, trial):
                    trial = None
            if trial is None:
                trial = row_group_relayout(ctx, old, MfmaLayout.choose_waves(M, Nn, waves, whole_rows=True))
            if trial is None:
                continue
            plan.layout.update(trial)
            plan.mma_gemms[id(s)] = plan.layout[c.name]
        if plan.mma_gemms:
            plan.notes.append(
                "T.gemm on MFMA: "
                + ", ".join(sorted({f"{l.M}x{l.N} waves {l.wm}x{l.wn}" for l in plan.mma_gemms.values()}))
            )

    def __call__(self, lowering, g):
        lay = lowering.plan.mma_gemms.get(id(g))
        if not isinstance(lay, MfmaLayout):
            return NotImplemented
        emit_mfma_gemm(lowering, g, lay)
        return None


def layout_component(ctx, name, layout):
    """`name` and the register fragments with the same layout that a T.Parallel loop or a
    copy uses together with it (transitively): what must change layout together."""
    plan = ctx.plan
    same = {n for n, l in plan.layout.items() if l == layout and plan.storage.get(n) == "reg"}
    groups = []
    for s in walk_stmts(ctx.kernel.body):
        if isinstance(s, N.Parallel):
            groups.append({b.name for b, _, _ in parallel_accesses(s)} & same)
        elif isinstance(s, N.Copy):
            groups.append({s.src.buffer.name, s.dst.buffer.name} & same)
    comp = {name}
    changed = True
    while changed:
        changed = False
        for grp in groups:
            if grp & comp and not grp <= comp:
                comp |= grp
                changed = True
    return comp


def relayout_is_consistent(ctx, trial) -> bool:
    """Whether the layouts in `trial` (name -> layout) keep every loop thread-local: the plan's
    own check finds nothing new to demote, and every reduction stays one the lowering has."""
    plan = ctx.plan
    body = ctx.kernel.body
    parallels = ctx.stmts(N.Parallel)
    reduces = ctx.stmts(N.Reduce)
    layouts = dict(plan.layout)
    layouts.update(trial)
    for r in reduces:
        if r.src.name in trial or r.dst.name in trial:
            src_l, dst_l = layouts.get(r.src.name), layouts.get(r.dst.name)
            if not (
                isinstance(src_l, MfmaLayout)
                and isinstance(dst_l, MfmaRowLayout)
                and r.dim == 1
                and dst_l.matches(src_l)
                and src_l.wn == 1
            ):
                return False
    live = {n for n, st in plan.storage.items() if st == "reg"}
    before = unreachable_fragments(plan.layout, live, parallels, body, reduces)
    return not (unreachable_fragments(layouts, live, parallels, body, reduces) - before)


def row_group_relayout(ctx, old, lay):
    """Every fragment with layout `old` takes `lay`, and every row vector of `old` the matching
    MfmaRowLayout (the attention pattern: row reductions and per-row scaling of a gemm result)."""
    if lay is None:
        return None
    plan = ctx.plan
    trial = {}
    for name, l in plan.layout.items():
        if plan.storage.get(name) != "reg":
            continue
        if l == old:
            trial[name] = lay
        elif isinstance(l, StridedRowLayout) and l.matches(old):
            trial[name] = MfmaRowLayout(lay.M, lay.wm, lay.wn, l.ndim)
    return trial if relayout_is_consistent(ctx, trial) else None


class MfmaRowReduce(LoweringRule):
    """Row reduction of an MFMA tile: in-thread over the tile's columns, then across the 16
    lanes that share a row (xor 1, 2, 4, 8); one wave owns whole rows (wn == 1)."""

    name = "mfma_row_reduce"

    def __call__(self, lowering, r):
        src_l, dst_l = lowering.plan.layout.get(r.src.name), lowering.plan.layout.get(r.dst.name)
        if not (
            isinstance(src_l, MfmaLayout)
            and isinstance(dst_l, RowLayout)
            and r.dim == 1
            and lowering.plan.storage[r.src.name] == "reg"
        ):
            return NotImplemented
        from tvm import tirx as tx
        from tvm.tirx.script.builder import ir as B

        from tilecore.lowering.tir_expr import cast_to, tir_const

        wide = "float32" if r.dst.dtype in ("float16", "bfloat16") else r.dst.dtype
        src_v, dst_v = lowering.views[r.src.name], lowering.views[r.dst.name]
        part = B.alloc_buffer((src_l.MI * 4,), wide, scope="local")
        with B.unroll(0, src_l.MI) as mi:
            with B.unroll(0, 4) as q:
                slot = mi * 4 + q
                B.buffer_store(part, lowering._identity(r.kind, wide), [slot])
                with B.unroll(0, src_l.NI) as ni:
                    v = cast_to(src_v[(mi * src_l.NI + ni) * 4 + q], wide)
                    if r.kind in ("abssum", "absmax"):
                        v = tx.abs(v)
                    B.buffer_store(part, lowering._combine(r.kind, part[slot], v), [slot])
                for m in (1, 2, 4, 8):
                    sh = lowering.shuffle_xor(tx.BufferLoad(part, [slot]), tir_const(m, "int32"))
                    B.buffer_store(part, lowering._combine(r.kind, part[slot], sh), [slot])
        with B.unroll(0, src_l.MI * 4) as i:
            res = tx.BufferLoad(part, [i])
            if not r.clear:
                res = lowering._combine(r.kind, cast_to(dst_v[i], wide), res)
            B.buffer_store(dst_v, cast_to(res, r.dst.dtype), [i])
        return None


def emit_mfma_gemm(lowering, g: N.Gemm, lay: MfmaLayout):
    """C += A @ B with one MFMA per 16x16 tile of this wave and per K step."""
    from tvm import tirx as tx
    from tvm.tirx.script.builder import ir as B

    from tilecore.lowering.tir_expr import tir_const

    a, b, c = g.a.buffer, g.b.buffer, g.c.buffer
    op = mfma_op(lowering.target.arch, a.dtype, c.dtype)
    if op is None:  # planning claimed this gemm only where mfma_op has an instruction
        raise lowering.unsupported(f"MFMA for {a.dtype} -> {c.dtype} on {lowering.target.arch}", g)
    intrin, kstep, opnd = op
    kw = kstep // 4  # operand elements per lane
    K = g.a.extents[0] if g.transpose_a else g.a.extents[1]
    acc = lowering.views[c.name]
    av, bv = lowering.views[a.name], lowering.views[b.name]
    Ka, Kb = (a.shape[1], b.shape[1])  # row lengths of the (row-major) LDS tiles
    lane = tx.floormod(lowering.thread, WAVE)
    wave = tx.floordiv(lowering.thread, WAVE)
    row0 = tx.floordiv(wave, lay.wn) * (lay.M // lay.wm) + tx.floormod(lane, 16)
    col0 = tx.floormod(wave, lay.wn) * (lay.N // lay.wn) + tx.floormod(lane, 16)
    kq = tx.floordiv(lane, 16) * kw
    acc_vec = f"{c.dtype}x4"
    if g.clear_accum:
        with B.unroll(0, lay.local_size) as i:
            B.buffer_store(acc, tir_const(0, c.dtype), [i])
    # bfloat16 travels as its bits: TVM legalizes bfloat16 vectors to float32 arithmetic
    frag_dtype = "int16" if a.dtype == "bfloat16" else a.dtype
    a_frag = B.alloc_buffer((lay.MI * kw,), frag_dtype, scope="local")
    b_frag = B.alloc_buffer((lay.NI * kw,), frag_dtype, scope="local")
    one = tir_const(1, "int32")

    def element(view, idx):
        v = tx.BufferLoad(view, [idx])
        if frag_dtype == a.dtype:
            return v
        # bf16 -> f32 is exact; its top 16 bits are the bf16 bits (LLVM folds this to the 16-bit load)
        bits = tx.reinterpret("uint32", tx.Cast("float32", v))
        return tx.Cast("int16", tx.shift_right(bits, tir_const(16, "uint32")))

    def fill(frag, slot, view, contiguous, index_of):
        """Operand elements of this lane: one LDS vector load when they are contiguous."""
        if contiguous and frag_dtype == a.dtype:
            B.buffer_store(frag, tx.BufferLoad(view, [tx.Ramp(index_of(0), one, kw)]), [tx.Ramp(slot * kw, one, kw)])
            return
        with B.unroll(0, kw) as e:
            B.buffer_store(frag, element(view, index_of(e)), [slot * kw + e])

    def operand(frag, slot):
        vec = tx.BufferLoad(frag, [tx.Ramp(slot * kw, one, kw)])
        return vec if str(vec.ty.dtype) == opnd else tx.reinterpret(opnd, vec)

    zero = tir_const(0, "int32")
    with B.serial(0, K // kstep) as kk:
        k0 = kk * kstep + kq
        with B.unroll(0, lay.MI) as mi:
            i = row0 + mi * 16
            fill(a_frag, mi, av, not g.transpose_a, lambda e: (k0 + e) * Ka + i if g.transpose_a else i * Ka + k0 + e)
        with B.unroll(0, lay.NI) as ni:
            j = col0 + ni * 16
            fill(b_frag, ni, bv, g.transpose_b, lambda e: j * Kb + k0 + e if g.transpose_b else (k0 + e) * Kb + j)
        with B.unroll(0, lay.MI) as mi:
            with B.unroll(0, lay.NI) as ni:
                slot = tx.Ramp((mi * lay.NI + ni) * 4, one, 4)
                res = tx.call_llvm_pure_intrin(
                    acc_vec,
                    intrin,
                    operand(a_frag, mi),
                    operand(b_frag, ni),
                    tx.BufferLoad(acc, [slot]),
                    zero,
                    zero,
                    zero,
                )
                B.buffer_store(acc, res, [slot])
