"""Barrier placement: which shared tiles a statement reads and writes, and when a block barrier is due.

`touch(stmts)` inserts a barrier before statements that conflict with shared accesses
not yet synchronized (read after write, write after read).

A mixin of `simt.SimtLowering`. Imports TVM: use it from backend code only.
"""

from __future__ import annotations

from typing import Set, Tuple

from ..ir import nodes as N
from ..ir.visitor import walk, walk_stmts
from .simt_host import SimtHost


class SimtBarriers(SimtHost):
    """Barrier placement: which shared tiles a statement reads and writes, and when a block barrier is due."""

    def smem_sets(self, stmts) -> Tuple[Set[str], Set[str]]:
        """Shared buffers read and written by statements (tile operands and elements)."""
        return shared_accesses(stmts, self.plan.storage)

    def touch(self, stmts):
        """Insert a barrier before `stmts` if they conflict with unsynchronized shared accesses."""
        r, w = self.smem_sets(stmts)
        # Inside a T.Parallel body no barrier: emit_Parallel synchronized the whole loop up front
        # (its iterations are independent), and a barrier here would sit in per-thread code (a
        # primary-replica guard, a partial-row guard) where it deadlocks the block.
        if not self.in_parallel and ((r | w) & self.pending_w or w & self.pending_r):
            self.sync()
        self.pending_r |= r
        self.pending_w |= w

    def touch_expr_only(self, e):
        """`touch` for the shared loads of expression `e` alone (an if condition)."""
        self.touch((N.Let(N.Var("_"), e),))


def shared_accesses(stmts, storage) -> Tuple[Set[str], Set[str]]:
    """(reads, writes): the shared buffers (`storage` name -> "smem") that statements read and
    write, as tile operands and as elements; pure Python (also used while planning)."""
    reads: Set[str] = set()
    writes: Set[str] = set()
    sm = {n for n, s in storage.items() if s == "smem"}

    def region_rw(r, is_w):
        if r.buffer.name in sm:
            (writes if is_w else reads).add(r.buffer.name)

    for s in walk_stmts(stmts):
        if isinstance(s, N.Copy):
            region_rw(s.src, False)
            region_rw(s.dst, True)
        elif isinstance(s, N.Fill):
            region_rw(s.dst, True)
        elif isinstance(s, N.Gemm):
            region_rw(s.a, False)
            region_rw(s.b, False)
            region_rw(s.c, True)
            region_rw(s.c, False)
        elif isinstance(s, (N.Reduce, N.Cumsum)):
            if s.src.name in sm:
                reads.add(s.src.name)
            if s.dst.name in sm:
                writes.add(s.dst.name)
                reads.add(s.dst.name)
        elif isinstance(s, N.Atomic):
            if isinstance(s.value, N.Region):
                region_rw(s.value, False)
        elif isinstance(s, N.Print) and isinstance(s.value, N.Buffer) and s.value.name in sm:
            reads.add(s.value.name)
        if isinstance(s, N.Store) and s.buffer.name in sm:
            writes.add(s.buffer.name)
        for e in _exprs_of(s):
            for n in walk(e):
                if isinstance(n, N.Load) and n.buffer.name in sm:
                    reads.add(n.buffer.name)
    return reads, writes


def _exprs_of(s):
    from .simt_plan import _stmt_exprs

    return _stmt_exprs(s)
