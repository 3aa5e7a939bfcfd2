"""tile-cuda's Gemm rules: warpgroup MMA (sm_90a) first, then warp-level mma.sync (sm_80+).

Each rule chooses the accumulator's register layout while the kernel is planned
(both use the toolkit's m16n8 `MmaLayout`; wgmma asks for one warp per 16 or 32 rows),
claims the gemms it will lower, and emits one call into the helper library per
gemm (`device_lib.CUDA_DEVICE_LIB`, `wgmma.WGMMA_LIB`). A gemm neither rule takes
falls through to the toolkit's portable gemm.

Planning is pure Python; lowering imports TVM when a rule runs.
"""

from __future__ import annotations

import dataclasses
from typing import Dict

from tilecore.ir import nodes as N
from tilecore.ir.types import itemsize
from tilecore.lowering.simt_layout import MmaLayout, SharedLayout
from tilecore.lowering.simt_plan import unswizzled_buffers, whole_region
from tilecore.plugin.rules import LoweringRule

from . import wgmma
from .target import has_mma_sync, has_wgmma

# (operand dtype, accumulator dtype) pairs of mma.sync
MMA_DTYPES = {("float16", "float32"), ("bfloat16", "float32"), ("int8", "int32")}


def mma_shape_ok(g: N.Gemm) -> bool:
    """Dtypes and shapes that the m16n8k16 (int8: m16n8k32) MMA atoms tile exactly."""
    a, b, c = g.a.buffer, g.b.buffer, g.c.buffer
    if not (
        a.dtype == b.dtype
        and (a.dtype, c.dtype) in MMA_DTYPES
        and len(c.shape) == 2
        and len(a.squeezed_shape() if hasattr(a, "squeezed_shape") else a.shape) == 2
    ):
        return False
    ka = g.a.extents[0] if g.transpose_a else g.a.extents[-1]
    kstep = 32 if a.dtype == "int8" else 16
    return not (ka % kstep or len(g.a.extents) != 2 or len(g.b.extents) != 2)


def _b(x: bool) -> str:
    return "true" if x else "false"


def _clear_accumulator(lowering, g: N.Gemm, lay) -> None:
    from tvm.tirx.script.builder import ir as B

    from tilecore.lowering.tir_expr import tir_const

    if g.clear_accum:
        acc = lowering.views[g.c.buffer.name]
        with B.unroll(0, lay.local_size) as i:
            B.buffer_store(acc, tir_const(0, g.c.buffer.dtype), [i])


def _first(lowering, buf):
    from tvm import tirx as tx

    from tilecore.lowering.tir_expr import tir_const

    return tx.address_of(tx.BufferLoad(lowering.views[buf.name], [tir_const(0, "int32")]))


