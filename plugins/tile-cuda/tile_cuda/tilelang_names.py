"""The TileLang spellings that belong to NVIDIA hardware, declared for tilecore's TileLang surface.

`tilecore.compat.tilelang` and `tilecore.language` read them from this backend's
`Backend.tilelang` (`tilecore.plugin.TileLangNames`): the core itself names no vendor's
compiler switch or primitive.
"""

from __future__ import annotations

from tilecore.plugin import TileLangNames

from . import toolchain

# TileLang's switches for ptxas, the TMA unit, wgmma and CUDA source dumps: accepted, no effect
# (tile-cuda chooses its own code generation; `options={"wgmma": False}` is tile-cuda's own switch).
PASS_CONFIGS = {
    "TL_PTXAS_REGISTER_USAGE_LEVEL": "tl.ptxas_register_usage_level",
    "TL_ENABLE_PTXAS_VERBOSE_OUTPUT": "tl.enable_ptxas_verbose_output",
    "TL_DISABLE_TMA_LOWER": "tl.disable_tma_lower",
    "TL_DISABLE_WGMMA": "tl.disable_wgmma",
    "CUDA_KERNELS_OUTPUT_DIR": "cuda.kernels_output_dir",
}

# TileLang primitives that program Hopper/Blackwell hardware directly (mbarriers, the TMA unit,
# tensor memory, clusters, warp specialization); "x*" is a prefix.
PRIMITIVES = (
    "alloc_barrier",
    "alloc_cluster_barrier",
    "tma_copy",
    "tma_load",
    "tma_store",
    "barrier_wait",
    "barrier_arrive",
    "alloc_tmem",
    "wgmma_gemm",
    "wait_wgmma",
    "fence_proxy_async",
    "set_max_nreg",
    "no_set_max_nreg",
    "ws",
    "ClusterKernel",
    "block_rank_in_cluster",
    "create_tma_descriptor",
    "cp_async_barrier_noinc",
    "PersistentTileScheduler",
    "annotate_ws_schedule",
    "mbarrier_*",
    "tcgen05_*",
    "warpgroup_*",
    "tma_*",
    "ptx_*",
    "WS*",
)

PRIMITIVE_NOTE = (
    "it programs NVIDIA Hopper/Blackwell hardware directly (mbarriers, TMA, tensor memory, "
    "clusters, warp specialization); write the copy with T.copy inside T.Pipelined, which "
    "tile-cuda lowers to asynchronous copies where the hardware has them"
)


def compute_capability():
    """(major, minor) of GPU 0, for TileLang's `requires_cuda_compute_version*`; None without a GPU."""
    info = toolchain.gpu_info()
    return (info[1], info[2]) if info else None


TILELANG_NAMES = TileLangNames(
    pass_configs=PASS_CONFIGS, primitives=PRIMITIVES, primitive_note=PRIMITIVE_NOTE, device_version=compute_capability
)
