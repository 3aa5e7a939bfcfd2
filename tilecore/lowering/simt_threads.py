"""Thread mapping: how an index space or a register layout is spread over the threads of a block.

`iterate_layout` runs a body for every element of a register fragment that this thread
owns; `iterate_linear` spreads an index space (optionally in vector chunks) over the
threads; region indices and bounds predicates for partial tiles.

A mixin of `simt.SimtLowering`. Imports TVM: use it from backend code only.
"""

from __future__ import annotations

from math import prod

from tvm import tirx as tx
from tvm.tirx.script.builder import ir as B

from ..ir import nodes as N
from .simt_host import SimtHost
from .simt_layout import MmaLayout, RowLayout, StridedLayout, StridedRowLayout
from .tir_expr import tir_const


class _Ctx:
    """The current thread-iteration of a Parallel loop: anchor layout and its iteration."""

    def __init__(self, layout=None, it=None, local=None):
        self.layout, self.it, self.local = layout, it, local


class SimtThreads(SimtHost):
    """Thread mapping: how an index space or a register layout is spread over the threads of a block."""

    def iterate_layout(self, lay, body, vectorize=False):
        """Run `body(index_exprs)` for every element of a register layout this thread owns."""
        saved = self.ctx
        if isinstance(lay, (MmaLayout, RowLayout)):
            ext = lay.iter_space()
            # vectorized: the innermost axis (an MMA fragment's column pair) as one vector access
            frames = [B.unroll(0, e) for e in ext[:-1]] + [(B.vectorized if vectorize else B.unroll)(0, ext[-1])]
            its = [f.__enter__() for f in frames]
            idx, local = lay.coords(self.t, its)
            self.ctx = _Ctx(lay, its, local)
            body(list(idx))
            for f in reversed(frames):
                f.__exit__(None, None, None)
        elif isinstance(lay, StridedRowLayout):
            with B.unroll(0, lay.local_size) as rl:
                row = lay.row_of(self.t, rl)
                self.ctx = _Ctx(lay, (rl,), rl)
                idx = [row] if lay.ndim == 1 else [row, tir_const(0, "int32")]
                if lay.G < lay.threads and (lay.rows * lay.G) % lay.threads:
                    with B.If(row < lay.rows):
                        with B.Then():
                            body(idx)
                else:
                    body(idx)
        else:
            assert isinstance(lay, StridedLayout)

            def inner(idx, local, k=None):
                self.ctx = _Ctx(lay, (k,), local)
                body(idx)

            self._strided(lay.shape, lay.vec, inner, exact=lay.exact, unroll=True, pass_k=True, vectorize=vectorize)
        self.ctx = saved

    def _strided(self, shape, vec, body, exact, unroll, per_chunk=False, pass_k=False, vectorize=False):
        """Chunks of `vec` elements of `shape` round-robin over the threads; `body` per chunk or element."""
        P = self.threads
        chunks = prod(shape) // vec
        per = -(-chunks // P)
        kf = (B.unroll if unroll or per <= 8 else B.serial)(0, per)
        k = kf.__enter__()
        c = k * P + self.t
        uf = (B.vectorized if vectorize else B.unroll)(0, vec) if vec > 1 and not per_chunk else None
        u = uf.__enter__() if uf else 0
        e = c * vec + u
        idx = unflatten(e, shape)
        local = k * vec + u
        call = (lambda: body(idx, local, k)) if pass_k else (lambda: body(idx, local))
        if not exact and chunks % P:
            with B.If(c < chunks):
                with B.Then():
                    call()
        else:
            call()
        if uf:
            uf.__exit__(None, None, None)
        kf.__exit__(None, None, None)

    def iterate_linear(self, shape, vec, body):
        """Spread an index space over the threads (no register fragment involved).

        With vec > 1, `body` runs once per chunk of `vec` contiguous elements (a 16-byte access).
        """
        saved = self.ctx
        self.ctx = _Ctx()

        def inner(idx, local):
            body(idx)

        P = self.threads
        self._strided(
            shape,
            vec,
            inner,
            exact=(prod(shape) // vec) % P == 0,
            unroll=(prod(shape) // vec) <= 16 * P,
            per_chunk=vec > 1,
        )
        self.ctx = saved

    def region_index(self, r: N.Region, it_idx):
        """Full buffer indices of region `r` for squeezed iteration indices `it_idx`."""
        out, k = [], 0
        for st, ext in zip(r.starts, r.extents):
            base = self.lower(st)
            if ext != 1:
                out.append(base + it_idx[k])
                k += 1
            else:
                out.append(base)
        return out

    def matrix_index(self, r: N.Region, row_col):
        """Full buffer indices of T.gemm operand `r` for (row, column) of its `matrix_axes`."""
        out = [self.lower(st) for st in r.starts]
        for axis, offset in zip(r.matrix_axes(), row_col):
            out[axis] = out[axis] + offset
        return out

    def in_bounds(self, r: N.Region, full_idx, vec=1):
        """Whether buffer indices `full_idx` of region `r` lie inside its buffer (a PrimExpr)."""
        b = r.buffer
        conds = []
        for i, s in zip(full_idx, b.shape):
            lim = self.lower(s) if isinstance(s, N.Var) else tir_const(s, "int32")
            conds.append(tx.And(i >= 0, i < lim))
        c = conds[0]
        for x in conds[1:]:
            c = tx.And(c, x)
        return c

    def clamp(self, r: N.Region, full_idx):
        """`full_idx` clamped into the buffer of region `r` (a valid address for a zero-fill copy)."""
        out = []
        for i, s in zip(full_idx, r.buffer.shape):
            lim = self.lower(s) if isinstance(s, N.Var) else tir_const(s, "int32")
            out.append(tx.Max(tx.Min(i, lim - 1), tir_const(0, "int32")))
        return out


def unflatten(e, shape):
    """Row-major indices of flat position `e` (a PrimExpr) in `shape`."""
    idx = []
    for d in reversed(range(len(shape))):
        if d == 0:
            idx.append(e if len(shape) == 1 else tx.floordiv(e, prod(shape[1:])))
        else:
            idx.append(tx.floormod(tx.floordiv(e, prod(shape[d + 1 :])) if d + 1 < len(shape) else e, shape[d]))
    return list(reversed(idx))


def _squeeze(idx, shape):
    return [i for i, s in zip(idx, shape) if s != 1] or [idx[0]]
