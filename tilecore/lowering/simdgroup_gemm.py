"""Apple GPUs for the shared SIMT lowering: threadgroup memory, simdgroups of 32, and
`T.gemm` on `simdgroup_matrix` 8x8 operations (TVM's Metal builtins).

Which thread holds which element of a simdgroup matrix is opaque in Metal, so a
gemm accumulator cannot stay in the per-thread fragment layout. `MetalSimtLowering`
keeps the accumulator of every eligible gemm in threadgroup memory (the shared
plan's "demoted fragment"): each simdgroup takes 8x8 output tiles in turn, loads
the tile with `simdgroup_load`, runs `simdgroup_multiply_accumulate` over K with A
and B tiles loaded from threadgroup memory (transposed loads for transpose_A /
transpose_B), and stores the tile back. Other gemms (int8, tiles not multiples
of 8) use the shared portable gemm.

Imports TVM: use it from backend code only.
"""
from __future__ import annotations

from tvm import tirx as tx
from tvm.backend.metal import op as mop
from tvm.script.ir_builder import IRBuilder
from tvm.tirx.script.builder import ir as B

from ..diagnostics import UnsupportedFeatureError
from ..ir import nodes as N
from ..ir.types import itemsize
from ..ir.visitor import walk_stmts
from .rocm_metal_simt import NonCudaSimtLowering
from .simt_layout import SharedLayout, StridedLayout
from .tir_expr import tir_const

SIMD_WIDTH = 32
# (operand dtype, accumulator dtype) pairs on simdgroup_matrix; bfloat16 is left to the portable
# gemm because TVM 0.27 legalizes bfloat16 buffers to uint16, which simdgroup matrices refuse
SIMDGROUP_DTYPES = {("float16", "float32"), ("float16", "float16"), ("float32", "float32")}


def _full(r: N.Region) -> bool:
    shape = r.buffer.static_shape()
    return (shape is not None and len(shape) == 2 and tuple(r.extents) == shape
            and all(isinstance(s, N.Const) and s.value == 0 for s in r.starts))


class MetalSimtLowering(NonCudaSimtLowering):
    """The SIMT lowering for Metal (see the module docstring)."""

    max_vector_lanes = 4

    def vector_width(self, c: N.Copy) -> int:
        # TVM's Metal codegen cannot address 64-bit vectors (int64x2): keep those scalar
        if itemsize(c.src.buffer.dtype) > 4 or itemsize(c.dst.buffer.dtype) > 4:
            return 1
        return super().vector_width(c)

    def __init__(self, func, target, options=None, intrinsics=None):
        super().__init__(func, target, options, intrinsics)
        # TVM's Metal codegen has no bool vectors: no multi-element chunks in kernels that touch bool
        has_bool = any(b.dtype == "bool" for b in self.plan.buffers.values())
        self.cap_vector_chunks(1 if has_bool else 4)
        self.simdgroup_gemms = set()
        self.assign_simdgroup_gemms()

    def assign_simdgroup_gemms(self):
        """Pick the gemms that run on simdgroup matrices; keep their accumulators in threadgroup memory."""
        plan = self.plan
        if self.threads % SIMD_WIDTH:
            return
        for g in walk_stmts(self.kernel.body):
            if not isinstance(g, N.Gemm):
                continue
            a, b, c = g.a.buffer, g.b.buffer, g.c.buffer
            if a.dtype != b.dtype or (a.dtype, c.dtype) not in SIMDGROUP_DTYPES:
                continue
            if not (_full(g.a) and _full(g.b) and _full(g.c)):
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
            self.simdgroup_gemms.add(id(g))
        if self.simdgroup_gemms:
            self.redo_demotions()
            plan.notes.append("T.gemm on simdgroup_matrix 8x8 (accumulators in threadgroup memory)")

    def cap_vector_chunks(self, lanes: int):
        """MSL vectors have at most 4 lanes: re-chunk register layouts of 8 contiguous elements."""
        for name, lay in list(self.plan.layout.items()):
            if isinstance(lay, StridedLayout) and lay.vec > lanes:
                self.plan.layout[name] = StridedLayout(lay.shape, lay.threads, lanes)

    def atomic_one(self, kind, buf, idx, value):
        """Metal atomics through the `tc_atomic_*` helpers that `METAL_DEVICE_LIB` prepends to the MSL."""
        if buf.dtype not in ("int32", "float32") or (buf.dtype == "float32" and kind != "add"):
            raise UnsupportedFeatureError("metal", f"T.atomic_{kind} on {buf.dtype}", None, self.source)
        from .tir_expr import cast_to
        B.evaluate(tx.call_extern("void", f"tc_atomic_{kind}", self.addr(buf, idx), cast_to(value, buf.dtype)))

    def redo_demotions(self):
        """Keep the plan consistent after moving accumulators to threadgroup memory: fragments
        that a T.Parallel loop can no longer reach thread-locally move there too (fixpoint)."""
        from .simt_plan import _check

        plan = self.plan
        body = self.kernel.body
        parallels = [s for s in walk_stmts(body) if isinstance(s, N.Parallel)]
        reduces = [s for s in walk_stmts(body) if isinstance(s, N.Reduce)]
        for _ in range(16):
            live = {n for n, st in plan.storage.items() if st == "reg"}
            new = _check(plan.layout, live, parallels, body, reduces) & live
            if not new:
                return
            for name in new:
                b = plan.buffers[name]
                plan.storage[name] = "smem"
                plan.layout[name] = SharedLayout(tuple(b.static_shape() or (1,)), itemsize(b.dtype))
                plan.demoted.add(name)

    def emit_Gemm(self, g: N.Gemm):
        self.touch((g,))
        if id(g) in self.simdgroup_gemms:
            return self.emit_simdgroup_gemm(g)
        return self.emit_simt_gemm(g)

    def emit_simdgroup_gemm(self, g: N.Gemm):
        a, b, c = g.a.buffer, g.b.buffer, g.c.buffer
        M, Nn = c.shape
        K = g.a.extents[0] if g.transpose_a else g.a.extents[1]
        av, bv, cv = self.views[a.name], self.views[b.name], self.views[c.name]
        lda, ldb, ldc = a.shape[1], b.shape[1], Nn
        groups = self.threads // SIMD_WIDTH
        tiles_n = Nn // 8
        tiles = (M // 8) * tiles_n
        sg = tx.floordiv(self.t, SIMD_WIDTH)
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


# MSL helpers for atomics (TVM 0.27's Metal codegen has none); the metal plugin inserts this
# after the `using namespace metal;` line of the generated source.
METAL_DEVICE_LIB = "\n".join(
    f"inline void tc_atomic_{op}({space} {ctype}* p, {ctype} v) "
    f"{{ atomic_fetch_{op}_explicit(({space} atomic_{ctype}*)p, v, memory_order_relaxed); }}"
    for space in ("device", "threadgroup")
    for ctype, ops in (("int", ("add", "max", "min")), ("float", ("add",)))
    for op in ops) + "\n"
