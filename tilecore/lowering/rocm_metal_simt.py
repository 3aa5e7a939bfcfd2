"""The shared SIMT lowering (`simt.py`) for targets without CUDA's C++ device library.

ROCm (LLVM AMDGPU) and Metal (MSL) cannot take the `tc::` C++ helpers that the
CUDA path injects with `cuda_func_call`; this subclass replaces each of them with
TVM builtins that both codegens understand:

* warp shuffles -> `tirx.tvm_warp_shuffle` (ds_bpermute on AMDGPU, simd_shuffle on Metal);
* 16-byte copies -> TIR vector loads/stores (a Ramp over the last index), at most
  4 lanes on Metal;
* atomics -> `tirx.atomic_add` (32-bit adds) here; `mfma.py` and `simdgroup_gemm.py`
  override them with helper libraries for their targets;
* `T.print` -> an UnsupportedFeatureError at the user's line (no device printf);
* shared tiles -> one static allocation each instead of typed views over one byte
  pool: TVM 0.27's AMDGPU codegen turns such views into global-memory accesses
  (addrspacecast 3 -> 1), and its Metal codegen sizes the pool in elements of the
  view type instead of bytes.

The backend-specific matrix units live in `mfma.py` (ROCm) and `simdgroup_gemm.py`
(Metal); both subclass `NonCudaSimtLowering`.

Imports TVM: use it from backend code only.
"""
from __future__ import annotations

import re
from math import prod

from tvm import tirx as tx
from tvm.script.ir_builder import IRBuilder
from tvm.tirx.script.builder import ir as B

from ..diagnostics import TileCompileError, UnsupportedFeatureError
from ..ir import nodes as N
from ..ir.visitor import walk_stmts
from .simt import SimtLowering, SimtTarget
from .intrinsics import dtype_of
from .tir_expr import cast_to, tir_const

_SHFL = re.compile(r"tc::shfl_xor<([\w ]+)>")


