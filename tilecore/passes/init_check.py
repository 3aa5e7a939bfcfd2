"""Reads of block-local memory that nothing has written yet (reported as warnings).

DESIGN.md: reading memory that was never written is undefined. The reference
interpreter fills new allocations with NaN, so such a read shows up there, but
compiled backends read whatever the registers or shared memory held, so the
classic mistake -- `T.gemm` accumulating into a fragment without `T.clear` --
gives plausible wrong numbers. This analysis finds reads of shared, fragment,
local and var buffers that come, in program order, before every write to that
buffer and are not inside a run-time `if`: the first time such a read runs it
reads uninitialized memory. Writes inside an `if` count as writes, and partial
writes count as whole ones, so there are no false alarms on correct programs;
it is a warning, not an error, because the behaviour is undefined, not illegal.
"""

from __future__ import annotations

import warnings
from typing import Dict, Iterator, List, Set, Tuple

from ..diagnostics import format_diagnostic
from ..ir import nodes as N
from ..ir.visitor import walk


class UninitializedReadWarning(UserWarning):
    """A kernel reads a shared/fragment/local buffer before anything wrote it."""


def _loads(*exprs) -> Iterator[N.Buffer]:
    for e in exprs:
        if e is None:
            continue
        for node in walk(e):
            if isinstance(node, N.Load):
                yield node.buffer


def _region_index_loads(region: N.Region) -> Iterator[N.Buffer]:
    yield from _loads(*region.starts)


def buffers_read(s: N.Stmt) -> Iterator[Tuple[N.Buffer, str]]:
    """(buffer, what reads it) for the reads `s` itself makes (not its nested bodies)."""
    if isinstance(s, N.Store):
        for b in _loads(s.value, *s.indices):
            yield b, "this expression"
    elif isinstance(s, N.Let):
        for b in _loads(s.value):
            yield b, "this expression"
    elif isinstance(s, N.Copy):
        yield s.src.buffer, "T.copy"
        for b in list(_region_index_loads(s.src)) + list(_region_index_loads(s.dst)):
            yield b, "T.copy"
    elif isinstance(s, N.Fill):
        for b in list(_loads(s.value)) + list(_region_index_loads(s.dst)):
            yield b, "T.fill"
    elif isinstance(s, N.Gemm):
        yield s.a.buffer, "T.gemm"
        yield s.b.buffer, "T.gemm"
        if not s.clear_accum:
            yield s.c.buffer, "T.gemm (accumulating into C)"
    elif isinstance(s, N.Reduce):
        yield s.src, f"T.reduce_{s.kind}"
        if not s.clear:
            yield s.dst, f"T.reduce_{s.kind} (clear=False combines with the destination)"
    elif isinstance(s, N.Cumsum):
        yield s.src, "T.cumsum"
    elif isinstance(s, N.Atomic):
        if isinstance(s.value, N.Region):
            yield s.value.buffer, f"T.atomic_{s.kind}"
        else:
            for b in _loads(s.value):
                yield b, f"T.atomic_{s.kind}"
    elif isinstance(s, N.Print):
        if isinstance(s.value, N.Buffer):
            yield s.value, "T.print"
        else:
            for b in _loads(s.value):
                yield b, "T.print"
    elif isinstance(s, N.If):
        for b in _loads(s.cond):
            yield b, "this condition"
    elif isinstance(s, N.For):
        for b in _loads(s.begin, s.extent):
            yield b, "this loop's bounds"
    elif isinstance(s, N.Kernel):
        for b in _loads(*s.grid):
            yield b, "the grid"


def buffers_written(s: N.Stmt) -> Iterator[N.Buffer]:
    """The buffers statement `s` itself writes (a store's, a tile operation's destination)."""
    if isinstance(s, N.Store):
        yield s.buffer
    elif isinstance(s, (N.Copy, N.Fill, N.Atomic)):
        yield s.dst.buffer
    elif isinstance(s, N.Gemm):
        yield s.c.buffer
    elif isinstance(s, (N.Reduce, N.Cumsum)):
        if s.dst is not None:
            yield s.dst


def uninitialized_reads(func: N.PrimFunc) -> List[Tuple[N.Buffer, N.Stmt, str]]:
    """(buffer, statement, what reads it) for each first read of a never-written local buffer."""
    local: Dict[str, N.Buffer] = {}
    written: Set[str] = set()
    found: List[Tuple[N.Buffer, N.Stmt, str]] = []
    reported: Set[str] = set()

    def visit(body, guarded: bool) -> None:
        for s in body:
            if isinstance(s, N.Alloc) and s.buffer.scope != "global":
                local[s.buffer.name] = s.buffer
            for buffer, what in buffers_read(s):
                name = buffer.name
                if name in local and name not in written and name not in reported and not guarded:
                    reported.add(name)
                    found.append((local[name], s, what))
            if isinstance(s, N.If):
                visit(s.then_body, True)
                visit(s.else_body, True)
            elif isinstance(s, (N.For, N.Parallel, N.Kernel)):
                visit(s.body, guarded)
            for buffer in buffers_written(s):
                written.add(buffer.name)

    visit(func.body, False)
    return found


def warn_uninitialized_reads(func: N.PrimFunc) -> None:
    """Issue an UninitializedReadWarning at the user's line for each uninitialized read."""
    for buffer, stmt, what in uninitialized_reads(func):
        fix = "T.clear / T.fill / T.copy into it first"
        if isinstance(stmt, N.Gemm):
            fix = f"T.clear({buffer.name}) before the loop, or pass clear_accum=True"
        scope = "var" if buffer.scope == "var" else f"{buffer.scope} buffer"
        message = (
            f"{what} reads {buffer.name} (a {scope}) before anything has written it: its "
            f"contents are undefined (NaN on the reference backend, leftover values on "
            f"hardware); {fix}"
        )
        span = stmt.span
        if span.line > 0:  # Python prints file:line and the source line itself
            warnings.warn_explicit(message, UninitializedReadWarning, span.file, span.line)
        else:
            warnings.warn(format_diagnostic(message, span), UninitializedReadWarning, stacklevel=3)