class MmaSyncGemm(LoweringRule):
    """mma.sync with ldmatrix operand loads: A and B in (swizzled) shared memory (`tc::gemm_ss`),
    or A from registers in the accumulator layout of the same warp rows (`tc::gemm_rs`)."""

    name = "mma_sync"

    def accumulator_layout(self, gemm, warps, prefer_rows, existing, target):
        if not (has_mma_sync(target) and mma_shape_ok(gemm)):
            return None
        if isinstance(existing, MmaLayout):
            return existing
        M, Nn = gemm.c.buffer.shape
        return MmaLayout.choose(M, Nn, warps, gemm.policy, prefer_rows=prefer_rows)

    def plan(self, ctx) -> None:
        """Swizzle the shared operand tiles of MMA gemms (bank-conflict-free ldmatrix rows)."""
        plan = ctx.plan
        pinned = unswizzled_buffers(ctx.kernel)
        for g in ctx.stmts(N.Gemm):
            if type(plan.mma_gemms.get(id(g))) is not MmaLayout:
                continue
            for r in (g.a, g.b):
                lay = plan.layout.get(r.buffer.name)
                if (
                    isinstance(lay, SharedLayout)
                    and r.buffer.name not in pinned
                    and SharedLayout.can_swizzle(lay.shape, lay.elem_bytes)
                ):
                    plan.layout[r.buffer.name] = dataclasses.replace(lay, swizzle=True)

    def __call__(self, lowering, g):
        lay = lowering.plan.mma_gemms.get(id(g))
        if type(lay) is not MmaLayout:
            return NotImplemented
        storage = lowering.plan.storage
        if storage[g.a.buffer.name] == "reg" and storage[g.b.buffer.name] == "smem" and whole_region(g.b, 2):
            return self.emit_rs(lowering, g, lay)
        if (
            storage[g.a.buffer.name] == "smem"
            and storage[g.b.buffer.name] == "smem"
            and whole_region(g.a, 2)
            and whole_region(g.b, 2)
        ):
            return self.emit_ss(lowering, g, lay)
        return NotImplemented

    def emit_ss(self, lowering, g: N.Gemm, lay: MmaLayout):
        """C += A B with both operands in shared memory."""
        from tvm.tirx.script.builder import ir as B

        from .intrinsics import CXX_TYPES, helper_call

        a, b, c = g.a.buffer, g.b.buffer, g.c.buffer
        la, lb = lowering.plan.layout[a.name], lowering.plan.layout[b.name]
        K = g.a.extents[0] if g.transpose_a else g.a.extents[1]
        _clear_accumulator(lowering, g, lay)
        tmpl = (
            f"tc::gemm_ss<{lay.M}, {lay.N}, {K}, {lay.wm}, {lay.wn}, {_b(g.transpose_a)}, "
            f"{_b(g.transpose_b)}, {CXX_TYPES[a.dtype]}, {la.row_elems}, {lb.row_elems}, "
            f"{_b(la.swizzle)}, {_b(lb.swizzle)}>"
        )
        B.evaluate(
            helper_call(lowering, tmpl, lowering.stage_base_addr(a), lowering.stage_base_addr(b), _first(lowering, c))
        )

    def emit_rs(self, lowering, g: N.Gemm, lay: MmaLayout):
        """C += A B with A in registers (the FlashAttention-2 trick), B in shared memory."""
        from tvm.tirx.script.builder import ir as B

        from .intrinsics import CXX_TYPES, helper_call

        a, b = g.a.buffer, g.b.buffer
        lb = lowering.plan.layout[b.name]
        K = g.a.extents[1]
        _clear_accumulator(lowering, g, lay)
        tmpl = (
            f"tc::gemm_rs<{lay.M}, {lay.N}, {K}, {lay.wm}, {_b(g.transpose_b)}, {CXX_TYPES[a.dtype]}, "
            f"{lb.row_elems}, {_b(lb.swizzle)}>"
        )
        B.evaluate(
            helper_call(lowering, tmpl, _first(lowering, a), lowering.stage_base_addr(b), _first(lowering, g.c.buffer))
        )