class NonCudaSimtLowering(SimtLowering):
    """SimtLowering with every CUDA device-library call replaced by portable TVM builtins."""

    def __init__(self, func, target: SimtTarget, options=None, intrinsics=None):
        if target.has_cp_async:
            raise ValueError("cp.async pipelines are CUDA-only; set has_cp_async=False")
        super().__init__(func, target, options, intrinsics)

    @property
    def lane(self):
        return tx.floormod(self.t, self.target.warp_size)

    def call(self, name, *args, ret="void"):
        """The CUDA path's device-library calls, in their portable form (a vector copy is emitted
        here as a store; the returned constant leaves a no-op for the caller's evaluate)."""
        if name == "tc::copy16":
            return self.vector_copy(*args)
        if name == "tc::zero16":
            return self.vector_copy(args[0])
        m = _SHFL.fullmatch(name)
        if m:
            value, mask = args
            return self.shuffle_xor(value, mask)
        raise AssertionError(f"the {self.target.kind} lowering has no equivalent for CUDA helper {name}")

    def shuffle_xor(self, value, mask):
        """value of lane (lane ^ mask) within the warp/wavefront/simdgroup (32-bit shuffles only)."""
        ws = self.target.warp_size
        src = tx.bitwise_xor(self.lane, cast_to(mask, "int32"))

        def shfl32(v):
            return tx.call_intrin(dtype_of(v), "tirx.tvm_warp_shuffle", tx.const(0, "int32"), v, src,
                                  tir_const(ws, "int32"), tir_const(ws, "int32"))

        dt = dtype_of(value)
        if dt in ("float32", "int32", "uint32"):
            return shfl32(value)
        if dt in ("float64", "int64"):
            bits = tx.reinterpret("int64", value) if dt == "float64" else value
            lo = shfl32(tx.Cast("int32", bits))
            hi = shfl32(tx.Cast("int32", tx.shift_right(bits, tir_const(32, "int64"))))
            joined = tx.bitwise_or(tx.shift_left(tx.Cast("int64", hi), tir_const(32, "int64")),
                                   tx.bitwise_and(tx.Cast("int64", lo), tir_const(0xFFFFFFFF, "int64")))
            return tx.reinterpret("float64", joined) if dt == "float64" else joined
        wide = "float32" if dt in ("float16", "bfloat16") else "int32"
        return cast_to(shfl32(cast_to(value, wide)), dt)

    # widest vector (in lanes) the target's codegen can express; Metal vectors stop at 4 lanes
    max_vector_lanes = 16

    def vector_width(self, c: N.Copy) -> int:
        """Elements per vector access: the shared rule (16 bytes), capped at the target's lanes."""
        if c.src.buffer.dtype == "bool" or c.dst.buffer.dtype == "bool":
            return 1  # bool tiles are stored as int8 (see _storage_dtype); keep them scalar
        v = super().vector_width(c)
        while v > self.max_vector_lanes:
            v //= 2
        return v

    def vector_copy(self, d_addr, s_addr=None):
        """A vector copy (or zero fill) between two element addresses built by the shared lowering."""
        dst = d_addr.args[0]
        lanes = self.current_vector_lanes
        one = tir_const(1, "int32")

        def widen(load):
            idx = list(load.indices)
            idx[-1] = tx.Ramp(idx[-1], one, lanes)
            return load.source, idx

        dbuf, didx = widen(dst)
        if s_addr is None:
            value = tx.Broadcast(tir_const(0, str(dbuf.dtype)), lanes)
        else:
            sbuf, sidx = widen(s_addr.args[0])
            value = tx.BufferLoad(sbuf, sidx)
        B.buffer_store(dbuf, value, didx)
        return tir_const(0, "int32")

    def emit_Copy(self, c: N.Copy, async_copy=False):
        self.current_vector_lanes = self.vector_width(c)
        return super().emit_Copy(c, async_copy)

    def atomic_one(self, kind, buf: N.Buffer, idx, value):
        if kind != "add" or buf.dtype not in ("float32", "int32"):
            # TVM 0.27's AMDGPU and Metal codegens emit 32-bit atomic adds only
            raise UnsupportedFeatureError(self.target.kind, f"T.atomic_{kind} on {buf.dtype}", None, self.source)
        B.evaluate(tx.call_intrin(buf.dtype, "tirx.atomic_add", self.addr(buf, idx), cast_to(value, buf.dtype)))

    def emit_Print(self, p: N.Print):
        raise UnsupportedFeatureError(self.target.kind, "T.print (no device printf on this target)",
                                      p.span, self.source)

    def make_view_fn(self, buf: N.Buffer):
        def load(indices):
            view, idx = self.access(buf, indices)
            v = tx.BufferLoad(view, idx)
            return cast_to(v, "bool") if buf.dtype == "bool" and view.dtype != "bool" else v
        return load

    def store(self, buf: N.Buffer, indices, value):
        view, idx = self.access(buf, indices)
        v = cast_to(value, buf.dtype)
        B.buffer_store(view, cast_to(v, str(view.dtype)) if str(view.dtype) != buf.dtype else v, idx)

    def alloc_all(self):
        """Shared tiles as separate static allocations; register and replicated arrays as in CUDA."""
        smem = []
        for name, st in self.plan.storage.items():
            b = self.plan.buffers[name]
            if st == "smem":
                smem.append((name, b, self.plan.layout[name]))
            elif st in ("reg", "rep"):
                size = self.plan.layout[name].local_size if st == "reg" else max(1, prod(b.static_shape() or (1,)))
                arr = B.alloc_buffer((size,), _storage_dtype(b.dtype), scope="local")
                IRBuilder.name(name, arr)
                self.views[name] = arr
                self.ex.bind_buffer(name, self.make_view_fn(b))
        total = sum(lay.numel * lay.stages * lay.elem_bytes for _, _, lay in smem)
        needs_scratch = any(isinstance(s, N.Reduce) for s in walk_stmts(self.kernel.body))
        if needs_scratch:
            total += self._scratch_size()
        if total > self.target.max_shared_memory:
            span = smem[0][1].span if smem else self.kernel.span
            raise TileCompileError(
                f"the kernel needs {total} bytes of shared memory; {self.target.kind}:{self.target.arch} "
                f"allows {self.target.max_shared_memory} per block", span, self.source)
        self.smem_bytes = total
        scope = self.target.shared_scope if self.target.shared_scope != "shared.dyn" else "shared"
        for name, b, lay in smem:
            arr = B.alloc_buffer((lay.numel * lay.stages,), _storage_dtype(b.dtype), scope=scope)
            IRBuilder.name(name, arr)
            self.views[name] = arr
            self.ex.bind_buffer(name, self.make_view_fn(b))
        if needs_scratch:
            self.scratch = B.alloc_buffer((self._scratch_size() // 4,), "float32", scope=scope)
            IRBuilder.name("reduce_scratch", self.scratch)


def _storage_dtype(dtype: str) -> str:
    """bool tiles are kept as int8: TVM's GPU codegens vectorize bool stores into invalid IR."""
    return "int8" if dtype == "bool" else dtype
