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

Option persistent: False (default: one block per tile, the code of before byte for byte),
True (wherever the kernel qualifies), "auto" (when it qualifies and has more tiles than the GPU
has SMs, i.e. more than one wave), "dynamic" (as True, but the tiles past the first wave are
handed out in order by an atomic counter in global memory, `COUNTER_PARAM`, a launcher
workspace: block b starts with tile b and, after issuing a tile's loads, its producer thread draws
the next one, P + k for the launch's k-th draw, as the hardware scheduler would start blocks, so
that the blocks running at one time keep working on neighbouring tiles (L2 reuse) and a slow SM
takes fewer tiles. The producer publishes each tile id to the consumers through a ring of
TILE_SLOTS shared slots with a "full" and an "empty" mbarrier each, the id past the end last;
there are `tiles` draws per launch, and the last one resets the counter to 0 for the next launch,
so one such kernel must not run on two streams at once. Needs a producer whose copies one thread
issues, all TMA; with cp.async copies it keeps the static order, with a note). The SM count is
the usual part's of the architecture (`split_k.SM_COUNT`, decided at compile time); on a GPU with
fewer SMs some blocks wait for a second round, results are unchanged. Planning is pure Python;
the emit_* functions (called by `warp_specialize.emit_ws_kernel`) import TVM.
"""

from __future__ import annotations

import dataclasses
from math import prod
from typing import NamedTuple, Optional, Sequence, Union

from tilecore.ir import nodes as N

from .split_k import DEFAULT_SM_COUNT, HINT, PLAIN_GEMM_RULES, SM_COUNT, plain_gemm

BLOCK_VAR = "tc_persistent_block"  # blockIdx.x of the persistent grid
# a warp-specialized block takes its SM's register file (`warp_specialize.register_split`)
BLOCKS_PER_SM = 1
MODES = ("", "on", "auto", "dynamic")
# "dynamic": tiles past the first wave handed out by this int32 in global memory (a launcher
# workspace, 0 between launches: the last draw of a launch resets it)
COUNTER_PARAM = "tc_persistent_counter"
TILE_SLOTS = 2  # the ring of tile ids the producer publishes to the consumers ("dynamic")

PERSISTENT_RULES = PLAIN_GEMM_RULES + (
    ("split-K splits the kernel", lambda k: not any(isinstance(s, N.Hint) and s.kind == HINT for s in k.body)),
    ("the block index name is reused", lambda k: all(v.name != BLOCK_VAR for v in k.block_vars)),
)


class PersistentGrid(NamedTuple):
    """A persistent launch: `blocks` blocks over `tiles` tiles, `ktiles` ring iterations per tile."""

    tiles: int
    blocks: int
    ktiles: int
    dynamic: bool = False  # tiles past the first wave from COUNTER_PARAM, in the order blocks ask


def persistent_mode(value) -> str:
    """Option persistent: False/None -> "" (off), True -> "on", "auto" or "dynamic" as named."""
    if value is None or value is False:
        return ""
    if value is True:
        return "on"
    if value in ("auto", "dynamic"):
        return value
    raise ValueError(f"compile option persistent must be True, False, 'auto' or 'dynamic', got {value!r}")


def choose_persistent(
    kernel: N.Kernel, loop: N.For, pingpong: bool, sm: int, mode: str, one_issuer: bool = True
) -> Union[PersistentGrid, str]:
    """The persistent launch of a warp-specialized `kernel` whose ring runs `loop`, or why not;
    "dynamic" needs a producer whose copies one thread issues (all TMA), else the static order."""
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
    return PersistentGrid(tiles, min(tiles, sms), found.ktiles, mode == "dynamic" and one_issuer)


def describe(grid: PersistentGrid, mode: str) -> str:
    """The plan note of a persistent launch."""
    option = {"auto": "'auto'", "dynamic": "'dynamic'"}.get(mode, "True")
    order = ", tiles past the first wave by an atomic counter" if grid.dynamic else ""
    if mode == "dynamic" and not grid.dynamic:
        order = ", static order (cp.async copies: every producer thread would need the tile)"
    return f"persistent: {grid.blocks} blocks over {grid.tiles} tiles{order} (option persistent={option})"


def ring_entries(grid: Optional[PersistentGrid]) -> int:
    """8-byte shared entries after the stage mbarriers: per tile slot a full and an empty mbarrier
    and the tile id ("dynamic"), else none."""
    return 3 * TILE_SLOTS if grid is not None and grid.dynamic else 0


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


def bind_tile(lowering, kernel: N.Kernel, tile) -> None:
    """Bind the kernel's block indices to those of linear tile id `tile` (launch order, then the
    kernel's rasterization, `rasterize`)."""
    dims = [g.value for g in kernel.grid]  # type: ignore[attr-defined]  # static (PLAIN_GEMM_RULES)
    for var, index in zip(kernel.block_vars, block_indices(tile, dims)):
        lowering.ex.bind(var.name, index)
    lowering.rasterize(kernel)


def emit_tiles(lowering, kernel: N.Kernel, grid: PersistentGrid, body) -> None:
    """Loop over this block's tiles: bind the kernel's block indices to the tile's (launch order,
    then the kernel's rasterization, `rasterize`) and run `body(base)`, base = i * ktiles for the
    block's i-th tile: the ring iteration of the tile's first k-step."""
    from tvm.tirx.script.builder import ir as B

    block = lowering.ex.variables[BLOCK_VAR]
    with B.serial(0, tile_count(block, grid)) as i:
        bind_tile(lowering, kernel, B.Bind(block + i * grid.blocks))
        body(i * grid.ktiles)


