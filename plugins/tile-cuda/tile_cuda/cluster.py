"""TMA multicast in clusters of two blocks on sm_90a (compile option tma_multicast).

A warp-specialized GEMM block (`warp_specialize.py`) of 128x128 outputs streams a 128-row panel of
A and a 128-column panel of B out of L2 for every k-step. With TileLang's quickstart tiles
(128x128x32, one consumer warpgroup) that traffic is the limit: `ncu` on the H100 measured the
L2 at 85% of its throughput while the tensor cores waited (benchmarks/results/h100-session14).
Two neighbouring blocks of the kernel's block order usually read one operand tile alike (the
same rows of A, or under the default panel order the same columns of B). Launched as one
cluster of two (`__cluster_dims__(2, 1, 1)`), each block loads half of that tile with one TMA
instruction that writes both blocks' shared memory (`.multicast::cluster`), so the tile leaves L2
once for two blocks:

    full barrier:   unchanged: the block's producer announces the whole tile's bytes; half of
                    them come from the other block's TMA, completing on this block's barrier
    empty barrier:  counts the consumer warps of both blocks: a block may overwrite the stage in
                    both blocks only when both have read it, so every consumer warp arrives on
                    the stage's empty barrier in each block of the cluster (`mapa`)
    start:          a cluster barrier after the mbarriers are initialized (the other block's TMA
                    and arrivals may target them from then on)
    end:            the producer waits until every multicast stage is empty (CUTLASS's producer
                    tail): both blocks' consumers have made their last arrival on this block's
                    barriers, and the loads into it were awaited by its own consumers, so it may
                    exit without a cluster barrier (whose release fence held every block's exit)

Which copies (`plan_multicast`, the first failing rule's reason goes to the plan's notes): the
stage copies of a warp-specialized loop that run on TMA, whose source region is the same for the
two blocks of every cluster (its start names only the block indices that the kernel's block
order, `tilecore.lowering.block_order`, gives both blocks alike, checked block by block over the
static grid), and whose boxes split into two row halves on the shared layout's swizzle repeat.
The kernel must have a static grid whose x extent is even, a trip count the two blocks share, and
no persistent tile loop. Option tma_multicast: False (default: on the H100 the cluster build gives
the same bits and, since its handshake is CTA-scope, runs as fast as the build without clusters,
not faster (benchmarks/results/gpu-session17/); session 15's cluster-scope handshake was 3-6x
slower), True.

Pure Python: importing this does not import TVM.
"""

from __future__ import annotations

from itertools import product
from math import prod
from typing import Dict, NamedTuple, Optional, Sequence, Set, Tuple, Union

from tilecore.ir import nodes as N
from tilecore.ir.visitor import substitute, walk
from tilecore.lowering.block_order import kernel_block_order, logical_blocks
from tilecore.passes.simplify import as_int

from .tma import Box, TmaCopy

CLUSTER = 2  # blocks per cluster, along the launch's x axis
CLUSTER_DIMS = f"__cluster_dims__({CLUSTER}, 1, 1)"  # the kernel's attribute
MAX_GRID_CHECK = 1 << 16  # blocks whose indices are checked one by one
SWIZZLE_ROWS = 8  # a swizzled box's pattern repeats every 8 rows: a half box starts on a repeat

CLUSTER_LIB = r"""
#ifndef TILECORE_CLUSTER_LIB
#define TILECORE_CLUSTER_LIB
namespace tc {
__device__ __forceinline__ int cluster_rank() {
  u32 r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return static_cast<int>(r);
}
// every thread of every block of the cluster; orders shared memory (mbarrier init included) across it
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}
// one arrival per warp on the mbarrier at this place in every block of the cluster; CTA-scope release
// as CUTLASS's ClusterBarrier::arrive: .release.cluster compiles to a MEMBAR.ALL.GPU per arrive (with
// it the ring ran 3-6x slower on the H100 in session 15; without it, level with no clusters, session 17)
__device__ __forceinline__ void mbar_arrive_warp_cluster(void* bar) {
  __syncwarp();
  if ((threadIdx.x & 31) == 0) {
    const u32 local = smem_addr(bar);
    for (u32 r = 0; r < TC_CLUSTER_SIZE; ++r) {
      u32 remote;
      asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(local), "r"(r));
      asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" :: "r"(remote) : "memory");
    }
  }
}
// one box into shared memory at dst of every block in `mask`, completing on each one's bar
#define TC_TMA_MULTICAST ".shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
template <int RANK>
__device__ __forceinline__ void tma_load_multicast(void* dst, const void* map, void* bar, int mask, int c0,
                                                   int c1 = 0, int c2 = 0, int c3 = 0, int c4 = 0) {
  const u32 d = smem_addr(dst), b = smem_addr(bar);
  const unsigned long long m = reinterpret_cast<unsigned long long>(map);
  const unsigned short k = static_cast<unsigned short>(mask);
  if constexpr (RANK == 1)
    asm volatile("cp.async.bulk.tensor.1d" TC_TMA_MULTICAST " [%0], [%1, {%4}], [%2], %3;\n"
                 :: "r"(d), "l"(m), "r"(b), "h"(k), "r"(c0) : "memory");
  else if constexpr (RANK == 2)
    asm volatile("cp.async.bulk.tensor.2d" TC_TMA_MULTICAST " [%0], [%1, {%4, %5}], [%2], %3;\n"
                 :: "r"(d), "l"(m), "r"(b), "h"(k), "r"(c0), "r"(c1) : "memory");
  else if constexpr (RANK == 3)
    asm volatile("cp.async.bulk.tensor.3d" TC_TMA_MULTICAST " [%0], [%1, {%4, %5, %6}], [%2], %3;\n"
                 :: "r"(d), "l"(m), "r"(b), "h"(k), "r"(c0), "r"(c1), "r"(c2) : "memory");
  else if constexpr (RANK == 4)
    asm volatile("cp.async.bulk.tensor.4d" TC_TMA_MULTICAST " [%0], [%1, {%4, %5, %6, %7}], [%2], %3;\n"
                 :: "r"(d), "l"(m), "r"(b), "h"(k), "r"(c0), "r"(c1), "r"(c2), "r"(c3) : "memory");
  else
    asm volatile("cp.async.bulk.tensor.5d" TC_TMA_MULTICAST " [%0], [%1, {%4, %5, %6, %7, %8}], [%2], %3;\n"
                 :: "r"(d), "l"(m), "r"(b), "h"(k), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4) : "memory");
}
template <int RANK>
__device__ __forceinline__ void tma_load_multicast(void* dst, const TensorMap& map, void* bar, int mask, int c0,
                                                   int c1 = 0, int c2 = 0, int c3 = 0, int c4 = 0) {
  tma_load_multicast<RANK>(dst, static_cast<const void*>(&map), bar, mask, c0, c1, c2, c3, c4);
}
}  // namespace tc
#endif
""".replace("TC_CLUSTER_SIZE", str(CLUSTER))