class WgmmaGemm(LoweringRule):
    """Hopper warpgroup MMA (see `wgmma`): operands by shared-memory descriptor, A optionally in
    registers; the gemm's accumulator takes one warp per 16 rows."""

    name = "wgmma"

    def accumulator_layout(self, gemm, warps, prefer_rows, existing, target):
        if not (has_wgmma(target) and mma_shape_ok(gemm)) or isinstance(existing, MmaLayout):
            return None
        if not wgmma.candidate(gemm, warps):
            return None
        M, Nn = gemm.c.buffer.shape
        # warp w owns 16R rows (R = 1 or 2 m64 instructions per warpgroup): wgmma's accumulator layout
        return MmaLayout(M, Nn, warps, 1)

    def plan(self, ctx) -> None:
        """Claim the gemms whose operands qualify; give their tiles wgmma's canonical layout,
        the module its instruction wrappers, and every barrier the async-proxy fence."""
        plan = ctx.plan
        warp = ctx.target.warp_size
        if not has_wgmma(ctx.target) or ctx.threads % warp:
            return
        gemms = ctx.stmts(N.Gemm)
        chosen = select_wgmma_gemms(plan, gemms, ctx.threads // warp, unswizzled_buffers(ctx.kernel))
        if not chosen:
            return
        plan.claimed(self.name).update(chosen)
        for g in gemms:
            if id(g) not in chosen:
                continue
            for r in (g.a, g.b):
                lay = plan.layout.get(r.buffer.name)
                if plan.storage[r.buffer.name] == "smem":
                    wide = lay.shape[-1] * lay.elem_bytes > 128
                    # 32 rows per warp: A's rows permuted so that each m64 instruction reads 16 of every warp
                    rows = wgmma.row_blocks(g, ctx.threads // 32) if r is g.a else 1
                    plan.layout[r.buffer.name] = dataclasses.replace(lay, swizzle=True, blocked=wide, row_blocks=rows)
        plan.device_sources.append(wgmma.cxx_source(chosen.values()))
        plan.before_barrier.append("async_proxy_fence")
        plan.shared_alignment = wgmma.SMEM_ALIGN

    def __call__(self, lowering, g):
        return self.issue(lowering, g, 0)

    def issue(self, lowering, g, in_flight):
        """Issue the gemm's wgmma group and leave up to `in_flight` groups running."""
        if lowering.claim(self.name, g) is None:
            return NotImplemented
        emit_wgmma(lowering, g, pending=in_flight)
        return None

    def retire(self, lowering, g):
        """Wait for the gemm's wgmma groups (`tc::wgmma_retire`)."""
        emit_wgmma_retire(lowering, g)


def emit_wgmma(lowering, g: N.Gemm, pending: int = 0) -> None:
    """The `tc::wgmma_ss` / `tc::wgmma_rs` call of a gemm the wgmma rule claimed; `pending` wgmma
    groups stay in flight on return (a later call with pending=0, or `emit_wgmma_retire`, retires
    them before the accumulator, or a register A operand, is touched)."""
    from tvm.tirx.script.builder import ir as B

    from .intrinsics import CXX_TYPES, helper_call

    lay = lowering.plan.mma_gemms[id(g)]
    a, b = g.a.buffer, g.b.buffer
    lb = lowering.plan.layout[b.name]
    K = g.a.extents[0] if g.transpose_a else g.a.extents[1]
    _clear_accumulator(lowering, g, lay)
    T = CXX_TYPES[a.dtype]
    # no proxy fence where only TMA wrote the shared operands (see smem_written_by_tma_only)
    tail = f"{pending}, false" if getattr(lowering, "smem_written_by_tma_only", False) else f"{pending}"
    if lowering.plan.storage[a.name] == "reg":
        tmpl = f"tc::wgmma_rs<{lay.N}, {K}, {_b(g.transpose_b)}, {T}, {lb.shape[0]}, {lb.shape[1]}, {tail}>"
        a_ptr = _first(lowering, a)
    else:
        la = lowering.plan.layout[a.name]
        tmpl = (
            f"tc::wgmma_ss<{lay.N}, {K}, {_b(g.transpose_a)}, {_b(g.transpose_b)}, {T}, "
            f"{la.shape[0]}, {la.shape[1]}, {lb.shape[0]}, {lb.shape[1]}, {lay.MI}, {tail}>"
        )
        a_ptr = lowering.stage_base_addr(a)
    B.evaluate(helper_call(lowering, tmpl, a_ptr, lowering.stage_base_addr(b), _first(lowering, g.c.buffer)))


def emit_wgmma_retire(lowering, g: N.Gemm, pending: int = 0) -> None:
    """Retire the wgmma groups in flight after `emit_wgmma(..., pending>0)` until `pending` are
    left; gemm `g`, issued before those, can then be read."""
    from tvm.tirx.script.builder import ir as B

    from .intrinsics import helper_call

    lay = lowering.plan.mma_gemms[id(g)]
    tmpl = f"tc::wgmma_retire<{lay.MI * lay.N // 2}" + (f", {pending}>" if pending else ">")
    B.evaluate(helper_call(lowering, tmpl, _first(lowering, g.c.buffer)))


def select_wgmma_gemms(plan, gemms, warps, no_swizzle) -> Dict[int, tuple]:
    """The MMA gemms that run on warpgroup MMA, with the (dtype, N) of their instructions.

    Wgmma operand tiles wider than 128 bytes are stored in 128-byte column blocks, which the
    mma.sync path does not read: a gemm that shares such a tile with an mma.sync gemm stays on
    mma.sync too.
    """
    mma = plan.mma_gemms
    chosen = {}
    for g in gemms:
        lay = mma.get(id(g))
        if lay is None or (lay.wm, lay.wn) != (warps, 1) or not wgmma.candidate(g, warps):
            continue
        a_reg = plan.storage.get(g.a.buffer.name) == "reg"
        if a_reg and g.a.buffer.dtype not in ("float16", "bfloat16"):
            continue
        if wgmma.row_blocks(g, warps) > 1 and (
            a_reg or sum(g.a.buffer.name in (h.a.buffer.name, h.b.buffer.name) for h in gemms) > 1
        ):
            continue  # its A tile's rows are permuted for this gemm alone (SharedLayout.row_blocks)
        if not wgmma.operands_ok(g, plan.storage, a_reg):
            continue
        if {g.a.buffer.name, g.b.buffer.name} & no_swizzle:
            continue
        chosen[id(g)] = g
    while True:
        wide = set()
        for g in chosen.values():
            for r in (g.a, g.b):
                if plan.storage.get(r.buffer.name) == "smem" and r.buffer.shape[-1] * itemsize(r.buffer.dtype) > 128:
                    wide.add(r.buffer.name)
        on_mma_sync = {r.buffer.name for g in gemms if id(g) in mma and id(g) not in chosen for r in (g.a, g.b)}
        drop = [k for k, g in chosen.items() if {g.a.buffer.name, g.b.buffer.name} & wide & on_mma_sync]
        if not drop:
            break
        for k in drop:
            del chosen[k]
    return {k: (g.a.buffer.dtype, g.c.buffer.shape[1]) for k, g in chosen.items()}