class TileRing(NamedTuple):
    """The shared entries of the dynamic schedule: `entries` (uint64 TIR buffer) from `at` on."""

    entries: object
    at: int

    def full(self, slot):
        """The mbarrier the producer arrives on once it has written the slot's tile id."""
        return self._addr(self.at + slot)

    def empty(self, slot):
        """The mbarrier each consumer warp arrives on once it has read the slot's tile id."""
        return self._addr(self.at + TILE_SLOTS + slot)

    def slot(self, slot):
        """The index of the slot's tile id (stored as a 64-bit entry)."""
        return self.at + 2 * TILE_SLOTS + slot

    def _addr(self, index):
        from tvm import tirx as tx

        return tx.address_of(tx.BufferLoad(self.entries, [index]))


DYNAMIC_LIB = r"""
#ifndef TILECORE_PERSISTENT_LIB
#define TILECORE_PERSISTENT_LIB
namespace tc {
// the next tile of a dynamic persistent schedule (tile_cuda/persistent.py): draw k of a launch is
// tile blocks + k; the launch's draws number `tiles` (one per tile run, each block's last one
// past the end), so the draw of tiles - 1 is the last: it resets the counter for the next launch
__device__ __forceinline__ int persistent_next(void* counter, int tiles, int blocks) {
  int* c = static_cast<int*>(counter);
  const int k = atomicAdd(c, 1);
  if (k == tiles - 1) atomicExch(c, 0);
  return blocks + k;
}
__device__ __forceinline__ void mbar_arrive_one(void* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(smem_addr(bar)) : "memory");
}
}  // namespace tc
#endif
"""


def _cells(n: int):
    """`n` one-element int32 register buffers (loop-carried values of a while loop)."""
    from tvm.tirx.script.builder import ir as B

    return [B.alloc_buffer((1,), "int32", scope="local") for _ in range(n)]


def _call(lowering, name, *args, ret="void"):
    from .intrinsics import helper_call

    return helper_call(lowering, name, *args, ret=ret)


def _in_range(tile, grid: PersistentGrid):
    """`tile` (a valid tile id) with its range stated, so that TVM's simplifier folds the block
    index arithmetic as it does for the static schedule's loop variable."""
    from tvm import tirx as tx
    from tvm.tirx.script.builder import ir as B

    return B.Bind(tx.Min(tx.Max(tile, 0), grid.tiles - 1))


def emit_producer_tiles(lowering, kernel: N.Kernel, grid: PersistentGrid, ring: TileRing, body) -> None:
    """The producer's thread of a dynamic schedule: publish each tile id in the ring (then the id
    past the end, which stops the consumers), run `body(base)` for it, draw the next."""
    from tvm import tirx as tx
    from tvm.tirx.script.builder import ir as B

    tile, i, running = _cells(3)
    B.buffer_store(tile, lowering.ex.variables[BLOCK_VAR], [0])
    B.buffer_store(i, 0, [0])
    B.buffer_store(running, 1, [0])
    with B.While(tx.BufferLoad(running, [0]) != 0):
        n = B.Bind(tx.Max(tx.BufferLoad(i, [0]), 0))  # (>= 0 for the simplifier: plain / and %)
        slot = tx.floormod(n, TILE_SLOTS)
        with B.If(n >= TILE_SLOTS):
            with B.Then():  # the consumers have read the slot's previous id
                B.evaluate(
                    _call(lowering, "tc::mbar_wait", ring.empty(slot), tx.floormod(tx.floordiv(n, TILE_SLOTS) + 1, 2))
                )
        t = B.Bind(tx.BufferLoad(tile, [0]))
        B.buffer_store(ring.entries, tx.Cast("uint64", t), [ring.slot(slot)])
        B.evaluate(_call(lowering, "tc::mbar_arrive_one", ring.full(slot)))
        with B.If(t >= grid.tiles):
            with B.Then():
                B.buffer_store(running, 0, [0])
            with B.Else():
                bind_tile(lowering, kernel, _in_range(t, grid))
                body(n * grid.ktiles)
                counter = lowering.param_vars[COUNTER_PARAM]
                nxt = _call(lowering, "tc::persistent_next", counter, grid.tiles, grid.blocks, ret="int32")
                B.buffer_store(tile, nxt, [0])
                B.buffer_store(i, n + 1, [0])


def emit_consumer_tiles(lowering, kernel: N.Kernel, grid: PersistentGrid, ring: TileRing, body) -> None:
    """The consumers of a dynamic schedule: take each tile id from the ring (every warp releases
    the slot once it has read it) and run `body(base)`, until the id past the end."""
    from tvm import tirx as tx
    from tvm.tirx.script.builder import ir as B

    tile, i, running = _cells(3)
    B.buffer_store(i, 0, [0])
    B.buffer_store(running, 1, [0])
    with B.While(tx.BufferLoad(running, [0]) != 0):
        n = B.Bind(tx.Max(tx.BufferLoad(i, [0]), 0))  # (>= 0 for the simplifier: plain / and %)
        slot = tx.floormod(n, TILE_SLOTS)
        B.evaluate(_call(lowering, "tc::mbar_wait", ring.full(slot), tx.floormod(tx.floordiv(n, TILE_SLOTS), 2)))
        # into a register before the release: the producer may write the slot again after it
        B.buffer_store(tile, tx.Cast("int32", tx.BufferLoad(ring.entries, [ring.slot(slot)])), [0])
        B.evaluate(_call(lowering, "tc::mbar_arrive_warp", ring.empty(slot)))
        t = B.Bind(tx.BufferLoad(tile, [0]))
        with B.If(t >= grid.tiles):
            with B.Then():
                B.buffer_store(running, 0, [0])
            with B.Else():
                bind_tile(lowering, kernel, _in_range(t, grid))
                body(n * grid.ktiles)
                B.buffer_store(i, n + 1, [0])
