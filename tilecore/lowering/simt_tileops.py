"""The portable lowering of the tile ops Copy, Fill, Gemm, Cumsum, Atomic and Print.

What the toolkit emits when no rule of the backend took the op: element or vector
copies (predicated at partial tiles), a dot product per output element, sequential
scans, one atomic device instruction per element.

A mixin of `simt.SimtLowering`. Imports TVM: use it from backend code only.
"""

from __future__ import annotations

from math import prod

from tvm import tirx as tx
from tvm.tirx.script.builder import ir as B

from ..ir import nodes as N
from ..ir.types import is_fp8, itemsize
from .intrinsics import dtype_of
from .simt_copy import contiguous_run, vector_width
from .simt_host import SimtHost
from .simt_layout import MmaLayout, StridedLayout
from .simt_threads import _squeeze, unflatten
from .tir_expr import cast_to, tir_const


class SimtTileOps(SimtHost):
    """The portable lowering of the tile ops Copy, Fill, Gemm, Cumsum, Atomic and Print."""

    def emit_Copy(self, c: N.Copy, async_copy=False):
        """Portable tile copy: per-element or vector accesses spread over the threads, predicated
        where the bounds pass could not prove the regions inside their tensors. With `async_copy`
        (a pipeline rule's copies) every vector is an "async_copy" device instruction."""
        src, dst = c.src, c.dst
        ss, ds = self.plan.storage[src.buffer.name], self.plan.storage[dst.buffer.name]
        shape = dst.squeezed_shape() or (1,)
        pred_src = c.predicated and ss == "global"
        pred_dst = c.predicated and ds == "global"

        # fp8 to the same fp8 dtype moves the bits; other fp8 copies convert the decoded values
        bits = is_fp8(src.buffer.dtype) and src.buffer.dtype == dst.buffer.dtype
        converts_fp8 = not bits and (is_fp8(src.buffer.dtype) or is_fp8(dst.buffer.dtype))
        # float64 to a 16-bit float rounds through float32 to odd, a `Let` (tir_expr.float32_round_to_odd)
        # that TVM's vectorizer failed on ("Let cannot bind the same var to two different values":
        # rocm, conformance seed 58585): such a copy stays element by element
        rounds_f64 = src.buffer.dtype == "float64" and dst.buffer.dtype in ("float16", "bfloat16")

        def element(it_idx):
            si = self.region_index(src, it_idx)
            di = self.region_index(dst, it_idx)
            view, idx = self.access(src.buffer, si)
            val = tx.BufferLoad(view, idx)
            if converts_fp8:
                val = self.value_of(src.buffer, val)
            if pred_src:
                zero = tir_const(0, dtype_of(val) if bits or converts_fp8 else src.buffer.dtype)
                val = tx.if_then_else(self.in_bounds(src, si), val, zero)
            if pred_dst:
                with B.If(self.in_bounds(dst, di)):
                    with B.Then():
                        self.store(dst.buffer, di, val, bits=bits)
            else:
                self.store(dst.buffer, di, val, bits=bits)

        if ds == "rep":
            # a per-thread copy: every thread fills all of it (kept identical in every thread)
            with B.serial(0, prod(shape)) as e:
                element(unflatten(e, tuple(shape)))
            return
        if ds == "reg" or ss == "reg":
            anchor = dst.buffer if ds == "reg" else src.buffer
            other = src if ds == "reg" else dst
            lay = self.plan.layout[anchor.name]
            # a strided fragment's runs, or an MMA fragment's column pairs, from or to global or shared memory
            run = lay.vec if isinstance(lay, StridedLayout) else 2 if isinstance(lay, MmaLayout) else 1
            vec_ok = (
                run > 1
                and not (pred_src or pred_dst)
                and "bool" not in (src.buffer.dtype, dst.buffer.dtype)
                and run * max(itemsize(src.buffer.dtype), itemsize(dst.buffer.dtype)) <= 32
                and not converts_fp8
                and not rounds_f64
                and ss != ds
                and self._contiguous_run(other, run)
            )
            self.iterate_layout(lay, lambda idx: element(_squeeze(idx, anchor.shape)), vectorize=vec_ok)
            return
        vec = self.vector_width(c)
        if vec > 1:

            def vector(it_idx):
                si = self.region_index(src, it_idx)
                di = self.region_index(dst, it_idx)
                s_el = self.element(src.buffer, si)
                d_el = self.element(dst.buffer, di)
                if async_copy:
                    if pred_src:
                        # out of bounds: zero-fill from a clamped, valid address
                        safe = self.element(src.buffer, self.clamp(src, si))
                        self.instruction("async_copy", None, d_el, safe, self.in_bounds(src, si), vec)
                    else:
                        self.instruction("async_copy", None, d_el, s_el, tx.const(True, "bool"), vec)
                    return
                if pred_src or pred_dst:
                    ok = (
                        tx.And(self.in_bounds(src, si), self.in_bounds(dst, di))
                        if pred_src and pred_dst
                        else (self.in_bounds(src, si) if pred_src else self.in_bounds(dst, di))
                    )
                    with B.If(ok):
                        with B.Then():
                            self.instruction("vector_copy", None, d_el, s_el, vec)
                        if pred_src and not pred_dst:
                            with B.Else():
                                self.instruction("vector_copy", None, d_el, None, vec)
                else:
                    self.instruction("vector_copy", None, d_el, s_el, vec)

            self.iterate_linear(tuple(shape), vec, vector)
            return
        if async_copy:
            raise AssertionError("async copy requires 16-byte vectors")
        self.iterate_linear(tuple(shape), 1, element)

    def _contiguous_run(self, r: N.Region, vec: int) -> bool:
        """Whether `vec` consecutive elements along the region's last dim are contiguous and aligned."""
        return contiguous_run(r, vec, self.plan)

    def vector_width(self, c: N.Copy) -> int:
        """Elements per vector access of copy `c` (see `simt_copy.vector_width`)."""
        return vector_width(c, self.plan, self.target)

    def emit_copy_async(self, c: N.Copy):
        """Copy `c` as async vector copies (for a pipeline rule), outside the barrier bookkeeping."""
        saved = (self.pending_r, self.pending_w)
        self.pending_r, self.pending_w = set(), set()
        self.emit_Copy(c, async_copy=True)
        self.pending_r, self.pending_w = saved

    def emit_Fill(self, f: N.Fill):
        """Portable fill: every element of the region, spread over its owners."""
        r = f.dst
        shape = r.squeezed_shape() or (1,)

        def element(it_idx):
            di = self.region_index(r, it_idx)
            val = self.lower(f.value)
            if self.plan.storage[r.buffer.name] == "global":
                with B.If(self.in_bounds(r, di)):
                    with B.Then():
                        self.store(r.buffer, di, val)
            else:
                self.store(r.buffer, di, val)

        if self.plan.storage[r.buffer.name] == "reg":
            self.iterate_layout(self.plan.layout[r.buffer.name], lambda idx: element(_squeeze(idx, r.buffer.shape)))
        elif self.plan.storage[r.buffer.name] == "rep":
            with B.serial(0, prod(shape)) as e:
                element(unflatten(e, shape))
        else:
            self.iterate_linear(tuple(shape), 1, element)

    def emit_Gemm(self, g: N.Gemm):
        """Portable gemm (matrix units come from the backend's Gemm rules)."""
        return self.emit_simt_gemm(g)

    def emit_simt_gemm(self, g: N.Gemm):
        """Portable gemm: each owner of C[i, j] runs the dot product over K (shared operands)."""
        a, b, c = g.a, g.b, g.c
        M, Nn = c.matrix_shape()  # a unit extent (a 32 x 1 tile) is still an axis
        K = a.matrix_shape()[0] if g.transpose_a else a.matrix_shape()[1]
        acc_dt = c.buffer.dtype
        wide = "float32" if acc_dt in ("float16", "bfloat16") else acc_dt

        def element(idx):
            i, j = idx[0], idx[1]
            ci = self.matrix_index(c, [i, j])
            tmp = B.alloc_buffer((1,), wide, scope="local")
            view, cidx = self.access(c.buffer, ci)
            init = tir_const(0, wide) if g.clear_accum else cast_to(tx.BufferLoad(view, cidx), wide)
            B.buffer_store(tmp, init, [0])
            with B.serial(0, K) as k:
                ai = self.matrix_index(a, [k, i] if g.transpose_a else [i, k])
                bi = self.matrix_index(b, [j, k] if g.transpose_b else [k, j])
                va, ia = self.access(a.buffer, ai)
                vb, ib = self.access(b.buffer, bi)
                # (fp8 operands decoded: their products are exact in a float32 accumulator)
                a_val = self.value_of(a.buffer, tx.BufferLoad(va, ia))
                b_val = self.value_of(b.buffer, tx.BufferLoad(vb, ib))
                prod_ = cast_to(a_val, wide) * cast_to(b_val, wide)
                B.buffer_store(tmp, tmp[0] + prod_, [0])
            self.store(c.buffer, ci, tmp[0])

        if self.plan.storage[c.buffer.name] == "reg":
            axes = c.matrix_axes()
            self.iterate_layout(self.plan.layout[c.buffer.name], lambda idx: element([idx[x] for x in axes]))
        elif self.plan.storage[c.buffer.name] == "rep":
            with B.serial(0, M * Nn) as e:
                element(unflatten(e, (M, Nn)))
        else:
            self.iterate_linear((M, Nn), 1, element)

    def emit_Cumsum(self, s: N.Cumsum):
        """Portable scan: one thread per line, sequential along `dim`."""
        shape = s.src.static_dims()
        other = tuple(e for d, e in enumerate(shape) if d != s.dim) or (1,)
        wide = "float32" if s.dst.dtype in ("float16", "bfloat16") else s.dst.dtype
        n = shape[s.dim]

        def line(idx):
            tmp = B.alloc_buffer((1,), wide, scope="local")
            B.buffer_store(tmp, tir_const(0, wide), [0])
            with B.serial(0, n) as k:
                pos = (n - 1 - k) if s.reverse else k
                full = list(idx[: s.dim]) + [pos] + list(idx[s.dim :]) if len(shape) > 1 else [pos]
                view, si = self.access(s.src, full)
                B.buffer_store(tmp, tmp[0] + cast_to(self.value_of(s.src, tx.BufferLoad(view, si)), wide), [0])
                self.store(s.dst, full, tmp[0])

        if self.plan.storage[s.dst.name] == "rep":
            with B.serial(0, prod(other)) as e:
                line(unflatten(e, other) if len(shape) > 1 else [])
        else:
            self.iterate_linear(other, 1, lambda idx: line(idx if len(shape) > 1 else []))

    def atomic_one(self, kind, buf: N.Buffer, idx, value):
        """One element's atomic read-modify-write: device instruction ("atomic_<kind>", dtype)."""
        if (f"atomic_{kind}", buf.dtype) not in self.intrinsics:
            raise self.unsupported(f"T.atomic_{kind} on {buf.dtype}")
        self.instruction(f"atomic_{kind}", buf.dtype, buf, idx, cast_to(value, buf.dtype))

    def emit_Atomic(self, a: N.Atomic):
        """Portable atomics: one instruction per element, by its owner (or thread 0)."""
        if isinstance(a.value, N.Expr):
            idx = [self.lower(i) for i in a.dst.starts]
            if self.in_parallel:
                self.atomic_one(a.kind, a.dst.buffer, idx, self.lower(a.value))
            else:
                with B.If(self.t == 0):
                    with B.Then():
                        self.atomic_one(a.kind, a.dst.buffer, idx, self.lower(a.value))
            return
        src, dst = a.value, a.dst
        pred = self.plan.storage[dst.buffer.name] == "global"

        def element(it_idx):
            si = self.region_index(src, it_idx)
            di = self.region_index(dst, it_idx)
            view, sidx = self.access(src.buffer, si)
            val = self.value_of(src.buffer, tx.BufferLoad(view, sidx))
            if pred:
                with B.If(self.in_bounds(dst, di)):
                    with B.Then():
                        self.atomic_one(a.kind, dst.buffer, di, val)
            else:
                self.atomic_one(a.kind, dst.buffer, di, val)

        shape = dst.squeezed_shape() or (1,)
        if self.plan.storage[src.buffer.name] == "reg":
            self.iterate_layout(self.plan.layout[src.buffer.name], lambda idx: element(_squeeze(idx, src.buffer.shape)))
        else:
            self.iterate_linear(tuple(shape), 1, element)

    def emit_Print(self, p: N.Print):
        """No portable device printf: a backend that has one contributes a "Print" rule."""
        raise self.unsupported("T.print (no device printf on this target)", p)
