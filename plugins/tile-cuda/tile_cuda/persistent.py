"""Persistent warp-specialized GEMM kernels on sm_90a (compile option persistent).

A warp-specialized GEMM (`warp_specialize.py`) launches one block per output tile: every block
fills its pipeline from empty and then runs its whole epilogue (the accumulator -> global memory)
while the tensor cores of its SM idle. Here the kernel launches min(tiles, SMs x BLOCKS_PER_SM)
blocks instead; block b runs the tiles b, b + P, b + 2P, ... (P blocks) one after the other,
each tile id mapped to the kernel's block indices in launch order (bx fastest) and then through
the kernel's rasterization (`T.use_swizzle`, else the target's `gemm_block_panel`), as the
non-persistent kernel maps blockIdx. The producer warpgroup runs straight on into the next tile's
stage copies while the consumers run the previous tile's epilogue: the stage ring's iteration
counter (stage = g % S, mbarrier phase = g / S) continues across tiles, g = i * KT + k for the
block's i-th tile, so the "empty" / "full" mbarriers are never reset and the producer is at most
S stages ahead, as within a tile.

Which kernels (`PERSISTENT_RULES`, first failing rule in the plan's notes): the plain GEMM form of
split-K (`split_k.PLAIN_GEMM_RULES`: a static grid, allocations and the accumulator's clear, one
top-level pipelined loop with a static trip count of stage copies and one gemm, an epilogue that
uses no stage tile, so the producer's refills cannot race with it), whose loop warp specialization
takes without ping-pong turns, and that split-K did not split. Others keep one block per tile.

Option persistent: "auto" (default: when it qualifies, has more than one wave of tiles but at
most AUTO_MAX_WAVES, and its epilogue runs on TMA stores, option tma_store), True (wherever the
kernel qualifies), False (one block per tile, the code of before byte for byte). The SM count is
the usual part's of the architecture
(`split_k.SM_COUNT`, decided at compile time); on a GPU with fewer SMs some blocks wait for a
second round, results are unchanged. Pure Python (the lowering is `warp_specialize.emit_ws_kernel`).
"""

from __future__ import annotations

import dataclasses
from math import prod
from typing import NamedTuple, Sequence, Union

from tilecore.ir import nodes as N

from .split_k import DEFAULT_SM_COUNT, HINT, PLAIN_GEMM_RULES, SM_COUNT, plain_gemm
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

PERSISTENT_RULES = PLAIN_GEMM_RULES + (
    ("split-K splits the kernel", lambda k: not any(isinstance(s, N.Hint) and s.kind == HINT for s in k.body)),
    ("the block index name is reused", lambda k: all(v.name != BLOCK_VAR for v in k.block_vars)),
)


class PersistentGrid(NamedTuple):
    """A persistent launch: `blocks` blocks over `tiles` tiles, `ktiles` ring iterations per tile."""

    tiles: int
    blocks: int
    ktiles: int


def persistent_mode(value) -> str:
    """Option persistent: False/None -> "" (off), True -> "on", "auto" -> "auto"."""
    return off_on_auto("persistent", value)


def choose_persistent(
    kernel: N.Kernel, loop: N.For, pingpong: bool, sm: int, mode: str, tma_store_epilogue: bool = True
) -> Union[PersistentGrid, str]:
    """The persistent launch of a warp-specialized `kernel` whose ring runs `loop`, or why not
    ("auto" also wants the epilogue on TMA stores, `tma_store_epilogue`: the configuration measured)."""
    found = plain_gemm(kernel, PERSISTENT_RULES)
    if isinstance(found, str):
        return found
    if found.loop is not loop or pingpong:
        return "the warp-specialized loop is not the plain GEMM's"
    if found.ktiles < 1:
        return "the loop has no k-tiles"
    sms = SM_COUNT.get(sm, DEFAULT_SM_COUNT) * BLOCKS_PER_SM
    tiles = found.blocks
    if mode == "auto" and tiles <= sms:
        return f"{tiles} tiles fit in one wave of {sms} blocks"
    if mode == "auto" and not tma_store_epilogue:
        return "the epilogue stores from registers (auto: with the TMA-store epilogue only; persistent=True forces it)"
    if mode == "auto" and tiles > AUTO_MAX_WAVES * sms:
        return f"{tiles} tiles are more than {AUTO_MAX_WAVES} waves of {sms} blocks (option persistent=True forces it)"
    return PersistentGrid(tiles, min(tiles, sms), found.ktiles)


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


def emit_tiles(lowering, kernel: N.Kernel, grid: PersistentGrid, body) -> None:
    """Loop over this block's tiles: bind the kernel's block indices to the tile's (launch order,
    then the kernel's rasterization, `rasterize`) and run `body(base)`, base = i * ktiles for the
    block's i-th tile: the ring iteration of the tile's first k-step."""
    from tvm.tirx.script.builder import ir as B

    block = lowering.ex.variables[BLOCK_VAR]
    dims = [g.value for g in kernel.grid]  # type: ignore[attr-defined]  # static (PLAIN_GEMM_RULES)
    with B.serial(0, tile_count(block, grid)) as i:
        tile = B.Bind(block + i * grid.blocks)
        for var, index in zip(kernel.block_vars, block_indices(tile, dims)):
            lowering.ex.bind(var.name, index)
        lowering.rasterize(kernel)
        body(i * grid.ktiles)
