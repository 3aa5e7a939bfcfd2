"""Where a SIMT kernel's buffers live and how an element is addressed.

Allocation of register, replicated and shared storage (one pool of typed views or one
allocation per tile, as the target says), and `access`: the TIR buffer and index of an
element of any buffer (swizzled and multi-buffered shared tiles, register fragments in
the current thread iteration, per-thread copies).

fp8 memory (global, shared and register) holds the fp8 bits as uint8: an element read is
decoded to the float32 holding its value exactly, an element store rounds and encodes
(`lowering.fp8`), and a copy between tiles of one fp8 dtype moves the bits. No fp8 type
reaches the target's code generator, so every SIMT target gets the same exact conversions.

A mixin of `simt.SimtLowering`. Imports TVM: use it from backend code only.
"""

from __future__ import annotations

from math import prod
from typing import Optional

from tvm import tirx as tx
from tvm.script.ir_builder import IRBuilder
from tvm.tirx.script.builder import ir as B

from ..diagnostics import TileCompileError
from ..ir import nodes as N
from ..ir.types import is_fp8
from ..ir.visitor import walk_stmts
from .fp8 import decode, encode
from .simt_host import SimtHost
from .simt_layout import MmaLayout, RowLayout, SharedLayout, StridedLayout, StridedRowLayout
from .simt_reduce import REDUCE_LANES
from .tir_expr import cast_to, tir_const


