"""Apple GPUs for the SIMT lowering toolkit: `T.gemm` on `simdgroup_matrix` 8x8 operations
(TVM's Metal builtins), and the MSL helpers for atomics.

Which thread holds which element of a simdgroup matrix is opaque in Metal, so a
gemm accumulator cannot stay in the per-thread fragment layout. The `SimdgroupGemm`
rule keeps the accumulator of every eligible gemm in threadgroup memory (the
plan's "demoted fragment"): each simdgroup takes 8x8 output tiles in turn, loads
the tile with `simdgroup_load`, runs `simdgroup_multiply_accumulate` over K with A
and B tiles loaded from threadgroup memory (transposed loads for transpose_A /
transpose_B), and stores the tile back. Other gemms (int8, tiles not multiples
of 8) use the toolkit's portable gemm.

Planning is pure Python; lowering imports TVM when the rule runs.
"""
from __future__ import annotations

from tilecore.ir import nodes as N
from tilecore.ir.types import itemsize
from tilecore.lowering.intrinsics import contextual
from tilecore.lowering.simt_layout import SharedLayout
from tilecore.lowering.simt_plan import demote_unreachable, whole_region
from tilecore.plugin.rules import LoweringRule

SIMD_WIDTH = 32
# (operand dtype, accumulator dtype) pairs on simdgroup_matrix; bfloat16 is left to the portable
# gemm because TVM 0.27 legalizes bfloat16 buffers to uint16, which simdgroup matrices refuse
SIMDGROUP_DTYPES = {("float16", "float32"), ("float16", "float16"), ("float32", "float32")}


class SimdgroupGemm(LoweringRule):
    """`T.gemm` on simdgroup matrices (see the module docstring)."""

    name = "simdgroup_matrix"

    def plan(self, ctx) -> None:
        """Pick the gemms that run on simdgroup matrices; keep their accumulators in threadgroup memory."""
        plan = ctx.plan
        if ctx.threads % SIMD_WIDTH:
            return
        claims = plan.claimed(self.name)
        for g in ctx.stmts(N.Gemm):
            a, b, c = g.a.buffer, g.b.buffer, g.c.buffer
            if a.dtype != b.dtype or (a.dtype, c.dtype) not in SIMDGROUP_DTYPES:
                continue
            if not (whole_region(g.a, 2) and whole_region(g.b, 2) and whole_region(g.c, 2)):
                continue
            if plan.storage.get(a.name) != "smem" or plan.storage.get(b.name) != "smem":
                continue
            M, Nn = c.shape
            K = g.a.extents[0] if g.transpose_a else g.a.extents[1]
            if M % 8 or Nn % 8 or K % 8:
                continue
            if plan.storage.get(c.name) == "reg":
                plan.storage[c.name] = "smem"
                plan.layout[c.name] = SharedLayout((M, Nn), itemsize(c.dtype))
                plan.demoted.add(c.name)
            if plan.storage.get(c.name) != "smem":
                continue
            claims[id(g)] = True
        if claims:
            demote_unreachable(plan, ctx.kernel)
            plan.notes.append("T.gemm on simdgroup_matrix 8x8 (accumulators in threadgroup memory)")

    def __call__(self, lowering, g):
        if not lowering.claim(self.name, g):
            return NotImplemented
        emit_simdgroup_gemm(lowering, g)
        return None


