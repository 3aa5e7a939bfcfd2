"""Block launch order: which tile each launched block computes.

Causal attention's query blocks run a main loop whose trip count grows with their block index
(block i reads i + 1 key blocks). Launched in index order, the longest blocks come last and the
final wave leaves most SMs idle while they finish; launched longest first, short blocks fill the
gaps at the end. `trip_count_growth` finds such an index, which then runs backwards. Reversed
within each (head, batch) alone, every head's longest block still starts late in the grid's last
wave; a target's `heavy_first_group_blocks` makes the index the slowest one within groups of
about that many blocks (several heads' longest blocks first, then their next longest, ...), so the
last wave is short blocks while the blocks running at once still read few heads' K and V (L2).

`kernel_block_order` and `logical_blocks` describe the whole mapping (panels for L2 reuse
included) once, for the lowering's expressions and for a backend that needs to know which launch
indices share a tile (e.g. the blocks of one cluster). Pure Python.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from ..ir import nodes as N
from ..ir.visitor import substitute, walk, walk_stmts
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


class BlockOrder(NamedTuple):
    """How a GPU kernel's launch indices become its block indices (`kernel_block_order`).

    panel > 0: a 2-D grid visited in panels of `panel` block rows (block columns when `col`), so
    that blocks running at the same time share operand tiles in L2 (T.use_swizzle, else the
    target's `gemm_block_panel` for a kernel with a gemm). reverse_axis: that index runs
    backwards over its `reverse_size` blocks (the longest blocks first); with reverse_group > 1 it
    is also the slowest launch index within groups of `reverse_group` tuples of the other indices
    (one tuple: within each tuple alone). Neither: launch order."""

    panel: int = 0
    col: bool = False
    reverse_axis: Optional[int] = None
    reverse_size: int = 0
    reverse_group: int = 1


class IndexOps(NamedTuple):
    """The arithmetic `logical_blocks` computes with: Python ints, or a code generator's
    expressions (`bind` names an intermediate value once)."""

    floordiv: Callable[[Any, Any], Any]
    floormod: Callable[[Any, Any], Any]
    minimum: Callable[[Any, Any], Any]
    bind: Callable[[Any], Any]


INT_OPS = IndexOps(lambda a, b: a // b, lambda a, b: a % b, min, lambda a: a)


def kernel_block_order(k: N.Kernel, gemm_block_panel: int, heavy_first_group_blocks: int = 0) -> BlockOrder:
    """The block order of kernel `k` (see BlockOrder) on a target whose gemm kernels take panels
    of `gemm_block_panel` block rows (0: none) and whose longest-first order groups about
    `heavy_first_group_blocks` blocks (0: reversed within each tuple of the other indices)."""
    hints = [s for s in k.body if isinstance(s, N.Hint) and s.kind == "use_swizzle"]
    if len(k.grid) >= 2:
        if hints:
            params = dict(hints[0].params)
        elif gemm_block_panel and len(k.grid) == 2 and any(isinstance(s, N.Gemm) for s in walk_stmts(k.body)):
            params = {"panel_size": gemm_block_panel}
        else:
            params = None
        if params is not None:
            if not params.get("enable", True):
                return BlockOrder()
            return BlockOrder(panel=int(params.get("panel_size", 8)), col=params.get("order", "row") == "col")
    growth = trip_count_growth(k)
    if growth is not None:
        group = max(1, heavy_first_group_blocks // growth[1]) if len(k.grid) > 1 else 1
        return BlockOrder(reverse_axis=growth[0], reverse_size=growth[1], reverse_group=group)
    return BlockOrder()


def logical_blocks(order: BlockOrder, raw: Sequence[Any], grid: Sequence[Any], ops: IndexOps = INT_OPS) -> List[Any]:
    """The kernel's block indices for launch indices `raw` over `grid` (both in the kernel's axis
    order) under `order`, computed with `ops`. Panels: the launch index, linearized row-major, is cut
    into groups of `panel` block rows; within a group consecutive blocks walk down the rows first.
    Reversed index in groups: see the comment below."""
    out = list(raw)
    if order.panel:
        gx, gy, bx, by = grid[0], grid[1], raw[0], raw[1]
        if order.col:
            gx, gy, bx, by = gy, gx, by, bx
        panel = order.panel
        linear = ops.bind(by * gx + bx)
        group = ops.bind(ops.floordiv(linear, panel * gx))
        within = ops.bind(ops.floormod(linear, panel * gx))
        rows = ops.bind(ops.minimum(gy - group * panel, panel))
        new_by = ops.bind(group * panel + ops.floormod(within, rows))
        new_bx = ops.bind(ops.floordiv(within, rows))
        if order.col:
            new_bx, new_by = new_by, new_bx
        out[0], out[1] = new_bx, new_by
    elif order.reverse_axis is not None and order.reverse_group > 1:
        # the launch index, linearized with axis 0 fastest, is cut into groups of reverse_group
        # tuples of the other indices x all reverse_size values of the reversed one; within a group
        # consecutive blocks walk the tuples first (the last group may hold fewer tuples)
        axis, size, group = order.reverse_axis, order.reverse_size, order.reverse_group
        others = [a for a in range(len(grid)) if a != axis]
        linear, stride = raw[0], grid[0]
        for a in range(1, len(grid)):
            linear, stride = linear + raw[a] * stride, stride * grid[a]
        linear = ops.bind(linear)
        tuples = grid[others[0]]
        for a in others[1:]:
            tuples = tuples * grid[a]
        first = ops.bind(ops.floordiv(linear, group * size) * group)
        within = ops.bind(ops.floormod(linear, group * size))
        count = ops.bind(ops.minimum(tuples - first, group))
        out[axis] = ops.bind(size - 1 - ops.floordiv(within, count))
        rest = ops.bind(first + ops.floormod(within, count))
        for a in others[:-1]:
            out[a] = ops.bind(ops.floormod(rest, grid[a]))
            rest = ops.bind(ops.floordiv(rest, grid[a]))
        out[others[-1]] = rest
    elif order.reverse_axis is not None:
        out[order.reverse_axis] = order.reverse_size - 1 - raw[order.reverse_axis]
    return out
