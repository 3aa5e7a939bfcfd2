"""Per-tile loads by the producer of a persistent warp-specialized kernel (sm_90a, TMA).

In a persistent kernel of the general form (`persistent.py`) the consumers run the kernel body once
per tile. FlashAttention's body starts with `T.copy(Q[...], Q_shared)`: the consumers would load
the next tile's queries themselves after the previous tile's epilogue, and wait for them while
the tensor cores idle. Here the producer warpgroup issues that copy as a TMA load, as FA3's
producer does: for its i-th tile it waits until the consumers are done with the tile's buffer of
tile i - 1 (an "empty" mbarrier every consumer warp arrives on after the pipelined loop, the
buffer's last reader), announces the bytes on the buffer's "full" mbarrier and issues the boxes;
the consumers' copy statement becomes a wait on that mbarrier (parity i % 2). So the load runs
while the consumers finish the previous tile's loop tail and epilogue.

Which copies (`plan_tile_loads`): top-level copies before the warp-specialized loop of a persistent
kernel of the general form whose stage copies are all TMA loads, global -> shared, TMA-eligible
(`tma.tma_copy`), with a source region naming only block indices, dynamic dimensions and the names
the producer recomputes (the loop's lets), into a shared tile that no other statement outside the
loop names and the loop does not write. Everything else keeps its code (the plan's notes say why).

Pure Python planning; lowering imports TVM.
"""

from __future__ import annotations

from typing import List, Tuple

from tilecore.ir import nodes as N
from tilecore.ir.visitor import walk
from tilecore.lowering.simt_barriers import shared_accesses
from tilecore.plugin.rules import LoweringRule

from .tma import PARAM_PREFIX, TmaCopy, tma_copy

TILE_LOAD_CLAIM = "ws_tile_load"  # plan.claims[...]: id(copy) -> its TmaCopy (its map: `tma.tensor_map_meta`)


def plan_tile_loads(ctx, found, known: set) -> Tuple[TmaCopy, ...]:
    """The tile loads of warp-specialized loop `found` (a `warp_specialize.WsLoop`, persistent in
    the general form, every stage copy on TMA); `known`: the names the producer can evaluate.
    Claims each (TILE_LOAD_CLAIM) and adds its tensor map parameter."""
    kernel, plan = ctx.func.kernel, ctx.plan
    at = [id(s) for s in kernel.body].index(id(found.loop))
    written_in_loop = shared_accesses(list(found.loop.body), plan.storage)[1]
    loads: List[TmaCopy] = []
    for s in kernel.body[:at]:
        if not isinstance(s, N.Copy) or plan.storage.get(s.dst.buffer.name) != "smem":
            continue
        name = s.dst.buffer.name
        others = [t for t in kernel.body if t is not s and t is not found.loop and not isinstance(t, N.Alloc)]
        if name in written_in_loop or any(isinstance(n, N.Buffer) and n.name == name for t in others for n in walk(t)):
            continue  # another statement outside the loop uses the tile, or the loop writes it
        if any(isinstance(n, N.Var) and n.name not in known for e in s.src.starts for n in walk(e)):
            plan.notes.append(f"copy into {name} stays with the consumers: its region names a value of theirs")
            continue
        param = f"{PARAM_PREFIX}{len(found.copies) + 1 + len(loads)}"  # after the stage copies' and the store's
        t = tma_copy(s, plan, ctx.target, param)
        if isinstance(t, str):
            plan.notes.append(f"copy into {name} stays with the consumers: {t}")
            continue
        plan.claimed(TILE_LOAD_CLAIM)[id(s)] = t
        plan.extra_params.append(param)
        plan.notes.append(f"copy into {name}: loaded per tile by the producer (TMA, {len(t.layout.boxes)} boxes)")
        loads.append(t)
    return tuple(loads)


def full_barrier(barriers, info, load: int):
    """The mbarrier tile load `load` completes (after the stage mbarriers)."""
    from tvm import tirx as tx

    return tx.address_of(tx.BufferLoad(barriers, [2 * len(info.copies) * info.stages + load]))


def empty_barrier(barriers, info, load: int):
    """The mbarrier every consumer warp arrives on once the tile's loop no longer reads the buffer."""
    from tvm import tirx as tx

    base = 2 * len(info.copies) * info.stages + len(info.tile_loads)
    return tx.address_of(tx.BufferLoad(barriers, [base + load]))


def issue_tile_loads(lowering, info, barriers, ordinal) -> None:
    """The producer's elected thread, before the stage copies of its `ordinal`-th tile: each tile
    load once its buffer is empty (the consumers' arrival after tile ordinal - 1)."""
    from tvm import tirx as tx
    from tvm.tirx.script.builder import ir as B

    from . import warp_specialize as ws

    for i, t in enumerate(info.tile_loads):
        with B.If(ordinal >= 1):
            with B.Then():
                ws._call(lowering, "tc::mbar_wait", empty_barrier(barriers, info, i), tx.floormod(ordinal + 1, 2))
        bar = full_barrier(barriers, info, i)
        ws._call(lowering, "tc::mbar_expect_tx", bar, tx.IntImm("int32", t.bytes))
        ws.issue_tma_boxes(lowering, t, tx.IntImm("int32", 0), bar)


def release_tile_loads(lowering, info, barriers) -> None:
    """After the tile's loop (the loads' last reader; every gemm retired): this warp is done."""
    from . import warp_specialize as ws

    for i in range(len(info.tile_loads)):
        ws._call(lowering, "tc::mbar_arrive_warp", empty_barrier(barriers, info, i))


class TileLoadWait(LoweringRule):
    """The Copy rule of a claimed tile load inside a persistent tile (`lowering.ws_tile_ordinal`):
    wait for the producer's load instead of copying."""

    name = "ws_tile_load_wait"

    def __call__(self, lowering, c):
        from tvm import tirx as tx

        from . import warp_specialize as ws

        load = lowering.claim(TILE_LOAD_CLAIM, c)
        ordinal = getattr(lowering, "ws_tile_ordinal", None)
        barriers = getattr(lowering, "warp_specialized", None)
        if load is None or ordinal is None or barriers is None:
            return NotImplemented
        (info,) = lowering.plan.claims[ws.WarpSpecializedPipeline.name].values()
        index = info.tile_loads.index(load)
        ws._call(lowering, "tc::mbar_wait", full_barrier(barriers, info, index), tx.floormod(ordinal, 2))
        return None
