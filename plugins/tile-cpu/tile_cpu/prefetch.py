"""Software prefetch for T.Pipelined loops on the CPU.

A T.Pipelined loop that copies tiles out of global tensors (the GEMM main loop)
asks for the next iteration's tiles to be in flight while this one computes;
GPUs do that with asynchronous copies, a CPU with prefetch instructions. At the
top of iteration k this emits one prefetch per cache line of every global
source region of iteration k + 1 into L2 (prefetch instructions never fault, so
tiles that reach past a tensor need no guard). With the user's small tiles the
copies otherwise wait on L3/DRAM latency for a few short rows at a time.
"""

from __future__ import annotations

from typing import List

from tvm import tirx as tx

from tilecore.ir import nodes as N
from tilecore.ir.types import bits
from tilecore.ir.visitor import walk, walk_stmts
from tilecore.lowering.tir_expr import tir_const
from tilecore.lowering.tir_stmt import seq

CACHE_LINE = 64
LOCALITY_L1 = 3  # llvm.prefetch locality: 3 = all levels (prefetcht0), 2 = L2 and out (prefetcht1)
LOCALITY_L2 = 2


def global_copies(body) -> List[N.Copy]:
    """The T.copy statements directly in `body` whose source is a global tensor and whose start
    depends on no name bound inside `body` (the prefetch runs before the body binds it)."""
    stmts = body.stmts if hasattr(body, "stmts") else (body if isinstance(body, (list, tuple)) else [body])
    bound = {s.var.name for s in walk_stmts(stmts) if isinstance(s, N.Let)}
    return [
        s
        for s in stmts
        if isinstance(s, N.Copy)
        and s.src.buffer.scope == "global"
        and not any(isinstance(v, N.Var) and v.name in bound for e in s.src.starts for v in walk(e))
    ]


def prefetch_next(low, loop: N.For, var, copies: List[N.Copy], max_bytes: int):
    """Prefetches of the copies' source tiles of iteration var + 1 (None if there is nothing to do)."""
    total = sum(_tile_bytes(c.src) for c in copies)
    if not copies or total > max_bytes:
        return None
    nxt = var + tir_const(1, loop.var.dtype)
    low.expr.bind(loop.var.name, nxt)
    try:
        fetches = [_prefetch_region(low, c.src) for c in copies]
    finally:
        low.expr.bind(loop.var.name, var)
    fetches = [f for f in fetches if f is not None]
    if not fetches:
        return None
    end = low.lower_expr(loop.begin, loop.var.dtype) + low.lower_expr(loop.extent, loop.var.dtype)
    return tx.IfThenElse(tx.LT(nxt, end), seq(fetches), None)


def prefetch(tb, indices, locality: int):
    """A prefetch (for reading) of the cache line holding tb[indices]."""
    return tx.Evaluate(
        tx.call_llvm_intrin(
            "void",
            "llvm.prefetch.p0",
            tx.address_of(tx.BufferLoad(tb, list(indices))),
            tir_const(0, "int32"),
            tir_const(locality, "int32"),
            tir_const(1, "int32"),
        )
    )


def _tile_bytes(region: N.Region) -> int:
    size = bits(region.buffer.dtype) // 8 or 1
    for e in region.extents:
        size *= e
    return size


def _prefetch_region(low, region: N.Region):
    """One prefetch per cache line of `region` (its last axis contiguous), rows in a loop."""
    tb = low.buffer(region.buffer)
    elem = max(1, bits(region.buffer.dtype) // 8)
    per_line = max(1, CACHE_LINE // elem)
    starts = [low.index(e) for e in region.starts]
    rows = [low.fresh("pf") for _ in region.extents[:-1]]
    line = low.fresh("pl")
    lines = -(-region.extents[-1] // per_line)
    idx = [st + r for st, r in zip(starts[:-1], rows)] + [starts[-1] + line * per_line]
    call = prefetch(tb, idx, LOCALITY_L2)
    body = tx.For(line, 0, lines, tx.ForKind.UNROLLED if lines <= 8 else tx.ForKind.SERIAL, call)
    for r, ext in reversed(list(zip(rows, region.extents[:-1]))):
        body = tx.For(r, 0, ext, tx.ForKind.SERIAL, body)
    return body
