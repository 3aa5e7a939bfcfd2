"""Barrier placement: which shared tiles a statement reads and writes, and when a block barrier is due.

`touch(stmts)` inserts a barrier before statements that conflict with shared accesses
not yet synchronized (read after write, write after read).

A mixin of `simt.SimtLowering`. Imports TVM: use it from backend code only.
"""

from __future__ import annotations

from typing import AbstractSet, Optional, Set, Tuple

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
    return buffer_accesses(stmts, {n for n, s in storage.items() if s == "smem"})


def buffer_accesses(stmts, names: Optional[AbstractSet[str]] = None) -> Tuple[Set[str], Set[str]]:
    """(reads, writes): the buffers among `names` (every buffer when None) that statements read
    and write, as tile operands and as elements (a gemm's accumulator, a reduction's destination
    and an atomic's destination are read and written); pure Python."""
    reads: Set[str] = set()
    writes: Set[str] = set()

    def note(name, is_w):
        if names is None or name in names:
            (writes if is_w else reads).add(name)

    for s in walk_stmts(stmts):
        if isinstance(s, N.Copy):
            note(s.src.buffer.name, False)
            note(s.dst.buffer.name, True)
        elif isinstance(s, N.Fill):
            note(s.dst.buffer.name, True)
        elif isinstance(s, N.Gemm):
            note(s.a.buffer.name, False)
            note(s.b.buffer.name, False)
            note(s.c.buffer.name, True)
            note(s.c.buffer.name, False)
        elif isinstance(s, (N.Reduce, N.Cumsum)):
            note(s.src.name, False)
            note(s.dst.name, True)
            note(s.dst.name, False)
        elif isinstance(s, N.Atomic):
            note(s.dst.buffer.name, True)
            note(s.dst.buffer.name, False)
            if isinstance(s.value, N.Region):
                note(s.value.buffer.name, False)
        elif isinstance(s, N.Print) and isinstance(s.value, N.Buffer):
            note(s.value.name, False)
        if isinstance(s, N.Store):
            note(s.buffer.name, True)
        for e in _exprs_of(s):
            for n in walk(e):
                if isinstance(n, N.Load):
                    note(n.buffer.name, False)
    return reads, writes


def _exprs_of(s):
    from .simt_plan import _stmt_exprs

    return _stmt_exprs(s)
