"""Persistent warp-specialized kernels on sm_90a (compile option persistent).

A warp-specialized kernel (`warp_specialize.py`) launches one block per output tile: every block
fills its pipeline from empty and then runs its whole epilogue (the accumulator -> global memory)
while the tensor cores of its SM idle. Here the kernel launches min(tiles, SMs x BLOCKS_PER_SM)
blocks instead; block b runs the tiles b, b + P, b + 2P, ... (P blocks) one after the other,
each tile id mapped to the kernel's block indices in launch order (bx fastest) and then through
the kernel's rasterization (`T.use_swizzle`, else the target's `gemm_block_panel`; the longest-first
order of `heavy_first_group_blocks`), as the non-persistent kernel maps blockIdx. The producer
warpgroup runs straight on into the next tile's stage copies while the consumers run the previous
tile's epilogue: the stage ring's iteration counter (stage = g % S, mbarrier phase = g / S)
continues across tiles, so the "empty" / "full" mbarriers are never reset and the producer is at
most S stages ahead, as within a tile.

Two forms (the first failing rule of each in the plan's notes):

* the plain GEMM (`PERSISTENT_RULES`): the plain form of split-K (`split_k.PLAIN_GEMM_RULES`: a
  static grid, allocations and the accumulator's clear, one top-level pipelined loop with a static
  trip count KT of stage copies and one gemm, an epilogue that uses no stage tile), whose loop
  warp specialization takes without ping-pong turns, and that split-K did not split: g = i * KT + k
  for the block's i-th tile;
* any other warp-specialized kernel with a static grid whose statements outside the loop use no
  stage tile (`LOOP_RULES`: FlashAttention, with its lets, two gemms, ping-pong turns and the
  deferred second gemm): the kernel body runs once per tile as written, after a consumer barrier
  (its shared tiles' uses in the previous tile are over), and each tile's loop advances a ring
  counter by its own trip count, which may differ between tiles (causal attention). Tiles of
  unequal trip counts (`trip_count_growth`) run in snake order (`tile_of`: odd rounds backwards),
  so a block whose tile in one round was long gets a short one in the next.

Option persistent: "auto" (default: the plain GEMM when it has more than one wave of tiles but at
most AUTO_MAX_WAVES and its epilogue runs on TMA stores, option tma_store; the other form when it
has more than one wave of tiles and either its trip count grows with a block index or, with
option tile_loads on or "auto", the producer loads a copy per tile (`ws_tile_loads`)), True (wherever
the kernel qualifies), False (one block per tile, the code of before byte for byte). The SM count
is the usual part's of the architecture (`split_k.SM_COUNT`, decided at compile time); on a GPU
with fewer SMs some blocks wait for a second round, results are unchanged. Pure Python (the
lowering is `warp_specialize.emit_ws_kernel`).
"""

from __future__ import annotations

import dataclasses
from math import prod
from typing import NamedTuple, Optional, Sequence, Union

from tilecore.ir import nodes as N
from tilecore.ir.visitor import walk
from tilecore.lowering.block_order import trip_count_growth

from .split_k import DEFAULT_SM_COUNT, HINT, PLAIN_GEMM_RULES, SM_COUNT, _grid_blocks, _loops, plain_gemm
from .target import off_on_auto

BLOCK_VAR = "tc_persistent_block"  # blockIdx.x of the persistent grid
# a warp-specialized block takes its SM's register file (`warp_specialize.register_split`)
BLOCKS_PER_SM = 1
MODES = ("", "on", "auto")
# option persistent="auto": at most this many waves of tiles. On session 19's H100 (128x256x64,
# 3 stages, TMA-store epilogue; benchmarks/results/gpu-session19) persistent blocks ran 4096^3
# (3.9 waves) 0.975x / 0.972x cuBLAS fp16 / bf16 against 0.948x / 0.946x, 4000^3 0.938x against
# 0.920x, and 8192^3 (15.5 waves) 0.968x / 0.951x against 0.982x / 0.967x; session 12's H200
# (one run each, plain epilogue) 6-12% slower at 8192^3: with many tiles per block the blocks drift
# apart over their static tile lists and the operand panels they share leave L2 between them
AUTO_MAX_WAVES = 4