class SimtMemory(SimtHost):
    """Where a SIMT kernel's buffers live and how an element is addressed."""

    def alloc_all(self):
        """Declare register and replicated arrays, then the shared tiles (see `alloc_shared`)."""
        for name, st in self.plan.storage.items():
            b = self.plan.buffers[name]
            if st in ("reg", "rep"):
                size = self.plan.layout[name].local_size if st == "reg" else max(1, prod(b.static_shape() or (1,)))
                arr = B.alloc_buffer((size,), self.storage_dtype(b.dtype), scope="local")
                IRBuilder.name(name, arr)
                self.views[name] = arr
                self.ex.bind_buffer(name, self.make_view_fn(b))
            elif st == "owned":
                self.plan.owners[name].allocate(self, b)
        self.alloc_shared(self.shared_tiles())

    def shared_tiles(self):
        """(name, buffer, layout) of every shared tile, in plan order."""
        return [
            (name, self.plan.buffers[name], self.plan.layout[name])
            for name, st in self.plan.storage.items()
            if st == "smem"
        ]

    def shared_offsets(self, smem):
        """(byte offset of each shared tile, total bytes): the tiles, the cross-warp reduction
        scratch when the kernel reduces (`scratch_off`), then `shared_tail` bytes that a rule
        reserved (`tail_off`, 8-byte aligned: e.g. a backend's synchronization objects)."""
        pool = self.target.shared_pool
        align = (self.plan.shared_alignment or self.target.shared_alignment) if pool else 1
        total, offsets = 0, {}
        self.scratch_off = None
        for name, _buffer, lay in smem:
            total = _align(total, align)
            offsets[name] = total
            total += lay.numel * lay.stages * lay.elem_bytes
        if any(isinstance(s, N.Reduce) for s in walk_stmts(self.kernel.body)):
            total = _align(total, 128) if pool else total
            self.scratch_off = total
            total += self._scratch_size()
        if self.shared_tail:
            total = _align(total, 8)
            self.tail_off = total
            total += self.shared_tail
        return offsets, total

    shared_tail = 0  # bytes a rule reserves after the tiles (`shared_offsets`)
    scratch_off: Optional[int] = None  # byte offset of the reduction scratch, when the kernel reduces

    def storage_dtype(self, dtype: str) -> str:
        """The dtype that holds a `dtype` tile on this target (bool may live in int8, fp8 in uint8)."""
        return self.target.bool_storage if dtype == "bool" else _tvm_dtype(dtype)

    def alloc_shared(self, smem):
        """Shared tiles: typed views of one byte pool (`target.shared_pool`), or one static
        allocation each; plus the cross-warp reduction scratch when the kernel reduces and the
        bytes a rule reserved (`shared_tail`)."""
        pool = self.target.shared_pool
        offsets, total = self.shared_offsets(smem)
        if total > self.target.max_shared_memory:
            span = smem[0][1].span if smem else self.kernel.span
            raise TileCompileError(
                f"the kernel needs {total} bytes of shared memory; {self.target.name}:{self.target.arch} "
                f"allows {self.target.max_shared_memory} per block",
                span,
                self.source,
            )
        self.smem_bytes = total
        if not total:
            return
        scope = self.target.shared_scope
        data = None
        if pool:
            self.pool = B.alloc_buffer((total,), "uint8", scope=scope)
            IRBuilder.name("smem_pool", self.pool)
            data = self.pool.data
        for name, b, lay in smem:
            dtype = self.storage_dtype(b.dtype)
            if pool:
                eb = lay.elem_bytes
                view = B.decl_buffer(
                    (lay.numel * lay.stages,), dtype, data=data, elem_offset=offsets[name] // eb, scope=scope
                )
            else:
                view = B.alloc_buffer((lay.numel * lay.stages,), dtype, scope=scope)
            IRBuilder.name(name, view)
            self.views[name] = view
            self.ex.bind_buffer(name, self.make_view_fn(b))
        if self.scratch_off is not None:
            n = self._scratch_size() // 4
            self.scratch = (
                B.decl_buffer((n,), "float32", data=data, elem_offset=self.scratch_off // 4, scope=scope)
                if pool
                else B.alloc_buffer((n,), "float32", scope=scope)
            )
            IRBuilder.name("reduce_scratch", self.scratch)

    def _scratch_size(self):
        """Bytes of the cross-warp reduction scratch: (warps of REDUCE_LANES, rows) float32 partials."""
        rows = 1
        for s in walk_stmts(self.kernel.body):
            if isinstance(s, N.Reduce):
                rows = max(rows, prod(s.dst.static_dims()))
        return 4 * max(1, self.threads // REDUCE_LANES) * rows

    def smem_offset(self, name, indices):
        """Element offset of `indices` in shared tile `name` (swizzle and pipeline stage applied)."""
        lay: SharedLayout = self.plan.layout[name]
        idx = list(indices)
        if lay.swizzle and len(idx) == 2:
            off = lay.offset2d(idx[0], idx[1], tx.floordiv, tx.floormod, tx.bitwise_xor)
        else:
            off = tir_const(0, "int32")
            stride = 1
            for d in reversed(range(len(idx))):
                off = off + idx[d] * stride
                stride *= lay.shape[d]
        st = self.stage.get(name)
        if st is not None:
            off = off + st * lay.numel
        return off

    def reg_index(self, name):
        """Register index of fragment `name` in the current thread iteration."""
        lay = self.plan.layout[name]
        ctx = self.ctx
        if ctx.layout is None:
            raise AssertionError(f"register fragment {name} accessed outside its thread iteration")
        if lay == ctx.layout:
            return ctx.local
        if isinstance(lay, RowLayout) and isinstance(ctx.layout, MmaLayout):
            return ctx.layout.row_local(ctx.it)
        if isinstance(lay, StridedRowLayout) and isinstance(ctx.layout, StridedLayout):
            return tx.floordiv(ctx.it[0], lay.q) if lay.q > 1 else ctx.it[0]
        raise AssertionError(f"fragment {name}: incompatible layout in this loop")

    def rep_index(self, buf: N.Buffer, indices):
        """Flat index of `indices` in a per-thread copy of `buf`."""
        off = tir_const(0, "int32")
        stride = 1
        shape = buf.static_shape() or (1,)
        for d in reversed(range(len(indices))):
            off = off + indices[d] * stride
            stride *= shape[d]
        return off

    def access(self, buf: N.Buffer, indices):
        """(tirx Buffer, [flat or nd index]) for element `indices` (already lowered) of `buf`."""
        st = self.plan.storage[buf.name]
        view = self.views[buf.name]
        if st == "global":
            return view, list(indices)
        if st == "smem":
            return view, [self.smem_offset(buf.name, indices)]
        if st == "reg":
            return view, [self.reg_index(buf.name)]
        if st == "owned":
            owner = self.plan.owners[buf.name]
            raise AssertionError(
                f"buffer {buf.name} is held by the rule {getattr(owner, 'name', owner)!r}, "
                "which must lower every statement that touches it"
            )
        return view, [self.rep_index(buf, indices)]

    def make_view_fn(self, buf: N.Buffer):
        """The expression lowerer's view of `buf`: element loads through `access` (bool tiles
        stored as another dtype read back as bool)."""

        def load(indices):
            view, idx = self.access(buf, indices)
            v = tx.BufferLoad(view, idx)
            return cast_to(v, "bool") if buf.dtype == "bool" and view.dtype != "bool" else self.value_of(buf, v)

        return load

    def value_of(self, buf: N.Buffer, stored):
        """An element of `buf` as read from its storage (`stored`) into a value: fp8 bits decoded
        to the float32 holding the value exactly, anything else as it is."""
        if is_fp8(buf.dtype):
            return self.ex.exact(decode(stored, buf.dtype), buf.dtype)  # type: ignore[attr-defined]
        return stored

    def store(self, buf: N.Buffer, indices, value, bits: bool = False):
        """Store `value` (converted to the buffer's dtype, then its storage dtype) at `indices`;
        with `bits`, `value` is already an element of `buf`'s dtype in its storage (a copy's)."""
        view, idx = self.access(buf, indices)
        if is_fp8(buf.dtype):
            if not bits:  # round (computed once, in a register) and encode
                value = encode(self.ex.to_fp8(value, buf.dtype), buf.dtype)  # type: ignore[attr-defined]
            B.buffer_store(view, value, idx)
            return
        # a float64 value is held before the rounding to bfloat16 binds it (float64_operand)
        v = cast_to(self.ex.float64_operand(value, buf.dtype), buf.dtype)
        B.buffer_store(view, cast_to(v, str(view.dtype)) if str(view.dtype) != buf.dtype else v, idx)

    def addr(self, buf: N.Buffer, indices):
        """The address of element `indices` of `buf` (a PrimExpr)."""
        view, idx = self.access(buf, indices)
        return tx.address_of(tx.BufferLoad(view, idx))

    def element(self, buf: N.Buffer, indices):
        """The BufferLoad of element `indices` of `buf` in its storage (what device copies take)."""
        view, idx = self.access(buf, indices)
        return tx.BufferLoad(view, idx)

    def stage_base_addr(self, buf):
        """Address of the first element of `buf`'s current pipeline stage."""
        view = self.views[buf.name]
        lay = self.plan.layout[buf.name]
        st = self.stage.get(buf.name)
        off = st * lay.numel if st is not None else tir_const(0, "int32")
        return tx.address_of(tx.BufferLoad(view, [off]))


def _align(x, a):
    return (x + a - 1) // a * a


def _tvm_dtype(d: str) -> str:
    """The TIR dtype of memory of Tile IR dtype `d`: fp8 as its uint8 bits (see module doc)."""
    return "uint8" if is_fp8(d) else d
