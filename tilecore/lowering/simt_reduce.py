"""The portable lowering of T.reduce_*: thread-local rows, shuffles, shared memory across warps.

Row reductions of register layouts reduce in-thread, then with shuffles within the lane
group that shares a row, then across warps through shared scratch; other reductions use
lane groups over shared tiles or one owner per output element.

A mixin of `simt.SimtLowering`. Imports TVM: use it from backend code only.
"""

from __future__ import annotations

from math import prod

from tvm import tirx as tx
from tvm.tirx.script.builder import ir as B

from ..ir import nodes as N
from ..ir.types import is_float
from .simt_host import SimtHost
from .simt_layout import MmaLayout, RowLayout, StridedLayout, StridedRowLayout
from .simt_threads import unflatten
from .tir_expr import cast_to, tir_const

# Lanes one shuffle reduction spans; a wider warp (a 64-lane wave) reduces as groups of 32 (taking
# the target's warp_size here would change ROCm code that no AMD GPU here can check).
REDUCE_LANES = 32
MMA_WARP = 32  # lanes of the warp that owns an m16n8 `MmaLayout` tile (the layout's definition)


class SimtReductions(SimtHost):
    """The portable lowering of T.reduce_*: thread-local rows, shuffles, shared memory across warps."""

    def _identity(self, kind, dtype):
        """The identity of reduction `kind` in `dtype`."""
        if kind in ("sum", "abssum", "absmax"):
            return tir_const(0, dtype)
        big = float("inf") if is_float(dtype) else None
        if big is None:
            info = {"int8": 127, "int16": 32767, "int32": 2**31 - 1, "int64": 2**63 - 1, "uint8": 255}[dtype]
            lo = {"int8": -128, "int16": -32768, "int32": -(2**31), "int64": -(2**63), "uint8": 0}[dtype]
            return tir_const(lo if kind == "max" else info, dtype)
        return tir_const(-big if kind == "max" else big, dtype)

    def _combine(self, kind, a, b):
        """Combine two partial results of reduction `kind` (NaN propagates through max/min)."""
        if kind in ("sum", "abssum"):
            return a + b
        if kind in ("max", "absmax"):
            return self.ex.nan_minmax("max", a, b)  # NaN propagates (docs/semantics.md)
        return self.ex.nan_minmax("min", a, b)

    def _combine_tree(self, kind, values):
        """`values` combined pairwise as a balanced tree, each partial result bound once: a
        dependency chain of log2(n) operations instead of n (the row reductions of attention's
        softmax were latency-bound), and no operand repeated by a NaN-propagating select."""
        while len(values) > 1:
            paired = [B.Bind(self._combine(kind, a, b)) for a, b in zip(values[::2], values[1::2])]
            values = paired + values[len(values) - len(values) % 2 :]
        return values[0]

    def _reduce_input(self, r: N.Reduce, idx, k, keep: bool, wide: str):
        """Element `k` along `r.dim` of the source line that ends at output `idx`, in `wide`."""
        si = list(idx)
        if keep:
            si[r.dim] = k
        else:
            si.insert(r.dim, k)
        view, sidx = self.access(r.src, si)
        return cast_to(tx.BufferLoad(view, sidx), wide)

    def emit_Reduce(self, r: N.Reduce):
        """Portable reduction: thread-local rows of register layouts, shuffles within lane
        groups, shared memory across warps; else one owner per output element."""
        src_l = self.plan.layout.get(r.src.name)
        dst_l = self.plan.layout.get(r.dst.name)
        wide = "float32" if r.dst.dtype in ("float16", "bfloat16") else r.dst.dtype
        if (
            isinstance(src_l, MmaLayout)
            and isinstance(dst_l, RowLayout)
            and r.dim == 1
            and self.plan.storage[r.src.name] == "reg"
        ):
            return self.emit_mma_row_reduce(r, src_l, dst_l, wide)
        if (
            isinstance(src_l, StridedLayout)
            and isinstance(dst_l, StridedRowLayout)
            and r.dim == 1
            and self.plan.storage[r.src.name] == "reg"
            and self.plan.storage[r.dst.name] == "reg"
        ):
            return self.emit_strided_row_reduce(r, src_l, dst_l, wide)
        src = r.src
        keep = len(r.dst.shape) == len(src.shape)
        dshape = r.dst.static_dims()

        def element(idx):
            tmp = B.alloc_buffer((1,), wide, scope="local")
            B.buffer_store(tmp, self._identity(r.kind, wide), [0])
            with B.serial(0, src.static_dims()[r.dim]) as k:
                v = self._reduce_input(r, idx, k, keep, wide)
                if r.kind in ("abssum", "absmax"):
                    v = tx.abs(v) if is_float(wide) else tx.Select(v < tir_const(0, wide), tir_const(0, wide) - v, v)
                B.buffer_store(tmp, self._combine(r.kind, tmp[0], v), [0])
            res = tmp[0]
            if not r.clear:
                view, didx = self.access(r.dst, idx)
                res = self._combine(r.kind, cast_to(tx.BufferLoad(view, didx), wide), res)
            self.store(r.dst, idx, res)

        st = self.plan.storage[r.dst.name]
        rows = prod(dshape)
        group = 1
        while group * 2 <= min(REDUCE_LANES, self.threads // max(rows, 1)) and group * 2 <= src.static_dims()[r.dim]:
            group *= 2
        if st == "smem" and self.plan.storage[src.name] == "smem" and group > 1 and self.threads % REDUCE_LANES == 0:
            return self.emit_group_reduce(r, dshape, keep, wide, group)
        if st == "reg":
            self.iterate_layout(dst_l, lambda idx: element(list(idx)))
        elif st == "rep":
            with B.serial(0, prod(dshape)) as e:
                element(unflatten(e, dshape))
        else:
            self.iterate_linear(dshape, 1, element)

    def emit_group_reduce(self, r, dshape, keep, wide, group):
        """Shared-memory source: `group` adjacent lanes reduce one output, then butterfly shuffles."""
        src = r.src
        rows = prod(dshape)
        per_pass = self.threads // group
        L = src.shape[r.dim]
        part = B.alloc_buffer((1,), wide, scope="local")
        lane = tx.floormod(self.t, group)
        with B.serial(0, -(-rows // per_pass)) as rr:
            row = rr * per_pass + tx.floordiv(self.t, group)
            idx = unflatten(tx.Min(row, rows - 1), dshape)
            B.buffer_store(part, self._identity(r.kind, wide), [0])
            with B.If(row < rows):
                with B.Then():
                    with B.serial(0, -(-L // group)) as kk:
                        k = kk * group + lane
                        with B.If(k < L):
                            with B.Then():
                                v = self._reduce_input(r, idx, k, keep, wide)
                                if r.kind in ("abssum", "absmax"):
                                    v = tx.abs(v)
                                B.buffer_store(part, self._combine(r.kind, part[0], v), [0])
            m = group // 2
            while m >= 1:
                sh = B.Bind(self.shuffle_xor(part[0], tir_const(m, "int32")))  # once: _combine repeats operands
                B.buffer_store(part, self._combine(r.kind, part[0], sh), [0])
                m //= 2
            with B.If(tx.And(row < rows, lane == 0)):
                with B.Then():
                    res = part[0]
                    if not r.clear:
                        view, didx = self.access(r.dst, idx)
                        res = self._combine(r.kind, cast_to(tx.BufferLoad(view, didx), wide), res)
                    self.store(r.dst, idx, res)

    def emit_strided_row_reduce(self, r, src_l: StridedLayout, dst_l: StridedRowLayout, wide):
        """Row reduction of a strided register tile: in-thread, shuffles in the row's thread group,
        then shared memory across the group's warps."""
        src_v, dst_v = self.views[r.src.name], self.views[r.dst.name]
        L, v, q, P = dst_l.local_size, src_l.vec, dst_l.q, self.threads
        part = B.alloc_buffer((L,), wide, scope="local")
        # pairwise partials of one chunk: its v elements combine as a balanced tree, a dependency
        # chain of log2(v) + per_thread operations instead of v * per_thread
        tree = B.alloc_buffer((max(v // 2, 1),), wide, scope="local")
        with B.unroll(0, L) as i:
            B.buffer_store(part, self._identity(r.kind, wide), [i])
        with B.unroll(0, src_l.per_thread) as k:

            def elem(u):
                x = cast_to(src_v[k * v + u], wide)
                return tx.abs(x) if r.kind in ("abssum", "absmax") else x

            def acc():
                n = v
                for i in range(n // 2):
                    B.buffer_store(tree, self._combine(r.kind, elem(2 * i), elem(2 * i + 1)), [i])
                if n % 2 and n > 1:
                    B.buffer_store(tree, self._combine(r.kind, tree[n // 2 - 1], elem(n - 1)), [n // 2 - 1])
                n //= 2
                while n > 1:
                    for i in range(n // 2):
                        B.buffer_store(tree, self._combine(r.kind, tree[2 * i], tree[2 * i + 1]), [i])
                    if n % 2:
                        B.buffer_store(tree, self._combine(r.kind, tree[n // 2 - 1], tree[n - 1]), [n // 2 - 1])
                    n //= 2
                chunk = tree[0] if v > 1 else elem(0)
                slot = tx.floordiv(k, q) if q > 1 else k
                B.buffer_store(part, self._combine(r.kind, part[slot], chunk), [slot])

            if not src_l.exact:
                with B.If(k * P + self.t < src_l.chunks):
                    with B.Then():
                        acc()
            else:
                acc()
        g = dst_l.group
        with B.unroll(0, L) as i:
            m = min(g, REDUCE_LANES) // 2
            while m >= 1:
                sh = B.Bind(self.shuffle_xor(part[i], tir_const(m, "int32")))  # once: _combine repeats operands
                B.buffer_store(part, self._combine(r.kind, part[i], sh), [i])
                m //= 2
        if g > REDUCE_LANES:
            if wide != "float32":
                raise self.unsupported(f"cross-warp reduction in {wide}", r)
            gw = g // REDUCE_LANES
            warp = tx.floordiv(self.t, REDUCE_LANES)
            self.sync()
            with B.If(tx.floormod(self.t, REDUCE_LANES) == 0):
                with B.Then():
                    with B.unroll(0, L) as i:
                        B.buffer_store(self.scratch, part[i], [warp * L + i])
            self.sync()
            first = tx.floordiv(warp, gw) * gw
            with B.unroll(0, L) as i:
                B.buffer_store(part, self.scratch[first * L + i], [i])
                with B.unroll(1, gw) as w:
                    B.buffer_store(part, self._combine(r.kind, part[i], self.scratch[(first + w) * L + i]), [i])
            self.sync()
        with B.unroll(0, L) as i:
            res = part[i]
            if not r.clear:
                res = self._combine(r.kind, cast_to(dst_v[i], wide), res)
            B.buffer_store(dst_v, cast_to(res, r.dst.dtype), [i])

    def emit_mma_row_reduce(self, r, src_l: MmaLayout, dst_l: RowLayout, wide):
        """Row reduction of an MMA-layout tile: in-thread, then the 4-lane quad, then across warps."""
        src_v, dst_v = self.views[r.src.name], self.views[r.dst.name]
        part = B.alloc_buffer((src_l.MI * 2,), wide, scope="local")
        with B.unroll(0, src_l.MI) as mi:
            with B.unroll(0, 2) as h:
                values = []
                for ni in range(src_l.NI):
                    for cc in range(2):
                        v = cast_to(src_v[((mi * src_l.NI + ni) * 2 + h) * 2 + cc], wide)
                        values.append(tx.abs(v) if r.kind in ("abssum", "absmax") else v)
                B.buffer_store(part, self._combine_tree(r.kind, values), [mi * 2 + h])
                for m in (1, 2):
                    sh = B.Bind(self.shuffle_xor(part[mi * 2 + h], tir_const(m, "int32")))  # once: _combine repeats
                    B.buffer_store(part, self._combine(r.kind, part[mi * 2 + h], sh), [mi * 2 + h])
        if src_l.wn > 1:
            if wide != "float32":
                raise self.unsupported(f"cross-warp reduction in {wide}", r)
            # partials of each warp column -> scratch[warp_n, row]; then every owner combines them
            self.sync()
            lane, warp = self.t % MMA_WARP, self.t // MMA_WARP
            wn_i = warp % src_l.wn
            with B.unroll(0, src_l.MI) as mi:
                with B.unroll(0, 2) as h:
                    row = (warp // src_l.wn) * (src_l.M // src_l.wm) + mi * 16 + lane // 4 + h * 8
                    with B.If(lane % 4 == 0):
                        with B.Then():
                            B.buffer_store(self.scratch, part[mi * 2 + h], [wn_i * src_l.M + row])
            self.sync()
            with B.unroll(0, src_l.MI) as mi:
                with B.unroll(0, 2) as h:
                    row = (warp // src_l.wn) * (src_l.M // src_l.wm) + mi * 16 + lane // 4 + h * 8
                    B.buffer_store(part, self.scratch[row], [mi * 2 + h])
                    with B.unroll(1, src_l.wn) as w:
                        B.buffer_store(
                            part, self._combine(r.kind, part[mi * 2 + h], self.scratch[w * src_l.M + row]), [mi * 2 + h]
                        )
            self.sync()
        with B.unroll(0, src_l.MI * 2) as i:
            res = part[i]
            if not r.clear:
                res = self._combine(r.kind, cast_to(dst_v[i], wide), res)
            B.buffer_store(dst_v, cast_to(res, r.dst.dtype), [i])