_BLOCK_NAME_FREE = ("the block index name is reused", lambda k: all(v.name != BLOCK_VAR for v in k.block_vars))
PERSISTENT_RULES = PLAIN_GEMM_RULES + (
    ("split-K splits the kernel", lambda k: not any(isinstance(s, N.Hint) and s.kind == HINT for s in k.body)),
    _BLOCK_NAME_FREE,
)


def _outside_loop_ok(k: N.Kernel) -> bool:
    """No statement outside the loop names a tile the loop's copies fill (the producer refills
    them for the next tile while the consumers still run this one's other statements)."""
    (at,) = _loops(k)
    loop = k.body[at]
    assert isinstance(loop, N.For)
    filled = {s.dst.buffer.name for s in loop.body if isinstance(s, N.Copy)}
    outside = [s for s in k.body[:at] + k.body[at + 1 :] if not isinstance(s, N.Alloc)]
    return not any(isinstance(n, N.Buffer) and n.name in filled for s in outside for n in walk(s))


# a warp-specialized loop of another form (attention: lets, two gemms, ping-pong, a trip count that
# differs between tiles): the kernel body runs once per tile as written, behind a consumer barrier
LOOP_RULES = (
    ("the grid size is not known at compile time", lambda k: _grid_blocks(k) is not None),
    ("the kernel has no T.Pipelined loop at its top level, or more than one", lambda k: len(_loops(k)) == 1),
    _BLOCK_NAME_FREE,
    ("a statement outside the loop uses a tile the loop fills", _outside_loop_ok),
)


class PersistentGrid(NamedTuple):
    """A persistent launch: `blocks` blocks over `tiles` tiles, `ktiles` ring iterations per tile
    (None: each tile's own trip count, the ring's position carried in a counter). `snake`: the
    rounds of tiles alternate direction, so a block that ran a long tile in one round runs a
    short one in the next (tiles of unequal trip counts laid out longest first)."""

    tiles: int
    blocks: int
    ktiles: Optional[int]
    snake: bool = False


def persistent_mode(value) -> str:
    """Option persistent: False/None -> "" (off), True -> "on", "auto" -> "auto"."""
    return off_on_auto("persistent", value)


def choose_persistent(
    kernel: N.Kernel,
    loop: N.For,
    pingpong: bool,
    sm: int,
    mode: str,
    tma_store_epilogue: bool = True,
    even_trips: bool = False,
) -> Union[PersistentGrid, str]:
    """The persistent launch of a warp-specialized `kernel` whose ring runs `loop`, or why not
    ("auto" also wants the epilogue on TMA stores, `tma_store_epilogue`: the configuration measured).
    A kernel that is not the plain GEMM takes the general form (LOOP_RULES): with "auto" when its
    trip count grows with a block index (causal attention), whose tiles then run in snake order,
    and, with `even_trips`, also when it does not (the caller keeps that launch only if the producer
    then loads per-tile copies, `ws_tile_loads`: the configuration measured faster)."""
    sms = SM_COUNT.get(sm, DEFAULT_SM_COUNT) * BLOCKS_PER_SM
    found = plain_gemm(kernel, PERSISTENT_RULES)
    if isinstance(found, str):
        return _choose_general(kernel, found, sms, mode, even_trips)
    if found.loop is not loop or pingpong:
        return "the warp-specialized loop is not the plain GEMM's"
    if found.ktiles < 1:
        return "the loop has no k-tiles"
    tiles = found.blocks
    if mode == "auto" and tiles <= sms:
        return f"{tiles} tiles fit in one wave of {sms} blocks"
    if mode == "auto" and not tma_store_epilogue:
        return "the epilogue stores from registers (auto: with the TMA-store epilogue only; persistent=True forces it)"
    if mode == "auto" and tiles > AUTO_MAX_WAVES * sms:
        return f"{tiles} tiles are more than {AUTO_MAX_WAVES} waves of {sms} blocks (option persistent=True forces it)"
    return PersistentGrid(tiles, min(tiles, sms), found.ktiles)


def _choose_general(
    kernel: N.Kernel, not_plain: str, sms: int, mode: str, even_trips: bool = False
) -> Union[PersistentGrid, str]:
    """The general form's launch (see `choose_persistent`), or why not."""
    if any(isinstance(s, N.Hint) and s.kind == HINT for s in kernel.body):
        return "split-K splits the kernel"
    for reason, holds in LOOP_RULES:
        if not holds(kernel):
            return reason
    uneven = trip_count_growth(kernel) is not None
    if mode == "auto" and not uneven and not even_trips:
        return f"{not_plain} (auto: another loop only when its trip count grows with a block index)"
    tiles = _grid_blocks(kernel)
    assert tiles is not None
    if mode == "auto" and tiles <= sms:
        return f"{tiles} tiles fit in one wave of {sms} blocks"
    return PersistentGrid(tiles, min(tiles, sms), None, snake=uneven)