class Multicast(NamedTuple):
    """A cluster launch: which stage copies (indices into the loop's copies) each block loads
    half of for both blocks, and the row count of each half box."""

    copies: Tuple[int, ...]
    half_rows: Tuple[int, ...]


def multicast_enabled(target) -> bool:
    """Option tma_multicast, on a target with clusters (sm_90 and newer)."""
    return bool(target.prop("tma_multicast", False)) and target.prop("sm", 0) >= 90


def shared_block_indices(
    kernel: N.Kernel, gemm_block_panel: int, heavy_first_group_blocks: int = 0
) -> Union[Set[str], str]:
    """The names of the kernel's block indices that both blocks of every cluster (launch x indices
    2i and 2i + 1, the other launch indices equal) get alike under the kernel's block order, or
    why clusters of two do not fit the grid."""
    grid = [as_int(g) for g in kernel.grid]
    if any(g is None for g in grid):
        return "the grid is not static"
    dims = [int(g) for g in grid]  # type: ignore[arg-type]
    if dims[0] % CLUSTER:
        return f"the grid's x extent {dims[0]} is odd"
    if prod(dims) > MAX_GRID_CHECK:
        return f"the grid has more than {MAX_GRID_CHECK} blocks to check"
    order = kernel_block_order(kernel, gemm_block_panel, heavy_first_group_blocks)
    alike = [True] * len(dims)
    for x, *rest in product(range(0, dims[0], CLUSTER), *(range(d) for d in dims[1:])):
        first = logical_blocks(order, [x, *rest], dims)
        for r in range(1, CLUSTER):
            other = logical_blocks(order, [x + r, *rest], dims)
            alike = [a and p == q for a, p, q in zip(alike, first, other)]
    return {v.name for v, a in zip(kernel.block_vars, alike) if a}


def plan_multicast(
    kernel: N.Kernel, loop: N.For, copies: Sequence[N.Copy], tma: Sequence[Optional[TmaCopy]], target
) -> Union[Tuple[Multicast, Tuple[Optional[TmaCopy], ...]], str]:
    """(the cluster launch, the stage copies' TMA loads with the multicast ones' boxes halved) for
    the warp-specialized loop `loop` (see the module docstring), or why not."""
    alike = shared_block_indices(kernel, target.gemm_block_panel, target.heavy_first_group_blocks)
    if isinstance(alike, str):
        return alike
    lets: Dict[str, N.Expr] = {}
    for s in kernel.body:
        if s is loop:
            break
        if isinstance(s, N.Let):
            lets[s.var.name] = substitute(s.value, lets)
    blocks = {v.name for v in kernel.block_vars}

    def same_in_both(expr) -> bool:
        names = {n.name for n in walk(substitute(expr, lets)) if isinstance(n, N.Var)}
        return not (names & blocks) - alike

    if not (same_in_both(loop.begin) and same_in_both(loop.extent)):
        return "the trip count differs between the blocks of a cluster"
    chosen, halves, out = [], [], list(tma)
    for i, (c, t) in enumerate(zip(copies, tma)):
        if t is None or not all(same_in_both(st) for st in c.src.starts):
            continue
        half = t.layout.box_rows // CLUSTER
        if t.layout.box_rows % CLUSTER or (t.layout.swizzle_bytes and half % SWIZZLE_ROWS):
            continue
        box = list(t.spec.box)
        box[len(box) - 1 - t.row_axis] = half  # innermost first
        out[i] = t._replace(spec=t.spec._replace(box=tuple(box)), layout=t.layout._replace(box_rows=half))
        chosen.append(i)
        halves.append(half)
    if not chosen:
        return "no TMA stage copy reads the same tile in both blocks of a cluster"
    return Multicast(tuple(chosen), tuple(halves)), tuple(out)


def rank_box(box: Box, rank, half_rows: int, box_cols: int) -> Tuple:
    """(tile row, shared element offset) where block `rank` (an int, or the code generator's
    expression) starts its half of multicast box `box`, whose halves are `half_rows` rows of
    `box_cols` elements (TMA writes a box's rows densely from its offset)."""
    return box.row + rank * half_rows, box.smem_elem + rank * (half_rows * box_cols)


def describe(mc: Multicast, copies: Sequence[N.Copy]) -> str:
    """The plan's note for a cluster launch."""
    names = ", ".join(copies[i].dst.buffer.name for i in mc.copies)
    return f"TMA multicast: clusters of {CLUSTER} blocks share the loads of {names}"
