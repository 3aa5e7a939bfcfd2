"""Static memory planning of block-local buffers, checked against the backend's limits.

Guarantees:
* every buffer allocated in the kernel gets a byte offset in its storage class:
  "shared" (shared buffers, offsets aligned to 128 bytes) or "fragment"
  (fragment, local and var buffers, aligned to 16 bytes);
* two buffers whose live ranges overlap (tilecore.passes.liveness) never share
  bytes; buffers that are never live together may reuse the same space;
* each class's total (the highest end offset) is at most the backend's
  `max_shared_memory` / `max_fragment_memory`; otherwise a TileCompileError
  points at the Alloc of the first buffer that does not fit, naming the bytes
  needed, the limit and the backend.

The plan is the better of two greedy first-fit placements (program order and
largest first). With `MemoryPlanPass(multi_buffer=True)` (for backends that
software-pipeline T.Pipelined loops), each stage buffer of a pipelined loop
(tilecore.passes.loops) is planned `num_stages` times over. `ctx.analyses["memory_plan"]` holds the MemoryPlan and
`ctx.analyses["liveness"]` the liveness it used. The function is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from ..diagnostics import TileCompileError
from ..ir import nodes as N
from ..ir.types import itemsize
from . import liveness as _liveness

STORAGE_CLASSES = {"shared": ("shared",), "fragment": ("fragment", "local", "var")}
ALIGNMENT = {"shared": 128, "fragment": 16}
_LIMIT_FIELDS = {"shared": "max_shared_memory", "fragment": "max_fragment_memory"}
_WHAT = {"shared": "shared memory", "fragment": "fragment/local memory"}


def buffer_bytes(buf: N.Buffer) -> int:
    """Bytes a static block-local buffer occupies."""
    n = 1
    for s in buf.shape:
        if not isinstance(s, int):
            raise TypeError(f"block-local buffer {buf.name!r} has a dynamic shape {buf.shape}")
        n *= s
    return n * itemsize(buf.dtype)


def _align(x: int, a: int) -> int:
    return (x + a - 1) // a * a


@dataclass
class StoragePlan:
    """Offsets of the buffers of one storage class ("shared" or "fragment")."""

    storage: str
    alignment: int
    offsets: Dict[str, int] = field(default_factory=dict)
    sizes: Dict[str, int] = field(default_factory=dict)  # bytes, stage copies included
    stages: Dict[str, int] = field(default_factory=dict)  # copies of each buffer (multi-buffering)
    total_bytes: int = 0
    unshared_bytes: int = 0  # what it would take without any reuse
    limit: Optional[int] = None

    def as_dict(self) -> dict:
        return {
            "storage": self.storage,
            "alignment": self.alignment,
            "offsets": dict(self.offsets),
            "sizes": dict(self.sizes),
            "stages": dict(self.stages),
            "total_bytes": self.total_bytes,
            "unshared_bytes": self.unshared_bytes,
            "limit": self.limit,
        }


@dataclass
class MemoryPlan:
    storages: Dict[str, StoragePlan] = field(default_factory=dict)

    def offset(self, name: str) -> Optional[int]:
        for plan in self.storages.values():
            if name in plan.offsets:
                return plan.offsets[name]
        return None

    @property
    def shared_bytes(self) -> int:
        return self.storages["shared"].total_bytes

    @property
    def fragment_bytes(self) -> int:
        return self.storages["fragment"].total_bytes

    def as_dict(self) -> dict:
        return {k: v.as_dict() for k, v in self.storages.items()}


def _first_fit(order: List[str], sizes: Dict[str, int], live: _liveness.Liveness, align: int) -> Dict[str, int]:
    offsets: Dict[str, int] = {}
    for name in order:
        busy = sorted((offsets[o], offsets[o] + sizes[o]) for o in offsets if live.overlaps(name, o))
        candidate = 0
        for lo, hi in busy:
            if candidate + sizes[name] <= lo:
                break
            candidate = max(candidate, _align(hi, align))
        offsets[name] = candidate
    return offsets


def plan_storage(
    storage: str, names: List[str], live: _liveness.Liveness, stages: Optional[Dict[str, int]] = None
) -> StoragePlan:
    """Place `names` (in program order) so that overlapping live ranges never share bytes."""
    align = ALIGNMENT[storage]
    stages = {n: (stages or {}).get(n, 1) for n in names}
    # each stage copy starts aligned, so a multi-buffered buffer spans stages * aligned size
    sizes = {
        n: buffer_bytes(live.buffers[n]) if stages[n] == 1 else stages[n] * _align(buffer_bytes(live.buffers[n]), align)
        for n in names
    }
    plan = StoragePlan(
        storage, align, sizes=sizes, stages=stages, unshared_bytes=sum(_align(s, align) for s in sizes.values())
    )
    best: Optional[Tuple[int, Dict[str, int]]] = None
    for order in (list(names), sorted(names, key=lambda n: (-sizes[n], names.index(n)))):
        offsets = _first_fit(order, sizes, live, align)
        total = max((offsets[n] + sizes[n] for n in names), default=0)
        if best is None or total < best[0]:
            best = (total, offsets)
    plan.total_bytes, offsets = best if best is not None else (0, {})
    plan.offsets = {n: offsets[n] for n in names}
    return plan


def pipeline_stages(func: N.PrimFunc, loops=None) -> Dict[str, int]:
    """Buffer name -> num_stages for the stage buffers of pipelined loops."""
    from . import loops as _loops

    stages: Dict[str, int] = {}
    for info in loops if loops is not None else _loops.analyze(func):
        if info.pipelined:
            for name in info.stage_buffers:
                stages[name] = max(stages.get(name, 1), info.num_stages)
    return stages


def plan_memory(
    func: N.PrimFunc, backend=None, source: str = "", live=None, stages: Optional[Dict[str, int]] = None
) -> MemoryPlan:
    """Plan shared and fragment storage; raise TileCompileError over a backend limit.

    `stages` multiplies buffers that a backend multi-buffers (see pipeline_stages).
    """
    live = live or _liveness.analyze(func)
    result = MemoryPlan()
    caps = getattr(backend, "capabilities", None)
    for storage, scopes in STORAGE_CLASSES.items():
        names = [n for n, b in live.buffers.items() if b.scope in scopes]
        plan = plan_storage(storage, names, live, stages)
        plan.limit = getattr(caps, _LIMIT_FIELDS[storage], None) if caps is not None else None
        result.storages[storage] = plan
        if plan.limit is not None and plan.total_bytes > plan.limit:
            culprit = next(n for n in names if plan.offsets[n] + plan.sizes[n] > plan.limit)
            peers = [n for n in names if live.overlaps(culprit, n)]
            listing = ", ".join(
                f"{n} {plan.sizes[n]} B" + (f" ({plan.stages[n]} stages)" if plan.stages[n] > 1 else "") for n in peers
            )
            raise TileCompileError(
                f"{_WHAT[storage]} over the limit: the kernel needs {plan.total_bytes} bytes but backend "
                f"{backend.name} allows {plan.limit} bytes per block ({listing} live together)",
                live.allocs[culprit].span,
                source or func.source,
            )
    return result


class MemoryPlanPass:
    """Plan block-local memory and check it against the backend's limits."""

    name = "memory_plan"

    def __init__(self, multi_buffer: bool = False):
        self.multi_buffer = multi_buffer

    def __call__(self, func: N.PrimFunc, ctx) -> N.PrimFunc:
        live = _liveness.analyze(func)
        ctx.analyses["liveness"] = live
        stages = pipeline_stages(func, ctx.analyses.get("loops")) if self.multi_buffer else None
        ctx.analyses["memory_plan"] = plan_memory(func, getattr(ctx, "backend", None), ctx.source, live, stages)
        return func


memory_plan = MemoryPlanPass()
