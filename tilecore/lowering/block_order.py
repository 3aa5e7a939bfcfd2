"""Block launch order: the longest blocks first.

Causal attention's query blocks run a main loop whose trip count grows with their block index
(block i reads i + 1 key blocks). Launched in index order, the longest blocks come last and the
final wave leaves most SMs idle while they finish; launched longest first, short blocks fill the
gaps at the end. `trip_count_growth` finds such an index; the SIMT lowering runs it backwards
(`SimtLowering.heavy_blocks_first`). Pure Python.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from ..ir import nodes as N
from ..ir.visitor import substitute, walk
from ..passes.simplify import as_int

MAX_GRID_SCAN = 4096  # block indices evaluated one by one (`trip_count_growth`)


def trip_count_growth(k: N.Kernel) -> Optional[Tuple[int, int]]:
    """(axis, grid size) of the block index that the trip count of the kernel's one top-level
    pipelined loop grows with, when it depends on that index alone (names bound before the loop
    resolved) and is non-decreasing over the grid and not constant; else None."""
    loops = [s for s in k.body if isinstance(s, N.For) and s.kind == "pipelined"]
    if len(loops) != 1:
        return None
    lets: Dict[str, N.Expr] = {}
    for s in k.body:
        if s is loops[0]:
            break
        if isinstance(s, N.Let):
            lets[s.var.name] = substitute(s.value, lets)
    extent = substitute(loops[0].extent, lets)
    names = {n.name for n in walk(extent) if isinstance(n, N.Var)}
    for axis, (var, size) in enumerate(zip(k.block_vars, k.grid)):
        n = as_int(size)
        if names != {var.name} or n is None or not 1 < n <= MAX_GRID_SCAN:
            continue
        trips: List[int] = []
        for b in range(n):
            t = as_int(substitute(extent, {var.name: N.Const(b, var.dtype)}))
            if t is None:
                return None
            trips.append(t)
        if all(a <= b for a, b in zip(trips, trips[1:])) and trips[0] < trips[-1]:
            return axis, n
    return None
