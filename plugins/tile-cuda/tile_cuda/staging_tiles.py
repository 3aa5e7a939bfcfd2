"""Shared staging tiles of an epilogue in the swizzled layout (bank-conflict-free fragment stores).

FlashAttention's epilogue writes its accumulator through a shared tile:

    T.copy(acc_o, O_shared)                  # MMA fragment -> shared
    T.copy(O_shared, Output[...])            # shared -> global, 16-byte vectors

In an MMA accumulator fragment lane l of a warp holds the column pair (2 * (l % 4), +1) of row
l // 4 (of each 8-row group). In a row-major tile whose rows are a multiple of 128 bytes every one
of those 8 rows starts in the same bank, so each store instruction of the warp touches only 4
banks with 8 addresses each: an 8-way bank conflict (4096 shared-store wavefronts for a 128x128
fp16 tile instead of 256 when conflict-free). In the swizzled layout (`SharedLayout.swizzle`: the
16-byte chunk c of row r stored at chunk c ^ (r % 8)) the 8 rows fall in 8 distinct chunks, and
the core's portable copy stores each column pair as one 4-byte vector (a pair never straddles a
chunk); the shared -> global copy reads whole 16-byte chunks, which the swizzle keeps together.

Which tiles (`staging_tiles`): 2-D shared tiles that the swizzle can lay out, not pinned by
`T.annotate_layout`, whose every use is a copy, written only from register MMA fragments and read
only by copies into global memory. Nothing else reads the tile, so its layout is this rule's to
choose; the copies themselves are lowered by the portable copy (the layout makes the difference).
Option staging_swizzle (default on) turns it off.

Pure Python planning (no TVM).
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List

from tilecore.ir import nodes as N
from tilecore.ir.visitor import walk_stmts
from tilecore.lowering.simt_layout import MmaLayout, SharedLayout
from tilecore.lowering.simt_plan import unswizzled_buffers
from tilecore.passes.liveness import buffers_used_by
from tilecore.plugin.rules import LoweringRule

STAGING_CLAIM = "swizzled_staging"  # plan.claims[...]: id(copy) -> the staging tile's name


def _fills_from_fragment(c: N.Copy, plan, tile: str) -> bool:
    src = c.src.buffer.name
    return c.dst.buffer.name == tile and plan.storage.get(src) == "reg" and isinstance(plan.layout.get(src), MmaLayout)


def _drains_to_global(c: N.Copy, plan, tile: str) -> bool:
    return c.src.buffer.name == tile and c.dst.buffer.name != tile and plan.storage.get(c.dst.buffer.name) == "global"


def staging_tiles(kernel: N.Kernel, plan) -> Dict[str, List[N.Copy]]:
    """The staging tiles of `kernel` under `plan` (see the module docstring) and their copies."""
    uses: Dict[str, List[N.Stmt]] = {}
    for s in walk_stmts(kernel.body):
        for b in buffers_used_by(s):
            uses.setdefault(b.name, []).append(s)
    pinned = unswizzled_buffers(kernel)
    found: Dict[str, List[N.Copy]] = {}
    for name, stmts in uses.items():
        lay = plan.layout.get(name)
        copies = [s for s in stmts if isinstance(s, N.Copy)]
        if (
            plan.storage.get(name) != "smem"
            or not isinstance(lay, SharedLayout)
            or lay.swizzle
            or lay.stages != 1
            or name in pinned
            or not SharedLayout.can_swizzle(lay.shape, lay.elem_bytes)
            or len(copies) != len(stmts)
        ):
            continue
        fills = [c for c in copies if _fills_from_fragment(c, plan, name)]
        drains = [c for c in copies if _drains_to_global(c, plan, name)]
        if fills and len(fills) + len(drains) == len(copies):
            found[name] = copies
    return found


class SwizzledStaging(LoweringRule):
    """Plans the swizzled layout of epilogue staging tiles (`staging_tiles`); the portable copy
    lowers their copies in that layout, so the rule itself emits nothing."""

    name = STAGING_CLAIM

    def plan(self, ctx) -> None:
        """Swizzle each staging tile and claim its copies (option staging_swizzle)."""
        if not ctx.target.prop("staging_swizzle", True):
            return
        plan = ctx.plan
        for name, copies in staging_tiles(ctx.kernel, plan).items():
            plan.layout[name] = dataclasses.replace(plan.layout[name], swizzle=True)
            for c in copies:
                plan.claimed(self.name)[id(c)] = name
            plan.notes.append(f"{name}: staging tile, swizzled (bank-conflict-free fragment stores)")

    def __call__(self, lowering, c):
        return NotImplemented  # the portable copy, in the layout planned above
