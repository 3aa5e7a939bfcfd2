"""Tile operations: copies and fills (dma / vtile), gemm (mma), reductions, scans and atomics."""

from __future__ import annotations

from typing import List, Optional, Tuple

from tilecore.ir import nodes as N

from .. import isa
from ..arch import MATRIX_FORMATS
from ..isa import NO_REG, Access, MatMul, Reduction, Transfer
from .emitter import ATOMIC, BINOP_INDEX, prod
from .host import NpuHost
from .registers import ZERO


class TileOps(NpuHost):
    """Lowers the tile statements that work on whole regions (`s_Copy`, `s_Fill`, `s_Gemm`, ...)."""

    def _region_access(self, region: N.Region, iter_ext, pairing) -> Tuple[int, List[int]]:
        """Access descriptor for `region` iterated over `iter_ext`; pairing: buffer dim -> iter dim."""
        buf = region.buffer
        space, sid = self._space(buf)
        dims, regs = [], []
        for d, start in enumerate(region.starts):
            r = self.sx(start)
            regs.append(r)
            coeffs = [0] * len(iter_ext)
            if pairing[d] >= 0:
                coeffs[pairing[d]] = 1
            dims.append((r, NO_REG, tuple(coeffs)))
        return self.desc(Access(space, sid, tuple(iter_ext), tuple(dims))), regs

    def _pairing(self, a: N.Region, b: N.Region):
        """(iteration extents, src dim -> iter dim, dst dim -> iter dim) of a copy; shapes must agree."""
        sa = [(d, e) for d, e in enumerate(a.extents) if e != 1]
        sb = [(d, e) for d, e in enumerate(b.extents) if e != 1]
        if [e for _, e in sa] != [e for _, e in sb]:
            raise self.error(
                f"copy shapes differ: {a.buffer.name} {list(a.extents)} vs {b.buffer.name} {list(b.extents)}"
            )
        ext = tuple(e for _, e in sa)
        pa = [-1] * len(a.extents)
        pb = [-1] * len(b.extents)
        for k, (d, _) in enumerate(sa):
            pa[d] = k
        for k, (d, _) in enumerate(sb):
            pb[d] = k
        return ext, pa, pb

    def s_Copy(self, s):
        """T.copy: a DMA when one side is global, a scratchpad `vtile` otherwise."""
        self._copy(s)

    def _copy(self, s: N.Copy, token: Optional[int] = None):
        """A copy, completed by a tracked token (or by the caller's `token` when given)."""
        src, dst = s.src, s.dst
        ext, ps, pd = self._pairing(src, dst)
        is_dma = src.buffer.scope == "global" or dst.buffer.scope == "global"
        self.sync(reads=[src.buffer] + self._bufs_in(*src.starts, *dst.starts), writes=[dst.buffer])
        ds, rs = self._region_access(src, ext, ps)
        dd, rd = self._region_access(dst, ext, pd)
        tr = self.desc(Transfer(ds, dd))
        if is_dma:
            tok = token if token is not None else self.reg()
            self.emit("dma", func=0, r=(tok, ZERO), imm=tr)
            if token is None:
                self._track(tok, reads=[src.buffer], writes=[dst.buffer])
        else:
            self.emit("vtile", func=0, r=(ZERO,), imm=tr)
        self.release(*rs, *rd)

    def s_Fill(self, s):
        """T.fill / T.clear: a DMA fill for globals, a `vtile` fill on chip."""
        dst = s.dst
        self.sync(reads=self._bufs_in(s.value, *dst.starts), writes=[dst.buffer])
        ext = tuple(e for e in dst.extents if e != 1)
        pairing, k = [], 0
        for e in dst.extents:
            pairing.append(k if e != 1 else -1)
            k += e != 1
        v = self.sx(s.value)
        dd, rd = self._region_access(dst, ext, pairing)
        tr = self.desc(Transfer(-1, dd))
        if dst.buffer.scope == "global":
            tok = self.reg()
            self.emit("dma", func=0, r=(tok, v), imm=tr)
            self._track(tok, writes=[dst.buffer])
        else:
            self.emit("vtile", func=1, r=(v,), imm=tr)
        self.release(v, *rd)

    def _static_shape(self, buf: N.Buffer) -> Tuple[int, ...]:
        """`buf`'s shape; on-chip buffers always have one (checked when their segments are made)."""
        shape = buf.static_shape()
        if shape is None:
            raise self.error(f"{buf.name}: on-chip buffers need static shapes")
        return shape

    def _flat_offset(self, region: N.Region) -> int:
        """A register with the element offset of `region`'s start in its buffer."""
        shape = self._static_shape(region.buffer)
        acc = self.li(0)
        stride = 1
        strides = []
        for dim in reversed(shape):
            strides.append(stride)
            stride *= dim
        strides.reverse()
        for start, st in zip(region.starts, strides):
            r = self.sx(start)
            k = self.li(st)
            self.emit("sop", func=BINOP_INDEX["*"], dt="int32", r=(k, k, r))
            self.emit("sop", func=BINOP_INDEX["+"], dt="int32", r=(acc, acc, k))
            self.release(r, k)
        return acc

    def s_Gemm(self, s: N.Gemm):
        """T.gemm as `mma` instructions of at most matrix_max_mn x matrix_max_mn x matrix_max_k each."""
        for reg_ in (s.a, s.b, s.c):
            if reg_.buffer.scope == "global":
                raise self.error(f"T.gemm operand {reg_.buffer.name} must be in shared/fragment memory")
            if len(reg_.extents) < 2 or any(e != 1 for e in reg_.extents[:-2]):
                raise self.error(f"T.gemm operand {reg_.buffer.name} must be a 2-D tile")
        adt, bdt, cdt = s.a.buffer.dtype, s.b.buffer.dtype, s.c.buffer.dtype
        fmt = MATRIX_FORMATS.get(adt)
        if adt != bdt or fmt is None or cdt not in fmt[0]:
            raise self.error(
                f"the npu matrix engine has no {adt} x {bdt} -> {cdt} format "
                f"(it has {', '.join(f'{a}->{c}' for a, (cs, _) in MATRIX_FORMATS.items() for c in cs)})"
            )
        ar, ac = s.a.extents[-2:]
        br, bc = s.b.extents[-2:]
        M, K = (ac, ar) if s.transpose_a else (ar, ac)
        K2, Nn = (bc, br) if s.transpose_b else (br, bc)
        if K != K2 or tuple(s.c.extents[-2:]) != (M, Nn):
            raise self.error(f"T.gemm shapes do not agree: A {M}x{K}, B {K2}x{Nn}, C {list(s.c.extents[-2:])}")
        self.sync(reads=[s.a.buffer, s.b.buffer] + ([] if s.clear_accum else [s.c.buffer]), writes=[s.c.buffer])
        lda = self._static_shape(s.a.buffer)[-1]
        ldb = self._static_shape(s.b.buffer)[-1]
        ldc = self._static_shape(s.c.buffer)[-1]
        oa, ob, oc = self._flat_offset(s.a), self._flat_offset(s.b), self._flat_offset(s.c)
        sa, sb, sc = self.bufseg[s.a.buffer.name], self.bufseg[s.b.buffer.name], self.bufseg[s.c.buffer.name]
        T_MN, T_K = self.cfg.matrix_max_mn, self.cfg.matrix_max_k
        ra, rb, rc = self.reg(), self.reg(), self.reg()
        for m0 in range(0, M, T_MN):
            for n0 in range(0, Nn, T_MN):
                for k0 in range(0, K, T_K):
                    m, n, k = min(T_MN, M - m0), min(T_MN, Nn - n0), min(T_K, K - k0)
                    a_delta = (k0 * lda + m0) if s.transpose_a else (m0 * lda + k0)
                    b_delta = (n0 * ldb + k0) if s.transpose_b else (k0 * ldb + n0)
                    c_delta = m0 * ldc + n0
                    for dst, base, delta in ((ra, oa, a_delta), (rb, ob, b_delta), (rc, oc, c_delta)):
                        kreg = self.li(delta)
                        self.emit("sop", func=BINOP_INDEX["+"], dt="int32", r=(dst, base, kreg))
                        self.release(kreg)
                    d = self.desc(
                        MatMul(sa, ra, lda, sb, rb, ldb, sc, rc, ldc, m, n, k, int(s.transpose_a), int(s.transpose_b))
                    )
                    clear = 1 if (s.clear_accum and k0 == 0) else 0
                    self.emit("mma", dt2=clear, imm=d)
        self.release(ra, rb, rc, oa, ob, oc)

    def _red_desc(self, src: N.Buffer, dst: N.Buffer, dim: int, what: str):
        """The Reduction descriptor of reducing/scanning `src` along `dim` into `dst` (sizes checked)."""
        shape = src.static_shape()
        if shape is None or src.scope == "global" or dst.scope == "global":
            raise self.error(f"{what} operands must be shared/fragment buffers on npu")
        ndim = len(shape)
        if dim < 0:
            dim += ndim
        outer, length, inner = prod(shape[:dim]), shape[dim], prod(shape[dim + 1 :])
        if prod(dst.static_shape()) != (outer * inner if what == "reduce" else outer * length * inner):
            raise self.error(f"{what}: {dst.name} has the wrong number of elements for {src.name} along dim {dim}")
        return self.desc(Reduction(self.bufseg[src.name], ZERO, self.bufseg[dst.name], ZERO, outer, length, inner))

    def s_Reduce(self, s: N.Reduce):
        """T.reduce_*: one `vred` over the source tile."""
        self.sync(reads=[s.src] + ([] if s.clear else [s.dst]), writes=[s.dst])
        d = self._red_desc(s.src, s.dst, s.dim, "reduce")
        self.emit("vred", func=isa.REDUCE_KINDS.index(s.kind), dt2=1 if s.clear else 0, imm=d)

    def s_Cumsum(self, s: N.Cumsum):
        """T.cumsum: one `vscan` over the source tile."""
        self.sync(reads=[s.src], writes=[s.dst])
        d = self._red_desc(s.src, s.dst, s.dim, "cumsum")
        self.emit("vscan", dt2=1 if s.reverse else 0, imm=d)

    def s_Atomic(self, s: N.Atomic):
        """Atomics on a global tensor: `dma` with an atomic op for regions, `satom` for elements."""
        if s.dst.buffer.scope != "global":
            raise self.error("atomics need a global destination on npu")
        kind = ATOMIC[s.kind]
        if isinstance(s.value, N.Region):
            ext, pd, ps = self._pairing(s.dst, s.value)
            self.sync(reads=[s.value.buffer] + self._bufs_in(*s.dst.starts, *s.value.starts), writes=[s.dst.buffer])
            ds, rs = self._region_access(s.value, ext, ps)
            dd, rd = self._region_access(s.dst, ext, pd)
            tok = self.reg()
            self.emit("dma", func=kind, r=(tok, ZERO), imm=self.desc(Transfer(ds, dd)))
            self._track(tok, reads=[s.value.buffer], writes=[s.dst.buffer])
            self.release(*rs, *rd)
            return
        self.sync(reads=self._bufs_in(s.value, *s.dst.starts), writes=[s.dst.buffer])
        v = self.sx(s.value)
        d, regs = self.access_scalar(s.dst.buffer, s.dst.starts)
        self.emit("satom", func=kind, dt=s.value.dtype, r=(v,), imm=d)
        self.release(v, *regs)