def emit_simdgroup_gemm(lowering, g: N.Gemm):
    """Each simdgroup takes 8x8 tiles of C in turn: load, multiply-accumulate over K, store."""
    from tvm import tirx as tx
    from tvm.backend.metal import op as mop
    from tvm.script.ir_builder import IRBuilder
    from tvm.tirx.script.builder import ir as B

    from tilecore.lowering.tir_expr import tir_const

    a, b, c = g.a.buffer, g.b.buffer, g.c.buffer
    M, Nn = c.shape
    K = g.a.extents[0] if g.transpose_a else g.a.extents[1]
    av, bv, cv = lowering.views[a.name], lowering.views[b.name], lowering.views[c.name]
    lda, ldb, ldc = a.shape[1], b.shape[1], Nn
    groups = lowering.threads // SIMD_WIDTH
    tiles_n = Nn // 8
    tiles = (M // 8) * tiles_n
    sg = tx.floordiv(lowering.thread, SIMD_WIDTH)
    mat_a = B.alloc_buffer((64,), a.dtype, scope="metal.simdgroup")
    mat_b = B.alloc_buffer((64,), b.dtype, scope="metal.simdgroup")
    mat_c = B.alloc_buffer((64,), c.dtype, scope="metal.simdgroup")
    for name, buf in (("mat_a", mat_a), ("mat_b", mat_b), ("mat_c", mat_c)):
        IRBuilder.name(name, buf)
    zero = tir_const(0, "int32")

    def ptr(view, off):
        return tx.address_of(tx.BufferLoad(view, [off]))

    with B.serial(0, -(-tiles // groups)) as r:
        tile = r * groups + sg
        # uniform per simdgroup: every lane of a simdgroup takes the same branch
        with B.If(tile < tiles):
            with B.Then():
                i0 = tx.floordiv(tile, tiles_n) * 8
                j0 = tx.floormod(tile, tiles_n) * 8
                if g.clear_accum:
                    B.evaluate(mop.make_filled_simdgroup_matrix(mat_c.data, zero, tir_const(0, c.dtype)))
                else:
                    B.evaluate(mop.simdgroup_load(mat_c.data, zero, ptr(cv, i0 * ldc + j0), ldc))
                with B.serial(0, K // 8) as kk:
                    k0 = kk * 8
                    a_off = k0 * lda + i0 if g.transpose_a else i0 * lda + k0
                    b_off = j0 * ldb + k0 if g.transpose_b else k0 * ldb + j0
                    B.evaluate(mop.simdgroup_load(mat_a.data, zero, ptr(av, a_off), lda,
                                                  transpose_matrix=bool(g.transpose_a)))
                    B.evaluate(mop.simdgroup_load(mat_b.data, zero, ptr(bv, b_off), ldb,
                                                  transpose_matrix=bool(g.transpose_b)))
                    B.evaluate(mop.simdgroup_multiply_accumulate(mat_c.data, zero, mat_a.data, zero,
                                                                 mat_b.data, zero, mat_c.data, zero))
                B.evaluate(mop.simdgroup_store(mat_c.data, zero, ptr(cv, i0 * ldc + j0), ldc))


def _atomic(kind):
    @contextual
    def atomic(lowering, args):
        from tvm import tirx as tx
        from tvm.tirx.script.builder import ir as B

        buf, idx, value = args
        B.evaluate(tx.call_extern("void", f"tc_atomic_{kind}", lowering.addr(buf, idx), value))
    atomic.__doc__ = f"atomic {kind} through the `tc_atomic_{kind}` helper of METAL_DEVICE_LIB"
    return atomic


def metal_intrinsics():
    """tile-metal's atomics: int32 add/max/min and float32 add (what MSL's atomics offer)."""
    table = {(f"atomic_{kind}", "int32"): _atomic(kind) for kind in ("add", "max", "min")}
    table[("atomic_add", "float32")] = _atomic("add")
    return table


# MSL helpers for atomics (TVM 0.27's Metal codegen has none); the metal plugin inserts this
# after the `using namespace metal;` line of the generated source.
METAL_DEVICE_LIB = "\n".join(
    f"inline void tc_atomic_{op}({space} {ctype}* p, {ctype} v) "
    f"{{ atomic_fetch_{op}_explicit(({space} atomic_{ctype}*)p, v, memory_order_relaxed); }}"
    for space in ("device", "threadgroup")
    for ctype, ops in (("int", ("add", "max", "min")), ("float", ("add",)))
    for op in ops) + "\n"
