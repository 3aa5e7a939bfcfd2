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


# dtypes TileLang has and tilecore's language does not (yet)
UNSUPPORTED_DTYPES = ("float8_e4m3fn", "float8_e5m2", "float8_e4m3", "float8_e8m0fnu", "float4_e2m1fn",
                      "float6_e2m3fn", "float6_e3m2fn", "tfloat32", "int4", "uint4", "uint16", "uint32",
                      "uint64", "int2", "uint2", "int1")


def hopper_only(name: str) -> bool:
    """Whether `name` is one of TileLang's Hopper/Blackwell-only primitives."""
    return name in HOPPER_NAMES or name.startswith(HOPPER_PREFIXES)


class UnsupportedPrimitiveError(UnsupportedFeatureError, AttributeError):
    """An unsupported TileLang primitive; also an AttributeError, so hasattr(T, name) is False."""


def unsupported_name_error(name: str) -> UnsupportedPrimitiveError:
    """The error for `T.<name>`."""
    if name in UNSUPPORTED_DTYPES:
        return UnsupportedPrimitiveError(
            "tilecore", f"the dtype T.{name} (the language's dtypes are float16, bfloat16, float32, "
            "float64, int8, int16, int32, int64, uint8 and bool)")
    return UnsupportedPrimitiveError(
        "tilecore", f"T.{name}, a Hopper/Blackwell-only TileLang primitive (mbarriers, TMA, tensor "
        "memory, clusters, warp specialization); write the copy with T.copy inside T.Pipelined, "
        "which backends lower to TMA and mbarriers where the hardware has them")
