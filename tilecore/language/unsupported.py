"""TileLang names tilecore deliberately does not provide yet, each with the reason.

`T.alloc_barrier`, `T.tma_copy`, `T.mbarrier_*`, `T.tcgen05_*` and their kin program
Hopper/Blackwell hardware directly (mbarriers, the TMA unit, tensor memory, clusters,
warp specialization). tilecore expresses the same intent portably (`T.copy` and
`T.Pipelined`, which a backend lowers to TMA and mbarriers where it has them), so a
kernel using them gets an UnsupportedFeatureError at its line instead of an
attribute error.
"""
from __future__ import annotations

from ..diagnostics import UnsupportedFeatureError

HOPPER_NAMES = frozenset({
    "alloc_barrier", "alloc_cluster_barrier", "tma_copy", "tma_load", "tma_store",
    "barrier_wait", "barrier_arrive", "alloc_tmem", "wgmma_gemm", "wait_wgmma", "fence_proxy_async",
    "set_max_nreg", "no_set_max_nreg", "ws", "ClusterKernel", "block_rank_in_cluster",
    "create_tma_descriptor", "cp_async_barrier_noinc", "PersistentTileScheduler", "annotate_ws_schedule",
})
HOPPER_PREFIXES = ("mbarrier_", "tcgen05_", "warpgroup_", "tma_", "ptx_", "WS")


def hopper_only(name: str) -> bool:
    """Whether `name` is one of TileLang's Hopper/Blackwell-only primitives."""
    return name in HOPPER_NAMES or name.startswith(HOPPER_PREFIXES)


class UnsupportedPrimitiveError(UnsupportedFeatureError, AttributeError):
    """An unsupported TileLang primitive; also an AttributeError, so hasattr(T, name) is False."""


def unsupported_name_error(name: str) -> UnsupportedPrimitiveError:
    """The error for `T.<name>`."""
    return UnsupportedPrimitiveError(
        "tilecore", f"T.{name}, a Hopper/Blackwell-only TileLang primitive (mbarriers, TMA, tensor "
        "memory, clusters, warp specialization); write the copy with T.copy inside T.Pipelined, "
        "which backends lower to TMA and mbarriers where the hardware has them")