def describe(grid: PersistentGrid, mode: str) -> str:
    """The plan note of a persistent launch."""
    option = "'auto'" if mode == "auto" else "True"
    return f"persistent: {grid.blocks} blocks over {grid.tiles} tiles (option persistent={option})"


def launch_kernel(kernel: N.Kernel, grid: PersistentGrid) -> N.Kernel:
    """The kernel as launched: one grid dimension of `grid.blocks` blocks (blockIdx.x = BLOCK_VAR)."""
    return dataclasses.replace(kernel, grid=(N.Const(grid.blocks, "int32"),), block_vars=(N.Var(BLOCK_VAR, "int32"),))


def tile_count(block, grid: PersistentGrid):
    """How many tiles block `block` runs (block, block + P, ... below grid.tiles): an int or a
    TIR expression, as `block` is (// and % are floor division on both)."""
    return (grid.tiles - 1 - block) // grid.blocks + 1


def block_indices(tile, dims: Sequence[int]) -> list:
    """The kernel's block indices of linear tile id `tile` in launch order (the first fastest)."""
    out = []
    for d, size in enumerate(dims):
        index = tile // prod(dims[:d]) if d else tile
        out.append(index % size if d + 1 < len(dims) else index)
    return out


def tile_of(block, round_, grid: PersistentGrid, select=None):
    """The linear tile id block `block` runs in round `round_` (it runs none when that is >=
    grid.tiles): round-robin, or in snake order (odd rounds backwards). Ints or TIR expressions;
    `select(cond, a, b)` picks in the TIR form."""
    if not grid.snake:
        return round_ * grid.blocks + block
    back = grid.blocks - 1 - block
    if select is None:
        return round_ * grid.blocks + (back if round_ % 2 else block)
    return round_ * grid.blocks + select(round_ % 2 == 1, back, block)


def emit_tiles(lowering, kernel: N.Kernel, grid: PersistentGrid, body) -> None:
    """Loop over this block's tiles: bind the kernel's block indices to the tile's (launch order,
    then the kernel's rasterization, `rasterize`) and run `body(base)`, base: the ring iteration
    of the tile's first k-step (i * ktiles for the block's i-th tile; with a trip count per tile,
    a counter the loop advances, `advance_ring`)."""
    from tvm import tirx as tx
    from tvm.script.ir_builder import IRBuilder
    from tvm.tirx.script.builder import ir as B

    block = lowering.ex.variables[BLOCK_VAR]
    dims = [g.value for g in kernel.grid]  # type: ignore[attr-defined]  # static (PLAIN_GEMM_RULES, LOOP_RULES)

    def bind(tile):
        for var, index in zip(kernel.block_vars, block_indices(tile, dims)):
            lowering.ex.bind(var.name, index)
        lowering.rasterize(kernel)

    if grid.ktiles is not None:
        with B.serial(0, tile_count(block, grid)) as i:
            bind(B.Bind(block + i * grid.blocks))
            body(i * grid.ktiles)
        return
    ring = B.alloc_buffer((1,), "int32", scope="local")
    IRBuilder.name("tile_ring", ring)
    B.buffer_store(ring, tx.IntImm("int32", 0), [0])
    with B.serial(0, -(-grid.tiles // grid.blocks)) as i:
        tile = B.Bind(tile_of(block, i, grid, tx.Select))
        with B.If(tile < grid.tiles):
            with B.Then():
                bind(tile)
                lowering.ws_ring, lowering.ws_tile_ordinal = ring, i  # (only the last round skips tiles)
                try:
                    body(tx.BufferLoad(ring, [0]))
                finally:
                    lowering.ws_ring = lowering.ws_tile_ordinal = None


def advance_ring(lowering, n) -> None:
    """After a tile's loop of `n` iterations: move the ring's counter on (general form only)."""
    from tvm import tirx as tx
    from tvm.tirx.script.builder import ir as B

    ring = getattr(lowering, "ws_ring", None)
    if ring is not None:
        B.buffer_store(ring, tx.BufferLoad(ring, [0]) + n, [0])
